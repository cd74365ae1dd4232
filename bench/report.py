"""Render bench/results/*.json as Markdown."""

from __future__ import annotations

import math
from typing import Any

LABELS = {
    "floor": "floor (bare Starlette)",
    "reference": "reference (a2a-sdk 0.2.16)",
    "ours": "ours (agentic-rag)",
    "ours-1": "ours, 1 worker",
}


def _num(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or not base or math.isnan(value) or math.isnan(base):
        return "n/a"
    return f"{value / base:.2f}x"


def _pct(value: float | None) -> str:
    text = _num(value, 0)
    return text if text == "n/a" else f"{text}%"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    align = ["---" if i == 0 else "---:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _throughput(results: dict[str, Any]) -> list[str]:
    servers = results["throughput"]["servers"]
    if not servers:
        return []
    plan = results["plan"]
    ref = servers.get("reference", {})
    rows = []
    for connections in ("1", "16", "64"):
        for name in results["servers"]:
            row = servers[name][connections]
            ref_row = ref.get(connections) or {}
            rows.append(
                [
                    LABELS[name],
                    connections,
                    _num(row["rps"], 0),
                    _ratio(row["rps"], ref_row.get("rps")),
                    _num(row["p50_ms"]),
                    _num(row["p99_ms"]),
                    _ratio(row["p99_ms"], ref_row.get("p99_ms")),
                    _pct(row["server_cpu_pct"]),
                    _pct(row["tree_cpu_pct"]),
                    _pct(row["loadgen_cpu_pct"]),
                    _pct(row.get("other_cpu_pct")),
                    str(row["errors"]),
                ]
            )
    return [
        "## message/send: throughput and latency",
        "",
        f"wrk, 1 thread, keep-alive connections = concurrency; blocking `message/send` with a "
        f"unique messageId per request, every answer checked (HTTP 200, task `completed`). "
        f"Median of {plan['rounds']} round(s) of {plan['measure_s']} s after a "
        f"{plan['warmup_s']} s warm-up; the servers run side by side, interleaved. "
        "CPU is in % of one core: the server's processes (ours: its workers and their "
        "supervisor), then with the embedded PostgreSQL; `wrk` is the load generator's own "
        "CPU; *other* is the rest of the machine (other users of the shared cores: noise).",
        "",
        *_table(
            [
                "server",
                "conc.",
                "req/s",
                "req/s vs ref",
                "p50 ms",
                "p99 ms",
                "p99 vs ref",
                "server CPU",
                "+children CPU",
                "wrk CPU",
                "other CPU",
                "errors",
            ],
            rows,
        ),
        "",
    ]


def _accumulation(results: dict[str, Any]) -> list[str]:
    acc = results["accumulation"]
    if not acc:
        return []
    plan = results["plan"]
    names = [n for n in results["servers"] if "checkpoints" in acc.get(n, {})]
    if not names:
        return []
    targets = [row["target"] for row in acc[names[0]]["checkpoints"]]
    rows = []
    for i, target in enumerate(targets):
        cells = [f"{target:,}"]
        for name in names:
            row = acc[name]["checkpoints"][i]
            cells.append(f"{_num(row['p50_ms'])} / {_num(row['p99_ms'])}")
        for name in names:
            cells.append(_num(acc[name]["checkpoints"][i]["rss_mib"], 1))
        if "ours" in names:
            cells.append(_num(acc["ours"]["checkpoints"][i]["tree_pss_mib"], 1))
        for name in names:
            fill = acc[name]["checkpoints"][i]["fill_rps"]
            cells.append(_num(fill, 0) if fill else "")
        rows.append(cells)
    header = [
        "tasks stored",
        *(f"{name} p50 / p99 ms" for name in names),
        *(f"{name} RSS MiB" for name in names),
        *(["ours + PostgreSQL PSS MiB"] if "ours" in names else []),
        *(f"{name} fill req/s" for name in names),
    ]
    return [
        "## message/send latency and memory as tasks accumulate",
        "",
        f"Each server fresh and alone. Tasks are filled through the API (wrk, "
        f"{plan['fill_concurrency']} connections); at each checkpoint a probe of "
        f"{plan['probe_requests']} `message/send` at concurrency {plan['probe_concurrency']} "
        f"(median of {plan['edge_probes']} probes at the first and last checkpoint), then RSS of "
        "the server process. The probes add their tasks to the count.",
        "",
        *_table(header, rows),
        "",
    ]


def _streams(results: dict[str, Any]) -> list[str]:
    streams = results["streams"]
    if not streams:
        return []
    plan = results["plan"]
    names = [n for n in results["servers"] if "sequential" in streams.get(n, {})]
    if not names:
        return []
    seq_rows = []
    for name in names:
        s = streams[name]["sequential"]
        seq_rows.append(
            [
                LABELS[name],
                f"{s['ok']}/{s['streams']}",
                _num(s["ttfe_p50_ms"]),
                _num(s["ttfe_p99_ms"]),
                _num(s["final_p50_ms"]),
                _num(s["final_p99_ms"]),
                _pct(s.get("other_cpu_pct")),
            ]
        )
    conc_rows = []
    for name in names:
        for label, what in (("concurrent_echo", "echo"), ("concurrent_held", plan["held_task"])):
            s = streams[name][label]
            conc_rows.append(
                [
                    LABELS[name],
                    f"`{what}`",
                    f"{s['ok']}/{s['streams']}",
                    str(s["peak_open"]),
                    _num(s["total_s"]),
                    _num(s["ttfe_p50_ms"], 0),
                    _num(s["ttfe_p99_ms"], 0),
                    _num(s["final_p99_ms"], 0),
                    _pct(s["server_cpu_pct"]),
                    _pct(s.get("other_cpu_pct")),
                    _num(s["rss_mib_after"], 1),
                ]
            )
    notes = []
    for name in names:
        for label in ("sequential", "concurrent_echo", "concurrent_held"):
            for error in streams[name][label]["errors"]:
                notes.append(f"- {name} {label}: {error}")
    return [
        "## message/stream",
        "",
        f"{plan['sequential_streams']} streams one after the other (plain echo, a fresh connection "
        "each): time from sending the request to the first SSE event and to the final "
        "status-update.",
        "",
        *_table(
            [
                "server",
                "ok",
                "first event p50 ms",
                "first event p99 ms",
                "final p50 ms",
                "final p99 ms",
                "other CPU",
            ],
            seq_rows,
        ),
        "",
        f"{plan['concurrent_streams']} streams at once: all connections opened first, then every "
        f"request sent. `echo` completes at once; `{plan['held_task']}` holds each stream open "
        "(N working updates D ms apart, then the artifact). *peak open* is the most streams "
        "between response headers and final event at the same moment; *total* runs from the "
        "first request to the last final event.",
        "",
        *_table(
            [
                "server",
                "text",
                "ok",
                "peak open",
                "total s",
                "first event p50 ms",
                "first event p99 ms",
                "final p99 ms",
                "server CPU",
                "other CPU",
                "RSS after MiB",
            ],
            conc_rows,
        ),
        "",
        *([*notes, ""] if notes else []),
    ]


def _targets(results: dict[str, Any]) -> list[str]:
    targets = results.get("targets") or []
    if not targets:
        return []
    rows = [[t["target"], t["value"], "PASS" if t["pass"] else "FAIL"] for t in targets]
    note = (
        " (quick run: smaller counts than the targets name; indicative only)"
        if results["plan"]["mode"] == "quick"
        else ""
    )
    return [f"## Targets{note}", "", *_table(["target", "measured", "result"], rows), ""]


def _get(data: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _summary(results: dict[str, Any]) -> list[str]:
    """The headline numbers of each server side by side, with ours / reference."""
    names = results["servers"]
    plan = results["plan"]
    tput = results["throughput"]["servers"]
    acc = results["accumulation"]
    streams = results["streams"]

    def first_last(name: str, key: str) -> tuple[Any, Any]:
        rows = _get(acc, name, "checkpoints") or []
        return (rows[0][key], rows[-1][key]) if rows else (None, None)

    metrics: list[tuple[str, Any, int, bool]] = []  # label, getter, digits, higher is better
    for c in ("1", "16", "64"):
        metrics.append((f"message/send req/s, concurrency {c}", ("tput", c, "rps"), 0, True))
    for c in ("1", "16", "64"):
        metrics.append((f"message/send p99 ms, concurrency {c}", ("tput", c, "p99_ms"), 2, False))
    first, last = plan["checkpoints"][0], plan["checkpoints"][-1]
    metrics += [
        (f"p99 ms after {first:,} tasks", ("acc", "p99_ms", 0), 2, False),
        (f"p99 ms after {last:,} tasks", ("acc", "p99_ms", 1), 2, False),
        (f"server RSS MiB after {last:,} tasks", ("acc", "rss_mib", 1), 1, False),
        ("stream: first event p50 ms", ("streams", "sequential", "ttfe_p50_ms"), 2, False),
        ("stream: final event p50 ms", ("streams", "sequential", "final_p50_ms"), 2, False),
        ("stream: final event p99 ms", ("streams", "sequential", "final_p99_ms"), 2, False),
        (
            f"{plan['concurrent_streams']} streams `{plan['held_task']}`: total s",
            ("streams", "concurrent_held", "total_s"),
            2,
            False,
        ),
    ]

    def value(name: str, path: tuple[Any, ...]) -> Any:
        if path[0] == "tput":
            return _get(tput, name, *path[1:])
        if path[0] == "acc":
            return first_last(name, path[1])[path[2]]
        return _get(streams, name, *path[1:])

    rows = []
    for label, path, digits, higher_better in metrics:
        values = {name: value(name, path) for name in names}
        ours, ref = values.get("ours"), values.get("reference")
        ratio = _ratio(ours, ref)
        better = ""
        if ratio != "n/a" and ours is not None and ref is not None and abs(ours / ref - 1) >= 0.01:
            better = " (better)" if (ours > ref) == higher_better else ""
        rows.append([label, *(_num(values[n], digits) for n in names), ratio + better])
    header = ["metric", *(LABELS[n] for n in names), "ours / reference"]
    return ["## Summary", "", *_table(header, rows), ""]


def _errors(results: dict[str, Any]) -> list[str]:
    lines = [
        f"- {phase}: {name}: {error}"
        for phase, errors in (
            ("throughput", results["throughput"].get("errors", {})),
            (
                "accumulation",
                {n: a["error"] for n, a in results["accumulation"].items() if "error" in a},
            ),
        )
        for name, error in errors.items()
    ]
    return ["## Errors", "", *lines, ""] if lines else []


def render_markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    ref = meta.get("reference_packages", {})
    proj = meta.get("project_packages", {})
    lines = [
        f"# A2A server benchmark ({results['plan']['mode']} run)",
        "",
        f"- date: {meta['date']}, git `{meta['git']}`, run took {meta.get('duration_s', 0):.0f} s",
        f"- machine: {meta['cpus']} x {meta['cpu_model']}, {meta['memory_gib']} GiB, "
        f"{meta['os']}; load average {meta['loadavg_start']} at start, "
        f"{meta.get('loadavg_end')} at end",
        f"- Python {meta['python']}; ours and floor: "
        + ", ".join(f"{k} {v}" for k, v in proj.items())
        + "; reference: "
        + ", ".join(f"{k} {v}" for k, v in ref.items()),
        f"- load generator: {meta['wrk']} (message/send), asyncio SSE client (message/stream)",
        f"- ours: `run-sut --workers {meta.get('ours_workers', 1)}` (worker processes on one "
        "embedded PostgreSQL); ours, 1 worker: `run-sut --workers 1`, in the throughput phase only",
        "- server start-up (throughput phase): "
        + ", ".join(f"{k} {v} s" for k, v in results["throughput"].get("startup_s", {}).items()),
        "",
        *_errors(results),
        *_targets(results),
        *_summary(results),
        *_throughput(results),
        *_accumulation(results),
        *_streams(results),
        "See bench/README.md for what is measured and how to read it.",
        "",
    ]
    return "\n".join(lines)

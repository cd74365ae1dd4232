"""CPU per A2A 1.0 SendMessage: ours in one worker beside the a2a-sdk 1.x reference, in one run.

    .venv/bin/python bench/send_v1.py --pin 0 --rounds 3

The 1.0 twin of bench/send_cpu.py (read its docstring for the method): each server answers
blocking `SendMessage` calls over JSON-RPC with `A2A-Version: 1.0` (bench/lua/send_v1.lua) under
wrk at each concurrency; the figure compared is the CPU its Python process spends per answer,
turned into the rate one core would give (1000 / ms per request). Ours is
`conformance/run-sut` at `--revision` (HEAD by default; `work`: the work tree) with one worker
and its embedded PostgreSQL (durable tasks, a journal); the reference is
bench/reference/server_v1.py (the official SDK's in-memory task store).
Writes bench/results/NAME.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import subprocess
from typing import Any

import orjson
from procs import Server, free_port
from run import (
    BENCH,
    PROJECT_PYTHON,
    ROOT,
    WORK,
    ensure_wrk,
    log,
    running,
    write_results,
)
from send_cpu import export_revision, measure, ours_at, snapshot_work_tree, summarise

LUA_SEND_V1 = BENCH / "lua" / "send_v1.lua"
REFERENCE = "reference a2a-sdk 1.x"
OURS = "ours-1"
READY_V1 = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "SendMessage",
        "params": {
            "message": {"role": "ROLE_USER", "parts": [{"text": "ready?"}], "messageId": "ready"}
        },
    }
)


def reference_v1(tag: str) -> Server:
    port = free_port()
    command = [str(PROJECT_PYTHON), str(BENCH / "reference" / "server_v1.py"), "--port", str(port)]
    return Server(
        name=REFERENCE, command=command, port=port, log_path=WORK / "logs" / f"ref-v1-{tag}.log",
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, ready_body=READY_V1,
        ready_headers=b"A2A-Version: 1.0\r\n", ready_marker=b'"TASK_STATE_COMPLETED"',
    )  # fmt: skip


def render(report: dict[str, Any]) -> str:
    lines = [
        "# A2A 1.0 SendMessage: CPU per request, ours (1 worker) beside the a2a-sdk 1.x reference",
        "",
        f"- date: {report['date']}, ours at `{report['head']}`, "
        f"reference a2a-sdk {report['sdk_version']}",
        f"- load average at start {report['load_start']}, at end {report['load_end']} "
        "(2 cores, shared: req/s and p99 follow the neighbours; CPU per request is the figure "
        "to compare)",
        f"- {report['rounds']} rounds of {report['seconds']} s after a 2 s warm-up per server "
        "and concurrency, servers fresh each round, interleaved; medians",
        "- each server's process pinned to CPU "
        + ("(none)" if report.get("pinned_to_cpu") is None else str(report["pinned_to_cpu"])),
        "- ours keeps every task durable in its embedded PostgreSQL (CPU apart, not counted "
        "in per-core req/s); the reference keeps tasks in memory",
        "",
        "| server | c | req/s | p50 ms | p99 ms | server CPU ms/req | PostgreSQL CPU ms/req "
        "| per-core req/s | per-core / reference | other CPU % | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c, by_server in report["summary"].items():
        ref = by_server[REFERENCE]["per_core_rps"]
        for name, s in by_server.items():
            lines.append(
                f"| {name} | {c} | {s['rps']:.0f} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} "
                f"| {s['server_cpu_ms']:.3f} | {s['postgres_cpu_ms']:.3f} "
                f"| {s['per_core_rps']:.0f} | {s['per_core_rps'] / ref:.2f}x "
                f"| {s['other_cpu_pct']:.0f} | {s['errors']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--output", default="send-v1")
    parser.add_argument("--pin", type=int, help="pin each server's process to this CPU")
    parser.add_argument(
        "--revision", default="HEAD", help="ours at this revision, or 'work' for the work tree"
    )
    args = parser.parse_args()
    ensure_wrk()
    concurrency = [int(c) for c in args.concurrency.split(",")]
    tree = snapshot_work_tree() if args.revision == "work" else export_revision(args.revision)
    load_start = [round(x, 2) for x in os.getloadavg()]
    raw: dict[int, dict[str, list[dict[str, Any]]]] = {c: {} for c in concurrency}
    for round_no in range(args.rounds):
        servers = [reference_v1(f"v1-{round_no}"), ours_at(tree, OURS, f"v1-{round_no}")]
        with running(servers) as up:
            if args.pin is not None:
                for server in up:
                    assert server.server_pid is not None
                    os.sched_setaffinity(server.server_pid, {args.pin})
            order = up[round_no % len(up) :] + up[: round_no % len(up)]
            for c in concurrency:
                for server in order:
                    measure(server, c, 2.0, script=LUA_SEND_V1)  # warm-up
                    m = measure(server, c, args.seconds, script=LUA_SEND_V1)
                    raw[c].setdefault(server.name, []).append(m)
                    log(
                        f"round {round_no + 1} {server.name:22} c={c:<3} {m['rps']:6.0f} req/s "
                        f"p99 {m['p99_ms']:7.2f} ms  cpu {m['server_cpu_ms']:.3f} ms/req "
                        f"(+pg {m['postgres_cpu_ms']:.3f})  errors {m['errors']}"
                    )
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if args.revision != "work":
        head = tree.name.removeprefix("rev-")
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "head": head,
        "sdk_version": importlib.metadata.version("a2a-sdk"),
        "rounds": args.rounds,
        "seconds": args.seconds,
        "pinned_to_cpu": args.pin,
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "summary": {
            str(c): {n: summarise(raw[c][n]) for n in (REFERENCE, OURS)} for c in concurrency
        },
        "raw": {str(c): raw[c] for c in concurrency},
    }
    write_results(args.output, report, render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

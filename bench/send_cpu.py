"""CPU per durable message/send: ours in one worker at two revisions, and the reference, in one run.

    .venv/bin/python bench/send_cpu.py                      # the work tree against HEAD
    .venv/bin/python bench/send_cpu.py --before fefc152 --rounds 3 --seconds 8

On a shared machine req/s follows the neighbours' load; the CPU a server spends per request
follows its code. So this measures, for each server under wrk at each concurrency, the CPU its
process used divided by the answers it gave (ours: the uvicorn worker, and apart from it the
embedded PostgreSQL), and the rate one core would give at that cost (1000 / ms per request).
`--before REV` runs that revision's `src/` and `conformance/` (exported with `git archive`) beside
the work tree, so a change is measured against its baseline in the same run. Servers are started
fresh each round and interleaved (the order rotates). `--pin CPU` pins each server's process
(ours: the worker, not its PostgreSQL) to that CPU once it is up, as on a machine where each
server has a core of its own. Writes bench/results/NAME.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from loadgen import run_wrk
from procs import Server, free_port
from run import (
    PROJECT_PYTHON,
    RESULTS,
    ROOT,
    WORK,
    _data_dirs,
    ensure_reference_venv,
    ensure_wrk,
    log,
    make_server,
    running,
    write_results,
)


def export_revision(revision: str) -> Path:
    """`src/` and `conformance/` of `revision`, in bench/.work/rev-<sha> (kept between runs)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=ROOT, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    tree = WORK / f"rev-{sha}"
    if not tree.exists():
        with tempfile.TemporaryFile() as archive:
            subprocess.run(
                ["git", "archive", sha, "src", "conformance"], cwd=ROOT, check=True,
                stdout=archive,
            )  # fmt: skip
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(tree, filter="data")
    return tree


def snapshot_work_tree() -> Path:
    """`src/` and `conformance/` of the work tree as they are now, so that edits made while the
    benchmark runs do not reach its later rounds."""
    tree = WORK / "work-tree"
    shutil.rmtree(tree, ignore_errors=True)
    for part in ("src", "conformance"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def overlaid(revision: str, files: list[str]) -> Path:
    """`revision`'s `src/` and `conformance/` with `files` copied over from the work tree."""
    tree = WORK / "overlay-tree"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(export_revision(revision), tree)
    for file in files:
        shutil.copy2(ROOT / file, tree / file)
    return tree


def ours_at(tree: Path, name: str, tag: str) -> Server:
    """ours in one worker, running the code of `tree` (PYTHONPATH comes before the editable
    install of the work tree)."""
    port = free_port()
    data_dir = WORK / "data" / f"{name}-{tag}"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _data_dirs.append(data_dir)
    command = [
        str(PROJECT_PYTHON), str(tree / "conformance" / "run-sut"), "--port", str(port),
        "--data-dir", str(data_dir), "--workers", "1",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(tree / "src")}
    server = Server(
        name=name, command=command, port=port, log_path=WORK / "logs" / f"{name}.log",
        cwd=ROOT, env=env,
    )  # fmt: skip
    server.postgres_dir = (data_dir / "postgres").resolve()
    return server


def commits(server: Server) -> int | None:
    """Transactions committed so far in ours' embedded PostgreSQL (None for the reference).
    PostgreSQL publishes its statistics at most once a second, hence the wait."""
    if server.postgres_dir is None:
        return None
    time.sleep(1.1)
    socket_dir = (server.postgres_dir / "postmaster.pid").read_text().splitlines()[4].strip()
    query = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    out = subprocess.run(
        ["psql", "-U", "postgres", "-d", "postgres", "-Atc", query],
        env={**os.environ, "PGHOST": socket_dir}, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return int(out.strip())


def measure(server: Server, connections: int, seconds: float, **wrk: Any) -> dict[str, Any]:
    """One wrk run's figures; `wrk` goes to run_wrk (another script: bench/send_v1.py)."""
    commits_before = commits(server)
    before = server.cpu_snapshot()
    result = run_wrk(server, connections, seconds, **wrk)
    after = server.cpu_snapshot()
    commits_after = commits(server)
    own = server.server_pids()
    used = {pid: t - before.per_pid.get(pid, 0.0) for pid, t in after.per_pid.items()}
    server_s = sum(v for pid, v in used.items() if pid in own)
    rest_s = sum(v for pid, v in used.items() if pid not in own)
    answers = max(result.requests, 1)
    return {
        "rps": result.rps,
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "errors": result.error_count,
        "requests": result.requests,
        "server_cpu_ms": 1000 * server_s / answers,
        "postgres_cpu_ms": 1000 * rest_s / answers,
        "commits_per_request": (
            (commits_after - commits_before - 1) / answers  # minus the query's own
            if commits_after is not None and commits_before is not None
            else 0.0
        ),
        "server_cpu_pct": result.server_cpu_pct,
        "other_cpu_pct": result.other_cpu_pct,
    }


def summarise(rounds: list[dict[str, Any]]) -> dict[str, float]:
    keys = (
        "rps", "p50_ms", "p99_ms", "server_cpu_ms", "postgres_cpu_ms", "commits_per_request",
        "other_cpu_pct",
    )  # fmt: skip
    summary = {k: statistics.median(r[k] for r in rounds) for k in keys}
    summary["per_core_rps"] = 1000 / summary["server_cpu_ms"]
    summary["errors"] = sum(r["errors"] for r in rounds)
    return summary


def render(report: dict[str, Any]) -> str:
    lines = [
        "# message/send: CPU per request, ours (1 worker) before and after, beside the reference",
        "",
        f"- date: {report['date']}, work tree on `{report['head']}`, before = `{report['before']}`",
        f"- load average at start {report['load_start']}, at end {report['load_end']} "
        "(2 cores, shared with other sessions' work: req/s and p99 are depressed and noisy; "
        "CPU per request is the figure to compare)",
        f"- {report['rounds']} rounds of {report['seconds']} s after a 2 s warm-up per server "
        "and concurrency, servers fresh each round, interleaved; medians",
        "- each server's process pinned to CPU "
        + ("(none)" if report.get("pinned_to_cpu") is None else str(report["pinned_to_cpu"])),
        "- *per-core req/s* = 1000 / (server process CPU ms per request): what the server's one "
        "Python process would answer on a core of its own; ours' PostgreSQL CPU is apart; "
        "*commits/req*: transactions ours' PostgreSQL committed per answer (writes, and the "
        "pool's reset of a connection it takes back, one per use)",
        "",
        "| server | c | req/s | p50 ms | p99 ms | server CPU ms/req | PostgreSQL CPU ms/req "
        "| commits/req | per-core req/s | per-core / reference | other CPU % | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c, by_server in report["summary"].items():
        ref = by_server["reference"]["per_core_rps"]
        for name, s in by_server.items():
            lines.append(
                f"| {name} | {c} | {s['rps']:.0f} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} "
                f"| {s['server_cpu_ms']:.3f} | {s['postgres_cpu_ms']:.3f} "
                f"| {s['commits_per_request']:.2f} "
                f"| {s['per_core_rps']:.0f} | {s['per_core_rps'] / ref:.2f}x "
                f"| {s['other_cpu_pct']:.0f} | {s['errors']} |"
            )
    return "\n".join(lines) + "\n"


def rerender(name: str) -> None:
    """Write results/NAME.md again from results/NAME.json."""
    report = orjson.loads((RESULTS / f"{name}.json").read_bytes())
    (RESULTS / f"{name}.md").write_text(render(report))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="HEAD", help="the baseline revision (default HEAD)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--output", default="send-cpu")
    parser.add_argument("--pin", type=int, help="pin each server's process to this CPU")
    parser.add_argument("--render", action="store_true", help="only rewrite OUTPUT.md from .json")
    args = parser.parse_args()
    if args.render:
        rerender(args.output)
        return 0
    ensure_wrk()
    ensure_reference_venv()
    concurrency = [int(c) for c in args.concurrency.split(",")]
    tree = export_revision(args.before)
    work_tree = snapshot_work_tree()
    load_start = [round(x, 2) for x in os.getloadavg()]
    raw: dict[int, dict[str, list[dict[str, Any]]]] = {c: {} for c in concurrency}
    for round_no in range(args.rounds):
        servers = [
            make_server("reference", f"cpu-{round_no}"),
            ours_at(tree, "ours-1 before", f"cpu-{round_no}"),
            ours_at(work_tree, "ours-1 after", f"cpu-{round_no}"),
        ]
        with running(servers) as up:
            if args.pin is not None:
                for server in up:
                    assert server.server_pid is not None
                    os.sched_setaffinity(server.server_pid, {args.pin})
            order = up[round_no % len(up) :] + up[: round_no % len(up)]
            for c in concurrency:
                for server in order:
                    run_wrk(server, c, 2.0)
                    m = measure(server, c, args.seconds)
                    raw[c].setdefault(server.name, []).append(m)
                    log(
                        f"round {round_no + 1} {server.name:14} c={c:<3} {m['rps']:6.0f} req/s "
                        f"p99 {m['p99_ms']:7.2f} ms  cpu {m['server_cpu_ms']:.3f} ms/req "
                        f"(+pg {m['postgres_cpu_ms']:.3f})  {m['commits_per_request']:.2f} "
                        f"commits/req  other {m['other_cpu_pct']:.0f}%"
                    )
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    names = ("reference", "ours-1 before", "ours-1 after")
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "head": head,
        "before": tree.name.removeprefix("rev-"),
        "rounds": args.rounds,
        "seconds": args.seconds,
        "pinned_to_cpu": args.pin,
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "summary": {str(c): {n: summarise(raw[c][n]) for n in names} for c in concurrency},
        "raw": {str(c): raw[c] for c in concurrency},
    }
    write_results(args.output, report, render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

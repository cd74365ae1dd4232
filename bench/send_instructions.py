"""Instructions and SQL statements per durable message/send: ours at two revisions, counted.

    .venv/bin/python bench/send_instructions.py --before ca972e9
    .venv/bin/python bench/send_instructions.py --before ca972e9 --sends 400 --concurrency 1,16

On a machine shared with other work, CPU time per request moves with the neighbours' load (the
same server measured 0.41 to 0.65 ms per send between rounds). The number of instructions a
process executes does not: this runs ours (one worker, `conformance/run-sut`) under valgrind's
callgrind with instrumentation off while it starts and warms up, switches it on, zeroes the
counters, sends exactly N blocking `message/send` requests from C connections, and dumps the
count. The embedded PostgreSQL runs natively (valgrind does not follow exec); with
`log_statement = all` switched on for the measured sends, its log gives the statements executed
per send. An idle stretch of the same length is counted too, so timers that fire while valgrind
slows the server down can be told apart from the work of a send.

Writes bench/results/NAME.{json,md}; the callgrind dumps stay in bench/.work/callgrind/ for
`callgrind_annotate`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from procs import Server, free_port
from run import PROJECT_PYTHON, ROOT, WORK, _data_dirs, log, write_results
from send_cpu import export_revision, overlaid, snapshot_work_tree

DUMPS = WORK / "callgrind"


def ours_under_callgrind(tree: Path, name: str) -> Server:
    port = free_port()
    data_dir = WORK / "data" / f"callgrind-{name}"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _data_dirs.append(data_dir)
    DUMPS.mkdir(parents=True, exist_ok=True)
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no",
        f"--callgrind-out-file={DUMPS / f'{name}.%p'}",
        str(PROJECT_PYTHON), str(tree / "conformance" / "run-sut"), "--port", str(port),
        "--data-dir", str(data_dir), "--workers", "1",
    ]  # fmt: skip
    env = {
        **os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(tree / "src"),
        "PYTHONHASHSEED": "0",
    }  # fmt: skip
    server = Server(
        name=name, command=command, port=port, log_path=WORK / "logs" / f"callgrind-{name}.log",
        cwd=ROOT, env=env,
    )  # fmt: skip
    server.postgres_dir = (data_dir / "postgres").resolve()
    return server


def _body(run: str, n: int) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "parts": [{"kind": "text", "text": f"bench {run}-{n}"}],
                    "messageId": f"{run}-{n}",
                    "kind": "message",
                },
                "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": True},
            },
        }
    )


async def _connection(port: int, bodies: list[bytes], failures: list[bytes]) -> None:
    """Send `bodies` one after the other on one keep-alive connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for body in bodies:
            writer.write(
                b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head)[1])  # type: ignore[index]
            answer = await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200") or b'"completed"' not in answer:
                failures.append(head + answer[:300])
    finally:
        writer.close()


def send(port: int, sends: int, concurrency: int) -> None:
    """Exactly `sends` answered message/send requests over `concurrency` connections."""
    run = uuid.uuid4().hex[:8]
    bodies = [_body(run, n) for n in range(sends)]
    failures: list[bytes] = []

    async def all_connections() -> None:
        await asyncio.gather(
            *(_connection(port, bodies[i::concurrency], failures) for i in range(concurrency))
        )

    asyncio.run(all_connections())
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed, the first: {failures[0]!r}")


def callgrind_control(pid: int, *options: str) -> None:
    subprocess.run(["callgrind_control", *options, str(pid)], check=True, capture_output=True)


def dumped_instructions(name: str, pid: int, before: set[Path]) -> tuple[int, Path]:
    """The instruction count (Ir) of the dump callgrind wrote since `before` was listed."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = set(DUMPS.glob(f"{name}.{pid}.*")) - before
        for dump in new:
            text = dump.read_text(errors="replace")
            match = re.search(r"^(?:summary|totals): *(\d+)", text, re.MULTILINE)
            if match:
                return int(match[1]), dump
        time.sleep(0.5)
    raise RuntimeError(f"no callgrind dump of {name} ({pid})")


def psql(server: Server, sql: str) -> str:
    assert server.postgres_dir is not None
    socket_dir = (server.postgres_dir / "postmaster.pid").read_text().splitlines()[4].strip()
    return subprocess.run(
        ["psql", "-U", "postgres", "-d", "postgres", "-Atc", sql],
        env={**os.environ, "PGHOST": socket_dir}, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def statements_between(server: Server, start: str, end: str) -> dict[str, int]:
    """Statements the embedded PostgreSQL logged between two marker queries, by text."""
    assert server.postgres_dir is not None
    text = (server.postgres_dir / "log").read_text(errors="replace")
    inside = text.split(start, 1)[1].split(end, 1)[0]
    counts: dict[str, int] = {}
    for match in re.finditer(
        r"LOG:  (?:execute [^:]*|statement): (.*?)(?=\n\S|\Z)", inside, re.DOTALL
    ):
        statement = " ".join(match[1].split())[:160]
        counts[statement] = counts.get(statement, 0) + 1
    return counts


def measure(server: Server, sends: int, concurrency: int, warmup: int) -> dict[str, Any]:
    assert server.server_pid is not None
    pid = server.server_pid
    send(server.port, warmup, concurrency)
    psql(server, "ALTER SYSTEM SET log_statement = 'all'; ")
    psql(server, "SELECT pg_reload_conf()")
    callgrind_control(pid, "-i", "on")
    time.sleep(1)
    before = set(DUMPS.glob(f"{server.name}.{pid}.*"))
    marker = uuid.uuid4().hex
    callgrind_control(pid, "-z")
    psql(server, f"SELECT 'start-{marker}'")
    started = time.monotonic()
    send(server.port, sends, concurrency)
    seconds = time.monotonic() - started
    psql(server, f"SELECT 'end-{marker}'")
    callgrind_control(pid, "-d")
    total, dump = dumped_instructions(server.name, pid, before)
    # The same stretch of time with nothing sent: what timers cost under valgrind.
    before = set(DUMPS.glob(f"{server.name}.{pid}.*"))
    callgrind_control(pid, "-z")
    time.sleep(seconds)
    callgrind_control(pid, "-d")
    idle, _ = dumped_instructions(server.name, pid, before)
    callgrind_control(pid, "-i", "off")
    psql(server, "ALTER SYSTEM RESET log_statement")
    psql(server, "SELECT pg_reload_conf()")
    statements = statements_between(server, f"start-{marker}", f"end-{marker}")
    statements = {k: v for k, v in statements.items() if marker not in k}
    return {
        "sends": sends,
        "concurrency": concurrency,
        "seconds": seconds,
        "instructions": total,
        "idle_instructions": idle,
        "instructions_per_send": (total - idle) / sends,
        "statements_per_send": sum(statements.values()) / sends,
        "statements": dict(sorted(statements.items(), key=lambda kv: -kv[1])),
        "dump": str(dump.relative_to(ROOT)),
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        "# message/send: instructions and SQL statements per send, ours (1 worker) at two trees",
        "",
        f"- date: {report['date']}, HEAD `{report['head']}`, before = `{report['before']}`, "
        f"after = {report['after']}",
        f"- callgrind instruction counts (Ir) of the worker process for {report['sends']} "
        f"blocking sends after {report['warmup']} unmeasured, minus an idle stretch of the same "
        "length; statements from the embedded PostgreSQL's log (`log_statement = all`)",
        "",
        "| tree | c | instructions per send | idle share | SQL statements per send |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for m in report["measurements"]:
        lines.append(
            f"| {m['tree']} | {m['concurrency']} | {m['instructions_per_send'] / 1e6:.3f} M "
            f"| {m['idle_instructions'] / max(m['instructions'], 1):.1%} "
            f"| {m['statements_per_send']:.2f} |"
        )
    for m in report["measurements"]:
        lines += ["", f"## Statements, {m['tree']} at c={m['concurrency']}", ""]
        lines += [f"- {n / m['sends']:.2f} per send: `{s}`" for s, n in m["statements"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="HEAD", help="the baseline revision (default HEAD)")
    parser.add_argument("--sends", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--concurrency", default="16")
    parser.add_argument(
        "--after", help="measure this revision instead of the work tree (other sessions' "
        "unfinished edits in the work tree can keep it from starting)",
    )  # fmt: skip
    parser.add_argument(
        "--overlay", nargs="*", default=[],
        help="with --after: these files of the work tree replace the revision's (one's own edits)",
    )  # fmt: skip
    parser.add_argument("--only", choices=("before", "after"), help="measure one tree only")
    parser.add_argument("--output", default="send-cpu-instructions")
    args = parser.parse_args()
    after = snapshot_work_tree() if args.after is None else overlaid(args.after, args.overlay)
    trees = {"before": export_revision(args.before), "after": after}
    if args.only:
        trees = {args.only: trees[args.only]}
    measurements = []
    for label, tree in trees.items():
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            server = ours_under_callgrind(tree, f"{label}-c{concurrency}")
            log(f"starting {server.name} under callgrind")
            try:
                server.start(timeout=900)
                m = measure(server, args.sends, concurrency, args.warmup)
            finally:
                server.stop()
                for data_dir in _data_dirs:
                    shutil.rmtree(data_dir, ignore_errors=True)
                _data_dirs.clear()
            m["tree"] = f"{label} ({tree.name.removeprefix('rev-')})"
            log(
                f"{label} c={concurrency}: {m['instructions_per_send'] / 1e6:.3f} M instructions, "
                f"{m['statements_per_send']:.2f} statements per send "
                f"(idle {m['idle_instructions'] / 1e6:.1f} M of {m['instructions'] / 1e6:.1f} M)"
            )
            measurements.append(m)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "head": head,
        "before": args.before,
        "after": "work tree" if args.after is None else f"{args.after} + {args.overlay}",
        "sends": args.sends,
        "warmup": args.warmup,
        "measurements": measurements,
    }
    write_results(args.output, report, render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

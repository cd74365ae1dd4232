"""The first message/send after run-sut is ready, and the 0.2.5 kit's long-running send.

    .venv/bin/python bench/sut_first_send.py --before main --rounds 3

Issue 28, point 2: the official 0.2.5 kit's `test_tasks_resubscribe` got no answer to its
`message/send` within its client's 10 s. Each round starts `conformance/run-sut` (one worker,
a fresh embedded PostgreSQL) at `--before` and at the work tree, waits until it answers a
JSON-RPC call that runs no skill (tasks/get of an unknown task), then times, one after the
other on fresh connections: the first `message/send` of plain text, a second one, and the
kit's send (`messageId` starting `test-resubscribe-message-id`, blocking). The ratios compare
each figure with one of the same run: the first send with the second (a model or anything else
loaded on the first request shows as a ratio well above 1) and the kit's send with the kit's
10 s timeout (at 1 or above, the kit gives up). Writes bench/results/NAME.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from procs import Server, _post
from run import log, running, write_results
from send_cpu import export_revision, ours_at, snapshot_work_tree

KIT_0_2_5_TIMEOUT_S = 10.0  # its tck/sut_client.py: httpx timeout=10 on every request
READY_BODY = orjson.dumps(
    {"jsonrpc": "2.0", "id": 0, "method": "tasks/get", "params": {"id": "bench-no-such-task"}}
)


def _send(text: str, message_id: str) -> bytes:
    message = {"kind": "message", "messageId": message_id, "role": "user"}
    params = {"message": {**message, "parts": [{"kind": "text", "text": text}]}}
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params})


def _timed(port: int, body: bytes) -> float:
    """Seconds until the answer to `body`, which must be a completed task."""
    started = time.perf_counter()
    status, answer = _post(port, body, timeout=60)
    elapsed = time.perf_counter() - started
    if status != 200 or b'"completed"' not in answer:
        raise RuntimeError(f"unexpected answer: HTTP {status} {answer[:300]!r}")
    return elapsed


def measure(server: Server) -> dict[str, float]:
    first = _timed(server.port, _send("hello", f"bench-first-{uuid.uuid4()}"))
    second = _timed(server.port, _send("hello", f"bench-second-{uuid.uuid4()}"))
    kit = _timed(
        server.port,
        _send("Test message for resubscribe", f"test-resubscribe-message-id-{uuid.uuid4()}"),
    )
    return {
        "ready_s": server.startup_s,
        "first_send_ms": first * 1000,
        "second_send_ms": second * 1000,
        "kit_send_s": kit,
    }


def summarise(rounds: list[dict[str, float]]) -> dict[str, float]:
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    return {
        **median,
        "first_over_second": median["first_send_ms"] / median["second_send_ms"],
        "kit_send_over_kit_timeout": median["kit_send_s"] / KIT_0_2_5_TIMEOUT_S,
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        "# run-sut: the first message/send once ready, and the 0.2.5 kit's long-running send",
        "",
        f"- date: {report['date']}; {report['rounds']} rounds, a fresh run-sut (1 worker, "
        "embedded PostgreSQL) per revision and round; medians",
        f"- load average at start {report['load_start']}, at end {report['load_end']} "
        "(2 shared cores)",
        "- ready: from the start of the process to its first answer to a JSON-RPC call "
        "that runs no skill",
        f"- the 0.2.5 kit gives up on an answer after {KIT_0_2_5_TIMEOUT_S:.0f} s",
        "",
        "| revision | ready s | first send ms | second send ms | first / second "
        "| kit's send s | kit's send / kit's timeout |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in report["summary"].items():
        lines.append(
            f"| {name} | {s['ready_s']:.1f} | {s['first_send_ms']:.0f} "
            f"| {s['second_send_ms']:.0f} | {s['first_over_second']:.2f} "
            f"| {s['kit_send_s']:.2f} | {s['kit_send_over_kit_timeout']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="main", help="the revision to compare with")
    parser.add_argument("--output", help="the results' name (default: sut-first-send-DATE)")
    args = parser.parse_args()
    trees: dict[str, Path] = {
        f"before ({args.before})": export_revision(args.before),
        "after (work tree)": snapshot_work_tree(),
    }
    load_start = [round(x, 2) for x in os.getloadavg()]
    raw: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_no in range(args.rounds):
        for name, tree in trees.items():
            server = ours_at(tree, "ours-1", f"first-send-{round_no}")
            server.ready_body, server.ready_marker = READY_BODY, b"-32001"
            with running([server]):
                figures = measure(server)
            raw[name].append(figures)
            log(f"round {round_no + 1} {name}: {figures}")
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "summary": {name: summarise(rounds) for name, rounds in raw.items()},
        "raw": raw,
    }
    output = args.output or f"sut-first-send-{dt.date.today().isoformat()}"
    write_results(output, report, render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

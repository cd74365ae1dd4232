"""Delegation overhead (issue 11, point 9): a delegated task against the same skill called directly.

    .venv/bin/python bench/network_delegation.py            # ~1 minute
    .venv/bin/python bench/network_delegation.py --calls 20

On one machine, one PostgreSQL (embedded, in a temporary directory) with a database each for:

- the peer: this server with the conformance skills (conformance/run-sut), a process;
- the delegator: this server with the conformance and delegation skills
  (`python -m tests.support.peers.network`), a process, the peer registered by its 0.2.1 card (it
  streams) and, for the polled variant, by an inline card that says it does not.

Each round, one after the other (concurrency 1): the skill `script` ("hello", echoed) called
directly on the peer with a blocking `message/send`, and `delegate_task` of the same skill and
arguments on the delegator with a blocking `message/send` (the delegator creates its task,
sends the message to the peer, follows the remote task and mirrors it, stores its result).
Rounds alternate the order. Reported: median and p95 latency of each, and the ratio of the
medians (delegated / direct).

Results: bench/results/network-delegation.{json,md}.
"""

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentic_rag.storage.embedded import EmbeddedPostgres  # noqa: E402
from tests.support.databases import create_database  # noqa: E402
from tests.support.live import free_port, run_sut  # noqa: E402
from tests.support.peers.network import delegator_process  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def send(client: httpx.Client, skill: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "role": "user",
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "data", "data": {"skill": skill, "arguments": arguments}}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    answer: dict[str, Any] = client.post("/", json=body).json()
    task = answer.get("result")
    assert task is not None and task["status"]["state"] == "completed", answer
    return task


def timed(client: httpx.Client, skill: str, arguments: dict[str, Any]) -> float:
    start = time.perf_counter()
    send(client, skill, arguments)
    return (time.perf_counter() - start) * 1000


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-delegation-"))
    postgres = EmbeddedPostgres(root / "pg")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        dsn = postgres.start()
        peer_port, delegator_port = free_port(), free_port()
        processes.append(run_sut(peer_port, root / "peer", "--database-url", create_database(dsn)))
        processes.append(delegator_process(delegator_port, create_database(dsn), root / "d"))
        peer_url = f"http://127.0.0.1:{peer_port}"
        with (
            httpx.Client(base_url=peer_url, timeout=60) as peer,
            httpx.Client(base_url=f"http://127.0.0.1:{delegator_port}", timeout=60) as local,
        ):
            streamed = local.post(
                "/a2a/agents/register", json={"card_url": f"{peer_url}/.well-known/agent.json"}
            ).json()["agent_id"]
            card = httpx.get(f"{peer_url}/.well-known/agent.json").json()
            card.update(capabilities={"streaming": False}, name="polled")
            polled = local.post("/a2a/agents/register", json={"card": card}).json()["agent_id"]
            arguments = {"text": "hello"}

            def delegated(peer_id: str) -> dict[str, Any]:
                return {
                    "target_agent": peer_id,
                    "capability_name": "script",
                    "parameters": arguments,
                }

            runs: dict[str, list[float]] = {"direct": [], "streamed": [], "polled": []}
            calls = {
                "direct": lambda: timed(peer, "script", arguments),
                "streamed": lambda: timed(local, "delegate_task", delegated(streamed)),
                "polled": lambda: timed(local, "delegate_task", delegated(polled)),
            }
            for call in calls.values():  # warm-up: connections, first queries
                for _ in range(5):
                    call()
            for n in range(args.calls):
                order = list(calls) if n % 2 == 0 else list(reversed(calls))
                for name in order:
                    runs[name].append(calls[name]())
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=60)
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(runs, args.calls)


def report(runs: dict[str, list[float]], calls: int) -> None:
    direct = statistics.median(runs["direct"])
    rows = {
        name: {
            "median_ms": round(statistics.median(values), 2),
            "p95_ms": round(p95(values), 2),
            "ratio": round(statistics.median(values) / direct, 2),
        }
        for name, values in runs.items()
    }
    machine = f"{platform.machine()}, {platform.python_version()}, {len(runs['direct'])} calls"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "network-delegation.json").write_text(
        json.dumps({"calls": calls, "machine": machine, "results": rows}, indent=2) + "\n"
    )
    lines = [
        "# Delegation overhead (bench/network_delegation.py)",
        "",
        f"One machine ({machine} each, concurrency 1, a blocking `message/send` each): the",
        "skill `script` called directly on a peer (this server, conformance skills), against",
        "`delegate_task` of the same skill and arguments on a delegator (this server too), to",
        "that peer registered by its streaming 0.2.1 card, and by a card without streaming",
        "(followed by polling `tasks/get`, every 0.1 s as the tests configure it).",
        "",
        "| call | median ms | p95 ms | ratio to direct (medians) |",
        "|---|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['median_ms']} | {row['p95_ms']} | {row['ratio']} |")
    (RESULTS / "network-delegation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Real agent networks for the delegation and orchestration tests.

- `Peers`: two instances of this server (conformance/run-sut, each a process on a database of
  its own) and a peer on the official a2a-sdk 1.x server (tests/support/peers/sdk_peer.py, a
  process);
- `delegator`: this server with the conformance skills and the delegation skills, in a thread,
  or `delegator_process` as a process (that a test may kill);
- `Delegator`: a client of a delegator: register peers, delegate, follow the local task.
"""

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.network.delegation_skills import add_delegation_skills
from agentic_rag.serving import serve
from conformance.skills import conformance_registry
from tests.support.databases import create_database
from tests.support.live import ROOT, free_port, run_sut, serve_in_thread, until_ready
from tests.support.rpc import call, stream

# What the delegators of the tests are told: peers on 127.0.0.1, quick retries and polls.
DELEGATOR_SETTINGS: dict[str, Any] = {
    "peers_allow_private": ["127.0.0.1"],
    "push_allow_private": ["127.0.0.1"],
    "delegation_poll_seconds": 0.1,
    "delegation_backoff_seconds": 0.05,
    "delegation_backoff_max_seconds": 0.2,
}


def delegator_app(settings: Settings | None = None) -> Starlette:
    """The conformance skills (`script`: "task N D", "fail", echo) and the delegation skills."""
    app = build_app(settings or Settings(), conformance_registry())
    engine: Engine = app.state.engine
    add_delegation_skills(engine.registry, engine.delegation, engine.orchestrator)
    return app


@contextmanager
def delegator(database_url: str, data_dir: Path, **settings: Any) -> Iterator[str]:
    """A delegator in a thread until the block ends; its URL."""
    config = Settings(
        host="127.0.0.1",
        port=free_port(),
        data_dir=data_dir,
        database_url=database_url,
        **{**DELEGATOR_SETTINGS, **settings},
    )
    with serve_in_thread(delegator_app(config), lifespan="on", port=config.port) as url:
        yield url


def delegator_process(port: int, database_url: str, log_dir: Path) -> subprocess.Popen[bytes]:
    """A delegator as a process (`python -m tests.support.peers.network`), once it is ready."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"delegator-{port}.log"
    command = [
        sys.executable,
        "-m",
        "tests.support.peers.network",
        str(port),
        database_url,
        str(log_dir),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return until_ready(process, port, log_path)


def sdk_peer_process(port: int, log_dir: Path) -> subprocess.Popen[bytes]:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"sdk-peer-{port}.log"
    command = [sys.executable, "-m", "tests.support.peers.sdk_peer", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    card = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    while time.monotonic() < deadline:
        try:
            if httpx.get(card, timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        assert process.poll() is None, log_path.read_text()
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the sdk peer did not start:\n{log_path.read_text()}")


@dataclass
class Peers:
    """The peers of a test network: their base URLs."""

    ours_a: str  # this server (run-sut), a process
    ours_b: str  # another instance of it, a process
    sdk: str  # the a2a-sdk 1.x server, a process


@contextmanager
def peers(postgres_dsn: str, log_dir: Path) -> Iterator[Peers]:
    ports = [free_port() for _ in range(3)]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for port, name in zip(ports[:2], ("a", "b"), strict=True):
            database = create_database(postgres_dsn)
            processes.append(run_sut(port, log_dir / name, "--database-url", database))
        processes.append(sdk_peer_process(ports[2], log_dir))
        yield Peers(*(f"http://127.0.0.1:{port}" for port in ports))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Delegator:
    """A client of a delegator (an API key's tenant, or the open local one)."""

    def __init__(self, url: str, key: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(base_url=url, timeout=60, headers=headers)

    def close(self) -> None:
        self.client.close()

    def register(self, **body: Any) -> str:
        """Register a peer (`card_url=`, `card=`, or the REST declaration); its id."""
        response = self.client.post("/a2a/agents/register", json=body)
        assert response.status_code == 201, response.text
        agent_id: str = response.json()["agent_id"]
        return agent_id

    def send(self, skill: str, arguments: dict[str, Any], *, blocking: bool) -> dict[str, Any]:
        """Call `skill` with a DataPart; the task as it ends (blocking) or as created."""
        message = {
            "role": "user",
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "data", "data": {"skill": skill, "arguments": arguments}}],
        }
        params = {"message": message, "configuration": {"blocking": blocking}}
        answer = call(self.client, "message/send", params)
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task

    def delegate(self, *, blocking: bool = True, **arguments: Any) -> dict[str, Any]:
        return self.send("delegate_task", arguments, blocking=blocking)

    def get(self, task_id: str) -> dict[str, Any]:
        answer = call(self.client, "tasks/get", {"id": task_id})
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task

    def cancel(self, task_id: str) -> dict[str, Any]:
        answer = call(self.client, "tasks/cancel", {"id": task_id})
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task

    def messages(self, task_id: str) -> list[str]:
        """The texts of every status message of the task, in order: its event log, read until
        the task is final (or paused)."""
        return list(self._messages(task_id))

    def wait_for_message(self, task_id: str, pattern: str) -> re.Match[str]:
        """The first status message of the task that matches `pattern`, as soon as it exists."""
        for text in self._messages(task_id):
            if match := re.search(pattern, text):
                return match
        raise AssertionError(f"the task ended without a message matching {pattern!r}")

    def _messages(self, task_id: str) -> Iterator[str]:
        events = stream(self.client, "tasks/resubscribe", {"id": task_id}, {"Last-Event-ID": "0"})
        for event in events:
            message = event.payload["result"].get("status", {}).get("message")
            if message:
                yield " ".join(p.get("text", "") for p in message["parts"])


def result_data(task: dict[str, Any]) -> dict[str, Any]:
    """The data part of a completed task's result artifact."""
    assert task["status"]["state"] == "completed", task["status"]
    (data,) = [p["data"] for p in task["artifacts"][-1]["parts"] if p["kind"] == "data"]
    assert isinstance(data, dict)
    return data


def status_text(task: dict[str, Any]) -> str:
    message = task["status"].get("message") or {"parts": []}
    return " ".join(p.get("text", "") for p in message["parts"])


def remote_task(peer_url: str, task_id: str) -> dict[str, Any]:
    """A task as this server's peer (run-sut) has it."""
    with httpx.Client(base_url=peer_url, timeout=30) as client:
        answer = call(client, "tasks/get", {"id": task_id})
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]
    return task


def main() -> None:
    """`python -m tests.support.peers.network PORT DATABASE_URL DATA_DIR`: a delegator process."""
    port, database_url, data_dir = sys.argv[1:4]
    overrides = {
        "host": "127.0.0.1",
        "port": int(port),
        "data_dir": data_dir,
        "database_url": database_url,
        "log_level": "warning",
        **DELEGATOR_SETTINGS,
    }
    serve("tests.support.peers.network:delegator_app", overrides, graph=False)  # it has none


if __name__ == "__main__":
    main()

"""Long tasks stay small and stoppable (issue 34, point 3): progress replaces progress instead
of piling up in the history, a progress event does not rewrite the task's snapshot, and a
cancel answers whatever the skill is doing: reporting faster than the journal commits, or
ignoring the cancellation altogether.

Real parts: the app on uvicorn, PostgreSQL, the task engine; the skills are the tests' own.
"""

import asyncio
import base64
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import BaseModel

from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.skills import SkillContext, SkillRegistry
from agentic_rag.tasks.outcomes import Completed
from tests.support.live import LiveServer, live_server
from tests.support.rpc import call


class Nothing(BaseModel):
    pass


class Blob(BaseModel):
    blob: str
    reports: int


class Said(BaseModel):
    said: str


class Gates:
    """What the stubborn skill waits on, and tells, across the server's thread."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended = threading.Event()


def registry(gates: Gates) -> SkillRegistry:
    skills = SkillRegistry()

    @skills.skill(description="Reports progress as fast as it can, until it is stopped.")
    async def chatter(ctx: SkillContext, args: Nothing) -> Said:
        n = 0
        while True:
            n += 1
            await ctx.progress(f"at {n}")
            await asyncio.sleep(0)

    @skills.skill(description="Ignores cancellation until the test releases it.")
    async def stubborn(ctx: SkillContext, args: Nothing) -> Said:
        await ctx.progress("waiting")
        try:
            while not gates.release.is_set():
                # What a skill stuck in a call that ignores cancellation amounts to.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0.01)
            return Said(said="done anyway")
        finally:
            gates.ended.set()

    @skills.skill(description="Reports a few times about a large argument, then answers.")
    async def large(ctx: SkillContext, args: Blob) -> Said:
        for n in range(args.reports):
            await ctx.progress(f"report {n + 1} of {args.reports}")
            await asyncio.sleep(0.1)  # time for the journal to commit each on its own
        return Said(said=str(len(args.blob)))

    return skills


def skill_message(skill: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "data", "data": {"skill": skill, "arguments": arguments}}],
    }


@pytest.fixture
def gates() -> Iterator[Gates]:
    gates = Gates()
    yield gates
    gates.release.set()  # nothing is left waiting


@pytest.fixture
def server(database_url: str, data_dir: Path, gates: Gates) -> Iterator[LiveServer]:
    with live_server(registry(gates), database_url=database_url, data_dir=data_dir) as server:
        yield server


def started(client: httpx.Client, skill: str) -> dict[str, Any]:
    send = {"message": skill_message(skill), "configuration": {"blocking": False}}
    task: dict[str, Any] = call(client, "message/send", send)["result"]
    return task


def status_text(task: dict[str, Any]) -> str:
    message = task["status"].get("message") or {"parts": [{"text": ""}]}
    text: str = message["parts"][0]["text"]
    return text


def until(client: httpx.Client, task_id: str, says: Callable[[str], bool]) -> dict[str, Any]:
    """The task once what its status says passes `says` (a bounded wait); with its size."""
    deadline = time.monotonic() + 60
    while True:
        response = client.post(
            "/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task_id}}
        )
        task: dict[str, Any] = response.json()["result"]
        if says(status_text(task)):
            task["bytes"] = len(response.content)
            return task
        assert time.monotonic() < deadline, task["status"]
        time.sleep(0.02)


def reported(at_least: int) -> Callable[[str], bool]:
    """Whether the chatter has reported `at_least` times."""
    return lambda said: said.startswith("at ") and int(said[3:]) >= at_least


def test_a_task_that_reports_without_pause_stays_small_and_is_canceled(
    server: LiveServer,
) -> None:
    """Thousands of progress events: the task shows the latest and keeps one message, and a
    cancel answers (before the fix it waited for the journal to catch up with a skill that
    reports faster than it commits: forever)."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        task = started(client, "chatter")
        early = until(client, task["id"], reported(1))
        late = until(client, task["id"], reported(2000))
        canceled = call(client, "tasks/cancel", {"id": task["id"]})
        stored = call(client, "tasks/get", {"id": task["id"]})["result"]
        events = call(client, "tasks/get", {"id": task["id"], "historyLength": 0})["result"]
    # The history holds the client's message only; the status the latest progress.
    assert [m["role"] for m in late["history"]] == ["user"]
    assert late["bytes"] < 2 * early["bytes"]
    assert canceled["result"]["status"]["state"] == "canceled", canceled
    assert stored["status"]["state"] == "canceled"
    assert [m["role"] for m in stored["history"]] == ["user", "agent"]  # and why it ended
    assert "history" not in events or events["history"] == []


def test_a_cancel_answers_while_the_skill_ignores_it(server: LiveServer, gates: Gates) -> None:
    """A skill that does not give way to the cancellation: the cancel answers `canceled` all
    the same, and what the skill returns later is dropped."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        task = started(client, "stubborn")
        until(client, task["id"], lambda said: said == "waiting")
        canceled = call(client, "tasks/cancel", {"id": task["id"]})
        assert not gates.ended.is_set()  # the skill still runs
        gates.release.set()
        assert gates.ended.wait(60)
        again = call(client, "tasks/cancel", {"id": task["id"]})
        stored = call(client, "tasks/get", {"id": task["id"]})["result"]
    assert canceled["result"]["status"]["state"] == "canceled", canceled
    assert again["error"]["code"] == -32002  # canceled already: not cancelable
    assert stored["status"]["state"] == "canceled"
    assert "artifacts" not in stored  # the answer it returned after the cancel is not kept


async def test_progress_does_not_rewrite_the_task(database_url: str, data_dir: Path) -> None:
    """A task whose message is large (a PDF sent as a file is): each progress event writes
    its event and the status, not the message again (before the fix the table grew by the
    message's size a report)."""
    reports, size = 40, 1_000_000
    blob = base64.b64encode(os.urandom(size * 3 // 4)).decode()  # as a file part's bytes
    engine = Engine(Settings(data_dir=data_dir, database_url=database_url), registry(Gates()))
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    assert pool is not None
    await engine.start()
    try:
        before = await pool.fetchval("SELECT pg_total_relation_size('tasks')")
        started = await engine.tasks.start_skill(
            "acme", "large", {"blob": blob, "reports": reports}, groups=None
        )
        outcome = await asyncio.wait_for(
            engine.tasks.outcome("acme", started.task_id, wait=True), 120
        )
        grown = await pool.fetchval("SELECT pg_total_relation_size('tasks')") - before
        events = await pool.fetchval(
            "SELECT count(*) FROM task_events WHERE task_id = $1", started.task_id
        )
    finally:
        await engine.stop()
        await pool.close()
    assert isinstance(outcome, Completed) and outcome.output == Said(said=str(len(blob)))
    assert events >= reports  # every report was logged
    # The message is written with the task's creation and with its end; the reports add
    # little. Before the fix: about `reports` times the compressed message.
    assert grown < 8 * size, grown

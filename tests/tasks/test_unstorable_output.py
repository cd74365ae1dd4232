"""A skill whose result cannot be stored ends `failed` with a reason, never stuck `working`;
a cancel of a task whose outcome could not be stored ends it `canceled`."""

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from agentic_rag.skills import SkillContext, SkillRegistry
from conformance.skills import conformance_registry
from tests.support.cluster import query
from tests.support.live import live_server
from tests.support.rpc import call, text_message
from tests.support.workers import start


class Text(BaseModel):
    text: str


def test_a_result_postgresql_cannot_store_fails_the_task_with_a_reason(
    database_url: str, data_dir: Path
) -> None:
    registry = SkillRegistry()

    @registry.skill(description="Answers with a NUL character.", text_argument="text", default=True)
    async def nul(ctx: SkillContext, args: Text) -> Text:
        return Text(text="before\x00after")  # PostgreSQL text and jsonb cannot hold U+0000

    with (
        live_server(registry, database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        answer = call(client, "message/send", {"message": text_message("go")})["result"]
        stored = call(client, "tasks/get", {"id": answer["id"]})["result"]
        healthy = call(client, "message/send", {"message": text_message("again")})
    assert answer["status"]["state"] == "failed"
    assert "could not be stored" in answer["status"]["message"]["parts"][0]["text"]
    assert stored["status"]["state"] == "failed"
    assert "artifacts" not in stored
    assert healthy["result"]["status"]["state"] == "failed"  # the server goes on answering


# A fault injected in the real PostgreSQL: every write of the task's events fails, as while the
# database is away, until the trigger is dropped.
_REFUSE_EVENTS = (
    "CREATE FUNCTION refuse_events() RETURNS trigger LANGUAGE plpgsql AS $$"
    " BEGIN RAISE EXCEPTION 'injected: events of % cannot be stored', NEW.task_id; END $$",
    "CREATE TRIGGER refuse_events BEFORE INSERT ON task_events FOR EACH ROW"
    " WHEN (NEW.task_id = '{task_id}') EXECUTE FUNCTION refuse_events()",
)
_ACCEPT_EVENTS = ("DROP TRIGGER refuse_events ON task_events", "DROP FUNCTION refuse_events()")


def test_a_cancel_of_a_task_whose_outcome_could_not_be_stored_ends_it_canceled(
    database_url: str, data_dir: Path
) -> None:
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        task = start(client, "task 5 100")  # working; ends in 0.5 s: its outcome unstored
        for statement in _REFUSE_EVENTS:
            query(database_url, statement.format(task_id=task["id"]))
        canceled: dict[str, Any] = {}

        def cancel() -> None:
            canceled.update(call(client, "tasks/cancel", {"id": task["id"]}))

        try:
            time.sleep(1.5)  # the skill has ended; its worker tries to store its outcome
            stuck = call(client, "tasks/get", {"id": task["id"]})["result"]
            canceling = threading.Thread(target=cancel)
            canceling.start()
            time.sleep(1)  # the cancel waits for the task's worker, which cannot store it yet
        finally:
            for statement in _ACCEPT_EVENTS:
                query(database_url, statement)
        canceling.join(60)
        stored = call(client, "tasks/get", {"id": task["id"]})["result"]
    assert stuck["status"]["state"] == "working"  # the outcome was not stored
    assert "result" in canceled, canceled
    assert canceled["result"]["status"]["state"] == "canceled", canceled
    assert stored["status"]["state"] == "canceled"
    assert "artifacts" not in stored  # the result that could not be stored was not kept

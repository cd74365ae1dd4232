"""Messages to tasks that are not paused, across the workers of one server.

A message to a task in progress joins its history, wherever the task runs: the worker that
receives it hands it to the worker that runs it, and answers once it is stored. A message to
a final task starts one follow-up task in its context, however many workers receive it (the
conformance suite, conformance/test_messages.py, covers one worker).
"""

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.support.rpc import call, stream, text_message
from tests.support.workers import start, two_workers


def wait_until_final(client: httpx.Client, task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        task: dict[str, Any] = call(client, "tasks/get", {"id": task_id})["result"]
        if task["status"]["state"] in ("completed", "failed", "canceled", "rejected"):
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.02)


def user_texts(task: dict[str, Any]) -> list[str]:
    return [m["parts"][0]["text"] for m in task["history"] if m["role"] == "user"]


def artifact_text(task: dict[str, Any]) -> str:
    text: str = task["artifacts"][0]["parts"][0]["text"]
    return text


def logged_messages(database_url: str, task_id: str) -> list[str]:
    """The message ids of the `message` events in the task's log."""

    async def read() -> list[str]:
        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch(
                "SELECT event->>'messageId' AS id FROM task_events"
                " WHERE task_id = $1 AND kind = 'message' ORDER BY seq",
                task_id,
            )
        finally:
            await conn.close()
        return [row["id"] for row in rows]

    return asyncio.run(read())


def test_a_message_to_a_task_working_on_another_worker_reaches_its_skill(
    database_url: str, data_dir: Path
) -> None:
    with two_workers(database_url, data_dir) as (a, b):
        task = start(a, "listen")
        message = text_message("from the other worker", taskId=task["id"])
        answer = call(b, "message/send", {"message": message})["result"]
        done = wait_until_final(a, task["id"])
    assert answer["id"] == task["id"]
    assert answer["status"]["state"] in ("working", "completed")
    assert user_texts(answer) == ["listen", "from the other worker"]
    assert done["status"]["state"] == "completed"
    assert artifact_text(done) == "heard: from the other worker"
    # Stored as an event of the task's log, as every change of a task is.
    assert logged_messages(database_url, task["id"]) == [message["messageId"]]


def test_a_large_message_handed_to_another_worker_arrives_whole(
    database_url: str, data_dir: Path
) -> None:
    """A handed-on message travels in many notifications (each under PostgreSQL's 8000-byte
    limit); it arrives whole, multi-byte characters included."""
    text = "".join(f"{n} é ✓ 🙂 " for n in range(20_000))
    assert len(text.encode()) > 200_000
    with two_workers(database_url, data_dir) as (a, b):
        task = start(a, "listen")
        answer = call(b, "message/send", {"message": text_message(text, taskId=task["id"])})
        done = wait_until_final(a, task["id"])
    assert user_texts(answer["result"])[-1] == text
    assert artifact_text(done) == f"heard: {text}"


def test_a_message_stream_to_a_task_working_on_another_worker_follows_it(
    database_url: str, data_dir: Path
) -> None:
    with two_workers(database_url, data_dir) as (a, b):
        task = start(a, "listen")
        message = text_message("streamed", taskId=task["id"])
        events = [e.payload["result"] for e in stream(b, "message/stream", {"message": message})]
        done = wait_until_final(a, task["id"])
    first, last = events[0], events[-1]
    assert first["kind"] == "task" and first["id"] == task["id"]
    assert user_texts(first) == ["listen", "streamed"]
    assert last["kind"] == "status-update" and last["final"] is True
    assert last["status"] == done["status"]
    assert artifact_text(done) == "heard: streamed"


def send_at_once(clients: list[httpx.Client], params: dict[str, Any]) -> list[dict[str, Any]]:
    """The same `message/send`, through each client at the same moment."""
    answers: list[dict[str, Any]] = [{} for _ in clients]
    barrier = threading.Barrier(len(clients))

    def send(index: int) -> None:
        barrier.wait()
        answers[index] = call(clients[index], "message/send", params)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_a_message_to_a_final_task_received_by_two_workers_starts_one_follow_up(
    database_url: str, data_dir: Path
) -> None:
    with two_workers(database_url, data_dir) as (a, b):
        for round_ in range(6):
            final = call(a, "message/send", {"message": text_message("hello")})["result"]
            message = text_message(f"again {round_}", taskId=final["id"])
            answers = send_at_once([a, b], {"message": message})
            assert all(answer["result"]["kind"] == "message" for answer in answers), answers
            follow_ups = {answer["result"]["taskId"] for answer in answers}
            assert len(follow_ups) == 1, answers
            (follow_up_id,) = follow_ups
            follow_up = wait_until_final(b, follow_up_id)
            assert follow_up_id != final["id"]
            assert follow_up["contextId"] == final["contextId"]
            assert [m["messageId"] for m in follow_up["history"] if m["role"] == "user"] == [
                message["messageId"]
            ]
            assert [artifact_text(follow_up)] == [f"again {round_}"]
            assert len(follow_up["artifacts"]) == 1  # its skill ran once
            assert call(b, "tasks/get", {"id": final["id"]})["result"] == final


def test_a_blocking_retry_on_another_worker_answers_the_task_as_it_ends(
    database_url: str, data_dir: Path
) -> None:
    """A retry that reaches a worker which does not run the task follows it through the log,
    and answers with the task as it ended, as the worker that runs it would."""
    with two_workers(database_url, data_dir) as (a, b):
        message = text_message("task 5 100", taskId=f"client-chosen-{uuid.uuid4()}")
        first = call(a, "message/send", {"message": message, "configuration": {"blocking": False}})
        retried = call(b, "message/send", {"message": message})["result"]
        ended = call(a, "tasks/get", {"id": first["result"]["id"]})["result"]
    assert first["result"]["status"]["state"] in ("submitted", "working")
    assert retried["id"] == first["result"]["id"]
    assert retried["status"]["state"] == "completed"
    assert retried == ended

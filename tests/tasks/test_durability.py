"""Tasks are durable: a restart loses nothing, and a crash never leaves a task working."""

import asyncio
import os
import signal
import time
from pathlib import Path

import asyncpg
import httpx

from agentic_rag.schema.a2a import TaskState
from agentic_rag.tasks.store import TaskStore
from conformance.skills import conformance_registry
from tests.support.live import free_port, live_server, run_sut
from tests.support.rpc import call, stream, text_message
from tests.support.tasks import a_task, created


def test_a_restart_loses_nothing(database_url: str, data_dir: Path) -> None:
    registry = conformance_registry()
    with (
        live_server(registry, database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        done = call(client, "message/send", {"message": text_message("task 2 1")})["result"]
        asking = call(client, "message/send", {"message": text_message("ask")})["result"]
        hook = {"url": "https://hooks.example.com/a2a", "token": "t0k", "id": "h1"}
        setting = {"taskId": asking["id"], "pushNotificationConfig": hook}
        call(client, "tasks/pushNotificationConfig/set", setting)
        replay_all = {"Last-Event-ID": "0"}
        live_events = list(stream(client, "tasks/resubscribe", {"id": done["id"]}, replay_all))
    assert done["status"]["state"] == "completed"
    assert asking["status"]["state"] == "input-required"

    with (
        live_server(registry, database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        assert call(client, "tasks/get", {"id": done["id"]})["result"] == done
        assert call(client, "tasks/get", {"id": asking["id"]})["result"] == asking
        configs = call(client, "tasks/pushNotificationConfig/list", {"id": asking["id"]})
        assert [c["pushNotificationConfig"]["id"] for c in configs["result"]] == ["h1"]
        replayed = list(stream(client, "tasks/resubscribe", {"id": done["id"]}, replay_all))
        assert [(e.id, e.payload["result"]) for e in replayed] == [
            (e.id, e.payload["result"]) for e in live_events
        ]
        reply = text_message(
            "after the restart", taskId=asking["id"], contextId=asking["contextId"]
        )
        continued = call(client, "message/send", {"message": reply})["result"]
    assert continued["status"]["state"] == "completed"
    assert continued["artifacts"][0]["parts"][0]["text"] == "you said: after the restart"


def test_a_task_running_when_the_process_dies_is_failed_with_a_reason(tmp_path: Path) -> None:
    port = free_port()
    process = run_sut(port, tmp_path)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            send = {"message": text_message("task 100 100"), "configuration": {"blocking": False}}
            task = call(client, "message/send", send)["result"]
            while (
                call(client, "tasks/get", {"id": task["id"]})["result"]["status"]["state"]
                != "working"
            ):
                time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)  # no shutdown code runs
        process.wait(timeout=10)
        process = run_sut(port, tmp_path)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            recovered = call(client, "tasks/get", {"id": task["id"]})["result"]
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert recovered["status"]["state"] == "failed"
    reason = recovered["status"]["message"]["parts"][0]["text"]
    assert "server stopped while this task was running" in reason


async def test_a_task_accepted_but_never_started_is_resumed_at_start(
    database_url: str, data_dir: Path
) -> None:
    # The state a crash leaves between accepting a task and starting it: submitted, durable.
    pool = await asyncpg.create_pool(database_url)
    assert pool is not None
    from agentic_rag.storage.postgres import migrate

    async with pool.acquire() as conn:
        await migrate(conn)
    queued = a_task("queued-1", TaskState.submitted, "resume me")
    await TaskStore(pool).write([created("local", queued)])
    await pool.close()

    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        deadline = time.monotonic() + 20
        while (result := call(client, "tasks/get", {"id": "queued-1"})["result"])["status"][
            "state"
        ] != "completed":
            assert time.monotonic() < deadline, result
            await asyncio.sleep(0.05)
    assert result["artifacts"][0]["parts"][0]["text"] == "resume me"


def test_a_clean_shutdown_fails_running_tasks_with_a_reason(
    database_url: str, data_dir: Path
) -> None:
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        send = {"message": text_message("task 200 100"), "configuration": {"blocking": False}}
        task = call(client, "message/send", send)["result"]
        while (
            call(client, "tasks/get", {"id": task["id"]})["result"]["status"]["state"] != "working"
        ):
            time.sleep(0.05)
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        stopped = call(client, "tasks/get", {"id": task["id"]})["result"]
    assert stopped["status"]["state"] == "failed"
    assert "shut down" in stopped["status"]["message"]["parts"][0]["text"]

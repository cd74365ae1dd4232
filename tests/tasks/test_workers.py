"""Several workers on one database.

A task runs on the worker that accepted it; any other worker can follow it, cancel it, and
continue it once it is paused, and takes it over when its worker dies (never while that
worker lives). `agentic-rag serve --workers N` runs N such workers on one port.
"""

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Route

from agentic_rag.schema.a2a import TaskState
from agentic_rag.serving import claim_port
from agentic_rag.storage.cluster import WORKER_LOCK_CLASS
from agentic_rag.tasks import states
from agentic_rag.tasks.parts import serialize
from agentic_rag.tasks.store import TaskConflict, TaskStore, TaskWrite
from conformance.skills import conformance_registry
from tests.support.live import free_port, live_server, run_sut, serve_in_thread
from tests.support.push import Webhook
from tests.support.rpc import call, stream, text_message
from tests.support.tasks import a_task, created
from tests.support.workers import start, two_workers


def test_a_task_on_one_worker_is_followed_live_from_another(
    database_url: str, data_dir: Path
) -> None:
    with two_workers(database_url, data_dir) as (a, b):
        task = start(a, "task 5 100")
        followed = list(stream(b, "tasks/resubscribe", {"id": task["id"]}))
        replayed = list(stream(a, "tasks/resubscribe", {"id": task["id"]}, {"Last-Event-ID": "0"}))
    snapshot, *live = followed
    assert snapshot.payload["result"]["kind"] == "task"
    assert snapshot.payload["result"]["status"]["state"] == "working"
    assert len(live) >= 3  # working updates 100 ms apart, the artifact, the end: seen live
    assert live[-1].payload["result"]["status"]["state"] == "completed"
    # What the other worker relayed is exactly what the log holds after the snapshot.
    assert snapshot.id is not None
    assert [(e.id, e.payload["result"]) for e in live] == [
        (e.id, e.payload["result"]) for e in replayed if e.id is not None and e.id > snapshot.id
    ]


def test_a_task_on_one_worker_is_canceled_from_another(database_url: str, data_dir: Path) -> None:
    with two_workers(database_url, data_dir) as (a, b):
        task = start(a, "task 100 100")
        canceled = call(b, "tasks/cancel", {"id": task["id"]})["result"]
        seen_by_a = call(a, "tasks/get", {"id": task["id"]})["result"]
        again = call(b, "tasks/cancel", {"id": task["id"]})
    assert canceled["status"]["state"] == "canceled"
    # The worker that ran the skill stopped it (it records this reason) and said so.
    assert canceled["status"]["message"]["parts"][0]["text"] == "Canceled at the client's request."
    assert seen_by_a == canceled
    assert again["error"]["code"] == -32002


def test_a_push_config_set_on_one_worker_is_used_by_the_worker_that_runs_the_task(
    database_url: str, data_dir: Path
) -> None:
    hook = Webhook()
    receiver = Starlette(routes=[Route("/hook", hook.hook, methods=["POST"])])
    with (
        serve_in_thread(receiver) as hook_url,
        two_workers(database_url, data_dir, push_allow_private=["127.0.0.1"]) as (a, b),
    ):
        task = start(a, "task 10 50")  # created without a push config
        config = {"url": f"{hook_url}/hook", "token": "t0k"}
        setting = {"taskId": task["id"], "pushNotificationConfig": config}
        assert "result" in call(b, "tasks/pushNotificationConfig/set", setting)
        ((headers, body),) = hook.wait_for(1)
    assert body["id"] == task["id"]
    assert body["status"]["state"] == "completed"
    assert headers["x-a2a-notification-token"] == "t0k"


def answer_at_once(
    paused: dict[str, Any], texts: dict[httpx.Client, str]
) -> dict[httpx.Client, dict[str, Any]]:
    """Each client continues the paused task with its text, both at the same moment."""
    answers: dict[httpx.Client, dict[str, Any]] = {}
    barrier = threading.Barrier(len(texts))

    def answer(client: httpx.Client) -> None:
        reply = text_message(texts[client], taskId=paused["id"], contextId=paused["contextId"])
        barrier.wait()
        answers[client] = call(client, "message/send", {"message": reply})

    threads = [threading.Thread(target=answer, args=(client,)) for client in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_a_paused_task_continued_on_two_workers_at_once_is_continued_once(
    database_url: str, data_dir: Path
) -> None:
    with two_workers(database_url, data_dir) as (a, b):
        for round_ in range(6):
            paused = call(a, "message/send", {"message": text_message("ask")})["result"]
            assert paused["status"]["state"] == "input-required"
            texts = {a: f"from a {round_}", b: f"from b {round_}"}
            answers = answer_at_once(paused, texts)
            final = call(b, "tasks/get", {"id": paused["id"]})["result"]
            user_texts = [m["parts"][0]["text"] for m in final["history"] if m["role"] == "user"]
            # The first message stored continued the task (its skill ran once, from the start).
            assert user_texts[:2] in (["ask", texts[a]], ["ask", texts[b]]), user_texts
            (winner,) = [client for client in (a, b) if texts[client] == user_texts[1]]
            (loser,) = {a, b} - {winner}
            assert answers[winner]["result"]["id"] == paused["id"], answers
            assert final["status"]["state"] == "completed"
            assert final["artifacts"][0]["parts"][0]["text"] in {
                f"you said: {text}" for text in user_texts[1:]
            }
            # The other message came after: it joined the task while it worked, or, once it
            # was final, started a follow-up task in its context that references it (the
            # answer is then an agent Message naming the follow-up).
            later = answers[loser]["result"]
            if later["kind"] == "task":
                assert later["id"] == paused["id"]
                assert user_texts == ["ask", texts[winner], texts[loser]]
            else:
                assert later["kind"] == "message" and later["referenceTaskIds"] == [paused["id"]]
                assert user_texts == ["ask", texts[winner]]
                follow_up = call(b, "tasks/get", {"id": later["taskId"]})["result"]
                assert follow_up["contextId"] == paused["contextId"]
                assert follow_up["history"][0]["referenceTaskIds"] == [paused["id"]]
            log = list(stream(a, "tasks/resubscribe", {"id": paused["id"]}, {"Last-Event-ID": "0"}))
            ids = [e.id for e in log]
            assert ids == sorted(set(ids)), ids


async def test_a_second_writer_of_a_task_event_is_refused_and_changes_nothing(
    pool: asyncpg.Pool,
) -> None:
    paused = a_task("t", TaskState.input_required)
    first, second = TaskStore(pool, worker=1), TaskStore(pool, worker=2)
    await first.write([created("acme", paused)])
    canceled = states.status_event(paused, TaskState.canceled)
    failed = states.status_event(paused, TaskState.failed)
    await first.write(
        [TaskWrite("acme", states.apply(paused, canceled), 2, [serialize(canceled, 2)])]
    )
    with pytest.raises(TaskConflict, match="task t was changed by another writer"):
        await second.write(
            [TaskWrite("acme", states.apply(paused, failed), 2, [serialize(failed, 2)])]
        )
    stored = await first.get("acme", "t")
    assert stored is not None
    assert (stored.task.status.state, stored.last_seq) == (TaskState.canceled, 2)
    logged = await first.events_after("acme", "t", 1)
    assert [orjson.loads(e.json) for e in logged] == [orjson.loads(serialize(canceled, 2).json)]


async def test_a_sweep_takes_over_only_the_tasks_of_workers_that_are_gone(
    pool: asyncpg.Pool, database_url: str
) -> None:
    def working(task_id: str) -> TaskWrite:
        return created("acme", a_task(task_id, TaskState.working))

    lease = await asyncpg.connect(database_url)  # worker 7 is alive while this holds its lock
    await lease.execute("SELECT pg_advisory_lock($1, $2)", WORKER_LOCK_CLASS, 7)
    await TaskStore(pool, worker=7).write([working("of-7")])
    await TaskStore(pool, worker=8).write([working("of-8")])  # worker 8 holds no lock: gone
    sweeper = TaskStore(pool, worker=9)

    claimed = await sweeper.claim_orphans(WORKER_LOCK_CLASS)
    assert [stored.task.id for _, stored in claimed] == ["of-8"]
    assert await sweeper.claim_orphans(WORKER_LOCK_CLASS) == []  # taken over once

    await lease.close()  # worker 7 dies, or lost its connection and is taking its lease again
    await asyncio.sleep(0.5)
    # A sweep that saw it holding its lease within the lease's time spares it (Cluster.spared).
    assert await sweeper.claim_orphans(WORKER_LOCK_CLASS, spared=[7]) == []
    deadline = time.monotonic() + 10
    while not (claimed := await sweeper.claim_orphans(WORKER_LOCK_CLASS)):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert [stored.task.id for _, stored in claimed] == ["of-7"]


def test_the_tasks_of_a_worker_that_dies_are_failed_by_another_and_not_before(
    database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    doomed = run_sut(port, tmp_path / "sut", "--database-url", database_url)
    try:
        with (
            live_server(
                conformance_registry(),
                database_url=database_url,
                data_dir=data_dir,
                worker_sweep_seconds=0.1,
                worker_lease_seconds=1,  # the dead worker's tasks are spared this long
            ) as survivor,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as on_doomed,
            httpx.Client(base_url=survivor.url, timeout=30) as client,
        ):
            task = start(on_doomed, "task 200 50")
            progress = call(client, "tasks/get", {"id": task["id"]})["result"]
            time.sleep(1)  # ten sweeps of the survivor while the doomed worker lives
            alive = call(client, "tasks/get", {"id": task["id"]})["result"]
            assert alive["status"]["state"] == "working"
            assert alive["status"]["timestamp"] > progress["status"]["timestamp"]  # still runs

            os.kill(doomed.pid, signal.SIGKILL)  # no shutdown code runs
            doomed.wait(timeout=10)
            deadline = time.monotonic() + 20
            while (recovered := call(client, "tasks/get", {"id": task["id"]})["result"])["status"][
                "state"
            ] == "working":
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        doomed.kill()
        doomed.wait(timeout=10)
    assert recovered["status"]["state"] == "failed"
    reason = recovered["status"]["message"]["parts"][0]["text"]
    assert "server stopped while this task was running" in reason


def _workers(pid: int) -> list[int]:
    """The worker processes of the `serve` process `pid`."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [
        int(child)
        for child in children
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
    ]


def test_serve_with_two_workers_shares_one_port_one_database_and_metrics(
    tmp_path: Path,
) -> None:
    port, data_dir = free_port(), tmp_path / "data"
    command = [sys.executable, "-m", "agentic_rag.cli", "serve", "--port", str(port)]
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [*command, "--data-dir", str(data_dir), "--workers", "2"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        workers = _workers(server.pid)
        assert len(workers) == 2
        # Each worker says where it listens once it does: one line each.
        while len(listening := _listening(tmp_path / "serve.log")) < 2:
            assert time.monotonic() < deadline, listening
            time.sleep(0.1)
        assert sorted(listening) == sorted(workers)

        # A new connection each time: the kernel spreads them over the workers.
        tasks = []
        for n in range(30):
            with httpx.Client(base_url=url, timeout=30) as client:
                done = call(client, "message/send", {"message": text_message(f"help {n}")})
                tasks.append(done["result"])
        assert {task["status"]["state"] for task in tasks} == {"completed"}
        for task in tasks:
            with httpx.Client(base_url=url, timeout=30) as client:
                assert call(client, "tasks/get", {"id": task["id"]})["result"] == task

        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        sends = sum(
            sample.value
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
            if sample.name == "agentic_rag_jsonrpc_calls_total"
            and sample.labels == {"method": "message/send", "outcome": "ok"}
        )
        assert sends == 30  # every worker's calls, whichever worker answers /metrics

        os.kill(workers[0], signal.SIGKILL)  # a worker dies: another takes its place
        deadline = time.monotonic() + 60
        while len(replaced := _workers(server.pid)) != 2 or workers[0] in replaced:
            assert time.monotonic() < deadline, replaced
            time.sleep(0.1)
        assert workers[1] in replaced
        workers = replaced
        for n in range(10):
            with httpx.Client(base_url=url, timeout=30) as client:
                done = call(client, "message/send", {"message": text_message(f"after {n}")})
                assert done["result"]["status"]["state"] == "completed", done
    finally:
        server.send_signal(signal.SIGTERM)
        returncode = server.wait(timeout=60)
    assert returncode == 0, (tmp_path / "serve.log").read_text()
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert not (data_dir / "postgres" / "postmaster.pid").exists()  # PostgreSQL stopped


async def _worker_leases(conn: asyncpg.Connection) -> list[tuple[int, int]]:
    """(backend pid, worker id) of every worker lease held on this database."""
    rows = await conn.fetch(
        "SELECT pid, objid::text::bigint AS worker FROM pg_locks"
        " WHERE locktype = 'advisory' AND granted AND classid = $1 AND objsubid = 2"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        WORKER_LOCK_CLASS,
    )
    return [(row["pid"], row["worker"]) for row in rows]


async def test_a_worker_whose_lease_connection_is_lost_takes_its_lease_again(
    database_url: str, data_dir: Path
) -> None:
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        worker_sweep_seconds=0.1,
    ):
        conn = await asyncpg.connect(database_url)
        try:
            leases = await _worker_leases(conn)
            assert len(leases) == 1
            ((backend, worker),) = leases
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", backend)
            deadline = time.monotonic() + 10
            while (renewed := await _worker_leases(conn)) in ([], leases):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        finally:
            await conn.close()
    assert [held_by for _, held_by in renewed] == [worker]  # the same worker, a new connection


def _listening(log: Path) -> list[int]:
    """The pids of the processes that said they listen, in the log of `serve`."""
    return [int(pid) for pid in re.findall(r"listening \(pid (\d+)\)", log.read_text())]


def refused_serve(port: int, data_dir: Path, *args: str) -> str:
    """`agentic-rag serve` on `port`, which must stop at start (exit 3); its one line."""
    command = [str(Path(sys.executable).parent / "agentic-rag"), "serve", "--port", str(port)]
    result = subprocess.run(
        [*command, "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    (line,) = output.splitlines()  # no traceback, no "listening"
    assert not data_dir.exists()  # stopped before the embedded PostgreSQL started
    return line


def test_serve_with_workers_on_a_port_in_use_says_so_and_exits(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused_serve(port, tmp_path / "data", "--workers", "2")
    assert f"cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use" in line


def test_a_second_server_on_the_port_of_a_running_one_stops_at_start(tmp_path: Path) -> None:
    port = free_port()
    command = [str(Path(sys.executable).parent / "agentic-rag"), "serve", "--port", str(port)]
    log = tmp_path / "first.log"
    with log.open("wb") as output:
        first = subprocess.Popen(
            [*command, "--data-dir", str(tmp_path / "first"), "--workers", "2"],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while len(_listening(log)) < 2:  # both workers bound the port (with SO_REUSEPORT)
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        # A second server, even one whose workers could join with SO_REUSEPORT, and whatever
        # its number of workers: it would answer every other request from its own database.
        for workers in ("2", "1"):
            line = refused_serve(port, tmp_path / "second", "--workers", workers)
            assert f"cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use" in line
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0, log.read_text()


def test_a_port_claimed_by_a_server_still_starting_is_refused(tmp_path: Path) -> None:
    port = free_port()
    # What a server holds from its start until it stops, before its workers listen too.
    with claim_port("127.0.0.1", port):
        line = refused_serve(port, tmp_path / "data", "--workers", "2")
    assert f"cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use" in line


async def test_a_cancel_from_a_worker_that_lost_its_lease_connection_still_reaches_the_task(
    database_url: str, data_dir: Path
) -> None:
    registry = conformance_registry()
    with (
        live_server(
            registry, database_url=database_url, data_dir=data_dir, worker_sweep_seconds=0.1
        ) as runs,
        live_server(
            registry, database_url=database_url, data_dir=data_dir, worker_sweep_seconds=600
        ) as asks,
        httpx.Client(base_url=runs.url, timeout=30) as a,
        httpx.Client(base_url=asks.url, timeout=30) as b,
    ):
        task = start(a, "task 100 100")
        conn = await asyncpg.connect(database_url)
        try:
            runner = await conn.fetchval("SELECT worker FROM tasks WHERE id = $1", task["id"])
            killed: set[int] = set()
            workers = set()
            for backend, worker in await _worker_leases(conn):
                assert await conn.fetchval("SELECT pg_terminate_backend($1)", backend)
                killed.add(backend)
                workers.add(worker)
            assert runner in workers
            # Each worker takes its lease again at once on a new backend, not at its next
            # sweep (the asking worker's is minutes away). (A terminated backend may still
            # show its lock for a moment: counting leases is not enough.)
            deadline = time.monotonic() + 10
            while {w for pid, w in await _worker_leases(conn) if pid not in killed} != workers:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            canceled = call(b, "tasks/cancel", {"id": task["id"]})["result"]
            assert len([pid for pid, _ in await _worker_leases(conn) if pid not in killed]) == 2
        finally:
            await conn.close()
    assert canceled["status"]["state"] == "canceled"

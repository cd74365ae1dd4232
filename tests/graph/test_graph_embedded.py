"""The embedded FalkorDB of a data directory: it keeps its data across restarts, one process
runs it (others use it), and it never outlives that owner, not even one killed with SIGKILL."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from falkordb.asyncio import FalkorDB

from agentic_rag.graph.embedded import EmbeddedFalkorDB, redis_servers
from tests.support.embedded import children, serving
from tests.support.live import free_port
from tests.support.rpc import call, text_message

# A process that owns the embedded FalkorDB of a directory, writes one node, says so, and
# waits to be killed.
OWNER = """
import asyncio, sys
from pathlib import Path
from falkordb.asyncio import FalkorDB
from agentic_rag.graph.embedded import EmbeddedFalkorDB

async def main():
    embedded = EmbeddedFalkorDB(Path(sys.argv[1]))
    db = FalkorDB(unix_socket_path=str(await embedded.start()))
    await db.select_graph("g").query("CREATE (:Note {text: 'written before the crash'})")
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def servers_in(directory: Path) -> set[int]:
    return {pid for pid, cwd in redis_servers().items() if cwd == directory}


def until_gone(directory: Path) -> set[int]:
    deadline = time.monotonic() + 10
    while (left := servers_in(directory)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


async def notes(db: FalkorDB) -> list[str]:
    result = await db.select_graph("g").query("MATCH (n:Note) RETURN n.text ORDER BY n.text")
    return [row[0] for row in result.result_set]


async def test_data_survives_a_clean_restart_and_no_server_is_left(tmp_path: Path) -> None:
    embedded = EmbeddedFalkorDB(tmp_path)
    db = FalkorDB(unix_socket_path=str(await embedded.start()))
    await db.select_graph("g").query("CREATE (:Note {text: 'kept'})")
    await db.connection.aclose()
    await embedded.stop()
    assert until_gone(embedded.directory) == set()

    again = EmbeddedFalkorDB(tmp_path)
    db = FalkorDB(unix_socket_path=str(await again.start()))
    try:
        assert await notes(db) == ["kept"]
    finally:
        await db.connection.aclose()
        await again.stop()


async def test_another_process_uses_the_owners_server_and_never_stops_it(
    tmp_path: Path,
) -> None:
    owner, user = EmbeddedFalkorDB(tmp_path), EmbeddedFalkorDB(tmp_path)
    first = FalkorDB(unix_socket_path=str(await owner.start()))
    try:
        await first.select_graph("g").query("CREATE (:Note {text: 'shared'})")
        second = FalkorDB(unix_socket_path=str(await user.start()))
        assert await notes(second) == ["shared"]
        await second.connection.aclose()
        await user.stop()
        assert len(servers_in(owner.directory)) == 1
        assert await notes(first) == ["shared"]
    finally:
        await first.connection.aclose()
        await owner.stop()
    assert until_gone(owner.directory) == set()


async def test_a_killed_owner_leaves_no_server_and_the_next_start_has_the_data(
    tmp_path: Path,
) -> None:
    owner = subprocess.Popen(  # noqa: ASYNC220 (it prints one line and waits to be killed)
        [sys.executable, "-c", OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "ready\n"
        directory = EmbeddedFalkorDB(tmp_path).directory
        assert len(servers_in(directory)) == 1
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
    finally:
        owner.kill()
    assert until_gone(directory) == set()

    embedded = EmbeddedFalkorDB(tmp_path)
    db = FalkorDB(unix_socket_path=str(await embedded.start()))
    try:
        assert await notes(db) == ["written before the crash"]
    finally:
        await db.connection.aclose()
        await embedded.stop()


async def test_a_long_data_directory_gets_a_socket_elsewhere(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    embedded = EmbeddedFalkorDB(deep)
    socket = await embedded.start()
    try:
        assert not socket.is_relative_to(deep)
        db = FalkorDB(unix_socket_path=str(socket))
        assert await db.connection.ping()
        await db.connection.aclose()
    finally:
        await embedded.stop()


def skill(client: httpx.Client, name: str, **arguments: Any) -> dict[str, Any]:
    """A skill's structured result over A2A (open local mode: the `local` tenant)."""
    data = {"skill": name, "arguments": arguments}
    message = text_message("") | {"parts": [{"kind": "data", "data": data}]}
    task = call(client, "message/send", {"message": message})["result"]
    assert task["status"]["state"] == "completed", task["status"]
    (artifact,) = task["artifacts"]
    result: dict[str, Any] = next(p["data"] for p in artifact["parts"] if p["kind"] == "data")
    return result


def test_a_server_killed_with_sigkill_leaves_no_redis_server_and_serves_again(
    tmp_path: Path,
) -> None:
    data_dir, port = tmp_path / "data", free_port()
    directory = EmbeddedFalkorDB(data_dir).directory
    url = f"http://127.0.0.1:{port}"
    with serving(data_dir, port) as crashed, httpx.Client(base_url=url, timeout=60) as client:
        added = skill(
            client,
            "add_triplet",
            source_node_name="Ada",
            edge_name="WROTE",
            fact="Ada wrote the first program",
            target_node_name="program",
        )
        (server,) = servers_in(directory)
        assert server in children(crashed.pid)  # the graph database is the server's child
        crashed.kill()  # no shutdown code runs
        crashed.wait(timeout=10)
    assert until_gone(directory) == set()

    with serving(data_dir, port) as again, httpx.Client(base_url=url, timeout=60) as client:
        (edge,) = added["result"]["edges"]
        assert skill(client, "get_entity_edge", uuid=edge["uuid"])["result"]["fact"] == (
            "Ada wrote the first program"
        )
        assert skill(client, "get_status")["status"] == "ok"
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=60) == 0
    assert until_gone(directory) == set()


def test_with_workers_the_supervisor_owns_the_graph_database(tmp_path: Path) -> None:
    """`serve --workers 2`: the supervisor runs the embedded FalkorDB, so a worker that dies
    takes nothing along; stopping the supervisor stops it."""
    data_dir, port = tmp_path / "data", free_port()
    directory = EmbeddedFalkorDB(data_dir).directory
    url = f"http://127.0.0.1:{port}"
    with (
        serving(data_dir, port, "--workers", "2") as supervisor,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        (server,) = servers_in(directory)
        assert server in children(supervisor.pid)

        def workers() -> set[int]:
            return {
                pid
                for pid in children(supervisor.pid)
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
            }

        first = workers()
        assert len(first) == 2
        killed = min(first)
        os.kill(killed, signal.SIGKILL)  # the supervisor starts another
        deadline = time.monotonic() + 60
        while killed in workers() or len(workers()) < 2:  # the connections it held reset
            assert time.monotonic() < deadline, workers()
            time.sleep(0.1)
        added = skill(
            client,
            "add_triplet",
            source_node_name="Grace",
            edge_name="BUILT",
            fact="Grace built a compiler",
            target_node_name="compiler",
        )
        (edge,) = added["result"]["edges"]
        assert edge["fact"] == "Grace built a compiler"
        assert servers_in(directory) == {server}
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
    assert until_gone(directory) == set()

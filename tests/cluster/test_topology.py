"""The replica topology at start (issue 19, point 12): `agentic-rag serve` on an external
PostgreSQL (a server it does not own, tests/support/cluster.py) refuses an embedded FalkorDB,
which would be a graph of its own beside every other replica's, unless told it is alone; warns
when rate limits are counted per replica; and names each store, embedded or external, without
credentials; and a graph server that does not answer stops the start in one line.
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_rag.serving import REFUSED, STARTUP_FAILURE
from tests.support.cluster import BIN, ExternalPostgres, FalkorServer, Replica
from tests.support.live import free_port


@pytest.fixture(scope="module")
def postgres() -> Iterator[ExternalPostgres]:
    with ExternalPostgres() as server:
        yield server


def replica_environment(database_url: str, **settings: str) -> dict[str, str]:
    """The test's environment without any setting of ours, and the database's URL."""
    ours = ("AGENTIC_RAG_", "DATABASE_URL", "REDIS_URL")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    return {**clean, "DATABASE_URL": database_url, "AGENTIC_RAG_LOG_FORMAT": "text", **settings}


def refused_start(environment: dict[str, str]) -> tuple[int, list[str]]:
    """`serve` that is expected to stop at start: its exit status and what it said."""
    ended = subprocess.run(
        [str(BIN / "agentic-rag"), "serve", "--port", str(free_port())],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return ended.returncode, (ended.stdout + ended.stderr).splitlines()


def startup_log(directory: Path, environment: dict[str, str]) -> tuple[Replica, list[str]]:
    """A replica started until ready, then stopped; the lines it logged."""
    replica = Replica(directory.name, directory, environment)
    replica.start()
    try:
        return replica, replica.log_path.read_text(errors="replace").splitlines()
    finally:
        replica.stop()


def test_an_embedded_graph_beside_an_external_database_is_refused_in_one_line(
    postgres: ExternalPostgres, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    status, said = refused_start(
        replica_environment(postgres.database(), AGENTIC_RAG_DATA_DIR=str(data_dir))
    )
    assert status == REFUSED, said
    naming = [line for line in said if "AGENTIC_RAG_GRAPH_URL" in line]
    assert len(naming) == 1, said
    assert "ERROR" in naming[0] and "embedded FalkorDB" in naming[0]
    assert "AGENTIC_RAG_GRAPH_EMBEDDED=true" in naming[0]
    assert not any("Traceback" in line for line in said), said
    assert not (data_dir / "falkordb").exists()  # refused before any graph started


def test_a_graph_server_that_does_not_answer_stops_the_start_in_one_line(
    postgres: ExternalPostgres, tmp_path: Path
) -> None:
    nowhere = f"redis://default:graph-secret@127.0.0.1:{free_port()}"  # nothing listens
    status, said = refused_start(
        replica_environment(
            postgres.database(),
            AGENTIC_RAG_DATA_DIR=str(tmp_path / "data"),
            AGENTIC_RAG_GRAPH_URL=nowhere,
        )
    )
    assert status == STARTUP_FAILURE, said
    (line,) = [line for line in said if "cannot reach the FalkorDB server" in line]
    assert "ERROR" in line and "AGENTIC_RAG_GRAPH_URL" in line
    assert f"({nowhere.replace('default:graph-secret@', '')})" in line
    assert not any("Traceback" in line or "graph-secret" in line for line in said), said


def test_a_replica_told_it_is_alone_starts_and_says_which_stores_are_its_own(
    postgres: ExternalPostgres, tmp_path: Path
) -> None:
    database_url = postgres.database()
    assert "postgres:@" in database_url  # the user the log must not name
    environment = replica_environment(database_url, AGENTIC_RAG_GRAPH_EMBEDDED="true")
    replica, lines = startup_log(tmp_path / "alone", environment)
    (stores,) = [line for line in lines if "stores: " in line]
    host = database_url.partition("@")[2]
    assert f"database external postgresql://{host}" in stores
    assert "rate limits in this process" in stores
    assert f"graph embedded in {replica.data_dir.resolve() / 'falkordb'}" in stores
    assert "work queue in the database" in stores
    assert "postgres:@" not in "\n".join(lines)
    (limits,) = [line for line in lines if "rate limits are counted by" in line]
    assert "WARNING" in limits and "each replica sharing DATABASE_URL" in limits
    assert "REDIS_URL" in limits


def test_a_replica_on_shared_stores_names_them_and_does_not_warn(
    postgres: ExternalPostgres, tmp_path: Path
) -> None:
    falkordb = FalkorServer(tmp_path / "falkordb")
    try:
        host_and_port = falkordb.url.removeprefix("redis://")
        environment = replica_environment(
            postgres.database(),
            REDIS_URL=f"redis://default:rate-secret@{host_and_port}/0",
            AGENTIC_RAG_GRAPH_URL=falkordb.url,
        )
        replica, lines = startup_log(tmp_path / "shared", environment)
    finally:
        falkordb.stop()
    (stores,) = [line for line in lines if "stores: " in line]
    assert f"rate limits Redis redis://{host_and_port}/0" in stores
    assert f"graph external {falkordb.url}" in stores
    assert "rate-secret" not in "\n".join(lines)
    assert not any("rate limits are counted by" in line for line in lines)
    assert not (replica.data_dir / "falkordb").exists()  # no graph of its own

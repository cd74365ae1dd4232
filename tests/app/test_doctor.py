"""`agentic-rag doctor`: every check against the real thing, and what it says to fix."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from agentic_rag.doctor import CHECKS, Result, report, run_checks
from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.storage.embedded import EmbeddedPostgres, postgres_processes
from agentic_rag.storage.postgres import migrate
from conformance.skills import conformance_registry
from tests.support.cluster import FalkorServer
from tests.support.live import free_port, live_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from the environment: start every test from none."""
    for name in list(os.environ):
        if name.startswith("AGENTIC_RAG_") or name in ("DATABASE_URL", "REDIS_URL"):
            monkeypatch.delenv(name)


def by_check(results: list[Result]) -> dict[str, Result]:
    return {r.check: r for r in results}


def run_doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTIC_RAG_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", "agentic_rag.cli", "doctor", *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_fresh_checkout_is_ready(tmp_path: Path) -> None:
    port = free_port()
    done = run_doctor("--data-dir", str(tmp_path / "data"), "--port", str(port))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["ok", "config"],
        ["ok", "database"],
        ["ok", "pgvector"],
        ["ok", "exposure"],
        ["ok", "metrics"],
        ["ok", "redis"],
        ["ok", "graph"],
        ["ok", "models"],
        ["ok", "llm"],
        ["ok", "port"],
    ]
    assert "`agentic-rag serve` creates it in" in lines[1]
    assert f"embedded FalkorDB in {(tmp_path / 'data' / 'falkordb').resolve()}" in lines[6]
    assert "all-MiniLM-L6-v2 installed, its files verified by sha256" in lines[7]
    assert "none configured: answers are extractive" in lines[8]
    assert f"127.0.0.1:{port} is free" in lines[9]
    assert not (tmp_path / "data").exists()  # doctor creates nothing


def test_json_output_and_exit_code_on_failure(tmp_path: Path) -> None:
    nowhere = f"postgresql://app:pw-not-shown@/app?host={tmp_path}/no-socket-here"
    done = run_doctor("--json", "--port", str(free_port()), env={"DATABASE_URL": nowhere})
    assert done.returncode == 1
    answer = orjson.loads(done.stdout)
    assert answer["ok"] is False
    checks = {c["check"]: c for c in answer["checks"]}
    assert set(checks) >= {"config", "database", "exposure", "models", "port"}
    assert all(set(c) == {"check", "status", "detail", "fix"} for c in answer["checks"])
    database = checks["database"]
    assert database["status"] == "fail"
    assert database["detail"].startswith("cannot connect to DATABASE_URL")
    assert database["fix"] == "start PostgreSQL there, or correct DATABASE_URL"
    assert "pw-not-shown" not in done.stdout
    assert checks["models"]["status"] == "ok"


def test_an_invalid_setting_names_its_variable(tmp_path: Path) -> None:
    done = run_doctor(env={"AGENTIC_RAG_PORT": "eighty", "AGENTIC_RAG_DATA_DIR": str(tmp_path)})
    assert done.returncode == 1
    first, *rest = done.stdout.splitlines()
    assert first.startswith("fail  config     AGENTIC_RAG_PORT: ")
    assert "-- fix: correct AGENTIC_RAG_PORT" in first
    assert all(line.startswith(("warn", "ok")) for line in rest)
    assert any("not checked: the configuration does not load" in line for line in rest)


async def test_jwt_without_issuer_and_audience_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTIC_RAG_JWT_SECRET", "a" * 40)
    config = by_check(await run_checks({"port": free_port(), "data_dir": Path("/nonexistent")}))
    assert config["config"].status == "fail"
    assert config["config"].detail.startswith(
        "JWT needs AGENTIC_RAG_JWT_ISSUER and AGENTIC_RAG_JWT_AUDIENCE"
    )


def test_a_port_out_of_range_is_refused_by_option_and_by_variable(tmp_path: Path) -> None:
    by_option = run_doctor("--port", "0", "--data-dir", str(tmp_path))
    assert by_option.returncode == 2
    assert "argument --port: Input should be greater than or equal to 1" in by_option.stderr
    by_variable = run_doctor(env={"AGENTIC_RAG_PORT": "65536", "AGENTIC_RAG_DATA_DIR": "x"})
    assert by_variable.returncode == 1
    assert by_variable.stdout.splitlines()[0].startswith(
        "fail  config     AGENTIC_RAG_PORT: Input should be less than or equal to 65535"
    )


def test_doctor_stops_the_embedded_postgres_it_started(tmp_path: Path) -> None:
    server = EmbeddedPostgres(tmp_path / "data")
    server.start()
    server.stop()  # a data directory whose server is not running
    done = run_doctor("--data-dir", str(tmp_path / "data"), "--port", str(free_port()))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok    database   reachable: embedded PostgreSQL in" in done.stdout
    assert server.pgdata not in postgres_processes().values()


async def test_the_database_check_reports_pgvector_and_migrations(database_url: str) -> None:
    overrides = {"database_url": database_url, "port": free_port()}
    fresh = by_check(await run_checks(overrides))
    assert fresh["database"].status == "ok"
    assert fresh["database"].detail.startswith("reachable: DATABASE_URL")
    assert fresh["pgvector"].status == "ok"
    assert "not created yet" in fresh["pgvector"].detail
    assert fresh["migrations"].status == "warn"
    shipped = sorted(
        f.name
        for f in resources.files("agentic_rag.storage").joinpath("migrations").iterdir()
        if f.name.endswith(".sql")
    )
    assert shipped[0] == "0001_a2a.sql" and len(shipped) >= 8
    assert fresh["migrations"].detail == (
        f"{len(shipped)} of {len(shipped)} pending: {', '.join(shipped)}"
    )
    assert "applies them at start" in fresh["migrations"].fix

    conn = await asyncpg.connect(database_url)
    try:
        await migrate(conn)
        migrated = by_check(await run_checks(overrides))
        assert migrated["migrations"].status == "ok"
        assert migrated["migrations"].detail == f"all {len(shipped)} applied"
        assert migrated["pgvector"].detail.startswith("available (")
        assert "installed" in migrated["pgvector"].detail

        await conn.execute("INSERT INTO schema_migrations (name) VALUES ('9999_future.sql')")
        newer = by_check(await run_checks(overrides))
        assert newer["migrations"].status == "warn"
        assert "9999_future.sql" in newer["migrations"].detail
        assert "newer agentic-rag" in newer["migrations"].fix
    finally:
        await conn.close()


@pytest.fixture
def embedded_data_dir() -> Iterator[Path]:
    """A data directory whose embedded PostgreSQL runs."""
    root = Path(tempfile.mkdtemp(prefix="agentic-rag-test-doctor-"))
    server = EmbeddedPostgres(root)
    server.start()
    yield root
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_the_embedded_database_is_checked_in_the_data_dir(embedded_data_dir: Path) -> None:
    results = by_check(await run_checks({"data_dir": embedded_data_dir, "port": free_port()}))
    database = results["database"]
    assert database.status == "ok"
    assert f"embedded PostgreSQL in {(embedded_data_dir / 'postgres').resolve()}" in database.detail
    assert "postgresql://postgres:@/postgres?host=" in database.detail  # where pg_dump connects
    assert results["pgvector"].status == "ok"
    assert results["migrations"].status == "warn"  # nothing has migrated this one yet


async def test_a_public_address_needs_credentials_or_insecure(
    database_url: str, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    public = {"database_url": database_url, "host": "0.0.0.0", "port": free_port()}
    refused = by_check(await run_checks(public))
    assert refused["exposure"].status == "fail"
    assert refused["exposure"].detail == "`serve` refuses to bind 0.0.0.0 without credentials"
    assert "agentic-rag keys create" in refused["exposure"].fix
    assert "--insecure" in refused["exposure"].fix
    assert refused["metrics"].status == "warn"

    insecure = by_check(await run_checks({**public, "insecure": True}))
    assert insecure["exposure"].status == "warn"
    assert insecure["exposure"].detail.startswith("INSECURE")

    monkeypatch.setenv("AGENTIC_RAG_METRICS_TOKEN", "scrape-me")
    await ApiKeyStore(pool).create("acme", ["read"])
    keyed = by_check(await run_checks(public))
    assert keyed["exposure"].status == "ok"
    assert keyed["exposure"].detail == "0.0.0.0 requires credentials (API keys)"
    assert keyed["metrics"].status == "ok"
    assert keyed["metrics"].detail == "/metrics requires the metrics bearer token"


async def test_the_port_check_tells_who_holds_the_port(
    database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        busy = by_check(await run_checks({"port": taken, "data_dir": data_dir}))
    assert busy["port"].status == "fail"
    assert busy["port"].detail == f"127.0.0.1:{taken} is in use by another program"
    assert "choose another port" in busy["port"].fix

    with live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s:
        ours = by_check(await run_checks({"port": s.settings.port, "data_dir": tmp_path / "d"}))
    assert ours["port"].status == "warn"
    assert ours["port"].detail.endswith("is in use by a running agentic-rag (it answers /healthz)")

    foreign = by_check(await run_checks({"host": "192.0.2.1", "port": free_port()}))
    assert foreign["port"].status == "fail"
    assert foreign["port"].detail == "192.0.2.1 is not an address of this machine"


async def test_an_unreachable_redis_fails(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    results = by_check(await run_checks({"port": free_port(), "data_dir": data_dir}))
    assert results["redis"].status == "fail"
    assert results["redis"].fix == "start Redis there, correct REDIS_URL, or unset it"


async def test_an_embedded_graph_beside_an_external_database_fails(
    monkeypatch: pytest.MonkeyPatch, database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    """What `serve` refuses (a split brain: tests/cluster/test_topology.py), doctor fails."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    options = {"port": free_port(), "data_dir": data_dir}
    split = by_check(await run_checks(options))["graph"]
    assert split.status == "fail" and "graph of its own" in split.detail
    assert "AGENTIC_RAG_GRAPH_URL" in split.fix and "AGENTIC_RAG_GRAPH_EMBEDDED=true" in split.fix

    monkeypatch.setenv("AGENTIC_RAG_GRAPH_EMBEDDED", "true")
    alone = by_check(await run_checks(options))["graph"]
    assert alone.status == "ok" and "embedded FalkorDB in" in alone.detail

    monkeypatch.setenv("AGENTIC_RAG_GRAPH_URL", f"falkor://127.0.0.1:{free_port()}")
    nowhere = by_check(await run_checks(options))["graph"]
    assert nowhere.status == "fail"
    assert nowhere.detail.startswith("AGENTIC_RAG_GRAPH_URL does not answer: ConnectionError")
    assert nowhere.fix == "start FalkorDB there, or correct AGENTIC_RAG_GRAPH_URL"

    falkordb = FalkorServer(tmp_path / "falkordb")
    try:
        monkeypatch.setenv("AGENTIC_RAG_GRAPH_URL", falkordb.url.replace("redis:", "falkor:"))
        shared = by_check(await run_checks(options))["graph"]
    finally:
        falkordb.stop()
    assert shared == Result("graph", "ok", "AGENTIC_RAG_GRAPH_URL answers")


def test_a_check_is_added_by_appending_it() -> None:
    async def check_example(ctx: Any) -> list[Result]:
        return [Result("example", "warn", "looked", "do this")]

    CHECKS.append(check_example)
    try:
        import asyncio

        results = asyncio.run(run_checks({"port": free_port(), "data_dir": Path("/nonexistent")}))
    finally:
        CHECKS.remove(check_example)
    assert results[-1] == Result("example", "warn", "looked", "do this")
    assert report(results, as_json=False).splitlines()[-1] == (
        "warn  example    looked -- fix: do this"
    )


def test_the_llm_is_checked_where_it_is_configured(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data"), "--port", str(free_port()), "--json"]

    def llm(env: dict[str, str]) -> dict[str, str]:
        done = run_doctor(*data, env=env)
        checks = {c["check"]: c for c in orjson.loads(done.stdout)["checks"]}
        return checks["llm"]

    local = llm({"AGENTIC_RAG_LLM_LOCAL": "true"})
    assert local["status"] == "ok", local
    assert "the local model qwen2.5-coder-1.5b-instruct-q4_k_m: installed" in local["detail"]

    missing = llm({"AGENTIC_RAG_LLM_LOCAL": "true", "AGENTIC_RAG_LLM_LOCAL_MODEL": "/nowhere.gguf"})
    assert missing["status"] == "fail"
    assert missing["detail"] == "AGENTIC_RAG_LLM_LOCAL_MODEL: no file at /nowhere.gguf"

    down = llm({"AGENTIC_RAG_LLM_BASE_URL": "http://127.0.0.1:9/v1", "AGENTIC_RAG_LLM_MODEL": "m"})
    assert down["status"] == "fail"
    assert down["detail"].startswith("the LLM endpoint http://127.0.0.1:9/v1 does not answer")
    assert down["fix"] == "start it, or correct AGENTIC_RAG_LLM_BASE_URL"

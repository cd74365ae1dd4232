"""Operations: request ids, JSON/text logs without secrets, /healthz, /readyz, /metrics."""

import asyncio
import importlib.util
import io
import logging
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentic_rag.config import Settings
from agentic_rag.observability import metrics as observed
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.observability.logging import (
    REQUEST_ID,
    json_formatter,
    logging_config,
    redact,
    resolve_format,
)
from agentic_rag.observability.loop_lag import watch_loop_lag
from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.skills.metering import SkillCall
from agentic_rag.storage.embedded import EmbeddedPostgres
from conformance.skills import conformance_registry
from tests.support.live import free_port, live_server
from tests.support.rpc import call, stream, text_message

ROOT = Path(__file__).resolve().parents[2]


def scrape(client: httpx.Client, **headers: str) -> dict[tuple[str, frozenset[Any]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[Any]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


# -- request ids -------------------------------------------------------------------------------


def test_a_sane_request_id_is_echoed_and_any_other_replaced(
    database_url: str, data_dir: Path
) -> None:
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s,
        httpx.Client(base_url=s.url, timeout=30) as client,
    ):
        given = client.get("/healthz", headers={"X-Request-ID": "trace-42.a:b"})
        assert given.status_code == 200
        assert given.json() == {"status": "ok"}
        assert given.headers["x-request-id"] == "trace-42.a:b"

        generated = {client.get("/healthz").headers["x-request-id"] for _ in range(3)}
        assert len(generated) == 3
        assert all(len(g) == 32 and int(g, 16) >= 0 for g in generated)

        for insane in ("a" * 129, "two words", '"quoted"', "-leading-dash", "é".encode()):
            echoed = client.get("/healthz", headers={"X-Request-ID": insane})
            assert len(echoed.headers["x-request-id"]) == 32

        # Every answer carries it: JSON-RPC, errors, streams and unknown paths too.
        rpc = client.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "nope"})
        assert len(rpc.headers["x-request-id"]) == 32
        missing = client.get("/no/such/path", headers={"X-Request-ID": "r404"})
        assert (missing.status_code, missing.headers["x-request-id"]) == (404, "r404")
        body = {"jsonrpc": "2.0", "id": "s", "method": "message/stream"}
        body["params"] = {"message": text_message("hi")}
        with client.stream("POST", "/", json=body, headers={"X-Request-ID": "sse-1"}) as sse:
            assert sse.headers["content-type"].startswith("text/event-stream")
            assert sse.headers["x-request-id"] == "sse-1"


# -- logs ---------------------------------------------------------------------------------------


def test_redact_scrubs_credentials_and_keeps_the_rest() -> None:
    key = "ar_0123456789ab_" + "S" * 43
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"
    cases = {
        "Authorization: Bearer abcdefghijkl": "Authorization: Bearer [REDACTED]",
        "authorization=Basic dXNlcjpwYXNz": "authorization=Basic [REDACTED]",
        "x-api-key: k-123": "x-api-key: [REDACTED]",
        "GET /metrics?token=hunter2&page=3": "GET /metrics?token=[REDACTED]&page=3",
        "{'password': 'pw1', 'user': 'bob'}": "{'password': '[REDACTED]', 'user': 'bob'}",
        f"presented {key} then": "presented ar_0123456789ab_[REDACTED] then",
        f"jwt {jwt} end": "jwt [REDACTED] end",
        "postgresql://app:s3cr3t@db:5432/x": "postgresql://app:[REDACTED]@db:5432/x",
        "sent bearer abcdefghijklmnop": "sent bearer [REDACTED]",
        "task 42 completed in 3 s": "task 42 completed in 3 s",
    }
    for raw, expected in cases.items():
        assert redact(raw) == expected, raw


def test_the_default_format_follows_whether_stdout_is_a_terminal() -> None:
    main, secondary = pty.openpty()
    try:
        with os.fdopen(secondary, "w", closefd=False) as terminal:
            assert resolve_format(None, terminal) == "text"
            assert resolve_format("json", terminal) == "json"
    finally:
        os.close(main)
        os.close(secondary)
    assert resolve_format(None, io.StringIO()) == "json"
    assert resolve_format("text", io.StringIO()) == "text"


def test_log_records_get_the_request_id_and_lose_their_secrets() -> None:
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    for name in ("access_fields", "request_id", "redact"):  # as logging_config wires them
        handler.addFilter(logging_config("json", "info")["filters"][name]["()"]())
    handler.setFormatter(json_formatter())
    logger = logging.getLogger("tests.observability.private")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        token = REQUEST_ID.set("rid-7")
        try:
            logger.info("calling with %s", "Authorization: Bearer topsecretvalue")
        finally:
            REQUEST_ID.reset(token)
        logger.info("outside any request")
        try:
            raise RuntimeError("token=leakedvalue")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    lines = [orjson.loads(line) for line in buffer.getvalue().splitlines()]
    assert [line["request_id"] for line in lines] == ["rid-7", None, None]
    assert lines[0]["message"] == "calling with Authorization: Bearer [REDACTED]"
    assert list(lines[0])[:5] == ["time", "level", "logger", "message", "request_id"]
    assert "leakedvalue" not in buffer.getvalue()
    assert "topsecretvalue" not in buffer.getvalue()
    assert "token=[REDACTED]" in lines[2]["exc_info"]


@pytest.fixture
def serve_process(database_url: str, tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """`agentic-rag serve` as a subprocess; yields its URL, its stdout file and environment."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIC_RAG_")}
    env.update(DATABASE_URL=database_url, AGENTIC_RAG_DATA_DIR=str(tmp_path / "data"))
    env.update(AGENTIC_RAG_GRAPH_EMBEDDED="true")  # the only server on this database
    yield f"http://127.0.0.1:{port}", tmp_path / "stdout", env


def _run_serve(url: str, out: Path, env: dict[str, str], requests: Any) -> str:
    port = url.rsplit(":", 1)[1]
    with out.open("wb") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentic_rag.cli", "serve", "--port", port],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"{url}/healthz", timeout=1)
                    break
                except httpx.TransportError:
                    assert process.poll() is None, out.read_text()
                    assert time.monotonic() < deadline, "serve did not start"
                    time.sleep(0.1)
            with httpx.Client(base_url=url, timeout=30) as client:
                requests(client)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    return out.read_text()


def test_serve_writes_json_lines_with_request_ids_and_no_secrets(
    serve_process: tuple[str, Path, dict[str, str]], database_url: str
) -> None:
    url, out, env = serve_process
    secrets = ["Bearer-secret-0123456789", "ar_abcdef123456_" + "K" * 43, "querysecret99"]

    async def forget_a_migration() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute("DELETE FROM schema_migrations WHERE name = '0002_api_keys.sql'")
        finally:
            await conn.close()

    def requests(client: httpx.Client) -> None:
        client.get("/healthz", headers={"X-Request-ID": "probe-1"})
        client.get(
            f"/.well-known/agent.json?token={secrets[2]}",
            headers={
                "X-Request-ID": "card-1",
                "Authorization": f"Bearer {secrets[0]}",
                "X-API-Key": secrets[1],
            },
        )
        # A line logged by our code while answering: /readyz says why it is not ready.
        asyncio.run(forget_a_migration())
        assert client.get("/readyz", headers={"X-Request-ID": "ready-1"}).status_code == 503

    output = _run_serve(url, out, env, requests)
    lines = [orjson.loads(line) for line in output.splitlines() if line.strip()]
    assert lines, output
    assert all({"time", "level", "logger", "message", "request_id"} <= set(line) for line in lines)
    by_id: dict[str | None, list[dict[str, Any]]] = {}
    for line in lines:
        by_id.setdefault(line["request_id"], []).append(line)
    probe = by_id["probe-1"]
    assert [(p["logger"], p["path"], p["status"]) for p in probe] == [
        ("uvicorn.access", "/healthz", 200)
    ]
    card = by_id["card-1"]
    assert card[0]["path"] == "/.well-known/agent.json?token=[REDACTED]"
    ready = [(r["logger"], r["level"]) for r in by_id["ready-1"]]
    assert ("agentic_rag.health", "WARNING") in ready
    assert ("uvicorn.access", "INFO") in ready
    assert any("0002_api_keys.sql" in r["message"] for r in by_id["ready-1"])
    assert any(line["logger"] == "agentic_rag.serving" for line in by_id[None])  # startup lines
    for secret in secrets:
        assert secret not in output


def test_serve_writes_text_when_asked(serve_process: tuple[str, Path, dict[str, str]]) -> None:
    url, out, env = serve_process
    env.update(AGENTIC_RAG_LOG_FORMAT="text", AGENTIC_RAG_LOG_LEVEL="INFO")

    def requests(client: httpx.Client) -> None:
        client.get("/healthz", headers={"X-Request-ID": "text-1"})

    output = _run_serve(url, out, env, requests)
    lines = output.splitlines()
    access = [line for line in lines if "[text-1]" in line]
    assert len(access) == 1
    assert "INFO" in access[0] and "uvicorn.access" in access[0] and "/healthz" in access[0]
    assert any("[-] agentic_rag.serving: A2A JSON-RPC at" in line for line in lines)
    assert not any(line.startswith("{") for line in lines)


# -- health and readiness ----------------------------------------------------------------------


async def test_readyz_is_503_while_a_migration_is_pending(
    database_url: str, data_dir: Path
) -> None:
    with live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s:
        async with httpx.AsyncClient(base_url=s.url, timeout=30) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {
                "status": "ready",
                "checks": {
                    "database": {"ok": True, "detail": "reachable"},
                    "migrations": {"ok": True, "detail": "all applied"},
                },
            }
            conn = await asyncpg.connect(database_url)
            try:
                await conn.execute("DELETE FROM schema_migrations WHERE name = '0002_api_keys.sql'")
                pending = await client.get("/readyz")
                assert pending.status_code == 503
                body = pending.json()
                assert body["status"] == "unavailable"
                assert body["checks"]["database"]["ok"] is True
                assert body["checks"]["migrations"]["ok"] is False
                assert body["checks"]["migrations"]["pending"] == ["0002_api_keys.sql"]
                assert (await client.get("/healthz")).status_code == 200  # alive all the same
                await conn.execute(
                    "INSERT INTO schema_migrations (name) VALUES ('0002_api_keys.sql')"
                )
                assert (await client.get("/readyz")).status_code == 200
            finally:
                await conn.close()


def test_readyz_is_503_when_the_database_stops(data_dir: Path) -> None:
    # Not under pytest's temporary directory: the server runs as another user when we are root.
    own = Path(tempfile.mkdtemp(prefix="agentic-rag-test-readyz-"))
    server = EmbeddedPostgres(own)
    dsn = server.start()
    stopped = False
    try:
        with (
            live_server(conformance_registry(), database_url=dsn, data_dir=data_dir) as s,
            httpx.Client(base_url=s.url, timeout=30) as client,
        ):
            assert client.get("/readyz").status_code == 200
            server.stop()  # its only user: the server stops
            stopped = True
            down = client.get("/readyz")
            assert down.status_code == 503
            body = down.json()
            assert body["status"] == "unavailable"
            assert body["checks"]["database"]["ok"] is False
            assert body["checks"]["database"]["detail"].startswith("unreachable: ")
            assert body["checks"]["migrations"]["ok"] is False
            assert client.get("/healthz").json() == {"status": "ok"}
    finally:
        if not stopped:
            server.stop()
        shutil.rmtree(own, ignore_errors=True)


# -- metrics ------------------------------------------------------------------------------------


def test_metrics_count_http_requests_calls_transitions_and_skills(
    database_url: str, data_dir: Path
) -> None:
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s,
        httpx.Client(base_url=s.url, timeout=30) as client,
    ):
        before = scrape(client)
        done = call(client, "message/send", {"message": text_message("hello")})["result"]
        failed = call(client, "message/send", {"message": text_message("fail")})["result"]
        asking = call(client, "message/send", {"message": text_message("ask")})["result"]
        assert [t["status"]["state"] for t in (done, failed, asking)] == [
            "completed",
            "failed",
            "input-required",
        ]
        reply = text_message("yes", taskId=asking["id"], contextId=asking["contextId"])
        events = list(stream(client, "message/stream", {"message": reply}))
        assert events[-1].payload["result"]["status"]["state"] == "completed"
        assert call(client, "tasks/get", {"id": "no-such-task"})["error"]["code"] == -32001
        assert call(client, "tasks/frobnicate", {})["error"]["code"] == -32601
        unreadable = client.post("/", content=b"{not json", headers={"content-type": JSON})
        assert unreadable.json()["error"]["code"] == -32700
        assert client.get("/no/such/path").status_code == 404
        assert client.get("/no/such/page").status_code == 404  # MCP's mount answers
        after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    calls = "agentic_rag_jsonrpc_calls_total"
    assert delta(calls, method="message/send", outcome="ok") == 3
    assert delta(calls, method="message/stream", outcome="ok") == 1
    assert delta(calls, method="tasks/get", outcome="-32001") == 1
    assert delta(calls, method="<unknown>", outcome="-32601") == 1
    assert delta(calls, method="<invalid>", outcome="-32700") == 1

    transitions = "agentic_rag_task_transitions_total"
    assert delta(transitions, state="submitted") == 3
    assert delta(transitions, state="working") == 4  # the reply runs the skill again
    assert delta(transitions, state="completed") == 2
    assert delta(transitions, state="failed") == 1
    assert delta(transitions, state="input-required") == 1

    skills = "agentic_rag_skill_calls_total"
    assert delta(skills, skill="script", protocol="a2a", outcome="ok") == 2
    assert delta(skills, skill="script", protocol="a2a", outcome="error") == 1
    assert delta(skills, skill="script", protocol="a2a", outcome="input_required") == 1
    duration = "agentic_rag_skill_duration_seconds_count"
    assert delta(duration, skill="script", protocol="a2a") == 4

    http = "agentic_rag_http_requests_total"
    assert delta(http, route="/", method="POST", status="200") == 7
    assert delta(http, route="<unmatched>", method="GET", status="404") == 2
    assert delta(http, route="/metrics", method="GET", status="200") == 1  # the first scrape
    assert delta("agentic_rag_http_request_duration_seconds_count", route="/", method="POST") == 7
    assert value(after, "process_cpu_seconds_total") > 0


def test_a_client_that_leaves_mid_body_is_counted_not_logged_as_an_error(
    database_url: str, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that closes its connection before sending the body it announced (a load
    generator stopping, a peer timing out) is no server error: no traceback, no task."""
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s,
        httpx.Client(base_url=s.url, timeout=30) as client,
    ):
        before = scrape(client)
        host, port = s.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(
                b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b'Content-Length: 500\r\n\r\n{"jsonrpc": "2.0", "id": 1, "method": "mess'
            )
        calls = "agentic_rag_jsonrpc_calls_total"
        deadline = time.monotonic() + 10
        while value(scrape(client), calls, method="<invalid>", outcome="disconnected") < 1:
            assert time.monotonic() < deadline, "the disconnected call was never counted"
            time.sleep(0.05)
        after = scrape(client)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert value(after, "agentic_rag_task_transitions_total", state="submitted") == value(
        before, "agentic_rag_task_transitions_total", state="submitted"
    )


JSON = "application/json"


def test_each_app_has_its_own_metrics(database_url: str, data_dir: Path, tmp_path: Path) -> None:
    registry = conformance_registry()
    with (
        live_server(registry, database_url=database_url, data_dir=data_dir) as a,
        live_server(registry, database_url=database_url, data_dir=tmp_path / "b") as b,
        httpx.Client(base_url=a.url, timeout=30) as client_a,
        httpx.Client(base_url=b.url, timeout=30) as client_b,
    ):
        for _ in range(3):
            client_a.get("/healthz")
        call(client_a, "message/send", {"message": text_message("hello")})
        seen_a, seen_b = scrape(client_a), scrape(client_b)
    healthz = {"route": "/healthz", "method": "GET", "status": "200"}
    assert value(seen_a, "agentic_rag_http_requests_total", **healthz) == 3
    assert value(seen_b, "agentic_rag_http_requests_total", **healthz) == 0
    completed = ("agentic_rag_task_transitions_total", frozenset({("state", "completed")}))
    assert seen_a[completed] == 1
    assert completed not in seen_b


def test_metrics_with_a_token_need_it(database_url: str, data_dir: Path) -> None:
    with (
        live_server(
            conformance_registry(),
            database_url=database_url,
            data_dir=data_dir,
            metrics_token="scrape-token-123",
        ) as s,
        httpx.Client(base_url=s.url, timeout=30) as client,
    ):
        assert client.get("/metrics").status_code == 401
        wrong = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-12"})
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"].startswith("Bearer")
        basic = client.get("/metrics", headers={"Authorization": "Basic scrape-token-123"})
        assert basic.status_code == 401
        samples = scrape(client, Authorization="Bearer scrape-token-123")
        refused = {"route": "/metrics", "method": "GET", "status": "401"}
        assert value(samples, "agentic_rag_http_requests_total", **refused) == 3
        assert client.get("/healthz").status_code == 200  # probes stay open


def test_metrics_can_be_disabled(database_url: str, data_dir: Path) -> None:
    with (
        live_server(
            conformance_registry(),
            database_url=database_url,
            data_dir=data_dir,
            metrics_enabled=False,
        ) as s,
        httpx.Client(base_url=s.url, timeout=30) as client,
    ):
        assert client.get("/metrics").status_code == 404
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


async def test_metrics_need_an_admin_credential_once_keys_exist(
    pool: asyncpg.Pool, database_url: str, data_dir: Path
) -> None:
    keys = ApiKeyStore(pool)
    reader, _ = await keys.create("acme", ["read", "write"])
    admin, _ = await keys.create("ops", ["admin"])
    with live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s:
        async with httpx.AsyncClient(base_url=s.url, timeout=30) as client:
            anonymous = await client.get("/metrics")
            assert anonymous.status_code == 401
            assert (await client.get("/metrics", headers={"X-API-Key": reader})).status_code == 403
            allowed = await client.get("/metrics", headers={"X-API-Key": admin})
            assert allowed.status_code == 200
            assert "agentic_rag_http_requests_total" in allowed.text
            # The probes need no credential, the JSON-RPC endpoint does.
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            refused = await client.post(
                "/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}
            )
            assert refused.status_code == 401
            text = (await client.get("/metrics", headers={"X-API-Key": admin})).text
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    # Refused before routing, still counted under their route; the call body was never read.
    assert (
        value(samples, "agentic_rag_http_requests_total", route="/", method="POST", status="401")
        == 1
    )
    assert (
        value(samples, "agentic_rag_jsonrpc_calls_total", method="<unread>", outcome="-32010") == 1
    )


async def test_the_hooks_record_into_the_bound_metrics_only() -> None:
    first, second = observed.Metrics(), observed.Metrics()
    observed.record_rate_limited("api-key")  # nothing bound: nothing recorded, no error
    token = observed.bind(first)
    try:
        observed.record_rate_limited("api-key")
        observed.record_rate_limited("jwt")
        observed.record_rate_limited("api-key")
        with pytest.raises(ValueError), SkillCall("search", "mcp"):
            raise ValueError("boom")
        with SkillCall("search", "mcp"):
            pass
    finally:
        observed.unbind(token)
    observed.record_rate_limited("api-key")

    def sample(metrics: observed.Metrics, name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels) or 0.0

    limited = "agentic_rag_rate_limited_total"
    assert sample(first, limited, credential_kind="api-key") == 2
    assert sample(first, limited, credential_kind="jwt") == 1
    assert sample(second, limited, credential_kind="api-key") == 0
    calls = "agentic_rag_skill_calls_total"
    assert sample(first, calls, skill="search", protocol="mcp", outcome="exception") == 1
    assert sample(first, calls, skill="search", protocol="mcp", outcome="ok") == 1
    count = "agentic_rag_skill_duration_seconds_count"
    assert sample(first, count, skill="search", protocol="mcp") == 2
    assert "agentic_rag_rate_limited_total" in first.render().decode()


LAG = "agentic_rag_event_loop_lag_seconds"


def hold_the_loop(seconds: float) -> None:
    """What a CPU-bound step run on the event loop does to every other task of the loop."""
    time.sleep(seconds)


async def test_the_loop_lag_shows_a_step_that_holds_the_loop() -> None:
    metrics = observed.Metrics()

    def observations(le: str = "+Inf") -> float:
        return metrics.registry.get_sample_value(f"{LAG}_bucket", {"le": le}) or 0.0

    token = observed.bind(metrics)
    watcher = asyncio.create_task(watch_loop_lag(0.05))
    try:
        for _ in range(500):  # its first wake-up, within 10 s
            if observations():
                break
            await asyncio.sleep(0.02)
        late_before = observations() - observations("0.25")
        hold_the_loop(0.5)  # the watcher, asleep for 0.05 s, wakes at least 0.45 s late
        seen = observations()
        for _ in range(500):
            if observations() > seen:
                break
            await asyncio.sleep(0.02)
    finally:
        watcher.cancel()
        observed.unbind(token)
    assert observations() - observations("0.25") == late_before + 1


def test_the_loop_lag_adds_up_over_workers(tmp_path: Path) -> None:
    """With `serve --workers N` metrics are prometheus_client's, shared through files."""
    script = (
        "from agentic_rag.observability import metrics as m\n"
        "metrics = m.Metrics(); m.bind(metrics); m.record_loop_lag(0.3)\n"
        "print(metrics.render().decode())"
    )
    environment = {**os.environ, observed.METRICS_DIR_VARIABLE: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    samples = {
        (s.name, s.labels.get("le")): s.value
        for family in text_string_to_metric_families(done.stdout)
        for s in family.samples
    }
    assert samples[(f"{LAG}_bucket", "0.25")] == 0
    assert samples[(f"{LAG}_bucket", "0.5")] == 1


def test_a_live_server_measures_its_loop_lag(database_url: str, data_dir: Path) -> None:
    with (
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s,
        httpx.Client(base_url=s.url, timeout=30) as client,
    ):
        deadline = time.monotonic() + 30
        while not value(scrape(client), f"{LAG}_count"):
            assert time.monotonic() < deadline, "no loop lag measured within 30 s"
            time.sleep(0.1)


# -- the settings table in docs/operations.md --------------------------------------------------


def _settings_table_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "settings_table", ROOT / "scripts" / "settings_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_documented_settings_table_is_the_generated_one() -> None:
    script = _settings_table_script()
    table = script.settings_table()
    documented = script.documented_table((ROOT / "docs" / "operations.md").read_text())
    assert documented == table, "run scripts/settings_table.py --write"
    for name in Settings.model_fields:
        assert f"`{script.env_names(name, Settings.model_fields[name])[0]}`" in table


def test_every_setting_has_a_description() -> None:
    undocumented = [name for name, info in Settings.model_fields.items() if not info.description]
    assert undocumented == []


def test_every_metric_is_documented_with_its_labels() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text().splitlines()
    metrics = observed.Metrics()
    families = [f for f in metrics.registry.collect() if f.name.startswith("agentic_rag_")]
    assert len(families) == 13  # agentic_rag_event_loop_lag_seconds is the 13th
    for family in families:
        name = family.name + ("_total" if family.type == "counter" else "")
        rows = [line for line in doc if line.startswith(f"| `{name}` | {family.type} |")]
        assert len(rows) == 1, f"docs/operations.md lacks a row for {name}"
        collector = next(
            c for c in vars(metrics).values() if getattr(c, "name", None) == family.name
        )
        documented = {label.strip(" `") for label in rows[0].split("|")[3].split(",")} - {""}
        assert documented == set(collector.labelnames), name


async def test_a_loop_that_keeps_failing_logs_once_then_once_when_it_works_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A background loop during an outage: the first failure with its traceback, nothing for
    the next ones, then one line with the count when an attempt works; a later outage is
    logged again. The attempts are real connections to a port where nothing listens."""
    log = logging.getLogger("agentic_rag.test.outage")
    outage = RepeatedFailure(log, "looking for work")
    port = free_port()

    async def attempt() -> None:
        await asyncpg.connect(f"postgresql://nobody@127.0.0.1:{port}/none", timeout=2)

    with caplog.at_level(logging.INFO, logger=log.name):
        for _ in range(2):
            for _ in range(5):
                try:
                    await attempt()
                except OSError:
                    outage.failed()
            outage.succeeded()
    records = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    failed = ("ERROR", "looking for work failed; retrying quietly until it succeeds again", True)
    assert [r[:1] + r[2:] for r in records] == [("ERROR", True), ("WARNING", False)] * 2
    assert records[0] == records[2] == failed
    assert records[1][1].startswith("looking for work works again after 5 failed attempts in ")

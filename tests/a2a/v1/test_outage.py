"""A2A 1.0 while the database is down: each binding refuses at once, in its own terms, with
`Retry-After`, and answers again once the database is back, with no restart (docs/operations.md,
"When a store is down"). A PostgreSQL of the test's own is stopped under the server."""

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentic_rag.security.auth import KEYS_RECHECK_SECONDS, UNAVAILABLE_RETRY_SECONDS
from conformance.skills import conformance_registry
from tests.support.cluster import ExternalPostgres, wait_for
from tests.support.live import LiveServer, live_server

V1 = {"A2A-Version": "1.0"}


def message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def rest_send(server: LiveServer, text: str) -> httpx.Response:
    body = {"message": message(text)}
    return httpx.post(server.url + "/json/message:send", json=body, headers=V1, timeout=30)


def rpc(server: LiveServer, method: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}
    return httpx.post(server.url + "/", json=body, headers=V1, timeout=30)


@pytest.fixture
def postgres() -> Iterator[ExternalPostgres]:
    with ExternalPostgres() as server:
        yield server


def test_both_bindings_refuse_to_retry_while_the_database_is_down(
    postgres: ExternalPostgres, tmp_path: Path
) -> None:
    registry = conformance_registry()
    with live_server(registry, database_url=postgres.database(), data_dir=tmp_path) as server:
        before = rest_send(server, "before").json()["task"]
        assert before["status"]["state"] == "TASK_STATE_COMPLETED"
        with postgres.outage():
            # Open local mode looks for new keys at most every KEYS_RECHECK_SECONDS: past it,
            # each request meets that check too, which must not answer for the binding.
            time.sleep(KEYS_RECHECK_SECONDS)
            sent = rest_send(server, "during")
            got = httpx.get(f"{server.url}/json/tasks/{before['id']}", headers=V1, timeout=30)
            called = rpc(server, "SendMessage", {"message": message("during")})
            read = rpc(server, "GetTask", {"id": before["id"]})
        # HTTP+JSON: 503 with the gRPC status that says to retry, and when.
        for refused in (sent, got):
            assert refused.status_code == 503, refused.text
            assert refused.headers["retry-after"] == str(UNAVAILABLE_RETRY_SECONDS)
            error = refused.json()["error"]
            assert (error["code"], error["status"]) == (503, "UNAVAILABLE")
            assert error["message"] == "the database cannot be reached now; retry shortly"
        # JSON-RPC: -32603 saying why, with the same header, as the 0.x binding answers.
        for refused in (called, read):
            assert refused.status_code == 200
            assert refused.headers["retry-after"] == str(UNAVAILABLE_RETRY_SECONDS)
            error = refused.json()["error"]
            assert error["code"] == -32603
            assert error["message"] == "the database cannot be reached now; retry shortly"
        # Back without a restart.
        wait_for("a send completes again", lambda: rest_send(server, "after").is_success, 60)
        answer = rpc(server, "GetTask", {"id": before["id"]}).json()
        assert answer["result"]["status"]["state"] == "TASK_STATE_COMPLETED"

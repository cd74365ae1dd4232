"""A database that stops answering (its processes paused, as on a frozen host: connections stay
open, nothing comes back) is an outage like one that refuses connections: each call is refused
with -32603 and `Retry-After` within the statement and pool-acquire timeouts, never held for as
long as the freeze lasts, and the server serves again once it thaws (docs/operations.md)."""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance.skills import conformance_registry
from tests.support.cluster import UNFINISHED, ExternalPostgres, query, wait_for
from tests.support.live import LiveServer, live_server
from tests.support.rpc import text_message

CLIENT_SECONDS = 60  # far beyond the server's timeouts below: a hang fails, an answer passes
CONCURRENT = 6  # above the pool's 2 connections, so some calls wait to acquire one


@pytest.fixture
def postgres() -> Iterator[ExternalPostgres]:
    with ExternalPostgres() as server:
        yield server


def rpc(server: LiveServer, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}
    return httpx.post(server.url + "/", json=body, headers=headers, timeout=CLIENT_SECONDS)


def send(server: LiveServer, text: str) -> httpx.Response:
    return rpc(server, "message/send", {"message": text_message(text)})


def test_a_frozen_database_is_refused_with_retry_after_not_waited_for(
    postgres: ExternalPostgres, tmp_path: Path
) -> None:
    database_url = postgres.database()
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=tmp_path,
        database_pool_size=2,
        database_statement_timeout_seconds=2,
        database_acquire_timeout_seconds=2,
    ) as server:
        before = send(server, "before").json()["result"]
        assert before["status"]["state"] == "completed"
        calls = [lambda: send(server, "during")] * (CONCURRENT - 2) + [
            lambda: rpc(server, "tasks/get", {"id": before["id"]}),
            lambda: rpc(server, "GetTask", {"id": before["id"]}, **{"A2A-Version": "1.0"}),
        ]
        with postgres.frozen(), ThreadPoolExecutor(CONCURRENT) as pool:
            answers = list(pool.map(lambda call: call(), calls))
        for answer in answers:
            # -32603 from the call itself: open local mode's look for new keys, which meets
            # the frozen database too, leaves the answer to the binding.
            assert answer.status_code == 200, answer.text
            assert answer.headers["retry-after"] == "1", answer.text
            assert answer.json()["error"]["code"] == -32603, answer.text
        wait_for("a send completes again", lambda: send(server, "after").is_success, 60)
        after = rpc(server, "tasks/get", {"id": before["id"]}).json()["result"]
        assert after["status"]["state"] == "completed"

        # Whatever a refused send had stored before the freeze ends, none is left unfinished.
        def unfinished() -> list[str]:
            sql = "SELECT id FROM tasks WHERE state = ANY($1::text[])"
            return [row["id"] for row in query(database_url, sql, list(UNFINISHED))]

        wait_for("every task ends", lambda: not unfinished(), 60)

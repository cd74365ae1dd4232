"""MCP sessions over Streamable HTTP (mcp/sessions.py): a 2025-11-25 client that initializes gets
one, and with it the requests a call makes to its client (elicitation, sampling); a session is
its opener's alone, and a tenant holds a bounded number.

The server is the product's (a real PostgreSQL, the embedded graph, no server LLM) under
uvicorn, with keys of two tenants; clients are the SDK's `mcp.Client` in its handshake mode
(protocol 2025-11-25), and raw HTTP where the test needs the session id itself.
"""

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from tests.support.databases import new_database
from tests.support.live import LiveServer, live_server
from tests.support.mcp import Elicitations, text_of, until
from tests.support.security import create_keys

LIGHTHOUSE = (
    "The lighthouse at Point Reyes was built in 1870. Its lens has twenty-four panels and "
    "was made in Paris."
)
QUESTION = "When was the lighthouse at Point Reyes built?"
REPLY = "The lighthouse at Point Reyes was built in 1870 [1]."
JSON_ONLY = {"Accept": "application/json", "Content-Type": "application/json"}
PER_TENANT = 3  # AGENTIC_RAG_MCP_SESSIONS_PER_TENANT of the server below


@pytest.fixture(scope="module")
async def keys(postgres_dsn: str) -> tuple[str, dict[str, str]]:
    """Two keys of tenant alpha, one of beta; made before the server starts, so it needs them."""
    database_url = await new_database(postgres_dsn)
    scopes = ["read", "write"]
    made = await create_keys(database_url, "alpha", first=scopes, second=scopes)
    made |= await create_keys(database_url, "beta", beta=scopes)
    return database_url, made


@pytest.fixture(scope="module")
async def server(
    keys: tuple[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    with live_server(
        None,
        database_url=keys[0],
        data_dir=tmp_path_factory.mktemp("sessions"),
        mcp_sessions_per_tenant=PER_TENANT,
    ) as live:
        yield live


@pytest.fixture
def key(keys: tuple[str, dict[str, str]]) -> dict[str, str]:
    return keys[1]


def legacy_client(server: LiveServer, key: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=120)
    transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
    return Client(transport, mode="legacy", **options)


# -- what a session carries ---------------------------------------------------------------


async def test_clear_graph_asks_its_confirmation_in_the_session(
    server: LiveServer, key: dict[str, str]
) -> None:
    declined, confirmed = Elicitations({"answer": "no"}), Elicitations({"answer": "yes"})
    async with legacy_client(server, key["first"], elicitation_callback=declined) as client:
        assert client.protocol_version == "2025-11-25"
        kept = await client.call_tool("clear_graph", {})
    async with legacy_client(server, key["first"], elicitation_callback=confirmed) as client:
        cleared = await client.call_tool("clear_graph", {})
    (question,) = declined.asked
    assert question.message.startswith("Clear the graph of ")
    assert kept.is_error and "was not confirmed: nothing was deleted" in text_of(kept)
    assert len(confirmed.asked) == 1
    assert not cleared.is_error, text_of(cleared)
    assert "Graph data cleared successfully" in text_of(cleared)


class ClientModel:
    """The client's model, as a sampling callback: it replies `REPLY` and keeps the requests."""

    def __init__(self) -> None:
        self.asked: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=REPLY), model="test"
        )


async def test_hybrid_retrieve_answers_with_the_clients_model_through_the_session(
    server: LiveServer, key: dict[str, str]
) -> None:
    model = ClientModel()
    async with legacy_client(server, key["beta"], sampling_callback=model) as client:
        ingested = await client.call_tool("ingest_text", {"text": LIGHTHOUSE, "title": "Light"})
        assert not ingested.is_error, text_of(ingested)
        result = await client.call_tool(
            "hybrid_retrieve", {"query": QUESTION, "use_client_model": True}
        )
    assert not result.is_error and result.structured_content is not None, text_of(result)
    answer = result.structured_content["answer"]
    assert answer["mode"] == "client-model", answer
    assert answer["text"] == REPLY
    (asked,) = model.asked  # the passages went to the client's model, in one request
    sent = " ".join(
        m.content.text for m in asked.messages if isinstance(m.content, types.TextContent)
    )
    assert "built in 1870" in sent and QUESTION in sent


# -- whose a session is, and how many --------------------------------------------------------


async def initialize(http: httpx.AsyncClient, url: str, key: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    return await http.post(url, json=body, headers={**JSON_ONLY, "X-API-Key": key})


async def ping(http: httpx.AsyncClient, url: str, key: str, session: str) -> httpx.Response:
    headers = {**JSON_ONLY, "X-API-Key": key, "Mcp-Session-Id": session}
    headers["MCP-Protocol-Version"] = "2025-11-25"
    return await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)


async def end(http: httpx.AsyncClient, url: str, key: str, session: str) -> httpx.Response:
    return await http.delete(url, headers={"X-API-Key": key, "Mcp-Session-Id": session})


async def test_a_session_is_refused_to_any_other_credential(
    server: LiveServer, key: dict[str, str]
) -> None:
    url = f"{server.url}/mcp"
    async with httpx.AsyncClient(timeout=60) as http:
        opened = await initialize(http, url, key["first"])
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        other_tenant = await ping(http, url, key["beta"], session)
        other_key = await ping(http, url, key["second"], session)  # alpha's too, but another key
        ending = await end(http, url, key["beta"], session)
        owner = await ping(http, url, key["first"], session)
        await end(http, url, key["first"], session)
        gone = await ping(http, url, key["first"], session)
    # Refused as if it did not exist: nothing says the session is there.
    for refused in (other_tenant, other_key, ending):
        assert refused.status_code == 404
        assert refused.json()["error"]["message"] == "Session not found"
    assert owner.status_code == 200 and owner.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert gone.status_code == 404  # ended by its owner: gone


async def test_a_tenant_holds_a_bounded_number_of_sessions(
    server: LiveServer, key: dict[str, str]
) -> None:
    url = f"{server.url}/mcp"
    async with httpx.AsyncClient(timeout=60) as http:
        sessions = []
        for _ in range(PER_TENANT):
            opened = await initialize(http, url, key["first"])
            assert opened.status_code == 200, opened.text
            sessions.append(opened.headers["mcp-session-id"])
        refused = await initialize(http, url, key["second"])  # the limit is the tenant's
        beta = await initialize(http, url, key["beta"])  # another tenant's is not reached
        await end(http, url, key["first"], sessions.pop())
        again = await initialize(http, url, key["second"])  # room again, once one ended
        for session in [*sessions, again.headers["mcp-session-id"]]:
            await end(http, url, key["first" if session in sessions else "second"], session)
        await end(http, url, key["beta"], beta.headers["mcp-session-id"])
    assert refused.status_code == 429 and "mcp-session-id" not in refused.headers
    message = refused.json()["error"]["message"]
    assert message.startswith(f"tenant 'alpha' holds {PER_TENANT} MCP sessions, the most it may")
    assert beta.status_code == 200 and again.status_code == 200


async def test_a_request_without_a_session_is_answered_statelessly(
    server: LiveServer, key: dict[str, str]
) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
    body["params"] = {"name": "help", "arguments": {}}
    headers = {**JSON_ONLY, "X-API-Key": key["beta"], "MCP-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient(timeout=60) as http:
        answered = await http.post(f"{server.url}/mcp", json=body, headers=headers)
    assert answered.status_code == 200, answered.text
    assert "mcp-session-id" not in answered.headers
    assert not answered.json()["result"].get("isError")


# -- a server that offers no session ------------------------------------------------------


async def test_without_sessions_every_request_is_stateless_and_says_why_it_cannot_ask(
    keys: tuple[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What several workers serve (a session would live in one of them), set here by
    AGENTIC_RAG_MCP_SESSIONS=false on one worker, which takes the same path."""
    database_url, key = keys
    asked = Elicitations({"answer": "never asked"})
    with live_server(
        None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("stateless"),
        mcp_sessions=False,
    ) as live:
        async with httpx.AsyncClient(timeout=60) as http:
            opened = await initialize(http, f"{live.url}/mcp", key["beta"])
        async with legacy_client(live, key["beta"], elicitation_callback=asked) as client:
            capabilities = client.server_capabilities
            refused = await client.call_tool("clear_graph", {})
    assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
    assert capabilities.resources is not None and not capabilities.resources.subscribe
    assert not capabilities.resources.list_changed
    assert refused.is_error and not asked.asked
    assert "whose elicitation needs a session, and this request came without one" in (
        text_of(refused)
    )


async def test_open_sessions_are_closed_when_the_server_stops(
    keys: tuple[str, dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    database_url, key = keys

    def closed(session: str) -> bool:  # the SDK's line as it terminates the session's transport
        return any(r.getMessage() == f"Terminating session: {session}" for r in caplog.records)

    with caplog.at_level(logging.DEBUG, logger="mcp.server.streamable_http"):
        with live_server(
            None, database_url=database_url, data_dir=tmp_path_factory.mktemp("stopping")
        ) as live:
            async with httpx.AsyncClient(timeout=60) as http:
                opened = await initialize(http, f"{live.url}/mcp", key["beta"])
            session = opened.headers["mcp-session-id"]
            open_while_serving = not closed(session)
        closed_at_stop = closed(session)
    assert open_while_serving and closed_at_stop


async def test_an_idle_session_expires(
    keys: tuple[str, dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    database_url, key = keys
    with (
        caplog.at_level(logging.INFO, logger="mcp.server.streamable_http_manager"),
        live_server(
            None,
            database_url=database_url,
            data_dir=tmp_path_factory.mktemp("idle"),
            mcp_session_idle_seconds=0.5,
        ) as live,
    ):
        url = f"{live.url}/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            opened = await initialize(http, url, key["beta"])
            session = opened.headers["mcp-session-id"]
            alive = await ping(http, url, key["beta"], session)
            # No request in flight and no GET stream open: the server closes it on its own.
            expired = f"Session {session} idle timeout"
            await until(lambda: any(r.getMessage() == expired for r in caplog.records))
            gone = await ping(http, url, key["beta"], session)
    assert alive.status_code == 200
    assert gone.status_code == 404 and gone.json()["error"]["message"] == "Session not found"

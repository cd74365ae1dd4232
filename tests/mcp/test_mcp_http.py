"""MCP over Streamable HTTP at /mcp, driven by the official SDK client and by raw HTTP.

The servers are real: the whole app under uvicorn (tests/support/live.py) on a real PostgreSQL.
"""

import asyncio
import http.client
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import mcp.types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from agentic_rag.mcp.listing import input_schema, output_schema
from agentic_rag.security.auth import FORBIDDEN
from agentic_rag.skills.help import HelpInput, HelpOutput, default_registry
from conformance.skills import ScriptInput, ScriptOutput, conformance_registry
from tests.support.databases import new_database
from tests.support.live import LiveServer, live_server
from tests.support.mcp import (
    Elicitations,
    Progress,
    keyed_client,
    mcp_url,
    text_of,
    until,
    watched_registry,
)
from tests.support.security import create_keys

# -- servers ------------------------------------------------------------------------------


@dataclass
class Watched:
    server: LiveServer
    events: list[str] = field(default_factory=list)

    @property
    def mcp(self) -> str:
        return f"{self.server.url}/mcp"


@pytest.fixture(scope="module")
async def watched(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Watched]:
    """A server with the watched skills, in open local mode (every caller is `local`)."""
    events: list[str] = []
    with live_server(
        watched_registry(events.append),
        database_url=await new_database(postgres_dsn),
        data_dir=tmp_path_factory.mktemp("watched"),
    ) as server:
        yield Watched(server, events)


# -- tools/list ---------------------------------------------------------------------------


async def test_tools_are_the_skills_with_their_models_schemas(sut: LiveServer) -> None:
    registry = conformance_registry()
    async with Client(mcp_url(sut)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(tools) == sorted(skill.name for skill in registry)
    script = tools["script"]
    # The models' schemas, made compact by the listing's rules (listing.py).
    assert script.input_schema == input_schema(ScriptInput)
    assert script.output_schema == output_schema(ScriptOutput)
    assert script.description == registry.get("script").description  # type: ignore[union-attr]
    assert tools["help"].input_schema == input_schema(HelpInput)
    assert tools["help"].output_schema == output_schema(HelpOutput)
    assert tools["help"].description == registry.get("help").summary  # type: ignore[union-attr]


async def test_the_default_registry_is_served_too(database_url: str, data_dir: Path) -> None:
    with live_server(default_registry(), database_url=database_url, data_dir=data_dir) as server:
        async with Client(mcp_url(server)) as client:
            tools = (await client.list_tools()).tools
            result = await client.call_tool("help", {"topic": "help"})
    assert [t.name for t in tools] == ["help"]
    assert tools[0].input_schema == input_schema(HelpInput)
    assert not result.is_error
    output = HelpOutput.model_validate(result.structured_content)
    assert [s.name for s in output.skills] == ["help"]
    assert text_of(result).startswith(output.how_to_call)


async def test_without_the_knowledge_engine_there_are_no_resources_or_prompts(
    sut: LiveServer,
) -> None:
    async with Client(mcp_url(sut)) as client:
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        prompts = await client.list_prompts()
        with pytest.raises(MCPError) as unread:
            await client.read_resource("agentic-rag://documents/any")
    assert (resources.resources, templates.resource_templates, prompts.prompts) == ([], [], [])
    assert unread.value.code == types.INVALID_PARAMS
    assert unread.value.message == "unknown resource 'agentic-rag://documents/any'"


# -- tools/call ---------------------------------------------------------------------------


async def test_a_call_returns_structured_and_text_content(sut: LiveServer) -> None:
    async with Client(mcp_url(sut)) as client:
        result = await client.call_tool("script", {"text": "hello"})
    assert not result.is_error
    assert result.structured_content == {"text": "hello"}
    assert text_of(result) == "hello"  # the skill's render


async def test_progress_reaches_the_client(sut: LiveServer) -> None:
    progress = Progress()
    async with Client(mcp_url(sut)) as client:
        result = await client.call_tool("script", {"text": "task 3 10"}, progress_callback=progress)
    assert result.structured_content == {"text": "done after 3 updates"}
    assert progress.seen == [(1, "step 1 of 3"), (2, "step 2 of 3"), (3, "step 3 of 3")]


async def test_partial_chunks_arrive_as_progress_messages(watched: Watched) -> None:
    progress = Progress()
    async with Client(watched.mcp) as client:
        result = await client.call_tool("chunks", {}, progress_callback=progress)
    assert progress.seen == [(1, "Hello, "), (2, "world")]
    assert result.structured_content == {"text": "Hello, world"}


async def test_the_skill_runs_as_the_callers_tenant(watched: Watched) -> None:
    async with Client(watched.mcp) as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content == {"tenant": "local"}  # open local mode


async def test_a_question_is_elicited_and_the_answer_completes_the_call(sut: LiveServer) -> None:
    elicit = Elicitations({"answer": "forty-two"})
    async with Client(mcp_url(sut), elicitation_callback=elicit) as client:
        assert client.protocol_version == "2026-07-28"  # asked in an input_required result
        result = await client.call_tool("script", {"text": "ask"})
    assert not result.is_error, text_of(result)
    assert result.structured_content == {"text": "you said: forty-two"}
    (asked,) = elicit.asked
    assert asked.message == "What should I answer? Reply on this task."
    assert asked.requested_schema["required"] == ["answer"]


async def test_a_missing_argument_is_elicited_and_merged(sut: LiveServer) -> None:
    elicit = Elicitations({"text": "filled in"})
    async with Client(mcp_url(sut), elicitation_callback=elicit) as client:
        result = await client.call_tool("script", {})
    assert result.structured_content == {"text": "filled in"}
    (asked,) = elicit.asked
    # The form field is the model's own field schema.
    assert asked.requested_schema["properties"] == {
        "text": ScriptInput.model_json_schema()["properties"]["text"]
    }


async def test_an_asked_argument_is_merged_into_the_arguments(watched: Watched) -> None:
    elicit = Elicitations({"confirm": True})
    async with Client(watched.mcp, elicitation_callback=elicit) as client:
        result = await client.call_tool("delete", {"target": "old notes"})
    assert result.structured_content == {"text": "deleted old notes"}
    (asked,) = elicit.asked
    assert asked.message == "Really delete old notes?"
    assert asked.requested_schema["properties"]["confirm"]["type"] == "boolean"


PAINT_FORM = {
    "colour": {
        "type": "string",
        "title": "Colour",
        "description": "The paint's colour",
        "enum": ["red", "ochre"],
    },
    "shades": {
        "type": "array",
        "title": "Shades",
        "minItems": 1,
        "items": {"type": "string", "enum": ["light", "dark"]},
    },
    "finish": {"type": "string", "title": "Finish", "enum": ["matte", "gloss"], "default": "matte"},
}


async def test_choices_are_asked_as_enums_with_their_defaults(watched: Watched) -> None:
    # An Enum (a $ref), an optional field (anyOf with null), a list of Literal choices
    # (a multi-select) and a default: the spec's form fields, not the model's raw schema.
    elicit = Elicitations({"colour": "ochre", "shades": ["light", "dark"], "finish": "gloss"})
    async with Client(watched.mcp, elicitation_callback=elicit) as client:
        result = await client.call_tool("paint", {})
    assert result.structured_content == {"text": "gloss ochre in light and dark"}
    (asked,) = elicit.asked
    assert asked.requested_schema["properties"] == PAINT_FORM
    assert asked.requested_schema["required"] == ["colour", "shades", "finish"]


async def test_a_declined_question_ends_the_call_with_an_error(sut: LiveServer) -> None:
    elicit = Elicitations(action="decline")
    async with Client(mcp_url(sut), elicitation_callback=elicit) as client:
        result = await client.call_tool("script", {"text": "ask"})
    assert result.is_error
    assert text_of(result) == (
        "the user declined the question, so the tool cannot go on: "
        "What should I answer? Reply on this task."
    )


async def test_without_elicitation_the_error_says_what_is_missing(sut: LiveServer) -> None:
    async with Client(mcp_url(sut)) as client:
        # A person's answer needs elicitation: a 2026-07-28 request that did not declare it
        # is refused (MissingRequiredClientCapabilityError); missing arguments the model can
        # send, so their call ends isError naming them.
        with pytest.raises(MCPError) as asked:
            await client.call_tool("script", {"text": "ask"})
        missing = await client.call_tool("script", {})
    assert asked.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert asked.value.message == (
        "tool 'script' needs an answer to: What should I answer? Reply on this task. It cannot "
        "ask for it because the client does not support elicitation (form mode)."
    )
    assert asked.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert missing.is_error
    assert text_of(missing) == (
        "tool 'script' needs input: Which text should tool 'script' use? Missing arguments: "
        "text. It cannot ask for them because the client does not support elicitation (form "
        "mode); call it again with them."
    )


async def test_a_handshake_era_client_is_asked_in_its_session(sut: LiveServer) -> None:
    elicit = Elicitations({"answer": "in my session"})
    async with Client(mcp_url(sut), mode="legacy", elicitation_callback=elicit) as client:
        assert client.protocol_version == "2025-11-25"
        result = await client.call_tool("script", {"text": "ask"})
    assert [q.message for q in elicit.asked] == ["What should I answer? Reply on this task."]
    assert not result.is_error and text_of(result) == "you said: in my session"


async def test_a_handshake_era_request_without_a_session_is_told_why_it_cannot_be_asked(
    sut: LiveServer,
) -> None:
    headers, body = legacy_call("ask")
    async with httpx.AsyncClient() as http:
        response = await http.post(
            mcp_url(sut),
            content=body,
            headers={**headers, "Accept": JSON_ONLY, "Content-Type": "application/json"},
        )
    result = response.json()["result"]
    assert result["isError"]
    assert (
        "whose elicitation needs a session, and this request came without one"
        in (result["content"][0]["text"])
    )


async def test_a_skill_failure_is_an_error_result(sut: LiveServer) -> None:
    async with Client(mcp_url(sut)) as client:
        result = await client.call_tool("script", {"text": "fail"})
    assert result.is_error and result.structured_content is None
    assert text_of(result) == "tool 'script' failed: failed as asked: the message was 'fail'"


async def test_invalid_arguments_are_an_error_result(sut: LiveServer) -> None:
    async with Client(mcp_url(sut)) as client:
        result = await client.call_tool("script", {"text": 42})
    assert result.is_error
    assert text_of(result) == (
        "invalid arguments for tool 'script': text: Input should be a valid string"
    )


async def test_an_unexpected_exception_stays_in_the_server_log(watched: Watched) -> None:
    async with Client(watched.mcp) as client:
        result = await client.call_tool("boom", {})
    assert result.is_error
    text = text_of(result)
    assert text.startswith("tool 'boom' failed with an internal error (ref ")
    assert "hunter2" not in text and "Traceback" not in text and "RuntimeError" not in text


async def test_an_unknown_tool_is_a_protocol_error(sut: LiveServer) -> None:
    async with Client(mcp_url(sut)) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("nope", {})
    assert raised.value.code == types.INVALID_PARAMS
    assert raised.value.message == "unknown tool 'nope'; this server has: script, help"


# -- cancellation -------------------------------------------------------------------------


async def test_cancelling_a_call_stops_the_skill(watched: Watched) -> None:
    progress = Progress()
    async with Client(watched.mcp) as client:
        with anyio.move_on_after(0.6) as scope:
            await client.call_tool(
                "slow", {"steps": 100, "delay_ms": 100}, progress_callback=progress
            )
        assert scope.cancelled_caught
        await until(lambda: "cancelled" in watched.events)
        steps = len(watched.events)
        await anyio.sleep(0.5)
        # Nothing ran after the cancellation, and it never finished.
        assert len(watched.events) == steps
        assert "finished" not in watched.events
        # The client is still usable afterwards.
        assert (await client.call_tool("whoami", {})).structured_content == {"tenant": "local"}
    assert 1 <= len(progress.seen) < 100


async def test_a_handshake_era_client_cancels_over_stateless_http(watched: Watched) -> None:
    # Its notifications/cancelled comes in a POST of its own, not on the call's connection.
    watched.events.clear()
    async with Client(watched.mcp, mode="legacy") as client:
        with anyio.move_on_after(0.6) as scope:
            await client.call_tool("slow", {"steps": 30, "delay_ms": 100})
        assert scope.cancelled_caught
        await until(lambda: "cancelled" in watched.events)
        steps = len(watched.events)
        await anyio.sleep(0.5)  # the client stays connected: the skill stopped on its own
        assert len(watched.events) == steps and "finished" not in watched.events


async def test_cancelling_a_long_script_task_ends_the_call(sut: LiveServer) -> None:
    progress = Progress()
    async with Client(mcp_url(sut)) as client:
        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("script", {"text": "task 100 100"}, progress_callback=progress)
        assert scope.cancelled_caught
        seen = len(progress.seen)
        await anyio.sleep(0.4)
    assert 1 <= seen == len(progress.seen) < 100


async def test_tool_calls_are_counted_as_mcp_skill_calls(watched: Watched) -> None:
    async with Client(watched.mcp) as client:
        await client.call_tool("whoami", {})
        await client.call_tool("boom", {})
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(f"{watched.server.url}/metrics")).text

    def count(skill: str, outcome: str) -> float:
        labels = {f'skill="{skill}"', 'protocol="mcp"', f'outcome="{outcome}"'}
        for line in metrics.splitlines():
            name, _, rest = line.partition("{")
            if name == "agentic_rag_skill_calls_total" and labels <= set(
                rest.split("}")[0].split(",")
            ):
                return float(line.rsplit(" ", 1)[1])
        return 0

    assert count("whoami", "ok") >= 1
    assert count("boom", "exception") >= 1


# -- scopes and tenants -------------------------------------------------------------------


@dataclass
class Keyed:
    server: LiveServer
    keys: dict[str, str]


@pytest.fixture
async def keyed(database_url: str, data_dir: Path) -> AsyncIterator[Keyed]:
    """A server with API keys (so credentials are required) of tenant `acme`."""
    keys = await create_keys(
        database_url, "acme", read=["read"], write=["write"], both=["read", "write"]
    )
    with live_server(
        watched_registry(lambda event: None), database_url=database_url, data_dir=data_dir
    ) as server:
        yield Keyed(server, keys)


async def test_tools_call_needs_the_write_scope(keyed: Keyed) -> None:
    async with keyed_client(mcp_url(keyed.server), keyed.keys["read"]) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"script", "whoami"}
        with pytest.raises(MCPError) as raised:
            await client.call_tool("whoami", {})
    assert raised.value.code == FORBIDDEN
    assert raised.value.message == "this credential lacks the scope 'write' that tools/call needs"


async def test_tools_list_needs_the_read_scope(keyed: Keyed) -> None:
    async with keyed_client(mcp_url(keyed.server), keyed.keys["write"], mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.list_tools()
    assert raised.value.code == FORBIDDEN
    assert raised.value.message == "this credential lacks the scope 'read' that tools/list needs"


async def test_the_tenant_is_the_credentials(keyed: Keyed) -> None:
    async with keyed_client(mcp_url(keyed.server), keyed.keys["both"]) as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content == {"tenant": "acme"}


# -- the HTTP transport: stateless, JSON or SSE as the client accepts ----------------------

MODERN = "2026-07-28"
JSON_ONLY = "application/json"
BOTH = "application/json, text/event-stream"


def modern_call(text: str, *, progress_token: str | None = None) -> tuple[dict[str, str], bytes]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if progress_token is not None:
        meta["progressToken"] = progress_token
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "script", "arguments": {"text": text}, "_meta": meta},
    }
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "script"}
    return headers, json.dumps(body).encode()


def legacy_call(text: str, *, progress_token: str | None = None) -> tuple[dict[str, str], bytes]:
    params: dict[str, Any] = {"name": "script", "arguments": {"text": text}}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    return {"MCP-Protocol-Version": "2025-11-25"}, json.dumps(body).encode()


def sse_messages(body: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data:").strip())
        for line in body.splitlines()
        if line.startswith("data:") and line.removeprefix("data:").strip()
    ]


@pytest.mark.parametrize("call", [modern_call, legacy_call], ids=["2026-07-28", "2025-11-25"])
async def test_a_client_accepting_only_json_gets_one_json_response(
    sut: LiveServer, call: Callable[..., tuple[dict[str, str], bytes]]
) -> None:
    headers, body = call("task 2 10", progress_token="p1")
    async with httpx.AsyncClient() as http:
        response = await http.post(
            mcp_url(sut),
            content=body,
            headers={**headers, "Accept": JSON_ONLY, "Content-Type": "application/json"},
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in response.headers  # stateless: no session to keep
    answer = response.json()
    assert answer["id"] == 7
    assert answer["result"]["structuredContent"] == {"text": "done after 2 updates"}


@pytest.mark.parametrize("call", [modern_call, legacy_call], ids=["2026-07-28", "2025-11-25"])
async def test_a_client_accepting_sse_gets_progress_on_an_event_stream(
    sut: LiveServer, call: Callable[..., tuple[dict[str, str], bytes]]
) -> None:
    headers, body = call("task 2 10", progress_token="p1")
    async with httpx.AsyncClient() as http:
        response = await http.post(
            mcp_url(sut),
            content=body,
            headers={**headers, "Accept": BOTH, "Content-Type": "application/json"},
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "mcp-session-id" not in response.headers
    *notifications, answer = sse_messages(response.text)
    assert [n["params"]["message"] for n in notifications] == ["step 1 of 2", "step 2 of 2"]
    assert {n["method"] for n in notifications} == {"notifications/progress"}
    assert {n["params"]["progressToken"] for n in notifications} == {"p1"}
    assert answer["result"]["structuredContent"] == {"text": "done after 2 updates"}


async def test_requests_need_no_session_and_no_handshake(sut: LiveServer) -> None:
    # Two separate clients, and a bare request that never initialized: any worker can answer.
    async with Client(mcp_url(sut), mode="legacy") as first, Client(mcp_url(sut)) as second:
        a = await first.call_tool("script", {"text": "one"})
        b = await second.call_tool("script", {"text": "two"})
    assert (a.structured_content, b.structured_content) == ({"text": "one"}, {"text": "two"})
    headers, body = legacy_call("three")
    async with httpx.AsyncClient() as http:
        response = await http.post(
            mcp_url(sut),
            content=body,
            headers={**headers, "Accept": JSON_ONLY, "Content-Type": "application/json"},
        )
    assert response.json()["result"]["structuredContent"] == {"text": "three"}


async def test_the_a2a_routes_still_answer_beside_mcp(sut: LiveServer) -> None:
    async with httpx.AsyncClient() as http:
        card = await http.get(f"{sut.url}/.well-known/agent.json")
        rpc = await http.post(
            f"{sut.url}/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "none"}},
        )
    assert card.status_code == 200 and card.json()["name"]
    assert rpc.json()["error"]["code"] == -32001  # task not found: answered by A2A


async def test_a_foreign_host_header_is_refused(sut: LiveServer) -> None:
    headers, body = legacy_call("hello")
    async with httpx.AsyncClient() as http:
        response = await http.post(
            mcp_url(sut),
            content=body,
            headers={
                **headers,
                "Accept": JSON_ONLY,
                "Content-Type": "application/json",
                "Host": "evil.example:80",
            },
        )
    assert response.status_code == 421  # DNS-rebinding protection


# -- header values, and what the transport logs ---------------------------------------------


def post_verbatim(url: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, Any]:
    """POST with the header values exactly as given (httpx refuses surrounding whitespace)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.putrequest("POST", parts.path)
        for name, value in [*headers, ("Content-Length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


async def test_routing_header_values_are_read_without_surrounding_whitespace(
    sut: LiveServer,
) -> None:
    # RFC 9110 §5.5: whitespace around a field value is not part of it.
    headers, body = modern_call("hello")
    padded = [(name, f" {value} \t") for name, value in headers.items()]
    sent = [*padded, ("Accept", JSON_ONLY), ("Content-Type", "application/json")]
    status, answer = await asyncio.to_thread(post_verbatim, mcp_url(sut), sent, body)
    assert status == 200, answer
    assert answer["result"]["structuredContent"] == {"text": "hello"}


async def test_an_mcp_name_that_differs_from_the_body_is_still_refused(sut: LiveServer) -> None:
    headers, body = modern_call("hello")
    sent = [*{**headers, "Mcp-Name": " help "}.items(), ("Accept", JSON_ONLY)]
    sent.append(("Content-Type", "application/json"))
    status, answer = await asyncio.to_thread(post_verbatim, mcp_url(sut), sent, body)
    assert status == 400
    assert answer["error"]["code"] == -32020  # the SDK's HEADER_MISMATCH


async def test_the_transport_logs_its_start_once_and_nothing_per_request(
    database_url: str, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Session managers (stateless and with sessions, SSE and JSON) start, stateless requests
    have no session, and sessions are clients connecting: the SDK's start lines, its
    `Terminating session: None` after every request and a session's opening and end say
    nothing the access log does not."""
    with (
        caplog.at_level(logging.INFO),
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s,
    ):
        async with Client(mcp_url(s), mode="legacy") as legacy, Client(mcp_url(s)) as modern:
            await legacy.call_tool("script", {"text": "one"})
            await modern.call_tool("script", {"text": "two"})
        with (
            caplog.at_level(logging.DEBUG, logger="mcp.server.streamable_http"),
            caplog.at_level(logging.DEBUG, logger="mcp.server.streamable_http_manager"),
        ):
            async with Client(mcp_url(s), mode="legacy") as legacy:
                await legacy.call_tool("script", {"text": "three"})
            headers, body = legacy_call("four")  # without a session: stateless
            async with httpx.AsyncClient() as http:
                await http.post(mcp_url(s), content=body, headers={**headers, "Accept": BOTH})
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    server = [r for r in caplog.records if not r.name.startswith(("mcp.client", "httpx"))]
    info = [r.getMessage() for r in server if r.levelno >= logging.INFO]
    assert [m for m in info if "session" in m.lower() or m.startswith("MCP at")] == [
        "MCP at /mcp: Streamable HTTP, stateless, with sessions for 2025-11-25 clients that "
        "initialize (elicitation, sampling, subscriptions)"
    ]
    # Demoted, not dropped: asked for DEBUG, the SDK's lines are there.
    assert (logging.DEBUG, "Terminating session: None") in lines
    for line in ("Created new transport with session ID: ", "Terminating session: "):
        assert [m for level, m in lines if level == logging.DEBUG and m.startswith(line)]


# -- a GET from a browser -----------------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    ["*/*", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", None],
    ids=["curl", "browser", "none"],
)
async def test_a_get_from_a_client_that_takes_no_event_stream_is_told_what_mcp_is(
    watched: Watched, accept: str | None
) -> None:
    """Not a stream that never ends: 405 with a short explanation, at once."""
    headers = {"Accept": accept} if accept is not None else {}
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(watched.mcp, headers=headers)
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]
    assert "MCP endpoint" in response.text and "text/event-stream" in response.text


async def test_a_get_that_asks_for_an_event_stream_still_gets_one(watched: Watched) -> None:
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream("GET", watched.mcp, headers={"Accept": "text/event-stream"}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")

"""MCP 2026-07-28 over Streamable HTTP, request by request as the wire has them: discovery,
stateless requests carrying their capabilities in `_meta`, `resultType` and the cache hints of
every result, the capability a request did not declare, and the round trips of
`input_required` results with a sealed `requestState`. Raw HTTP, so each test says exactly what
was sent; the SDK client's side of the same flows is in test_mcp_http.py and test_mcp_stdio.py.

The server is the product's app under uvicorn, with the watched skills and two tenants' keys.
"""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.databases import new_database
from tests.support.live import LiveServer, live_server
from tests.support.mcp import mcp_url, watched_registry
from tests.support.security import create_keys

VERSION = "2026-07-28"
FORM = {"elicitation": {"form": {}}}
NAMED = frozenset({"tools/call", "resources/read", "prompts/get"})


@dataclass
class Answer:
    status: int
    body: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        result: dict[str, Any] = self.body["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        error: dict[str, Any] = self.body["error"]
        return error


@dataclass
class Modern:
    server: LiveServer
    keys: dict[str, str]

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        tenant: str = "alpha",
        capabilities: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """One stateless request: no handshake before it, its capabilities in its `_meta`
        (`meta` instead of those, `headers` over the ones a client sends)."""
        if meta is None:
            meta = {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": capabilities or {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            }
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {})}}
        body["params"]["_meta"] = meta
        sent = {
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
            "Accept": "application/json",
            "Content-Type": "application/json",
            "X-API-Key": self.keys[tenant],
        }
        if method in NAMED:
            sent["Mcp-Name"] = (params or {}).get("name") or (params or {})["uri"]
        async with httpx.AsyncClient(timeout=60) as http:
            response = await http.post(
                mcp_url(self.server), content=json.dumps(body), headers={**sent, **(headers or {})}
            )
        return Answer(response.status_code, response.json())


@pytest.fixture(scope="module")
async def modern(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Modern]:
    database_url = await new_database(postgres_dsn)
    keys = {}
    for tenant in ("alpha", "beta"):
        keys[tenant] = (await create_keys(database_url, tenant, key=["read", "write"]))["key"]
    with live_server(
        watched_registry(lambda event: None),
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("modern"),
    ) as server:
        yield Modern(server, keys)


# -- discovery, statelessness, resultType and cache hints ------------------------------------


async def test_server_discover_answers_without_a_handshake(modern: Modern) -> None:
    answer = await modern.send("server/discover")
    assert answer.status == 200
    result = answer.result
    assert VERSION in result["supportedVersions"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "agentic-rag"
    capabilities = result["capabilities"]
    assert {"tools", "resources", "prompts", "completions"} <= capabilities.keys()


async def test_every_result_has_a_result_type_and_lists_have_cache_hints(modern: Modern) -> None:
    tools = await modern.send("tools/list")
    prompts = await modern.send("prompts/list")
    resources = await modern.send("resources/list")
    templates = await modern.send("resources/templates/list")
    called = await modern.send("tools/call", {"name": "whoami", "arguments": {}})
    for answer in (tools, prompts, resources, templates, called):
        assert answer.status == 200 and answer.result["resultType"] == "complete"
    # What a credential sees is its own: no shared cache may keep it.
    assert (tools.result["ttlMs"], tools.result["cacheScope"]) == (300_000, "private")
    assert (prompts.result["ttlMs"], prompts.result["cacheScope"]) == (300_000, "private")
    assert (resources.result["ttlMs"], resources.result["cacheScope"]) == (10_000, "private")
    assert (templates.result["ttlMs"], templates.result["cacheScope"]) == (3_600_000, "public")
    # Each request is on its own: the tenant is the credential's, request by request.
    assert called.result["structuredContent"] == {"tenant": "alpha"}
    other = await modern.send("tools/call", {"name": "whoami", "arguments": {}}, tenant="beta")
    assert other.result["structuredContent"] == {"tenant": "beta"}


async def test_an_unknown_resource_is_invalid_params(modern: Modern) -> None:
    uri = "agentic-rag://documents/no-such-document"
    answer = await modern.send("resources/read", {"uri": uri})
    assert answer.status == 400
    assert answer.error["code"] == -32602
    assert answer.error["message"] == f"unknown resource {uri!r}"


async def test_a_request_without_its_capabilities_is_malformed(modern: Modern) -> None:
    answer = await modern.send("tools/list", meta={})
    assert answer.status == 400
    assert answer.error["code"] == -32602


async def test_an_mcp_method_that_differs_from_the_body_is_refused(modern: Modern) -> None:
    answer = await modern.send("tools/list", headers={"Mcp-Method": "prompts/list"})
    assert answer.status == 400
    assert answer.error["code"] == -32020  # HeaderMismatch


# -- a capability the request did not declare ----------------------------------------------


async def test_a_question_for_a_person_needs_the_elicitation_capability(modern: Modern) -> None:
    answer = await modern.send("tools/call", {"name": "script", "arguments": {"text": "ask"}})
    assert answer.status == 400
    assert answer.error["code"] == -32021  # MissingRequiredClientCapabilityError
    assert answer.error["data"] == {"requiredCapabilities": FORM}
    assert "What should I answer?" in answer.error["message"]


async def test_missing_arguments_without_elicitation_are_an_error_result(modern: Modern) -> None:
    # No person is needed for them: the model can call again with them.
    answer = await modern.send("tools/call", {"name": "delete", "arguments": {"target": "x"}})
    assert answer.status == 200 and answer.result["isError"] is True
    assert "Missing arguments: confirm" in answer.result["content"][0]["text"]


# -- round trips: input_required and requestState -------------------------------------------


DELETE = {"name": "delete", "arguments": {"target": "old notes"}}


async def asked(modern: Modern, tenant: str = "alpha") -> dict[str, Any]:
    answer = await modern.send("tools/call", DELETE, tenant=tenant, capabilities=FORM)
    assert answer.status == 200
    result = answer.result
    assert result["resultType"] == "input_required"
    return result


def confirmed(**extra: Any) -> dict[str, Any]:
    return {"input": {"action": "accept", "content": {"confirm": True}}, **extra}


async def test_a_round_trip_completes_with_the_answer(modern: Modern) -> None:
    first = await asked(modern)
    (key,) = first["inputRequests"]
    request = first["inputRequests"][key]
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Really delete old notes?"
    assert request["params"]["requestedSchema"]["properties"]["confirm"] == {
        "type": "boolean",
        "title": "Confirm",
        "default": False,
    }
    # Sealed: the gathered arguments are not readable, so not editable either.
    assert first["requestState"].startswith("v1.") and "old notes" not in first["requestState"]
    # An input response nobody asked for is ignored (the spec: SHOULD ignore).
    retry = {**DELETE, "inputResponses": confirmed(extra={"action": "accept", "content": {}})}
    done = await modern.send(
        "tools/call", {**retry, "requestState": first["requestState"]}, capabilities=FORM
    )
    assert done.result["resultType"] == "complete"
    assert done.result["structuredContent"] == {"text": "deleted old notes"}


async def test_a_retry_without_the_answer_is_asked_again(modern: Modern) -> None:
    first = await asked(modern)
    again = await modern.send(
        "tools/call", {**DELETE, "requestState": first["requestState"]}, capabilities=FORM
    )
    assert again.result["resultType"] == "input_required"
    assert again.result["inputRequests"] == first["inputRequests"]
    done = await modern.send(
        "tools/call",
        {**DELETE, "inputResponses": confirmed(), "requestState": again.result["requestState"]},
        capabilities=FORM,
    )
    assert done.result["structuredContent"] == {"text": "deleted old notes"}


def refused(answer: Answer) -> bool:
    return (
        answer.status == 400
        and answer.error["code"] == -32602
        and answer.error["message"] == "Invalid or expired requestState"
    )


async def test_a_tampered_request_state_is_refused(modern: Modern) -> None:
    state: str = (await asked(modern))["requestState"]
    flipped = state[:-5] + ("A" if state[-5] != "A" else "B") + state[-4:]
    tampered = await modern.send(
        "tools/call",
        {**DELETE, "inputResponses": confirmed(), "requestState": flipped},
        capabilities=FORM,
    )
    assert refused(tampered)


async def test_a_forged_plain_state_cannot_skip_the_question(modern: Modern) -> None:
    # What an unsealed state would have let a client write: the confirmation already given.
    forged = json.dumps(
        {
            "tool": "delete",
            "arguments": {"target": "old notes", "confirm": True},
            "texts": [],
            "fields": [],
            "message": "",
            "rounds": 1,
        }
    )
    answer = await modern.send("tools/call", {**DELETE, "requestState": forged}, capabilities=FORM)
    assert refused(answer)


async def test_a_state_is_bound_to_its_caller_and_its_request(modern: Modern) -> None:
    state: str = (await asked(modern, "alpha"))["requestState"]
    by_beta = await modern.send(
        "tools/call",
        {**DELETE, "inputResponses": confirmed(), "requestState": state},
        tenant="beta",
        capabilities=FORM,
    )
    other_target = await modern.send(
        "tools/call",
        {
            "name": "delete",
            "arguments": {"target": "everything"},
            "inputResponses": confirmed(),
            "requestState": state,
        },
        capabilities=FORM,
    )
    assert refused(by_beta)
    assert refused(other_target)


async def test_another_worker_opens_the_state_one_sealed(
    modern: Modern, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Two servers on one database, as two workers: the key comes from the signing keys both
    # read there, so the retry may reach either.
    first = await asked(modern)
    with live_server(
        watched_registry(lambda event: None),
        database_url=modern.server.settings.database_url or "",
        data_dir=tmp_path_factory.mktemp("second-worker"),
    ) as other:
        second = Modern(other, modern.keys)
        done = await second.send(
            "tools/call",
            {**DELETE, "inputResponses": confirmed(), "requestState": first["requestState"]},
            capabilities=FORM,
        )
    assert done.result["structuredContent"] == {"text": "deleted old notes"}

"""Upstream MCP servers wrapped as skills (docs/graph.md, issue 10 point 8).

A proxy server whose only skills are the tools of real MCP servers started here: a second
instance of this server (its graph tools, on the real embedded FalkorDB), reached with an API
key of its own, and the SDK's `MCPServer` with a tool that records the group it was given.
Tenants of the proxy call them over MCP (the SDK's client) and A2A.
"""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp.server.mcpserver import MCPServer

from agentic_rag.graph.namespaces import Namespace
from agentic_rag.mcp.listing import compact_input, compact_output
from agentic_rag.skills import SkillRegistry
from tests.support.databases import new_database
from tests.support.graph import Tenant, triplet
from tests.support.live import LiveServer, free_port, live_server, serve_in_thread
from tests.support.mcp import keyed_client, text_of
from tests.support.outcomes import output
from tests.support.security import create_keys

# The upstream's tenant: the proxy's key there. Its sub-groups hold the proxy's tenants.
PROXY = "proxy"


@pytest.fixture(scope="module")
async def upstream(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[LiveServer, str]]:
    """A second instance of this server, with the graph tools; its API key for the proxy."""
    database_url = await new_database(postgres_dsn)
    keys = await create_keys(database_url, PROXY, key=["read", "write"])
    with live_server(
        None, database_url=database_url, data_dir=tmp_path_factory.mktemp("upstream")
    ) as live:
        yield live, keys["key"]


@pytest.fixture(scope="module")
async def proxy(
    upstream: tuple[LiveServer, str], postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    """The proxy: no skills of its own, the upstream's tools as `memory_<tool>`."""
    server, key = upstream
    database_url = await new_database(postgres_dsn)
    await create_keys(database_url, "nobody", key=["read"])  # credentials are required
    memory = {
        "name": "memory",
        "url": f"{server.url}/mcp",
        "headers": {"X-API-Key": key},
        # The upstream is this server: its tenant guard allows the proxy's sub-groups only.
        "namespace_prefix": f"{PROXY}:",
    }
    with live_server(
        SkillRegistry(),
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("proxy"),
        upstream_mcp=[memory],
    ) as live:
        yield live


@pytest.fixture
async def tenants(proxy: LiveServer) -> tuple[Tenant, Tenant]:
    """Two new tenants of the proxy."""
    made = []
    for _ in range(2):
        name = f"t{uuid.uuid4().hex[:10]}"
        keys = await create_keys(proxy.settings.database_url or "", name, key=["read", "write"])
        made.append(Tenant(name, proxy, keys["key"]))
    return made[0], made[1]


async def tools_of(url: str, key: str | None) -> dict[str, types.Tool]:
    async with keyed_client(f"{url}/mcp", key) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


async def card_skills(url: str) -> set[str]:
    """The skills the public Agent Card lists."""
    async with httpx.AsyncClient() as http:
        card = (await http.get(f"{url}/.well-known/agent.json")).json()
    return {skill["id"] for skill in card["skills"]}


async def call(tenant: Tenant, tool: str, **arguments: Any) -> types.CallToolResult:
    async with tenant.mcp() as client:
        return await client.call_tool(tool, arguments)


async def test_the_upstream_tools_are_listed_with_their_own_schemas(
    upstream: tuple[LiveServer, str], tenants: tuple[Tenant, Tenant]
) -> None:
    alpha, _ = tenants
    own = await tools_of(upstream[0].url, upstream[1])
    proxied = await tools_of(alpha.server.url, alpha.key)

    assert set(proxied) == {f"memory_{name}" for name in own}
    for name, tool in own.items():
        # Their schemas, made compact by the listing's rules (listing.py).
        assert proxied[f"memory_{name}"].input_schema == compact_input(tool.input_schema)
        if tool.output_schema is not None:
            assert proxied[f"memory_{name}"].output_schema == compact_output(tool.output_schema)
    assert "'search_nodes' of the upstream MCP server 'memory'" in (
        proxied["memory_search_nodes"].description or ""
    )
    assert await card_skills(alpha.server.url) == set(proxied)


async def test_calls_land_in_the_callers_namespace_upstream(
    upstream: tuple[LiveServer, str], tenants: tuple[Tenant, Tenant]
) -> None:
    alpha, beta = tenants
    added = await call(
        alpha,
        "memory_add_triplet",
        **triplet("Grace Hopper", "WROTE", "Grace Hopper wrote the A-0 compiler", "A-0"),
    )
    assert not added.is_error, text_of(added)
    assert added.structured_content is not None
    nodes = added.structured_content["result"]["nodes"]
    # The upstream stored them under the proxy's sub-group for alpha; alpha reads its own name.
    assert {node["group_id"] for node in nodes} == {alpha.name}

    found = await call(alpha, "memory_search_nodes", query="Hopper")
    assert found.structured_content is not None
    assert found.structured_content["result"]["nodes"][0]["name"] == "Grace Hopper"
    # Over A2A too, through the same skill.
    over_a2a = output(await alpha.skill("memory_search_nodes", query="Hopper"))
    assert over_a2a["result"]["nodes"][0]["name"] == "Grace Hopper"

    unseen = await call(beta, "memory_search_nodes", query="Hopper")
    assert unseen.structured_content is not None
    assert unseen.structured_content["result"]["nodes"] == []

    # Upstream, the fact is in the sub-group named by alpha's namespace, and nowhere else.
    server, key = upstream
    async with keyed_client(f"{server.url}/mcp", key) as direct:
        stored = await direct.call_tool(
            "search_nodes",
            {"query": "Hopper", "group_ids": [f"{PROXY}:{Namespace(alpha.name).graph}"]},
        )
        main = await direct.call_tool("search_nodes", {"query": "Hopper"})
    assert stored.structured_content is not None and main.structured_content is not None
    assert [n["name"] for n in stored.structured_content["result"]["nodes"]][:1] == ["Grace Hopper"]
    assert main.structured_content["result"]["nodes"] == []


async def test_a_group_outside_the_callers_tenant_is_refused(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    refused = await call(alpha, "memory_search_nodes", query="Hopper", group_ids=[beta.name])
    assert refused.is_error
    assert f"group_id {beta.name!r} is outside your tenant" in text_of(refused)

    written = await call(
        alpha, "memory_add_triplet", **triplet("A", "IS", "A is B", "B"), group_id=beta.name
    )
    assert written.is_error
    assert "is outside your tenant" in text_of(written)


async def test_clear_graph_through_the_proxy_clears_the_callers_namespace_only(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    for tenant in tenants:
        written = await call(
            tenant, "memory_add_triplet", **triplet("Lin", "KNOWS", "Lin knows Ada", "Ada")
        )
        assert not written.is_error, text_of(written)

    # The proxy forwards no questions (it declares no elicitation): the error says what
    # the upstream would ask, in the caller's names.
    asked = await call(alpha, "memory_clear_graph")
    assert asked.is_error
    assert f"Clear the graph of {alpha.name}?" in text_of(asked)
    assert "confirm=true" in text_of(asked)

    cleared = await call(alpha, "memory_clear_graph", confirm=True)
    assert not cleared.is_error, text_of(cleared)
    assert cleared.structured_content is not None
    message = cleared.structured_content["result"]["message"]
    assert message == f"Graph data cleared successfully for group IDs: {alpha.name}"
    for tenant, left in ((alpha, []), (beta, ["Ada", "Lin"])):
        found = await call(tenant, "memory_search_nodes", query="Lin Ada")
        assert found.structured_content is not None
        assert sorted(n["name"] for n in found.structured_content["result"]["nodes"]) == left


# -- an upstream that comes and goes ------------------------------------------------------


def echo_server(received: list[str | None]) -> MCPServer:
    """An MCP server whose tools record the group id they were given."""
    server = MCPServer("echo")

    @server.tool()
    def whoami(note: str, group_id: str | None = None) -> dict[str, str | None]:
        """The group id and note this call came with."""
        received.append(group_id)
        return {"group_id": group_id, "note": note}

    @server.tool(structured_output=False)
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()

    return server


@contextmanager
def echo_on(port: int, received: list[str | None]) -> Iterator[None]:
    app = echo_server(received).streamable_http_app(stateless_http=True)
    with serve_in_thread(app, lifespan="on", port=port):
        yield


async def until_listed(url: str, tool: str) -> None:
    """Once the Agent Card lists `tool` (the proxy tries the upstream again meanwhile)."""
    deadline = time.monotonic() + 30
    while tool not in await card_skills(url):
        assert time.monotonic() < deadline, f"{tool} was never listed"
        await asyncio.sleep(0.1)


async def test_an_upstream_down_at_start_joins_when_up_and_fails_clearly_when_down(
    postgres_dsn: str, tmp_path: Path
) -> None:
    port, received = free_port(), []
    echo = {"name": "echo", "url": f"http://127.0.0.1:{port}/mcp"}
    with live_server(
        SkillRegistry(),
        database_url=await new_database(postgres_dsn),
        data_dir=tmp_path,
        upstream_mcp=[echo],
        upstream_mcp_retry_seconds=0.1,
    ) as proxy:
        local = Tenant("local", proxy, "")  # open local mode: every caller is 'local'
        assert await tools_of(proxy.url, None) == {}

        with echo_on(port, received):
            await until_listed(proxy.url, "echo_whoami")
            assert set(await tools_of(proxy.url, None)) == {"echo_whoami", "echo_shout"}
            answered = await call(local, "echo_whoami", note="hi", group_id="someone-else")
            assert answered.is_error, "another tenant's group is refused"
            answered = await call(local, "echo_whoami", note="hi")
            assert answered.structured_content == {"group_id": "local", "note": "hi"}
            # The upstream was given the namespace's graph name, whatever the caller sent.
            assert received == [Namespace("local").graph]
            shouted = await call(local, "echo_shout", text="quiet")
            assert text_of(shouted) == "QUIET"

        down = await call(local, "echo_whoami", note="anyone there?")
        assert down.is_error
        assert text_of(down).startswith(
            f"tool 'echo_whoami' failed: the upstream MCP server 'echo' at "
            f"http://127.0.0.1:{port}/mcp did not answer ("
        )

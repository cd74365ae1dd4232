"""The tool surface: `tools/list` within its budget, groups of tools chosen by the deployment
and by each API key, and Graphiti's older names only when asked for (docs/skills.md).

The product's own server, driven by the official SDK client; what each caller should see is
read from the server's own `help` to a key that selects every group (every skill with its
group), not restated here; `help` lists each caller what it may call.
"""

import typing
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import httpx2
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentic_rag.config import ToolGroup
from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.security.auth import FORBIDDEN
from agentic_rag.skills.help import HelpOutput
from agentic_rag.storage.postgres import connect
from tests.support.databases import new_database, own_data_dir
from tests.support.live import LiveServer, live_server
from tests.support.mcp import BIN, base_env, keyed_client, mcp_url
from tests.support.security import AUDIENCE, ISSUER, SECRET, claims, create_keys, hs256

# Characters of the tools/list result every conversation of an MCP client pays for.
BUDGET = 30_000
EVERY_GROUP: tuple[ToolGroup, ...] = typing.get_args(ToolGroup)
ALIASES = {"add_episode", "search_facts"}


@dataclass
class Product:
    server: LiveServer
    keys: dict[str, str]

    def client(self, key: str) -> Client:
        return keyed_client(mcp_url(self.server), self.keys[key])


async def create_grouped_keys(database_url: str) -> dict[str, str]:
    """Keys of tenant `acme` that name groups, as `agentic-rag keys create --groups`."""
    pool: asyncpg.Pool = await connect(database_url, size=1)
    try:
        store = ApiKeyStore(pool)
        groups: dict[str, list[str] | None] = {
            "knowledge": ["knowledge"],
            "compat": ["graph", "graphiti-compat"],
            "every": list(EVERY_GROUP),
        }
        return {
            name: (await store.create("acme", ["read", "write"], groups=chosen))[0]
            for name, chosen in groups.items()
        }
    finally:
        await pool.close()


@pytest.fixture(scope="module")
async def product(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Product]:
    """The product's server with its default groups, and keys of one tenant: one that names
    no group, and keys that name some."""
    database_url = await new_database(postgres_dsn)
    keys = await create_keys(database_url, "acme", all=["read", "write"])
    keys |= await create_grouped_keys(database_url)
    with live_server(
        None, database_url=database_url, data_dir=tmp_path_factory.mktemp("groups")
    ) as server:
        yield Product(server, keys)


async def listed(client: Client) -> types.ListToolsResult:
    return await client.list_tools()


def size(result: types.ListToolsResult) -> int:
    """The result's JSON as the client received it (the SDK's own serialization)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


async def helped(client: Client) -> dict[str, str | None]:
    """The skills `help` lists to the client, with their groups."""
    result = await client.call_tool("help", {})
    assert not result.is_error
    return {s.name: s.group for s in HelpOutput.model_validate(result.structured_content).skills}


async def groups_of_skills(product: Product) -> dict[str, str | None]:
    """Every skill of the server with its group: `help` to a key that selects every group."""
    async with product.client("every") as client:
        return await helped(client)


async def test_the_default_list_is_within_budget_and_has_every_group_but_the_aliases(
    product: Product,
) -> None:
    groups = await groups_of_skills(product)
    async with product.client("all") as client:
        result = await listed(client)
    assert size(result) <= BUDGET
    expected = {name for name, group in groups.items() if group != "graphiti-compat"}
    assert {t.name for t in result.tools} == expected
    assert {"hybrid_retrieve", "add_memory", "delegate_task", "clear_graph"} <= expected
    async with product.client("all") as client:
        assert set(await helped(client)) == expected
    assert ALIASES.isdisjoint(expected)


async def test_every_group_named_is_within_budget_too(product: Product) -> None:
    groups = await groups_of_skills(product)
    async with product.client("every") as client:
        result = await listed(client)
    assert size(result) <= BUDGET
    assert {t.name for t in result.tools} == set(groups)
    assert set(groups) >= ALIASES


async def test_a_key_with_groups_sees_only_their_tools(product: Product) -> None:
    groups = await groups_of_skills(product)
    async with product.client("knowledge") as client:
        tools = {t.name for t in (await listed(client)).tools}
        offered = await helped(client)
    assert tools == {name for name, group in groups.items() if group in ("knowledge", None)}
    assert set(offered) == tools  # help lists what the caller may call, no more
    assert {"hybrid_retrieve", "explain_answer", "help"} <= tools
    assert "ingest_url" not in tools and "add_memory" not in tools


async def test_a_key_calling_a_tool_outside_its_groups_gets_a_clear_error(
    product: Product,
) -> None:
    async with product.client("knowledge") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("add_memory", {"name": "n", "episode_body": "b"})
        allowed = await client.call_tool("list_sources", {})
    assert refused.value.code == FORBIDDEN
    assert refused.value.message == (
        "tool 'add_memory' is in the group 'graph', which this credential does not select "
        "(its groups: knowledge)"
    )
    assert not allowed.is_error


async def test_a_task_augmented_call_passes_the_same_gate(product: Product) -> None:
    """A 2025-11-25 call `with task` is answered by the tasks' middleware: the gate is first."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "ingest_text", "arguments": {"text": "t"}, "task": {}},
    }
    headers = {
        "X-API-Key": product.keys["knowledge"],
        "MCP-Protocol-Version": "2025-11-25",
        "Accept": "application/json",
    }
    async with httpx.AsyncClient(base_url=product.server.url, timeout=60) as http:
        answer = (await http.post("/mcp", json=body, headers=headers)).json()
    assert "result" not in answer, answer
    assert answer["error"]["code"] == FORBIDDEN
    assert answer["error"]["message"].startswith("tool 'ingest_text' is in the group 'ingest'")


async def test_the_prompt_that_runs_hybrid_retrieve_follows_its_group(product: Product) -> None:
    async with product.client("knowledge") as client:
        offered = (await client.list_prompts()).prompts
    async with product.client("compat") as client:
        hidden = (await client.list_prompts()).prompts
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("answer_with_citations", {"question": "otters?"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("hybrid_retrieve_typo", {})
    assert [p.name for p in offered] == ["answer_with_citations"] and hidden == []
    assert refused.value.code == FORBIDDEN
    assert refused.value.message.startswith("tool 'hybrid_retrieve' is in the group 'knowledge'")
    # An unknown name is answered with the caller's own tools only.
    assert unknown.value.code == types.INVALID_PARAMS
    assert "hybrid_retrieve," not in unknown.value.message
    assert "search_facts" in unknown.value.message


async def test_the_aliases_are_absent_by_default_and_present_when_asked_for(
    product: Product,
) -> None:
    async with product.client("all") as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("search_facts", {"query": "otters"})
    async with product.client("compat") as client:
        tools = {t.name: t for t in (await listed(client)).tools}
        found = await client.call_tool("search_facts", {"query": "otters"})
    assert unknown.value.code == types.INVALID_PARAMS
    assert unknown.value.message == (
        "tool 'search_facts' is in the group 'graphiti-compat', which this server does not "
        "offer (AGENTIC_RAG_MCP_TOOL_GROUPS)"
    )
    assert set(tools) >= ALIASES and "hybrid_retrieve" not in tools
    # An alias takes and gives what its tool does.
    assert tools["search_facts"].input_schema == tools["search_memory_facts"].input_schema
    assert tools["search_facts"].output_schema == tools["search_memory_facts"].output_schema
    assert found.structured_content is not None and not found.is_error


async def test_a_deployment_names_the_groups_it_offers(postgres_dsn: str, tmp_path: Path) -> None:
    database_url = await new_database(postgres_dsn)
    keys = await create_keys(database_url, "acme", all=["read", "write"])
    keys |= await create_grouped_keys(database_url)
    with live_server(
        None, database_url=database_url, data_dir=tmp_path, mcp_tool_groups=["knowledge"]
    ) as server:
        product = Product(server, keys)
        async with product.client("all") as client:
            tools = {t.name for t in (await listed(client)).tools}
            with pytest.raises(MCPError) as refused:
                await client.call_tool("ingest_text", {"text": "t"})
        async with product.client("compat") as client:  # the deployment's bound holds
            compat = {t.name for t in (await listed(client)).tools}
    assert "hybrid_retrieve" in tools and "ingest_text" not in tools
    assert refused.value.code == types.INVALID_PARAMS
    assert "which this server does not offer" in refused.value.message
    assert compat == {"help"}


def bearer_client(server: LiveServer, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(mcp_url(server), http_client=http))


async def test_a_jwt_selects_groups_with_its_claim(postgres_dsn: str, tmp_path: Path) -> None:
    database_url = await new_database(postgres_dsn)
    jwt = {"jwt_secret": SECRET, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    with live_server(None, database_url=database_url, data_dir=tmp_path, **jwt) as server:
        async with bearer_client(server, hs256(claims(tool_groups="knowledge"))) as client:
            tools = {t.name for t in (await listed(client)).tools}
            with pytest.raises(MCPError) as refused:
                await client.call_tool("add_memory", {"name": "n", "episode_body": "b"})
        async with bearer_client(server, hs256(claims())) as client:
            every = {t.name for t in (await listed(client)).tools}
        unknown_group = hs256(claims(tool_groups=["knowledge", "search"]))
        async with httpx.AsyncClient() as http:
            unknown = await http.post(
                mcp_url(server),
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {unknown_group}",
                    "MCP-Protocol-Version": "2025-11-25",
                    "Accept": "application/json, text/event-stream",
                },
            )
    assert "hybrid_retrieve" in tools and "add_memory" not in tools and "ingest_url" not in tools
    assert refused.value.code == FORBIDDEN
    assert "(its groups: knowledge)" in refused.value.message
    assert {"hybrid_retrieve", "add_memory", "ingest_url"} <= every  # no claim: no selection
    assert unknown.status_code == 401
    assert "the token's 'tool_groups' claim: unknown tool groups ['search']" in unknown.text


async def test_over_stdio_every_group_stays_within_budget() -> None:
    with own_data_dir() as data:
        server = StdioServerParameters(
            command=str(BIN / "agentic-rag"),
            args=["mcp", "--data-dir", str(data)],
            env=base_env(AGENTIC_RAG_MCP_TOOL_GROUPS=",".join(EVERY_GROUP)),
        )
        async with Client(server, mode="legacy") as client:
            result = await listed(client)
            helped = await client.call_tool("help", {"topic": "graphiti-compat"})
    assert size(result) <= BUDGET
    assert {t.name for t in result.tools} >= ALIASES
    output = HelpOutput.model_validate(helped.structured_content)
    assert {s.name for s in output.skills} == ALIASES
    # help keeps what the list leaves out: the description in full.
    (add_episode,) = [s for s in output.skills if s.name == "add_episode"]
    (listed_add_episode,) = [t for t in result.tools if t.name == "add_episode"]
    assert len(add_episode.description) > len(listed_add_episode.description or "")

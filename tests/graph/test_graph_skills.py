"""The graph skills end to end, without an LLM: the product's server (real embedder, real
PostgreSQL, the real embedded FalkorDB in its data directory) called over A2A (JSON-RPC) and
MCP (the SDK's client) by tenants that never see, search or delete each other's graph."""

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from falkordb.asyncio import FalkorDB

from agentic_rag.graph.embedded import EmbeddedFalkorDB
from tests.support.databases import new_database
from tests.support.graph import Tenant, message, triplet
from tests.support.live import LiveServer, live_server
from tests.support.mcp import Elicitations, text_of
from tests.support.outcomes import failure, output
from tests.support.security import create_keys


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    """The product's server, no LLM configured; a key exists, so credentials are required."""
    database_url = await new_database(postgres_dsn)
    await create_keys(database_url, "nobody", key=["read"])
    with live_server(
        None, database_url=database_url, data_dir=tmp_path_factory.mktemp("graph")
    ) as live:
        yield live


@pytest.fixture
async def tenants(server: LiveServer) -> tuple[Tenant, Tenant]:
    """Two new tenants: what one does, the other never sees."""
    made = []
    for _ in range(2):
        name = f"t{uuid.uuid4().hex[:10]}"
        keys = await create_keys(server.settings.database_url or "", name, key=["read", "write"])
        made.append(Tenant(name, server, keys["key"]))
    return made[0], made[1]


async def test_a_triplet_is_found_by_node_and_fact_search_and_by_uuid(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    added = await alpha.result(
        "add_triplet",
        source_node_name="Ada Lovelace",
        edge_name="WROTE_ABOUT",
        fact="Ada Lovelace wrote notes on the Analytical Engine",
        target_node_name="Analytical Engine",
    )
    assert added["message"] == "Triplet 'Ada Lovelace -[WROTE_ABOUT]-> Analytical Engine' added"
    assert sorted(n["name"] for n in added["nodes"]) == ["Ada Lovelace", "Analytical Engine"]
    assert {n["group_id"] for n in added["nodes"]} == {alpha.name}
    (edge,) = added["edges"]
    assert edge["group_id"] == alpha.name

    nodes = await alpha.result("search_nodes", query="Lovelace")
    assert nodes["message"] == "Nodes retrieved successfully"
    assert nodes["nodes"][0]["name"] == "Ada Lovelace"
    assert all("name_embedding" not in n["attributes"] for n in nodes["nodes"])

    facts = await alpha.result("search_memory_facts", query="notes on the engine")
    assert [f["uuid"] for f in facts["facts"]] == [edge["uuid"]]
    assert facts["facts"][0]["fact"] == "Ada Lovelace wrote notes on the Analytical Engine"
    assert "fact_embedding" not in facts["facts"][0]
    assert await alpha.result("search_facts", query="notes on the engine") == facts

    got = await alpha.result("get_entity_edge", uuid=edge["uuid"])
    assert got["uuid"] == edge["uuid"] and got["group_id"] == alpha.name
    assert got["source_node_uuid"] == edge["source_node_uuid"]


async def test_entities_are_reused_by_name_and_a_repeated_fact_is_not_duplicated(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    compiler = triplet("Grace Hopper", "BUILT", "Grace Hopper built the first compiler", "A-0")
    first = await alpha.result("add_triplet", **compiler)
    again = await alpha.result("add_triplet", **(compiler | {"source_node_name": "grace hopper"}))
    other = await alpha.result(
        "add_triplet",
        **triplet("Grace Hopper", "WORKED_ON", "Grace Hopper worked on COBOL", "COBOL"),
    )
    hopper = {n["name"]: n["uuid"] for n in first["nodes"]}["Grace Hopper"]
    assert again["edges"][0]["uuid"] == first["edges"][0]["uuid"]
    assert other["edges"][0]["source_node_uuid"] == hopper
    facts = await alpha.result("search_memory_facts", query="Grace Hopper", max_facts=10)
    assert len(facts["facts"]) == 2


async def test_a_deleted_fact_is_gone(tenants: tuple[Tenant, Tenant]) -> None:
    alpha, _ = tenants
    fact = await alpha.triplet("Rome", "CAPITAL_OF", "Rome is the capital of Italy", "Italy")
    deleted = await alpha.result("delete_entity_edge", uuid=fact)
    assert deleted == {"message": f"Entity edge with UUID {fact} deleted successfully"}
    assert f"no fact (entity edge) {fact!r}" in failure(
        await alpha.skill("get_entity_edge", uuid=fact)
    )
    found = await alpha.result("search_memory_facts", query="capital of Italy")
    assert found == {"message": "No relevant facts found", "facts": []}


async def test_sub_groups_are_graphs_of_their_own_inside_the_tenant(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    notes = f"{alpha.name}:notes"
    fact = await alpha.triplet("Oslo", "IN", "Oslo is in Norway", "Norway", group_id=notes)
    assert (await alpha.result("search_memory_facts", query="Oslo"))["facts"] == []
    found = await alpha.result("search_memory_facts", query="Oslo", group_ids=notes)
    assert [(f["uuid"], f["group_id"]) for f in found["facts"]] == [(fact, notes)]
    both = await alpha.result("search_nodes", query="Oslo", group_ids=[alpha.name, notes])
    assert {n["group_id"] for n in both["nodes"]} == {notes}
    # A uuid alone finds the fact in whichever graph of the tenant holds it.
    assert (await alpha.result("get_entity_edge", uuid=fact))["group_id"] == notes


async def test_tenants_cannot_see_search_or_delete_each_others_graph(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    fact = await alpha.triplet("Marie Curie", "WON", "Marie Curie won two Nobel Prizes", "Nobel")

    assert (await beta.result("search_memory_facts", query="Marie Curie Nobel"))["facts"] == []
    assert (await beta.result("search_nodes", query="Marie Curie"))["nodes"] == []
    assert "no fact" in failure(await beta.skill("get_entity_edge", uuid=fact))
    assert "no fact" in failure(await beta.skill("delete_entity_edge", uuid=fact))
    for name, arguments in (
        ("search_memory_facts", {"query": "Curie", "group_ids": alpha.name}),
        ("search_nodes", {"query": "Curie", "group_ids": [beta.name, alpha.name]}),
        ("get_episodes", {"group_ids": f"{alpha.name}:notes"}),
        ("clear_graph", {"group_ids": alpha.name, "confirm": True}),
        ("add_triplet", triplet("a", "B", "a b c", "c") | {"group_id": alpha.name}),
    ):
        reason = failure(await beta.skill(name, **arguments))
        assert reason.startswith(f"group_id '{alpha.name}"), reason
        assert f"is outside your tenant: use {beta.name!r}" in reason, reason
    # Whatever beta did, alpha's fact is still there.
    assert (await alpha.result("get_entity_edge", uuid=fact))["uuid"] == fact


async def test_clear_graph_asks_over_a2a_and_clears_only_the_callers_graph(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    await alpha.triplet("Tokyo", "IN", "Tokyo is in Japan", "Japan")
    kept = await beta.triplet("Tokyo", "IN", "Tokyo is in Japan", "Japan")

    asked = await alpha.skill("clear_graph")
    assert asked["status"]["state"] == "input-required"
    question = asked["status"]["message"]["parts"][0]["text"]
    assert question.startswith(f"Clear the graph of {alpha.name}?")
    assert "confirm=true" in question
    answered = await alpha.send(
        message([{"kind": "text", "text": "yes"}], taskId=asked["id"], contextId=asked["contextId"])
    )
    assert output(answered)["result"]["message"].endswith(f"group IDs: {alpha.name}")
    assert (await alpha.result("search_memory_facts", query="Tokyo"))["facts"] == []
    assert (await beta.result("get_entity_edge", uuid=kept))["uuid"] == kept


async def test_clear_graph_answered_no_deletes_nothing(tenants: tuple[Tenant, Tenant]) -> None:
    alpha, _ = tenants
    fact = await alpha.triplet("Lima", "IN", "Lima is in Peru", "Peru")
    asked = await alpha.skill("clear_graph")
    declined = await alpha.send(
        message([{"kind": "text", "text": "no"}], taskId=asked["id"], contextId=asked["contextId"])
    )
    assert "was not confirmed: nothing was deleted" in failure(declined)
    assert (await alpha.result("get_entity_edge", uuid=fact))["uuid"] == fact


async def test_clear_graph_over_mcp_by_elicitation_or_confirm(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    await alpha.triplet("Cairo", "IN", "Cairo is in Egypt", "Egypt")
    elicit = Elicitations({"answer": "yes"})
    async with alpha.mcp(elicitation_callback=elicit) as client:
        cleared = await client.call_tool("clear_graph", {})
    assert not cleared.is_error, text_of(cleared)
    (asked,) = elicit.asked
    assert asked.message.startswith(f"Clear the graph of {alpha.name}?")
    assert (await alpha.result("search_memory_facts", query="Cairo"))["facts"] == []

    await alpha.triplet("Quito", "IN", "Quito is in Ecuador", "Ecuador")
    async with alpha.mcp() as client:  # no elicitation: confirm=true says it up front
        cleared = await client.call_tool("clear_graph", {"confirm": True})
        assert cleared.structured_content is not None
        assert cleared.structured_content["result"]["message"].startswith("Graph data cleared")
        found = await client.call_tool("search_memory_facts", {"query": "Quito"})
    assert found.structured_content == {
        "result": {"message": "No relevant facts found", "facts": []}
    }


async def test_the_skills_that_need_an_llm_say_how_to_enable_one(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    for name, arguments in (
        ("add_memory", {"name": "n", "episode_body": "Alice met Bob."}),
        ("add_episode", {"name": "n", "episode_body": "Alice met Bob."}),
        ("summarize_saga", {"saga_name": "s"}),
        ("build_communities", {}),
    ):
        reason = failure(await alpha.skill(name, **arguments))
        assert "needs an LLM" in reason, reason
        assert "AGENTIC_RAG_LLM_BASE_URL and AGENTIC_RAG_LLM_MODEL" in reason
    async with alpha.mcp() as client:
        answered = await client.call_tool("add_memory", {"name": "n", "episode_body": "x"})
    assert answered.is_error
    assert "add_memory needs an LLM" in text_of(answered)
    assert (await alpha.result("get_episodes")) == {"message": "No episodes found", "episodes": []}


async def test_status_episodes_and_unknown_uuids(tenants: tuple[Tenant, Tenant]) -> None:
    alpha, _ = tenants
    status = await alpha.result("get_status")
    assert status["status"] == "ok"
    assert "embedded FalkorDB" in status["message"]
    assert "no LLM configured" in status["message"]
    missing = str(uuid.uuid4())
    assert f"no episode {missing!r}" in failure(await alpha.skill("delete_episode", uuid=missing))
    provenance = await alpha.result("get_episode_entities", episode_uuids=[missing])
    assert provenance == {
        "message": "Retrieved provenance for 1 episode(s)",
        "nodes": [],
        "edges": [],
    }
    assert "positive integer" in failure(await alpha.skill("search_nodes", query="x", max_nodes=0))
    assert "not an ISO-8601 time" in failure(
        await alpha.skill("search_memory_facts", query="x", valid_at_after="yesterday")
    )


async def test_mcp_lists_the_graph_tools_and_calls_them_as_the_callers_tenant(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    async with alpha.mcp() as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        added = await client.call_tool(
            "add_triplet",
            {
                "source_node_name": "Kepler",
                "edge_name": "DESCRIBED",
                "fact": "Kepler described planetary orbits as ellipses",
                "target_node_name": "orbits",
            },
        )
    assert {"add_memory", "search_memory_facts", "clear_graph", "get_status"} <= names
    # Graphiti's older names are offered only when asked for (the graphiti-compat group)
    assert not {"add_episode", "search_facts"} & names
    assert not added.is_error, text_of(added)
    assert added.structured_content is not None
    (edge,) = added.structured_content["result"]["edges"]
    async with alpha.mcp() as client:
        found = await client.call_tool("search_nodes", {"query": "Kepler"})
    assert found.structured_content is not None
    kepler = next(n for n in found.structured_content["result"]["nodes"] if n["name"] == "Kepler")
    written = {n["name"]: n for n in added.structured_content["result"]["nodes"]}
    assert written["Kepler"]["labels"] == kepler["labels"] == ["Entity"]
    async with beta.mcp() as client:
        refused = await client.call_tool("get_entity_edge", {"uuid": edge["uuid"]})
    assert refused.is_error and "no fact" in text_of(refused)


async def test_a_falkordb_server_by_url_holds_the_graph(postgres_dsn: str, tmp_path: Path) -> None:
    falkordb = EmbeddedFalkorDB(tmp_path / "elsewhere")  # a FalkorDB server of its own
    socket = await falkordb.start()
    try:
        database_url = await new_database(postgres_dsn)
        key = (await create_keys(database_url, "acme", key=["read", "write"]))["key"]
        with live_server(
            None,
            database_url=database_url,
            data_dir=tmp_path / "data",
            graph_url=f"unix://{socket}",
        ) as live:
            acme = Tenant("acme", live, key)
            await acme.triplet("Bern", "IN", "Bern is in Switzerland", "Switzerland")
            status = await acme.result("get_status")
        assert "AGENTIC_RAG_GRAPH_URL" in status["message"]
        assert not (tmp_path / "data" / "falkordb").exists()  # no embedded one was started
        db = FalkorDB(unix_socket_path=str(socket))
        graphs = await db.list_graphs()
        await db.connection.aclose()
        assert any(graph.startswith("ns_") for graph in graphs), graphs
    finally:
        await falkordb.stop()

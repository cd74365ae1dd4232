"""Provenance and cost: the graph's nodes and facts name the episodes they came from and, for
episodes made from documents the knowledge engine ingested, the document and its chunks, in
one shape (a node's in `attributes["provenance"]`, a fact's in `provenance`); explain_answer
shows what extracting the episodes behind its graph facts cost.

The LLM is `RecordedChat` (tests/graph/test_graph_llm.py): the test double of a hosted
OpenAI-compatible chat API, answering Graphiti's structured prompts with recorded responses
(every episode yields Alice, Acme and "Alice works at Acme as a rocket engineer"). Everything
else is real: the product's server, the local embedder, PostgreSQL and the embedded FalkorDB.
"""

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.databases import new_database
from tests.support.graph import (
    TEXT,
    RecordedChat,
    Tenant,
    add,
    episodes,
    knowledge_server,
    new_tenant,
    retrieve,
    until_processed,
)
from tests.support.live import LiveServer, live_server, serve_in_thread
from tests.support.security import create_keys

NO_DOCUMENTS: dict[str, Any] = {"documents": []}


@pytest.fixture(scope="module")
def chat() -> Iterator[str]:
    double = RecordedChat()
    with serve_in_thread(double.app()) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, chat: str
) -> AsyncIterator[LiveServer]:
    """The product's server with the recorded LLM; ingested documents become episodes."""
    async for live in knowledge_server(postgres_dsn, tmp_path_factory, chat, documents=True):
        yield live


async def node(tenant: Tenant, name: str, **arguments: Any) -> dict[str, Any]:
    """The node named `name` that search_nodes finds for it."""
    found = await tenant.result("search_nodes", query=name, **arguments)
    named: list[dict[str, Any]] = [n for n in found["nodes"] if n["name"] == name]
    (only,) = named
    return only


async def test_nodes_and_facts_name_the_episodes_they_came_from(server: LiveServer) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:news"
    first = await add(acme, "Team news", "Alice joined Acme as a rocket engineer.", group)
    assert (await until_processed(acme, first, group))["status"] == "done"
    second = await add(acme, "More news", "Alice still builds rockets at Acme.", group)
    assert (await until_processed(acme, second, group))["status"] == "done"

    # Both episodes mention Alice and state the same fact: each names both, oldest first.
    both = {"episodes": [first, second], **NO_DOCUMENTS}
    alice = await node(acme, "Alice", group_ids=group)
    assert alice["attributes"]["provenance"] == both
    (fact,) = (await acme.result("search_memory_facts", query="rocket", group_ids=group))["facts"]
    assert fact["provenance"] == both and fact["episodes"] == [first, second]
    assert (await acme.result("get_entity_edge", uuid=fact["uuid"]))["provenance"] == both

    produced = await acme.result("get_episode_entities", episode_uuids=[first])
    assert {n["name"]: n["attributes"]["provenance"] for n in produced["nodes"]} == {
        "Alice": both,
        "Acme": both,
    }


@dataclass
class Ingested:
    """A document ingested by ingest_text and its one episode, extracted."""

    tenant: Tenant
    document_id: str
    episode: dict[str, Any]  # as get_episodes shows it


@pytest.fixture(scope="module")
async def ingested(server: LiveServer) -> Ingested:
    acme = await new_tenant(server)
    added = await acme.result("ingest_text", text=TEXT, title="Team news")
    (document,) = added["documents"]
    (queued,) = await episodes(acme)
    done = await until_processed(acme, queued["uuid"], acme.name)
    assert done["status"] == "done"
    return Ingested(acme, document["document_id"], done)


async def test_a_fact_and_a_node_of_an_ingested_document_name_its_document_and_chunks(
    ingested: Ingested,
) -> None:
    acme, episode = ingested.tenant, ingested.episode
    (hit,) = (await retrieve(acme))["hits"]  # the document is one chunk
    chunk_id = hit["provenance"]["chunk_id"]
    assert episode["source_description"] == f"document {ingested.document_id}, chunks {chunk_id}"

    origin = {
        "episodes": [episode["uuid"]],
        "documents": [{"document_id": ingested.document_id, "chunk_ids": [chunk_id]}],
    }
    (fact,) = (await acme.result("search_memory_facts", query="rocket engineer"))["facts"]
    assert fact["provenance"] == origin
    assert (await node(acme, "Alice"))["attributes"]["provenance"] == origin
    assert (await node(acme, "Acme"))["attributes"]["provenance"] == origin


async def test_explain_answer_shows_what_extracting_the_graph_facts_episodes_cost(
    ingested: Ingested,
) -> None:
    acme, episode = ingested.tenant, ingested.episode
    result = await retrieve(acme)
    explained = await acme.result("explain_answer", trajectory_id=result["trajectory_id"])
    (why,) = explained["graph_facts"]
    assert why["episodes"] == [episode["uuid"]]
    # The cost get_episodes shows for the episode: the recorded LLM reports 1 prompt and 1
    # completion token per call.
    assert episode["llm_calls"] > 0
    assert why["extraction"] == [
        {
            "episode": episode["uuid"],
            "llm_calls": episode["llm_calls"],
            "prompt_tokens": episode["llm_calls"],
            "completion_tokens": episode["llm_calls"],
            "llm_seconds": episode["llm_seconds"],
            "seconds": episode["seconds"],
        }
    ]


async def test_a_fact_written_directly_names_no_episode(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """add_triplet without an LLM writes no episode: its fact and nodes say so."""
    database_url = await new_database(postgres_dsn)
    keys = await create_keys(database_url, "acme", key=["read", "write"])
    with live_server(
        None, database_url=database_url, data_dir=tmp_path_factory.mktemp("graph-triplet")
    ) as live:
        acme = Tenant("acme", live, keys["key"])
        added = await acme.result(
            "add_triplet",
            source_node_name="Ada Lovelace",
            edge_name="WROTE_ABOUT",
            fact="Ada Lovelace wrote notes on the Analytical Engine",
            target_node_name="Analytical Engine",
        )
        none = {"episodes": [], **NO_DOCUMENTS}
        assert [n["attributes"]["provenance"] for n in added["nodes"]] == [none, none]
        (fact,) = (await acme.result("search_memory_facts", query="Lovelace notes"))["facts"]
        assert fact["provenance"] == none
        assert (await node(acme, "Ada Lovelace"))["attributes"]["provenance"] == none

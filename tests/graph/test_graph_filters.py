"""The graph retriever in filtered searches: the graph's facts and entities span documents, so
a filtered hybrid_retrieve keeps only the graph's chunks whose documents satisfy the filters;
explain_answer still lists every fact and entity found, with the chunks of each that were kept.

The LLM is `StatingChat` (tests/graph/test_graph_retriever.py): the test double of a hosted
OpenAI-compatible chat API that replays recorded answers and states the recorded fact only
for an episode whose text says it. Everything else is real: the product's server, the local
embedder, PostgreSQL and the embedded FalkorDB.
"""

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentic_rag.graph.documents import RRF_K
from tests.support.graph import (
    MENTIONS,
    QUERY,
    TEXT,
    StatingChat,
    Tenant,
    episodes,
    knowledge_server,
    new_tenant,
    until_processed,
)
from tests.support.live import LiveServer, serve_in_thread


@pytest.fixture(scope="module")
def chat() -> Iterator[str]:
    double = StatingChat()
    with serve_in_thread(double.app()) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, chat: str
) -> AsyncIterator[LiveServer]:
    """The product's server with the double; ingested documents become episodes."""
    async for live in knowledge_server(postgres_dsn, tmp_path_factory, chat, documents=True):
        yield live


async def ingest(tenant: Tenant, text: str, title: str, team: str) -> str:
    """Ingest a one-chunk document with metadata {"team": team}, wait for its episode to be
    extracted; its id."""
    added = await tenant.result("ingest_text", text=text, title=title, metadata={"team": team})
    (document,) = added["documents"]
    (episode,) = [e for e in await episodes(tenant) if e["name"] == title]
    assert (await until_processed(tenant, episode["uuid"], tenant.name))["status"] == "done"
    return str(document["document_id"])


async def search(tenant: Tenant, **filters: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """hybrid_retrieve with these filters, and its explanation."""
    result = await tenant.result("hybrid_retrieve", query=QUERY, answer=False, filters=filters)
    explained = await tenant.result("explain_answer", trajectory_id=result["trajectory_id"])
    return result, explained


async def test_a_filtered_search_keeps_the_graph_hits_of_matching_documents_only(
    server: LiveServer,
) -> None:
    acme = await new_tenant(server)
    stated = await ingest(acme, TEXT, "Team news", "engineering")  # states the fact
    mentioned = await ingest(acme, MENTIONS, "Launch day", "launch")  # mentions its entities

    # Unfiltered: the graph stands for both documents' chunks, every chunk kept.
    result, explained = await search(acme)
    chunk = {h["provenance"]["document_id"]: h["provenance"]["chunk_id"] for h in result["hits"]}
    assert [h["chunk_id"] for h in result["retrievers"]["graph"]] == [
        chunk[stated],
        chunk[mentioned],
    ]
    assert explained["graph_facts"][0]["kept_chunk_ids"] is None
    assert "graph_filters" not in explained["timings_ms"]

    # Only the second document: the fact's chunk is dropped, the entities' other chunk kept,
    # with the score it had (its best entity's rank).
    result, explained = await search(acme, document_ids=[mentioned])
    assert result["retrievers"]["graph"] == [
        {"chunk_id": chunk[mentioned], "rank": 1, "score": pytest.approx(1 / (RRF_K + 1))}
    ]
    assert {h["provenance"]["document_id"] for h in result["hits"]} == {mentioned}
    assert explained["plan"]["retrievers"] == ["dense", "lexical", "graph"]
    assert explained["plan"]["filters"] == {"document_ids": [mentioned]}
    (fact,) = explained["graph_facts"]  # still shown, with none of its chunks kept
    assert fact["chunk_ids"] == [chunk[stated]] and fact["kept_chunk_ids"] == []
    assert explained["graph_entities"]
    for entity in explained["graph_entities"]:
        assert entity["chunk_ids"] == [chunk[stated], chunk[mentioned]]
        assert entity["kept_chunk_ids"] == [chunk[mentioned]]
    assert "graph_filters" in explained["timings_ms"]

    # By metadata: only the first document's chunk, which a fact and an entity point to.
    result, explained = await search(acme, metadata={"team": "engineering"})
    assert result["retrievers"]["graph"] == [
        {"chunk_id": chunk[stated], "rank": 1, "score": pytest.approx(2 / (RRF_K + 1))}
    ]
    assert {h["provenance"]["document_id"] for h in result["hits"]} == {stated}
    assert explained["graph_facts"][0]["kept_chunk_ids"] == [chunk[stated]]

    # A filter no document satisfies: the graph keeps nothing, and nothing is found.
    result, explained = await search(acme, kinds=["pdf"])
    assert result["retrievers"]["graph"] == [] and result["hits"] == []
    assert explained["graph_facts"][0]["kept_chunk_ids"] == []

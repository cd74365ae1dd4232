"""hybrid_retrieve's graph retriever: facts and entities. One graph search finds both; a fact
stands for the chunks of the episodes it came from, an entity for the chunks of the episodes
that mention it; the two chunk rankings are fused by reciprocal rank into the one `graph`
list, and explain_answer shows the facts and the entities behind it.

The LLM is `StatingChat`: the test double of a hosted OpenAI-compatible chat API of
tests/graph/test_graph_llm.py (`RecordedChat`, recorded answers by response schema) that states the
recorded fact only for an episode whose text says it. Everything else is real: the product's
server, the local embedder, PostgreSQL and the embedded FalkorDB.
"""

from collections.abc import AsyncIterator, Iterator

import pytest

from agentic_rag.graph.documents import RRF_K, chunk_ranking
from agentic_rag.knowledge.document_graph import GraphEntity, GraphFact
from agentic_rag.knowledge.results import Explanation
from tests.support.graph import (
    MENTIONS,
    TEXT,
    StatingChat,
    Tenant,
    episodes,
    knowledge_server,
    new_tenant,
    retrieve,
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


async def ingest(tenant: Tenant, text: str, title: str) -> tuple[str, str]:
    """Ingest a one-chunk document and wait for its episode: (document id, episode uuid)."""
    added = await tenant.result("ingest_text", text=text, title=title)
    (document,) = added["documents"]
    (episode,) = [e for e in await episodes(tenant) if e["name"] == title]
    assert (await until_processed(tenant, episode["uuid"], tenant.name))["status"] == "done"
    return document["document_id"], episode["uuid"]


async def test_entities_add_the_chunks_of_the_episodes_that_mention_them(
    server: LiveServer,
) -> None:
    acme = await new_tenant(server)
    stated, stated_episode = await ingest(acme, TEXT, "Team news")
    mentioned, mentioned_episode = await ingest(acme, MENTIONS, "Launch day")

    result = await retrieve(acme)
    chunk = {h["provenance"]["document_id"]: h["provenance"]["chunk_id"] for h in result["hits"]}
    explained = await acme.result("explain_answer", trajectory_id=result["trajectory_id"])

    # The fact came from the first document only: it stands for that document's chunk.
    (fact,) = explained["graph_facts"]
    assert fact["episodes"] == [stated_episode] and fact["chunk_ids"] == [chunk[stated]]
    # Both documents mention Alice and Acme: each entity found stands for both chunks.
    entities = explained["graph_entities"]
    assert "Acme" in {e["name"] for e in entities}
    assert [e["rank"] for e in entities] == list(range(1, len(entities) + 1))
    for entity in entities:
        assert entity["uuid"] and entity["score"] > 0
        assert entity["episodes"] == [stated_episode, mentioned_episode]  # oldest first
        assert entity["chunk_ids"] == [chunk[stated], chunk[mentioned]]

    # One graph list: the chunk a fact and an entity point to first, then the one only
    # entities point to, scored by reciprocal rank (each by a rank-1 fact or entity).
    assert result["retrievers"]["graph"] == [
        {"chunk_id": chunk[stated], "rank": 1, "score": pytest.approx(2 / (RRF_K + 1))},
        {"chunk_id": chunk[mentioned], "rank": 2, "score": pytest.approx(1 / (RRF_K + 1))},
    ]
    assert explained["retrievers"]["graph"] == result["retrievers"]["graph"]
    assert explained["plan"]["retrievers"] == ["dense", "lexical", "graph"]


def test_the_chunk_ranking_fuses_facts_and_entities_by_reciprocal_rank() -> None:
    facts = [
        GraphFact("f1", "first fact", 1, 0.9, ["e1"], [1, 2], []),
        GraphFact("f2", "second fact", 2, 0.5, ["e2"], [3], []),
    ]
    entities = [
        GraphEntity("n1", "Alice", 1, 0.8, ["e2"], [3]),
        GraphEntity("n2", "Acme", 2, 0.4, ["e1", "e3"], [4, 1]),
    ]
    both_1_and_2 = 1 / (RRF_K + 1) + 1 / (RRF_K + 2)
    assert chunk_ranking(facts, entities) == [
        (1, pytest.approx(both_1_and_2)),  # fact 1 and entity 2; ties with chunk 3, by id
        (3, pytest.approx(both_1_and_2)),  # fact 2 and entity 1
        (2, pytest.approx(1 / (RRF_K + 1))),  # fact 1 only
        (4, pytest.approx(1 / (RRF_K + 2))),  # entity 2 only
    ]
    assert chunk_ranking(facts, []) == [
        (1, pytest.approx(1 / (RRF_K + 1))),
        (2, pytest.approx(1 / (RRF_K + 1))),
        (3, pytest.approx(1 / (RRF_K + 2))),
    ]


def test_a_trajectory_recorded_before_entities_still_explains() -> None:
    older = {
        "trajectory_id": "01J0000000000000000000000",
        "query": "Who builds rockets for Acme?",
        "plan": {"retrievers": ["dense", "lexical", "graph"]},
        "retrievers": {"graph": [{"chunk_id": 7, "rank": 1, "score": 0.5}]},
        "fusion": {"inputs": {"graph": 1}, "output": []},
        "hits": [],
        "graph_facts": [
            {
                "uuid": "f1",
                "fact": "Alice works at Acme as a rocket engineer",
                "rank": 1,
                "score": 0.5,
                "episodes": ["e1"],
                "chunk_ids": [7],
            }
        ],
        "timings_ms": {"graph": 3.0},
    }
    explained = Explanation.model_validate(older)
    assert explained.graph_entities == []
    assert [f.chunk_ids for f in explained.graph_facts] == [[7]]

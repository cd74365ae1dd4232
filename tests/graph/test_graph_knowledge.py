"""The graph with the knowledge engine: with AGENTIC_RAG_GRAPH_INGEST_DOCUMENTS on, a document
ingested by ingest_text becomes a graph episode (queued, then extracted); hybrid_retrieve adds
the graph's facts as a third retriever whose hits are the document's chunks, and
explain_answer shows it; replacing or deleting the document deletes its episodes. With the
setting off, nothing is queued and retrieval is the two-leg one.

The LLM is `GatedChat` (tests/graph/test_graph_queue.py): the test double of a hosted
OpenAI-compatible chat API that replays recorded answers by response schema, held while its
gate is closed. Everything else is real: the product's server, the local embedder, PostgreSQL
and the embedded FalkorDB.
"""

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import ValidationError

from agentic_rag.config import Settings
from tests.support.graph import (
    TEXT,
    GatedChat,
    episodes,
    knowledge_server,
    new_tenant,
    retrieve,
    until_processed,
    until_status,
)
from tests.support.live import LiveServer, serve_in_thread

NEWER = "# Team news\n\nAlice joined Acme last spring as a rocket engineer, and leads it now."


@pytest.fixture(scope="module")
def gated() -> Iterator[tuple[GatedChat, str]]:
    double = GatedChat()
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"
        double.gate.set()


@pytest.fixture(scope="module")
def chat(gated: tuple[GatedChat, str]) -> str:
    return gated[1]


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, chat: str
) -> AsyncIterator[LiveServer]:
    async for live in knowledge_server(postgres_dsn, tmp_path_factory, chat, documents=True):
        yield live


@pytest.fixture(scope="module")
async def server_without_documents(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, chat: str
) -> AsyncIterator[LiveServer]:
    async for live in knowledge_server(postgres_dsn, tmp_path_factory, chat, documents=False):
        yield live


async def test_an_ingested_document_becomes_an_episode_whose_facts_retrieve_its_chunks(
    server: LiveServer,
) -> None:
    acme = await new_tenant(server)
    ingested = await acme.result("ingest_text", text=TEXT, title="Team news")
    (document,) = ingested["documents"]
    document_id = document["document_id"]

    (queued,) = await episodes(acme)
    assert queued["name"] == "Team news"
    done = await until_processed(acme, queued["uuid"], acme.name)
    assert done["status"] == "done"
    assert done["source_description"].startswith(f"document {document_id}, chunks ")
    (fact,) = (await acme.result("search_memory_facts", query="rocket engineer"))["facts"]
    assert fact["fact"] == "Alice works at Acme as a rocket engineer"
    assert fact["episodes"] == [queued["uuid"]]

    result = await retrieve(acme)
    (graph_hit,) = result["retrievers"]["graph"]
    top = result["hits"][0]
    assert top["provenance"]["document_id"] == document_id
    assert top["provenance"]["chunk_id"] == graph_hit["chunk_id"]
    assert top["retrievers"]["graph"] == {"rank": 1, "score": graph_hit["score"]}

    explained = await acme.result("explain_answer", trajectory_id=result["trajectory_id"])
    assert explained["plan"]["retrievers"] == ["dense", "lexical", "graph"]
    assert explained["plan"]["fusion"]["weights"] == {"dense": 1.0, "lexical": 1.0, "graph": 0.5}
    assert explained["retrievers"]["graph"] == [graph_hit]
    assert explained["fusion"]["inputs"]["graph"] == 1
    assert "graph" in explained["timings_ms"]
    (why,) = explained["graph_facts"]
    assert why["fact"] == fact["fact"] and why["episodes"] == [queued["uuid"]]
    assert why["chunk_ids"] == [graph_hit["chunk_id"]] and why["rank"] == 1

    # A new version of the document replaces its episode; deleting it deletes the new one.
    await acme.result("ingest_text", text=NEWER, title="Team news")
    (replacing,) = await episodes(acme)
    assert replacing["uuid"] != queued["uuid"]
    assert (await until_processed(acme, replacing["uuid"], acme.name))["status"] == "done"

    deleted = await acme.result("delete_document", document_id=document_id)
    assert deleted == {"deleted": document_id, "documents": 1}
    assert await episodes(acme) == []
    assert (await acme.result("search_memory_facts", query="rocket engineer"))["facts"] == []
    assert "graph" not in (await retrieve(acme))["retrievers"]


async def test_deleting_a_source_deletes_the_episodes_of_its_documents(
    server: LiveServer,
) -> None:
    acme = await new_tenant(server)
    ingested = await acme.result("ingest_text", text=TEXT, title="Team news")
    (queued,) = await episodes(acme)
    assert (await until_processed(acme, queued["uuid"], acme.name))["status"] == "done"

    deleted = await acme.result("delete_source", source_id=ingested["source_id"])
    assert deleted["documents"] == 1
    assert await episodes(acme) == []
    assert (await acme.result("search_memory_facts", query="rocket engineer"))["facts"] == []


async def test_an_episode_deleted_while_it_is_extracted_leaves_the_graph_when_it_ends(
    server: LiveServer, gated: tuple[GatedChat, str]
) -> None:
    acme = await new_tenant(server)
    gated[0].gate.clear()  # the LLM answers nothing until the gate opens
    try:
        ingested = await acme.result("ingest_text", text=TEXT, title="Team news")
        (queued,) = await episodes(acme)
        await until_status(acme, acme.name, queued["uuid"], "processing")
        document_id = ingested["documents"][0]["document_id"]
        await acme.result("delete_document", document_id=document_id)
    finally:
        gated[0].gate.set()

    for _ in range(1200):  # its worker finishes the extraction, finds it deleted, removes it
        if await episodes(acme) == []:
            break
        await asyncio.sleep(0.05)
    assert await episodes(acme) == []
    assert (await acme.result("search_memory_facts", query="rocket engineer"))["facts"] == []


async def test_with_the_setting_off_nothing_is_queued_and_retrieval_has_two_legs(
    server_without_documents: LiveServer,
) -> None:
    acme = await new_tenant(server_without_documents)
    await acme.result("ingest_text", text=TEXT, title="Team news")
    assert await episodes(acme) == []
    assert "episodes of" not in (await acme.result("get_status"))["message"]

    result = await retrieve(acme)
    assert set(result["retrievers"]) == {"dense", "lexical"}
    explained = await acme.result("explain_answer", trajectory_id=result["trajectory_id"])
    assert explained["plan"]["fusion"]["weights"] == {"dense": 1.0, "lexical": 1.0}
    assert "graph" not in explained["timings_ms"] and explained["graph_facts"] == []


def test_the_setting_without_an_llm_is_refused_saying_what_to_set() -> None:
    with pytest.raises(ValidationError, match="AGENTIC_RAG_LLM_BASE_URL and AGENTIC_RAG_LLM_MODEL"):
        Settings(graph_ingest_documents=True, llm_base_url=None, llm_model=None)

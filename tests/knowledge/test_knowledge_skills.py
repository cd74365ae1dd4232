"""The knowledge skills end to end: the product's server with the real embedder and a real
PostgreSQL, called over A2A (JSON-RPC) and MCP (the SDK's client), by two tenants."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.support.knowledge import GARDEN, KITCHEN, Caller
from tests.support.live import LiveServer, live_server
from tests.support.outcomes import failure, output
from tests.support.security import create_key


@pytest.fixture
def server(database_url: str, data_dir: Path) -> Iterator[tuple[LiveServer, Caller, Caller]]:
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    with live_server(None, database_url=database_url, data_dir=data_dir) as live:
        alpha, beta = Caller(live.url, alpha_key), Caller(live.url, beta_key)
        yield live, alpha, beta
        alpha.client.close()
        beta.client.close()


def test_ingest_then_ask_in_plain_text_with_citations_and_an_explanation(
    server: tuple[LiveServer, Caller, Caller],
) -> None:
    _, alpha, _ = server
    first = output(alpha.skill("ingest_text", text=GARDEN, title="Garden notes"))
    assert (first["ingested"], first["unchanged"]) == (1, 0) and first["chunks"] >= 1
    output(alpha.skill("ingest_text", text=KITCHEN, title="Kitchen notes"))
    again = output(alpha.skill("ingest_text", text=GARDEN, title="Garden notes"))
    assert (again["ingested"], again["unchanged"], again["chunks"]) == (0, 1, 0)

    task = alpha.ask("How often should I water tomato plants?")
    result = output(task)
    best = result["hits"][0]
    assert best["provenance"]["title"] == "Garden notes"
    assert "twice a week" in best["text"]
    assert set(best["retrievers"]) == {"dense", "lexical"}
    assert result["answer"]["mode"] == "extractive"
    assert "No LLM is configured" in result["answer"]["text"]
    assert "[1]" in result["answer"]["text"]
    assert result["answer"]["citations"][0]["uri"] == "Garden notes"
    text = next(p["text"] for p in task["artifacts"][0]["parts"] if p["kind"] == "text")
    assert "[1] Garden notes" in text

    # The span points into the stored document's text.
    document = output(alpha.skill("get_document", document_id=best["provenance"]["document_id"]))
    span = document["text"][best["provenance"]["char_start"] : best["provenance"]["char_end"]]
    assert span == best["text"]

    explained = output(alpha.skill("explain_answer", trajectory_id=result["trajectory_id"]))
    assert explained["plan"]["retrievers"] == ["dense", "lexical"]
    assert explained["plan"]["fusion"]["method"] in ("rrf", "convex")
    assert {"dense", "lexical"} <= set(explained["retrievers"])
    assert explained["fusion"]["output"][0]["chunk_id"] == best["provenance"]["chunk_id"]
    assert set(explained["fusion"]["output"][0]["contributions"]) <= {"dense", "lexical"}
    assert {"embed_query", "dense", "lexical", "fusion"} <= set(explained["timings_ms"])
    assert explained["hits"][0]["provenance"]["char_end"] == best["provenance"]["char_end"]


def test_rerankers_and_the_ones_that_are_not_configured(
    server: tuple[LiveServer, Caller, Caller],
) -> None:
    _, alpha, _ = server
    output(alpha.skill("ingest_text", text=GARDEN + "\n" + KITCHEN, title="Both"))
    mmr = output(alpha.skill("query_with_reranking", query="crisp crust", reranker="mmr"))
    assert mmr["hits"] and "crust" in mmr["hits"][0]["text"]
    explained = output(alpha.skill("explain_answer", trajectory_id=mmr["trajectory_id"]))
    assert explained["rerank"]["reranker"] == "mmr"
    assert explained["rerank"]["before"] and explained["rerank"]["after"]
    rrf = output(alpha.skill("query_with_reranking", query="crisp crust", reranker="rrf"))
    plan = output(alpha.skill("explain_answer", trajectory_id=rrf["trajectory_id"]))["plan"]
    assert plan["fusion"]["method"] == "rrf" and plan["reranker"] == "rrf"
    # Asked to rerank with no model reranker configured: the fused order, said in the plan.
    fused = output(alpha.skill("hybrid_retrieve", query="crisp crust", use_reranking=True))
    plan = output(alpha.skill("explain_answer", trajectory_id=fused["trajectory_id"]))["plan"]
    assert plan["fusion"]["method"] == "convex" and plan["reranker"] is None
    message = failure(alpha.skill("query_with_reranking", query="crust", reranker="cross-encoder"))
    assert "not available" in message and "rrf, mmr" in message


def test_vector_search_filters_and_threshold(server: tuple[LiveServer, Caller, Caller]) -> None:
    _, alpha, _ = server
    garden = output(
        alpha.skill("ingest_text", text=GARDEN, title="Garden", metadata={"room": "out"})
    )
    output(alpha.skill("ingest_text", text=KITCHEN, title="Kitchen", metadata={"room": "in"}))
    hits = output(
        alpha.skill("vector_search", query="bread", filters={"metadata": {"room": "out"}})
    )
    assert {h["provenance"]["title"] for h in hits["hits"]} == {"Garden"}
    by_source = output(
        alpha.skill("vector_search", query="bread", filters={"source_ids": [garden["source_id"]]})
    )
    assert {h["provenance"]["title"] for h in by_source["hits"]} == {"Garden"}
    strict = output(alpha.skill("vector_search", query="bread", similarity_threshold=0.99))
    assert strict["hits"] == []


def test_tenants_see_nothing_of_each_other(server: tuple[LiveServer, Caller, Caller]) -> None:
    _, alpha, beta = server
    ingested = output(alpha.skill("ingest_text", text=GARDEN, title="Garden notes"))
    document_id = ingested["documents"][0]["document_id"]
    result = output(alpha.ask("tomato sunlight"))
    assert result["hits"]

    assert output(beta.ask("tomato sunlight"))["hits"] == []
    assert output(beta.skill("list_sources"))["sources"] == []
    for skill, arguments, unknown in (
        ("get_document", {"document_id": document_id}, {"document_id": "nope"}),
        ("delete_document", {"document_id": document_id}, {"document_id": "nope"}),
        ("delete_source", {"source_id": ingested["source_id"]}, {"source_id": "nope"}),
        ("explain_answer", {"trajectory_id": result["trajectory_id"]}, {"trajectory_id": "nope"}),
    ):
        foreign = failure(beta.skill(skill, **arguments))
        missing = failure(beta.skill(skill, **unknown))
        assert foreign.replace(next(iter(arguments.values())), "<id>") == missing.replace(
            next(iter(unknown.values())), "<id>"
        )
    # Still there for alpha.
    assert output(alpha.skill("list_sources"))["sources"][0]["documents"] == 1


def test_deleting_removes_from_search(server: tuple[LiveServer, Caller, Caller]) -> None:
    _, alpha, _ = server
    ingested = output(alpha.skill("ingest_text", text=KITCHEN, title="Kitchen"))
    assert output(alpha.ask("sourdough starter"))["hits"]
    deleted = output(alpha.skill("delete_source", source_id=ingested["source_id"]))
    assert deleted["documents"] == 1
    assert output(alpha.ask("sourdough starter"))["hits"] == []
    assert output(alpha.skill("list_sources"))["sources"] == []


def test_empty_text_is_a_clear_failure(server: tuple[LiveServer, Caller, Caller]) -> None:
    _, alpha, _ = server
    assert "empty" in failure(alpha.skill("ingest_text", text="   ", title="Nothing"))


async def test_the_knowledge_skills_are_mcp_tools(
    server: tuple[LiveServer, Caller, Caller],
) -> None:
    live, alpha, _ = server
    output(alpha.skill("ingest_text", text=GARDEN, title="Garden notes"))
    key = alpha.client.headers["X-API-Key"]
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=120)
    async with Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool(
            "hybrid_retrieve", {"query": "How much sun do tomatoes need?", "top_k": 3}
        )
    assert {
        "hybrid_retrieve",
        "vector_search",
        "query_with_reranking",
        "explain_answer",
        "ingest_text",
        "list_sources",
        "get_document",
        "delete_document",
        "delete_source",
        "help",
    } <= set(tools)
    assert "filters" in tools["vector_search"].input_schema["properties"]
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["hits"][0]["provenance"]["title"] == "Garden notes"

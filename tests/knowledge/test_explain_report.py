"""explain_answer's text is a short report with titles; its structured content stays complete:
the product's server with the real embedder and a real PostgreSQL, over A2A."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentic_rag.knowledge.results import Explanation
from tests.support.knowledge import Caller
from tests.support.live import live_server
from tests.support.outcomes import output
from tests.support.security import create_key

PLANTS = [
    ("Tomato", "six hours of sun", "twice a week"),
    ("Basil", "a warm windowsill", "every other day"),
    ("Rosemary", "dry poor soil", "once every two weeks"),
    ("Fern", "deep shade", "whenever the soil surface dries"),
    ("Cactus", "full desert sun", "once a month in summer"),
    ("Orchid", "bright indirect light", "once a week by soaking the bark"),
    ("Lettuce", "cool mornings", "lightly every day"),
    ("Mint", "a pot of its own", "every three days"),
    ("Lavender", "a sunny slope", "rarely once established"),
    ("Strawberry", "a raised bed", "deeply twice a week while fruiting"),
    ("Cucumber", "a trellis", "every morning in hot weather"),
    ("Pepper", "a sheltered corner", "when the top inch of soil is dry"),
]


@pytest.fixture
def alpha(database_url: str, data_dir: Path) -> Iterator[Caller]:
    key = create_key(database_url, "alpha", ["read", "write"])
    with live_server(None, database_url=database_url, data_dir=data_dir) as live:
        caller = Caller(live.url, key)
        for plant, place, water in PLANTS:
            text = f"# Growing {plant.lower()}\n\n{plant} grows best in {place}. Water it {water}."
            output(caller.skill("ingest_text", text=text, title=f"{plant} care sheet"))
        yield caller
        caller.client.close()


def explained(caller: Caller, trajectory_id: str) -> tuple[str, dict[str, Any]]:
    task = caller.skill("explain_answer", trajectory_id=trajectory_id)
    data = output(task)
    text = next(p["text"] for p in task["artifacts"][0]["parts"] if p["kind"] == "text")
    return text, data


def test_the_report_is_short_names_titles_and_only_the_fusion_used(alpha: Caller) -> None:
    result = output(
        alpha.skill(
            "query_with_reranking", query="How often should I water?", reranker="mmr", top_k=10
        )
    )
    assert len(result["hits"]) == 10
    text, data = explained(alpha, result["trajectory_id"])
    lines = text.splitlines()
    assert len(lines) < 80, text
    assert data["plan"]["fusion"]["method"] == "convex"
    assert "fusion convex (weights dense 1.0, lexical 1.0)" in text
    assert "rrf_k" not in text and "rrf_k" not in data["plan"]["fusion"]
    # Each retriever's top hits by title, rank and score.
    for name in ("dense", "lexical"):
        first = data["retrievers"][name][0]
        title = data["titles"][str(first["chunk_id"])]
        assert f"1. {first['score']:.3f} {title} [chunk {first['chunk_id']}]" in text
    # The reranking, before and after; the time of each stage; every source with its span.
    assert "Reranking (mmr) of the top" in text and ", was #" in text
    times = text.split("Time: ", 1)[1].splitlines()[0]
    assert times.startswith("retrieve ") and " ms (embed_query " in times
    for stage in ("dense", "lexical", "fusion", "rerank", "fetch", "answer", "total"):
        assert f"{stage} " in times
    for hit in data["hits"]:
        p = hit["provenance"]
        assert f"[{hit['rank']}] {hit['score']:.3f} {p['title']}, " in text  # uri: the title
        assert f"chars {p['char_start']}-{p['char_end']}" in text
    assert "Tomato care sheet" in text


def test_the_structured_content_keeps_every_field_and_list_in_full(alpha: Caller) -> None:
    result = output(alpha.skill("hybrid_retrieve", query="How often should I water?", top_k=10))
    _, data = explained(alpha, result["trajectory_id"])
    assert set(data) == set(Explanation.model_fields)
    for name, ranked in result["retrievers"].items():
        assert data["retrievers"][name] == ranked  # all of them, not the report's top 5
    named = {r["chunk_id"] for ranked in data["retrievers"].values() for r in ranked}
    assert named and {str(c) for c in named} <= set(data["titles"])
    assert set(data["titles"].values()) <= {f"{plant} care sheet" for plant, _, _ in PLANTS}
    assert len(data["hits"]) == 10 and data["answer"]["citations"]


def test_rrf_shows_its_k(alpha: Caller) -> None:
    result = output(alpha.skill("query_with_reranking", query="water", reranker="rrf"))
    text, data = explained(alpha, result["trajectory_id"])
    assert data["plan"]["fusion"]["rrf_k"] == 5.0
    assert "fusion rrf (rrf_k 5.0, weights dense 1.0, lexical 1.0)" in text
    assert "Reranking" not in text  # rrf asks for the fusion, nothing reorders after it

"""The knowledge store on a real PostgreSQL: documents, chunks, spaces, BM25 and dense search.

Vectors here are synthetic (the store does not care where they come from); the skills' tests
use the real embedder.
"""

import asyncio
from importlib import resources

import asyncpg
import numpy as np
import pytest

from agentic_rag.knowledge.documents import Chunk, ExtractedDocument, Section
from agentic_rag.knowledge.errors import EmbeddingModelMismatch
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.search import Filters
from agentic_rag.knowledge.store.spaces import Space

DIM = 8


def _doc(uri: str, *paragraphs: str, title: str = "T") -> tuple[ExtractedDocument, list[Chunk]]:
    document = ExtractedDocument(
        uri=uri, title=title, mime_type="text/plain", sections=[Section(p) for p in paragraphs]
    )
    chunks, offset = [], 0
    for position, text in enumerate(paragraphs):
        chunks.append(Chunk(position, text, offset, offset + len(text), token_count=len(text)))
        offset += len(text) + 2
    return document, chunks


def _vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
async def store(pool: asyncpg.Pool) -> KnowledgeStore:
    return KnowledgeStore(pool)


@pytest.fixture
async def space(store: KnowledgeStore) -> Space:
    return await store.open_space("test-model", DIM)


async def test_another_model_is_refused_with_the_reembed_command(
    store: KnowledgeStore, space: Space
) -> None:
    assert await store.open_space("test-model", DIM) == space
    with pytest.raises(EmbeddingModelMismatch, match="agentic-rag reembed"):
        await store.open_space("other-model", 16)


async def test_unchanged_content_is_not_rewritten_and_changed_content_replaces_chunks(
    store: KnowledgeStore, space: Space, pool: asyncpg.Pool
) -> None:
    source = await store.upsert_source("acme", "text", "notes", "Notes", {})
    document, chunks = _doc("notes", "alpha beta", "gamma delta")
    first = await store.write_document("acme", source, document, chunks, _vectors(2, 1), space)
    again = await store.write_document("acme", source, document, chunks, _vectors(2, 1), space)
    assert (first.status, again.status) == ("created", "unchanged")
    assert again.document_id == first.document_id
    ids_before = await pool.fetch("SELECT id FROM chunks ORDER BY id")

    changed, new_chunks = _doc("notes", "alpha beta", "epsilon", "zeta")
    result = await store.write_document("acme", source, changed, new_chunks, _vectors(3, 2), space)
    assert result.status == "updated" and result.document_id == first.document_id
    rows = await pool.fetch("SELECT id, text FROM chunks ORDER BY position")
    assert [r["text"] for r in rows] == ["alpha beta", "epsilon", "zeta"]
    assert not {r["id"] for r in rows} & {r["id"] for r in ids_before}
    assert await pool.fetchval("SELECT count(*) FROM chunk_embeddings") == 3
    # The lexicon follows: 'gamma' is gone, 'epsilon' is known once.
    lexicon = dict(await pool.fetch("SELECT lexeme, df FROM lexicon WHERE tenant = 'acme'"))
    assert "gamma" not in lexicon and lexicon["epsilon"] == 1 and lexicon["alpha"] == 1
    totals = await pool.fetchrow("SELECT chunks FROM lexicon_totals WHERE tenant = 'acme'")
    assert totals["chunks"] == 3


async def test_lexical_search_ranks_by_bm25_with_idf(store: KnowledgeStore, space: Space) -> None:
    source = await store.upsert_source("acme", "text", "zoo", "", {})
    paragraphs = [
        "the cat sat on the mat with another cat",
        "a dog and a cat played",
        "the quokka is a small marsupial",
        "cats and dogs and birds",
        "dogs bark at night",
    ]
    document, chunks = _doc("zoo", *paragraphs)
    await store.write_document("acme", source, document, chunks, _vectors(5, 3), space)
    ids = {h.text: h.chunk_id for h in (await store.hits("acme", range(1, 100))).values()}

    hits = await store.lexical("acme", "quokka cat", 10, Filters())
    # 'quokka' is rare (df 1), 'cat' frequent (df 3 after stemming 'cats'): the rare word wins.
    assert hits[0][0] == ids[paragraphs[2]]
    assert {c for c, _ in hits} >= {ids[paragraphs[0]], ids[paragraphs[1]]}
    # Term frequency counts: two 'cat's rank above one.
    cat = [c for c, _ in await store.lexical("acme", "cat", 10, Filters())]
    assert cat.index(ids[paragraphs[0]]) < cat.index(ids[paragraphs[1]])
    assert await store.lexical("acme", "unicorn", 10, Filters()) == []
    assert await store.lexical("other", "cat", 10, Filters()) == []


async def test_dense_search_is_exact_for_a_small_tenant_among_many(
    store: KnowledgeStore, space: Space
) -> None:
    big = await store.upsert_source("big", "text", "bulk", "", {})
    small = await store.upsert_source("small", "text", "few", "", {})
    bulk_texts = [f"bulk {i}" for i in range(300)]
    bulk, bulk_chunks = _doc("bulk", *bulk_texts)
    await store.write_document("big", big, bulk, bulk_chunks, _vectors(300, 4), space)
    few, few_chunks = _doc("few", "one", "two", "three")
    few_vectors = _vectors(3, 5)
    await store.write_document("small", small, few, few_chunks, few_vectors, space)

    hits = await store.dense("small", space, few_vectors[1], 10, Filters())
    assert len(hits) == 3  # every chunk of the small tenant, none of the big one
    texts = await store.hits("small", [c for c, _ in hits])
    assert texts[hits[0][0]].text == "two" and hits[0][1] == pytest.approx(1.0, abs=1e-5)


async def test_filters_restrict_every_retriever(store: KnowledgeStore, space: Space) -> None:
    a = await store.upsert_source("acme", "url", "https://a.example/", "", {})
    b = await store.upsert_source("acme", "pdf", "b.pdf", "", {})
    doc_a, chunks_a = _doc("https://a.example/x", "shared words here")
    doc_a.metadata = {"team": "red"}
    doc_b, chunks_b = _doc("b.pdf", "shared words there")
    await store.write_document("acme", a, doc_a, chunks_a, _vectors(1, 6), space)
    written = await store.write_document("acme", b, doc_b, chunks_b, _vectors(1, 7), space)
    query = _vectors(1, 6)[0]
    for filters in (
        Filters(kinds=("pdf",)),
        Filters(source_ids=(b,)),
        Filters(document_ids=(written.document_id,)),
    ):
        for hits in (
            await store.dense("acme", space, query, 10, filters),
            await store.lexical("acme", "shared words", 10, filters),
        ):
            found = await store.hits("acme", [c for c, _ in hits])
            assert [h.uri for h in found.values()] == ["b.pdf"], filters
    red = await store.lexical("acme", "shared", 10, Filters(metadata={"team": "red"}))
    assert [h.uri for h in (await store.hits("acme", [c for c, _ in red])).values()] == [
        "https://a.example/x"
    ]


async def test_deleting_a_source_removes_its_documents_chunks_and_terms(
    store: KnowledgeStore, space: Space, pool: asyncpg.Pool
) -> None:
    source = await store.upsert_source("acme", "text", "gone", "", {})
    document, chunks = _doc("gone", "ephemeral words")
    await store.write_document("acme", source, document, chunks, _vectors(1, 8), space)
    assert await store.delete_source("other-tenant", source) is None
    assert await store.delete_source("acme", source) == 1
    assert await pool.fetchval("SELECT count(*) FROM chunks") == 0
    assert await pool.fetchval("SELECT count(*) FROM chunk_embeddings") == 0
    assert await pool.fetchval("SELECT count(*) FROM lexicon") == 0
    assert await store.lexical("acme", "ephemeral", 5, Filters()) == []


async def test_a_tenant_with_1_percent_of_a_shared_index_gets_its_exact_nearest_rows(
    pool: asyncpg.Pool, space: Space
) -> None:
    """A tenant holding 1% of a shared index, searched by the path for large tenants: a
    filtered HNSW scan would return a fraction of its nearest rows (KNOWLEDGE-NOTES); whether
    PostgreSQL picks the index (with iterative scans) or the tenant's rows (and sorts them),
    every one of the 10 nearest must come back. bench/knowledge_scale.py measures it at scale."""
    store = KnowledgeStore(pool, exact_search_max_chunks=0)  # never the small-tenant path
    big = await store.upsert_source("big", "text", "bulk", "", {})
    small = await store.upsert_source("small", "text", "few", "", {})
    for batch in range(20):
        texts = [f"bulk {batch} {i}" for i in range(500)]
        bulk, chunks = _doc(f"bulk-{batch}", *texts)
        await store.write_document("big", big, bulk, chunks, _vectors(500, 10 + batch), space)
    few_vectors = _vectors(100, 40)
    few, few_chunks = _doc("few", *[f"few {i}" for i in range(100)])
    await store.write_document("small", small, few, few_chunks, few_vectors, space)

    for query in _vectors(5, 41):
        hits = await store.dense("small", space, query, 10, Filters())
        exact = sorted(range(100), key=lambda i: -float(few_vectors[i] @ query))[:10]
        found = await store.hits("small", [c for c, _ in hits])
        assert len(hits) == 10
        assert {found[c].text for c, _ in hits} == {f"few {i}" for i in exact}


async def test_a_large_tenant_is_searched_through_the_half_precision_index_and_scored_exactly(
    pool: asyncpg.Pool, space: Space
) -> None:
    """The HNSW index holds half-precision vectors; the query must be written as the index is
    (else PostgreSQL silently scans every row), and scores come from the full vectors."""
    store = KnowledgeStore(pool, exact_search_max_chunks=0)  # the path of large tenants
    index = f"chunk_embeddings_hnsw_{space.id}"
    definition = await pool.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", index)
    assert "halfvec(8)" in definition and "halfvec_cosine_ops" in definition
    source = await store.upsert_source("acme", "text", "bulk", "", {})
    # Enough rows that PostgreSQL prefers the index to sorting them all (3,000 are not).
    vectors = _vectors(10_000, 50)
    document, chunks = _doc("bulk", *[f"chunk {i}" for i in range(10_000)])
    await store.write_document("acme", source, document, chunks, vectors, space)
    await pool.execute("ANALYZE chunk_embeddings")

    query = _vectors(1, 51)[0]
    hits = await store.dense("acme", space, query, 10, Filters())
    found = await store.hits("acme", [c for c, _ in hits])
    exact = {int(found[c].text.split()[1]): score for c, score in hits}
    for i, score in exact.items():  # float32 scores, not half precision's ~1e-3
        assert score == pytest.approx(float(vectors[i] @ query), abs=1e-6)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)

    async def index_scans() -> int:
        return int(
            await pool.fetchval(
                "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $1", index
            )
        )

    # A backend reports its statistics when idle, within about 10 s.
    scans = 0
    for _ in range(150):
        scans = await index_scans()
        if scans > 0:
            break
        await asyncio.sleep(0.1)
    assert scans > 0, f"the search did not read {index}"


async def test_migration_0010_rebuilds_full_precision_indexes_over_halfvec(
    pool: asyncpg.Pool, space: Space
) -> None:
    """Databases made before 0010 hold a full-precision index; the migration rebuilds it as
    the store now creates it."""
    index = f"chunk_embeddings_hnsw_{space.id}"
    created = await pool.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", index)
    await pool.execute(f"DROP INDEX {index}")
    await pool.execute(
        f"CREATE INDEX {index} ON chunk_embeddings "
        f"USING hnsw ((embedding::vector(8)) vector_cosine_ops) WHERE space = {space.id}"
    )
    script = resources.files("agentic_rag.storage").joinpath("migrations/0010_halfvec_hnsw.sql")
    await pool.execute(script.read_text())

    rebuilt = await pool.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", index)
    assert rebuilt == created


async def test_a_model_of_3072_dimensions_gets_its_index(store: KnowledgeStore) -> None:
    """Above pgvector's 2,000-dimension HNSW limit for full precision, within halfvec's 4,000."""
    space = await store.open_space("text-embedding-3-large", 3072)
    source = await store.upsert_source("acme", "text", "one", "", {})
    document, chunks = _doc("one", "a chunk")
    vector = np.ones((1, 3072), dtype=np.float32) / np.sqrt(3072)
    await store.write_document("acme", source, document, chunks, vector, space)
    hits = await store.dense("acme", space, vector[0], 5, Filters())
    assert len(hits) == 1 and hits[0][1] == pytest.approx(1.0, abs=1e-5)


async def test_the_same_text_under_two_sources_is_one_document_both_hold(
    store: KnowledgeStore, space: Space, pool: asyncpg.Pool
) -> None:
    a = await store.upsert_source("acme", "url", "https://a.example/", "", {})
    b = await store.upsert_source("acme", "url", "https://b.example/", "", {})
    document, chunks = _doc("https://a.example/faq", "shared answer text")
    first = await store.write_document("acme", a, document, chunks, _vectors(1, 20), space)
    copy, copy_chunks = _doc("https://b.example/faq", "shared answer text")
    linked = await store.write_document("acme", b, copy, copy_chunks, _vectors(1, 20), space)
    assert (linked.status, linked.document_id, linked.chunks) == (
        "unchanged",
        first.document_id,
        0,
    )
    assert linked.same_as == "https://a.example/faq"
    assert await pool.fetchval("SELECT count(*) FROM chunks") == 1
    assert {s.id: s.documents for s in await store.list_sources("acme")} == {a: 1, b: 1}
    for holder in (a, b):  # a filter by either source finds it
        hits = await store.lexical("acme", "shared answer", 10, Filters(source_ids=(holder,)))
        assert len(hits) == 1
    assert await store.sole_documents("acme", a) == []

    # Deleting A keeps the document (B holds it), now B's; deleting B deletes it.
    assert await store.delete_source("acme", a) == 0
    kept = await store.get_document("acme", first.document_id)
    assert kept is not None and kept.source_id == b
    assert len(await store.lexical("acme", "shared answer", 10, Filters())) == 1
    assert await store.delete_source("acme", b) == 1
    assert await pool.fetchval("SELECT count(*) FROM documents") == 0
    assert await pool.fetchval("SELECT count(*) FROM lexicon WHERE tenant = 'acme'") == 0


async def test_a_url_reached_with_other_content_releases_the_document_it_held(
    store: KnowledgeStore, space: Space, pool: asyncpg.Pool
) -> None:
    source = await store.upsert_source("acme", "url", "https://a.example/", "", {})
    old, old_chunks = _doc("https://a.example/x", "first words")
    written = await store.write_document("acme", source, old, old_chunks, _vectors(1, 21), space)
    moved, moved_chunks = _doc("https://a.example/y", "other words")
    # The URL /x now redirects to /y: the source holds /y's document there, /x's goes.
    result = await store.write_document(
        "acme", source, moved, moved_chunks, _vectors(1, 22), space, reached="https://a.example/x"
    )
    assert result.status == "created" and result.released == (written.document_id,)
    assert await store.get_document("acme", written.document_id) is None
    assert await pool.fetchval("SELECT count(*) FROM lexicon WHERE lexeme = 'first'") == 0

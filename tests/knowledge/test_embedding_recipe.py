"""The recipe of the embedded text (chunking.EMBEDDING_RECIPE): a store whose vectors were made
from chunks without their document's title is refused, as a store of another model is, until
`reembed` re-embeds every chunk after its title and gives each document its own vector; the
dense leg scores a chunk with its document's vector (real PostgreSQL, real model)."""

from collections.abc import AsyncIterator

import asyncpg
import numpy as np
import pytest

from agentic_rag.embedding.embedders import LocalEmbedder
from agentic_rag.knowledge.chunking import (
    EMBEDDING_RECIPE,
    Chunker,
    document_embedding_text,
    embedding_text,
)
from agentic_rag.knowledge.documents import ExtractedDocument, Section
from agentic_rag.knowledge.errors import EmbeddingModelMismatch
from agentic_rag.knowledge.reembed import ReembedProgress, reembed
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.search import DOCUMENT_WEIGHT, Filters
from agentic_rag.knowledge.store.spaces import active_space_of, model_mismatch

TITLE = "SQLite Write-Ahead Logging"
SECTIONS = [
    Section("Overview", "heading", ("Overview",)),
    Section(
        "The default method by which SQLite implements atomic commit and rollback is a "
        "rollback journal. Beginning with version 3.7.0, a new write-ahead log option is "
        "available.",
        "paragraph",
        ("Overview",),
    ),
    Section("Advantages include readers that do not block writers.", "list", ("Advantages",)),
]


@pytest.fixture(scope="module")
async def embedder() -> AsyncIterator[LocalEmbedder]:
    local = LocalEmbedder()
    await local.start()
    yield local
    await local.aclose()


async def _store_of_the_older_recipe(
    pool: asyncpg.Pool, embedder: LocalEmbedder
) -> tuple[KnowledgeStore, list[str]]:
    """A store as the version before the title wrote it: chunks embedded without the title,
    in a space of the 'headings' recipe. Returns what was embedded, chunk by chunk."""
    store = KnowledgeStore(pool)
    space = await store.open_space(embedder.name, embedder.dimension)
    chunks = Chunker(embedder.count_tokens, embedder.max_tokens).chunk(SECTIONS)
    texts = [embedding_text(c) for c in chunks]
    source = await store.upsert_source("acme", "text", "wal", TITLE, {})
    document = ExtractedDocument("wal.html", TITLE, "text/html", SECTIONS)
    vectors = await embedder.embed(texts)
    await store.write_document("acme", source, document, chunks, vectors, space)
    await pool.execute("UPDATE embedding_spaces SET recipe = 'headings'")
    return store, texts


async def test_vectors_of_the_older_recipe_are_refused_until_reembedded_after_the_title(
    pool: asyncpg.Pool, embedder: LocalEmbedder
) -> None:
    store, old_texts = await _store_of_the_older_recipe(pool, embedder)
    assert all(not t.startswith(TITLE) for t in old_texts)
    with pytest.raises(EmbeddingModelMismatch, match="agentic-rag reembed") as refused:
        await store.open_space(embedder.name, embedder.dimension)
    assert "'headings'" in str(refused.value) and EMBEDDING_RECIPE in str(refused.value)

    progress: list[ReembedProgress] = []
    built = await reembed(store, embedder, progress.append)
    space = await store.active_space()
    assert space is not None and space.id == built.id and space.recipe == EMBEDDING_RECIPE
    assert progress[-1].done == progress[-1].total == len(old_texts) + 1  # and the document
    assert await store.open_space(embedder.name, embedder.dimension) == space
    # Only the new space is left, and each chunk's vector is that of its text after the title.
    assert await pool.fetchval("SELECT count(*) FROM embedding_spaces") == 1
    rows = await pool.fetch(
        "SELECT e.embedding FROM chunk_embeddings e JOIN chunks c ON c.id = e.chunk_id "
        "WHERE e.space = $1 ORDER BY c.position",
        space.id,
    )
    stored = np.stack([r["embedding"].to_numpy() for r in rows])
    expected = await embedder.embed([f"{TITLE}\n{t}" for t in old_texts])
    assert np.allclose(stored, expected, atol=1e-5)
    assert not np.allclose(stored, await embedder.embed(old_texts), atol=1e-3)
    # The document got its own vector: its title and opening words.
    own = await pool.fetchval(
        "SELECT embedding FROM document_embeddings WHERE space = $1", space.id
    )
    (expected_own,) = await embedder.embed(
        [document_embedding_text(TITLE, ExtractedDocument("", TITLE, "", SECTIONS).text)]
    )
    assert np.allclose(own.to_numpy(), expected_own, atol=1e-5)


async def test_a_database_not_migrated_yet_reads_as_the_older_recipe(
    pool: asyncpg.Pool, database_url: str, embedder: LocalEmbedder
) -> None:
    store = KnowledgeStore(pool)
    await store.open_space(embedder.name, embedder.dimension)
    assert (await active_space_of(database_url)).recipe == EMBEDDING_RECIPE  # type: ignore[union-attr]
    await pool.execute("ALTER TABLE embedding_spaces DROP COLUMN recipe")
    space = await active_space_of(database_url)
    assert space is not None and space.recipe == "headings"
    refusal = model_mismatch(space, embedder.name, embedder.dimension)
    assert refusal is not None and "agentic-rag reembed" in refusal


async def test_a_chunk_is_scored_with_its_documents_own_vector(
    pool: asyncpg.Pool, embedder: LocalEmbedder
) -> None:
    store = KnowledgeStore(pool)
    space = await store.open_space(embedder.name, embedder.dimension)
    chunker = Chunker(embedder.count_tokens, embedder.max_tokens)
    source = await store.upsert_source("acme", "text", "docs", "Docs", {})
    pages = {
        "wal.html": (TITLE, SECTIONS),
        "cat.txt": ("Cats", [Section("The cat sleeps on the warm windowsill all afternoon.")]),
    }
    chunk_vectors, document_vectors = {}, {}
    for uri, (title, sections) in pages.items():
        document = ExtractedDocument(uri, title, "text/plain", sections)
        chunks = chunker.chunk(sections, title=title)
        vectors = await embedder.embed([embedding_text(c) for c in chunks])
        (own,) = await embedder.embed([document_embedding_text(title, document.text)])
        await store.write_document(
            "acme", source, document, chunks, vectors, space, document_vector=own
        )
        chunk_vectors[uri], document_vectors[uri] = vectors, own
    (query,) = await embedder.embed(["how does the write-ahead log make readers not block?"])

    hits = await store.dense("acme", space, query, 10, Filters())
    uris = await pool.fetch(
        "SELECT c.id, d.uri FROM chunks c JOIN documents d ON d.id = c.document_id "
        "ORDER BY d.uri, c.position"
    )
    expected, own_similarity = {}, {}
    for uri in pages:
        ids = [r["id"] for r in uris if r["uri"] == uri]
        document = float(query @ document_vectors[uri])
        for chunk_id, vector in zip(ids, chunk_vectors[uri], strict=True):
            own_similarity[chunk_id] = float(query @ vector)
            expected[chunk_id] = (own_similarity[chunk_id] + DOCUMENT_WEIGHT * document) / (
                1 + DOCUMENT_WEIGHT
            )
    assert [c for c, _ in hits] == sorted(expected, key=lambda c: -expected[c])
    assert all(abs(score - expected[c]) < 1e-5 for c, score in hits)
    # Without the documents' vectors, the scores are the chunks' own similarities.
    alone = await store.dense("acme", space, query, 10, Filters(), document_weight=0)
    assert all(abs(score - own_similarity[c]) < 1e-5 for c, score in alone)

"""Re-embedding the whole store with another model or recipe (`agentic-rag reembed`).

The new vectors fill a new embedding space while servers keep searching the old one; when every
chunk has a vector, one transaction makes the new space the active one and drops the old.
Interrupted, it resumes where it stopped: chunks that already have a vector in the new space are
not embedded again.

The embedder reads each chunk as the current recipe (chunking.EMBEDDING_RECIPE) makes it: a
chunk stored by an older recipe gets its document's title before its prefix when the whole
still fits the model (chunking.titled_prefix). Each document gets its own vector too.
"""

from collections.abc import Callable
from dataclasses import dataclass

from agentic_rag.embedding.embedders import Embedder
from agentic_rag.knowledge.chunking import (
    EMBEDDING_RECIPE,
    document_embedding_text,
    titled_prefix,
)
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.spaces import ChunkToEmbed, Space

BATCH = 256


@dataclass(frozen=True)
class ReembedProgress:
    done: int
    total: int


async def reembed(
    store: KnowledgeStore,
    embedder: Embedder,
    report: Callable[[ReembedProgress], None],
    *,
    batch: int = BATCH,
) -> Space:
    """Embed every chunk and document with `embedder` into a new space, then switch
    searches to it."""
    active = await store.active_space()
    if active is not None and (active.model, active.dimension, active.recipe) == (
        embedder.name,
        embedder.dimension,
        EMBEDDING_RECIPE,
    ):
        space = active  # same model: only fill what is missing (chunks written meanwhile)
    else:
        space = await store.building_space(embedder.name, embedder.dimension)
    done, total = await store.count_embedded(space)
    report(ReembedProgress(done, total))

    async def fill() -> None:
        nonlocal done
        after = 0
        while rows := await store.chunks_to_embed(space, after, batch):
            vectors = await embedder.embed([embedding_input(row, embedder) for row in rows])
            await store.add_embeddings(space, [row.chunk_id for row in rows], vectors)
            after = rows[-1].chunk_id
            done += len(rows)
            report(ReembedProgress(done, max(total, done)))
        last = ("", "")
        while documents := await store.documents_to_embed(space, last, batch):
            vectors = await embedder.embed(
                [document_embedding_text(title, text) for _, _, title, text in documents]
            )
            keys = [(tenant, document_id) for tenant, document_id, _, _ in documents]
            await store.add_document_embeddings(space, keys, vectors)
            last = keys[-1]
            done += len(documents)
            report(ReembedProgress(done, max(total, done)))

    await fill()
    if space.state != "active":
        await store.activate(space)
        # Chunks and documents written with the old model between the last batch and the
        # switch.
        await fill()
    return space


def embedding_input(chunk: ChunkToEmbed, embedder: Embedder) -> str:
    """What `embedder` reads of a stored chunk under the current recipe."""
    prefix = titled_prefix(
        chunk.title,
        chunk.heading_path,
        chunk.prefix,
        chunk.text,
        embedder.count_tokens,
        embedder.max_tokens,
    )
    return prefix + chunk.text

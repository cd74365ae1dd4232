"""Embedding spaces: which model's vectors (and which recipe of the chunks' text) the store
holds, the one searches read, the one a re-embedding fills, and the HNSW index of each."""

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import numpy as np

from agentic_rag.knowledge.chunking import EMBEDDING_RECIPE
from agentic_rag.knowledge.errors import EmbeddingModelMismatch
from agentic_rag.knowledge.store.connection import Connection
from agentic_rag.knowledge.store.lexicon import LEXICON_LOCK
from agentic_rag.storage.pool import Pool

# The memory a re-embedding's HNSW index is built with, and the longest its build may take
# (not a request's statement timeout: a million chunks take 8 to 16 minutes,
# bench/results/knowledge-scale.md).
HNSW_BUILD_MEMORY = "3GB"
HNSW_BUILD_SECONDS = 6 * 3600
# The HNSW graph (neighbours per node, candidates kept while building), with the candidates
# a search keeps (search.HNSW_EF_SEARCH). At a million chunks, recall@10 against exact search:
# pgvector's defaults (16, 64) 0.88 with ef_search 400, 0.95 with 800 (p95 28 ms); (24, 128)
# 0.96 with 400 (p95 22 ms), for a build 2.4x longer (bench/results/knowledge-hnsw.md).
HNSW_M = 24
HNSW_EF_CONSTRUCTION = 128
# The columns a chunk's vector is copied into chunk_embeddings with.
EMBEDDING_COLUMNS = ["space", "chunk_id", "tenant", "embedding"]
_SPACE_COLUMNS = "id, model, dimension, state, recipe"


class UnknownSpace(RuntimeError):
    """The embedding space this process writes to or reads from is gone (re-embedded)."""


@dataclass(frozen=True)
class Space:
    id: int
    model: str
    dimension: int
    state: str
    recipe: str
    """Which text of a chunk its vectors were made from (chunking.EMBEDDING_RECIPE)."""

    @property
    def vector_type(self) -> str:
        """The vectors as stored and scanned exactly."""
        return f"vector({int(self.dimension)})"

    @property
    def index_type(self) -> str:
        """The vectors as the HNSW index holds them: half precision, half the pages to read
        (recall unchanged at 1M chunks: bench/results/knowledge-hnsw.md)."""
        return f"halfvec({int(self.dimension)})"


@dataclass(frozen=True)
class ChunkToEmbed:
    """A stored chunk as a re-embedding reads it: its prefix as it was embedded when it was
    written, and what makes the prefix of the current recipe (chunking.titled_prefix)."""

    chunk_id: int
    title: str
    heading_path: tuple[str, ...]
    prefix: str
    text: str


class Spaces:
    """The embedding spaces and the vectors a re-embedding adds to one."""

    _pool: Pool

    async def active_space(self) -> Space | None:
        row = await self._pool.fetchrow(
            f"SELECT {_SPACE_COLUMNS} FROM embedding_spaces WHERE state = 'active'"
        )
        return _space(row) if row else None

    async def open_space(self, model: str, dimension: int) -> Space:
        """The active space, created for `model` if the store has none yet.

        Raises EmbeddingModelMismatch if the store's vectors come from another model, or
        from another recipe of the chunks' text.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LEXICON_LOCK)
            row = await conn.fetchrow(
                f"SELECT {_SPACE_COLUMNS} FROM embedding_spaces WHERE state = 'active'"
            )
            if row is None:
                return await self._create_space(conn, model, dimension, "active")
        space = _space(row)
        mismatch = model_mismatch(space, model, dimension)
        if mismatch is not None:
            raise EmbeddingModelMismatch(mismatch)
        return space

    async def _create_space(
        self, conn: Connection, model: str, dimension: int, state: str
    ) -> Space:
        row = await conn.fetchrow(
            "INSERT INTO embedding_spaces (model, dimension, state, recipe) "
            f"VALUES ($1, $2, $3, $4) RETURNING {_SPACE_COLUMNS}",
            model,
            dimension,
            state,
            EMBEDDING_RECIPE,
        )
        space = _space(row)
        if state == "active":  # a re-embedding's space gets its index when it is switched to
            await _create_hnsw_index(conn, space)
        return space

    async def building_space(self, model: str, dimension: int) -> Space:
        """The space a re-embedding fills: resumed if one for `model` (and this recipe) is
        being built."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LEXICON_LOCK)
            row = await conn.fetchrow(
                f"SELECT {_SPACE_COLUMNS} FROM embedding_spaces WHERE state = 'building' "
                "AND model = $1 AND dimension = $2 AND recipe = $3",
                model,
                dimension,
                EMBEDDING_RECIPE,
            )
            if row is not None:
                return _space(row)
            await conn.execute("DELETE FROM embedding_spaces WHERE state = 'building'")
            return await self._create_space(conn, model, dimension, "building")

    async def chunks_to_embed(self, space: Space, after: int, limit: int) -> list[ChunkToEmbed]:
        """Chunks of every tenant without a vector in `space`, in id order after `after`."""
        rows = await self._pool.fetch(
            "SELECT c.id, d.title, c.heading_path, c.embedding_prefix, c.text FROM chunks c "
            "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
            "WHERE c.id > $2 AND NOT EXISTS "
            "(SELECT 1 FROM chunk_embeddings e WHERE e.space = $1 AND e.chunk_id = c.id) "
            "ORDER BY c.id LIMIT $3",
            space.id,
            after,
            limit,
        )
        return [
            ChunkToEmbed(
                r["id"], r["title"], tuple(r["heading_path"]), r["embedding_prefix"], r["text"]
            )
            for r in rows
        ]

    async def add_embeddings(
        self, space: Space, chunk_ids: Sequence[int], vectors: np.ndarray
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            # Chunks deleted since they were read are skipped; a chunk embedded twice (a
            # resumed run) keeps its first vector.
            tenants: dict[int, str] = dict(
                await conn.fetch(  # type: ignore[arg-type]
                    "SELECT c.id, c.tenant FROM chunks c WHERE c.id = ANY($2::bigint[]) "
                    "AND NOT EXISTS (SELECT 1 FROM chunk_embeddings e "
                    "WHERE e.space = $1 AND e.chunk_id = c.id) FOR KEY SHARE",
                    space.id,
                    list(chunk_ids),
                )
            )
            await conn.copy_records_to_table(
                "chunk_embeddings",
                columns=EMBEDDING_COLUMNS,
                records=[
                    (space.id, c, tenants[c], v)
                    for c, v in zip(chunk_ids, vectors, strict=True)
                    if c in tenants
                ],
            )

    async def documents_to_embed(
        self, space: Space, after: tuple[str, str], limit: int
    ) -> list[tuple[str, str, str, str]]:
        """(tenant, id, title, text) of documents of every tenant without a vector of their
        own in `space`, in (tenant, id) order after `after`."""
        rows = await self._pool.fetch(
            "SELECT d.tenant, d.id, d.title, d.text FROM documents d "
            "WHERE (d.tenant, d.id) > ($2, $3) AND NOT EXISTS (SELECT 1 FROM "
            "document_embeddings e WHERE e.space = $1 AND e.tenant = d.tenant "
            "AND e.document_id = d.id) ORDER BY d.tenant, d.id LIMIT $4",
            space.id,
            after[0],
            after[1],
            limit,
        )
        return [(r["tenant"], r["id"], r["title"], r["text"]) for r in rows]

    async def add_document_embeddings(
        self, space: Space, documents: Sequence[tuple[str, str]], vectors: np.ndarray
    ) -> None:
        """Vectors of (tenant, id) documents; documents deleted meanwhile are skipped."""
        await self._pool.executemany(
            "INSERT INTO document_embeddings (space, tenant, document_id, embedding) "
            "SELECT $1, d.tenant, d.id, $4 FROM documents d WHERE d.tenant = $2 AND d.id = $3 "
            "ON CONFLICT DO NOTHING",
            [(space.id, t, d, v) for (t, d), v in zip(documents, vectors, strict=True)],
        )

    async def count_embedded(self, space: Space) -> tuple[int, int]:
        """(chunks and documents with a vector in `space`, all chunks and documents)."""
        row = await self._pool.fetchrow(
            "SELECT (SELECT count(*) FROM chunk_embeddings WHERE space = $1) "
            "+ (SELECT count(*) FROM document_embeddings WHERE space = $1) AS done, "
            "(SELECT count(*) FROM chunks) + (SELECT count(*) FROM documents) AS total",
            space.id,
        )
        assert row is not None
        return int(row["done"]), int(row["total"])

    async def activate(self, space: Space) -> None:
        """Make `space` the one searches read, dropping the old one, in one transaction."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LEXICON_LOCK)
            # Built once over all the vectors: 5.3x faster than keeping it up to date while
            # they are inserted (bench/results/knowledge-scale.md). A graph of a million
            # vectors takes about 1.7 GB in memory (768 bytes of halfvec, 48 neighbours);
            # the benchmark builds it with 3 GB.
            await conn.execute(f"SET LOCAL maintenance_work_mem = '{HNSW_BUILD_MEMORY}'")
            await _create_hnsw_index(conn, space)
            await conn.execute("DELETE FROM embedding_spaces WHERE state = 'active'")
            await conn.execute(
                "UPDATE embedding_spaces SET state = 'active' WHERE id = $1", space.id
            )


async def _create_hnsw_index(conn: Connection, space: Space) -> None:
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS chunk_embeddings_hnsw_{space.id} ON chunk_embeddings "
        f"USING hnsw ((embedding::{space.index_type}) halfvec_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE space = {space.id}",
        timeout=HNSW_BUILD_SECONDS,
    )


def model_mismatch(space: Space | None, model: str, dimension: int | None) -> str | None:
    """Why a store whose vectors are `space` cannot serve `model` (None: it can). A `dimension`
    of None (an endpoint not asked yet) matches any."""
    if space is None:
        return None
    if space.model == model and dimension in (None, space.dimension):
        if space.recipe == EMBEDDING_RECIPE:
            return None
        return (
            f"the knowledge store's vectors were made from its chunks' text as recipe "
            f"{space.recipe!r} gave it, and this version embeds {EMBEDDING_RECIPE!r} (each "
            "chunk after its document's title): run `agentic-rag reembed` to re-embed every "
            "chunk, so that searches compare vectors of one kind"
        )
    size = f" ({dimension} dimensions)" if dimension else ""
    return (
        f"the knowledge store was embedded with {space.model} ({space.dimension} dimensions), "
        f"but {model}{size} is configured: run `agentic-rag reembed` with the new model to "
        f"re-embed every chunk, or configure {space.model} again"
    )


async def active_space_of(dsn: str) -> Space | None:
    """The active space of the database at `dsn`, without migrating it (None if it has none)."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT * FROM embedding_spaces WHERE state = 'active'")
        return _space(row) if row else None
    except asyncpg.UndefinedTableError:  # a database the knowledge engine never used
        return None
    finally:
        await conn.close()


def _space(row: asyncpg.Record | None) -> Space:
    assert row is not None
    # active_space_of reads a database that may not be migrated yet: no recipe column there
    # means the recipe from before it (0014_embedding_recipe.sql).
    recipe = row["recipe"] if "recipe" in row.keys() else "headings"  # noqa: SIM118
    return Space(row["id"], row["model"], row["dimension"], row["state"], recipe)

"""KnowledgeStore: all SQL of sources, documents, chunks, embeddings and the lexicon.

Every method takes the tenant and every statement filters by it. Writes of one document are one
transaction: its chunks, their embeddings and the lexicon's document frequencies change together,
so a search never sees half a document and a retried write never duplicates a chunk.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import asyncpg
import numpy as np
import orjson

from agentic_rag.ids import new_id
from agentic_rag.knowledge import bm25
from agentic_rag.knowledge.chunking import EMBEDDING_RECIPE
from agentic_rag.knowledge.documents import Chunk, ExtractedDocument
from agentic_rag.knowledge.errors import EmbeddingModelMismatch

TEXT_SEARCH_CONFIG = "english"
# Serialises lexicon updates of one tenant (two documents share words): no deadlocks, and the
# transaction that holds it is short (embedding happens before it).
_LEXICON_LOCK = 0x6C657863  # "lexc"
# Each commit that creates, changes or deletes a document notifies this channel, once per
# document, with {"tenant", "id", "change"}, so that every worker's MCP subscribers hear of a
# change any worker made (agentic_rag.mcp.subscriptions).
DOCUMENTS_CHANNEL = "agentic_rag_documents"
# Tenants with at most this many chunks are searched exactly: an HNSW scan filtered by tenant
# loses results when the tenant holds a small share of the index (KNOWLEDGE-NOTES), and an
# exact scan costs 1.2-1.8 us per vector (p95 18.5 ms for 10k: bench/results/knowledge-scale.md).
EXACT_SEARCH_MAX_CHUNKS = 12_000
# The share of a chunk's dense score that is its document's own vector's similarity
# (chunking.document_embedding_text): on bench/quality, 0.3 (of 0.1 to 1) ranked documents best
# on the tuning half of the queries among weights of the document's vector.
DOCUMENT_WEIGHT = 0.3
# The memory a re-embedding's HNSW index is built with.
HNSW_BUILD_MEMORY = "3GB"
# The HNSW graph (neighbours per node, candidates kept while building) and the candidates a
# search keeps. At a million chunks, recall@10 against exact search: pgvector's defaults (16,
# 64) 0.88 with ef_search 400, 0.95 with 800 (p95 28 ms); (24, 128) 0.96 with 400 (p95 22 ms),
# for a build 2.4x longer (bench/results/knowledge-hnsw.md).
HNSW_M = 24
HNSW_EF_CONSTRUCTION = 128
HNSW_EF_SEARCH = 400
Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
# Chunks the lexical leg scores at most, and the top it keeps exact within them
# (bench/results/knowledge-scale.md measures both against unbounded BM25).
LEXICAL_CANDIDATES = 2000
LEXICAL_EXACT_TOP = 30
# The postings the lexical leg's candidate queries read at most per round (bm25.affordable);
# with it, 2,000 chunks scored agree better with unbounded BM25 than 750 did without it, in
# half the p95 (bench/results/knowledge-scale-findings.md, finding 3).
LEXICAL_POSTINGS = 30_000


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
class Filters:
    """Restrictions every retriever applies (declared in the skills' input schemas)."""

    source_ids: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    """Source kinds: url, pdf, youtube, text."""
    ingested_after: datetime | None = None
    ingested_before: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """Documents whose metadata contains these keys and values."""

    @property
    def narrow(self) -> bool:
        """Whether the filters name documents or sources: few enough rows to scan exactly."""
        return bool(self.source_ids or self.document_ids)

    def __bool__(self) -> bool:
        return bool(
            self.source_ids
            or self.document_ids
            or self.kinds
            or self.ingested_after
            or self.ingested_before
            or self.metadata
        )


@dataclass(frozen=True)
class StoredDocument:
    id: str
    source_id: str
    uri: str
    title: str
    mime_type: str
    content_hash: bytes
    etag: str | None
    last_modified: str | None
    links: list[str]
    fetched_at: datetime
    chunk_count: int
    metadata: dict[str, Any]
    notes: list[str]
    created_at: datetime
    updated_at: datetime
    text: str | None = None


@dataclass(frozen=True)
class StoredSource:
    id: str
    kind: str
    uri: str
    title: str
    metadata: dict[str, Any]
    documents: int
    chunks: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Hit:
    """A chunk as a retriever found it, with everything needed to cite it."""

    chunk_id: int
    document_id: str
    source_id: str
    source_kind: str
    uri: str
    title: str
    text: str
    position: int
    char_start: int
    char_end: int
    page: int | None
    start_seconds: float | None
    end_seconds: float | None
    heading_path: list[str]


WriteStatus = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class WriteResult:
    document_id: str
    status: WriteStatus
    chunks: int
    source_id: str = ""
    same_as: str | None = None
    """The URI of the stored document whose text this is, when it was reached there first."""
    released: tuple[str, ...] = ()
    """Documents deleted because no source holds them any more (the source reached another
    document at the same URL)."""


@dataclass(frozen=True)
class SourceRef:
    """What an ingestion reads: its source is created with its first document."""

    kind: str
    uri: str
    title: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class _Identical:
    id: str
    uri: str
    held_here: bool
    """Whether the source already holds it at the URL it was reached by."""


@dataclass(frozen=True)
class ChunkToEmbed:
    """A stored chunk as a re-embedding reads it: its prefix as it was embedded when it was
    written, and what makes the prefix of the current recipe (chunking.titled_prefix)."""

    chunk_id: int
    title: str
    heading_path: tuple[str, ...]
    prefix: str
    text: str


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class KnowledgeStore:
    def __init__(
        self, pool: asyncpg.Pool, *, exact_search_max_chunks: int = EXACT_SEARCH_MAX_CHUNKS
    ) -> None:
        self._pool = pool
        self._exact_max = exact_search_max_chunks

    # -- embedding spaces ---------------------------------------------------------------

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
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LEXICON_LOCK)
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
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LEXICON_LOCK)
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
                columns=_EMBEDDING_COLUMNS,
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
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LEXICON_LOCK)
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

    # -- sources and documents -----------------------------------------------------------
    #
    # A document is stored once per tenant however many sources reach it (source_documents
    # says which do, and by which URL): the same text found again is linked, not stored again,
    # and a page found under another source (its URL, or the canonical URL it names) is that
    # source's too. A source exists once it holds a document.

    async def upsert_source(
        self, tenant: str, kind: str, uri: str, title: str, metadata: dict[str, Any]
    ) -> str:
        return await _upsert_source(self._pool, tenant, SourceRef(kind, uri, title, metadata))

    async def find_source(self, tenant: str, kind: str, uri: str) -> str | None:
        value = await self._pool.fetchval(
            "SELECT id FROM knowledge_sources WHERE tenant = $1 AND kind = $2 AND uri = $3",
            tenant,
            kind,
            uri,
        )
        return str(value) if value is not None else None

    async def find_document(self, tenant: str, source_id: str, uri: str) -> StoredDocument | None:
        """The document `source_id` holds at `uri` (the URL or name it reached it by)."""
        row = await self._pool.fetchrow(
            f"SELECT {_DOCUMENT_COLUMNS_OF_D} FROM source_documents m "
            "JOIN documents d ON d.tenant = m.tenant AND d.id = m.document_id "
            "WHERE m.tenant = $1 AND m.source_id = $2 AND m.uri = $3",
            tenant,
            source_id,
            uri,
        )
        return _document(row) if row else None

    async def link_identical(
        self,
        tenant: str,
        source: "str | SourceRef",
        reached: str,
        digest: bytes,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        links: Sequence[str] = (),
    ) -> WriteResult | None:
        """Make the stored document whose text hashes to `digest` the source's at `reached`,
        if there is one: the same content is never chunked, embedded or stored twice."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _LEXICON_LOCK, tenant
            )
            found = await _identical(conn, tenant, digest, source, reached)
            if found is None:
                return None
            source_id = await _source_id(conn, tenant, source)
            return await _link(
                conn, tenant, source_id, reached, found, (etag, last_modified, links)
            )

    async def link_canonical(
        self,
        tenant: str,
        source: "str | SourceRef",
        reached: str,
        canonical: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        links: Sequence[str] = (),
    ) -> WriteResult | None:
        """Make the page stored from its canonical URL the source's at `reached` (a page that
        names that URL canonical), if some source reached it there: the canonical page's own
        text is the one kept."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _LEXICON_LOCK, tenant
            )
            row = await conn.fetchrow(
                "SELECT m.document_id FROM source_documents m WHERE m.tenant = $1 AND m.uri = $2 "
                "ORDER BY m.created_at LIMIT 1",
                tenant,
                canonical,
            )
            if row is None:
                return None
            source_id = await _source_id(conn, tenant, source)
            held_here = await conn.fetchval(
                "SELECT document_id = $4 FROM source_documents "
                "WHERE tenant = $1 AND source_id = $2 AND uri = $3",
                tenant,
                source_id,
                reached,
                row["document_id"],
            )
            found = _Identical(row["document_id"], canonical, bool(held_here))
            return await _link(
                conn, tenant, source_id, reached, found, (etag, last_modified, links)
            )

    async def write_document(
        self,
        tenant: str,
        source: "str | SourceRef",
        document: ExtractedDocument,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        space: Space,
        *,
        reached: str | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
        links: Sequence[str] = (),
        document_vector: np.ndarray | None = None,
    ) -> WriteResult:
        """Store `document` as the source's at `reached` (default: its URI), with its chunks
        and their vectors, and the document's own vector (ingestion always gives one; a
        document without it is ranked by its chunks alone). `source` is the source's id, or
        what it is: created with this document if it does not exist yet.

        Text stored already (same hash) is linked, not written again: `unchanged`. Otherwise
        the stored copy of the same page (this source's, or another's at the same URL) is
        replaced: `updated`; else the document is new: `created`.
        """
        reached = reached or document.uri
        digest = content_hash(document.text)
        validators = (etag, last_modified, links)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _LEXICON_LOCK, tenant
            )
            if not await conn.fetchval("SELECT true FROM embedding_spaces WHERE id = $1", space.id):
                raise UnknownSpace(
                    f"the store was re-embedded after this process started with {space.model}: "
                    "restart it with the model the store now uses"
                )
            source_id = await _source_id(conn, tenant, source)
            found = await _identical(conn, tenant, digest, source_id, reached)
            if found is not None:
                return await _link(conn, tenant, source_id, reached, found, validators)
            target = await _same_page(conn, tenant, source_id, reached, document.uri)
            if target is not None:  # a new version: its old chunks and their terms go
                await _forget_terms(conn, tenant, target)
                await conn.execute(
                    "DELETE FROM chunks WHERE tenant = $1 AND document_id = $2", tenant, target
                )
            document_id = await conn.fetchval(
                "INSERT INTO documents (tenant, id, source_id, uri, title, mime_type, "
                "content_hash, text, metadata, notes, etag, last_modified, chunk_count, links) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13, $14) "
                "ON CONFLICT (tenant, id) DO UPDATE SET title = excluded.title, "
                "mime_type = excluded.mime_type, content_hash = excluded.content_hash, "
                "text = excluded.text, metadata = excluded.metadata, notes = excluded.notes, "
                "etag = excluded.etag, last_modified = excluded.last_modified, "
                "chunk_count = excluded.chunk_count, links = excluded.links, "
                "updated_at = now(), fetched_at = now() RETURNING id",
                tenant,
                target or new_id(),
                source_id,
                document.uri,
                document.title,
                document.mime_type,
                digest,
                document.text,
                orjson.dumps(document.metadata).decode(),
                document.notes,
                etag,
                last_modified,
                len(chunks),
                list(links),
            )
            ids = await conn.fetch(
                "INSERT INTO chunks (tenant, document_id, position, text, char_start, char_end, "
                "page, start_seconds, end_seconds, heading_path, embedding_prefix, tsv, "
                "term_count) "
                "SELECT $1, $2, c.position, c.text, c.char_start, c.char_end, c.page, "
                "c.start_seconds, c.end_seconds, c.heading_path, c.embedding_prefix, v.tsv, "
                "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(v.tsv) u) "
                "FROM jsonb_to_recordset($3::jsonb) AS c(position int, text text, "
                "char_start int, char_end int, page int, start_seconds real, "
                "end_seconds real, heading_path text[], embedding_prefix text) "
                "CROSS JOIN LATERAL (SELECT "
                f"{_lexemes("array_to_string(c.heading_path, ' ') || ' ' || c.text")} AS tsv) v "
                "ORDER BY c.position RETURNING id, position",
                tenant,
                document_id,
                orjson.dumps([_chunk_record(c) for c in chunks]).decode(),
            )
            by_position = {r["position"]: r["id"] for r in ids}
            await conn.copy_records_to_table(
                "chunk_embeddings",
                columns=_EMBEDDING_COLUMNS,
                records=[
                    (space.id, by_position[c.position], tenant, v)
                    for c, v in zip(chunks, vectors, strict=True)
                ],
            )
            if document_vector is not None:
                await conn.execute(
                    "INSERT INTO document_embeddings (space, tenant, document_id, embedding) "
                    "VALUES ($1, $2, $3, $4) ON CONFLICT (space, tenant, document_id) "
                    "DO UPDATE SET embedding = excluded.embedding",
                    space.id,
                    tenant,
                    document_id,
                    document_vector,
                )
            await _learn_terms(conn, tenant, document_id)
            released = await _hold(conn, tenant, source_id, reached, document_id)
            status: WriteStatus = "updated" if target else "created"
            await _announce(conn, tenant, status, [document_id])
            return WriteResult(document_id, status, len(chunks), source_id, released=released)

    async def set_validators(
        self,
        tenant: str,
        document_id: str,
        etag: str | None,
        last_modified: str | None,
        links: Sequence[str] = (),
    ) -> None:
        """Record what a fetch of an unchanged document said, for the next conditional fetch."""
        await self._pool.execute(
            "UPDATE documents SET etag = $3, last_modified = $4, links = $5, fetched_at = now() "
            "WHERE tenant = $1 AND id = $2",
            tenant,
            document_id,
            etag,
            last_modified,
            list(links),
        )

    async def get_document(
        self, tenant: str, document_id: str, *, with_text: bool = True
    ) -> StoredDocument | None:
        columns = _DOCUMENT_COLUMNS + (", text" if with_text else "")
        row = await self._pool.fetchrow(
            f"SELECT {columns} FROM documents WHERE tenant = $1 AND id = $2",
            tenant,
            document_id,
        )
        return _document(row) if row else None

    async def list_documents(
        self, tenant: str, *, source_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[StoredDocument]:
        """The tenant's documents, or those `source_id` holds, oldest first."""
        rows = await self._pool.fetch(
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents d WHERE tenant = $1 "
            "AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM source_documents m "
            "WHERE m.tenant = d.tenant AND m.document_id = d.id AND m.source_id = $2)) "
            "ORDER BY created_at, id LIMIT $3 OFFSET $4",
            tenant,
            source_id,
            limit,
            offset,
        )
        return [_document(r) for r in rows]

    async def list_sources(self, tenant: str) -> list[StoredSource]:
        rows = await self._pool.fetch(
            "SELECT s.id, s.kind, s.uri, s.title, s.metadata, s.created_at, s.updated_at, "
            "count(d.id) AS documents, coalesce(sum(d.chunk_count), 0) AS chunks "
            "FROM knowledge_sources s LEFT JOIN (SELECT DISTINCT source_id, document_id "
            "FROM source_documents WHERE tenant = $1) m ON m.source_id = s.id "
            "LEFT JOIN documents d ON d.tenant = s.tenant AND d.id = m.document_id "
            "WHERE s.tenant = $1 GROUP BY s.tenant, s.id ORDER BY s.created_at, s.id",
            tenant,
        )
        return [
            StoredSource(
                id=r["id"],
                kind=r["kind"],
                uri=r["uri"],
                title=r["title"],
                metadata=orjson.loads(r["metadata"]),
                documents=int(r["documents"]),
                chunks=int(r["chunks"]),
                created_at=r["created_at"],
                updated_at=r["updated_at"],
            )
            for r in rows
        ]

    async def chunk_spans(self, tenant: str, document_id: str) -> list[tuple[int, int, int]]:
        """(chunk id, char_start, char_end) of a document's chunks, in order."""
        rows = await self._pool.fetch(
            "SELECT id, char_start, char_end FROM chunks WHERE tenant = $1 AND document_id = $2 "
            "ORDER BY position",
            tenant,
            document_id,
        )
        return [(r["id"], r["char_start"], r["char_end"]) for r in rows]

    async def sole_documents(self, tenant: str, source_id: str) -> list[str]:
        """The documents that `source_id` holds and no other source does: those deleting it
        deletes."""
        rows = await self._pool.fetch(
            "SELECT DISTINCT m.document_id FROM source_documents m "
            "WHERE m.tenant = $1 AND m.source_id = $2 AND NOT EXISTS (SELECT 1 "
            "FROM source_documents o WHERE o.tenant = m.tenant "
            "AND o.document_id = m.document_id AND o.source_id <> m.source_id)",
            tenant,
            source_id,
        )
        return [r["document_id"] for r in rows]

    async def delete_document(self, tenant: str, document_id: str) -> bool:
        """Delete a document from every source holding it; a source left empty goes too."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _LEXICON_LOCK, tenant
            )
            holders = [
                r["source_id"]
                for r in await conn.fetch(
                    "SELECT DISTINCT source_id FROM source_documents "
                    "WHERE tenant = $1 AND document_id = $2",
                    tenant,
                    document_id,
                )
            ]
            await _forget_terms(conn, tenant, document_id)
            deleted = await conn.fetchval(
                "DELETE FROM documents WHERE tenant = $1 AND id = $2 RETURNING id",
                tenant,
                document_id,
            )
            if deleted is not None:
                await _announce(conn, tenant, "deleted", [document_id])
            await conn.execute(
                "DELETE FROM knowledge_sources s WHERE s.tenant = $1 AND s.id = ANY($2::text[]) "
                "AND NOT EXISTS (SELECT 1 FROM source_documents m "
                "WHERE m.tenant = s.tenant AND m.source_id = s.id)",
                tenant,
                holders,
            )
            return deleted is not None

    async def delete_source(self, tenant: str, source_id: str) -> int | None:
        """Delete a source and the documents no other source holds (the others stay, theirs);
        the number of documents deleted, or None if there is no such source."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _LEXICON_LOCK, tenant
            )
            if not await conn.fetchval(
                "SELECT true FROM knowledge_sources WHERE tenant = $1 AND id = $2",
                tenant,
                source_id,
            ):
                return None
            held = await conn.fetch(
                "WITH dropped AS (DELETE FROM source_documents WHERE tenant = $1 "
                "AND source_id = $2 RETURNING document_id) SELECT document_id FROM dropped "
                "UNION SELECT id FROM documents WHERE tenant = $1 AND source_id = $2",
                tenant,
                source_id,
            )
            deleted = 0
            for row in held:
                deleted += await _release(conn, tenant, row["document_id"])
            await conn.execute(
                "DELETE FROM knowledge_sources WHERE tenant = $1 AND id = $2", tenant, source_id
            )
            return deleted

    async def complete_documents(
        self, tenant: str, prefix: str, limit: int
    ) -> list[tuple[str, str]]:
        """(id, title) of the tenant's documents whose id, or title ignoring case, starts
        with `prefix`, titles in order: what an MCP client completes a document from."""
        rows = await self._pool.fetch(
            "SELECT id, title FROM documents WHERE tenant = $1 "
            "AND (starts_with(id, $2) OR starts_with(lower(title), lower($2))) "
            "ORDER BY lower(title), id LIMIT $3",
            tenant,
            prefix,
            limit,
        )
        return [(r["id"], r["title"]) for r in rows]

    # -- retrieval ---------------------------------------------------------------------

    async def dense(
        self,
        tenant: str,
        space: Space,
        query: np.ndarray,
        limit: int,
        filters: Filters,
        *,
        ef_search: int = HNSW_EF_SEARCH,
        document_weight: float = DOCUMENT_WEIGHT,
    ) -> list[tuple[int, float]]:
        """(chunk id, score) of the `limit` nearest chunks, best first. The score is the
        chunk's cosine similarity and its document's own vector's, weighted 1 and
        `document_weight` (divided by their sum: a cosine's scale); a document without a
        vector of its own counts its chunk's similarity twice.

        The `limit` nearest chunks are found by their own similarity: small tenants and
        narrow filters are scanned exactly; otherwise the HNSW index is read with iterative
        scans, so that a tenant's rows are found however few they are.
        """
        params: list[Any] = [tenant, query, limit]
        where = _filter_sql(filters, params)
        distance = f"e.embedding::{space.vector_type} <=> $2::{space.vector_type}"
        # The space is a literal, as in the partial index's predicate: with a parameter, a
        # generic plan could not prove the predicate and would never use the index.
        in_space = f"e.space = {int(space.id)}"
        async with self._pool.acquire() as conn, conn.transaction():
            size = await conn.fetchval(
                "SELECT chunks FROM lexicon_totals WHERE tenant = $1", tenant
            )
            exact = filters.narrow or (size or 0) <= self._exact_max
            joins = _FILTER_JOINS if filters else ""
            # A plan made for one tenant must not serve another of another size (measured: a
            # generic plan made the exact path of a 1k tenant 28x slower).
            await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            if exact:
                # MATERIALIZED keeps the planner from ordering by the index of all tenants.
                sql = (
                    "WITH candidates AS MATERIALIZED (SELECT e.chunk_id, "
                    f"{distance} AS distance FROM chunk_embeddings e {joins} "
                    f"WHERE {in_space} AND e.tenant = $1 {where}) "
                    "SELECT chunk_id, distance FROM candidates ORDER BY distance LIMIT $3"
                )
            else:
                await conn.execute(f"SET LOCAL hnsw.ef_search = {max(int(ef_search), limit)}")
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                # Ordered as the index holds the vectors, scored at full precision.
                approximate = (
                    f"e.embedding::{space.index_type} <=> "
                    f"$2::{space.vector_type}::{space.index_type}"
                )
                sql = (
                    f"SELECT e.chunk_id, {distance} AS distance FROM chunk_embeddings e {joins} "
                    f"WHERE {in_space} AND e.tenant = $1 {where} "
                    f"ORDER BY {approximate} LIMIT $3"
                )
            rows = await conn.fetch(sql, *params)
            similarity = {r["chunk_id"]: 1.0 - float(r["distance"]) for r in rows}
            vector = space.vector_type
            of_document: dict[int, float] = dict(
                await conn.fetch(  # type: ignore[arg-type]
                    f"SELECT c.id, 1 - (d.embedding::{vector} <=> $3::{vector}) FROM chunks c "
                    "JOIN document_embeddings d ON d.space = $1 AND d.tenant = c.tenant "
                    "AND d.document_id = c.document_id "
                    "WHERE c.tenant = $2 AND c.id = ANY($4::bigint[])",
                    space.id,
                    tenant,
                    query,
                    list(similarity),
                )
                if document_weight and similarity
                else []
            )
        # relaxed_order and half precision may order rows slightly wrong: sort by the score.
        return sorted(
            (
                (c, (s + document_weight * float(of_document.get(c, s))) / (1 + document_weight))
                for c, s in similarity.items()
            ),
            key=_score,
        )

    async def lexical(
        self,
        tenant: str,
        query: str,
        limit: int,
        filters: Filters,
        *,
        budget: int = LEXICAL_CANDIDATES,
        postings: int = LEXICAL_POSTINGS,
    ) -> list[tuple[int, float]]:
        """(chunk id, BM25 score) of the `limit` best chunks for `query`, best first.

        BM25 over PostgreSQL's lexemes (stemmed, without stop words), with IDF from the
        tenant's lexicon. Chunks are scored in at most two rounds (bm25.py says why this finds
        the best ones): first those holding the term sets that only a few chunks hold, then,
        if the top `LEXICAL_EXACT_TOP` could still change, every chunk whose terms can reach
        the score of the last of them. At most `budget` chunks are scored, and a round's
        candidate query reads about `postings` postings at most: within both the top
        `LEXICAL_EXACT_TOP` are exactly BM25's (for queries of up to bm25.PLANNED_TERMS terms);
        past either (queries of frequent words on large tenants), the best of those scored.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            # Without the tenant beside them the keys' matches are estimated high enough for
            # parallel workers, whose start costs more than the search (a 10k tenant's query:
            # 9.4 ms with two workers, 1.3 ms without).
            await conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            found = await conn.fetch(
                "SELECT q.lexeme, coalesce(l.df, 0) AS df "
                f"FROM unnest({_lexemes('$2')}) q "
                "LEFT JOIN lexicon l ON l.tenant = $1 AND l.lexeme = q.lexeme",
                tenant,
                query,
            )
            totals = await conn.fetchrow(
                "SELECT chunks, terms FROM lexicon_totals WHERE tenant = $1", tenant
            )
            if totals is None or totals["chunks"] == 0:
                return []
            chunks, average = totals["chunks"], totals["terms"] / totals["chunks"]
            terms = bm25.query_terms(((r["lexeme"], r["df"]) for r in found), chunks)
            if not terms:
                return []
            idf = {t.lexeme: t.idf for t in terms}
            planned = terms[: bm25.PLANNED_TERMS]
            exact_top = min(limit, LEXICAL_EXACT_TOP)
            threshold = bm25.opening_threshold(planned, chunks, 2 * exact_top)
            scored: dict[int, float] = {}
            for _ in range(2):
                clauses, complete = bm25.affordable(bm25.reaching(planned, threshold), postings)
                room = budget - len(scored)
                rows = await self._lexical_candidates(
                    conn, tenant, clauses, list(idf), filters, list(scored), room
                )
                for r in rows:
                    scored[r["id"]] = bm25.score(
                        bm25.term_frequencies(r["terms"]), idf, r["term_count"], average
                    )
                if len(rows) >= room or not complete:
                    break  # a budget is spent: the best of those scored
                ranked = sorted(scored.values(), reverse=True)
                last = ranked[exact_top - 1] if len(ranked) >= exact_top else 0.0
                if last >= threshold:
                    break  # no chunk left unscored can reach the top
                threshold = max(last, min(t.bound for t in planned))
        return sorted(scored.items(), key=_score)[:limit]

    async def _lexical_candidates(
        self,
        conn: Connection,
        tenant: str,
        clauses: Sequence[tuple[bm25.Term, ...]],
        lexemes: list[str],
        filters: Filters,
        scored: list[int],
        limit: int,
    ) -> list[asyncpg.Record]:
        """Chunks holding every term of one of `clauses`, not among `scored`: their length
        and the query's lexemes in them (a tsvector's text)."""
        params: list[Any] = [tenant, lexemes, scored, limit]
        key = hashlib.md5(tenant.encode()).hexdigest()
        held = []
        for clause in clauses:
            params.append([f"{key} {t.lexeme}" for t in clause])
            held.append(f"lexical_keys(c.tenant, c.tsv) @> ${len(params)}::text[]")
        where = _filter_sql(filters, params)
        # The keys name the tenant, so the index alone finds the tenant's chunks. Without
        # `c.tenant = $1` beside them no plan can walk the tenant's rows computing each row's
        # keys, which PostgreSQL picks when statistics are missing, as right after an
        # ingestion (seconds for a few thousand chunks); the tenant is checked after.
        return await conn.fetch(
            "WITH matched AS MATERIALIZED (SELECT c.id, c.tenant, c.term_count, c.tsv "
            f"FROM chunks c {_FILTER_JOINS_FROM_CHUNKS if filters else ''} "
            f"WHERE ({' OR '.join(held)}) AND c.id <> ALL($3::bigint[]) {where} LIMIT $4) "
            "SELECT id, term_count, "
            "ts_filter(setweight(tsv, 'A', $2::text[]), '{a}')::text AS terms "
            "FROM matched WHERE tenant = $1",
            *params,
        )

    async def matching_chunks(
        self, tenant: str, chunk_ids: Sequence[int], filters: Filters
    ) -> set[int]:
        """Those of these chunks whose document satisfies `filters`: the graph retriever's
        hits, found across documents, are kept by this."""
        params: list[Any] = [tenant, list(chunk_ids)]
        where = _filter_sql(filters, params)
        rows = await self._pool.fetch(
            f"SELECT c.id FROM chunks c {_FILTER_JOINS_FROM_CHUNKS} "
            f"WHERE c.tenant = $1 AND c.id = ANY($2::bigint[]) {where}",
            *params,
        )
        return {r["id"] for r in rows}

    async def hits(self, tenant: str, chunk_ids: Sequence[int]) -> dict[int, Hit]:
        rows = await self._pool.fetch(
            "SELECT c.id, c.document_id, d.source_id, s.kind, d.uri, d.title, c.text, "
            "c.position, c.char_start, c.char_end, c.page, c.start_seconds, c.end_seconds, "
            "c.heading_path FROM chunks c "
            "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
            "JOIN knowledge_sources s ON s.tenant = d.tenant AND s.id = d.source_id "
            "WHERE c.tenant = $1 AND c.id = ANY($2::bigint[])",
            tenant,
            list(chunk_ids),
        )
        return {
            r["id"]: Hit(
                chunk_id=r["id"],
                document_id=r["document_id"],
                source_id=r["source_id"],
                source_kind=r["kind"],
                uri=r["uri"],
                title=r["title"],
                text=r["text"],
                position=r["position"],
                char_start=r["char_start"],
                char_end=r["char_end"],
                page=r["page"],
                start_seconds=r["start_seconds"],
                end_seconds=r["end_seconds"],
                heading_path=list(r["heading_path"]),
            )
            for r in rows
        }

    async def vectors(self, space: Space, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        rows = await self._pool.fetch(
            "SELECT chunk_id, embedding FROM chunk_embeddings "
            "WHERE space = $1 AND chunk_id = ANY($2::bigint[])",
            space.id,
            list(chunk_ids),
        )
        return {r["chunk_id"]: r["embedding"].to_numpy().astype(np.float32) for r in rows}

    async def chunk_count(self, tenant: str) -> int:
        value = await self._pool.fetchval(
            "SELECT chunks FROM lexicon_totals WHERE tenant = $1", tenant
        )
        return int(value or 0)


async def _upsert_source(
    executor: "Connection | asyncpg.Pool", tenant: str, source: SourceRef
) -> str:
    row = await executor.fetchrow(
        "INSERT INTO knowledge_sources (tenant, id, kind, uri, title, metadata) "
        "VALUES ($1, $2, $3, $4, $5, $6::jsonb) "
        "ON CONFLICT (tenant, kind, uri) DO UPDATE SET updated_at = now(), "
        "title = CASE WHEN excluded.title = '' THEN knowledge_sources.title "
        "ELSE excluded.title END, metadata = knowledge_sources.metadata || excluded.metadata "
        "RETURNING id",
        tenant,
        new_id(),
        source.kind,
        source.uri,
        source.title,
        orjson.dumps(source.metadata).decode(),
    )
    assert row is not None
    return str(row["id"])


async def _source_id(conn: Connection, tenant: str, source: "str | SourceRef") -> str:
    return source if isinstance(source, str) else await _upsert_source(conn, tenant, source)


async def _identical(
    conn: Connection, tenant: str, digest: bytes, source: "str | SourceRef", reached: str
) -> _Identical | None:
    """The stored document with this text, the one the source holds at `reached` first."""
    if isinstance(source, SourceRef):
        source = (
            await conn.fetchval(
                "SELECT id FROM knowledge_sources WHERE tenant = $1 AND kind = $2 AND uri = $3",
                tenant,
                source.kind,
                source.uri,
            )
            or ""
        )
    row = await conn.fetchrow(
        "SELECT d.id, d.uri, EXISTS (SELECT 1 FROM source_documents m WHERE m.tenant = d.tenant "
        "AND m.source_id = $3 AND m.uri = $4 AND m.document_id = d.id) AS held_here "
        "FROM documents d WHERE d.tenant = $1 AND d.content_hash = $2 "
        "ORDER BY held_here DESC, d.created_at, d.id LIMIT 1",
        tenant,
        digest,
        source,
        reached,
    )
    return _Identical(row["id"], row["uri"], row["held_here"]) if row else None


async def _link(
    conn: Connection,
    tenant: str,
    source_id: str,
    reached: str,
    found: _Identical,
    validators: tuple[str | None, str | None, Sequence[str]],
) -> WriteResult:
    """The source holds `found` at `reached`: nothing is written but the link."""
    if found.held_here or found.uri == reached:  # the validators are this URL's
        etag, last_modified, links = validators
        await conn.execute(
            "UPDATE documents SET etag = $3, last_modified = $4, links = $5, fetched_at = now() "
            "WHERE tenant = $1 AND id = $2",
            tenant,
            found.id,
            etag,
            last_modified,
            list(links),
        )
    released = await _hold(conn, tenant, source_id, reached, found.id)
    same_as = None if found.held_here else found.uri
    return WriteResult(found.id, "unchanged", 0, source_id, same_as=same_as, released=released)


async def _same_page(
    conn: Connection, tenant: str, source_id: str, reached: str, uri: str
) -> str | None:
    """The document a new version of the page `uri` replaces: the one the source holds at
    `reached` if it is that page, else another source's copy of the page at this URL."""
    held = await conn.fetchrow(
        "SELECT d.id, d.uri FROM source_documents m "
        "JOIN documents d ON d.tenant = m.tenant AND d.id = m.document_id "
        "WHERE m.tenant = $1 AND m.source_id = $2 AND m.uri = $3 FOR UPDATE OF d",
        tenant,
        source_id,
        reached,
    )
    if held is not None and held["uri"] == uri:
        return str(held["id"])
    if not _is_url(uri):  # a file name or a title names a document only within its source
        return None
    value = await conn.fetchval(
        "SELECT id FROM documents WHERE tenant = $1 AND uri = $2 ORDER BY created_at, id "
        "LIMIT 1 FOR UPDATE",
        tenant,
        uri,
    )
    return str(value) if value is not None else None


async def _hold(
    conn: Connection, tenant: str, source_id: str, reached: str, document_id: str
) -> tuple[str, ...]:
    """The source holds `document_id` at `reached`; the document it held there before is
    released: the documents deleted."""
    before = await conn.fetchval(
        "SELECT document_id FROM source_documents "
        "WHERE tenant = $1 AND source_id = $2 AND uri = $3 FOR UPDATE",
        tenant,
        source_id,
        reached,
    )
    await conn.execute(
        "INSERT INTO source_documents (tenant, source_id, uri, document_id) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, source_id, uri) "
        "DO UPDATE SET document_id = excluded.document_id",
        tenant,
        source_id,
        reached,
        document_id,
    )
    if before is not None and before != document_id and await _release(conn, tenant, before):
        return (before,)
    return ()


async def _release(conn: Connection, tenant: str, document_id: str) -> bool:
    """A source let go of the document: deleted if no source holds it (True), else a holder
    becomes its first source if the one it names let go."""
    holder = await conn.fetchval(
        "SELECT source_id FROM source_documents WHERE tenant = $1 AND document_id = $2 "
        "ORDER BY created_at, source_id LIMIT 1",
        tenant,
        document_id,
    )
    if holder is None:
        await _forget_terms(conn, tenant, document_id)
        deleted = await conn.fetchval(
            "DELETE FROM documents WHERE tenant = $1 AND id = $2 RETURNING id",
            tenant,
            document_id,
        )
        if deleted is not None:
            await _announce(conn, tenant, "deleted", [document_id])
        return deleted is not None
    await conn.execute(
        "UPDATE documents d SET source_id = $3 WHERE d.tenant = $1 AND d.id = $2 "
        "AND NOT EXISTS (SELECT 1 FROM source_documents m WHERE m.tenant = d.tenant "
        "AND m.document_id = d.id AND m.source_id = d.source_id)",
        tenant,
        document_id,
        holder,
    )
    return False


async def _announce(
    conn: Connection, tenant: str, change: WriteStatus | Literal["deleted"], ids: Sequence[str]
) -> None:
    """Notify DOCUMENTS_CHANNEL of `ids`' change: delivered when the transaction commits."""
    payloads = [orjson.dumps({"tenant": tenant, "id": i, "change": change}).decode() for i in ids]
    await conn.execute(
        "SELECT count(pg_notify($1, payload)) FROM unnest($2::text[]) AS payload",
        DOCUMENTS_CHANNEL,
        payloads,
    )


def _is_url(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


async def _create_hnsw_index(conn: Connection, space: Space) -> None:
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS chunk_embeddings_hnsw_{space.id} ON chunk_embeddings "
        f"USING hnsw ((embedding::{space.index_type}) halfvec_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE space = {space.id}"
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


def _score(hit: tuple[int, float]) -> tuple[float, int]:
    return (-hit[1], hit[0])


_EMBEDDING_COLUMNS = ["space", "chunk_id", "tenant", "embedding"]
_SPACE_COLUMNS = "id, model, dimension, state, recipe"
_DOCUMENT_COLUMNS = (
    "id, source_id, uri, title, mime_type, content_hash, etag, last_modified, links, "
    "fetched_at, chunk_count, metadata, notes, created_at, updated_at"
)
_DOCUMENT_COLUMNS_OF_D = ", ".join(f"d.{c.strip()}" for c in _DOCUMENT_COLUMNS.split(","))

_FILTER_JOINS = (
    "JOIN chunks c ON c.id = e.chunk_id "
    "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
    "JOIN knowledge_sources s ON s.tenant = d.tenant AND s.id = d.source_id"
)
_FILTER_JOINS_FROM_CHUNKS = (
    "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
    "JOIN knowledge_sources s ON s.tenant = d.tenant AND s.id = d.source_id"
)


def _filter_sql(filters: Filters, params: list[Any]) -> str:
    """SQL conditions on `d` (documents) and `s` (sources) for `filters`; appends params."""
    conditions = []

    def param(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    # A document belongs to every source that holds it (source_documents).
    if filters.source_ids:
        conditions.append(
            "EXISTS (SELECT 1 FROM source_documents m WHERE m.tenant = d.tenant "
            f"AND m.document_id = d.id AND m.source_id = ANY({param(list(filters.source_ids))}"
            "::text[]))"
        )
    if filters.document_ids:
        conditions.append(f"d.id = ANY({param(list(filters.document_ids))}::text[])")
    if filters.kinds:
        conditions.append(
            "EXISTS (SELECT 1 FROM source_documents m JOIN knowledge_sources k "
            "ON k.tenant = m.tenant AND k.id = m.source_id WHERE m.tenant = d.tenant "
            f"AND m.document_id = d.id AND k.kind = ANY({param(list(filters.kinds))}::text[]))"
        )
    if filters.ingested_after:
        conditions.append(f"d.updated_at >= {param(filters.ingested_after)}")
    if filters.ingested_before:
        conditions.append(f"d.updated_at < {param(filters.ingested_before)}")
    if filters.metadata:
        conditions.append(f"d.metadata @> {param(orjson.dumps(filters.metadata).decode())}::jsonb")
    return "".join(f" AND {c}" for c in conditions)


def _lexemes(text: str) -> str:
    """The SQL of the tsvector of `text`, for chunks and queries alike. Split at every character
    that is neither a letter nor a digit first: PostgreSQL's parser keeps paths, host names and
    URLs whole ("/etc/passwd" would be one term no query word matches); measured on the quality
    benchmark, +0.016 nDCG@10 for the lexical leg (bench/quality/results.md)."""
    return f"to_tsvector('{TEXT_SEARCH_CONFIG}', regexp_replace({text}, '[^[:alnum:]]+', ' ', 'g'))"


async def _learn_terms(conn: Connection, tenant: str, document_id: str) -> None:
    await conn.execute(
        "INSERT INTO lexicon (tenant, lexeme, df) "
        "SELECT $1, u.lexeme, count(*) FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u "
        "WHERE c.tenant = $1 AND c.document_id = $2 GROUP BY u.lexeme "
        "ON CONFLICT (tenant, lexeme) DO UPDATE SET df = lexicon.df + excluded.df",
        tenant,
        document_id,
    )
    await conn.execute(
        "INSERT INTO lexicon_totals (tenant, chunks, terms) "
        "SELECT $1, count(*), coalesce(sum(term_count), 0) FROM chunks "
        "WHERE tenant = $1 AND document_id = $2 "
        "ON CONFLICT (tenant) DO UPDATE SET chunks = lexicon_totals.chunks + excluded.chunks, "
        "terms = lexicon_totals.terms + excluded.terms",
        tenant,
        document_id,
    )


async def _forget_terms(conn: Connection, tenant: str, document_id: str) -> None:
    await conn.execute(
        "UPDATE lexicon l SET df = l.df - g.n FROM (SELECT u.lexeme, count(*) AS n "
        "FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u "
        "WHERE c.tenant = $1 AND c.document_id = $2 GROUP BY u.lexeme) g "
        "WHERE l.tenant = $1 AND l.lexeme = g.lexeme",
        tenant,
        document_id,
    )
    await conn.execute("DELETE FROM lexicon WHERE tenant = $1 AND df <= 0", tenant)
    await conn.execute(
        "UPDATE lexicon_totals t SET chunks = t.chunks - g.n, terms = t.terms - g.terms "
        "FROM (SELECT count(*) AS n, coalesce(sum(term_count), 0) AS terms FROM chunks "
        "WHERE tenant = $1 AND document_id = $2) g WHERE t.tenant = $1",
        tenant,
        document_id,
    )


def _chunk_record(chunk: Chunk) -> dict[str, Any]:
    return {
        "position": chunk.position,
        "text": chunk.text,
        "char_start": chunk.start,
        "char_end": chunk.end,
        "page": chunk.page,
        "start_seconds": chunk.start_seconds,
        "end_seconds": chunk.end_seconds,
        "heading_path": list(chunk.heading_path),
        "embedding_prefix": chunk.embedding_prefix,
    }


def _document(row: asyncpg.Record) -> StoredDocument:
    return StoredDocument(
        id=row["id"],
        source_id=row["source_id"],
        uri=row["uri"],
        title=row["title"],
        mime_type=row["mime_type"],
        content_hash=bytes(row["content_hash"]),
        etag=row["etag"],
        last_modified=row["last_modified"],
        links=list(row["links"]),
        fetched_at=row["fetched_at"],
        chunk_count=row["chunk_count"],
        metadata=orjson.loads(row["metadata"]),
        notes=list(row["notes"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        text=row.get("text"),
    )

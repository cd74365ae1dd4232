"""Documents, their chunks and their vectors, and which sources hold them.

Writes of one document are one transaction: its chunks, their embeddings and the lexicon's
document frequencies change together, so a search never sees half a document and a retried write
never duplicates a chunk.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
import numpy as np
import orjson

from agentic_rag.ids import new_id
from agentic_rag.knowledge.documents import Chunk, ExtractedDocument
from agentic_rag.knowledge.store.connection import Connection
from agentic_rag.knowledge.store.lexicon import LEXICON_LOCK, forget_terms, learn_terms, lexemes
from agentic_rag.knowledge.store.sources import SourceRef, source_id_of
from agentic_rag.knowledge.store.spaces import EMBEDDING_COLUMNS, Space, UnknownSpace
from agentic_rag.storage.pool import Pool

# Each commit that creates, changes or deletes a document notifies this channel, once per
# document, with {"tenant", "id", "change"}, so that every worker's MCP subscribers hear of a
# change any worker made (agentic_rag.mcp.subscriptions).
DOCUMENTS_CHANNEL = "agentic_rag_documents"


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
class _Identical:
    id: str
    uri: str
    held_here: bool
    """Whether the source already holds it at the URL it was reached by."""


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class Documents:
    """A document is stored once per tenant however many sources reach it (source_documents
    says which do, and by which URL): the same text found again is linked, not stored again,
    and a page found under another source (its URL, or the canonical URL it names) is that
    source's too. A source exists once it holds a document."""

    _pool: Pool

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
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", LEXICON_LOCK, tenant
            )
            found = await _identical(conn, tenant, digest, source, reached)
            if found is None:
                return None
            source_id = await source_id_of(conn, tenant, source)
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
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", LEXICON_LOCK, tenant
            )
            row = await conn.fetchrow(
                "SELECT m.document_id FROM source_documents m WHERE m.tenant = $1 AND m.uri = $2 "
                "ORDER BY m.created_at LIMIT 1",
                tenant,
                canonical,
            )
            if row is None:
                return None
            source_id = await source_id_of(conn, tenant, source)
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
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", LEXICON_LOCK, tenant
            )
            if not await conn.fetchval("SELECT true FROM embedding_spaces WHERE id = $1", space.id):
                raise UnknownSpace(
                    f"the store was re-embedded after this process started with {space.model}: "
                    "restart it with the model the store now uses"
                )
            source_id = await source_id_of(conn, tenant, source)
            found = await _identical(conn, tenant, digest, source_id, reached)
            if found is not None:
                return await _link(conn, tenant, source_id, reached, found, validators)
            target = await _same_page(conn, tenant, source_id, reached, document.uri)
            if target is not None:  # a new version: its old chunks and their terms go
                await forget_terms(conn, tenant, target)
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
                f"{lexemes("array_to_string(c.heading_path, ' ') || ' ' || c.text")} AS tsv) v "
                "ORDER BY c.position RETURNING id, position",
                tenant,
                document_id,
                orjson.dumps([_chunk_record(c) for c in chunks]).decode(),
            )
            by_position = {r["position"]: r["id"] for r in ids}
            await conn.copy_records_to_table(
                "chunk_embeddings",
                columns=EMBEDDING_COLUMNS,
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
            await learn_terms(conn, tenant, document_id)
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
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", LEXICON_LOCK, tenant
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
            await forget_terms(conn, tenant, document_id)
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
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", LEXICON_LOCK, tenant
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
        await forget_terms(conn, tenant, document_id)
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


_DOCUMENT_COLUMNS = (
    "id, source_id, uri, title, mime_type, content_hash, etag, last_modified, links, "
    "fetched_at, chunk_count, metadata, notes, created_at, updated_at"
)
_DOCUMENT_COLUMNS_OF_D = ", ".join(f"d.{c.strip()}" for c in _DOCUMENT_COLUMNS.split(","))


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

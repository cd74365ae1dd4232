"""Knowledge sources: what an ingestion reads (a site, a file, a video), created with its
first document, and what each holds."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from agentic_rag.ids import new_id
from agentic_rag.knowledge.store.connection import Connection
from agentic_rag.storage.pool import Pool


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
class SourceRef:
    """What an ingestion reads: its source is created with its first document."""

    kind: str
    uri: str
    title: str
    metadata: dict[str, Any]


class Sources:
    """The knowledge_sources rows: a source is found by its kind and URI."""

    _pool: Pool

    async def upsert_source(
        self, tenant: str, kind: str, uri: str, title: str, metadata: dict[str, Any]
    ) -> str:
        return await _upsert(self._pool, tenant, SourceRef(kind, uri, title, metadata))

    async def find_source(self, tenant: str, kind: str, uri: str) -> str | None:
        value = await self._pool.fetchval(
            "SELECT id FROM knowledge_sources WHERE tenant = $1 AND kind = $2 AND uri = $3",
            tenant,
            kind,
            uri,
        )
        return str(value) if value is not None else None

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


async def _upsert(executor: "Connection | Pool", tenant: str, source: SourceRef) -> str:
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


async def source_id_of(conn: Connection, tenant: str, source: "str | SourceRef") -> str:
    return source if isinstance(source, str) else await _upsert(conn, tenant, source)

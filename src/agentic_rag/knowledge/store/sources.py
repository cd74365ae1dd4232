"""Knowledge sources: what an ingestion reads (a site, a file, a video), created with its
first document, and what each holds."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
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

    async def site_source(self, tenant: str, url: str) -> tuple[str, str] | None:
        """The crawled source (id, start URL) that the page at `url` belongs to, if one does:
        the one started there; else the one whose start URL is a directory (its path ends with
        "/") holding `url`, the deepest; else one that holds the page (the oldest). A page
        started elsewhere in a directory (`/wiki/Bee`, then `/wiki/Wasp`) is a source of its
        own unless the first crawl reached it."""
        row = await self._pool.fetchrow(
            "SELECT s.id, s.uri FROM knowledge_sources s "
            "WHERE s.tenant = $1 AND s.kind = 'url' AND (s.uri = $2 "
            f"OR ({_DIRECTORY_HOLDS}) OR EXISTS ({_HOLDS_PAGE})) "
            f"ORDER BY s.uri = $2 DESC, CASE WHEN {_DIRECTORY_HOLDS} THEN length(s.uri) END "
            f"DESC NULLS LAST, s.created_at, s.id LIMIT 1",
            tenant,
            url,
        )
        return (str(row["id"]), str(row["uri"])) if row is not None else None

    async def list_sources(self, tenant: str) -> list[StoredSource]:
        rows = await self._pool.fetch(
            "SELECT s.id, s.kind, s.uri, s.title, s.metadata, s.created_at, s.updated_at, "
            f"({_START_PAGE_TITLE}) AS start_title, "
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
                title=r["title"] or r["start_title"] or _host(r["kind"], r["uri"]),
                metadata=orjson.loads(r["metadata"]),
                documents=int(r["documents"]),
                chunks=int(r["chunks"]),
                created_at=r["created_at"],
                updated_at=r["updated_at"],
            )
            for r in rows
        ]


# `s.uri` is a directory URL (no query, its path ends with "/") that `$2` lies in.
_DIRECTORY_HOLDS = "s.uri ~ '^[a-z]+://[^/?#]+/([^?#]*/)?$' AND starts_with($2, s.uri)"
_HOLDS_PAGE = (
    "SELECT 1 FROM source_documents m WHERE m.tenant = s.tenant AND m.source_id = s.id "
    "AND m.uri = $2"
)
# A crawled site is named by its start page's title (a page without one is titled by its URL),
# else by its host (`_host`): derived when read, so that every row, old or new, has one.
_START_PAGE_TITLE = (
    "SELECT nullif(p.title, p.uri) FROM source_documents held JOIN documents p "
    "ON p.tenant = held.tenant AND p.id = held.document_id WHERE s.kind = 'url' "
    "AND held.tenant = s.tenant AND held.source_id = s.id AND held.uri = s.uri"
)


def _host(kind: str, uri: str) -> str:
    if kind != "url":
        return ""
    try:
        return httpx.URL(uri).host
    except httpx.InvalidURL:
        return ""


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

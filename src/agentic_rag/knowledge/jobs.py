"""JobStore: all SQL of ingestion jobs and of a crawl's frontier.

A job's id is the id of the A2A task that runs it (MCP calls run as tasks too), so a task that
is run again after a crash finds its job and resumes it, and a job whose task ended without
finishing it is known to be abandoned. A job's request key is a hash of what was asked: a
caller that times out and asks again while the job runs is handed the running job instead of
a second copy.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from agentic_rag.storage.pool import Pool


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    state: str
    arguments: dict[str, Any]
    progress: dict[str, Any]
    summary: dict[str, Any] | None
    error: str | None
    created_at: datetime


@dataclass(frozen=True)
class StoredPage:
    """The document a page of a job stored, as it is now."""

    document_id: str
    uri: str
    title: str
    chunks: int
    notes: list[str]
    metadata: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class RecordedPage:
    url: str
    state: str
    """queued, handled, ingested, unchanged, skipped or failed"""
    reason: str
    document: StoredPage | None


def request_key(kind: str, arguments: dict[str, Any]) -> bytes:
    return hashlib.sha256(orjson.dumps([kind, arguments], option=orjson.OPT_SORT_KEYS)).digest()


class JobStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def open(self, tenant: str, job_id: str, kind: str, arguments: dict[str, Any]) -> Job:
        """The job `job_id`: resumed if it exists, else the running job that asks the same,
        else a new one."""
        key = request_key(kind, arguments)
        async with self._pool.acquire() as conn, conn.transaction():
            # Two identical calls at once: the second waits here, then finds the first's job.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", tenant, key.hex()
            )
            # A running job whose task has ended (canceled by its caller, or failed) is
            # abandoned: nobody will resume it.
            await conn.execute(
                "UPDATE ingest_jobs j SET state = 'canceled', updated_at = now() "
                "FROM tasks t WHERE j.tenant = $1 AND j.request_key = $2 AND j.state = 'running' "
                "AND t.tenant = j.tenant AND t.id = j.id "
                "AND t.state IN ('completed', 'canceled', 'failed', 'rejected')",
                tenant,
                key,
            )
            for query, arg in (
                (f"SELECT {_COLUMNS} FROM ingest_jobs WHERE tenant = $1 AND id = $2", job_id),
                (
                    f"SELECT {_COLUMNS} FROM ingest_jobs WHERE tenant = $1 "
                    "AND request_key = $2 AND state = 'running'",
                    key,
                ),
            ):
                row = await conn.fetchrow(query, tenant, arg)
                if row is not None:
                    return _job(row)
            row = await conn.fetchrow(
                "INSERT INTO ingest_jobs (tenant, id, kind, request_key, arguments, state) "
                f"VALUES ($1, $2, $3, $4, $5::jsonb, 'running') RETURNING {_COLUMNS}",
                tenant,
                job_id,
                kind,
                key,
                orjson.dumps(arguments).decode(),
            )
            return _job(row)

    async def get(self, tenant: str, job_id: str) -> Job | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM ingest_jobs WHERE tenant = $1 AND id = $2", tenant, job_id
        )
        return _job(row) if row else None

    async def progress(self, tenant: str, job_id: str, progress: dict[str, Any]) -> None:
        await self._pool.execute(
            "UPDATE ingest_jobs SET progress = $3::jsonb, updated_at = now() "
            "WHERE tenant = $1 AND id = $2",
            tenant,
            job_id,
            orjson.dumps(progress).decode(),
        )

    async def finish(
        self,
        tenant: str,
        job_id: str,
        state: str,
        *,
        summary: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        await self._pool.execute(
            "UPDATE ingest_jobs SET state = $3, summary = $4::jsonb, error = $5, "
            "updated_at = now() WHERE tenant = $1 AND id = $2",
            tenant,
            job_id,
            state,
            orjson.dumps(summary).decode() if summary is not None else None,
            error,
        )

    # -- a crawl's frontier -----------------------------------------------------------

    async def add_pages(self, tenant: str, job_id: str, pages: list[tuple[str, int]]) -> int:
        """Queue (url, depth) pages not seen before by this job; the number queued."""
        if not pages:
            return 0
        urls, depths = zip(*pages, strict=True)
        added = await self._pool.fetchval(
            "WITH added AS (INSERT INTO ingest_job_pages (tenant, job_id, url, depth, state) "
            "SELECT $1, $2, u, d, 'queued' FROM unnest($3::text[], $4::int[]) AS p(u, d) "
            "ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM added",
            tenant,
            job_id,
            list(urls),
            list(depths),
        )
        return int(added or 0)

    async def next_page(
        self, tenant: str, job_id: str, *, exclude: Sequence[str] = ()
    ) -> tuple[str, int] | None:
        """The oldest queued page of the job, other than `exclude` (handed out already)."""
        row = await self._pool.fetchrow(
            "SELECT url, depth FROM ingest_job_pages WHERE tenant = $1 AND job_id = $2 "
            "AND state = 'queued' AND url <> ALL($3::text[]) ORDER BY seq LIMIT 1",
            tenant,
            job_id,
            list(exclude),
        )
        return (row["url"], row["depth"]) if row else None

    async def page_handled(self, tenant: str, job_id: str, url: str) -> None:
        """A page whose outcome was handled without a `page_done` (nothing to record)."""
        await self._pool.execute(
            "UPDATE ingest_job_pages SET state = 'handled' "
            "WHERE tenant = $1 AND job_id = $2 AND url = $3 AND state = 'queued'",
            tenant,
            job_id,
            url,
        )

    async def page_done(
        self,
        tenant: str,
        job_id: str,
        url: str,
        state: str,
        *,
        reason: str | None = None,
        document_id: str | None = None,
    ) -> None:
        await self._pool.execute(
            "INSERT INTO ingest_job_pages (tenant, job_id, url, depth, state, reason, document_id) "
            "VALUES ($1, $2, $3, 0, $4, $5, $6) ON CONFLICT (tenant, job_id, url) DO UPDATE "
            "SET state = excluded.state, reason = excluded.reason, "
            "document_id = excluded.document_id",
            tenant,
            job_id,
            url,
            state,
            reason,
            document_id,
        )

    async def pages(self, tenant: str, job_id: str) -> list[RecordedPage]:
        """The job's pages as recorded, each with the document it stored (if it still exists):
        what a resumed run counts into its summary."""
        rows = await self._pool.fetch(
            "SELECT p.url, p.state, p.reason, d.id, d.uri, d.title, d.chunk_count, d.notes, "
            "d.metadata, d.created_at FROM ingest_job_pages p LEFT JOIN documents d "
            "ON d.tenant = p.tenant AND d.id = p.document_id "
            "WHERE p.tenant = $1 AND p.job_id = $2 ORDER BY p.seq",
            tenant,
            job_id,
        )
        return [_recorded_page(row) for row in rows]


_COLUMNS = "id, kind, state, arguments, progress, summary, error, created_at"


def _recorded_page(row: asyncpg.Record) -> RecordedPage:
    document = None
    if row["id"] is not None:
        document = StoredPage(
            document_id=row["id"],
            uri=row["uri"],
            title=row["title"],
            chunks=row["chunk_count"],
            notes=list(row["notes"]),
            metadata=orjson.loads(row["metadata"]),
            created_at=row["created_at"],
        )
    return RecordedPage(row["url"], row["state"], row["reason"] or "", document)


def _job(row: asyncpg.Record | None) -> Job:
    assert row is not None
    return Job(
        id=row["id"],
        kind=row["kind"],
        state=row["state"],
        arguments=orjson.loads(row["arguments"]),
        progress=orjson.loads(row["progress"]),
        summary=orjson.loads(row["summary"]) if row["summary"] is not None else None,
        error=row["error"],
        created_at=row["created_at"],
    )


class JobFrontier:
    """A crawl's frontier (`sources.web.Frontier`) kept in the job's pages: a crawl run again
    after a crash continues with the pages it had not handled, and fetches none twice."""

    def __init__(self, jobs: JobStore, tenant: str, job_id: str) -> None:
        self._jobs, self._tenant, self._job_id = jobs, tenant, job_id
        self._handed: list[str] = []

    async def add(self, entries: Sequence[tuple[str, int]]) -> None:
        await self._jobs.add_pages(self._tenant, self._job_id, list(entries))

    async def next(self) -> tuple[str, int] | None:
        page = await self._jobs.next_page(self._tenant, self._job_id, exclude=self._handed)
        if page is not None:
            self._handed.append(page[0])
        return page

    async def done(self, url: str) -> None:
        await self._jobs.page_handled(self._tenant, self._job_id, url)

"""Ingestion: from an extracted document to stored chunks, inside a durable job.

    source -> ExtractedDocument -> unchanged? (content hash) -> chunks -> vectors -> one write

A source is created with its first document: a job that stores nothing leaves none behind. Text
stored already, under this source or another, is linked to this source instead of stored again
(KnowledgeStore: one copy of each document).

Every ingestion skill runs as a job (`JobStore`) whose id is its task's: a crashed job resumes
where it was when its task runs again, and a caller that asks again for what a running job is
doing gets that job's result instead of a second copy. A job that stored nothing fails, saying
why: never a success with nothing in it.
"""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx
import numpy as np

from agentic_rag.embedding.embedders import Embedder, Vectors
from agentic_rag.knowledge.active_space import ActiveSpace
from agentic_rag.knowledge.chunking import document_embedding_text, embedding_text
from agentic_rag.knowledge.document_graph import DocumentGraph
from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.errors import (
    IngestionJobFailed,
    KnowledgeError,
    NoTextToIndex,
    NothingIngested,
)
from agentic_rag.knowledge.jobs import Job, JobStore
from agentic_rag.knowledge.results import IngestedDocument, IngestSummary
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.documents import (
    StoredDocument,
    WriteResult,
    WriteStatus,
    content_hash,
)
from agentic_rag.knowledge.store.sources import SourceRef

log = logging.getLogger(__name__)

Progress = Callable[[str], Awaitable[None]]

# How often a caller attached to another caller's running job looks at it.
FOLLOW_SECONDS = 0.5
# Chunks embedded between two progress reports of a long document.
EMBED_BATCH = 128
# The longest title derived from a text sent without one.
DERIVED_TITLE_CHARS = 80


@dataclass
class JobRun:
    """One running job: what it has done so far, and how it reports."""

    tenant: str
    job: Job
    summary: IngestSummary
    jobs: JobStore
    report: Progress
    source: SourceRef | None = None
    """What the job reads; its source is created with the first document stored."""

    async def progress(self, text: str, **counts: Any) -> None:
        await self.jobs.progress(self.tenant, self.job.id, {"message": text, **counts})
        await self.report(text)


class Ingestion:
    def __init__(
        self,
        store: KnowledgeStore,
        jobs: JobStore,
        embedder: Embedder,
        active: ActiveSpace,
        *,
        graph: DocumentGraph | None = None,
    ) -> None:
        self._store, self._jobs = store, jobs
        self._embedder, self._active = embedder, active
        self.graph = graph

    async def run_job(
        self,
        tenant: str,
        job_id: str,
        kind: str,
        arguments: dict[str, Any],
        report: Progress,
        body: Callable[[JobRun], Awaitable[None]],
    ) -> IngestSummary:
        """Run `body` as the job `job_id`, or follow the running job that does the same.

        Cancelled (by the caller, or by a shutdown), the job stays `running`: a shutdown's
        task resumes it, and a canceled task's job is found abandoned by the next `open`."""
        job = await self._jobs.open(tenant, job_id, kind, arguments)
        if job.id != job_id:
            await report(f"the same ingestion is already running as job {job.id}: following it")
            return await self._follow(tenant, job.id, report)
        if job.state != "running":
            return self._settled(job)
        run = JobRun(
            tenant,
            job,
            IngestSummary(job_id=job.id, source_id="", kind=kind),
            self._jobs,
            report,
        )
        try:
            await body(run)
        except KnowledgeError as exc:
            await self._jobs.finish(
                tenant,
                job.id,
                "failed",
                summary=run.summary.model_dump(mode="json"),
                error=str(exc),
            )
            raise
        except Exception as exc:
            await self._jobs.finish(tenant, job.id, "failed", error=f"internal error: {exc!r}")
            raise
        summary = run.summary
        if summary.ingested == 0 and summary.unchanged == 0:
            reasons = "; ".join(f"{o.url}: {o.reason}" for o in summary.skipped + summary.failed)
            error = "nothing was ingested" + (f" ({reasons})" if reasons else "")
            await self._jobs.finish(
                tenant, job.id, "failed", summary=summary.model_dump(mode="json"), error=error
            )
            raise NothingIngested(error)
        await self._jobs.finish(
            tenant, job.id, "completed", summary=summary.model_dump(mode="json")
        )
        return summary

    async def _follow(self, tenant: str, job_id: str, report: Progress) -> IngestSummary:
        last = None
        while True:
            job = await self._jobs.get(tenant, job_id)
            if job is None:
                raise IngestionJobFailed(f"job {job_id} disappeared")
            if job.state != "running":
                return self._settled(job)
            message = job.progress.get("message")
            if message and message != last:
                await report(str(message))
                last = message
            await asyncio.sleep(FOLLOW_SECONDS)

    async def _embed(self, run: JobRun, uri: str, texts: list[str]) -> Vectors:
        """Vectors of `texts`, in batches that report progress on long documents."""
        if len(texts) <= EMBED_BATCH:
            return await self._embedder.embed(texts)
        parts = []
        for start in range(0, len(texts), EMBED_BATCH):
            parts.append(await self._embedder.embed(texts[start : start + EMBED_BATCH]))
            done = min(start + EMBED_BATCH, len(texts))
            await run.progress(f"{uri}: embedded {done} of {len(texts)} chunks")
        return np.concatenate(parts)

    @staticmethod
    def _settled(job: Job) -> IngestSummary:
        if job.state == "completed" and job.summary is not None:
            return IngestSummary.model_validate(job.summary)
        reason = job.error or "no reason given"
        raise IngestionJobFailed(f"ingestion job {job.id} {job.state}: {reason}")

    async def store_document(
        self,
        run: JobRun,
        document: ExtractedDocument,
        *,
        reached: str | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
        links: Sequence[str] = (),
    ) -> IngestedDocument:
        """Chunk, embed and store one document of the run's source, reached at `reached`
        (default: its URI); text stored already is neither chunked nor embedded again."""
        tenant, source = run.tenant, run.source
        assert source is not None, "the job names its source before storing documents"
        reached = reached or document.uri
        document = replace(document, uri=canonical_uri(document))
        source_id = run.summary.source_id or await self._store.find_source(
            tenant, source.kind, source.uri
        )
        digest = content_hash(document.text)
        existing = (
            await self._store.find_document(tenant, source_id, reached) if source_id else None
        )
        validators: dict[str, Any] = {"etag": etag, "last_modified": last_modified, "links": links}
        result = None
        if document.uri != reached:  # the page names another URL canonical: that one's text
            result = await self._store.link_canonical(
                tenant, source, reached, document.uri, **validators
            )
        if result is None and existing is not None and existing.content_hash == digest:
            await self._store.set_validators(tenant, existing.id, etag, last_modified, links)
            result = WriteResult(existing.id, "unchanged", 0, source_id or "")
        if result is None:
            result = await self._store.link_identical(tenant, source, reached, digest, **validators)
        if result is None:
            chunks = await asyncio.to_thread(
                self._active.chunker.chunk, document.sections, title=document.title
            )
            if not chunks:
                raise NoTextToIndex(f"{document.uri}: no text to index")
            texts = [embedding_text(c) for c in chunks]
            texts.append(document_embedding_text(document.title, document.text))
            vectors = await self._embed(run, document.uri, texts)
            result = await self._store.write_document(
                tenant,
                source,
                document,
                chunks,
                vectors[:-1],
                self._active.space,
                reached=reached,
                document_vector=vectors[-1],
                **validators,
            )
        run.summary.source_id = result.source_id
        if result.released and self.graph is not None:
            await self.graph.forget(tenant, list(result.released))
        if result.same_as is not None:  # linked to a stored copy: its episodes are of its text
            await self.unchanged_unread(run, result.document_id, document.uri)
        elif self.graph is not None and (
            result.status != "unchanged"
            or await self.graph.lacks_episodes(tenant, result.document_id)
        ):
            await self._to_graph(
                run, self.graph, result.document_id, document.uri, document.title, document.text
            )
        if existing is not None and result.status == "unchanged":
            result = self._written_before(run, existing) or result
        same = [f"stored once, as {result.same_as}"] if result.same_as else []
        ingested = IngestedDocument(
            document_id=result.document_id,
            uri=document.uri,
            title=document.title,
            status=result.status,
            chunks=result.chunks,
            notes=[*document.notes, *same],
        )
        summary = run.summary
        summary.documents.append(ingested)
        if result.status == "unchanged":
            summary.unchanged += 1
        else:
            summary.ingested += 1
            summary.chunks += result.chunks
        return ingested

    @staticmethod
    def _written_before(run: JobRun, existing: StoredDocument) -> WriteResult | None:
        """What an earlier run of this job wrote of `existing`, if it did: a run killed after
        storing a page and before recording it finds the page unchanged when it resumes, and
        the job's summary still counts it as the job's own."""
        created_at = run.job.created_at
        if existing.updated_at < created_at or any(
            d.document_id == existing.id for d in run.summary.documents
        ):
            return None
        status: WriteStatus = "created" if existing.created_at >= created_at else "updated"
        return WriteResult(existing.id, status, existing.chunk_count)

    async def unchanged_unread(self, run: JobRun, document_id: str, uri: str) -> None:
        """A stored document found unchanged without reading it (HTTP 304, a sitemap's
        lastmod): it gets its episodes if it should have some and has none, made from its
        stored text (graph/documents.py)."""
        graph = self.graph
        if graph is None or not await graph.lacks_episodes(run.tenant, document_id):
            return
        stored = await self._store.get_document(run.tenant, document_id)
        if stored is None or stored.text is None:  # deleted meanwhile
            return
        await self._to_graph(run, graph, document_id, uri, stored.title, stored.text)

    async def _to_graph(
        self,
        run: JobRun,
        graph: DocumentGraph,
        document_id: str,
        uri: str,
        title: str,
        text: str,
    ) -> None:
        """A new version's episodes replace the old version's (graph/documents.py)."""
        spans = (
            await self._store.chunk_spans(run.tenant, document_id) if graph.ingest_documents else []
        )
        queued = await graph.replace(run.tenant, document_id, title, text, spans)
        if queued:
            await run.progress(f"{uri}: {len(queued)} graph episodes queued")


def derived_title(text: str) -> str:
    """A title for a text sent without one: its first line (a heading's text), at most
    DERIVED_TITLE_CHARS long (cut at a word)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    title = re.sub(r"\s+", " ", first.strip().lstrip("#").strip())
    if len(title) <= DERIVED_TITLE_CHARS:
        return title
    cut = title[: DERIVED_TITLE_CHARS - 1].rsplit(" ", 1)[0]
    return cut + "…"


def canonical_uri(document: ExtractedDocument) -> str:
    """The URI that names the document: the canonical URL its page declares, if that is on the
    page's own origin (a page cannot claim to be another site's), else the URI it was read at."""
    canonical = document.metadata.get("canonical")
    if not isinstance(canonical, str) or canonical == document.uri:
        return document.uri
    try:
        declared, read = httpx.URL(canonical), httpx.URL(document.uri)
    except httpx.InvalidURL:
        return document.uri
    same = (declared.scheme, declared.host, declared.port) == (read.scheme, read.host, read.port)
    return canonical if same else document.uri

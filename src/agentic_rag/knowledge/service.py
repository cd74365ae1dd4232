"""KnowledgeService: what the knowledge skills do, for one tenant at a time.

It is built once per process from the settings, complete: the embedder, the stores, retrieval
(with the optional LLM and cross-encoder), ingestion, the SSRF guard and the sources. `start`
loads the embedding model and opens the store's embedding space (`ActiveSpace`, which retrieval
and ingestion read when they run: it needs the database and the model's tokenizer).
"""

import asyncio
import base64
import binascii
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, aclosing
from dataclasses import replace
from typing import Any

from youtube_transcript_api.proxies import GenericProxyConfig

from agentic_rag.config import Settings, load_cookies
from agentic_rag.embedding.embedders import DIMENSION, MODEL_NAME, Embedder, build_embedder
from agentic_rag.knowledge.active_space import ActiveSpace
from agentic_rag.knowledge.document_graph import DocumentGraph
from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.errors import InvalidRequest, NoTextToIndex, NotFound, Unreadable
from agentic_rag.knowledge.ingestion import Ingestion, JobRun, derived_title
from agentic_rag.knowledge.jobs import JobFrontier, JobStore
from agentic_rag.knowledge.rerank import CrossEncoder
from agentic_rag.knowledge.results import (
    CrawlRequest,
    DocumentInfo,
    Explanation,
    IngestedDocument,
    IngestSummary,
    PageOutcome,
    SourceInfo,
)
from agentic_rag.knowledge.retrieval import Retrieval, RetrievalConfig
from agentic_rag.knowledge.sources.boilerplate import CrawlBoilerplate, SiteBlocks
from agentic_rag.knowledge.sources.html_page import normalize_url
from agentic_rag.knowledge.sources.markdown import markdown_sections
from agentic_rag.knowledge.sources.pdf import PageImage, PdfError, PdfReader
from agentic_rag.knowledge.sources.web import (
    CrawlOptions,
    CrawlOutcome,
    Fetched,
    KnownPage,
    Skipped,
    Unchanged,
    crawl,
)
from agentic_rag.knowledge.sources.youtube import (
    CaptionsFormatError,
    InvalidVideoURLError,
    TranscriptError,
    YouTubeTranscripts,
    parse_captions,
    video_id,
    watch_url,
)
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.documents import StoredDocument
from agentic_rag.knowledge.store.sources import SourceRef
from agentic_rag.knowledge.trajectories import TrajectoryStore
from agentic_rag.llm.chat import OpenAIChat
from agentic_rag.llm.endpoint import ChatEndpoint
from agentic_rag.security.api_keys import is_tenant_name
from agentic_rag.security.fetch import (
    PDF,
    Fetcher,
    FetchError,
    FetchLimits,
    Resource,
    Validators,
)
from agentic_rag.security.ssrf import SSRFGuard, UnsafeURLError
from agentic_rag.storage.pool import Pool

log = logging.getLogger(__name__)

Progress = Callable[[str], Awaitable[None]]
ShowPages = Callable[[list[PageImage]], Awaitable[None]]
"""Hands the images of OCR'd pages to the caller, with the result (`ingest_pdf`)."""

ALLOW_PRIVATE_SETTING = "AGENTIC_RAG_INGEST_ALLOW_PRIVATE"


def embedder_from(settings: Settings) -> Embedder:
    return build_embedder(
        settings.embedding_provider,
        url=settings.embedding_url,
        model=settings.embedding_model,
        api_key=settings.embedding_api_key.get_secret_value()
        if settings.embedding_api_key
        else None,
        dimension=settings.embedding_dimension,
        max_tokens=settings.embedding_max_tokens,
        batch_size=settings.embedding_batch_size,
    )


def configured_model(settings: Settings) -> tuple[str, int | None]:
    """The embedding model the settings name, and its dimension if known without asking."""
    if settings.embedding_provider == "local":
        return MODEL_NAME, DIMENSION
    return settings.embedding_model or "", settings.embedding_dimension


class KnowledgeService:
    """Built complete: its stores, retrieval, ingestion, the SSRF guard and the sources.
    `start` loads the embedding model and opens the store's embedding space (refused if the
    store was embedded with another model); `stop` closes the model and the LLM client."""

    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        chat: ChatEndpoint | None = None,
        *,
        embedder: Embedder | None = None,
        graph: DocumentGraph | None = None,
    ) -> None:
        self.settings = settings
        # Started (and closed) by this service; the graph shares it.
        self.embedder = embedder if embedder is not None else embedder_from(settings)
        self.store = KnowledgeStore(pool)
        self.jobs = JobStore(pool)
        self.trajectories = TrajectoryStore(pool)
        self.site_blocks = SiteBlocks(pool)
        self.graph = graph  # the documents' episodes follow them; retrieval may ask it
        self.active = ActiveSpace(self.store, self.embedder, settings.chunk_overlap_tokens)
        self.llm = OpenAIChat(chat) if chat is not None else None
        cross_encoder = (
            CrossEncoder(settings.reranker_directory) if settings.reranker_directory else None
        )
        self.retrieval = Retrieval(
            self.store,
            self.trajectories,
            self.embedder,
            self.active,
            RetrievalConfig(),
            cross_encoder=cross_encoder,
            llm=self.llm,
            graph=graph,
        )
        self.ingestion = Ingestion(self.store, self.jobs, self.embedder, self.active, graph=graph)
        self.guard = SSRFGuard(settings.ingest_allow_private)
        proxy = (
            GenericProxyConfig(
                http_url=settings.youtube_proxy_url, https_url=settings.youtube_proxy_url
            )
            if settings.youtube_proxy_url
            else None
        )
        cookies = settings.youtube_cookies_file
        self.youtube = YouTubeTranscripts(
            proxy_config=proxy,
            cookies=load_cookies(cookies) if cookies else None,
            timeout_seconds=settings.ingest_timeout_seconds,
        )
        self._stack = AsyncExitStack()

    async def start(self) -> None:
        if self.llm is not None:
            self._stack.push_async_callback(self.llm.aclose)
        self._stack.push_async_callback(self.embedder.aclose)
        await self.embedder.start()
        await self.active.open()

    async def stop(self) -> None:
        await self._stack.aclose()

    # -- ingestion --------------------------------------------------------------------

    async def ingest_text(
        self,
        tenant: str,
        job_id: str,
        report: Progress,
        *,
        text: str,
        title: str,
        metadata: dict[str, Any],
    ) -> IngestSummary:
        if not text.strip():
            raise InvalidRequest("the text is empty")
        title = title.strip() or derived_title(text)

        async def body(run: JobRun) -> None:
            run.source = SourceRef("text", title, title, metadata)
            document = ExtractedDocument(
                uri=title,
                title=title,
                mime_type="text/markdown",
                sections=markdown_sections(text),
                metadata=metadata,
            )
            await run.progress(f"indexing {title!r}")
            stored = await self.ingestion.store_document(run, document)
            await run.progress(f"{title!r}: {stored.status}, {stored.chunks} chunks")

        arguments = {"text": text, "title": title, "metadata": metadata}
        return await self.ingestion.run_job(tenant, job_id, "text", arguments, report, body)

    async def ingest_url(
        self, tenant: str, job_id: str, report: Progress, request: CrawlRequest
    ) -> IngestSummary:
        settings = self.settings
        if request.max_pages > settings.ingest_max_pages:
            raise InvalidRequest(
                f"max_pages is at most {settings.ingest_max_pages} "
                "(the setting AGENTIC_RAG_INGEST_MAX_PAGES)"
            )
        try:
            options = CrawlOptions(
                depth=request.depth,
                max_pages=request.max_pages,
                same_site=request.same_site,
                include=tuple(request.include),
                exclude=tuple(request.exclude),
                sitemaps=request.sitemaps,
                min_interval=settings.ingest_host_interval_seconds,
                limits=self._fetch_limits(),
            )
            self.guard.check_shape(request.url)
        except UnsafeURLError as exc:
            raise InvalidRequest(f"{exc}{exc.hint(ALLOW_PRIVATE_SETTING)}") from None
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None

        start = normalize_url(request.url) or request.url

        async def body(run: JobRun) -> None:
            # A page of a site crawled before refreshes that site's source: one source, not
            # a second one over the same documents.
            site = await self.store.site_source(tenant, start)
            source_id, uri = site or ("", start)
            run.source = SourceRef("url", uri, "", request.metadata)
            run.summary.source_id = source_id
            if uri != start:
                run.summary.notes.append(
                    f"{start} is a page of {uri}, ingested before: its source {source_id} "
                    "was refreshed"
                )
            counted = await self._resume_crawl(run)
            remaining = replace(options, max_pages=max(1, options.max_pages - counted))
            stored_ids: dict[str, str] = {}  # the stored pages' documents, by URL
            boilerplate = CrawlBoilerplate[Fetched](self.site_blocks, tenant)

            async def known(url: str) -> KnownPage | None:
                source_id = run.summary.source_id  # none until the first page is stored
                if not source_id:
                    return None
                stored = await self.store.find_document(tenant, source_id, url)
                if stored is None:
                    return None
                stored_ids[url] = stored.id
                return KnownPage(
                    Validators(stored.etag, stored.last_modified),
                    stored.fetched_at,
                    tuple(stored.links),
                )

            frontier = JobFrontier(self.jobs, tenant, run.job.id)
            pages = crawl(request.url, self.guard, remaining, frontier=frontier, known=known)
            async with aclosing(pages):
                async for outcome in pages:
                    await self._crawled(run, outcome, request.metadata, stored_ids, boilerplate)
            await self._redecided(run, boilerplate)

        arguments = request.model_dump(mode="json")
        return await self.ingestion.run_job(tenant, job_id, "url", arguments, report, body)

    async def _resume_crawl(self, run: JobRun) -> int:
        """Count what earlier runs of this job did (on this worker or one that is gone) into
        its summary, from the job's record: the pages and the documents they stored, with
        their chunks. Returns the pages they requested."""
        requested, summary = 0, run.summary
        for page in await self.jobs.pages(run.tenant, run.job.id):
            if page.state in ("ingested", "unchanged", "failed"):
                requested += 1
            if page.state == "ingested":
                summary.ingested += 1
            elif page.state == "unchanged":
                summary.unchanged += 1
            elif page.state in ("skipped", "failed"):
                _note_outcome(summary, page.state, page.url, page.reason)
            stored = page.document
            if stored is None or page.state not in ("ingested", "unchanged"):
                continue
            status = "unchanged"
            if page.state == "ingested":
                status = "created" if stored.created_at >= run.job.created_at else "updated"
                summary.chunks += stored.chunks
            extraction = stored.metadata.get("extraction")
            summary.documents.append(
                IngestedDocument(
                    document_id=stored.document_id,
                    uri=stored.uri,
                    title=stored.title,
                    status=status,
                    chunks=stored.chunks if status != "unchanged" else 0,
                    notes=stored.notes,
                    coverage=extraction.get("coverage") if isinstance(extraction, dict) else None,
                    extraction=extraction.get("method") if isinstance(extraction, dict) else None,
                )
            )
        return requested

    async def _crawled(
        self,
        run: JobRun,
        outcome: CrawlOutcome,
        metadata: dict[str, Any],
        stored_ids: Mapping[str, str],
        boilerplate: CrawlBoilerplate[Fetched],
    ) -> None:
        tenant, job_id, summary = run.tenant, run.job.id, run.summary
        done = summary.ingested + summary.unchanged
        if isinstance(outcome, Fetched):
            outcome.document.metadata = {**outcome.document.metadata, **metadata}
            document = await boilerplate.filtered(outcome.document, outcome)
            try:
                stored = await self.ingestion.store_document(
                    run,
                    document,
                    etag=outcome.validators.etag,
                    last_modified=outcome.validators.last_modified,
                    links=outcome.links,
                )
            except NoTextToIndex as exc:
                _note_outcome(summary, "skipped", outcome.url, str(exc))
                await self.jobs.page_done(tenant, job_id, outcome.url, "skipped", reason=str(exc))
                return
            _reading(stored, document)
            state = "unchanged" if stored.status == "unchanged" else "ingested"
            await self.jobs.page_done(
                tenant, job_id, outcome.url, state, document_id=stored.document_id
            )
            await run.progress(
                f"[{done + 1}] {stored.status} {outcome.final_url} ({stored.chunks} chunks)",
                ingested=summary.ingested,
                unchanged=summary.unchanged,
            )
        elif isinstance(outcome, Unchanged):
            summary.unchanged += 1
            if document_id := stored_ids.get(outcome.url):
                await self.ingestion.unchanged_unread(run, document_id, outcome.url)
            await self.jobs.page_done(tenant, job_id, outcome.url, "unchanged")
            await run.progress(f"[{done + 1}] unchanged {outcome.url}")
        else:
            state = "skipped" if isinstance(outcome, Skipped) else "failed"
            reason = f"{outcome.reason}: {outcome.detail}"
            _note_outcome(summary, state, outcome.url, reason)
            await self.jobs.page_done(tenant, job_id, outcome.url, state, reason=reason)
            await run.progress(f"{state} {outcome.url}: {reason}")

    async def _redecided(self, run: JobRun, boilerplate: CrawlBoilerplate[Fetched]) -> None:
        """Pages stored before the crawl knew their site's boilerplate (its first pages) are
        stored again without it; the summary counts each page once."""
        summary = run.summary
        for outcome, document in await boilerplate.redecided():
            first = next((d for d in summary.documents if d.uri == document.uri), None)
            counts = summary.ingested, summary.unchanged, summary.chunks, len(summary.documents)
            try:
                stored = await self.ingestion.store_document(
                    run,
                    document,
                    etag=outcome.validators.etag,
                    last_modified=outcome.validators.last_modified,
                    links=outcome.links,
                )
            except NoTextToIndex:  # the page stays as first stored
                continue
            summary.ingested, summary.unchanged, summary.chunks = counts[:3]
            del summary.documents[counts[3] :]
            if first is None:
                continue
            summary.chunks += stored.chunks - first.chunks if first.status != "unchanged" else 0
            if first.status == "unchanged" and stored.status != "unchanged":
                summary.unchanged, summary.ingested = summary.unchanged - 1, summary.ingested + 1
                summary.chunks += stored.chunks
                first.status = "updated"
            first.chunks, first.notes = stored.chunks, stored.notes
            _reading(first, document)

    async def ingest_pdf(
        self,
        tenant: str,
        job_id: str,
        report: Progress,
        *,
        data: str | None,
        url: str | None,
        path: str | None,
        filename: str | None,
        metadata: dict[str, Any],
        page_images: int = 0,
        show_pages: ShowPages | None = None,
    ) -> IngestSummary:
        """Ingest one PDF; with `page_images` and `show_pages`, the images of that many OCR'd
        pages, those read with the lowest confidence, go to `show_pages` once it is stored."""
        given = [name for name, value in (("data", data), ("url", url), ("path", path)) if value]
        if len(given) != 1:
            raise InvalidRequest("give exactly one of data (base64), url or path")
        arguments = {
            "sha256": hashlib.sha256((data or "").encode()).hexdigest() if data else None,
            "url": url,
            "path": path,
            "filename": filename,
            "metadata": metadata,
        }

        async def body(run: JobRun) -> None:
            content, uri = await self._pdf_bytes(tenant, data, url, path, filename)
            run.source = SourceRef("pdf", uri, filename or "", metadata)
            document, images = await self._read_pdf(run, content, uri, metadata, page_images)
            stored = await self.ingestion.store_document(run, document)
            await run.progress(f"{uri}: {stored.status}, {stored.chunks} chunks")
            run.summary.notes.extend(document.notes)
            if images and show_pages is not None:
                await show_pages(images)

        return await self.ingestion.run_job(tenant, job_id, "pdf", arguments, report, body)

    async def _pdf_bytes(
        self, tenant: str, data: str | None, url: str | None, path: str | None, filename: str | None
    ) -> tuple[bytes, str]:
        limit = self.settings.ingest_max_bytes
        if data is not None:
            if len(data) > limit * 4 // 3 + 4:
                raise InvalidRequest(f"the PDF is larger than {limit} bytes")
            try:
                return base64.b64decode(data, validate=True), filename or "document.pdf"
            except binascii.Error:
                raise InvalidRequest("data is not valid base64") from None
        if url is not None:
            try:
                async with Fetcher(self.guard, self._fetch_limits()) as fetcher:
                    resource = await fetcher.fetch(url, accept=frozenset({PDF}))
            except (FetchError, ValueError) as exc:
                raise Unreadable(f"cannot fetch {url}: {exc}") from None
            assert isinstance(resource, Resource)
            return resource.body, resource.final_url
        assert path is not None
        return await asyncio.to_thread(self._read_allowed_file, tenant, path), path

    def _read_allowed_file(self, tenant: str, path: str) -> bytes:
        """The file at `path` in the tenant's own ingestion directory,
        AGENTIC_RAG_INGEST_DIRECTORY/<tenant>. A path outside it (another tenant's directory
        included) is answered as a name that is not there, so no answer tells whether a file
        exists that is not the caller's; no answer names the server's directories."""
        root = self.settings.ingest_directory
        if root is None:
            raise InvalidRequest(
                "reading files by path is off: set AGENTIC_RAG_INGEST_DIRECTORY to the "
                "directory ingest_pdf may read from, or send the file's content"
            )
        if not is_tenant_name(tenant):
            raise InvalidRequest(
                "reading files by path needs a tenant named with letters, digits, '-' and '_' "
                "(its directory's name); send the file's content instead"
            )
        absent = NotFound(
            f"no file {path!r} in this tenant's ingestion directory (paths are relative to it)"
        )
        try:
            base = (root / tenant).resolve()
            target = (base / path).resolve()
            if not target.is_relative_to(base) or not target.is_file():
                raise absent
            if target.stat().st_size > self.settings.ingest_max_bytes:
                raise InvalidRequest(
                    f"{path!r} is larger than {self.settings.ingest_max_bytes} bytes"
                )
            return target.read_bytes()
        except (OSError, ValueError) as exc:  # its text names the directory: for the log only
            log.warning("ingest_pdf: cannot read %r of tenant %r: %s", path, tenant, exc)
            raise absent from None

    async def _read_pdf(
        self, run: JobRun, content: bytes, uri: str, metadata: dict[str, Any], page_images: int
    ) -> tuple[ExtractedDocument, list[PageImage]]:
        """The PDF's pages one at a time (bounded memory), with progress per page, and the
        images of the `page_images` OCR'd pages read with the lowest confidence."""
        try:
            reader = await PdfReader.aopen(content, name=uri, page_images=page_images)
        except PdfError as exc:
            raise Unreadable(str(exc)) from None
        try:
            sections = []
            async for page in reader.apages():
                if page.section is not None:
                    sections.append(page.section)
                await run.progress(
                    f"{uri}: page {page.number} of {page.count}" + (" (OCR)" if page.ocr else ""),
                    page=page.number,
                    pages=page.count,
                )
            document = ExtractedDocument(
                uri=uri,
                title=reader.title or uri.rstrip("/").rsplit("/", 1)[-1] or uri,
                mime_type=PDF,
                sections=sections,
                metadata={**metadata, "pages": reader.page_count, "ocr_pages": reader.ocr_pages},
                notes=reader.notes(),
            )
            return document, reader.page_images
        except PdfError as exc:
            raise Unreadable(str(exc)) from None
        finally:
            reader.close()

    async def ingest_youtube(
        self,
        tenant: str,
        job_id: str,
        report: Progress,
        *,
        video_url: str,
        languages: list[str],
        transcript: str | None,
        title: str | None,
        metadata: dict[str, Any],
    ) -> IngestSummary:
        try:
            video = video_id(video_url)
        except InvalidVideoURLError as exc:
            raise InvalidRequest(str(exc)) from None
        uri = watch_url(video)
        arguments = {
            "video": video,
            "languages": languages,
            "transcript": hashlib.sha256(transcript.encode()).hexdigest() if transcript else None,
            "metadata": metadata,
        }

        async def body(run: JobRun) -> None:
            run.source = SourceRef("youtube", uri, title or "", metadata)
            try:
                if transcript is not None:
                    document = parse_captions(transcript, uri=uri, title=title or uri)
                else:
                    await run.progress(f"fetching the transcript of {uri}")
                    document = await self.youtube.afetch(uri, languages)
            except (TranscriptError, CaptionsFormatError) as exc:
                raise Unreadable(str(exc)) from None
            if title:
                document.title = title
            document.metadata = {**document.metadata, **metadata, "video_id": video}
            stored = await self.ingestion.store_document(run, document)
            await run.progress(f"{uri}: {stored.status}, {stored.chunks} chunks")

        return await self.ingestion.run_job(tenant, job_id, "youtube", arguments, report, body)

    def _fetch_limits(self) -> FetchLimits:
        return FetchLimits(
            max_bytes=self.settings.ingest_max_bytes,
            timeout_seconds=self.settings.ingest_timeout_seconds,
        )

    # -- catalogue --------------------------------------------------------------------

    async def delete_document(self, tenant: str, document_id: str) -> bool:
        """Delete a document, its chunks and its graph episodes (those first: a failure
        leaves the document, to be deleted again)."""
        if self.graph is not None:
            await self.graph.forget(tenant, [document_id])
        return await self.store.delete_document(tenant, document_id)

    async def delete_source(self, tenant: str, source_id: str) -> int | None:
        """Delete a source with the documents no other source holds, their chunks and graph
        episodes; the number of documents deleted, or None if there is no such source."""
        if self.graph is not None:
            await self.graph.forget(tenant, await self.store.sole_documents(tenant, source_id))
        return await self.store.delete_source(tenant, source_id)

    async def sources(self, tenant: str) -> list[SourceInfo]:
        return [
            SourceInfo(
                source_id=s.id,
                kind=s.kind,
                uri=s.uri,
                title=s.title,
                documents=s.documents,
                chunks=s.chunks,
                metadata=s.metadata,
                created_at=s.created_at,
                updated_at=s.updated_at,
            )
            for s in await self.store.list_sources(tenant)
        ]

    async def document(self, tenant: str, document_id: str, *, with_text: bool) -> DocumentInfo:
        stored = await self.store.get_document(tenant, document_id, with_text=with_text)
        if stored is None:
            raise NotFound(f"no document {document_id!r}")
        return document_info(stored)

    async def documents(
        self, tenant: str, *, source_id: str | None, limit: int, offset: int
    ) -> list[DocumentInfo]:
        stored = await self.store.list_documents(
            tenant, source_id=source_id, limit=limit, offset=offset
        )
        return [document_info(d) for d in stored]

    async def explain(self, tenant: str, trajectory_id: str) -> Explanation:
        trace = await self.trajectories.get(tenant, trajectory_id)
        if trace is None:
            raise NotFound(
                f"no retrieval {trajectory_id!r} (trajectories are kept "
                f"{self.settings.trajectory_retention_days} days)"
            )
        return Explanation.model_validate({"trajectory_id": trajectory_id, **trace})


# The summary names this many skipped or failed pages; the rest are counted in a note.
LISTED_OUTCOMES = 100


def _note_outcome(summary: IngestSummary, state: str, url: str, reason: str) -> None:
    listed = summary.skipped if state == "skipped" else summary.failed
    if len(listed) < LISTED_OUTCOMES:
        listed.append(PageOutcome(url=url, reason=reason))
    else:
        summary.unlisted[state] = summary.unlisted.get(state, 0) + 1


def document_info(stored: StoredDocument) -> DocumentInfo:
    return DocumentInfo(
        document_id=stored.id,
        source_id=stored.source_id,
        uri=stored.uri,
        title=stored.title,
        mime_type=stored.mime_type,
        chunks=stored.chunk_count,
        metadata=stored.metadata,
        notes=stored.notes,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
        text=stored.text,
    )


def _reading(ingested: IngestedDocument, document: ExtractedDocument) -> None:
    """The per-page result of a web page says how it was read (sources/html_page.py)."""
    extraction = document.metadata.get("extraction")
    if isinstance(extraction, dict):
        ingested.coverage = extraction.get("coverage")
        ingested.extraction = extraction.get("method")

"""The knowledge skills: ingestion, retrieval, explanations and the catalogue.

Each is defined once here; A2A (Agent Card, tasks), MCP (tools) and the CLI read them from the
registry. Handlers only translate arguments: the work is `KnowledgeService`'s, and its refusals
(`KnowledgeError`) become the skills layer's `SkillError` here, in `refusing_skill`, word for word.
"""

import functools
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentic_rag.knowledge import answers
from agentic_rag.knowledge.errors import KnowledgeError
from agentic_rag.knowledge.explain_report import explanation_text, with_titles
from agentic_rag.knowledge.results import (
    CrawlRequest,
    DocumentInfo,
    Explanation,
    IngestSummary,
    SearchResult,
    SourceInfo,
)
from agentic_rag.knowledge.retrieval import Reranker
from agentic_rag.knowledge.service import KnowledgeService
from agentic_rag.knowledge.sources.pdf import PageImage
from agentic_rag.knowledge.store.search import Filters
from agentic_rag.llm.chat import Chat
from agentic_rag.skills import FileResult, SkillContext, SkillError, SkillRegistry
from agentic_rag.skills.refusals import refusing_skill

SourceKind = Literal["url", "pdf", "youtube", "text"]

CLIENT_MODEL = (
    "Without a server LLM, answer (and grade, for reranker llm) with your MCP client's model "
    "through sampling; the passages go to that model. Unset: the server's setting"
)


class SearchFilters(BaseModel):
    """Restrict a search; every filter given must hold."""

    source_ids: list[str] = Field(default_factory=list, description="Only these sources")
    document_ids: list[str] = Field(default_factory=list, description="Only these documents")
    kinds: list[SourceKind] = Field(default_factory=list, description="Only these source kinds")
    ingested_after: datetime | None = Field(None, description="Documents stored at or after")
    ingested_before: datetime | None = Field(None, description="Documents stored before")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Documents whose metadata contains these key/values"
    )

    def to_filters(self) -> Filters:
        return Filters(
            source_ids=tuple(self.source_ids),
            document_ids=tuple(self.document_ids),
            kinds=tuple(self.kinds),
            ingested_after=self.ingested_after,
            ingested_before=self.ingested_before,
            metadata=self.metadata,
        )


class VectorSearchInput(BaseModel):
    query: str = Field(description="What to look for, in natural language")
    top_k: int = Field(10, ge=1, le=100)
    similarity_threshold: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Drop hits whose similarity is below this: the chunk's cosine similarity "
        "and its document's, weighted 1 and 0.3 (a cosine's scale)",
    )
    filters: SearchFilters = Field(default_factory=SearchFilters)


class HybridRetrieveInput(BaseModel):
    query: str = Field(description="A question or keywords")
    top_k: int = Field(5, ge=1, le=100)
    use_reranking: bool = Field(
        False, description="Rerank the fused hits with the best available reranker"
    )
    reranker: Reranker | None = Field(None, description="A specific reranker (implies reranking)")
    filters: SearchFilters = Field(default_factory=SearchFilters)
    answer: bool = Field(True, description="Also answer the question with numbered citations")
    use_client_model: bool | None = Field(None, description=CLIENT_MODEL)


class RerankInput(BaseModel):
    query: str
    reranker: Reranker = Field(
        "rrf", description="rrf, mmr, cross-encoder (local model configured) or llm"
    )
    top_k: int = Field(5, ge=1, le=100)
    filters: SearchFilters = Field(default_factory=SearchFilters)
    use_client_model: bool | None = Field(None, description=CLIENT_MODEL)


class ExplainInput(BaseModel):
    trajectory_id: str = Field(description="The trajectory_id a search returned")


class IngestTextInput(BaseModel):
    text: str = Field(description="Markdown or plain text")
    title: str = Field(
        "",
        description="A title; ingesting the same title again replaces the text. Empty: the "
        "text's first line",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class IngestPdfInput(BaseModel):
    data: str | None = Field(
        None, description="The PDF's content, base64 (over A2A: send a FilePart instead)"
    )
    url: str | None = Field(None, description="Where to fetch the PDF (http or https)")
    path: str | None = Field(
        None,
        description="A file in your tenant's ingestion directory on the server "
        "(AGENTIC_RAG_INGEST_DIRECTORY/<tenant>), relative to it",
    )
    filename: str | None = Field(None, description="The file's name, shown in citations")
    metadata: dict[str, Any] = Field(default_factory=dict)
    page_images: int = Field(
        2,
        ge=0,
        le=10,
        description="Images of this many OCR'd pages, the least confidently read, returned "
        "with the result to check the OCR against",
    )


class IngestYoutubeInput(BaseModel):
    video_url: str = Field(description="A YouTube watch, youtu.be, shorts or embed URL, or an id")
    languages: list[str] = Field(
        default_factory=lambda: ["en"], description="Transcript languages, in order of preference"
    )
    transcript: str | None = Field(
        None,
        description="The transcript as WebVTT or SRT, when this server cannot reach YouTube",
    )
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ListSourcesInput(BaseModel):
    pass


class SourcesOutput(BaseModel):
    sources: list[SourceInfo]


class ListDocumentsInput(BaseModel):
    source_id: str | None = Field(None, description="Only the documents this source holds")
    limit: int = Field(100, ge=1, le=1000, description="Documents listed at most")
    offset: int = Field(0, ge=0, description="Documents skipped first, oldest first")


class DocumentsOutput(BaseModel):
    documents: list[DocumentInfo] = Field(description="Without their text (get_document has it)")


class GetDocumentInput(BaseModel):
    document_id: str
    include_text: bool = Field(True, description="Include the document's whole text")


class DocumentIdInput(BaseModel):
    document_id: str


class SourceIdInput(BaseModel):
    source_id: str


class Deleted(BaseModel):
    deleted: str
    documents: int = Field(description="Documents removed with it")


def _render_search(result: SearchResult) -> str:
    lines = []
    if result.answer is not None:
        lines += [result.answer.text, "", "Sources:"]
        for c in result.answer.citations:
            where = f", page {c.page}" if c.page else ""
            where += f", at {c.start_seconds:.0f}s" if c.start_seconds is not None else ""
            lines.append(f"[{c.number}] {c.title} ({c.uri}{where})")
    else:
        for hit in result.hits:
            p = hit.provenance
            lines.append(f"{hit.rank}. {p.title} ({p.uri}) score {hit.score:.3f}")
            lines.append("   " + hit.text[:300].replace("\n", " "))
    if not result.hits:
        lines = ["Nothing in the knowledge base matches this query."]
    lines += ["", f"(explain_answer trajectory_id: {result.trajectory_id})"]
    return "\n".join(lines)


def _render_documents(output: DocumentsOutput) -> str:
    if not output.documents:
        return "no documents"
    return "\n".join(
        f"{d.document_id}  {d.chunks:>5} chunks  {d.title} ({d.uri})" for d in output.documents
    )


def _render_ingest(summary: IngestSummary) -> str:
    lines = [
        f"ingested {summary.ingested}, unchanged {summary.unchanged}, skipped "
        f"{len(summary.skipped)}, failed {len(summary.failed)}; {summary.chunks} chunks written"
        f" (source {summary.source_id}, job {summary.job_id})"
    ]
    lines += [f"- {d.status}: {d.title} ({d.uri}), {d.chunks} chunks" for d in summary.documents]
    lines += [f"- skipped {o.url}: {o.reason}" for o in summary.skipped]
    lines += [f"- failed {o.url}: {o.reason}" for o in summary.failed]
    lines += [f"note: {n}" for n in summary.notes]
    return "\n".join(lines)


def _client_model(
    knowledge: KnowledgeService, ctx: SkillContext, asked: bool | None
) -> tuple[Chat | None, str]:
    """The caller's model, when the call asks for it (or the setting does and the call does not
    refuse it) and no LLM is configured; and why an answer without any model quotes."""
    wanted = knowledge.settings.use_client_model if asked is None else asked
    if not wanted or knowledge.llm is not None:
        return None, answers.NO_LLM
    if ctx.client_model is None:
        why = "this call's client offers no model (MCP sampling, within the request)"
        return None, answers.NO_CLIENT_MODEL.format(why=why)
    return ctx.client_model, answers.NO_LLM


def add_knowledge_skills(registry: SkillRegistry, knowledge: KnowledgeService) -> None:
    """Register the knowledge skills, which call `knowledge`."""
    skill = functools.partial(refusing_skill, registry, KnowledgeError)

    @skill(
        description="Answer a question from the knowledge base: dense and lexical (BM25) "
        "retrieval, and the knowledge graph's facts when it has some, fused, optionally "
        "reranked, with an answer citing numbered sources and a trajectory_id for "
        "explain_answer.",
        summary="Answer a question from the knowledge base, citing numbered sources.",
        group="knowledge",
        tags=["knowledge", "search", "rag"],
        examples=["How do I configure the embedding model?"],
        text_argument="query",
        render=_render_search,
    )
    async def hybrid_retrieve(ctx: SkillContext, args: HybridRetrieveInput) -> SearchResult:
        service = knowledge
        client_model, no_model = _client_model(knowledge, ctx, args.use_client_model)
        reranker = args.reranker
        if reranker is None and args.use_reranking:
            reranker = service.retrieval.best_reranker(client_model)
        return await service.retrieval.search(
            ctx.tenant,
            args.query,
            top_k=args.top_k,
            filters=args.filters.to_filters(),
            retrievers=("dense", "lexical", "graph"),
            reranker=reranker,
            answer=args.answer,
            client_model=client_model,
            no_model=no_model,
        )

    @skill(
        description="Nearest chunks to the query by embedding similarity (dense only), with "
        "metadata filters and an optional similarity threshold.",
        summary="Nearest chunks to a query by embedding similarity, with filters.",
        group="knowledge",
        tags=["knowledge", "search"],
        text_argument="query",
        render=_render_search,
    )
    async def vector_search(ctx: SkillContext, args: VectorSearchInput) -> SearchResult:
        return await knowledge.retrieval.search(
            ctx.tenant,
            args.query,
            top_k=args.top_k,
            filters=args.filters.to_filters(),
            retrievers=("dense",),
            similarity_threshold=args.similarity_threshold,
        )

    @skill(
        description="Retrieve with a chosen reranker: rrf (rank fusion), mmr (diverse), "
        "cross-encoder (when a local model is configured) or llm (when an LLM is configured).",
        summary="Retrieve and answer with a chosen reranker: rrf, mmr, cross-encoder or llm.",
        group="knowledge",
        tags=["knowledge", "search", "rerank"],
        text_argument="query",
        render=_render_search,
    )
    async def query_with_reranking(ctx: SkillContext, args: RerankInput) -> SearchResult:
        client_model, no_model = _client_model(knowledge, ctx, args.use_client_model)
        return await knowledge.retrieval.search(
            ctx.tenant,
            args.query,
            top_k=args.top_k,
            filters=args.filters.to_filters(),
            reranker=args.reranker,
            answer=True,
            client_model=client_model,
            no_model=no_model,
        )

    @skill(
        description="How a search found its answer: the plan, each retriever's hits with ranks "
        "and scores, the fusion's inputs and output, reranking before and after, the time of "
        "each stage, and the exact span of every cited passage.",
        summary="How a search found its answer, by the trajectory_id it returned.",
        group="knowledge",
        tags=["knowledge", "explain"],
        text_argument="trajectory_id",
        render=explanation_text,
    )
    async def explain_answer(ctx: SkillContext, args: ExplainInput) -> Explanation:
        service = knowledge
        explanation = await service.explain(ctx.tenant, args.trajectory_id)
        return await with_titles(service.store, ctx.tenant, explanation)

    @skill(
        description="Crawl a site from a URL and ingest its pages (HTML, PDF, text): same site "
        "by default, robots.txt and crawl delays respected, unchanged pages skipped on a "
        "re-crawl. Reports each page; the summary says what was skipped or failed and why.",
        summary="Crawl a site from a URL and ingest its pages.",
        group="ingest",
        tags=["knowledge", "ingest"],
        examples=["https://docs.example.com/", "ingest https://example.com/guide"],
        render=_render_ingest,
        resumable=True,
    )
    async def ingest_url(ctx: SkillContext, args: CrawlRequest) -> IngestSummary:
        return await knowledge.ingest_url(ctx.tenant, ctx.task_id, ctx.progress, args)

    @skill(
        description="Ingest a PDF from its content (a FilePart, or base64 data), a URL, or a "
        "path in the ingestion directory: text per page with page numbers, scanned pages read "
        "by OCR.",
        summary="Ingest a PDF (base64 data, a URL or a path); scanned pages read by OCR.",
        group="ingest",
        tags=["knowledge", "ingest", "pdf"],
        render=_render_ingest,
        resumable=True,
        file_argument="data",
        file_media_types=["application/pdf"],
    )
    async def ingest_pdf(ctx: SkillContext, args: IngestPdfInput) -> IngestSummary:
        async def show_pages(images: list[PageImage]) -> None:
            # A2A: an artifact per page; MCP: a text block and an image block per page.
            for image in images:
                await ctx.attach(
                    f"Page {image.number} as scanned: its text was read by OCR "
                    f"(confidence {image.confidence:.2f})",
                    FileResult(f"page-{image.number}.png", "image/png", content=image.png),
                    name=f"page {image.number} (OCR)",
                )

        return await knowledge.ingest_pdf(
            ctx.tenant,
            ctx.task_id,
            ctx.progress,
            data=args.data,
            url=args.url,
            path=args.path,
            filename=args.filename,
            metadata=args.metadata,
            page_images=args.page_images,
            show_pages=show_pages,
        )

    @skill(
        description="Ingest a YouTube video's transcript, with timestamps on every chunk; or a "
        "transcript sent as WebVTT or SRT.",
        summary="Ingest a YouTube video's transcript, with timestamps.",
        group="ingest",
        tags=["knowledge", "ingest", "youtube"],
        examples=["https://www.youtube.com/watch?v=dQw4w9WgXcQ"],
        render=_render_ingest,
        resumable=True,
    )
    async def ingest_youtube(ctx: SkillContext, args: IngestYoutubeInput) -> IngestSummary:
        return await knowledge.ingest_youtube(
            ctx.tenant,
            ctx.task_id,
            ctx.progress,
            video_url=args.video_url,
            languages=args.languages,
            transcript=args.transcript,
            title=args.title,
            metadata=args.metadata,
        )

    @skill(
        description="Ingest markdown or plain text sent by the caller, under a title.",
        group="ingest",
        tags=["knowledge", "ingest"],
        render=_render_ingest,
        resumable=True,
    )
    async def ingest_text(ctx: SkillContext, args: IngestTextInput) -> IngestSummary:
        return await knowledge.ingest_text(
            ctx.tenant,
            ctx.task_id,
            ctx.progress,
            text=args.text,
            title=args.title,
            metadata=args.metadata,
        )

    @skill(
        description="The sources in the knowledge base, with their document and chunk counts.",
        group="knowledge",
        tags=["knowledge", "catalogue"],
    )
    async def list_sources(ctx: SkillContext, args: ListSourcesInput) -> SourcesOutput:
        return SourcesOutput(sources=await knowledge.sources(ctx.tenant))

    @skill(
        description="The documents of the knowledge base, or of one source, with their ids, "
        "titles and chunk counts, oldest first.",
        summary="The documents of the knowledge base, or of one source, oldest first.",
        group="knowledge",
        tags=["knowledge", "catalogue"],
        render=_render_documents,
    )
    async def list_documents(ctx: SkillContext, args: ListDocumentsInput) -> DocumentsOutput:
        if args.source_id is not None and not any(
            s.source_id == args.source_id for s in await knowledge.sources(ctx.tenant)
        ):
            raise SkillError(f"no source {args.source_id!r}")
        return DocumentsOutput(
            documents=await knowledge.documents(
                ctx.tenant, source_id=args.source_id, limit=args.limit, offset=args.offset
            )
        )

    @skill(
        description="One document: its metadata and, unless asked not to, its text.",
        group="knowledge",
        tags=["knowledge", "catalogue"],
    )
    async def get_document(ctx: SkillContext, args: GetDocumentInput) -> DocumentInfo:
        return await knowledge.document(ctx.tenant, args.document_id, with_text=args.include_text)

    @skill(
        description="Delete a document, its chunks and its knowledge-graph episodes.",
        group="admin",
        tags=["knowledge", "catalogue"],
    )
    async def delete_document(ctx: SkillContext, args: DocumentIdInput) -> Deleted:
        if not await knowledge.delete_document(ctx.tenant, args.document_id):
            raise SkillError(f"no document {args.document_id!r}")
        return Deleted(deleted=args.document_id, documents=1)

    @skill(
        description="Delete a source with all its documents, chunks and graph episodes.",
        group="admin",
        tags=["knowledge", "catalogue"],
    )
    async def delete_source(ctx: SkillContext, args: SourceIdInput) -> Deleted:
        count = await knowledge.delete_source(ctx.tenant, args.source_id)
        if count is None:
            raise SkillError(f"no source {args.source_id!r}")
        return Deleted(deleted=args.source_id, documents=count)

    # A bare URL sent as text is something to ingest, not a question.
    youtube = r"(?:https?://)?(?:www\.|m\.)?(?:youtube\.com|youtu\.be)/\S+"
    registry.route_text(rf"(?:ingest\s+)?(?P<value>{youtube})", "ingest_youtube", "video_url")
    registry.route_text(r"(?:ingest\s+)?(?P<value>https?://\S+)", "ingest_url", "url")

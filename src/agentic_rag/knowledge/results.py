"""What the knowledge skills return: one set of models, read by every protocol's schema."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class Provenance(BaseModel):
    """Where a hit comes from, precisely enough to show it in place."""

    document_id: str
    source_id: str
    source_kind: str = Field(description="url, pdf, youtube or text")
    uri: str = Field(description="The page URL, file name or video URL")
    title: str
    chunk_id: int
    position: int = Field(description="The chunk's 0-based position in its document")
    char_start: int = Field(description="Start of the chunk in the document's text")
    char_end: int = Field(description="End (exclusive) of the chunk in the document's text")
    page: int | None = Field(None, description="1-based PDF page")
    start_seconds: float | None = Field(None, description="Transcript timestamp")
    end_seconds: float | None = None
    heading_path: list[str] = Field(default_factory=list)


class RetrieverScore(BaseModel):
    rank: int
    score: float


class SearchHit(BaseModel):
    rank: int = Field(description="1-based rank in the final list")
    score: float
    text: str
    provenance: Provenance
    retrievers: dict[str, RetrieverScore] = Field(
        default_factory=dict, description="Each retriever's own rank and score of this chunk"
    )


class RankedChunk(BaseModel):
    chunk_id: int
    rank: int
    score: float


class Citation(BaseModel):
    number: int = Field(description="The [n] the answer uses")
    chunk_id: int
    uri: str
    title: str
    page: int | None = None
    start_seconds: float | None = None
    char_start: int
    char_end: int


class Answer(BaseModel):
    text: str
    mode: str = Field(
        description="llm, client-model (the MCP client's model, through sampling), or "
        "extractive: quotes, when there is no model or its answer failed the grounding check"
    )
    citations: list[Citation]
    note: str | None = Field(
        default=None,
        description="Why the LLM's answer was replaced by quotes: what the grounding check found",
    )
    rejected: str | None = Field(
        default=None,
        description="The LLM's answer that failed the grounding check, for inspection only",
    )


class SearchResult(BaseModel):
    query: str
    trajectory_id: str = Field(description="Pass to explain_answer to see how this was found")
    hits: list[SearchHit]
    retrievers: dict[str, list[RankedChunk]] = Field(
        default_factory=dict, description="Each retriever's own hits, best first"
    )
    answer: Answer | None = None


class IngestedDocument(BaseModel):
    document_id: str
    uri: str
    title: str
    status: str = Field(description="created, updated or unchanged")
    chunks: int
    notes: list[str] = Field(default_factory=list)
    coverage: float | None = Field(
        None,
        description="Web pages: the share of the page's text blocks (paragraphs, items, "
        "cells, code, headings of 25+ characters) kept in the stored text",
    )
    extraction: str | None = Field(
        None,
        description="Web pages: 'main content', or 'whole page' when the main content alone "
        "kept too little of the page (a note says how much)",
    )


class PageOutcome(BaseModel):
    url: str
    reason: str


class IngestSummary(BaseModel):
    job_id: str
    source_id: str
    kind: str
    documents: list[IngestedDocument] = Field(default_factory=list)
    ingested: int = Field(0, description="Documents created or updated")
    unchanged: int = 0
    skipped: list[PageOutcome] = Field(default_factory=list)
    failed: list[PageOutcome] = Field(default_factory=list)
    chunks: int = Field(0, description="Chunks written by this job")
    notes: list[str] = Field(default_factory=list)
    unlisted: dict[str, int] = Field(
        default_factory=dict,
        description="Skipped or failed pages beyond the first 100 listed, counted by state",
    )


class CrawlRequest(BaseModel):
    """What to crawl: the arguments of ingest_url."""

    url: str = Field(description="The page to start from (http or https)")
    depth: int = Field(1, ge=0, le=10, description="Link hops from the start page")
    max_pages: int = Field(50, ge=1, description="Pages fetched at most")
    same_site: bool = Field(True, description="Only follow links on the start page's host")
    include: list[str] = Field(
        default_factory=list,
        description="URL patterns to visit: globs on the URL, or on the path when they "
        "start with '/', or regular expressions after 're:'",
    )
    exclude: list[str] = Field(default_factory=list, description="URL patterns to leave out")
    sitemaps: bool = Field(False, description="Also start from the site's sitemaps")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Stored with every document of this crawl"
    )


class SourceInfo(BaseModel):
    source_id: str
    kind: str
    uri: str
    title: str
    documents: int
    chunks: int
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class DocumentInfo(BaseModel):
    document_id: str
    source_id: str
    uri: str
    title: str
    mime_type: str
    chunks: int
    metadata: dict[str, Any]
    notes: list[str]
    created_at: datetime
    updated_at: datetime
    text: str | None = None


class FusedChunk(BaseModel):
    chunk_id: int
    rank: int
    score: float
    contributions: dict[str, float] = Field(description="What each retriever added to the score")


class FusionTrace(BaseModel):
    inputs: dict[str, int] = Field(description="How many hits each retriever handed in")
    output: list[FusedChunk]


class RerankTrace(BaseModel):
    reranker: str
    before: list[RankedChunk]
    after: list[RankedChunk]


class EpisodeExtraction(BaseModel):
    """What extracting one graph episode cost."""

    episode: str
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_seconds: float = Field(description="Seconds spent waiting for the LLM")
    seconds: float = Field(description="Processing time, every attempt")


class GraphFactHit(BaseModel):
    """A fact the graph retriever found: its chunks are its hits."""

    uuid: str
    fact: str
    rank: int
    score: float
    episodes: list[str] = Field(description="The graph episodes it came from")
    chunk_ids: list[int] = Field(description="The chunks of those episodes' documents")
    kept_chunk_ids: list[int] | None = Field(
        None,
        description="With filters, those of chunk_ids that satisfy them (the graph's hits); "
        "null without filters (all kept)",
    )
    extraction: list[EpisodeExtraction] = Field(
        default_factory=list,
        description="What extracting each of those episodes cost: LLM calls, tokens, seconds",
    )


class GraphEntityHit(BaseModel):
    """An entity the graph retriever found: its chunks (those of the episodes that mention
    it) are its hits."""

    uuid: str
    name: str
    rank: int
    score: float
    episodes: list[str] = Field(description="The graph episodes that mention it, oldest first")
    chunk_ids: list[int] = Field(description="The chunks of those episodes' documents")
    kept_chunk_ids: list[int] | None = Field(
        None,
        description="With filters, those of chunk_ids that satisfy them (the graph's hits); "
        "null without filters (all kept)",
    )


class Explanation(BaseModel):
    """How one retrieval found what it returned, stage by stage."""

    trajectory_id: str
    query: str
    plan: dict[str, Any] = Field(
        description="Retrievers, candidates per retriever, fusion and its parameters, "
        "reranker, top_k, the share of the best score an answer's sources reach "
        "(citation_ratio), filters and the embedding model"
    )
    retrievers: dict[str, list[RankedChunk]] = Field(
        description="Each retriever's hits with rank and score"
    )
    fusion: FusionTrace
    rerank: RerankTrace | None = Field(None, description="The order before and after reranking")
    hits: list[SearchHit] = Field(description="The final hits with the exact span of each")
    answer: Answer | None = None
    graph_facts: list[GraphFactHit] = Field(
        default_factory=list,
        description="The facts behind the graph retriever's hits (when it ran)",
    )
    graph_entities: list[GraphEntityHit] = Field(
        default_factory=list,
        description="The entities behind the graph retriever's hits (when it ran)",
    )
    timings_ms: dict[str, float] = Field(description="Milliseconds spent in each stage")
    titles: dict[int, str] = Field(
        default_factory=dict,
        description="The document title of each chunk named in retrievers, fusion and rerank "
        "(a chunk deleted since has none)",
    )

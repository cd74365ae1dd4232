"""Retrieval: run the retrievers, fuse, rerank, answer, and record every stage.

    query -> dense (pgvector) and lexical (BM25 over the lexicon) [and graph facts and entities]
          -> fusion -> reranker -> top k -> answer with numbered citations
          -> trajectory (for explain_answer)

The graph retriever (graph/documents.py) runs when asked for, the graph is running and the
tenant's graph holds facts of ingested documents. Its facts span documents: with filters, it
keeps the chunks that satisfy them (one query of the store's filter SQL).

The trajectory keeps each stage's input and output with ranks, scores and time, so that
`explain_answer` can show exactly why a passage was cited.
"""

import asyncio
import math
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter

from agentic_rag.embedding.batching import QueryBatcher
from agentic_rag.embedding.embedders import Embedder
from agentic_rag.ids import new_id
from agentic_rag.knowledge import answers
from agentic_rag.knowledge.active_space import ActiveSpace
from agentic_rag.knowledge.document_graph import DocumentGraph, GraphRetrieval
from agentic_rag.knowledge.errors import InvalidRequest
from agentic_rag.knowledge.fusion import Fused, FusionMethod, Ranked, fuse
from agentic_rag.knowledge.rerank import CrossEncoder, llm_grades, mmr
from agentic_rag.knowledge.results import (
    Answer,
    Citation,
    Provenance,
    RankedChunk,
    RetrieverScore,
    SearchHit,
    SearchResult,
)
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.search import Filters, Hit
from agentic_rag.knowledge.store.spaces import Space
from agentic_rag.knowledge.trajectories import TrajectoryStore
from agentic_rag.llm.chat import Chat, ChatError, OpenAIChat

Retriever = Literal["dense", "lexical", "graph"]
Reranker = Literal["rrf", "mmr", "cross-encoder", "llm"]
RERANKERS: tuple[Reranker, ...] = ("rrf", "mmr", "cross-encoder", "llm")


@dataclass(frozen=True)
class RetrievalConfig:
    """Defaults chosen on measured quality (docs/knowledge.md, bench/quality)."""

    candidates: int = 100
    """Hits each retriever contributes to the fusion."""
    fusion: FusionMethod = "convex"
    """Convex 0.5/0.5 beat RRF k=60 by 0.022 nDCG@10 on the quality benchmark's test half."""
    rrf_k: float = 5.0
    """For the `rrf` reranker: k in 1..5 was best on the benchmark's tuning half."""
    weights: Mapping[str, float] = field(default_factory=lambda: {"dense": 1.0, "lexical": 1.0})
    graph_weight: float = 0.5
    """The graph retriever's weight, added only when it runs (so the two-leg fusion is the
    benchmark's); not measured yet: a fact stands for several chunks, a supporting signal."""
    graph_limit: int = 20
    """Facts, and as many entities, the graph retriever asks for (each stands for the chunks
    of its episodes)."""
    mmr_diversity: float = 0.1
    rerank_candidates: int = 20
    """Fused hits a reranker reorders."""
    citation_ratio: float = 0.2
    """An answer cites only the hits whose relevance is at least this share of the best hit's
    (answers.sources, citation_relevance); the hits themselves are all returned. The largest
    ratio that cost no query its relevant page on the quality benchmark's tuning half
    (bench/results/citations-relative-cutoff.md)."""


@dataclass
class Stopwatch:
    timings: dict[str, float] = field(default_factory=dict)
    _started: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self._started) * 1000, 3)
        self._started = now


class Retrieval:
    def __init__(
        self,
        store: KnowledgeStore,
        trajectories: TrajectoryStore,
        embedder: Embedder,
        active: ActiveSpace,
        config: RetrievalConfig,
        *,
        cross_encoder: CrossEncoder | None = None,
        llm: OpenAIChat | None = None,
        graph: DocumentGraph | None = None,
    ) -> None:
        self._store, self._trajectories = store, trajectories
        self._active, self.config = active, config
        # Concurrent searches embed their queries together (one model call).
        self._queries = QueryBatcher(embedder)
        self._cross_encoder, self._llm = cross_encoder, llm
        self.graph = graph

    @property
    def _space(self) -> Space:
        """The store's active space (known once the knowledge engine started)."""
        return self._active.space

    def available_rerankers(self, client_model: Chat | None = None) -> list[str]:
        available = ["rrf", "mmr"]
        if self._cross_encoder is not None:
            available.append("cross-encoder")
        if self._llm is not None or client_model is not None:
            available.append("llm")
        return available

    def best_reranker(self, client_model: Chat | None = None) -> Reranker | None:
        """The strongest model reranker configured: the LLM (or the caller's model, given),
        else the cross-encoder, else none (MMR trades relevance for diversity: measured, it
        lowers nDCG@10 after fusion)."""
        if self._llm is not None or client_model is not None:
            return "llm"
        if self._cross_encoder is not None:
            return "cross-encoder"
        return None

    async def search(
        self,
        tenant: str,
        query: str,
        *,
        top_k: int,
        filters: Filters,
        retrievers: Sequence[Retriever] = ("dense", "lexical"),
        reranker: Reranker | None = None,
        similarity_threshold: float | None = None,
        answer: bool = False,
        client_model: Chat | None = None,
        no_model: str = answers.NO_LLM,
    ) -> SearchResult:
        """`client_model`: the caller's own model, asked for, which answers and grades (the
        `llm` reranker) when no LLM is configured; `no_model` says why an answer quotes when
        there is no model at all."""
        if reranker is not None and reranker not in self.available_rerankers(client_model):
            raise InvalidRequest(
                f"reranker {reranker!r} is not available here; available: "
                f"{', '.join(self.available_rerankers(client_model))}"
                + (
                    " (cross-encoder needs AGENTIC_RAG_RERANKER_DIRECTORY)"
                    if reranker == "cross-encoder"
                    else " (llm needs AGENTIC_RAG_LLM_BASE_URL and AGENTIC_RAG_LLM_MODEL)"
                    if reranker == "llm"
                    else ""
                )
            )
        if not query.strip():
            raise InvalidRequest("the query is empty")
        config, clock = self.config, Stopwatch()
        width = max(config.candidates, top_k)
        # `rrf` as a reranker asks for reciprocal rank fusion instead of the default fusion.
        method: FusionMethod = "rrf" if reranker == "rrf" else config.fusion
        # The legs are independent: they run at once (the embedder in its thread, each query on
        # a connection of its own), so a hybrid search costs the slower leg, not the sum.
        legs: dict[str, Awaitable[Ranked | None]] = {}
        leg_times: dict[str, float] = {}
        graph_found: list[GraphRetrieval] = []  # what the graph leg found, if it ran
        if "dense" in retrievers:
            legs["dense"] = self._dense(
                tenant, query, width, filters, similarity_threshold, leg_times
            )
        if "lexical" in retrievers:
            legs["lexical"] = self._lexical(tenant, query, width, filters, leg_times)
        if "graph" in retrievers and self.graph is not None:
            legs["graph"] = self._graph(
                self.graph, tenant, query, width, filters, leg_times, graph_found
            )
        ran = dict(zip(legs, await asyncio.gather(*legs.values()), strict=True))
        lists = {name: hits for name, hits in ran.items() if hits is not None}
        clock.lap("retrieve")
        weights = dict(config.weights)
        if "graph" in lists:
            weights["graph"] = config.graph_weight
        if len(lists) == 1:
            (only,) = lists.values()
            fused = [Fused(c, s, {next(iter(lists)): s}) for c, s in only]
        else:
            fused = fuse(method, lists, weights, rrf_k=config.rrf_k)
        clock.lap("fusion")

        ranked: list[tuple[int, float]] = [(f.chunk_id, f.score) for f in fused]
        rerank_trace: dict[str, Any] | None = None
        if reranker not in (None, "rrf"):
            before = ranked[: config.rerank_candidates]
            ranked = await self._rerank(reranker, query, before, tenant, client_model)
            rerank_trace = {
                "reranker": reranker,
                "before": _ranks(before),
                "after": _ranks(ranked),
            }
            clock.lap("rerank")
        final, found = await self._distinct(tenant, ranked, top_k)
        # Each retriever's (rank, score) by chunk; models only for the hits that show them.
        own_ranks = {
            name: {c: (i, s) for i, (c, s) in enumerate(hits, 1)} for name, hits in lists.items()
        }
        hits = [
            SearchHit(
                rank=rank,
                score=score,
                text=found[chunk_id].text,
                provenance=_provenance(found[chunk_id]),
                retrievers={
                    name: RetrieverScore(rank=ranks[chunk_id][0], score=ranks[chunk_id][1])
                    for name, ranks in own_ranks.items()
                    if chunk_id in ranks
                },
            )
            for rank, (chunk_id, score) in enumerate(final, start=1)
        ]
        clock.lap("fetch")
        reply = None
        if answer:
            relevance = citation_relevance(reranker, hits, fused)
            cited = answers.sources(hits, relevance, config.citation_ratio)
            reply = await self._answer(query, cited, client_model, no_model)
        if reply is not None:
            clock.lap("answer")
        trajectory_id = new_id()
        result = SearchResult(
            query=query,
            trajectory_id=trajectory_id,
            hits=hits,
            retrievers={name: _ranks(hits_of) for name, hits_of in lists.items()},
            answer=reply,
        )
        # One dump of the result (pydantic's, in Rust) gives the trace its parts.
        shown = result.model_dump(mode="json")
        trace = {
            "query": query,
            "plan": {
                "retrievers": list(lists),
                "candidates_per_retriever": width,
                "fusion": _fusion_plan(method if len(lists) > 1 else "none", weights, config.rrf_k),
                "reranker": reranker,
                "top_k": top_k,
                "citation_ratio": config.citation_ratio if answer else None,
                "similarity_threshold": similarity_threshold,
                "filters": _filters_trace(filters),
                "embedding_model": self._space.model,
            },
            "retrievers": shown["retrievers"],
            "fusion": {
                "inputs": {name: len(h) for name, h in lists.items()},
                "output": [
                    {
                        "chunk_id": f.chunk_id,
                        "rank": i,
                        "score": f.score,
                        "contributions": f.contributions,
                    }
                    for i, f in enumerate(fused[: max(top_k, config.rerank_candidates)], 1)
                ],
            },
            "rerank": None
            if rerank_trace is None
            else {
                k: v if isinstance(v, str) else [r.model_dump() for r in v]
                for k, v in rerank_trace.items()
            },
            "hits": shown["hits"],
            "answer": shown["answer"],
            "graph_facts": [asdict(f) for found in graph_found for f in found.facts],
            "graph_entities": [asdict(e) for found in graph_found for e in found.entities],
            "timings_ms": {**leg_times, **clock.timings},
        }
        await self._trajectories.save(tenant, trajectory_id, query, trace)
        return result

    async def _distinct(
        self, tenant: str, ranked: Sequence[tuple[int, float]], top_k: int
    ) -> tuple[list[tuple[int, float]], dict[int, Hit]]:
        """The first `top_k` of `ranked` that still exist, each passage once: two chunks of
        the same text (a paragraph two pages repeat, a copy stored before duplicates were
        linked) would be two hits citing one passage."""
        final: list[tuple[int, float]] = []
        found: dict[int, Hit] = {}
        seen: set[str] = set()
        start = 0
        while len(final) < top_k and start < len(ranked):
            batch = ranked[start : start + top_k]
            start += len(batch)
            hits = await self._store.hits(tenant, [c for c, _ in batch])
            for chunk_id, score in batch:
                hit = hits.get(chunk_id)  # None: deleted meanwhile
                passage = " ".join(hit.text.split()).casefold() if hit else ""
                if hit is None or passage in seen or len(final) == top_k:
                    continue
                seen.add(passage)
                final.append((chunk_id, score))
                found[chunk_id] = hit
        return final, found

    async def _dense(
        self,
        tenant: str,
        query: str,
        limit: int,
        filters: Filters,
        similarity_threshold: float | None,
        times: dict[str, float],
    ) -> Ranked:
        clock = Stopwatch()
        vector = await self._queries.embed(query)
        clock.lap("embed_query")
        hits = await self._store.dense(tenant, self._space, vector, limit, filters)
        if similarity_threshold is not None:
            hits = [(c, s) for c, s in hits if s >= similarity_threshold]
        clock.lap("dense")
        times.update(clock.timings)
        return hits

    async def _lexical(
        self, tenant: str, query: str, limit: int, filters: Filters, times: dict[str, float]
    ) -> Ranked:
        clock = Stopwatch()
        hits = await self._store.lexical(tenant, query, limit, filters)
        clock.lap("lexical")
        times.update(clock.timings)
        return hits

    async def _graph(
        self,
        graph: DocumentGraph,
        tenant: str,
        query: str,
        limit: int,
        filters: Filters,
        times: dict[str, float],
        found: list[GraphRetrieval],
    ) -> Ranked | None:
        """The chunks behind the graph's facts and entities for the query, those that
        satisfy the filters (what it found goes in `found`); None (no list, no time) when
        the tenant's graph holds no document's episodes."""
        clock = Stopwatch()
        if not await graph.has_facts(tenant):
            return None
        retrieved = await graph.retrieve(tenant, query, self.config.graph_limit)
        clock.lap("graph")
        if filters:
            ids = [c for c, _ in retrieved.chunks]
            matching = await self._store.matching_chunks(tenant, ids, filters) if ids else set()
            retrieved = retrieved.kept(matching)
            clock.lap("graph_filters")
        found.append(retrieved)
        times.update(clock.timings)
        return retrieved.chunks[:limit]

    async def _rerank(
        self,
        reranker: Reranker | None,
        query: str,
        candidates: list[tuple[int, float]],
        tenant: str,
        client_model: Chat | None,
    ) -> list[tuple[int, float]]:
        ids = [c for c, _ in candidates]
        if reranker == "mmr":
            vectors = await self._store.vectors(self._space, ids)
            return mmr(dict(candidates), vectors, len(ids), diversity=self.config.mmr_diversity)
        texts = await self._store.hits(tenant, ids)
        present = [c for c in ids if c in texts]
        passages = [texts[c].text for c in present]
        if reranker == "cross-encoder":
            assert self._cross_encoder is not None
            scores = await self._cross_encoder.score(query, passages)
        else:
            grader = self._llm if self._llm is not None else client_model
            assert grader is not None
            scores = await llm_grades(grader, query, passages)
        order = sorted(zip(present, scores, strict=True), key=lambda p: (-p[1], ids.index(p[0])))
        return order

    async def _answer(
        self, query: str, hits: Sequence[SearchHit], client_model: Chat | None, no_model: str
    ) -> Answer:
        passages = [h.text for h in hits]
        note = rejected = None
        # The configured LLM first; the caller's model only where there is none.
        model: Chat | None = self._llm
        mode, whose = "llm", "The LLM's"
        if model is None:
            model, mode, whose = client_model, "client-model", "The client's model's"
        synthesis = None
        if model is not None and passages:
            try:
                synthesis = await answers.synthesised(model, query, passages)
            except ChatError as exc:
                if model is self._llm:
                    raise
                # The caller's model may be declined by its user: the quotes still answer.
                note = f"The client's model did not answer ({exc})"
        if synthesis is not None and synthesis.verdict.grounded:
            text = synthesis.text
        elif synthesis is not None:
            note = f"{whose} answer was withheld because {synthesis.verdict.problem}"
            text, mode = answers.extractive(query, passages, why=note), "extractive"
            rejected = synthesis.text
        else:
            text = answers.extractive(query, passages, why=note or no_model)
            mode = "extractive"
        return Answer(
            text=text,
            mode=mode,
            note=note,
            rejected=rejected,
            citations=[
                Citation(
                    number=i,
                    chunk_id=h.provenance.chunk_id,
                    uri=h.provenance.uri,
                    title=h.provenance.title,
                    page=h.provenance.page,
                    start_seconds=h.provenance.start_seconds,
                    char_start=h.provenance.char_start,
                    char_end=h.provenance.char_end,
                )
                for i, h in enumerate(hits, start=1)
            ],
        )


def citation_relevance(
    reranker: Reranker | None, hits: Sequence[SearchHit], fused: Sequence[Fused]
) -> list[float]:
    """What `answers.sources` compares, by hit: the score that ranked it, on a scale whose 0
    means no relevance. The fused score (convex: each retriever's scores scaled to 0..1 over
    its candidates and summed by weight; RRF: by rank) or the LLM's 0-10 grade. Under MMR the
    fused score too: MMR's own value docks a passage for resembling one picked before, which
    makes it no less a source (measured: cutting on it cost nDCG, bench/results/
    citations-relative-cutoff.md). A cross-encoder's logit as its probability (the logistic
    function): a ratio of logits means nothing."""
    if reranker == "mmr":
        by_chunk = {f.chunk_id: f.score for f in fused}
        return [by_chunk[h.provenance.chunk_id] for h in hits]
    if reranker == "cross-encoder":
        return [1 / (1 + math.exp(-max(min(h.score, 50.0), -50.0))) for h in hits]
    return [h.score for h in hits]


_RANKED = TypeAdapter(list[RankedChunk])


def _ranks(hits: Sequence[tuple[int, float]]) -> list[RankedChunk]:
    # A search lists 200 of them: validated as one list (in pydantic's Rust core) they cost
    # 0.16 ms a hundred, against 0.23 ms built one by one and 0.42 ms by model_construct.
    return _RANKED.validate_python(
        [{"chunk_id": c, "rank": i, "score": s} for i, (c, s) in enumerate(hits, start=1)]
    )


def _provenance(hit: Hit) -> Provenance:
    fields = asdict(hit)
    fields.pop("text")
    return Provenance(**fields)


def _fusion_plan(method: str, weights: Mapping[str, float], rrf_k: float) -> dict[str, Any]:
    """The fusion's method with only the parameters it used: RRF's k, the weights of either."""
    if method == "none":
        return {"method": "none"}
    if method == "rrf":
        return {"method": "rrf", "rrf_k": rrf_k, "weights": dict(weights)}
    return {"method": method, "weights": dict(weights)}


def _filters_trace(filters: Filters) -> dict[str, Any]:
    return {
        k: (v.isoformat() if hasattr(v, "isoformat") else v)
        for k, v in asdict(filters).items()
        if v
    }

"""Retrieval quality on the man-page set: dense, lexical, fused and reranked, against yardsticks.

    .venv/bin/python bench/quality/run.py            # full run: results.md and results.json

The corpus (documents.json) is reproduced from this machine's man pages, chunked by the
product's Chunker, embedded by its LocalEmbedder and written by KnowledgeStore.write_document
into an embedded PostgreSQL in a temporary directory (deleted at the end). Every query of
queries.json then runs through KnowledgeStore.dense and .lexical; the fusions and MMR are the
product's functions on those lists; Retrieval.search itself is run on the test half to check
that the harness measures what the product returns. The yardsticks run in
bench/.venv-quality-reference (built from reference-requirements.txt when missing): the fp32
all-MiniLM-L6-v2 through sentence-transformers, with exact cosine search, and bm25s.

Scores are per document: a ranked list of chunks counts each document at its best chunk.
Fusion parameters are chosen on the tuning half of the queries and reported on both halves.
"""

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import lexical  # noqa: E402
import metrics  # noqa: E402
import plain  # noqa: E402
import report  # noqa: E402

from agentic_rag.config import Settings  # noqa: E402
from agentic_rag.embedding.embedders import LocalEmbedder  # noqa: E402
from agentic_rag.knowledge.active_space import ActiveSpace  # noqa: E402
from agentic_rag.knowledge.chunking import (  # noqa: E402
    Chunker,
    document_embedding_text,
    embedding_text,
)
from agentic_rag.knowledge.documents import Chunk, ExtractedDocument  # noqa: E402
from agentic_rag.knowledge.fusion import Fused, Ranked, convex, rrf  # noqa: E402
from agentic_rag.knowledge.rerank import mmr  # noqa: E402
from agentic_rag.knowledge.retrieval import Retrieval, RetrievalConfig  # noqa: E402
from agentic_rag.knowledge.sources.markdown import markdown_sections  # noqa: E402
from agentic_rag.knowledge.store import KnowledgeStore  # noqa: E402
from agentic_rag.knowledge.store.documents import content_hash  # noqa: E402
from agentic_rag.knowledge.store.search import Filters  # noqa: E402
from agentic_rag.knowledge.store.spaces import Space  # noqa: E402
from agentic_rag.knowledge.trajectories import TrajectoryStore  # noqa: E402
from agentic_rag.storage.embedded import EmbeddedPostgres  # noqa: E402
from agentic_rag.storage.postgres import connect  # noqa: E402

ROOT = HERE.parents[1]
REFERENCE_VENV = ROOT / "bench" / ".venv-quality-reference"
REFERENCE_REQUIREMENTS = HERE / "reference-requirements.txt"
REFERENCE_CACHE = corpus.CACHE.parent
TENANT = "quality"
DEPTH = 100
"""Chunks each retriever returns per query; fusions read the first `candidates` of them."""
CANDIDATES = (10, 20, 50, 100)
RRF_KS = (1, 5, 10, 20, 60)
CONVEX_DENSE_WEIGHTS = (0.3, 0.5, 0.7)
MMR_DIVERSITIES = (0.1, 0.3, 0.5)
EMBED_SLICE = 512  # texts per progress line


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Indexed:
    """The corpus as stored: chunk ids in the order of `texts`, and their documents."""

    chunk_ids: list[int]
    document_of: dict[int, str]
    embedding_texts: list[str]
    lexical_texts: list[str]
    vectors: np.ndarray
    documents: int
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class Run:
    """Every method's ranked chunks per query (in queries.json order)."""

    queries: list[corpus.Query]
    document_of: dict[int, str]
    ranked: dict[str, list[list[int]]] = field(default_factory=dict)
    fused_scores: dict[str, list[list[float]]] = field(default_factory=dict)
    latency_ms: dict[str, list[float]] = field(default_factory=dict)

    def scores(self, method: str) -> list[metrics.Scores]:
        return [
            metrics.score(metrics.documents(chunks, self.document_of), q.relevant)
            for q, chunks in zip(self.queries, self.ranked[method], strict=True)
        ]

    def summary(self, method: str) -> dict[str, dict[str, float]]:
        scores = self.scores(method)
        out = {"all": metrics.mean(scores)}
        for split in ("tuning", "test"):
            out[split] = metrics.mean(
                [s for s, q in zip(scores, self.queries, strict=True) if q.split == split]
            )
        return out

    def ndcg(self, method: str, split: str | None = None) -> list[float]:
        return [
            s.ndcg
            for s, q in zip(self.scores(method), self.queries, strict=True)
            if split is None or q.split == split
        ]


async def index(
    documents: Sequence[corpus.Document], store: KnowledgeStore, embedder: LocalEmbedder
) -> tuple[Indexed, Space]:
    timings: dict[str, float] = {}
    started = time.perf_counter()
    overlap = Settings.model_fields["chunk_overlap_tokens"].default
    chunker = Chunker(embedder.count_tokens, embedder.max_tokens, overlap)
    extracted: list[tuple[ExtractedDocument, list[Chunk]]] = []
    for document in documents:
        doc = ExtractedDocument(
            uri=document.entry.name,
            title=document.title,
            mime_type="text/markdown",
            sections=markdown_sections(document.markdown),
            metadata={"package": document.entry.package},
        )
        extracted.append((doc, chunker.chunk(doc.sections, title=doc.title)))
    timings["chunk_s"] = time.perf_counter() - started
    texts = [embedding_text(c) for _, chunks in extracted for c in chunks]
    document_texts = [document_embedding_text(doc.title, doc.text) for doc, _ in extracted]
    log(f"{len(documents)} documents, {len(texts)} chunks; embedding")

    space = await store.open_space(embedder.name, embedder.dimension)
    source = await store.upsert_source(TENANT, "text", "man pages", "Debian man pages", {})
    started = time.perf_counter()
    vectors = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    for start in range(0, len(texts), EMBED_SLICE):
        vectors[start : start + EMBED_SLICE] = await embedder.embed(
            texts[start : start + EMBED_SLICE]
        )
        rate = (start + EMBED_SLICE) / (time.perf_counter() - started)
        log(f"  embedded {min(start + EMBED_SLICE, len(texts))}/{len(texts)} ({rate:.1f}/s)")
    timings["embed_s"] = time.perf_counter() - started
    started = time.perf_counter()
    document_vectors = await embedder.embed(document_texts)
    timings["embed_documents_s"] = time.perf_counter() - started

    started = time.perf_counter()
    offset = 0
    for (doc, chunks), document_vector in zip(extracted, document_vectors, strict=True):
        result = await store.write_document(
            TENANT,
            source,
            doc,
            chunks,
            vectors[offset : offset + len(chunks)],
            space,
            document_vector=document_vector,
        )
        if result.status != "created":
            raise RuntimeError(f"{doc.uri}: {result.status}, expected created (a fresh store)")
        offset += len(chunks)
    timings["write_s"] = time.perf_counter() - started

    rows = await store._pool.fetch(  # the harness's own read: which chunk is which
        "SELECT c.id, d.uri, c.position FROM chunks c "
        "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id WHERE c.tenant = $1",
        TENANT,
    )
    by_place = {(r["uri"], r["position"]): r["id"] for r in rows}
    chunk_ids = [by_place[(doc.uri, c.position)] for doc, chunks in extracted for c in chunks]
    lexical_texts = [
        " ".join(c.heading_path) + " " + c.text for _, chunks in extracted for c in chunks
    ]
    indexed = Indexed(
        chunk_ids=chunk_ids,
        document_of={r["id"]: r["uri"] for r in rows},
        embedding_texts=texts,
        lexical_texts=lexical_texts,
        vectors=vectors,
        documents=len(documents),
        timings=timings,
    )
    return indexed, space


async def stored(
    documents: Sequence[corpus.Document], store: KnowledgeStore, embedder: LocalEmbedder
) -> tuple[Indexed, Space]:
    """The corpus as an earlier run with --keep stored it (refused if the texts differ)."""
    space = await store.open_space(embedder.name, embedder.dimension)
    rows = await store._pool.fetch(
        "SELECT c.id, d.uri, d.content_hash, c.embedding_prefix || c.text AS input, "
        "array_to_string(c.heading_path, ' ') || ' ' || c.text AS lexical, e.embedding "
        "FROM chunks c JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
        "JOIN chunk_embeddings e ON e.chunk_id = c.id AND e.space = $2 "
        "WHERE c.tenant = $1 ORDER BY d.uri, c.position",
        TENANT,
        space.id,
    )
    hashes = {r["uri"]: bytes(r["content_hash"]) for r in rows}
    expected = {
        d.entry.name: content_hash(ExtractedDocument(
            d.entry.name, d.title, "text/markdown", markdown_sections(d.markdown)
        ).text)
        for d in documents
    }  # fmt: skip
    if hashes != expected:
        raise RuntimeError("the kept database holds another corpus: delete it or use another")
    order = {d.entry.name: i for i, d in enumerate(documents)}
    rows = sorted(rows, key=lambda r: order[r["uri"]])
    indexed = Indexed(
        chunk_ids=[r["id"] for r in rows],
        document_of={r["id"]: r["uri"] for r in rows},
        embedding_texts=[r["input"] for r in rows],
        lexical_texts=[r["lexical"] for r in rows],
        vectors=np.stack([r["embedding"].to_numpy() for r in rows]).astype(np.float32),
        documents=len(documents),
        timings={"chunk_s": 0.0, "embed_s": 0.0, "write_s": 0.0},
    )
    return indexed, space


@asynccontextmanager
async def corpus_store(
    documents: Sequence[corpus.Document], embedder: LocalEmbedder, keep: Path | None
) -> AsyncIterator[tuple[str, asyncpg.Pool, KnowledgeStore, Indexed, Space]]:
    """An embedded PostgreSQL holding the corpus (its DSN, a pool, the store, the corpus as
    stored, its space): stored now, or as an earlier run left it in `keep` (--keep); deleted
    at the end unless kept."""
    data_dir = keep or Path(tempfile.mkdtemp(prefix="agentic-rag-quality-"))
    server = EmbeddedPostgres(data_dir)
    try:
        dsn = server.start()
        pool = await connect(dsn, size=2)
        try:
            store = KnowledgeStore(pool)
            if await store.chunk_count(TENANT):
                log(f"reusing the corpus stored in {data_dir} (--keep)")
                indexed, space = await stored(documents, store, embedder)
            else:
                indexed, space = await index(documents, store, embedder)
            yield dsn, pool, store, indexed, space
        finally:
            await pool.close()
    finally:
        server.stop()
        if keep is None:
            shutil.rmtree(data_dir, ignore_errors=True)


def exact_top(
    chunk_vectors: np.ndarray, query_vectors: np.ndarray, chunk_ids: Sequence[int]
) -> list[list[int]]:
    similarity = query_vectors @ chunk_vectors.T
    out = []
    for row in similarity:
        top = np.argpartition(-row, DEPTH)[:DEPTH]
        top = top[np.lexsort((top, -row[top]))]
        out.append([chunk_ids[i] for i in top])
    return out


async def timed(
    latencies: list[float], call: Callable[[], Any]
) -> Any:  # a coroutine function's result
    started = time.perf_counter()
    result = await call()
    latencies.append((time.perf_counter() - started) * 1000)
    return result


async def retrieve(
    run: Run,
    store: KnowledgeStore,
    space: Space,
    query_vectors: np.ndarray,
) -> tuple[list[Ranked], list[Ranked]]:
    """Each query through the product's dense and lexical legs (DEPTH hits each)."""
    dense_lists: list[Ranked] = []
    lexical_lists: list[Ranked] = []
    for name in ("dense", "lexical"):
        run.ranked[name], run.latency_ms[name] = [], []
    for query, vector in zip(run.queries, query_vectors, strict=True):
        dense = await timed(
            run.latency_ms["dense"],
            lambda v=vector: store.dense(TENANT, space, v, DEPTH, Filters()),
        )
        lexical = await timed(
            run.latency_ms["lexical"],
            lambda q=query: store.lexical(TENANT, q.text, DEPTH, Filters()),
        )
        dense_lists.append(dense)
        lexical_lists.append(lexical)
        run.ranked["dense"].append([c for c, _ in dense])
        run.ranked["lexical"].append([c for c, _ in lexical])
    return dense_lists, lexical_lists


async def retrieve_hnsw(run: Run, dsn: str, space: Space, query_vectors: np.ndarray) -> bool:
    """The dense leg through the HNSW index, as a tenant above the exact-scan threshold gets
    it. At this size the planner may prefer a scan and a sort (exact), so this pool forbids
    both; returns whether the plan reads the HNSW index."""
    name = "dense, HNSW path"
    run.ranked[name], run.latency_ms[name] = [], []
    pool = await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=1,
        init=register_vector,
        server_settings={"enable_seqscan": "off", "enable_sort": "off"},
    )
    assert pool is not None
    try:
        store = KnowledgeStore(pool, exact_search_max_chunks=0)
        for vector in query_vectors:
            hits = await timed(
                run.latency_ms[name],
                lambda v=vector: store.dense(TENANT, space, v, DEPTH, Filters()),
            )
            run.ranked[name].append([c for c, _ in hits])
        # The plan of the product's statement (store.dense) on this pool.
        plan = await pool.fetch(
            f"EXPLAIN SELECT e.chunk_id FROM chunk_embeddings e WHERE e.space = {space.id} "
            f"AND e.tenant = $1 ORDER BY e.embedding::{space.index_type} "
            f"<=> $2::{space.vector_type}::{space.index_type} LIMIT $3",
            TENANT,
            query_vectors[0],
            DEPTH,
        )
        return any(f"chunk_embeddings_hnsw_{space.id}" in row[0] for row in plan)
    finally:
        await pool.close()


FUSIONS: dict[str, tuple[str, float, int]] = {}
"""Name -> (method, k or dense weight, candidates per retriever)."""


def fusion_name(method: str, parameter: float, candidates: int) -> str:
    if method == "rrf":
        name = f"rrf k={parameter:g}, {candidates} candidates"
    else:
        name = f"convex dense={parameter:g}, {candidates} candidates"
    FUSIONS[name] = (method, parameter, candidates)
    return name


def fuse_one(fusion: str, dense: Ranked, lexical_hits: Ranked) -> list[Fused]:
    """The product's fusion function named by `fusion` (a fusion_name) over two lists."""
    method, parameter, candidates = FUSIONS[fusion]
    lists = {"dense": dense[:candidates], "lexical": lexical_hits[:candidates]}
    if method == "rrf":
        return rrf(lists, {"dense": 1.0, "lexical": 1.0}, parameter)
    return convex(lists, {"dense": parameter, "lexical": 1.0 - parameter})


def fuse_all(run: Run, dense_lists: list[Ranked], lexical_lists: list[Ranked]) -> list[str]:
    names = []
    for candidates in CANDIDATES:
        for method, parameters in (("rrf", RRF_KS), ("convex", CONVEX_DENSE_WEIGHTS)):
            for parameter in parameters:
                name = fusion_name(method, parameter, candidates)
                names.append(name)
                run.ranked[name], run.fused_scores[name] = [], []
                for dense, text in zip(dense_lists, lexical_lists, strict=True):
                    fused = fuse_one(name, dense, text)
                    run.ranked[name].append([f.chunk_id for f in fused])
                    run.fused_scores[name].append([f.score for f in fused])
    return names


def fuse_with(run: Run, fusion: str, dense_lists: list[Ranked], lexical_lists: list[Ranked]) -> str:
    """`fusion` over another lexical leg's lists (the recommended variant's)."""
    name = f"{fusion}, lexical split at every non-alphanumeric"
    run.ranked[name] = [
        [f.chunk_id for f in fuse_one(fusion, dense, text)]
        for dense, text in zip(dense_lists, lexical_lists, strict=True)
    ]
    return name


async def rerank_all(
    run: Run,
    store: KnowledgeStore,
    space: Space,
    query_vectors: np.ndarray,
    fused_method: str,
    config: RetrievalConfig,
) -> list[str]:
    """MMR over the first `rerank_candidates` fused chunks (as Retrieval.search does); the rest
    of the fused list follows unchanged. Also MMR as it could be: relevance taken from the
    fusion's scores instead of the dense similarity alone (`mmr_on_fused`)."""
    names = []
    for diversity in MMR_DIVERSITIES:
        for variant in ("product", "fused relevance"):
            if variant == "product":
                name = f"mmr diversity={diversity:g} after {fused_method}"
            else:
                name = (
                    f"mmr on fused scores (harness), diversity={diversity:g} after {fused_method}"
                )
            names.append(name)
            run.ranked[name], run.latency_ms[name] = [], []
            for _vector, fused, scores in zip(
                query_vectors, run.ranked[fused_method], run.fused_scores[fused_method], strict=True
            ):
                head = fused[: config.rerank_candidates]
                started = time.perf_counter()
                vectors = await store.vectors(space, head)
                if variant == "product":
                    relevance = dict(zip(head, scores[: len(head)], strict=True))
                    picked = [c for c, _ in mmr(relevance, vectors, len(head), diversity=diversity)]
                else:
                    picked = mmr_on_fused(head, scores[: len(head)], vectors, diversity)
                run.latency_ms[name].append((time.perf_counter() - started) * 1000)
                run.ranked[name].append(picked + fused[len(head) :])
    return names


def mmr_on_fused(
    head: Sequence[int], scores: Sequence[float], vectors: dict[int, np.ndarray], diversity: float
) -> list[int]:
    """MMR whose relevance is the fused score (min-max normalised), not the dense cosine: the
    lexical leg's evidence is kept while near-duplicate chunks are spread out."""
    relevance = np.asarray(scores, dtype=np.float64)
    spread = relevance.max() - relevance.min()
    relevance = (relevance - relevance.min()) / spread if spread > 0 else np.ones_like(relevance)
    matrix = np.stack([vectors[c] for c in head])
    similarity = matrix @ matrix.T
    picked: list[int] = []
    redundancy = np.zeros(len(head))
    for _ in head:
        value = (1 - diversity) * relevance - diversity * redundancy
        value[picked] = -np.inf
        best = int(np.argmax(value))
        picked.append(best)
        redundancy = np.maximum(redundancy, similarity[best])
    return [head[i] for i in picked]


async def check_search(run: Run, retrieval: Retrieval, fused_method: str) -> dict[str, int]:
    """Retrieval.search (top 10) against the harness's fusion of the product's default."""
    same = differ = 0
    for query, fused in zip(run.queries, run.ranked[fused_method], strict=True):
        if query.split != "test":
            continue
        result = await retrieval.search(TENANT, query.text, top_k=10, filters=Filters())
        product = metrics.documents([h.provenance.chunk_id for h in result.hits], run.document_of)
        harness = metrics.documents(fused[:10], run.document_of)
        if product == harness:
            same += 1
        else:
            differ += 1
    return {"same_top10_documents": same, "different": differ}


def ensure_reference_venv() -> Path:
    python = REFERENCE_VENV / "bin" / "python"
    digest = hashlib.sha256(REFERENCE_REQUIREMENTS.read_bytes()).hexdigest()
    stamp = REFERENCE_VENV / ".requirements.sha256"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    interpreter = shutil.which("python3.11")
    if interpreter is None:
        raise RuntimeError("python3.11 is not on PATH (the CPU torch wheel is for 3.11)")
    log(f"creating {REFERENCE_VENV.relative_to(ROOT)} from {REFERENCE_REQUIREMENTS.name}")
    shutil.rmtree(REFERENCE_VENV, ignore_errors=True)
    subprocess.run([interpreter, "-m", "venv", str(REFERENCE_VENV)], check=True)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(REFERENCE_REQUIREMENTS)],
        capture_output=True,
        text=True,
        check=False,
    )
    if install.returncode:
        raise RuntimeError(
            f"pip install -r {REFERENCE_REQUIREMENTS.name} failed:\n{install.stderr}"
        )
    stamp.write_text(digest + "\n")
    return python


def run_reference(
    indexed: Indexed, queries: Sequence[corpus.Query], threads: int
) -> tuple[dict[str, np.ndarray], bool]:
    """The yardsticks' output, and whether it came from the cache (same inputs, same venv)."""
    payload = json.dumps(
        {
            "embedding_texts": indexed.embedding_texts,
            "lexical_texts": indexed.lexical_texts,
            "queries": [q.text for q in queries],
            "depth": DEPTH,
        }
    )
    key = hashlib.sha256(
        payload.encode()
        + REFERENCE_REQUIREMENTS.read_bytes()
        + (HERE / "reference.py").read_bytes()
    ).hexdigest()[:24]
    cached = REFERENCE_CACHE / f"reference-{key}.npz"
    if cached.exists():
        with np.load(cached) as data:
            return dict(data), True
    python = ensure_reference_venv()
    REFERENCE_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentic-rag-quality-") as work:
        source, output = Path(work) / "input.json", Path(work) / "output.npz"
        source.write_text(payload)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
        }
        subprocess.run(
            [str(python), str(HERE / "reference.py"), str(source), str(output),
             "--threads", str(threads)],
            check=True,
            env=env,
        )  # fmt: skip
        shutil.copyfile(output, cached)
    with np.load(cached) as data:
        return dict(data), False


def git_commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return commit + ("+uncommitted changes" if dirty else "")


async def main(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    entries, queries = corpus.read_entries(), corpus.read_queries()
    log(f"reproducing {len(entries)} documents from this machine's man pages")
    documents = corpus.reproduce(entries)
    timings = {"corpus_s": time.perf_counter() - started}

    embedder = LocalEmbedder(threads=args.threads)
    config = RetrievalConfig()
    try:
        async with corpus_store(documents, embedder, args.keep) as (
            dsn,
            pool,
            store,
            indexed,
            space,
        ):
            timings |= indexed.timings
            run = Run(queries, indexed.document_of)
            log(f"{len(queries)} queries: dense, lexical, HNSW")
            t = time.perf_counter()
            query_vectors = await embedder.embed([q.text for q in queries])
            dense_lists, lexical_lists = await retrieve(run, store, space, query_vectors)
            hnsw_index = await retrieve_hnsw(run, dsn, space, query_vectors)
            timings["retrieve_s"] = time.perf_counter() - t
            run.ranked["dense, exact numpy over our vectors"] = exact_top(
                indexed.vectors, query_vectors, indexed.chunk_ids
            )
            log("the plain model (title + 150-word windows) and the dense options")
            t = time.perf_counter()
            dense_study = await plain.measure(
                run, documents, embedder, indexed.vectors, indexed.chunk_ids, query_vectors, DEPTH
            )
            timings["dense_study_s"] = time.perf_counter() - t
            fusions = fuse_all(run, dense_lists, lexical_lists)
            dense_weight = config.weights["dense"] / sum(config.weights.values())
            default = fusion_name(
                config.fusion,
                config.rrf_k if config.fusion == "rrf" else dense_weight,
                config.candidates,
            )
            chosen = report.best(run, fusions, "tuning")
            rerankers = await rerank_all(run, store, space, query_vectors, default, config)
            if chosen != default:
                rerankers += await rerank_all(run, store, space, query_vectors, chosen, config)
            log("Retrieval.search on the test half (the product's default configuration)")
            active = ActiveSpace(
                store, embedder, Settings.model_fields["chunk_overlap_tokens"].default
            )
            await active.open()  # the space indexed above
            retrieval = Retrieval(store, TrajectoryStore(pool), embedder, active, config)
            search_check = await check_search(run, retrieval, default)
            lexical_diagnosis, variant_lists = await lexical.measure(run, pool, TENANT, DEPTH)
            # The whole grid again over the recommended lexical variant: is the choice the same?
            grid = list(fusions)
            with_variant = {
                f: fuse_with(run, f, dense_lists, variant_lists[lexical.RECOMMENDED]) for f in grid
            }
            chosen_with_variant = report.best(run, list(with_variant.values()), "tuning")
            keep = {with_variant[chosen], with_variant[default], chosen_with_variant}
            for name in with_variant.values():
                if name in keep:
                    fusions.append(name)
                else:
                    del run.ranked[name]
    finally:
        await embedder.aclose()

    reference_note = None
    if args.no_reference:
        reference_note = "skipped (--no-reference)"
    else:
        log("yardsticks: fp32 sentence-transformers and bm25s (bench/.venv-quality-reference)")
        t = time.perf_counter()
        try:
            output, from_cache = run_reference(indexed, queries, args.threads)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            reference_note = f"not run: {exc}"
        else:
            timings["reference_s"] = time.perf_counter() - t
            timings["reference_embed_s"] = float(output["embed_seconds"])
            reference_note = "from the cache of an earlier run" if from_cache else "run now"
            ids = indexed.chunk_ids
            run.ranked["reference dense (fp32, exact)"] = exact_top(
                output["chunk_vectors"], output["query_vectors"], ids
            )
            for variant in ("bm25s", "bm25s k1=1.2"):
                run.ranked[variant] = [[ids[i] for i in row] for row in output[f"{variant}/ids"]]
            agreement = np.sum(indexed.vectors * output["chunk_vectors"], axis=1)
            timings["vector_cosine_ours_vs_fp32_mean"] = float(agreement.mean())
            timings["vector_cosine_ours_vs_fp32_min"] = float(agreement.min())
    timings["total_s"] = time.perf_counter() - started

    results = report.assemble(
        run,
        fusions=fusions,
        default=default,
        chosen=chosen,
        rerankers=rerankers,
        meta={
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(),
            "documents": indexed.documents,
            "chunks": len(indexed.chunk_ids),
            "queries": len(queries),
            "depth": DEPTH,
            "embedder_threads": args.threads,
            "reused_kept_database": bool(args.keep and not timings.get("embed_s")),
            "load_average_at_end": os.getloadavg()[0],
            "reference": reference_note,
            "search_check": search_check,
            "hnsw_plan_reads_the_index": hnsw_index,
            "chosen_fusion_with_recommended_lexical": chosen_with_variant,
            "timings": {k: round(v, 3) for k, v in timings.items()},
        },
        lexical_diagnosis=lexical_diagnosis,
        dense_study=dense_study,
    )
    (HERE / f"{args.output}.json").write_text(json.dumps(results, indent=1) + "\n")
    (HERE / f"{args.output}.md").write_text(report.markdown(results))
    log(f"wrote bench/quality/{args.output}.md and .json in {timings['total_s']:.0f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="embedder threads (default 2)")
    parser.add_argument("--no-reference", action="store_true", help="skip the yardsticks")
    parser.add_argument("--output", default="results", help="file stem under bench/quality/")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the database in this directory and reuse its corpus on the next run "
        "(for iterating on retrieval; embedding times then read 0)",
    )
    asyncio.run(main(parser.parse_args()))

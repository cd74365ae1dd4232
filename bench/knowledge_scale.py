"""The knowledge store at scale (issue 9, point 23): dense, lexical and hybrid latency, recall
against exact search, disk, memory and load time, at 100k and 1M chunks.

    .venv/bin/python bench/knowledge_scale.py --chunks 100000     # ~14 minutes
    .venv/bin/python bench/knowledge_scale.py --chunks 1000000    # ~30 minutes
    .venv/bin/python bench/knowledge_scale.py --quick             # 10k chunks, ~3 minutes

One embedded PostgreSQL (fresh, in /tmp, deleted after) holds two tenants: `all`, with N chunks
(the tenant that holds all of them), and `small`, with N/100 more (a tenant with 1% of the index,
the HNSW trap of KNOWLEDGE-NOTES). Each run merges its scale into
bench/results/knowledge-scale.json and rewrites knowledge-scale.md.

Data (see bench/README.md): chunk texts are real man-page chunks (the product's chunker over
`man -l` renderings) with variations; vectors are synthetic: a Gaussian mixture around real
all-MiniLM-L6-v2 embeddings of those chunks, with the covariance of the real embeddings.
Queries are real NAME lines of man pages, embedded with the product's LocalEmbedder.
"""

import argparse
import asyncio
import hashlib
import json
import math
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import knowledge_corpus as corpus

from agentic_rag.embedding.embedders import DIMENSION, MODEL_NAME, LocalEmbedder
from agentic_rag.knowledge import bm25
from agentic_rag.knowledge.chunking import Chunker, embedding_text
from agentic_rag.knowledge.documents import SECTION_SEPARATOR, ExtractedDocument
from agentic_rag.knowledge.retrieval import Retrieval, RetrievalConfig
from agentic_rag.knowledge.sources.markdown import markdown_sections
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.lexicon import lexemes
from agentic_rag.knowledge.store.search import (
    EXACT_SEARCH_MAX_CHUNKS,
    HNSW_EF_SEARCH,
    LEXICAL_CANDIDATES,
    LEXICAL_POSTINGS,
    Filters,
)
from agentic_rag.knowledge.store.spaces import Space
from agentic_rag.knowledge.trajectories import TrajectoryStore
from agentic_rag.storage.embedded import EmbeddedPostgres, postgres_processes
from agentic_rag.storage.postgres import connect

RESULTS = Path(__file__).resolve().parent / "results"
# Chunks each leg hands to the fusion in hybrid_retrieve.
LEXICAL_WIDTH = RetrievalConfig().candidates
UNLIMITED = 10**12
POOL_PAGES = 2600
POOL_CHUNKS = 2_000
TEXT_PAGES = 800
CHUNKS_PER_DOCUMENT = 10
DOCUMENTS_PER_SOURCE = 100
BLOCK = 50_000  # chunks generated and loaded at a time
TARGET_COSINE = 0.8  # median cosine of a synthetic vector to its real centre
MAINTENANCE_WORK_MEM = "3GB"
TARGETS = {
    "vector_p95_ms": 25.0,
    "recall_at_10": 0.95,
    "lexical_p95_ms": 50.0,
    "hybrid_p95_ms": 100.0,
}


# -- the pool of real chunks ------------------------------------------------------------------


@dataclass
class Pool:
    texts: list[str]  # chunks of TEXT_PAGES pages
    headings: list[list[str]]
    vectors: np.ndarray  # real embeddings of embedding_text(chunk) of the first rows
    pages: list[corpus.Page]
    page_ranges: list[tuple[int, int]]  # pool rows of each page's chunks
    queries: list[str]
    query_vectors: np.ndarray


async def build_pool(embedder: LocalEmbedder) -> Pool:
    """Chunks of TEXT_PAGES man pages (the product's chunker); the first POOL_CHUNKS of them are
    embedded (embedding is the slow part: ~10-50 chunks/s on these shared cores; cached)."""
    pages = corpus.pages(TEXT_PAGES)
    chunker = Chunker(embedder.count_tokens, embedder.max_tokens, 32)
    texts: list[str] = []
    headings: list[list[str]] = []
    inputs: list[str] = []
    ranges: list[tuple[int, int]] = []
    used: list[corpus.Page] = []
    for page in pages:
        chunks = chunker.chunk(markdown_sections(page.markdown))
        if len(inputs) < POOL_CHUNKS:
            ranges.append((len(texts), len(texts) + len(chunks)))
            used.append(page)
            inputs += [embedding_text(c) for c in chunks]
        texts += [c.text for c in chunks]
        headings += [list(c.heading_path) for c in chunks]
    digest = hashlib.sha256("\x00".join(inputs).encode()).hexdigest()[:16]
    cache = corpus.WORK / f"pool-{digest}.npy"
    if cache.exists():
        vectors = np.load(cache)
    else:
        print(f"embedding {len(inputs)} pool chunks (cached after)", flush=True)
        vectors = await embedder.embed(inputs)
        np.save(cache, vectors)
    queries = corpus.queries(pages, 300)
    query_vectors = await embedder.embed(queries)
    return Pool(texts, headings, vectors, used, ranges, queries, query_vectors)


class Synthesizer:
    """Chunks and vectors of the same distribution as the pool, as many as asked.

    A chunk copies a pool chunk's headings and a window of 70-100% of its words, then adds a
    fragment of another pool chunk (texts are drawn independently of vectors: only latency is
    measured here; bench/quality measures quality). A vector starts from a centre between one
    real embedding and another (weight 0.5-1 on the first, so that centres fill the space
    between real embeddings instead of repeating them), plus Gaussian noise with the real
    embeddings' covariance, scaled so that the median cosine to the centre is TARGET_COSINE;
    normalised.
    """

    def __init__(self, pool: Pool, seed: int) -> None:
        self.pool = pool
        self.rng = np.random.default_rng(seed)
        self.random = random.Random(seed)
        self.words = [t.split(" ") for t in pool.texts]
        centred = pool.vectors - pool.vectors.mean(axis=0)
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        self.shape = (s / math.sqrt(len(centred)))[:, None] * vt  # z @ shape ~ N(0, cov)
        self.scale = self._calibrate()

    def _noise(self, n: int) -> np.ndarray:
        return (self.rng.standard_normal((n, self.shape.shape[0])) @ self.shape).astype(np.float32)

    def _calibrate(self) -> float:
        centres = self.pool.vectors[self.rng.integers(len(self.pool.vectors), size=2000)]
        noise = self._noise(2000)
        low, high = 0.0, 5.0
        for _ in range(30):
            mid = (low + high) / 2
            v = centres + mid * noise
            cos = np.median((v * centres).sum(1) / np.linalg.norm(v, axis=1))
            low, high = (mid, high) if cos > TARGET_COSINE else (low, mid)
        return (low + high) / 2

    def vectors(self, centres: np.ndarray) -> np.ndarray:
        n = len(centres)
        weight = self.rng.uniform(0.5, 1.0, size=(n, 1)).astype(np.float32)
        others = self.pool.vectors[self.rng.integers(len(self.pool.vectors), size=n)]
        mixed = weight * self.pool.vectors[centres] + (1 - weight) * others
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        v = mixed + self.scale * self._noise(n)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def text(self, index: int) -> str:
        r = self.random
        words = self.words[index]
        n = len(words)
        keep = max(1, int(n * r.uniform(0.7, 1.0)))
        start = r.randrange(0, n - keep + 1)
        other = self.words[r.randrange(len(self.words))]
        k = min(len(other), r.randint(8, 20))
        o = r.randrange(0, len(other) - k + 1)
        return " ".join(words[start : start + keep]) + " " + " ".join(other[o : o + k])


# -- the server -------------------------------------------------------------------------------


def server_memory(pgdata: Path) -> dict[str, float]:
    """RSS and PSS (MiB) summed over the server's processes; PSS counts shared buffers once."""
    rss = pss = 0
    count = 0
    for pid, directory in postgres_processes().items():
        if directory != pgdata:
            continue
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
            count += 1
        except OSError:
            continue
    return {"processes": count, "rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1)}


async def timed(action: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await action
    return time.perf_counter() - started


# -- loading ----------------------------------------------------------------------------------


@dataclass
class Tenant:
    name: str
    ids: list[int]
    vectors: np.ndarray  # rows in the order of ids

    @property
    def size(self) -> int:
        return len(self.ids)


async def write_sample(
    store: KnowledgeStore,
    space: Space,
    pool: Pool,
    chunker: Chunker,
    tenant: str,
    documents: int,
) -> tuple[dict[str, Any], list[int], np.ndarray]:
    """Real pages written through `write_document` (with the HNSW index present, as the
    product does), with their real vectors; returns the timing, chunk ids and vectors."""
    chunker_ids: list[int] = []
    vectors: list[np.ndarray] = []
    elapsed = 0.0
    chunks_written = 0
    for index, (page, (lo, hi)) in enumerate(zip(pool.pages, pool.page_ranges, strict=True)):
        if index >= documents:
            break
        sections = markdown_sections(page.markdown)
        chunks = chunker.chunk(sections)
        assert len(chunks) == hi - lo
        source = await store.upsert_source(tenant, "text", page.name, page.name, {})
        document = ExtractedDocument(
            uri=page.name, title=page.name, mime_type="text/markdown", sections=sections
        )
        started = time.perf_counter()
        result = await store.write_document(
            tenant, source, document, chunks, pool.vectors[lo:hi], space
        )
        elapsed += time.perf_counter() - started
        chunks_written += result.chunks
        rows = await store._pool.fetch(
            "SELECT id FROM chunks WHERE tenant = $1 AND document_id = $2 ORDER BY position",
            tenant,
            result.document_id,
        )
        chunker_ids += [r["id"] for r in rows]
        vectors.append(pool.vectors[lo:hi])
    return (
        {
            "documents": documents,
            "chunks": chunks_written,
            "seconds": round(elapsed, 2),
            "chunks_per_second": round(chunks_written / elapsed, 1),
        },
        chunker_ids,
        np.concatenate(vectors),
    )


async def bulk_load(
    conn: asyncpg.Connection, space: Space, synth: Synthesizer, tenant: str, count: int
) -> tuple[list[int], np.ndarray, dict[str, float]]:
    """`count` synthetic chunks of `tenant` by COPY into the product's tables, with the tsv and
    term_count computed by write_document's own expressions."""
    ids: list[int] = []
    vectors = np.empty((count, DIMENSION), dtype=np.float32)
    spent = {"generate": 0.0, "copy_documents": 0.0, "insert_chunks": 0.0, "copy_vectors": 0.0}
    await conn.execute(
        "CREATE UNLOGGED TABLE IF NOT EXISTS bench_stage (document_id text, position int, "
        "text text, char_start int, char_end int, heading_path text[])"
    )
    documents_done = 0
    for start in range(0, count, BLOCK):
        n = min(BLOCK, count - start)
        t0 = time.perf_counter()
        centres = synth.rng.integers(len(synth.pool.vectors), size=n)
        block_vectors = synth.vectors(centres)
        vectors[start : start + n] = block_vectors
        sources, documents, stage = [], [], []
        for d0 in range(0, n, CHUNKS_PER_DOCUMENT):
            doc_index = documents_done + d0 // CHUNKS_PER_DOCUMENT
            doc_id = f"{tenant}-d{doc_index}"
            source_id = f"{tenant}-s{doc_index // DOCUMENTS_PER_SOURCE}"
            if doc_index % DOCUMENTS_PER_SOURCE == 0:
                sources.append((tenant, source_id, "text", source_id, source_id))
            texts, paths = [], []
            for _ in range(min(CHUNKS_PER_DOCUMENT, n - d0)):
                index = synth.random.randrange(len(synth.words))
                texts.append(synth.text(index))
                paths.append(synth.pool.headings[index])
            offset = 0
            for position, (text, path) in enumerate(zip(texts, paths, strict=True)):
                stage.append((doc_id, position, text, offset, offset + len(text), path))
                offset += len(text) + len(SECTION_SEPARATOR)
            full = SECTION_SEPARATOR.join(texts)
            documents.append(
                (
                    tenant,
                    doc_id,
                    source_id,
                    doc_id,
                    doc_id,
                    "text/markdown",
                    hashlib.sha256(full.encode()).digest(),
                    full,
                    len(texts),
                )
            )
        documents_done += math.ceil(n / CHUNKS_PER_DOCUMENT)
        t1 = time.perf_counter()
        spent["generate"] += t1 - t0
        async with conn.transaction():
            if sources:
                await conn.copy_records_to_table(
                    "knowledge_sources",
                    columns=["tenant", "id", "kind", "uri", "title"],
                    records=sources,
                )
            await conn.copy_records_to_table(
                "documents",
                columns=[
                    "tenant",
                    "id",
                    "source_id",
                    "uri",
                    "title",
                    "mime_type",
                    "content_hash",
                    "text",
                    "chunk_count",
                ],
                records=documents,
            )
            await conn.copy_records_to_table(
                "bench_stage",
                columns=[
                    "document_id",
                    "position",
                    "text",
                    "char_start",
                    "char_end",
                    "heading_path",
                ],
                records=stage,
            )
            t2 = time.perf_counter()
            spent["copy_documents"] += t2 - t1
            rows = await conn.fetch(
                "INSERT INTO chunks (tenant, document_id, position, text, char_start, char_end, "
                "heading_path, tsv, term_count) "
                "SELECT $1, c.document_id, c.position, c.text, c.char_start, c.char_end, "
                "c.heading_path, v.tsv, "
                "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(v.tsv) u) "
                "FROM bench_stage c CROSS JOIN LATERAL "
                f"(SELECT {lexemes("array_to_string(c.heading_path, ' ') || ' ' || c.text")} "
                "AS tsv) v "
                "RETURNING id, document_id, position",
                tenant,
            )
            await conn.execute("TRUNCATE bench_stage")
            t3 = time.perf_counter()
            spent["insert_chunks"] += t3 - t2
            first_doc = documents_done - math.ceil(n / CHUNKS_PER_DOCUMENT)
            by_row = {}
            for r in rows:
                row = (
                    int(r["document_id"].rsplit("-d", 1)[1]) - first_doc
                ) * CHUNKS_PER_DOCUMENT + r["position"]
                by_row[row] = r["id"]
            block_ids = [by_row[i] for i in range(n)]
            ids += block_ids
            await conn.copy_records_to_table(
                "chunk_embeddings",
                columns=["space", "chunk_id", "tenant", "embedding"],
                records=[
                    (space.id, i, tenant, v) for i, v in zip(block_ids, block_vectors, strict=True)
                ],
            )
            spent["copy_vectors"] += time.perf_counter() - t3
        print(f"  {tenant}: {start + n}/{count} chunks loaded", flush=True)
    return ids, vectors, {k: round(v, 1) for k, v in spent.items()}


async def drop_load_indexes(conn: asyncpg.Connection) -> dict[str, str]:
    """Drop the indexes a bulk load would otherwise keep up to date; return their definitions,
    to build them after it."""
    definitions = {
        r["indexname"]: r["indexdef"]
        for r in await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN "
            "('chunks_lexical_keys', 'chunk_embeddings_by_tenant') "
            "OR indexname LIKE 'chunk_embeddings_hnsw_%'"
        )
    }
    for name in definitions:
        await conn.execute(f"DROP INDEX {name}")
    return definitions


async def rebuild_lexicon(conn: asyncpg.Connection) -> None:
    """The lexicon and its totals exactly as write_document's _learn_terms sums them."""
    async with conn.transaction():
        await conn.execute("SET LOCAL work_mem = '1GB'")
        await conn.execute("TRUNCATE lexicon, lexicon_totals")
        await conn.execute(
            "INSERT INTO lexicon (tenant, lexeme, df) SELECT c.tenant, u.lexeme, count(*) "
            "FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u GROUP BY c.tenant, u.lexeme"
        )
        await conn.execute(
            "INSERT INTO lexicon_totals (tenant, chunks, terms) "
            "SELECT tenant, count(*), coalesce(sum(term_count), 0) FROM chunks GROUP BY tenant"
        )


# -- measuring --------------------------------------------------------------------------------


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]

    return {
        "n": len(ordered),
        "p50_ms": round(at(0.50) * 1000, 2),
        "p95_ms": round(at(0.95) * 1000, 2),
        "p99_ms": round(at(0.99) * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


def exact_top(tenant: Tenant, query: np.ndarray, k: int) -> list[int]:
    scores = tenant.vectors @ query
    top = np.argpartition(-scores, k)[:k]
    top = top[np.argsort(-scores[top])]
    return [tenant.ids[i] for i in top]


async def measure(
    queries: Sequence[Any], call: Callable[[Any], Awaitable[Any]], warmup: int = 10
) -> tuple[dict[str, float], list[Any]]:
    for q in queries[:warmup]:
        await call(q)
    times, results = [], []
    for q in queries:
        started = time.perf_counter()
        results.append(await call(q))
        times.append(time.perf_counter() - started)
    return percentiles(times), results


def recall(
    results: Sequence[Sequence[tuple[int, float]]], truth: Sequence[list[int]], k: int = 10
) -> float:
    return round(
        statistics.fmean(
            len({c for c, _ in r[:k]} & set(t[:k])) / k for r, t in zip(results, truth, strict=True)
        ),
        4,
    )


async def forced_hnsw(
    pool: asyncpg.Pool, space: Space, tenant: str, query: np.ndarray, limit: int, ef: int, mode: str
) -> list[tuple[int, float]]:
    """The product's HNSW query (store.dense's non-exact branch) whatever the tenant's size."""
    distance = f"e.embedding::{space.vector_type} <=> $2::{space.vector_type}"
    approximate = f"e.embedding::{space.index_type} <=> $2::{space.vector_type}::{space.index_type}"
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL hnsw.ef_search = {max(ef, limit)}")
        await conn.execute(f"SET LOCAL hnsw.iterative_scan = {mode}")
        rows = await conn.fetch(
            f"SELECT e.chunk_id, {distance} AS distance FROM chunk_embeddings e "
            f"WHERE e.space = {space.id} AND e.tenant = $1 ORDER BY {approximate} LIMIT $3",
            tenant,
            query,
            limit,
        )
    return sorted(((r["chunk_id"], 1 - float(r["distance"])) for r in rows), key=lambda h: -h[1])


async def exact_sql(
    pool: asyncpg.Pool, space: Space, tenant: str, query: np.ndarray, limit: int, cast: bool = True
) -> list[tuple[int, float]]:
    """The product's exact query (store.dense's exact branch) whatever the tenant's size;
    `cast=False`: without the cast to vector(384) on every row (only the index needs it)."""
    distance = f"e.embedding::{space.vector_type} <=> $3" if cast else "e.embedding <=> $3"
    rows = await pool.fetch(
        "WITH candidates AS MATERIALIZED (SELECT e.chunk_id, "
        f"{distance} AS distance FROM chunk_embeddings e WHERE e.space = $1 AND e.tenant = $2) "
        "SELECT chunk_id, distance FROM candidates ORDER BY distance LIMIT $4",
        space.id,
        tenant,
        query,
        limit,
    )
    return [(r["chunk_id"], 1 - float(r["distance"])) for r in rows]


async def explain(pool: asyncpg.Pool, sql: str, *args: Any, settings: Sequence[str] = ()) -> str:
    async with pool.acquire() as conn, conn.transaction():
        for s in settings:
            await conn.execute(s)
        rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *args)
    return "\n".join(r[0] for r in rows)


async def lexical_unbounded(
    pool: asyncpg.Pool, tenant: str, query: str, limit: int
) -> list[tuple[int, float]]:
    """The reference: BM25 over every chunk of the tenant holding a query term (a scan of the
    tenant's chunks, no plan, no budget), with the lexicon's IDF, as the store scores."""
    async with pool.acquire() as conn:
        found = await conn.fetch(
            "SELECT q.lexeme, coalesce(l.df, 0) AS df "
            f"FROM unnest({lexemes('$2')}) q "
            "LEFT JOIN lexicon l ON l.tenant = $1 AND l.lexeme = q.lexeme",
            tenant,
            query,
        )
        totals = await conn.fetchrow(
            "SELECT chunks, terms FROM lexicon_totals WHERE tenant = $1", tenant
        )
        terms = bm25.query_terms(((r["lexeme"], r["df"]) for r in found), totals["chunks"])
        if not terms:
            return []
        average = totals["terms"] / totals["chunks"]
        rows = await conn.fetch(
            "SELECT c.id, c.term_count, "
            "ts_filter(setweight(c.tsv, 'A', $2::text[]), '{a}')::text AS terms "
            "FROM chunks c WHERE c.tenant = $1 AND c.tsv @@ $3::tsquery",
            tenant,
            [t.lexeme for t in terms],
            " | ".join("'" + t.lexeme.replace("'", "''") + "'" for t in terms),
        )
    scorer = bm25.Scorer({t.lexeme: t.idf for t in terms}, average)
    scored = [(r["id"], scorer(r["terms"], r["term_count"])) for r in rows]
    return sorted(scored, key=lambda hit: (-hit[1], hit[0]))[:limit]


async def run_queries(
    pool: asyncpg.Pool,
    store: KnowledgeStore,
    space: Space,
    retrieval: Retrieval,
    tenant: Tenant,
    texts: list[str],
    vectors: np.ndarray,
    n_dense: int,
    n_lexical: int,
    n_hybrid: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {"chunks": tenant.size}
    none = Filters()
    qv = list(vectors[:n_dense])
    truth = [exact_top(tenant, q, 10) for q in qv]
    exact_path = tenant.size <= EXACT_SEARCH_MAX_CHUNKS
    out["dense_path"] = (
        "exact (tenant <= EXACT_SEARCH_MAX_CHUNKS)"
        if exact_path
        else "hnsw, iterative_scan=relaxed_order"
    )
    dense: dict[str, Any] = {}
    for limit in (50, 10):
        stats, results = await measure(
            qv, lambda q, limit=limit: store.dense(tenant.name, space, q, limit, none)
        )
        dense[f"limit{limit}_default"] = {**stats, "recall_at_10": recall(results, truth)}
    if not exact_path:
        for ef in (HNSW_EF_SEARCH // 4, HNSW_EF_SEARCH // 2, HNSW_EF_SEARCH * 2):
            stats, results = await measure(
                qv, lambda q, ef=ef: store.dense(tenant.name, space, q, 50, none, ef_search=ef)
            )
            dense[f"limit50_ef{ef}"] = {**stats, "recall_at_10": recall(results, truth)}
    else:
        # What the HNSW path would do for this tenant (were it above the threshold).
        for ef, mode in ((100, "relaxed_order"), (100, "strict_order"), (100, "off")):
            stats, results = await measure(
                qv,
                lambda q, ef=ef, mode=mode: forced_hnsw(pool, space, tenant.name, q, 50, ef, mode),
            )
            dense[f"variant_hnsw_{mode}_limit50_ef{ef}"] = {
                **stats,
                "recall_at_10": recall(results, truth),
            }
    few = qv if exact_path else qv[:20]
    for cast in (True, False):
        stats, results = await measure(
            few, lambda q, c=cast: exact_sql(pool, space, tenant.name, q, 50, cast=c), warmup=2
        )
        name = "variant_exact_sql_limit50" + ("" if cast else "_without_cast")
        dense[name] = {**stats, "recall_at_10": recall(results, truth[: len(few)])}
    out["dense"] = dense

    lexical: dict[str, Any] = {}
    lq = texts[:n_lexical]
    # The reference scores every chunk that has a query term: slow, so fewer queries.
    full_n = 40 if tenant.size <= 200_000 else 20
    stats, full = await measure(
        lq[:full_n], lambda q: lexical_unbounded(pool, tenant.name, q, LEXICAL_WIDTH), warmup=0
    )
    lexical["unbounded"] = stats

    def agreement(results: list[list[tuple[int, float]]], depth: int) -> float:
        """Share of the reference's top `depth` found in the top `depth`."""
        return round(
            statistics.fmean(
                len({c for c, _ in a[:depth]} & {c for c, _ in b[:depth]})
                / max(1, min(depth, len(b)))
                for a, b in zip(results[:full_n], full, strict=True)
            ),
            4,
        )

    def score_ratio(results: list[list[tuple[int, float]]]) -> float:
        """Sum of the top 10's BM25 scores over the reference's: 1.0 when the top 10 is as
        good, whichever of several equal-scoring chunks it holds."""
        return round(
            statistics.fmean(
                sum(s for _, s in a[:10]) / sum(s for _, s in b[:10]) if b else 1.0
                for a, b in zip(results[:full_n], full, strict=True)
            ),
            4,
        )

    # The defaults first (the coldest pass), then the budgets around them; "unlimited postings"
    # is the plan without bm25.affordable, as before it (with 750 chunks: the old defaults).
    variants = [(LEXICAL_CANDIDATES, LEXICAL_POSTINGS, "default")]
    variants += [(b, LEXICAL_POSTINGS, "") for b in (1000, 3000)]
    variants += [(b, UNLIMITED, "unlimited_postings") for b in (750, LEXICAL_CANDIDATES)]
    for budget, postings, label in variants:
        stats, results = await measure(
            lq,
            lambda q, b=budget, p=postings: store.lexical(
                tenant.name, q, LEXICAL_WIDTH, none, budget=b, postings=p
            ),
        )
        name = f"budget{budget}" + (f"_{label}" if label else "")
        lexical[name] = {
            **stats,
            "agreement_at_10_with_unbounded": agreement(results, 10),
            "agreement_at_30_with_unbounded": agreement(results, 30),
            "score_ratio_at_10": score_ratio(results),
        }
    out["lexical"] = lexical

    hybrid: dict[str, Any] = {}
    hq = texts[:n_hybrid]
    for name, kwargs in (
        ("vector_search", {"retrievers": ("dense",)}),
        ("hybrid", {}),
        ("hybrid_answer", {"answer": True}),
    ):
        stats, _ = await measure(
            hq, lambda q, kw=kwargs: retrieval.search(tenant.name, q, top_k=10, filters=none, **kw)
        )
        hybrid[name] = stats
    rows = await pool.fetch(
        "SELECT trace->'timings_ms' AS t FROM retrievals WHERE tenant = $1 "
        "ORDER BY created_at DESC LIMIT $2",
        tenant.name,
        n_hybrid,
    )
    stages: dict[str, list[float]] = {}
    for r in rows:
        for stage, ms in json.loads(r["t"]).items():
            stages.setdefault(stage, []).append(ms)
    hybrid["hybrid_answer_stage_median_ms"] = {
        s: round(statistics.median(v), 2) for s, v in stages.items()
    }
    out["retrieval"] = hybrid
    return out


# -- the run ----------------------------------------------------------------------------------


async def run(chunks: int, n_queries: int) -> dict[str, Any]:
    embedder = LocalEmbedder()
    await embedder.start()
    pool_data = await build_pool(embedder)
    print(
        f"{len(pool_data.texts)} real chunks of {TEXT_PAGES} man pages, "
        f"{len(pool_data.vectors)} embedded; {len(pool_data.queries)} queries",
        flush=True,
    )
    small_chunks = max(100, chunks // 100)
    root = Path(tempfile.mkdtemp(prefix="knowledge-scale-"))
    server = EmbeddedPostgres(root)
    result: dict[str, Any] = {"chunks": chunks}
    try:
        dsn = server.start()
        admin = await asyncpg.connect(dsn)
        await admin.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        await admin.execute("SELECT pg_reload_conf()")
        settings = {
            r["name"]: r["value"]
            for r in await admin.fetch(
                "SELECT name, current_setting(name) AS value FROM pg_settings WHERE name IN "
                "('shared_buffers', "
                "'work_mem', 'maintenance_work_mem', 'max_parallel_maintenance_workers', "
                "'effective_cache_size', 'max_parallel_workers_per_gather')"
            )
        }
        result["server"] = {
            "postgres": await admin.fetchval("SHOW server_version"),
            "pgvector": await admin.fetchval(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            ),
            "settings": settings,
        }
        await admin.close()
        pool = await connect(dsn, size=4)
        store = KnowledgeStore(pool)
        space = await store.open_space(MODEL_NAME, DIMENSION)
        load: dict[str, Any] = {}

        sample_docs = 20 if chunks <= 10_000 else 100
        load["write_document_sample"], sample_ids, sample_vectors = await write_sample(
            store,
            space,
            pool_data,
            Chunker(embedder.count_tokens, embedder.max_tokens, 32),
            "all",
            sample_docs,
        )
        print(f"write_document sample: {load['write_document_sample']}", flush=True)

        synth = Synthesizer(pool_data, seed=chunks)
        result["data"] = {
            "text_chunks": len(pool_data.texts),
            "text_pages": TEXT_PAGES,
            "embedded_chunks": len(pool_data.vectors),
            "embedded_pages": len(pool_data.pages),
            "queries": len(pool_data.queries),
            "noise_scale": round(synth.scale, 4),
            "target_median_cosine_to_centre": TARGET_COSINE,
        }
        async with pool.acquire() as conn:
            definitions = await drop_load_indexes(conn)
            started = time.perf_counter()
            all_ids, all_vectors, spent_all = await bulk_load(
                conn, space, synth, "all", chunks - len(sample_ids)
            )
            small_ids, small_vectors, spent_small = await bulk_load(
                conn, space, synth, "small", small_chunks
            )
            load["bulk_copy_seconds"] = round(time.perf_counter() - started, 1)
            load["bulk_copy_parts_seconds"] = {
                k: round(spent_all[k] + spent_small[k], 1) for k in spent_all
            }
            load["lexicon_seconds"] = round(await timed(rebuild_lexicon(conn)), 1)
            builds = {}
            for name, definition in sorted(definitions.items(), key=lambda kv: "hnsw" in kv[0]):
                print(f"building {name}", flush=True)
                builds[name] = round(await timed(conn.execute(definition)), 1)
            load["index_build_seconds"] = builds
            load["index_definitions"] = definitions
            load["vacuum_analyze_seconds"] = round(await timed(conn.execute("VACUUM ANALYZE")), 1)
            await conn.execute("DROP TABLE bench_stage")
            hnsw_name = next(n for n in definitions if "hnsw" in n)
            if chunks <= 200_000:
                # The product's way: the index exists from open_space and every insert updates it.
                await conn.execute(
                    "CREATE UNLOGGED TABLE bench_incremental (LIKE chunk_embeddings)"
                )
                await conn.execute(
                    definitions[hnsw_name].replace(
                        f"INDEX {hnsw_name} ON public.chunk_embeddings",
                        "INDEX bench_incremental_hnsw ON bench_incremental",
                    )
                )
                incremental = await timed(
                    conn.execute("INSERT INTO bench_incremental SELECT * FROM chunk_embeddings")
                )
                await conn.execute("DROP TABLE bench_incremental")
                load["hnsw_incremental_insert_seconds"] = round(incremental, 1)
                load["hnsw_incremental_note"] = (
                    "the same rows inserted into an unlogged copy of chunk_embeddings whose "
                    "HNSW index exists before the insert (as after open_space); compare with "
                    "index_build_seconds"
                )
        load["total_seconds"] = round(
            load["bulk_copy_seconds"]
            + load["lexicon_seconds"]
            + sum(builds.values())
            + load["vacuum_analyze_seconds"],
            1,
        )
        result["load"] = load
        tenants = {
            "all": Tenant(
                "all", sample_ids + all_ids, np.concatenate([sample_vectors, all_vectors])
            ),
            "small": Tenant("small", small_ids, small_vectors),
        }
        del all_vectors
        assert await store.chunk_count("all") == tenants["all"].size, (
            "lexicon_totals disagree with the load"
        )
        retrieval = Retrieval(store, TrajectoryStore(pool), embedder, space, RetrievalConfig())
        queries = pool_data.queries
        scenarios = {}
        for name, tenant in tenants.items():
            print(f"measuring tenant {name} ({tenant.size} chunks)", flush=True)
            scenarios[name] = await run_queries(
                pool,
                store,
                space,
                retrieval,
                tenant,
                queries,
                pool_data.query_vectors,
                n_queries,
                n_queries,
                max(50, n_queries // 2),
            )
        result["tenants"] = scenarios
        sizes = await pool.fetch(
            "SELECT c.relname AS name, c.relkind::text AS kind, pg_relation_size(c.oid) AS bytes, "
            "pg_total_relation_size(c.oid) AS total FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i') "
            "ORDER BY pg_relation_size(c.oid) DESC"
        )
        total_rows = chunks + small_chunks
        per_million = 1_000_000 / total_rows
        result["disk"] = {
            "database_bytes": await pool.fetchval("SELECT pg_database_size(current_database())"),
            "rows_in_index": total_rows,
            "tables": {
                r["name"]: {"heap_bytes": r["bytes"], "total_bytes": r["total"]}
                for r in sizes
                if r["kind"] == "r" and r["total"] > 1 << 20
            },
            "indexes": {
                r["name"]: r["bytes"] for r in sizes if r["kind"] == "i" and r["bytes"] > 1 << 20
            },
        }
        db = result["disk"]["database_bytes"]
        result["disk"]["database_gib_per_million_chunks"] = round(db * per_million / 2**30, 2)
        result["memory"] = server_memory(server.pgdata)
        result["memory"]["note"] = (
            "after the queries; PSS counts shared memory (shared_buffers) once"
        )
        result["targets"] = targets(result)
        await pool.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        await embedder.aclose()
    return result


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    checks = []
    for name, t in result["tenants"].items():
        d = t["dense"]["limit50_default"]
        checks.append(
            {
                "tenant": name,
                "target": "dense (store.dense, limit 50 as vector_search asks) p95 <= 25 ms "
                "and recall@10 >= 0.95",
                "measured": f"p95 {d['p95_ms']} ms, recall@10 {d['recall_at_10']}",
                "pass": d["p95_ms"] <= TARGETS["vector_p95_ms"]
                and d["recall_at_10"] >= TARGETS["recall_at_10"],
            }
        )
        lex = t["lexical"][f"budget{LEXICAL_CANDIDATES}_default"]
        checks.append(
            {
                "tenant": name,
                "target": f"lexical (store.lexical, limit {LEXICAL_WIDTH} as hybrid asks) "
                "p95 <= 50 ms",
                "measured": f"p95 {lex['p95_ms']} ms",
                "pass": lex["p95_ms"] <= TARGETS["lexical_p95_ms"],
            }
        )
        h = t["retrieval"]["hybrid"]
        checks.append(
            {
                "tenant": name,
                "target": "hybrid_retrieve (Retrieval.search, answer off) p95 <= 100 ms",
                "measured": f"p95 {h['p95_ms']} ms",
                "pass": h["p95_ms"] <= TARGETS["hybrid_p95_ms"],
            }
        )
    return checks


# -- report -----------------------------------------------------------------------------------


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _latency_rows(label: str, stats: dict[str, Any], note: str = "") -> str:
    return _row(label, stats["n"], stats["p50_ms"], stats["p95_ms"], stats["p99_ms"], note)


def render_run(key: str, r: dict[str, Any]) -> list[str]:
    out = ["", f"## {int(key):,} chunks", ""]
    out.append(
        f"Run {r['date']} UTC on {r['machine']}, {r['seconds']} s; load average before "
        f"{r['load_average']} (other benchmarks share these cores)."
    )
    out += ["", "### Targets", "", _row("tenant", "target", "measured", "result")]
    out.append(_row(*["---"] * 4))
    for c in r["targets"]:
        out.append(_row(c["tenant"], c["target"], c["measured"], "PASS" if c["pass"] else "FAIL"))
    for name, t in r["tenants"].items():
        out += [
            "",
            f"### Tenant `{name}`: {t['chunks']:,} chunks, dense path {t['dense_path']}",
            "",
        ]
        out.append(_row("measure (ms)", "n", "p50", "p95", "p99", "recall@10 / note"))
        out.append(_row(*["---"] * 6))
        for k, v in t["dense"].items():
            out.append(_latency_rows(f"dense {k}", v, f"recall@10 {v['recall_at_10']}"))
        for k, v in t["lexical"].items():
            if not isinstance(v, dict):  # an EXPLAIN kept by earlier runs
                continue
            note = (
                ""
                if "score_ratio_at_10" not in v
                else f"agreement with unbounded BM25: top 10 {v['agreement_at_10_with_unbounded']}"
                f", top 30 {v['agreement_at_30_with_unbounded']}; "
                f"score ratio at 10 {v['score_ratio_at_10']}"
            )
            out.append(_latency_rows(f"lexical {k}", v, note))
        for k, v in t["retrieval"].items():
            if not k.endswith("stage_median_ms"):
                out.append(_latency_rows(f"Retrieval.search {k}", v))
        stages = t["retrieval"]["hybrid_answer_stage_median_ms"]
        listed = ", ".join(f"{s} {v}" for s, v in stages.items())
        out += ["", f"Stages of `hybrid_answer`, median ms: {listed}."]
    load, d, m = r["load"], r["disk"], r["memory"]
    w = load["write_document_sample"]
    out += ["", "### Load", ""]
    out.append(
        f"- `write_document` (real pages, HNSW index present): {w['chunks']} chunks in "
        f"{w['seconds']} s = {w['chunks_per_second']} chunks/s"
    )
    out.append(
        f"- bulk COPY: {load['bulk_copy_seconds']} s (parts: {load['bulk_copy_parts_seconds']})"
    )
    out.append(f"- lexicon from the chunks: {load['lexicon_seconds']} s")
    out.append(f"- index builds after the load (s): {load['index_build_seconds']}")
    out.append(
        f"- VACUUM ANALYZE: {load['vacuum_analyze_seconds']} s; total {load['total_seconds']} s"
    )
    if "hnsw_incremental_insert_seconds" in load:
        out.append(
            "- the same vectors inserted into a table whose HNSW index already exists (the "
            f"product's way): {load['hnsw_incremental_insert_seconds']} s"
        )
    out += ["", "### Disk and memory", ""]
    out.append(
        f"- database {d['database_bytes'] / 2**30:.2f} GiB for {d['rows_in_index']:,} chunks: "
        f"**{d['database_gib_per_million_chunks']} GiB per million chunks**"
    )
    for name, t in d["tables"].items():
        heap, total = t["heap_bytes"] / 2**20, t["total_bytes"] / 2**20
        out.append(f"- table {name}: heap {heap:.0f} MiB, with TOAST and indexes {total:.0f} MiB")
    for name, size in d["indexes"].items():
        out.append(f"- index {name}: {size / 2**20:.0f} MiB")
    if "note" in d:
        out.append(f"- note: {d['note']}")
    out.append(
        f"- server: {m['processes']} processes, RSS {m['rss_mib']} MiB, PSS {m['pss_mib']} MiB "
        f"({m['note']})"
    )
    out.append(f"- server settings: {r['server']}")
    return out


def render(all_results: dict[str, Any]) -> str:
    out = ["# Knowledge store at scale (issue 9, point 23)", ""]
    out.append(
        "`bench/knowledge_scale.py` (bench/README.md says how). **Synthetic vectors**: each a "
        "centre between two real all-MiniLM-L6-v2 embeddings of man-page chunks (weight 0.5-1 on "
        "the first) plus Gaussian noise with the real embeddings' covariance (median cosine 0.8 "
        "to the centre). Chunk texts: real man-page chunks with variations. Queries: real "
        "man-page NAME lines (3-8 words) embedded with the product's LocalEmbedder. One client, "
        "sequential; latencies in ms. Tenant `all` holds N chunks, tenant `small` N/100 more "
        "(1% of the index)."
    )
    for key in sorted(all_results["runs"], key=int):
        out += render_run(key, all_results["runs"][key])
    findings = RESULTS / "knowledge-scale-findings.md"
    if findings.exists():
        out += ["", findings.read_text().strip()]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10k chunks, fewer queries")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--output", default="knowledge-scale")
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = parser.parse_args()
    if args.render:
        existing = json.loads((RESULTS / f"{args.output}.json").read_text())
        (RESULTS / f"{args.output}.md").write_text(render(existing))
        return
    chunks = 10_000 if args.quick else args.chunks
    n_queries = 60 if args.quick else args.queries
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    started = time.time()
    result = asyncio.run(run(chunks, n_queries))
    result.update(
        date=time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
        load_average=load_before,
        seconds=round(time.time() - started),
        machine=f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores",
    )
    path = RESULTS / f"{args.output}.json"
    existing = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    existing["runs"][str(chunks)] = result
    path.write_text(json.dumps(existing, indent=1, default=str) + "\n")
    (RESULTS / f"{args.output}.md").write_text(render(existing))
    for c in result["targets"]:
        print(
            ("PASS " if c["pass"] else "FAIL ") + f"{c['tenant']}: {c['target']}: {c['measured']}"
        )


if __name__ == "__main__":
    main()

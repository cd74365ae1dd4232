"""The HNSW index at a million chunks: recall@10 and latency per graph (m, ef_construction),
precision (vector or halfvec), ef_search and shared_buffers; and how hard the synthetic vectors
are next to real ones. The measurements behind store.py's HNSW_* constants and the embedded
server's shared_buffers (bench/results/knowledge-hnsw.md).

    .venv/bin/python bench/knowledge_hnsw.py hardness                  # ~3 minutes
    .venv/bin/python bench/knowledge_hnsw.py index half16 --ef 100,200,400,800
    .venv/bin/python bench/knowledge_hnsw.py index half24 --ef 200,300,400 --shared-buffers 160

`index` keeps one embedded PostgreSQL in /tmp/knowledge-hnsw (stopped after each run; delete
it when done) holding 1M synthetic vectors of bench/knowledge_scale.py's generator in a bare
table (id, tenant, embedding), and builds each index once (8-20 minutes on 2 cores). Queries
are knowledge_scale.py's (real man-page NAME lines), written as store.dense writes them for a
large tenant (tenant filter, iterative relaxed_order scan, LIMIT 50); recall@10 is against
exact search in numpy.
"""

import argparse
import asyncio
import sys
import time
from pathlib import Path

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parent))
import knowledge_scale as scale
from knowledge_scale import corpus

from agentic_rag.embedding.embedders import LocalEmbedder
from agentic_rag.knowledge.chunking import Chunker, embedding_text
from agentic_rag.knowledge.sources.markdown import markdown_sections
from agentic_rag.storage.embedded import EmbeddedPostgres

N = 1_000_000
QUERIES = 200
ROOT = Path("/tmp/knowledge-hnsw")
DATA = corpus.WORK / "hnsw"

INDEXES = {  # name: (storage cast, operator class, WITH)
    "vec16": ("vector(384)", "vector_cosine_ops", ""),
    "half16": ("halfvec(384)", "halfvec_cosine_ops", ""),
    "half24": ("halfvec(384)", "halfvec_cosine_ops", "WITH (m = 24, ef_construction = 128)"),
    "half32": ("halfvec(384)", "halfvec_cosine_ops", "WITH (m = 32, ef_construction = 128)"),
}


async def load(conn: asyncpg.Connection, pool: scale.Pool) -> None:
    synth = scale.Synthesizer(pool, 1)
    await conn.execute("CREATE TABLE e (id int, tenant text, embedding vector)")
    vectors = np.empty((N, 384), np.float32)
    started = time.perf_counter()
    for start in range(0, N, scale.BLOCK):
        block = synth.vectors(synth.rng.integers(len(pool.vectors), size=scale.BLOCK))
        vectors[start : start + scale.BLOCK] = block
        await conn.copy_records_to_table(
            "e",
            columns=["id", "tenant", "embedding"],
            records=[(start + i, "all", v) for i, v in enumerate(block)],
        )
    np.save(DATA / "vectors.npy", vectors)
    await conn.execute("VACUUM ANALYZE e")
    print(f"loaded {N} vectors in {time.perf_counter() - started:.0f} s", flush=True)


def exact_top10(queries: np.ndarray) -> np.ndarray:
    path = DATA / "exact-top10.npy"
    if not path.exists():
        vectors = np.load(DATA / "vectors.npy", mmap_mode="r")
        step = 100_000
        sims = np.concatenate([queries @ vectors[s : s + step].T for s in range(0, N, step)], 1)
        np.save(path, np.argsort(-sims, axis=1)[:, :10])
    return np.load(path)


async def index(name: str, efs: list[int], shared_buffers_mb: int | None) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    embedder = LocalEmbedder()
    await embedder.start()
    pool = await scale.build_pool(embedder)
    queries = pool.query_vectors[:QUERIES].astype(np.float32)
    server = EmbeddedPostgres(ROOT, shared_buffers_mb=shared_buffers_mb)
    try:
        conn = await asyncpg.connect(server.start())
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await register_vector(conn)
        await conn.execute("SET maintenance_work_mem = '6GB'")
        if not await conn.fetchval("SELECT to_regclass('e') IS NOT NULL"):
            await load(conn, pool)
        truth = exact_top10(queries)
        print("shared_buffers", await conn.fetchval("SHOW shared_buffers"), flush=True)
        cast, opclass, options = INDEXES[name]
        index_name = f"e_{name}"
        for other in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'e' AND indexname <> $1",
            index_name,
        ):  # one index at a time: two over the same expression would compete
            await conn.execute(f"DROP INDEX {other['indexname']}")
        if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", index_name):
            started = time.perf_counter()
            await conn.execute(
                f"CREATE INDEX {index_name} ON e USING hnsw ((embedding::{cast}) {opclass}) "
                f"{options}"
            )
            size = await conn.fetchval(
                "SELECT pg_size_pretty(pg_relation_size($1::regclass))", index_name
            )
            print(f"{name}: built in {time.perf_counter() - started:.0f} s, {size}", flush=True)
        distance = f"embedding::{cast} <=> $1::vector(384)::{cast}"
        sql = f"SELECT id, {distance} AS d FROM e WHERE tenant = $2 ORDER BY {distance} LIMIT 50"
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, queries[0], "all"))
        assert index_name in plan, plan
        for ef in efs:
            latencies, recalls = [], []
            for measured in (False, True):  # a pass to warm the caches, then the measured one
                for query, exact in zip(queries, truth, strict=True):
                    async with conn.transaction():
                        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                        await conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                        started = time.perf_counter()
                        rows = await conn.fetch(sql, query, "all")
                        elapsed = (time.perf_counter() - started) * 1000
                    if measured:
                        latencies.append(elapsed)
                        top = {r["id"] for r in sorted(rows, key=lambda r: r["d"])[:10]}
                        recalls.append(len(top & set(exact.tolist())) / 10)
            print(
                f"{name} ef_search {ef}: recall@10 {np.mean(recalls):.4f} "
                f"p50 {np.percentile(latencies, 50):.1f} p95 {np.percentile(latencies, 95):.1f} ms",
                flush=True,
            )
        await conn.close()
    finally:
        server.stop()


async def hardness(real_chunks: int) -> None:
    """Local intrinsic dimensionality (MLE, k=20) and relative contrast of the queries'
    neighbourhoods among real chunk embeddings (man pages outside the generator's pool) and
    among as many synthetic vectors, for several noise levels: the harder, the higher the LID
    and the lower the contrast (Aumüller and Ceccarello, 2019)."""
    embedder = LocalEmbedder()
    await embedder.start()
    pool = await scale.build_pool(embedder)
    chunker = Chunker(embedder.count_tokens, embedder.max_tokens, 32)
    inputs: list[str] = []
    for page in corpus.pages(3000)[len(pool.pages) :]:
        inputs += [embedding_text(c) for c in chunker.chunk(markdown_sections(page.markdown))]
        if len(inputs) >= real_chunks:
            break
    cache = corpus.WORK / f"real-{real_chunks}.npy"
    if cache.exists():
        real = np.load(cache)
    else:
        real = await embedder.embed(inputs[:real_chunks])
        np.save(cache, real)

    def measure(label: str, vectors: np.ndarray, k: int = 20) -> None:
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        distances = np.sort(np.sqrt(np.maximum(2 - 2 * pool.query_vectors @ vectors.T, 1e-12)))
        nearest = distances[:, :k]
        lid = -1.0 / np.mean(np.log(nearest[:, :-1] / nearest[:, -1:]), axis=1)
        contrast = distances.mean(1) / distances[:, 9]
        print(
            f"{label:34s} n {len(vectors):5d}  LID@20 median {np.median(lid):5.1f}  "
            f"relative contrast@10 median {np.median(contrast):.3f}",
            flush=True,
        )

    measure("real man-page chunks", real)
    for cosine in (0.8, 0.9, 0.95):
        scale.TARGET_COSINE = cosine
        synth = scale.Synthesizer(pool, 1)
        measure(
            f"synthetic, median cosine {cosine}",
            synth.vectors(synth.rng.integers(len(pool.vectors), size=real_chunks)),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("index")
    run.add_argument("name", choices=sorted(INDEXES))
    run.add_argument("--ef", default="200,400")
    run.add_argument("--shared-buffers", type=int, help="MB (default: the product's)")
    hard = commands.add_parser("hardness")
    hard.add_argument("--real", type=int, default=1000, help="real chunks embedded (~11/s)")
    args = parser.parse_args()
    if args.command == "index":
        efs = [int(ef) for ef in args.ef.split(",")]
        asyncio.run(index(args.name, efs, args.shared_buffers))
    else:
        asyncio.run(hardness(args.real))


if __name__ == "__main__":
    main()

"""Where the lexical leg's time goes at 1M chunks (bench/results/knowledge-scale-findings.md).

    .venv/bin/python bench/knowledge_lexical_profile.py 1000000 LABEL

Loads knowledge_scale.py's chunks of one tenant once into an embedded PostgreSQL kept in
/tmp/lexprof (no vectors' index; delete it when done), then runs 200 of its queries twice
(limit 100, the default budget) and prints p50/p95/p99 of the second pass, the top-10 agreement
with an unbounded search (budget 10^9, cached in bench/.work/knowledge/lexical-reference.json)
and, for the slowest queries, each candidate query: its time, term sets and rows. Run with
PYTHONPATH pointing at another checkout's src/ to compare two versions on the same data, and
with LEXPROF_DUMP=FILE to write every query's candidate queries to FILE as JSON.
"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import knowledge_scale as ks

from agentic_rag.embedding.embedders import DIMENSION, MODEL_NAME, LocalEmbedder
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.search import Filters
from agentic_rag.storage.embedded import EmbeddedPostgres
from agentic_rag.storage.postgres import connect

ROOT = Path("/tmp/lexprof")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


async def main():
    emb = LocalEmbedder()
    await emb.start()
    pool_data = await ks.build_pool(emb)
    server = EmbeddedPostgres(ROOT)
    dsn = server.start()
    try:
        pool = await connect(dsn, size=4)
        store = KnowledgeStore(pool)
        space = await store.open_space(MODEL_NAME, DIMENSION)
        if await store.chunk_count("all") == 0:
            synth = ks.Synthesizer(pool_data, seed=N)
            async with pool.acquire() as conn:
                await conn.execute("SET maintenance_work_mem = '3GB'")
                defs = await ks.drop_load_indexes(conn)
                t = time.perf_counter()
                await ks.bulk_load(conn, space, synth, "all", N)
                await ks.rebuild_lexicon(conn)
                await conn.execute(defs["chunks_lexical_keys"])
                await conn.execute(defs["chunk_embeddings_by_tenant"])
                await conn.execute("VACUUM ANALYZE")
                print(f"loaded in {time.perf_counter() - t:.0f}s", flush=True)
        calls = []
        original = KnowledgeStore._lexical_candidates

        async def traced(self, conn, tenant, clauses, lexemes, filters, scored, limit):
            t = time.perf_counter()
            rows = await original(self, conn, tenant, clauses, lexemes, filters, scored, limit)
            calls.append(
                {
                    "ms": (time.perf_counter() - t) * 1000,
                    "clauses": len(clauses),
                    "sizes": [len(c) for c in clauses],
                    "dfs": [[x.df for x in c] for c in clauses],
                    "rows": len(rows),
                    "room": limit,
                }
            )
            return rows

        KnowledgeStore._lexical_candidates = traced
        queries = pool_data.queries[:200]
        ref_file = ks.corpus.WORK / "lexical-reference.json"
        if not ref_file.exists():
            ref = {}
            for q in queries[:60]:
                ref[q] = [c for c, _ in await store.lexical("all", q, 10, Filters(), budget=10**9)]
            ref_file.write_text(json.dumps(ref))
        ref = json.loads(ref_file.read_text())
        for q in queries[:20]:
            await store.lexical("all", q, 100, Filters())
        out = []
        agree = []
        first: list[float] = []  # the first pass (a cold cache), then the second
        for rep in range(2):
            for q in queries:
                calls.clear()
                t = time.perf_counter()
                got = await store.lexical("all", q, 100, Filters())
                total = (time.perf_counter() - t) * 1000
                first.append(total)
                if rep == 1:
                    out.append({"q": q, "ms": total, "calls": list(calls)})
                    if q in ref:
                        agree.append(len({c for c, _ in got[:10]} & set(ref[q])) / 10)
        if dump := os.environ.get("LEXPROF_DUMP"):
            await asyncio.to_thread(Path(dump).write_text, json.dumps(out))
        out.sort(key=lambda r: -r["ms"])
        ms = [r["ms"] for r in out]
        label = sys.argv[2] if len(sys.argv) > 2 else ""
        print(
            f"{label} p50 {np.percentile(ms, 50):.1f} p95 {np.percentile(ms, 95):.1f} "
            f"p99 {np.percentile(ms, 99):.1f} agreement@10 {np.mean(agree):.4f} "
            f"(n {len(agree)}) calls/query {np.mean([len(r['calls']) for r in out]):.2f}; "
            f"first pass p50 {np.percentile(first[: len(queries)], 50):.1f} "
            f"p95 {np.percentile(first[: len(queries)], 95):.1f}",
            flush=True,
        )
        for r in out[:5]:
            print(
                f"{r['ms']:6.1f} ms {r['q']!r} "
                + " | ".join(
                    f"{c['ms']:.1f} ms {c['clauses']} clauses {c['rows']}/{c['room']}"
                    for c in r["calls"]
                )
            )
        await pool.close()
    finally:
        server.stop()


asyncio.run(main())

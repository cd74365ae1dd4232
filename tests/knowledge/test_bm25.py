"""The lexical leg against BM25 computed here from every chunk, on a real PostgreSQL.

The store scores only the chunks its plan asks the index for (knowledge/bm25.py); these tests
compute BM25 over all of the tenant's chunks, independently, and compare.
"""

import asyncio
import math
import random
from collections.abc import Callable

import asyncpg
import numpy as np
import pytest

from agentic_rag.knowledge import bm25
from agentic_rag.knowledge.documents import Chunk, ExtractedDocument, Section
from agentic_rag.knowledge.store import KnowledgeStore
from agentic_rag.knowledge.store.search import LEXICAL_EXACT_TOP, Filters
from agentic_rag.storage.postgres import connect

# Words of every frequency: a few in most chunks, most in a few (Zipf-like).
VOCABULARY = [f"w{i:03d}x" for i in range(300)]


def _corpus(seed: int, chunks: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    return [" ".join(rng.choices(VOCABULARY, weights, k=rng.randint(5, 40))) for _ in range(chunks)]


async def _write(store: KnowledgeStore, tenant: str, texts: list[str]) -> None:
    space = await store.open_space("test-model", 4)
    source = await store.upsert_source(tenant, "text", "corpus", "", {})
    for start in range(0, len(texts), 100):
        part = texts[start : start + 100]
        document = ExtractedDocument(
            uri=f"doc-{start}",
            title="",
            mime_type="text/plain",
            sections=[Section(t) for t in part],
        )
        chunks = [Chunk(i, t, 0, len(t), token_count=len(t)) for i, t in enumerate(part)]
        vectors = np.ones((len(part), 4), dtype=np.float32) / 2
        await store.write_document(tenant, source, document, chunks, vectors, space)


async def _reference(pool: asyncpg.Pool, tenant: str, query: str) -> list[tuple[int, float]]:
    """BM25 (k1 1.2, b 0.75) over every chunk of the tenant, from the stored term counts."""
    rows = await pool.fetch(
        "SELECT c.id, c.term_count, u.lexeme, cardinality(u.positions) AS tf "
        "FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u WHERE c.tenant = $1",
        tenant,
    )
    lengths = {r["id"]: r["term_count"] for r in rows}
    average = sum(lengths.values()) / len(lengths)
    words = set(query.split())
    df = {w: sum(1 for r in rows if r["lexeme"] == w) for w in words}
    scores: dict[int, float] = {}
    for r in rows:
        word = r["lexeme"]
        if word in words:
            idf = math.log(1 + (len(lengths) - df[word] + 0.5) / (df[word] + 0.5))
            tf, norm = r["tf"], 1.2 * (0.25 + 0.75 * lengths[r["id"]] / average)
            scores[r["id"]] = scores.get(r["id"], 0.0) + idf * tf * 2.2 / (tf + norm)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _assert_true_scores_best_first(
    got: list[tuple[int, float]], everything: dict[int, float]
) -> None:
    """Real scores of real matches (BM25 over every chunk, `_reference`), best first."""
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    for chunk, score in got:
        assert score == pytest.approx(everything[chunk], rel=1e-6)


@pytest.fixture
async def store(pool: asyncpg.Pool) -> KnowledgeStore:
    return KnowledgeStore(pool)


async def test_the_top_is_bm25s_over_every_chunk(store: KnowledgeStore, pool: asyncpg.Pool) -> None:
    await _write(store, "acme", _corpus(1, 1200))
    await _write(store, "other", _corpus(2, 300))  # another tenant's chunks change nothing
    rng = random.Random(3)
    for _ in range(25):
        query = " ".join(rng.sample(VOCABULARY[:120], rng.randint(1, 6)))
        expected = (await _reference(pool, "acme", query))[:LEXICAL_EXACT_TOP]
        got = await store.lexical("acme", query, LEXICAL_EXACT_TOP, Filters())
        assert [c for c, _ in got] == [c for c, _ in expected], query
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-6)


async def test_a_spent_budget_keeps_the_best_of_what_was_scored(
    store: KnowledgeStore, pool: asyncpg.Pool
) -> None:
    await _write(store, "acme", _corpus(4, 600))
    query = " ".join(VOCABULARY[:4])  # the most frequent words: most chunks hold one of them
    everything = dict(await _reference(pool, "acme", query))
    got = await store.lexical("acme", query, 10, Filters(), budget=50)
    assert len(got) == 10
    _assert_true_scores_best_first(got, everything)  # though not necessarily the overall best


async def test_a_spent_postings_budget_asks_only_the_cheapest_term_set(
    store: KnowledgeStore, pool: asyncpg.Pool
) -> None:
    await _write(store, "acme", _corpus(5, 1200))
    query = " ".join(VOCABULARY[10:16])
    everything = dict(await _reference(pool, "acme", query))
    df = {
        word: await pool.fetchval(
            "SELECT df FROM lexicon WHERE tenant = 'acme' AND lexeme = $1", word
        )
        for word in query.split()
    }
    rarest = min(df, key=lambda word: (df[word], word))
    holding = {
        r["id"]
        for r in await pool.fetch(
            "SELECT id FROM chunks WHERE tenant = 'acme' AND tsv @@ to_tsquery('simple', $1)",
            rarest,
        )
    }
    top = [c for c, _ in (await store.lexical("acme", query, 10, Filters()))]
    got = await store.lexical("acme", query, 10, Filters(), postings=1)
    # Unbounded, the top holds chunks without the rarest word; one posting allowed, the plan
    # asks one term set, the cheapest: the rarest word's, with others.
    assert not set(top) <= holding
    assert got and {c for c, _ in got} <= holding
    _assert_true_scores_best_first(got, everything)


async def test_searches_ask_the_lexical_index_before_statistics_exist(
    database_url: str, pool: asyncpg.Pool
) -> None:
    """Right after an ingestion the table has no statistics yet; a plan made then could walk
    the tenant's rows computing every row's keys (seconds) instead of asking the index."""
    await pool.execute("ALTER TABLE chunks SET (autovacuum_enabled = false)")

    async def counters() -> dict[str, int]:
        """Rows read from chunks by each index and by sequential scans; rows inserted."""
        rows = await pool.fetch(
            "SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE relname = "
            "'chunks' UNION ALL SELECT 'sequential', seq_tup_read FROM pg_stat_user_tables "
            "WHERE relname = 'chunks' UNION ALL SELECT 'inserted', n_tup_ins "
            "FROM pg_stat_user_tables WHERE relname = 'chunks'"
        )
        return {r[0]: int(r[1]) for r in rows}

    async def once(reached: Callable[[dict[str, int]], bool]) -> dict[str, int]:
        """The counters once a closed backend's statistics have landed (within moments)."""
        for _ in range(150):
            if reached(found := await counters()):
                return found
            await asyncio.sleep(0.1)
        raise AssertionError(f"statistics did not arrive: {found}")

    writer = await connect(database_url, size=1)
    await _write(KnowledgeStore(writer), "acme", _corpus(6, 3000))
    await writer.close()
    before = await once(lambda c: c["inserted"] == 3000)
    assert await pool.fetchval("SELECT count(*) FROM pg_stats WHERE tablename = 'chunks'") == 0

    searcher = await connect(database_url, size=1)
    for _ in range(10):  # past the 5 runs after which PostgreSQL may choose a generic plan
        await KnowledgeStore(searcher).lexical("acme", " ".join(VOCABULARY[20:23]), 10, Filters())
    await searcher.close()
    after = await once(lambda c: c != before)
    read = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    assert list(read) == ["chunks_lexical_keys"], read


def test_a_plan_within_a_postings_budget_takes_the_cheapest_term_sets_first() -> None:
    a, b, c, d = (bm25.Term(w, df, 1.0) for w, df in [("a", 10), ("b", 40), ("c", 70), ("d", 90)])
    sets = [(c, d), (b, c), (a, d), (a, b)]  # a set costs the postings of its rarest term
    assert bm25.affordable(sets, 10**6) == ([(a, d), (a, b), (b, c), (c, d)], True)
    assert bm25.affordable(sets, 60) == ([(a, d), (a, b), (b, c)], False)
    # The cheapest set is asked whatever it costs: a search always has candidates.
    assert bm25.affordable(sets, 1) == ([(a, d)], False)


def test_the_term_sets_asked_are_the_smallest_that_reach_the_threshold() -> None:
    rare, mid, common = (
        bm25.Term(w, df, idf) for w, df, idf in [("r", 1, 4.0), ("m", 5, 2.0), ("c", 50, 1.0)]
    )
    bound = {t.lexeme: t.bound for t in (rare, mid, common)}
    sets = bm25.reaching([rare, mid, common], bound["m"] + bound["c"])
    # 'r' alone reaches it; without 'r', only 'm' and 'c' together do.
    assert [[t.lexeme for t in s] for s in sets] == [["r"], ["m", "c"]]
    assert bm25.reaching([rare], bound["r"] + 1) == []


def test_term_frequencies_are_read_from_a_tsvector() -> None:
    assert bm25.term_frequencies("'famili':3A,17A 'it''s':5A") == {"famili": 2, "it's": 1}


def test_the_scorer_sums_what_score_sums_from_the_frequencies() -> None:
    idf = {"famili": 2.5, "it's": 1.25, "oper": 0.5}
    scorer = bm25.Scorer(idf, average=40.0)
    for text, length in [
        ("'famili':3A,17A 'it''s':5A", 12),
        ("'oper':1A,2A,9A", 80),
        ("'other':4A 'famili':2A", 40),
    ]:
        assert scorer(text, length) == bm25.score(bm25.term_frequencies(text), idf, length, 40.0)

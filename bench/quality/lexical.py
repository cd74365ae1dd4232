"""Variants of the lexical leg, measured with the harness's own SQL on the same tables.

`bm25(...)` is KnowledgeStore.lexical's statement with its choices made parameters: the BM25
constants, the candidate limit (None: every chunk that contains a query term is scored), and
which tsvector column is read. The first variant is the product's own choices, and the harness
checks that it ranks exactly as KnowledgeStore.lexical does before it trusts the others.
"""

import math
from dataclasses import dataclass
from typing import Any

import asyncpg

from agentic_rag.knowledge.store import BM25_B, BM25_K1, TEXT_SEARCH_CONFIG


@dataclass(frozen=True)
class Variant:
    name: str
    k1: float = BM25_K1
    b: float = BM25_B
    candidates: int | None = 5000
    table: str = "chunks"
    """A table with the columns of chunks that matter here: id, tenant, tsv, term_count."""
    lexicon: tuple[str, str] = ("lexicon", "lexicon_totals")


async def bm25(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    variant: Variant,
    tenant: str,
    query: str,
    limit: int,
) -> list[tuple[int, float]]:
    lexicon, totals_table = variant.lexicon
    terms = await conn.fetch(
        "SELECT q.lexeme, coalesce(l.df, 0) AS df "
        f"FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', $2)) q "
        f"LEFT JOIN {lexicon} l ON l.tenant = $1 AND l.lexeme = q.lexeme",
        tenant,
        query,
    )
    totals = await conn.fetchrow(
        f"SELECT chunks, terms FROM {totals_table} WHERE tenant = $1", tenant
    )
    present = sorted((r["df"], r["lexeme"]) for r in terms if r["df"] > 0)
    if not present or totals is None:
        return []
    n, average = totals["chunks"], totals["terms"] / totals["chunks"]
    selective, postings = [], 0
    for df, lexeme in present:
        if variant.candidates is not None and selective and postings + df > variant.candidates:
            break
        selective.append(lexeme)
        postings += df
    lexemes = [lexeme for _, lexeme in present]
    idf = [math.log(1 + (n - df + 0.5) / (df + 0.5)) for df, _ in present]
    params: list[Any] = [
        tenant,
        " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in selective),
        lexemes,
        idf,
        limit,
        average,
    ]
    cap = f"LIMIT {int(variant.candidates)}" if variant.candidates is not None else ""
    k1, b = variant.k1, variant.b
    rows = await conn.fetch(
        "WITH q AS (SELECT * FROM unnest($3::text[], $4::float8[]) AS q(lexeme, idf)), "
        f"candidates AS MATERIALIZED (SELECT c.id, c.tsv, c.term_count FROM {variant.table} c "
        f"WHERE c.tenant = $1 AND c.tsv @@ $2::tsquery {cap}) "
        f"SELECT c.id, sum(q.idf * (u.tf * {k1 + 1}) / (u.tf + {k1} * (1 - {b} + {b} * "
        "c.term_count / $6))) AS score FROM candidates c CROSS JOIN LATERAL "
        "(SELECT lexeme, cardinality(positions) AS tf "
        "FROM unnest(ts_filter(setweight(c.tsv, 'A', $3::text[]), '{a}'))) u "
        "JOIN q ON q.lexeme = u.lexeme GROUP BY c.id ORDER BY score DESC, c.id LIMIT $5",
        *params,
    )
    return [(r["id"], float(r["score"])) for r in rows]


VARIANTS = (
    Variant("as the product (reimplemented)"),
    Variant("no candidate limit", candidates=None),
    Variant("k1=1.5", k1=1.5),
)


async def measure(run: Any, pool: asyncpg.Pool, tenant: str, depth: int) -> dict[str, Any]:
    """Every variant over every query, into `run.ranked` as "lexical variant: NAME"."""
    names = []
    async with pool.acquire() as conn:
        for variant in VARIANTS:
            name = f"lexical variant: {variant.name}"
            names.append(name)
            run.ranked[name] = [
                [c for c, _ in await bm25(conn, variant, tenant, q.text, depth)]
                for q in run.queries
            ]
    same = run.ranked[names[0]] == run.ranked["lexical"]
    return {"variants": names, "reimplementation_ranks_as_the_product": same}

"""Variants of the lexical leg, measured with the harness's own SQL on the same chunks.

`bm25(...)` is KnowledgeStore.lexical's statement with its choices made parameters: the BM25
constants, the candidate limit (None: every chunk that contains a query term is scored), and
the tokenisation. A tokenisation other than the product's is built beside the product's tables
(`bench_lexical_*`: the chunks' tsvectors, document frequencies and totals, computed from the
same headings and text as the product's), so that nothing the product stored changes. The
first variant is the product's own choices: the harness checks that it ranks exactly as
KnowledgeStore.lexical does before it trusts the others.
"""

import math
from dataclasses import dataclass
from typing import Any

import asyncpg

from agentic_rag.knowledge.bm25 import K1 as BM25_K1
from agentic_rag.knowledge.bm25 import B as BM25_B
from agentic_rag.knowledge.store.lexicon import TEXT_SEARCH_CONFIG

Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy


@dataclass(frozen=True)
class Tokenisation:
    name: str
    config: str = TEXT_SEARCH_CONFIG
    split: str | None = None
    """A regular expression whose matches become spaces before parsing (query and chunks)."""

    def sql(self, text: str) -> str:
        """The tsvector of the SQL expression `text`."""
        if self.split is not None:
            text = f"regexp_replace({text}, '{self.split}', ' ', 'g')"
        return f"to_tsvector('{self.config}', {text})"


PRODUCT = Tokenisation("product")
# PostgreSQL's parser keeps file paths, host names and URLs whole ("fsck.cramfs",
# "encode/decode", "/etc/passwd"): a query word never matches a part of them.
SPLIT_PATHS = "[/.:@=]+"
SPLIT_ALL = "[^[:alnum:]]+"
NO_STOP_WORDS = "bench_english_nostop"  # english_stem without the 127 English stop words


@dataclass(frozen=True)
class Variant:
    name: str
    tokenisation: Tokenisation = PRODUCT
    k1: float = BM25_K1
    b: float = BM25_B
    candidates: int | None = 5000


RECOMMENDED = "lexical variant: split at every non-alphanumeric"

VARIANTS = (
    Variant("as the product (reimplemented)"),
    Variant("no candidate limit", candidates=None),
    Variant("k1=1.5", k1=1.5),
    Variant("split paths and hosts", Tokenisation("split paths", split=SPLIT_PATHS)),
    Variant("split at every non-alphanumeric", Tokenisation("split all", split=SPLIT_ALL)),
    Variant("no stop words", Tokenisation("no stop words", config=NO_STOP_WORDS)),
    Variant(
        "split paths and hosts, no stop words",
        Tokenisation("split paths, no stop words", config=NO_STOP_WORDS, split=SPLIT_PATHS),
    ),
    Variant(
        "split at every non-alphanumeric, no stop words",
        Tokenisation("split all, no stop words", config=NO_STOP_WORDS, split=SPLIT_ALL),
    ),
)


def _tables(tokenisation: Tokenisation) -> tuple[str, str, str]:
    if tokenisation == PRODUCT:
        return "chunks", "lexicon", "lexicon_totals"
    slug = "".join(ch if ch.isalnum() else "_" for ch in tokenisation.name)
    return tuple(f"bench_lexical_{slug}_{t}" for t in ("chunks", "lexicon", "totals"))  # type: ignore[return-value]


async def build(conn: Connection, tokenisation: Tokenisation) -> None:
    """The tables of `tokenisation`, computed from the product's chunks."""
    if tokenisation == PRODUCT:
        return
    chunks, lexicon, totals = _tables(tokenisation)
    source = tokenisation.sql("array_to_string(c.heading_path, ' ') || ' ' || c.text")
    await conn.execute(
        f"CREATE TABLE {chunks} AS SELECT c.id, c.tenant, v.tsv, "
        "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(v.tsv) u) AS term_count "
        f"FROM chunks c CROSS JOIN LATERAL (SELECT {source} AS tsv) v"
    )
    await conn.execute(f"CREATE INDEX ON {chunks} USING gin (tenant, tsv)")
    await conn.execute(
        f"CREATE TABLE {lexicon} AS SELECT c.tenant, u.lexeme, count(*) AS df "
        f"FROM {chunks} c CROSS JOIN LATERAL unnest(c.tsv) u GROUP BY c.tenant, u.lexeme"
    )
    await conn.execute(f"CREATE UNIQUE INDEX ON {lexicon} (tenant, lexeme)")
    await conn.execute(
        f"CREATE TABLE {totals} AS SELECT tenant, count(*) AS chunks, "
        f"sum(term_count) AS terms FROM {chunks} GROUP BY tenant"
    )


async def create_configuration(conn: Connection) -> None:
    await conn.execute(
        "CREATE TEXT SEARCH DICTIONARY bench_english_stem_nostop "
        "(TEMPLATE = snowball, Language = english)"
    )
    await conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {NO_STOP_WORDS} (COPY = english)")
    await conn.execute(
        f"ALTER TEXT SEARCH CONFIGURATION {NO_STOP_WORDS} "
        "ALTER MAPPING REPLACE english_stem WITH bench_english_stem_nostop"
    )


async def bm25(
    conn: Connection, variant: Variant, tenant: str, query: str, limit: int
) -> list[tuple[int, float]]:
    chunks, lexicon, totals_table = _tables(variant.tokenisation)
    terms = await conn.fetch(
        "SELECT q.lexeme, coalesce(l.df, 0) AS df "
        f"FROM unnest({variant.tokenisation.sql('$2::text')}) q "
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
        f"candidates AS MATERIALIZED (SELECT c.id, c.tsv, c.term_count FROM {chunks} c "
        f"WHERE c.tenant = $1 AND c.tsv @@ $2::tsquery {cap}) "
        f"SELECT c.id, sum(q.idf * (u.tf * {k1 + 1}) / (u.tf + {k1} * (1 - {b} + {b} * "
        "c.term_count / $6))) AS score FROM candidates c CROSS JOIN LATERAL "
        "(SELECT lexeme, cardinality(positions) AS tf "
        "FROM unnest(ts_filter(setweight(c.tsv, 'A', $3::text[]), '{a}'))) u "
        "JOIN q ON q.lexeme = u.lexeme GROUP BY c.id ORDER BY score DESC, c.id LIMIT $5",
        *params,
    )
    return [(r["id"], float(r["score"])) for r in rows]


async def measure(
    run: Any, pool: asyncpg.Pool, tenant: str, depth: int
) -> tuple[dict[str, Any], dict[str, list[list[tuple[int, float]]]]]:
    """Every variant over every query, into `run.ranked` as "lexical variant: NAME"; also
    returns each variant's hits with their scores (for fusing them)."""
    lists: dict[str, list[list[tuple[int, float]]]] = {}
    async with pool.acquire() as conn:
        if not await conn.fetchval(
            "SELECT true FROM pg_ts_config WHERE cfgname = $1", NO_STOP_WORDS
        ):
            await create_configuration(conn)
        for variant in VARIANTS:
            if not await conn.fetchval(
                "SELECT to_regclass($1) IS NOT NULL", _tables(variant.tokenisation)[0]
            ):
                await build(conn, variant.tokenisation)
            name = f"lexical variant: {variant.name}"
            lists[name] = [await bm25(conn, variant, tenant, q.text, depth) for q in run.queries]
            run.ranked[name] = [[c for c, _ in hits] for hits in lists[name]]
    names = list(lists)
    same = run.ranked[names[0]] == run.ranked["lexical"]
    return {"variants": names, "reimplementation_ranks_as_the_product": same}, lists

"""Search: the dense and lexical legs over the tenant's chunks, the filters both apply, and
the chunks as a result cites them."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
import orjson

from agentic_rag.knowledge import bm25
from agentic_rag.knowledge.store.connection import Connection
from agentic_rag.knowledge.store.lexicon import lexemes
from agentic_rag.knowledge.store.spaces import Space
from agentic_rag.storage.pool import Pool

# Tenants with at most this many chunks are searched exactly: an HNSW scan filtered by tenant
# loses results when the tenant holds a small share of the index (KNOWLEDGE-NOTES), and an
# exact scan costs 1.2-1.8 us per vector (p95 18.5 ms for 10k: bench/results/knowledge-scale.md).
EXACT_SEARCH_MAX_CHUNKS = 12_000
# The share of a chunk's dense score that is its document's own vector's similarity
# (chunking.document_embedding_text): on bench/quality, 0.3 (of 0.1 to 1) ranked documents best
# on the tuning half of the queries among weights of the document's vector.
DOCUMENT_WEIGHT = 0.3
# The candidates an HNSW search keeps (spaces.HNSW_M says what it was measured with).
HNSW_EF_SEARCH = 400
# Chunks the lexical leg scores at most, and the top it keeps exact within them
# (bench/results/knowledge-scale.md measures both against unbounded BM25).
LEXICAL_CANDIDATES = 2000
LEXICAL_EXACT_TOP = 30
# The postings the lexical leg's candidate queries read at most per round (bm25.affordable);
# with it, 2,000 chunks scored agree better with unbounded BM25 than 750 did without it, in
# half the p95 (bench/results/knowledge-scale-findings.md, finding 3).
LEXICAL_POSTINGS = 30_000


@dataclass(frozen=True)
class Filters:
    """Restrictions every retriever applies (declared in the skills' input schemas)."""

    source_ids: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    """Source kinds: url, pdf, youtube, text."""
    ingested_after: datetime | None = None
    ingested_before: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """Documents whose metadata contains these keys and values."""

    @property
    def narrow(self) -> bool:
        """Whether the filters name documents or sources: few enough rows to scan exactly."""
        return bool(self.source_ids or self.document_ids)

    def __bool__(self) -> bool:
        return bool(
            self.source_ids
            or self.document_ids
            or self.kinds
            or self.ingested_after
            or self.ingested_before
            or self.metadata
        )


@dataclass(frozen=True)
class Hit:
    """A chunk as a retriever found it, with everything needed to cite it."""

    chunk_id: int
    document_id: str
    source_id: str
    source_kind: str
    uri: str
    title: str
    text: str
    position: int
    char_start: int
    char_end: int
    page: int | None
    start_seconds: float | None
    end_seconds: float | None
    heading_path: list[str]


class Search:
    """The two legs of a hybrid search, and the chunks and vectors their results name."""

    _pool: Pool
    _exact_max: int

    async def dense(
        self,
        tenant: str,
        space: Space,
        query: np.ndarray,
        limit: int,
        filters: Filters,
        *,
        ef_search: int = HNSW_EF_SEARCH,
        document_weight: float = DOCUMENT_WEIGHT,
    ) -> list[tuple[int, float]]:
        """(chunk id, score) of the `limit` nearest chunks, best first. The score is the
        chunk's cosine similarity and its document's own vector's, weighted 1 and
        `document_weight` (divided by their sum: a cosine's scale); a document without a
        vector of its own counts its chunk's similarity twice.

        The `limit` nearest chunks are found by their own similarity: small tenants and
        narrow filters are scanned exactly; otherwise the HNSW index is read with iterative
        scans, so that a tenant's rows are found however few they are.
        """
        params: list[Any] = [tenant, query, limit]
        where = _filter_sql(filters, params)
        distance = f"e.embedding::{space.vector_type} <=> $2::{space.vector_type}"
        # The space is a literal, as in the partial index's predicate: with a parameter, a
        # generic plan could not prove the predicate and would never use the index.
        in_space = f"e.space = {int(space.id)}"
        async with self._pool.acquire() as conn, conn.transaction():
            # One round trip: the tenant's size and the settings of this transaction. A plan
            # made for one tenant must not serve another of another size (measured: a generic
            # plan made the exact path of a 1k tenant 28x slower); the HNSW settings matter
            # only to the index, which the exact path does not read.
            size = await conn.fetchval(
                "SELECT (SELECT chunks FROM lexicon_totals WHERE tenant = $1) FROM (SELECT "
                "set_config('plan_cache_mode', 'force_custom_plan', true), "
                "set_config('hnsw.ef_search', $2, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true)) AS settings",
                tenant,
                str(max(int(ef_search), limit)),
            )
            exact = filters.narrow or (size or 0) <= self._exact_max
            joins = _FILTER_JOINS if filters else ""
            if exact:
                # MATERIALIZED keeps the planner from ordering by the index of all tenants.
                nearest = (
                    "WITH candidates AS MATERIALIZED (SELECT e.chunk_id, "
                    f"{distance} AS distance FROM chunk_embeddings e {joins} "
                    f"WHERE {in_space} AND e.tenant = $1 {where}) "
                    "SELECT chunk_id, distance FROM candidates ORDER BY distance LIMIT $3"
                )
            else:
                # Ordered as the index holds the vectors, scored at full precision.
                approximate = (
                    f"e.embedding::{space.index_type} <=> "
                    f"$2::{space.vector_type}::{space.index_type}"
                )
                nearest = (
                    f"SELECT e.chunk_id, {distance} AS distance FROM chunk_embeddings e {joins} "
                    f"WHERE {in_space} AND e.tenant = $1 {where} "
                    f"ORDER BY {approximate} LIMIT $3"
                )
            if not document_weight:
                rows = await conn.fetch(
                    f"SELECT *, NULL AS of_document FROM ({nearest}) n", *params
                )
            else:
                # The nearest chunks' documents' own similarity, in the same round trip: joined
                # to the `limit` rows the subquery keeps, not before.
                vector = space.vector_type
                rows = await conn.fetch(
                    "SELECT n.chunk_id, n.distance, "
                    f"1 - (d.embedding::{vector} <=> $2::{vector}) AS of_document "
                    f"FROM ({nearest}) n JOIN chunks c ON c.id = n.chunk_id "
                    f"LEFT JOIN document_embeddings d ON d.space = {int(space.id)} "
                    "AND d.tenant = c.tenant AND d.document_id = c.document_id",
                    *params,
                )
            similarity = {r["chunk_id"]: 1.0 - float(r["distance"]) for r in rows}
            of_document = {
                r["chunk_id"]: float(r["of_document"]) for r in rows if r["of_document"] is not None
            }
        # relaxed_order and half precision may order rows slightly wrong: sort by the score.
        return sorted(
            (
                (c, (s + document_weight * float(of_document.get(c, s))) / (1 + document_weight))
                for c, s in similarity.items()
            ),
            key=_score,
        )

    async def lexical(
        self,
        tenant: str,
        query: str,
        limit: int,
        filters: Filters,
        *,
        budget: int = LEXICAL_CANDIDATES,
        postings: int = LEXICAL_POSTINGS,
    ) -> list[tuple[int, float]]:
        """(chunk id, BM25 score) of the `limit` best chunks for `query`, best first.

        BM25 over PostgreSQL's lexemes (stemmed, without stop words), with IDF from the
        tenant's lexicon. Chunks are scored in at most two rounds (bm25.py says why this finds
        the best ones): first those holding the term sets that only a few chunks hold, then,
        if the top `LEXICAL_EXACT_TOP` could still change, every chunk whose terms can reach
        the score of the last of them. At most `budget` chunks are scored, and a round's
        candidate query reads about `postings` postings at most: within both the top
        `LEXICAL_EXACT_TOP` are exactly BM25's (for queries of up to bm25.PLANNED_TERMS terms);
        past either (queries of frequent words on large tenants), the best of those scored.
        """
        # No transaction (BEGIN and COMMIT were two of the leg's round trips): each statement
        # keeps parallel workers off itself (_SERIAL).
        async with self._pool.acquire() as conn:
            # One round trip: the query's lexemes with their document frequencies and the
            # tenant's totals. No lexeme or no totals: nothing to find.
            found = await conn.fetch(
                "SELECT q.lexeme, coalesce(l.df, 0) AS df, t.chunks, t.terms "
                f"FROM {_SERIAL}, unnest({lexemes('$2')}) q "
                "JOIN lexicon_totals t ON t.tenant = $1 "
                "LEFT JOIN lexicon l ON l.tenant = $1 AND l.lexeme = q.lexeme",
                tenant,
                query,
            )
            if not found or found[0]["chunks"] == 0:
                return []
            chunks, average = found[0]["chunks"], found[0]["terms"] / found[0]["chunks"]
            terms = bm25.query_terms(((r["lexeme"], r["df"]) for r in found), chunks)
            if not terms:
                return []
            idf = {t.lexeme: t.idf for t in terms}
            scorer = bm25.Scorer(idf, average)
            planned = terms[: bm25.PLANNED_TERMS]
            exact_top = min(limit, LEXICAL_EXACT_TOP)
            threshold = bm25.opening_threshold(planned, chunks, 2 * exact_top)
            scored: dict[int, float] = {}
            for _ in range(2):
                clauses, complete = bm25.affordable(bm25.reaching(planned, threshold), postings)
                room = budget - len(scored)
                rows = await self._lexical_candidates(
                    conn, tenant, clauses, list(idf), filters, list(scored), room
                )
                for r in rows:
                    scored[r["id"]] = scorer(r["terms"], r["term_count"])
                if len(rows) >= room or not complete:
                    break  # a budget is spent: the best of those scored
                ranked = sorted(scored.values(), reverse=True)
                last = ranked[exact_top - 1] if len(ranked) >= exact_top else 0.0
                if last >= threshold:
                    break  # no chunk left unscored can reach the top
                threshold = max(last, min(t.bound for t in planned))
        return sorted(scored.items(), key=_score)[:limit]

    async def _lexical_candidates(
        self,
        conn: Connection,
        tenant: str,
        clauses: Sequence[tuple[bm25.Term, ...]],
        lexemes: list[str],
        filters: Filters,
        scored: list[int],
        limit: int,
    ) -> list[asyncpg.Record]:
        """Chunks holding every term of one of `clauses`, not among `scored`: their length
        and the query's lexemes in them (a tsvector's text)."""
        params: list[Any] = [tenant, lexemes, scored, limit]
        key = hashlib.md5(tenant.encode()).hexdigest()
        held = []
        for clause in clauses:
            params.append([f"{key} {t.lexeme}" for t in clause])
            held.append(f"lexical_keys(c.tenant, c.tsv) @> ${len(params)}::text[]")
        where = _filter_sql(filters, params)
        # The keys name the tenant, so the index alone finds the tenant's chunks. Without
        # `c.tenant = $1` beside them no plan can walk the tenant's rows computing each row's
        # keys, which PostgreSQL picks when statistics are missing, as right after an
        # ingestion (seconds for a few thousand chunks); the tenant is checked after.
        return await conn.fetch(
            "WITH matched AS MATERIALIZED (SELECT c.id, c.tenant, c.term_count, c.tsv "
            f"FROM chunks c {_FILTER_JOINS_FROM_CHUNKS if filters else ''} "
            f"WHERE ({' OR '.join(held)}) AND c.id <> ALL($3::bigint[]) {where} LIMIT $4) "
            "SELECT id, term_count, "
            "ts_filter(setweight(tsv, 'A', $2::text[]), '{a}')::text AS terms "
            f"FROM matched, {_SERIAL} WHERE tenant = $1",
            *params,
        )

    async def matching_chunks(
        self, tenant: str, chunk_ids: Sequence[int], filters: Filters
    ) -> set[int]:
        """Those of these chunks whose document satisfies `filters`: the graph retriever's
        hits, found across documents, are kept by this."""
        params: list[Any] = [tenant, list(chunk_ids)]
        where = _filter_sql(filters, params)
        rows = await self._pool.fetch(
            f"SELECT c.id FROM chunks c {_FILTER_JOINS_FROM_CHUNKS} "
            f"WHERE c.tenant = $1 AND c.id = ANY($2::bigint[]) {where}",
            *params,
        )
        return {r["id"] for r in rows}

    async def hits(self, tenant: str, chunk_ids: Sequence[int]) -> dict[int, Hit]:
        rows = await self._pool.fetch(
            "SELECT c.id, c.document_id, d.source_id, s.kind, d.uri, d.title, c.text, "
            "c.position, c.char_start, c.char_end, c.page, c.start_seconds, c.end_seconds, "
            "c.heading_path FROM chunks c "
            "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
            "JOIN knowledge_sources s ON s.tenant = d.tenant AND s.id = d.source_id "
            "WHERE c.tenant = $1 AND c.id = ANY($2::bigint[])",
            tenant,
            list(chunk_ids),
        )
        return {
            r["id"]: Hit(
                chunk_id=r["id"],
                document_id=r["document_id"],
                source_id=r["source_id"],
                source_kind=r["kind"],
                uri=r["uri"],
                title=r["title"],
                text=r["text"],
                position=r["position"],
                char_start=r["char_start"],
                char_end=r["char_end"],
                page=r["page"],
                start_seconds=r["start_seconds"],
                end_seconds=r["end_seconds"],
                heading_path=list(r["heading_path"]),
            )
            for r in rows
        }

    async def vectors(self, space: Space, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        rows = await self._pool.fetch(
            "SELECT chunk_id, embedding FROM chunk_embeddings "
            "WHERE space = $1 AND chunk_id = ANY($2::bigint[])",
            space.id,
            list(chunk_ids),
        )
        return {r["chunk_id"]: r["embedding"].to_numpy().astype(np.float32) for r in rows}

    async def chunk_count(self, tenant: str) -> int:
        value = await self._pool.fetchval(
            "SELECT chunks FROM lexicon_totals WHERE tenant = $1", tenant
        )
        return int(value or 0)


# The lexical leg's statements are planned without parallel workers: the keys' matches are
# estimated high enough for them, and their start costs more than the search (a 10k tenant's
# query: 9.4 ms with two workers, 1.3 ms without). set_config is parallel unsafe, and a
# statement that calls one is never planned parallel (PostgreSQL: "Parallel Safety"), so the
# statement needs no setting made before it, nor a transaction to scope one.
_SERIAL = "(SELECT set_config('max_parallel_workers_per_gather', '0', true)) AS serial"


def _score(hit: tuple[int, float]) -> tuple[float, int]:
    return (-hit[1], hit[0])


_FILTER_JOINS = (
    "JOIN chunks c ON c.id = e.chunk_id "
    "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
    "JOIN knowledge_sources s ON s.tenant = d.tenant AND s.id = d.source_id"
)
_FILTER_JOINS_FROM_CHUNKS = (
    "JOIN documents d ON d.tenant = c.tenant AND d.id = c.document_id "
    "JOIN knowledge_sources s ON s.tenant = d.tenant AND s.id = d.source_id"
)


def _filter_sql(filters: Filters, params: list[Any]) -> str:
    """SQL conditions on `d` (documents) and `s` (sources) for `filters`; appends params."""
    conditions = []

    def param(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    # A document belongs to every source that holds it (source_documents).
    if filters.source_ids:
        conditions.append(
            "EXISTS (SELECT 1 FROM source_documents m WHERE m.tenant = d.tenant "
            f"AND m.document_id = d.id AND m.source_id = ANY({param(list(filters.source_ids))}"
            "::text[]))"
        )
    if filters.document_ids:
        conditions.append(f"d.id = ANY({param(list(filters.document_ids))}::text[])")
    if filters.kinds:
        conditions.append(
            "EXISTS (SELECT 1 FROM source_documents m JOIN knowledge_sources k "
            "ON k.tenant = m.tenant AND k.id = m.source_id WHERE m.tenant = d.tenant "
            f"AND m.document_id = d.id AND k.kind = ANY({param(list(filters.kinds))}::text[]))"
        )
    if filters.ingested_after:
        conditions.append(f"d.updated_at >= {param(filters.ingested_after)}")
    if filters.ingested_before:
        conditions.append(f"d.updated_at < {param(filters.ingested_before)}")
    if filters.metadata:
        conditions.append(f"d.metadata @> {param(orjson.dumps(filters.metadata).decode())}::jsonb")
    return "".join(f" AND {c}" for c in conditions)

"""The lexicon: each tenant's document frequencies of the chunks' lexemes and its totals,
which the lexical leg's IDF and length normalisation read. A document's terms are learnt in the
transaction that writes its chunks and forgotten in the one that deletes them."""

from agentic_rag.knowledge.store.connection import Connection

TEXT_SEARCH_CONFIG = "english"
# Serialises lexicon updates of one tenant (two documents share words): no deadlocks, and the
# transaction that holds it is short (embedding happens before it).
LEXICON_LOCK = 0x6C657863  # "lexc"


def lexemes(text: str) -> str:
    """The SQL of the tsvector of `text`, for chunks and queries alike. Split at every character
    that is neither a letter nor a digit first: PostgreSQL's parser keeps paths, host names and
    URLs whole ("/etc/passwd" would be one term no query word matches); measured on the quality
    benchmark, +0.016 nDCG@10 for the lexical leg (bench/quality/results.md)."""
    return f"to_tsvector('{TEXT_SEARCH_CONFIG}', regexp_replace({text}, '[^[:alnum:]]+', ' ', 'g'))"


async def learn_terms(conn: Connection, tenant: str, document_id: str) -> None:
    await conn.execute(
        "INSERT INTO lexicon (tenant, lexeme, df) "
        "SELECT $1, u.lexeme, count(*) FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u "
        "WHERE c.tenant = $1 AND c.document_id = $2 GROUP BY u.lexeme "
        "ON CONFLICT (tenant, lexeme) DO UPDATE SET df = lexicon.df + excluded.df",
        tenant,
        document_id,
    )
    await conn.execute(
        "INSERT INTO lexicon_totals (tenant, chunks, terms) "
        "SELECT $1, count(*), coalesce(sum(term_count), 0) FROM chunks "
        "WHERE tenant = $1 AND document_id = $2 "
        "ON CONFLICT (tenant) DO UPDATE SET chunks = lexicon_totals.chunks + excluded.chunks, "
        "terms = lexicon_totals.terms + excluded.terms",
        tenant,
        document_id,
    )


async def forget_terms(conn: Connection, tenant: str, document_id: str) -> None:
    await conn.execute(
        "UPDATE lexicon l SET df = l.df - g.n FROM (SELECT u.lexeme, count(*) AS n "
        "FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u "
        "WHERE c.tenant = $1 AND c.document_id = $2 GROUP BY u.lexeme) g "
        "WHERE l.tenant = $1 AND l.lexeme = g.lexeme",
        tenant,
        document_id,
    )
    await conn.execute("DELETE FROM lexicon WHERE tenant = $1 AND df <= 0", tenant)
    await conn.execute(
        "UPDATE lexicon_totals t SET chunks = t.chunks - g.n, terms = t.terms - g.terms "
        "FROM (SELECT count(*) AS n, coalesce(sum(term_count), 0) AS terms FROM chunks "
        "WHERE tenant = $1 AND document_id = $2) g WHERE t.tenant = $1",
        tenant,
        document_id,
    )

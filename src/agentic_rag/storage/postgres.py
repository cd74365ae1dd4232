"""The PostgreSQL connection pool and the schema migrations that run at start."""

import logging
from collections.abc import Callable
from importlib import resources
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

log = logging.getLogger(__name__)

# Serialises migrations when several workers start at once.
_MIGRATION_LOCK = 0x61676E72  # "agnr"


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


class PooledConnection(asyncpg.Connection):
    """A pooled connection reset on release only when a use left session state behind.

    asyncpg resets every connection the pool takes back (advisory locks, cursors, LISTEN,
    settings): one more round trip and commit per use, 6.6% of a worker's time under load
    (bench/results/send-cpu-findings.md). Our statements leave no session state: settings are
    SET LOCAL, advisory locks are transaction-level, cursors live inside transactions; an open
    transaction is always rolled back by asyncpg itself. Only LISTEN does, so a connection that
    listened gets the full reset.
    """

    _listened = False

    async def add_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        self._listened = True
        await super().add_listener(channel, callback)

    def get_reset_query(self) -> str:
        if not self._listened:
            return ""
        self._listened = False
        return super().get_reset_query()


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply every migration not yet applied, in order; return the names applied now."""
    applied_now: list[str] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
        scripts = sorted(
            (
                f
                for f in resources.files(__package__).joinpath("migrations").iterdir()
                if f.name.endswith(".sql")
            ),
            key=lambda f: f.name,
        )
        for script in scripts:
            if script.name in done:
                continue
            await conn.execute(script.read_text())
            await conn.execute("INSERT INTO schema_migrations (name) VALUES ($1)", script.name)
            applied_now.append(script.name)
    for name in applied_now:
        log.info("applied migration %s", name)
    return applied_now


async def pending_migrations(conn: asyncpg.Connection) -> list[str]:
    """Names of migrations that exist in the package but not in the database."""
    known = {
        f.name
        for f in resources.files(__package__).joinpath("migrations").iterdir()
        if f.name.endswith(".sql")
    }
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    done = (
        {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
        if exists
        else set()
    )
    return sorted(known - done)


async def connect(dsn: str, size: int, statement_timeout: float | None = None) -> asyncpg.Pool:
    """Open a pool on `dsn` after bringing its schema up to date.

    `statement_timeout` bounds each statement on the client's side (asyncpg's command_timeout,
    which then cancels it on the server): a database that stops answering altogether, which
    PostgreSQL's own statement_timeout cannot notice, is a TimeoutError then, not a wait.
    """
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min(2, size),
        max_size=size,
        init=_init_connection,
        connection_class=PooledConnection,
        command_timeout=statement_timeout,
    )
    assert pool is not None
    return pool

"""The PostgreSQL connection pool and the schema migrations that run at start."""

import logging
from importlib import resources

import asyncpg
from pgvector.asyncpg import register_vector

log = logging.getLogger(__name__)

# Serialises migrations when several workers start at once.
_MIGRATION_LOCK = 0x61676E72  # "agnr"


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


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


async def connect(dsn: str, size: int) -> asyncpg.Pool:
    """Open a pool on `dsn` after bringing its schema up to date."""
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    pool = await asyncpg.create_pool(
        dsn, min_size=min(2, size), max_size=size, init=_init_connection
    )
    assert pool is not None
    return pool

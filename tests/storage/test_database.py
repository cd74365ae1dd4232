"""The engine's Database: a Pool from construction on, which says so when it is used before
`start` or after `stop`, and answers the stores' pool methods once started."""

from pathlib import Path

import pytest

from agentic_rag.config import Settings
from agentic_rag.storage.database import Database, DatabaseNotStarted
from agentic_rag.storage.pool import Pool


def pool_methods(pool: Pool) -> Pool:
    """What the stores are given (mypy checks that `Database` is one)."""
    return pool


async def test_a_database_used_before_start_or_after_stop_says_it_is_not_started(
    database_url: str, tmp_path: Path
) -> None:
    database = Database(Settings(data_dir=tmp_path, database_url=database_url), size=1)
    pool = pool_methods(database)
    with pytest.raises(DatabaseNotStarted, match="not started"):
        await pool.fetchval("SELECT 1")
    with pytest.raises(DatabaseNotStarted, match="not started"):
        pool.acquire()
    await database.start()
    try:
        assert await pool.fetchval("SELECT $1::int + 1", 1) == 2
        assert await pool.execute("SELECT 1") == "SELECT 1"
        row = await pool.fetchrow("SELECT 'a' AS name")
        assert row is not None and row["name"] == "a"
        assert [r["n"] for r in await pool.fetch("SELECT generate_series(1, 3) AS n")] == [1, 2, 3]
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT 7") == 7
    finally:
        await database.stop()
    with pytest.raises(DatabaseNotStarted, match="not started"):
        await pool.fetch("SELECT 1")

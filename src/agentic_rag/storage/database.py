"""The database the settings name: DATABASE_URL, or the embedded PostgreSQL in the data
directory (started if needed, and stopped after unless another process still uses it). For as
long as a block runs (`open_database`), or as the engine's `Database`, built before it starts."""

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import asyncpg
from asyncpg.pool import PoolAcquireContext

from agentic_rag.config import Settings
from agentic_rag.storage.embedded import EmbeddedPostgres
from agentic_rag.storage.pool import Pool
from agentic_rag.storage.postgres import connect


def embedded_postgres(settings: Settings) -> EmbeddedPostgres:
    """The embedded server of the settings' data directory, sized by them."""
    return EmbeddedPostgres(
        settings.data_dir, shared_buffers_mb=settings.postgres_shared_buffers_mb
    )


@asynccontextmanager
async def open_database(settings: Settings, *, size: int = 2) -> AsyncIterator[Pool]:
    """The settings' database, started for as long as the block runs."""
    database = Database(settings, size=size)
    await database.start()
    try:
        yield database
    finally:
        await database.stop()


class DatabaseNotStarted(RuntimeError):
    pass


class Database:
    """The settings' database as a `Pool` from construction on; `start` connects it.

    The composition root builds every store on it before the database exists (the embedded
    server's port is known once it runs). It answers the pool methods the stores use
    (storage/pool.py) with the pool `start` opens, after the migrations. Used before `start`
    (or after `stop`) it says so.
    """

    def __init__(self, settings: Settings, *, size: int) -> None:
        self._settings, self._size = settings, size
        self._opened: asyncpg.Pool | None = None
        self._stack = AsyncExitStack()
        self._dsn: str | None = None

    @property
    def started(self) -> bool:
        return self._opened is not None

    @property
    def dsn(self) -> str:
        if self._dsn is None:
            raise DatabaseNotStarted("the database is not started: it has no address yet")
        return self._dsn

    async def start(self) -> None:
        """DATABASE_URL, or the embedded server started; migrations applied; the pool open."""
        dsn = self._settings.database_url
        if dsn is None:
            postgres = embedded_postgres(self._settings)
            self._stack.push_async_callback(asyncio.to_thread, postgres.stop)
            dsn = await asyncio.to_thread(postgres.start)
        self._dsn = dsn
        opened = await connect(dsn, self._size, self._settings.database_statement_timeout_seconds)
        self._stack.push_async_callback(opened.close)
        self._opened = opened

    async def stop(self) -> None:
        self._opened = None
        await self._stack.aclose()

    @property
    def _pool(self) -> asyncpg.Pool:
        if self._opened is None:
            raise DatabaseNotStarted("the database is not started (the engine starts it)")
        return self._opened

    def acquire(self) -> PoolAcquireContext:
        """A connection, or TimeoutError past the settings' acquire timeout (every connection
        busy, or a new one not answered: a frozen database is an outage, not a wait)."""
        return self._pool.acquire(timeout=self._settings.database_acquire_timeout_seconds)

    # asyncpg's pool acquires for these without a timeout: through `acquire`, with one.
    async def execute(self, query: str, *args: object) -> str:
        async with self.acquire() as conn:
            return await conn.execute(query, *args)

    async def executemany(self, command: str, args: Iterable[Sequence[object]]) -> None:
        async with self.acquire() as conn:
            await conn.executemany(command, args)

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        async with self.acquire() as conn:
            return await conn.fetch(query, *args)

    async def fetchrow(self, query: str, *args: object) -> asyncpg.Record | None:
        async with self.acquire() as conn:
            return await conn.fetchrow(query, *args)

    async def fetchval(self, query: str, *args: object) -> Any:
        async with self.acquire() as conn:
            return await conn.fetchval(query, *args)

    async def close(self) -> None:
        await self.stop()

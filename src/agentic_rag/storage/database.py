"""The database the settings name: DATABASE_URL, or the embedded PostgreSQL in the data
directory (started if needed, and stopped after unless another process still uses it). For as
long as a block runs (`open_database`), or as the engine's `Database`, built before it starts."""

import asyncio
from collections.abc import AsyncIterator
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
        opened = await connect(dsn, self._size)
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
        return self._pool.acquire()

    async def execute(self, query: str, *args: object) -> str:
        return await self._pool.execute(query, *args)

    async def executemany(self, command: str, args: object) -> None:
        await self._pool.executemany(command, args)

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        return await self._pool.fetch(query, *args)

    async def fetchrow(self, query: str, *args: object) -> asyncpg.Record | None:
        return await self._pool.fetchrow(query, *args)

    async def fetchval(self, query: str, *args: object) -> Any:
        return await self._pool.fetchval(query, *args)

    async def close(self) -> None:
        await self.stop()

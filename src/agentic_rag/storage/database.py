"""The database the settings name, for as long as a block runs: DATABASE_URL, or the embedded
PostgreSQL in the data directory (started if needed, and stopped after unless another process
still uses it)."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import asyncpg

from agentic_rag.config import Settings
from agentic_rag.storage.embedded import EmbeddedPostgres
from agentic_rag.storage.postgres import connect


def embedded_postgres(settings: Settings) -> EmbeddedPostgres:
    """The embedded server of the settings' data directory, sized by them."""
    return EmbeddedPostgres(
        settings.data_dir, shared_buffers_mb=settings.postgres_shared_buffers_mb
    )


@asynccontextmanager
async def open_database(settings: Settings, *, size: int = 2) -> AsyncIterator[asyncpg.Pool]:
    async with AsyncExitStack() as stack:
        dsn = settings.database_url
        if dsn is None:
            postgres = embedded_postgres(settings)
            stack.push_async_callback(asyncio.to_thread, postgres.stop)
            dsn = await asyncio.to_thread(postgres.start)
        pool = await connect(dsn, size=size)
        stack.push_async_callback(pool.close)
        yield pool

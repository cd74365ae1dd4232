"""Pool: the methods of a connection pool the stores use, as asyncpg types them.

asyncpg's own pool answers it, and so does the engine's `Database` (database.py), which is
built before the database it connects to exists. The stores are written against this
protocol, not against either class.
"""

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from asyncpg import Record
from asyncpg.pool import PoolAcquireContext


class Pool(Protocol):
    """What the stores ask of a pool (asyncpg's options, such as timeouts, they do not use)."""

    def acquire(self) -> PoolAcquireContext: ...

    async def execute(self, query: str, *args: object) -> str: ...

    async def executemany(self, command: str, args: Iterable[Sequence[object]]) -> None: ...

    async def fetch(self, query: str, *args: object) -> list[Record]: ...

    async def fetchrow(self, query: str, *args: object) -> Record | None: ...

    async def fetchval(self, query: str, *args: object) -> Any: ...

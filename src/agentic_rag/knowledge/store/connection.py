"""What the stores' helpers run their statements through: a connection or a pooled one."""

import asyncpg

Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy

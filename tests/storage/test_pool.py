"""The connection pool: a connection goes back without a reset round trip unless a use left
session state behind (LISTEN), and then it comes back clean."""

from agentic_rag.storage.postgres import connect


async def test_a_plain_use_sends_no_reset_statement(database_url: str) -> None:
    pool = await connect(database_url, 1)
    sent: list[str] = []
    try:
        async with pool.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(record.query))
            await conn.fetchval("SELECT 1")
        async with pool.acquire() as conn:  # the same connection: the pool holds one
            await conn.fetchval("SELECT 2")
    finally:
        await pool.close()
    assert sent == ["SELECT 1", "SELECT 2"]


async def test_a_connection_that_listened_is_reset_before_its_next_use(database_url: str) -> None:
    def heard(*_: object) -> None:
        pass

    pool = await connect(database_url, 1)
    try:
        async with pool.acquire() as conn:
            await conn.add_listener("agentic_rag_test", heard)
            assert await conn.fetchval("SELECT count(*) FROM pg_listening_channels()") == 1
            await conn.remove_listener("agentic_rag_test", heard)
            await conn.execute("LISTEN agentic_rag_test")  # as if the removal had failed
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM pg_listening_channels()") == 0
        async with pool.acquire() as conn:  # and then plain again
            sent: list[str] = []
            conn.add_query_logger(lambda record: sent.append(record.query))
        assert sent == []
    finally:
        await pool.close()


async def test_a_transaction_left_open_is_rolled_back(database_url: str) -> None:
    pool = await connect(database_url, 1)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TABLE t (x int)")
            await conn.execute("BEGIN")
            await conn.execute("INSERT INTO t VALUES (1)")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM t") == 0
            assert not conn.is_in_transaction()
    finally:
        await pool.close()

"""Whether a failure is the database's absence (down, restarting, cut off), not the query's.

Such failures come in bursts while the database is away: callers answer them as a refusal to
retry (not an internal error) and log them once per outage (`RepeatedFailure`), not each time.
"""

import asyncpg

_UNREACHABLE = (
    OSError,  # refused, no socket, reset
    TimeoutError,
    asyncpg.PostgresConnectionError,  # SQLSTATE class 08, and a connection that was closed
    asyncpg.exceptions.OperatorInterventionError,  # class 57: shutting down, starting up
    asyncpg.InterfaceError,  # a connection released or closed under the query
    asyncpg.exceptions.InternalClientError,  # a protocol state broken by a dropped connection
)


def database_unreachable(error: BaseException) -> bool:
    """Whether `error` says the database could not be reached, rather than refused a query."""
    return isinstance(error, _UNREACHABLE)

"""Whether the knowledge graph's database answers, as the graph skills find it.

While FalkorDB is down, stopped or cut off, every graph call fails on its connection. A graph
skill then refuses with `GraphUnreachable`, which names the database and says to retry, instead
of failing with the client library's error and a traceback; the log says so once when the
calls start failing and once, with their count, when one succeeds again (`RepeatedFailure`).
Nothing needs restarting: the client opens a new connection on the next call (the Retry that
`GraphService.start` gives its connection pool).

Graphiti's FalkorDB driver also logs each failed query at ERROR, with its text and parameters
(the caller's words), before raising the error to its caller, which reports it (a skill's
failure, an episode's attempt): a few lines per call during an outage. `QueryErrorsAtDebug`
keeps them for DEBUG logging.
"""

import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

import redis.exceptions
from pydantic import BaseModel

from agentic_rag.config import without_credentials
from agentic_rag.graph.errors import Unavailable
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.skills.registry import Handler, SkillContext

log = logging.getLogger(__name__)

DRIVER_LOGGER = "graphiti_core.driver.falkordb_driver"
DRIVER_QUERY_ERROR = "Error executing FalkorDB query"

# The FalkorDB client's (redis-py's) errors of a connection, and a socket's it lets through;
# not any TimeoutError: an extraction waiting for the client's model raises one.
_UNREACHABLE = (
    redis.exceptions.ConnectionError,  # refused, reset, closed (and a failed AUTH)
    redis.exceptions.TimeoutError,
    ConnectionError,
)


def graph_unreachable(error: BaseException) -> bool:
    """Whether `error` says the graph's database could not be reached, rather than refused a
    query."""
    return isinstance(error, _UNREACHABLE)


class GraphUnreachable(Unavailable):
    """A graph call while the graph's database does not answer."""

    def __init__(self, database: str) -> None:
        super().__init__(f"the knowledge graph's database {database} is unreachable; retry later")


class QueryErrorsAtDebug(logging.Filter):
    """The driver's failed-query records, at DEBUG: the error reaches its caller anyway."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(DRIVER_QUERY_ERROR):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def quiet_driver_query_errors() -> None:
    """Install `QueryErrorsAtDebug` on the driver's logger, once."""
    driver = logging.getLogger(DRIVER_LOGGER)
    if not any(isinstance(f, QueryErrorsAtDebug) for f in driver.filters):
        driver.addFilter(QueryErrorsAtDebug())


class Reachability:
    """The graph skills' view of their database: `call` around each use of it."""

    def __init__(self, graph_url: str | None, backend: str) -> None:
        """`graph_url`: AGENTIC_RAG_GRAPH_URL, if set; `backend`: the embedded server's
        description otherwise (`GraphService.backend`)."""
        self.database = f"at {without_credentials(graph_url)}" if graph_url else f"({backend})"
        quiet_driver_query_errors()
        self._outage = RepeatedFailure(
            log,
            f"the knowledge graph's database {self.database}",
            traceback=False,
            meanwhile="graph calls are refused until it answers",
        )

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """A block that uses the database: its connection failure is `GraphUnreachable`."""
        try:
            yield
        except Exception as exc:
            if not graph_unreachable(exc):
                raise
            self._outage.failed()
            raise GraphUnreachable(self.database) from exc
        self._outage.succeeded()

    def guarded(self, handler: Handler) -> Handler:
        """`handler` called within `call`."""

        @functools.wraps(handler)
        async def guarded(ctx: SkillContext, args: Any) -> BaseModel:
            with self.call():
                return await handler(ctx, args)

        return guarded

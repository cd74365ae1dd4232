"""MCP logging: skills' log lines sent to the client as `notifications/message`.

What a skill reports while it runs (a crawl's progress: `info`), how a durable call runs (the
task that runs it: `debug`), and what its result says went wrong or was left out (a failed
page: `warning`; a skipped page or a note such as a fallback: `notice`) reach the client at
their level, each on the stream of the request that caused it.

2025-11-25: the client chooses the least severe level it wants with `logging/setLevel`
(`warning` until it does). A level belongs to the caller: over stdio the one client of the
process; over stateless HTTP, which has no session, the credential (tenant and subject) in the
worker that answered `logging/setLevel`. 2026-07-28: no `logging/setLevel`; a request asks
for log lines in its `_meta` (`io.modelcontextprotocol/logLevel`), or gets none.
"""

from collections.abc import Iterable
from typing import Any, get_args

import mcp.types as types
from mcp.server.connection import allowed_log_levels
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from agentic_rag.knowledge.results import IngestSummary
from agentic_rag.mcp.access import Context, PrincipalFor, require

Level = types.LoggingLevel
LEVELS: tuple[Level, ...] = get_args(Level)  # least severe first (RFC 5424)
DEFAULT_LEVEL: Level = "warning"

CallerKey = tuple[str, str]


class LogLevels:
    """The `logging/setLevel` handler and the level each caller set."""

    def __init__(self, principal_for: PrincipalFor) -> None:
        self._principal_for = principal_for
        self._levels: dict[CallerKey, Level] = {}

    async def set_level(
        self, ctx: Context, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        principal = require(self._principal_for(ctx), "read", "logging/setLevel")
        self._levels[(principal.tenant, principal.subject)] = params.level
        return types.EmptyResult()

    def for_request(self, ctx: Context) -> "ClientLog":
        """Where the log lines of the request `ctx` go, and which levels may."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return ClientLog(ctx, allowed_log_levels(ctx.protocol_version, ctx.meta))
        principal = self._principal_for(ctx)
        key = (principal.tenant, principal.subject) if principal is not None else None
        least = self._levels.get(key, DEFAULT_LEVEL) if key is not None else DEFAULT_LEVEL
        return ClientLog(ctx, frozenset(LEVELS[LEVELS.index(least) :]))


class ClientLog:
    """The log lines of one request, sent on its own stream at the levels allowed."""

    def __init__(self, ctx: Context, allowed: frozenset[Level]) -> None:
        self._ctx, self._allowed = ctx, allowed

    async def send(self, level: Level, text: str, logger: str) -> None:
        if level not in self._allowed or self._ctx.request_id is None:
            return
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, data=text, logger=logger)
        )
        await self._ctx.session.send_notification(notification, self._ctx.request_id)

    async def send_all(self, lines: Iterable[tuple[Level, str]], logger: str) -> None:
        for level, text in lines:
            await self.send(level, text, logger)


def result_lines(
    output_model: type[Any], structured: dict[str, Any] | None
) -> list[tuple[Level, str]]:
    """The log lines a tool's result carries: an ingestion's failed and skipped pages and its
    notes (the same lines whether it ran in this process or as a task on another worker)."""
    if structured is None or not issubclass(output_model, IngestSummary):
        return []
    summary = IngestSummary.model_validate(structured)
    lines: list[tuple[Level, str]] = [
        ("warning", f"failed: {page.url}: {page.reason}") for page in summary.failed
    ]
    lines += [("notice", f"skipped: {page.url}: {page.reason}") for page in summary.skipped]
    lines += [("notice", note) for note in summary.notes]
    return lines

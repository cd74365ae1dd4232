"""MCP sessions over Streamable HTTP: what a 2025-11-25 client that `initialize`s gets (one worker).

A handshake-era client that sends `initialize` is given a session (`Mcp-Session-Id`): the
SDK's stateful transport, which keeps the connection's back channel between requests. Over it
the server asks the client while a call runs (elicitation, sampling) and tells it of changes
between calls (`notifications/resources/updated` on its GET stream). A session lives in this
process's memory, so sessions are offered only when the server runs one worker (http.py);
requests without a session, and 2026-07-28 requests, stay stateless.

A session is its opener's: a request that names it with another credential (another tenant,
or another key of the same tenant) is answered as if it did not exist (404), as the SDK does
for its own authentication. Sessions are bounded: one idle (no request in flight, no open GET
stream) for `AGENTIC_RAG_MCP_SESSION_IDLE_SECONDS` is closed, a tenant may hold
`AGENTIC_RAG_MCP_SESSIONS_PER_TENANT` at once (one more is refused with 429 until one ends),
and all are closed when the server stops.
"""

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from mcp.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from agentic_rag.mcp.access import Context
from agentic_rag.security.principal import Principal, principal_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owner:
    """The credential a session was opened with: only it may use the session."""

    tenant: str
    subject: str
    method: str

    @classmethod
    def of(cls, principal: Principal) -> "Owner":
        return cls(principal.tenant, principal.subject, principal.method)


class _Manager(StreamableHTTPSessionManager):
    """The SDK's stateful session manager, which says when a session ends (client DELETE,
    idle timeout, crash, an opening request refused, or the manager stopping)."""

    def __init__(self, ended: Callable[[str], None], **options: Any) -> None:
        super().__init__(**options)
        self._ended = ended

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self._ended(session_id)
        await super()._discard_session(session_id, transport)


class HttpSessions:
    """The sessions of this process's `/mcp`: opened by `initialize`, then used by id."""

    def __init__(
        self,
        server: Server[Any],
        max_body_bytes: int,
        *,
        per_tenant: int,
        idle_seconds: float,
    ) -> None:
        # One manager per response mode, as for stateless requests (http.py): a session keeps
        # the mode of the `Accept` header of its `initialize`.
        self._sse, self._json = (
            _Manager(
                self._ended,
                app=server,
                json_response=json_response,
                stateless=False,
                session_idle_timeout=idle_seconds,
                max_request_body_size=max_body_bytes,
            )
            for json_response in (False, True)
        )
        self._per_tenant, self._idle_seconds = per_tenant, idle_seconds
        self._owners: dict[str, tuple[Owner, _Manager]] = {}
        self._held: Counter[str] = Counter()  # tenant -> sessions open or opening
        self._listeners: list[Callable[[str], None]] = []

    def on_end(self, listener: Callable[[str], None]) -> None:
        """Call `listener(session_id)` when a session ends (to forget what it subscribed to)."""
        self._listeners.append(listener)

    def held(self, tenant: str) -> int:
        """The sessions `tenant` holds now, open or being opened."""
        return self._held[tenant]

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve sessions until the block ends, then close every one that is still open."""
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._sse.run())
            await stack.enter_async_context(self._json.run())
            yield
        # The managers ended each session's task (and told `_ended`) as they stopped.
        self._owners.clear()
        self._held.clear()

    async def serve(self, scope: Scope, receive: Receive, send: Send, session_id: str) -> None:
        """A request of the session `session_id`: its manager's, if the caller opened it."""
        known = self._owners.get(session_id)
        if known is None or known[0] != Owner.of(principal_of(scope)):
            if known is not None:
                log.warning(
                    "refused MCP session %.12s... to a credential that did not open it", session_id
                )
            # The same answer as for a session that never existed, as the SDK gives.
            await _error(404, -32600, "Session not found")(scope, receive, send)
            return
        await known[1].handle_request(scope, receive, send)

    async def open(self, scope: Scope, receive: Receive, send: Send, *, accepts_sse: bool) -> None:
        """An `initialize` without a session: open one for the caller, within its tenant's limit."""
        owner = Owner.of(principal_of(scope))
        if self._held[owner.tenant] >= self._per_tenant:
            message = (
                f"tenant {owner.tenant!r} holds {self._per_tenant} MCP sessions, the most it may: "
                "end one (DELETE /mcp with its Mcp-Session-Id) or let one expire "
                f"(after {self._idle_seconds:g} idle seconds), then initialize again"
            )
            await _error(429, -32600, message)(scope, receive, send)
            return
        manager = self._sse if accepts_sse else self._json
        self._held[owner.tenant] += 1  # held while opening: concurrent openings count too
        opened: list[str] = []

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = _session_id(message)
                if session_id is not None:
                    self._owners[session_id] = (owner, manager)
                    opened.append(session_id)
            await send(message)

        try:
            await manager.handle_request(scope, receive, recording)
        finally:
            if not opened:  # refused: an opened session is released when it ends (`_ended`)
                self._release(owner.tenant)

    def _ended(self, session_id: str) -> None:
        known = self._owners.pop(session_id, None)
        if known is None:  # not opened (refused), or told twice
            return
        self._release(known[0].tenant)
        for listener in self._listeners:
            listener(session_id)

    def _release(self, tenant: str) -> None:
        self._held[tenant] -= 1
        if self._held[tenant] <= 0:
            del self._held[tenant]


def session_of(ctx: Context) -> str | None:
    """The session an MCP request over HTTP came in (None: a stateless request)."""
    request = ctx.request
    return request.headers.get(MCP_SESSION_ID_HEADER) if isinstance(request, Request) else None


def _session_id(start: Message) -> str | None:
    name = MCP_SESSION_ID_HEADER.encode()
    for key, value in start.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}},
        status_code=status,
    )


async def buffered(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """The request's body (or its first `limit` bytes and more), and a `receive` that gives
    the request's messages again from the start."""
    taken: list[Message] = []
    body = bytearray()
    while len(body) <= limit:
        message = await receive()
        taken.append(message)
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break

    async def again() -> Message:
        return taken.pop(0) if taken else await receive()

    return bytes(body), again


def opens_session(body: bytes) -> bool:
    """Whether `body` is a JSON-RPC `initialize` request (a handshake that opens a session)."""
    if b"initialize" not in body:  # most requests: no parse
        return False
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"

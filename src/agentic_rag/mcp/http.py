"""MCP over Streamable HTTP at `/mcp`, answering JSON or SSE as the client asks.

Requests are stateless, so that any worker can answer any request; with one worker (the
default), a 2025-11-25 client that `initialize`s gets a session (sessions.py), over which the
server can ask it while a call runs (elicitation, sampling) and notify its subscriptions. With
several workers a session would live in one process while the kernel spreads a client's
requests over all of them, so none is offered: such clients are served statelessly.

The SDK fixes the response mode per session manager, so there are two of each kind, and a
request goes to the one its `Accept` header asks for: a client that accepts
`text/event-stream` gets SSE (and with it progress notifications), one that accepts only
`application/json` gets one JSON response.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcp.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentic_rag.config import Settings
from agentic_rag.mcp.access import principal_from_http
from agentic_rag.mcp.request_state import sealed_by_signing_keys
from agentic_rag.mcp.server import build_server
from agentic_rag.mcp.sessions import HttpSessions, buffered, opens_session, session_of
from agentic_rag.mcp.subscriptions import DocumentChanges, DocumentSubscriptions, TenantListen
from agentic_rag.skills import SkillRegistry
from agentic_rag.skills.groups import ToolGroups
from agentic_rag.storage.pool import Pool
from agentic_rag.tasks.push import SigningKeys
from agentic_rag.tasks.service import TaskService

if TYPE_CHECKING:
    from agentic_rag.knowledge.service import KnowledgeService

PATH = "/mcp"

# RFC 9110 §5.5: a field value does not include leading or trailing whitespace.
_OWS = b" \t"

log = logging.getLogger(__name__)


class _ByAccept:
    """The ASGI endpoint of `/mcp`: hands each request to its session, or to the stateless
    manager of the mode it accepts."""

    def __init__(
        self,
        sse: StreamableHTTPSessionManager,
        json: StreamableHTTPSessionManager,
        sessions: HttpSessions | None,
        max_body_bytes: int,
    ) -> None:
        self._sse, self._json = sse, json
        self._sessions, self._max_body_bytes = sessions, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # uvicorn's httptools parser keeps a value's surrounding whitespace, and the SDK compares
        # `Mcp-Name`, `Mcp-Method` and `MCP-Protocol-Version` with the body verbatim.
        headers = [(name, value.strip(_OWS)) for name, value in scope["headers"]]
        scope = {**scope, "headers": headers}
        request = Request(scope)
        if request.method == "GET" and not _names_event_stream(request.headers.get("accept", "")):
            # A browser or plain curl: the SDK would open an event stream that never ends.
            await _NOT_A_STREAM_CLIENT(scope, receive, send)
            return
        _, accepts_sse = check_accept_headers(request)
        version = request.headers.get("mcp-protocol-version")
        if self._sessions is not None and (
            version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
        ):
            session_id = request.headers.get(MCP_SESSION_ID_HEADER)
            if session_id is not None:
                await self._sessions.serve(scope, receive, send, session_id)
                return
            if request.method == "POST":
                body, receive = await buffered(receive, self._max_body_bytes)
                if opens_session(body):
                    await self._sessions.open(scope, receive, send, accepts_sse=accepts_sse)
                    return
        manager = self._sse if accepts_sse else self._json
        await manager.handle_request(scope, receive, send)


_NOT_A_STREAM_CLIENT = PlainTextResponse(
    "This is an MCP endpoint (Streamable HTTP). MCP clients POST JSON-RPC requests here; a GET "
    "opens an event stream only for a client that accepts text/event-stream. The server's "
    "home page (/) says how to connect.\n",
    status_code=405,
    headers={"Allow": "POST, GET, DELETE"},
)


def _names_event_stream(accept: str) -> bool:
    """Whether an Accept header names text/event-stream itself (not */* or text/*)."""
    return any(
        part.split(";", 1)[0].strip().lower() == "text/event-stream" for part in accept.split(",")
    )


class _StatelessNoise(logging.Filter):
    """Demotes to DEBUG the SDK's INFO lines that say nothing a server's log needs.

    There are four session managers, each announcing its start and stop; every stateless
    request's transport "terminates" a session that never existed (`Terminating session:
    None`); and a session's opening and end are a client's connecting and leaving, which the
    access log shows already.
    """

    LINES = frozenset(
        {
            "StreamableHTTP session manager started",
            "StreamableHTTP session manager shutting down",
            "Terminating session: None",
        }
    )
    PREFIXES = ("Created new transport with session ID: ", "Terminating session: ")
    LOGGERS = ("mcp.server.streamable_http_manager", "mcp.server.streamable_http")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        message = record.getMessage()
        if message not in self.LINES and not message.startswith(self.PREFIXES):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_STATELESS_NOISE = _StatelessNoise()


class McpHttp:
    """The MCP endpoint of the app: mount `app` last, and run `run()` in the app's lifespan."""

    def __init__(
        self,
        registry: SkillRegistry,
        settings: Settings,
        *,
        tasks: TaskService,
        knowledge: "KnowledgeService | None",
        database: Pool,
    ) -> None:
        """`tasks` and `knowledge`: the services the server calls (see build_server);
        `database`: whose document changes 2026-07-28 clients may listen to."""
        for name in _StatelessNoise.LOGGERS:
            logging.getLogger(name).addFilter(_STATELESS_NOISE)  # adds an instance only once
        # Sessions live in one process: with several workers, every request is stateless.
        self.sessions_offered = settings.mcp_sessions and settings.workers == 1
        self._why_stateless = (
            "AGENTIC_RAG_MCP_SESSIONS is false"
            if not settings.mcp_sessions
            else f"a session would live in one of the {settings.workers} workers"
        )
        # A 2026-07-28 `subscriptions/listen` is a request whose response is the stream; a
        # 2025-11-25 `resources/subscribe` needs a session, to notify it between requests.
        listen = subscriptions = None
        if knowledge is not None:
            listen = TenantListen(principal_from_http)
            if self.sessions_offered:
                subscriptions = DocumentSubscriptions(knowledge, principal_from_http, session_of)
        consumers = [c.changed for c in (subscriptions, listen) if c is not None]
        self._changes = DocumentChanges(*consumers) if consumers else None
        self._database = database
        # The key of round trips' state comes from the signing keys every worker shares.
        self._keys = SigningKeys(database)
        self.server: Server[Any] = build_server(
            registry,
            principal_from_http,
            tasks=tasks,
            knowledge=knowledge,
            subscriptions=subscriptions,
            listen=listen,
            request_state=sealed_by_signing_keys(self._keys, principal_from_http),
            instructions=settings.agent_description,
            tool_groups=ToolGroups.of(settings.mcp_tool_groups),
        )
        # No security_settings: the SDK's Host and Origin checks stay off, since the app's
        # HostGuard (security/host_guard.py) checks every route, this one included.
        self._managers = [
            StreamableHTTPSessionManager(
                app=self.server,
                json_response=json_response,
                stateless=True,
                max_request_body_size=settings.max_body_bytes,
            )
            for json_response in (False, True)
        ]
        self.sessions: HttpSessions | None = None
        if self.sessions_offered:
            self.sessions = HttpSessions(
                self.server,
                settings.max_body_bytes,
                per_tenant=settings.mcp_sessions_per_tenant,
                idle_seconds=settings.mcp_session_idle_seconds,
            )
            if subscriptions is not None:
                self.sessions.on_end(subscriptions.forget)
        sse, json = self._managers
        endpoint = _ByAccept(sse, json, self.sessions, settings.max_body_bytes)
        # Route, not Mount: a Mount("/mcp") answers POST /mcp with a redirect to /mcp/.
        self.app = Starlette(routes=[Route(PATH, endpoint=endpoint)])

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session managers: a mounted app's own lifespan never runs."""
        sse, json = self._managers
        await self._keys.load()
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(sse.run())
            await stack.enter_async_context(json.run())
            if self.sessions is not None:
                await stack.enter_async_context(self.sessions.run())
            if self._changes is not None:
                await stack.enter_async_context(self._changes.listening(self._database))
            if self.sessions is not None:
                log.info(
                    "MCP at %s: Streamable HTTP, stateless, with sessions for 2025-11-25 "
                    "clients that initialize (elicitation, sampling, subscriptions)",
                    PATH,
                )
            else:
                log.info(
                    "MCP at %s: Streamable HTTP, stateless only (%s): 2025-11-25 clients get "
                    "no elicitation, sampling or resources/subscribe (2026-07-28 clients get "
                    "all of them)",
                    PATH,
                    self._why_stateless,
                )
            yield

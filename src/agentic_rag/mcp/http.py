"""MCP over Streamable HTTP at `/mcp`, stateless, answering JSON or SSE as the client asks.

Stateless so that any worker can answer any request: no session lives in one process's
memory. The SDK fixes the response mode per session manager, so there are two, and each
request goes to the one its `Accept` header asks for: a client that accepts
`text/event-stream` gets SSE (and with it progress notifications), one that accepts only
`application/json` gets one JSON response.
"""

import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp.server import Server
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentic_rag.config import Settings
from agentic_rag.mcp.access import principal_from_http
from agentic_rag.mcp.request_state import sealed_by_signing_keys
from agentic_rag.mcp.server import build_server
from agentic_rag.mcp.subscriptions import DocumentChanges, TenantListen
from agentic_rag.skills import SkillRegistry
from agentic_rag.skills.groups import ToolGroups
from agentic_rag.storage.pool import Pool
from agentic_rag.tasks.push import SigningKeys
from agentic_rag.tasks.service import TaskService

if TYPE_CHECKING:
    from agentic_rag.knowledge.service import KnowledgeService

PATH = "/mcp"

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

# RFC 9110 §5.5: a field value does not include leading or trailing whitespace.
_OWS = b" \t"

log = logging.getLogger(__name__)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection that lets in the names this server is configured under.

    Loopback names always; the bind address unless it is a wildcard; the public URL's host.
    Bound to a wildcard address with no public URL, the server cannot know its own name, so
    the check is off: such a server requires credentials (the CLI refuses it otherwise).
    """
    hosts = list(_LOOPBACK)
    if not _is_wildcard(settings.host):
        hosts.append(f"[{settings.host}]" if ":" in settings.host else settings.host)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    if settings.public_url:
        public = urlsplit(settings.public_url)
        if public.hostname:
            hosts.append(public.netloc.rpartition("@")[2])
            origins.append(f"{public.scheme}://{public.netloc.rpartition('@')[2]}")
    elif _is_wildcard(settings.host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts = [*hosts, *(f"{h}:*" for h in hosts)]
    allowed_origins = [*origins, *(f"{o}:*" for o in origins)]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(allowed_hosts)),
        allowed_origins=list(dict.fromkeys(allowed_origins)),
    )


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


class _ByAccept:
    """The ASGI endpoint of `/mcp`: hands each request to the manager of the mode it accepts."""

    def __init__(
        self, sse: StreamableHTTPSessionManager, json: StreamableHTTPSessionManager
    ) -> None:
        self._sse, self._json = sse, json

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
    """Demotes to DEBUG the SDK's INFO lines that say nothing about a stateless server.

    There are two session managers, each announcing its start and stop, and every request's
    transport "terminates" a session that never existed (`Terminating session: None`).
    """

    LINES = frozenset(
        {
            "StreamableHTTP session manager started",
            "StreamableHTTP session manager shutting down",
            "Terminating session: None",
        }
    )
    LOGGERS = ("mcp.server.streamable_http_manager", "mcp.server.streamable_http")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or record.getMessage() not in self.LINES:
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
        # Stateless: no connection outlives a request, so no `resources/subscribe`; a
        # 2026-07-28 `subscriptions/listen` is a request whose response is the stream.
        listen = TenantListen(principal_from_http) if knowledge is not None else None
        self._changes = DocumentChanges(listen.changed) if listen is not None else None
        self._database = database
        # The key of round trips' state comes from the signing keys every worker shares.
        self._keys = SigningKeys(database)
        self.server: Server[Any] = build_server(
            registry,
            principal_from_http,
            tasks=tasks,
            knowledge=knowledge,
            listen=listen,
            request_state=sealed_by_signing_keys(self._keys, principal_from_http),
            instructions=settings.agent_description,
            tool_groups=ToolGroups.of(settings.mcp_tool_groups),
        )
        security = transport_security(settings)
        self._managers = [
            StreamableHTTPSessionManager(
                app=self.server,
                json_response=json_response,
                stateless=True,
                security_settings=security,
                max_request_body_size=settings.max_body_bytes,
            )
            for json_response in (False, True)
        ]
        # Route, not Mount: a Mount("/mcp") answers POST /mcp with a redirect to /mcp/.
        self.app = Starlette(routes=[Route(PATH, endpoint=_ByAccept(*self._managers))])

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session managers: a mounted app's own lifespan never runs."""
        sse, json = self._managers
        await self._keys.load()
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(sse.run())
            await stack.enter_async_context(json.run())
            if self._changes is not None:
                await stack.enter_async_context(self._changes.listening(self._database))
            log.info("MCP session managers started: stateless Streamable HTTP at %s", PATH)
            yield

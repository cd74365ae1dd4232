"""The stdio bridge: a desktop client's MCP session, answered by a running agentic-rag over HTTP.

Desktop clients start their MCP servers as processes. Bridged, that process holds no data: it
forwards the tools, resources and prompts requests to the server's `/mcp` with the SDK client
and the configured API key, so the desktop client works on the server's data, as that key's
tenant. (MCP tasks are not forwarded: the bridge does not declare them, so clients do not
ask for them; a long call is durable all the same, as the server runs it as a task.)
Progress and log messages come back as they are (at the level the client set with
`logging/setLevel`, or its 2026-07-28 request asks for), completions are the server's; a
question the server asks (a 2026-07-28 `input_required`
result) is passed on to a client of that era, or asked with an elicitation request of the
client's own session, and the answer is sent back in a retry of the call.

Each request goes upstream on a connection of its own. The server is stateless, so nothing is
lost, and a server that restarts or goes away fails the requests made meanwhile, with an
error, rather than the bridge: the SDK's HTTP transport ends on a connection error.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypedDict

import httpx2
import mcp.types as types
from mcp import Client, ClientSession
from mcp.client.session import ClientRequestContext, LoggingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from agentic_rag.mcp.access import Context
from agentic_rag.mcp.client_log import DEFAULT_LEVEL, LEVELS
from agentic_rag.mcp.elicitation import ANSWER
from agentic_rag.mcp.server import MAX_ROUNDS, elicitation_channel, unaskable

API_KEY_HEADER = "X-API-Key"

# Tool calls may run long: the server pings its SSE stream, so only a dead server hits this.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def endpoint(url: str) -> str:
    """The MCP endpoint of a server given by its base URL (or by the endpoint itself)."""
    url = url.rstrip("/")
    return url if url.endswith("/mcp") else f"{url}/mcp"


def describe(exc: BaseException) -> str:
    """One line for an error; anyio task groups wrap failures, the first leaf says what."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _not_over_http(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    # Declares the elicitation capability upstream. Stateless HTTP carries no requests from
    # the server, so the questions arrive as input_required results, handled by the bridge.
    return types.ErrorData(code=types.INVALID_REQUEST, message="the bridge asks no questions")


class Upstream:
    """The running server: its endpoint, the credential, and the protocol era it speaks."""

    def __init__(self, url: str, http: httpx2.AsyncClient) -> None:
        self.url, self._http = endpoint(url), http
        self._mode: str = "auto"
        self._discovered: types.DiscoverResult | None = None
        self.server_info: types.Implementation | None = None
        self.instructions: str | None = None

    def _client(
        self, log: LoggingFnT | None = None, level: types.LoggingLevel | None = None
    ) -> Client:
        return Client(
            streamable_http_client(self.url, http_client=self._http),
            mode=self._mode,
            prior_discover=self._discovered,
            elicitation_callback=_not_over_http,
            cache=None,  # every tools/list asks the server: its tools are the truth
            logging_callback=log,
            log_level=level,  # asked per request in 2026-07-28: the server keeps no level
        )

    async def probe(self) -> None:
        """Connect once, so that a wrong URL or credential fails at start, and learn the era
        to speak from then on without probing again."""
        async with self._client() as client:
            self.server_info, self.instructions = client.server_info, client.instructions
            discovered = client.session.discover_result
            if discovered is not None:
                self._mode, self._discovered = client.protocol_version, discovered
            else:
                self._mode = "legacy"

    async def ask[T](
        self,
        request: Callable[[ClientSession], Awaitable[T]],
        log: LoggingFnT | None = None,
        level: types.LoggingLevel | None = None,
    ) -> T:
        """`request` on a fresh connection, its log messages to `log` from `level` up; the
        server's MCP errors are raised as they are."""
        refused: MCPError | None = None
        try:
            async with self._client(log, level) as client:
                try:
                    return await request(client.session)
                except MCPError as exc:
                    refused = exc  # the server's own answer, raised below as it is
        except Exception as exc:
            if refused is None:
                raise MCPError(
                    types.INTERNAL_ERROR,
                    f"agentic-rag at {self.url} did not answer: {describe(exc)}",
                ) from None
        assert refused is not None
        raise refused


class Bridge:
    """The tools, resources and prompts handlers of the stdio side, answered upstream."""

    def __init__(self, upstream: Upstream) -> None:
        self._upstream = upstream
        self._level: types.LoggingLevel = DEFAULT_LEVEL  # this process's one client's

    async def set_level(
        self, ctx: Context, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self._level = params.level
        return types.EmptyResult()

    def _log_of(self, ctx: Context) -> tuple[LoggingFnT, types.LoggingLevel | None]:
        """Where the server's log messages for the request `ctx` go, and from which level."""

        async def forward(params: types.LoggingMessageNotificationParams) -> None:
            notification = types.LoggingMessageNotification(params=params)
            await ctx.session.send_notification(notification, ctx.request_id)

        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return forward, self._level
        requested = (ctx.meta or {}).get(types.LOG_LEVEL_META_KEY)
        return forward, requested if requested in LEVELS else None

    async def complete(
        self, ctx: Context, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context else None
        return await self._upstream.ask(
            lambda session: session.complete(params.ref, argument, context)
        )

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        page = types.PaginatedRequestParams(cursor=params.cursor if params else None)
        listed = await self._upstream.ask(lambda session: session.list_tools(params=page))
        return types.ListToolsResult(
            tools=listed.tools, next_cursor=listed.next_cursor, **_cache_hint(listed)
        )

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        page = types.PaginatedRequestParams(cursor=params.cursor if params else None)
        listed = await self._upstream.ask(lambda session: session.list_resources(params=page))
        return types.ListResourcesResult(
            resources=listed.resources, next_cursor=listed.next_cursor, **_cache_hint(listed)
        )

    async def list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        page = types.PaginatedRequestParams(cursor=params.cursor if params else None)
        listed = await self._upstream.ask(
            lambda session: session.list_resource_templates(params=page)
        )
        return types.ListResourceTemplatesResult(
            resource_templates=listed.resource_templates,
            next_cursor=listed.next_cursor,
            **_cache_hint(listed),
        )

    async def read_resource(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        read = await self._upstream.ask(lambda session: session.read_resource(params.uri))
        return types.ReadResourceResult(contents=read.contents, **_cache_hint(read))

    async def list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        page = types.PaginatedRequestParams(cursor=params.cursor if params else None)
        listed = await self._upstream.ask(lambda session: session.list_prompts(params=page))
        return types.ListPromptsResult(
            prompts=listed.prompts, next_cursor=listed.next_cursor, **_cache_hint(listed)
        )

    async def get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        got = await self._upstream.ask(
            lambda session: session.get_prompt(params.name, params.arguments), *self._log_of(ctx)
        )
        return types.GetPromptResult(description=got.description, messages=got.messages)

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        responses, state = params.input_responses, params.request_state
        for _ in range(MAX_ROUNDS + 1):
            result = await self._upstream.ask(
                _call(params, progress, responses, state), *self._log_of(ctx)
            )
            if isinstance(result, types.CallToolResult):
                return result
            questions = _form_questions(result)
            if questions is None:
                return _error(f"tool {params.name!r} asked for input the bridge cannot forward")
            channel = elicitation_channel(ctx)
            if channel == "input-required":
                return result  # the client answers and retries, through this bridge again
            if channel != "request":
                message, fields = _what_is_asked(questions)
                return unaskable(ctx, params.name, message, fields, channel)
            responses = {}
            for key, question in questions.items():
                responses[key] = await ctx.session.elicit_form(
                    question.message, question.requested_schema, related_request_id=ctx.request_id
                )
            state = result.request_state
        return _error(f"tool {params.name!r} still needs input after {MAX_ROUNDS} answers")


class _CacheHint(TypedDict):
    ttl_ms: int
    cache_scope: Literal["public", "private"]


def _cache_hint(result: types.CacheableResult) -> _CacheHint:
    """The server's `ttlMs` and `cacheScope`, passed on: its lists are what the client gets."""
    return {"ttl_ms": result.ttl_ms, "cache_scope": result.cache_scope}


def _call(
    params: types.CallToolRequestParams,
    progress: ProgressFnT,
    responses: types.InputResponses | None,
    state: str | None,
) -> Callable[[ClientSession], Awaitable[types.CallToolResult | types.InputRequiredResult]]:
    def call(
        session: ClientSession,
    ) -> Awaitable[types.CallToolResult | types.InputRequiredResult]:
        return session.call_tool(
            params.name,
            params.arguments,
            progress_callback=progress,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )

    return call


def _form_questions(
    result: types.InputRequiredResult,
) -> dict[str, types.ElicitRequestFormParams] | None:
    questions = {}
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, types.ElicitRequest):
            return None
        if not isinstance(request.params, types.ElicitRequestFormParams):
            return None
        questions[key] = request.params
    return questions


def _what_is_asked(questions: dict[str, types.ElicitRequestFormParams]) -> tuple[str, list[str]]:
    messages = [q.message for q in questions.values()]
    fields = [
        name
        for q in questions.values()
        for name in q.requested_schema.get("properties", {})
        if name != ANSWER
    ]
    return " ".join(messages), fields


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


@asynccontextmanager
async def bridge_server(url: str, api_key: str | None) -> AsyncIterator[Server[Any]]:
    """A stdio-side MCP server forwarding to the agentic-rag at `url`.

    Connecting probes the server, so a wrong URL or credential fails here, at start.
    """
    headers = {API_KEY_HEADER: api_key} if api_key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=_TIMEOUT) as http:
        upstream = Upstream(url, http)
        await upstream.probe()
        bridge = Bridge(upstream)
        server: Server[Any] = Server(
            "agentic-rag",
            version=upstream.server_info.version if upstream.server_info else "",
            instructions=upstream.instructions,
            on_list_tools=bridge.list_tools,
            on_call_tool=bridge.call_tool,
            on_list_resources=bridge.list_resources,
            on_list_resource_templates=bridge.list_resource_templates,
            on_read_resource=bridge.read_resource,
            on_list_prompts=bridge.list_prompts,
            on_get_prompt=bridge.get_prompt,
            on_completion=bridge.complete,
        )
        # Added, not passed: the SDK warns of the constructor's argument (client_log.py).
        server.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, bridge.set_level
        )
        yield server

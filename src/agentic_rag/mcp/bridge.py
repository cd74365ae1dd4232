"""The stdio bridge: a desktop client's MCP session, answered by a running agentic-rag over HTTP.

Desktop clients start their MCP servers as processes. Bridged, that process holds no data: it
forwards `tools/list` and `tools/call` to the server's `/mcp` with the SDK client and the
configured API key, so the desktop client works on the server's data, as that key's tenant.
Progress comes back as progress; a question the server asks (a 2026-07-28 `input_required`
result) is passed on to a client of that era, or asked with an elicitation request of the
client's own session, and the answer is sent back in a retry of the call.
"""

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from agentic_rag.mcp.elicitation import ANSWER, cannot_ask
from agentic_rag.mcp.server import MAX_ROUNDS, Context, elicitation_channel

API_KEY_HEADER = "X-API-Key"

# Tool calls may run long: the server pings its SSE stream, so only a dead server hits this.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def endpoint(url: str) -> str:
    """The MCP endpoint of a server given by its base URL (or by the endpoint itself)."""
    url = url.rstrip("/")
    return url if url.endswith("/mcp") else f"{url}/mcp"


async def _not_over_http(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    # Declares the elicitation capability upstream. Stateless HTTP carries no requests from
    # the server, so the questions arrive as input_required results, handled by the bridge.
    return types.ErrorData(code=types.INVALID_REQUEST, message="the bridge asks no questions")


class Bridge:
    """The `tools/list` and `tools/call` handlers of the stdio side, answered upstream."""

    def __init__(self, upstream: Client, url: str) -> None:
        self._upstream, self._url = upstream, url

    async def _forward[T](self, call: Awaitable[T]) -> T:
        try:
            return await call
        except MCPError:
            raise  # the server's own answer (a missing scope, an unknown tool): pass it on
        except Exception as exc:
            raise MCPError(
                types.INTERNAL_ERROR, f"agentic-rag at {self._url} did not answer: {exc}"
            ) from None

    def _call_upstream(
        self,
        params: types.CallToolRequestParams,
        progress: ProgressFnT,
        responses: types.InputResponses | None,
        state: str | None,
    ) -> Awaitable[types.CallToolResult | types.InputRequiredResult]:
        return self._upstream.session.call_tool(
            params.name,
            params.arguments,
            progress_callback=progress,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        page = types.PaginatedRequestParams(cursor=params.cursor if params else None)
        listed = await self._forward(self._upstream.session.list_tools(params=page))
        return types.ListToolsResult(tools=listed.tools, next_cursor=listed.next_cursor)

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        responses, state = params.input_responses, params.request_state
        for _ in range(MAX_ROUNDS + 1):
            result = await self._forward(self._call_upstream(params, progress, responses, state))
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
                return _error(cannot_ask(params.name, message, fields, channel))
            responses = {}
            for key, question in questions.items():
                responses[key] = await ctx.session.elicit_form(
                    question.message, question.requested_schema, related_request_id=ctx.request_id
                )
            state = result.request_state
        return _error(f"tool {params.name!r} still needs input after {MAX_ROUNDS} answers")


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
    """A stdio-side MCP server forwarding to the agentic-rag at `url`, connected until exit.

    Connecting probes the server, so a wrong URL or credential fails here, at start.
    """
    headers = {API_KEY_HEADER: api_key} if api_key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=_TIMEOUT) as http:
        upstream = Client(
            streamable_http_client(endpoint(url), http_client=http),
            elicitation_callback=_not_over_http,
            cache=None,  # every tools/list asks the server: its tools are the truth
        )
        async with upstream:
            bridge = Bridge(upstream, url)
            yield Server(
                "agentic-rag",
                version=(upstream.server_info.version if upstream.server_info else ""),
                instructions=upstream.instructions,
                on_list_tools=bridge.list_tools,
                on_call_tool=bridge.call_tool,
            )

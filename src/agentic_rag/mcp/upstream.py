"""Upstream MCP servers wrapped as skills (docs/graph.md): a separately deployed Graphiti MCP
server, or any MCP server, whose tools this server offers as its own.

Each tool of an upstream `name` becomes the skill `<name>_<tool>` (MCP allows `.` too, but
the function-calling APIs that MCP clients hand tools to accept only `[A-Za-z0-9_-]`), with
the upstream's input and output schemas as they are. So it is listed in `/mcp`, the Agent
Card and A2A, and every call comes through this server's authentication, scopes and rate
limits. The tenant guard: the namespace arguments the tool declares (`group_id`,
`group_ids`) are checked against the caller's tenant (graph/namespaces.py) and overwritten
with the caller's namespace, also when the caller left them out, so no call reaches another
tenant's data or the upstream's shared default; results name the caller's namespaces again.

The tools are listed at start; an upstream that does not answer is logged and tried again
every `upstream_mcp_retry_seconds` until it does, and its tools appear then. A listed
upstream that is down at call time fails the call with an error that says so.
"""

import asyncio
import copy
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.tool_name_validation import TOOL_NAME_REGEX
from pydantic import BaseModel, ConfigDict, create_model
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, GenerateJsonSchema, JsonSchemaMode

from agentic_rag.config import Settings, UpstreamMcp
from agentic_rag.graph.namespaces import Namespace, NamespaceError, namespace, namespaces
from agentic_rag.mcp.bridge import describe
from agentic_rag.skills import Skill, SkillContext, SkillError, SkillRegistry

log = logging.getLogger(__name__)

# Tool calls may run long (an upstream extracting an episode with an LLM).
_TIMEOUT = httpx2.Timeout(10.0, read=300.0)


class Declared(BaseModel):
    """A JSON object whose schema the upstream declared: the upstream checks its own
    arguments, so any object validates, and the schema is shown exactly as declared."""

    model_config = ConfigDict(extra="allow")
    declared_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool | None = None,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = GenerateJsonSchema,
        mode: JsonSchemaMode = "validation",
        *,
        union_format: Literal["any_of", "primitive_type_array"] = "any_of",
    ) -> dict[str, Any]:
        return copy.deepcopy(cls.declared_schema)


def declared(name: str, schema: dict[str, Any]) -> type[Declared]:
    model = create_model(name, __base__=Declared)
    model.declared_schema = schema
    return model


class UpstreamText(BaseModel):
    """The result of an upstream tool that declares no output schema: its text."""

    text: str


def _text_of(output: UpstreamText) -> str:
    return output.text


class UpstreamDown(SkillError):
    """The upstream MCP server did not answer."""


@dataclass(frozen=True)
class NamespaceGuard:
    """The namespace arguments of one tool, and the value each namespace has upstream."""

    single: tuple[str, ...]
    lists: tuple[str, ...]
    prefix: str

    @classmethod
    def of(cls, config: UpstreamMcp, schema: dict[str, Any]) -> "NamespaceGuard":
        properties = schema.get("properties", {})
        guarded = [name for name in config.namespace_arguments if name in properties]
        lists = tuple(name for name in guarded if _takes_array(properties[name]))
        single = tuple(name for name in guarded if name not in lists)
        return cls(single, lists, config.namespace_prefix)

    def upstream(self, ns: Namespace) -> str:
        # The digest, not the caller's name: a valid Graphiti group id whatever the tenant.
        return f"{self.prefix}{ns.graph}"

    def apply(
        self, tenant: str, arguments: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """`arguments` with every namespace argument overwritten, and the caller's name of
        each upstream value; `NamespaceError` for a group outside the tenant."""
        arguments, names = dict(arguments), {}
        for name in self.single:
            given = arguments.get(name)
            if given is not None and not isinstance(given, str):
                raise SkillError(f"{name} must be a string")
            ns = namespace(tenant, given)
            arguments[name], names[self.upstream(ns)] = self.upstream(ns), ns.name
        for name in self.lists:
            given = arguments.get(name)
            if not (given is None or isinstance(given, str) or _strings(given)):
                raise SkillError(f"{name} must be a string or a list of strings")
            targets = namespaces(tenant, given)
            arguments[name] = [self.upstream(ns) for ns in targets]
            names.update((self.upstream(ns), ns.name) for ns in targets)
        return arguments, names


def _takes_array(schema: dict[str, Any]) -> bool:
    kinds = schema.get("type")
    if kinds == "array" or (isinstance(kinds, list) and "array" in kinds):
        return True
    return any(_takes_array(s) for s in (*schema.get("anyOf", ()), *schema.get("oneOf", ())))


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """`value` with every upstream namespace in its strings replaced by the caller's name
    (a digest, so it never occurs by chance)."""
    if isinstance(value, str):
        for upstream, name in names.items():
            value = value.replace(upstream, name)
        return value
    if isinstance(value, list):
        return [_renamed(item, names) for item in value]
    if isinstance(value, dict):
        return {key: _renamed(item, names) for key, item in value.items()}
    return value


def _text(result: types.CallToolResult, names: dict[str, str]) -> str:
    parts = [b.text if isinstance(b, types.TextContent) else f"[{b.type}]" for b in result.content]
    return str(_renamed("\n".join(parts), names))


class UpstreamServer:
    """One configured upstream: its endpoint, its credential, and the protocol era it speaks."""

    def __init__(self, config: UpstreamMcp, http: httpx2.AsyncClient) -> None:
        self.config, self._http = config, http
        self._mode: str = "auto"
        self._discovered: types.DiscoverResult | None = None

    def _client(self) -> Client:
        return Client(
            streamable_http_client(self.config.url, http_client=self._http),
            mode=self._mode,
            prior_discover=self._discovered,
            cache=None,
        )

    async def list_tools(self) -> list[types.Tool]:
        """Every tool, page by page; learns the era to speak from then on."""
        tools: list[types.Tool] = []
        async with self._client() as client:
            cursor: str | None = None
            while True:
                page = await client.session.list_tools(
                    params=types.PaginatedRequestParams(cursor=cursor)
                )
                tools.extend(page.tools)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            discovered = client.session.discover_result
            if discovered is not None:
                self._mode, self._discovered = client.protocol_version, discovered
            else:
                self._mode = "legacy"
        return tools

    async def call(
        self, tool: str, arguments: dict[str, Any], progress: ProgressFnT, names: dict[str, str]
    ) -> types.CallToolResult:
        """The upstream's result; `UpstreamDown` when it does not answer, `SkillError` with
        its reason, in the caller's `names` of its namespaces, when it refuses the call."""
        answer: types.CallToolResult | types.InputRequiredResult | None = None
        refused: MCPError | None = None
        try:
            async with self._client() as client:
                try:
                    answer = await client.session.call_tool(
                        tool, arguments, progress_callback=progress, allow_input_required=True
                    )
                except MCPError as exc:
                    refused = exc  # the upstream's own answer, raised below
        except Exception as exc:
            if answer is None and refused is None:
                raise UpstreamDown(
                    f"the upstream MCP server {self.config.name!r} at {self.config.url} "
                    f"did not answer ({describe(exc)}); try again later"
                ) from None
        if refused is not None:
            reason = _renamed(refused.message, names)
            raise SkillError(
                f"the upstream MCP server {self.config.name!r} refused the call: {reason}"
            )
        if isinstance(answer, types.InputRequiredResult):
            raise SkillError(_renamed(_unforwarded(answer), names))
        assert answer is not None
        return answer


def _unforwarded(result: types.InputRequiredResult) -> str:
    asked = [
        request.params.message
        for request in (result.input_requests or {}).values()
        if isinstance(request, types.ElicitRequest)
    ]
    return (
        "the upstream tool asks a question, which is not forwarded; call it with the "
        f"answer among its arguments instead. It asks: {' '.join(asked) or 'for input'}"
    )


def skill_for(upstream: UpstreamServer, tool: types.Tool) -> Skill:
    """The skill that proxies `tool` of `upstream`; ValueError for a name MCP refuses."""
    config = upstream.config
    name = f"{config.name}_{tool.name}"
    if not TOOL_NAME_REGEX.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid MCP tool name")
    guard = NamespaceGuard.of(config, tool.input_schema)
    output: type[BaseModel] = (
        UpstreamText
        if tool.output_schema is None
        else declared(f"{name}_output", tool.output_schema)
    )

    async def handler(ctx: SkillContext, args: BaseModel) -> BaseModel:
        try:
            arguments, names = guard.apply(ctx.tenant, args.model_dump(mode="json"))
        except NamespaceError as refused:
            raise SkillError(str(refused)) from refused

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            await ctx.progress(message or (f"{progress:g}/{total:g}" if total else f"{progress:g}"))

        result = await upstream.call(tool.name, arguments, forward, names)
        if result.is_error:
            raise SkillError(_text(result, names) or "the upstream tool failed without a reason")
        if output is UpstreamText:
            return UpstreamText(text=_text(result, names))
        if result.structured_content is None:
            raise SkillError(f"the upstream tool {tool.name!r} returned no structured content")
        return output.model_validate(_renamed(result.structured_content, names))

    return Skill(
        name=name,
        description=f"{tool.description or tool.name} (tool {tool.name!r} of the upstream "
        f"MCP server {config.name!r})",
        tags=("upstream", config.name),
        examples=(),
        input_model=declared(f"{name}_arguments", tool.input_schema),
        output_model=output,
        handler=handler,
        render=_text_of if output is UpstreamText else None,
        group="upstream",
    )


class Upstreams:
    """The configured upstreams, listed into `registry` at start and retried until they answer."""

    def __init__(self, settings: Settings, registry: SkillRegistry) -> None:
        self._configs, self._registry = settings.upstream_mcp, registry
        self._retry_seconds = settings.upstream_mcp_retry_seconds

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            servers = []
            for config in self._configs:
                headers = {k: v.get_secret_value() for k, v in config.headers.items()}
                http = httpx2.AsyncClient(headers=headers, timeout=_TIMEOUT)
                stack.push_async_callback(http.aclose)
                servers.append(UpstreamServer(config, http))
            listed = await asyncio.gather(*(self._offer(server) for server in servers))
            pending = [server for server, ok in zip(servers, listed, strict=True) if not ok]
            retry = asyncio.create_task(self._retry(pending)) if pending else None
            try:
                yield
            finally:
                if retry is not None:
                    retry.cancel()
                    await asyncio.gather(retry, return_exceptions=True)

    async def _retry(self, pending: list[UpstreamServer]) -> None:
        while pending:
            await asyncio.sleep(self._retry_seconds)
            listed = await asyncio.gather(*(self._offer(server) for server in pending))
            pending = [server for server, ok in zip(pending, listed, strict=True) if not ok]

    async def _offer(self, server: UpstreamServer) -> bool:
        """Register the tools of `server` as skills; False if it did not answer."""
        config = server.config
        try:
            tools = await server.list_tools()
        except Exception as exc:
            log.warning(
                "upstream MCP server %r at %s did not answer (%s); trying again every %g s",
                config.name,
                config.url,
                describe(exc),
                self._retry_seconds,
            )
            return False
        offered = []
        for tool in tools:
            try:
                offered.append(self._registry.add(skill_for(server, tool)).name)
            except ValueError as exc:
                log.warning("upstream MCP server %r: tool skipped: %s", config.name, exc)
        log.info(
            "upstream MCP server %r at %s: %d tools offered: %s",
            config.name,
            config.url,
            len(offered),
            ", ".join(offered),
        )
        return True

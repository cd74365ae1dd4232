"""The MCP server built from the skills registry (docs/clients.md): every skill is a tool;
with the knowledge engine, documents are resources and `answer_with_citations` a prompt.

Built on the SDK's low-level `Server` rather than `MCPServer`: `MCPServer` derives a tool's
schemas from a Python signature, while a skill already has its input and output models, and
the tool must show exactly their JSON schemas.

A call of a resumable skill (a long ingestion) runs as an A2A task of the engine (durable.py),
and handshake-era clients may run it as an MCP task (tasks.py); other calls run in-process.
"""

import functools
import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from agentic_rag.mcp.access import Context, PrincipalFor, require
from agentic_rag.mcp.calls import (
    ArgumentsError,
    find_skill,
    tool_error,
    tool_result,
    validate_arguments,
)
from agentic_rag.mcp.client_log import LogLevels, result_lines
from agentic_rag.mcp.completions import Completions
from agentic_rag.mcp.context import McpSkillContext, ProgressSteps
from agentic_rag.mcp.durable import DurableCalls
from agentic_rag.mcp.elicitation import (
    Declined,
    Gathered,
    Question,
    Round,
    cannot_ask,
    decode_state,
    encode_state,
    merge,
    question_for,
)
from agentic_rag.mcp.listing import ToolSurface, input_schema
from agentic_rag.mcp.prompts import CitationPrompt
from agentic_rag.mcp.resources import DocumentResources
from agentic_rag.mcp.sampling import CallSampling, SamplingNeeded
from agentic_rag.mcp.subscriptions import DocumentSubscriptions, TenantListen
from agentic_rag.mcp.tasks import McpTasks, TaskServer
from agentic_rag.security.principal import Principal
from agentic_rag.skills import InputRequired, ResultPart, Skill, SkillError, SkillRegistry
from agentic_rag.skills.groups import DEFAULT_GROUPS, ToolGroups
from agentic_rag.skills.metering import SkillCall
from agentic_rag.tasks.service import TaskService

if TYPE_CHECKING:
    from agentic_rag.knowledge.service import KnowledgeService

log = logging.getLogger(__name__)

# Answers one call may collect before it gives up: a skill that keeps asking is a bug.
MAX_ROUNDS = 10

# The key of a skill's question in an InputRequiredResult, unless the skill names it.
INPUT_KEY = "input"

# How long a 2026-07-28 client may reuse a list or a read (`ttlMs`), and whether a shared
# cache may (`cacheScope`). What a credential sees is its own (its tenant's documents, the tools
# of its key's groups): private. The template is the same for everyone. Document lists and
# texts change when anything is ingested, so they are kept briefly (`subscriptions/listen`
# says when they change); tools and prompts change only with the deployment.
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=300_000, scope="private"),
    "prompts/list": CacheHint(ttl_ms=300_000, scope="private"),
    "resources/templates/list": CacheHint(ttl_ms=3_600_000, scope="public"),
    "resources/list": CacheHint(ttl_ms=10_000, scope="private"),
    "resources/read": CacheHint(ttl_ms=10_000, scope="private"),
}


Channel = Literal["input-required", "request"]


def elicitation_channel(ctx: Context) -> Channel | str:
    """How this call can ask its client a question, or why it cannot."""
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if not modern and not ctx.session.can_send_request:
        # Handshake-era elicitation is a request to the client, whose answer comes back on a
        # session; a stateless HTTP request has none (and sees no capabilities: no initialize).
        return (
            f"the client speaks MCP {ctx.protocol_version}, whose elicitation needs a session, "
            "and this request came without one (a client that initializes gets one from a "
            "server of one worker; clients on 2026-07-28 can always be asked)"
        )
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    # An empty elicitation capability means form mode (the spec's backward compatibility).
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return "the client does not support elicitation (form mode)"
    # 2026-07-28: asked in the result, answered in a retry of the call, so stateless.
    return "input-required" if modern else "request"


def unaskable(
    ctx: Context, tool: str, message: str, fields: Sequence[str], reason: str
) -> types.CallToolResult:
    """The answer to a call whose question cannot be asked (`reason` says why).

    A question only a person can answer (free text, such as `clear_graph`'s confirmation)
    needs the client's elicitation capability: a 2026-07-28 request that did not declare it is
    refused with `MissingRequiredClientCapabilityError` (HTTP 400), as the spec requires.
    Missing arguments need no person (the model can send them): an `isError` result names them,
    as it does for every handshake-era client.
    """
    text = cannot_ask(tool, message, fields, reason)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and not fields:
        required = types.ClientCapabilities(
            elicitation=types.ElicitationCapability(form=types.FormElicitationCapability())
        )
        data = types.MissingRequiredClientCapabilityErrorData(required_capabilities=required)
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            text,
            data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )
    return tool_error(text)


def modelless(ctx: Context, tool: str) -> types.CallToolResult:
    """The answer to a call of a skill that needs the client's model when the client offers
    none: a 2026-07-28 request that did not declare `sampling` is refused with
    `MissingRequiredClientCapabilityError` (HTTP 400); other clients get an `isError` result."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        required = types.ClientCapabilities(sampling=types.SamplingCapability())
        data = types.MissingRequiredClientCapabilityErrorData(required_capabilities=required)
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"tool {tool!r} needs the client's model: declare the sampling capability",
            data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )
    return tool_error(
        f"tool {tool!r} needs the client's model, and this client offers none here "
        "(it did not declare sampling, or this request has no session to ask it on)"
    )


CallKey = tuple[str, str, types.RequestId]


class InFlight:
    """Tool calls of handshake-era clients over stateless HTTP, by caller and request id.

    Their `notifications/cancelled` comes in a POST of its own, which the SDK serves on a fresh
    connection that knows no request, so the SDK cannot cancel the call; this table finds it.
    It holds this process's calls: a call running in another worker runs to its end.
    """

    def __init__(self) -> None:
        self._calls: dict[CallKey, list[anyio.CancelScope]] = {}

    @contextmanager
    def track(self, key: CallKey) -> Iterator[anyio.CancelScope]:
        scope = anyio.CancelScope()
        calls = self._calls.setdefault(key, [])
        calls.append(scope)
        try:
            yield scope
        finally:
            calls.remove(scope)
            if not calls:
                del self._calls[key]

    def cancel(self, key: CallKey) -> None:
        calls = self._calls.get(key, [])
        # Two clients of one credential may use the same request id: then cancel neither.
        if len(calls) == 1:
            calls[0].cancel()


class SkillTools:
    """The `tools/list` and `tools/call` handlers over a registry."""

    def __init__(
        self,
        registry: SkillRegistry,
        principal_for: PrincipalFor,
        durable: DurableCalls,
        levels: LogLevels,
        surface: ToolSurface,
    ) -> None:
        self.registry, self._principal_for, self._durable = registry, principal_for, durable
        self._levels, self._surface = levels, surface
        self._in_flight = InFlight()
        self._input_schemas: dict[str, tuple[Skill, dict[str, Any]]] = {}

    def input_schema_of(self, name: str) -> dict[str, Any] | None:
        """The tool's input schema, which the SDK reads on every `tools/call` (to check the
        `Mcp-Param-*` headers): made once per skill, as pydantic takes milliseconds to."""
        skill = self.registry.get(name)
        if skill is None:
            return None
        known = self._input_schemas.get(name)
        if known is None or known[0] is not skill:
            known = self._input_schemas[name] = (skill, input_schema(skill.input_model))
        return known[1]

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        principal = require(self._principal_for(ctx), "write", "tools/call")
        stateless_handshake = (
            ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and not ctx.session.can_send_request
        )
        if not stateless_handshake or ctx.request_id is None:
            return await self._call_tool(ctx, params, principal)
        with self._in_flight.track(_call_key(principal, ctx.request_id)) as scope, scope:
            return await self._call_tool(ctx, params, principal)
        # Cancelled: the client no longer waits for an answer, but the SDK sends one.
        return tool_error(f"tool {params.name!r} was cancelled by the client")

    async def cancelled(self, ctx: Context, params: types.CancelledNotificationParams) -> None:
        """`notifications/cancelled`: stop the call it names, if this process runs it."""
        if params.request_id is not None:
            self._in_flight.cancel(_call_key(self._principal_for(ctx), params.request_id))

    async def _call_tool(
        self, ctx: Context, params: types.CallToolRequestParams, principal: Principal
    ) -> types.CallToolResult | types.InputRequiredResult:
        skill = find_skill(self.registry, params.name)
        gathered, rounds = Gathered.first(skill, params.arguments or {}), 0
        # The client's model (sampling.py), and the replies it gave in earlier rounds.
        sampling = CallSampling.of(ctx, params)
        if skill.needs_client_model and sampling.model is None:
            return modelless(ctx, skill.name)
        if sampling.request_state is not None:
            # A 2026-07-28 retry: what earlier rounds gathered, plus this round's answer.
            previous = decode_state(sampling.request_state, skill.name)
            answer = (params.input_responses or {}).get(previous.name or INPUT_KEY)
            if answer is None:
                # Not answered: the spec has the question asked again rather than an error.
                return sampling.carried(_ask_again(skill, previous))
            try:
                gathered = merge(previous.gathered, previous.fields, previous.message, answer)
            except Declined as exc:
                return tool_error(str(exc))
            rounds = previous.rounds
        elif sampling.resumed is not None:
            gathered, rounds = sampling.resumed
        client_log = self._levels.for_request(ctx)
        steps = ProgressSteps(ctx.session.report_progress, client_log, skill.name)
        while True:
            try:
                if skill.resumable:
                    validate_arguments(skill, gathered.arguments)  # asks for what is missing
                    result = await self._durable.call(skill, gathered.arguments, principal, steps)
                else:
                    output, attached = await self._run(skill, gathered, principal, steps, sampling)
                    result = tool_result(skill, output, attached)
                if not result.is_error:
                    lines = result_lines(skill.output_model, result.structured_content)
                    await client_log.send_all(lines, skill.name)
                return result
            except SamplingNeeded:  # an InputRequired: before it
                rounds += 1
                if rounds > MAX_ROUNDS:
                    return tool_error(
                        f"tool {skill.name!r} still needs its client's model after "
                        f"{MAX_ROUNDS} rounds"
                    )
                return sampling.input_required(gathered, rounds)
            except InputRequired as needed:
                question = question_for(skill, needed)
                if question is None:
                    reason = "a form cannot hold those arguments"
                    return tool_error(
                        cannot_ask(skill.name, needed.question, needed.missing, reason)
                    )
                rounds += 1
                if rounds > MAX_ROUNDS:
                    return tool_error(
                        f"tool {skill.name!r} still needs input after {MAX_ROUNDS} answers"
                    )
                channel = elicitation_channel(ctx)
                if channel == "input-required":
                    # With what the skill asked its client meanwhile (sampling.py), in one round.
                    asked = _input_required(skill, gathered, question, rounds)
                    return sampling.input_required(gathered, rounds, asked)
                if channel != "request":
                    return unaskable(ctx, skill.name, question.message, question.fields, channel)
                try:
                    gathered = await _ask(ctx, gathered, question)
                except Declined as exc:
                    return tool_error(str(exc))
            except SkillError as exc:
                return tool_error(f"tool {skill.name!r} failed: {exc}")
            except ArgumentsError as exc:
                return tool_error(str(exc))
            except Exception:
                # The exception's text may carry internals: it stays in the log, under a reference.
                ref = uuid.uuid4().hex[:12]
                log.exception("tool %r failed unexpectedly (ref %s)", skill.name, ref)
                return tool_error(
                    f"tool {skill.name!r} failed with an internal error (ref {ref}); "
                    "the server log has the details"
                )

    async def _run(
        self,
        skill: Skill,
        gathered: Gathered,
        principal: Principal,
        steps: ProgressSteps,
        sampling: CallSampling,
    ) -> tuple[BaseModel, list[ResultPart]]:
        """The skill's output, and the parts it attached."""
        args = validate_arguments(skill, gathered.arguments)
        # Counted like A2A's calls (docs/operations.md: agentic_rag_skill_calls_total).
        with SkillCall(skill.name, "mcp"):
            context = McpSkillContext(
                principal.tenant,
                gathered.texts,
                steps,
                sampling.model,
                sampling.roots,
                offers=functools.partial(self._surface.allows, principal),
                groups=principal.groups,
            )
            output = await skill.run(context, args)
        if not isinstance(output, skill.output_model):
            raise TypeError(f"{skill.name} returned {type(output).__name__}, not its output model")
        return output, context.attached


def _call_key(principal: Principal, request_id: types.RequestId) -> CallKey:
    # Only the caller who made a call can cancel it: the id alone is the client's choice.
    return (principal.tenant, principal.subject, request_id)


def _input_required(
    skill: Skill, gathered: Gathered, question: Question, rounds: int
) -> types.InputRequiredResult:
    ask = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=question.message, requested_schema=question.schema
        )
    )
    return types.InputRequiredResult(
        input_requests={question.name or INPUT_KEY: ask},
        request_state=encode_state(skill.name, gathered, question, rounds),
    )


def _ask_again(skill: Skill, previous: Round) -> types.CallToolResult | types.InputRequiredResult:
    question = question_for(skill, InputRequired(previous.message, previous.fields, previous.name))
    if question is None:  # the skill's arguments changed since the question was asked
        return tool_error(f"tool {skill.name!r} can no longer ask: {previous.message}")
    if previous.rounds >= MAX_ROUNDS:
        return tool_error(f"tool {skill.name!r} still needs input after {MAX_ROUNDS} answers")
    return _input_required(skill, previous.gathered, question, previous.rounds + 1)


async def _ask(ctx: Context, gathered: Gathered, question: Question) -> Gathered:
    """Ask over the connection (handshake-era clients with a back channel) and merge the answer."""
    try:
        answer = await ctx.session.elicit_form(
            question.message, question.schema, related_request_id=ctx.request_id
        )
    except MCPError as exc:
        raise Declined(
            f"the client could not answer the question ({exc.message}): {question.message}"
        ) from None
    return merge(gathered, question.fields, question.message, answer)


def _version() -> str:
    try:
        return version("agentic-rag")
    except PackageNotFoundError:
        return "0"


def build_server(
    registry: SkillRegistry,
    principal_for: PrincipalFor,
    *,
    tasks: TaskService,
    knowledge: "KnowledgeService | None",
    subscriptions: DocumentSubscriptions | None = None,
    listen: TenantListen | None = None,
    request_state: RequestStateBoundary,
    instructions: str | None = None,
    tool_groups: ToolGroups = DEFAULT_GROUPS,
) -> Server[Any]:
    """An MCP server whose tools are the skills of `registry`, each called as `principal_for`.

    `tasks`: the task service, which runs the calls of resumable skills; `knowledge`: the
    knowledge service, whose documents are resources (None: no documents);
    `subscriptions`, for a server of one lasting connection (stdio), its client's
    subscriptions to documents (None: no `resources/subscribe`); `listen` the streams of
    document changes of 2026-07-28 clients (None: no `subscriptions/listen`);
    `request_state` seals the state of 2026-07-28 round trips (request_state.py);
    `tool_groups`: the groups of tools the deployment offers (listing.py).
    """
    levels = LogLevels(principal_for)
    surface = ToolSurface(registry, tool_groups, principal_for)
    tools = SkillTools(registry, principal_for, DurableCalls(tasks), levels, surface)
    documents = DocumentResources(knowledge, principal_for)
    prompt = CitationPrompt(registry, principal_for, levels, surface)
    completions = Completions(registry, knowledge, principal_for)
    server = TaskServer(
        "agentic-rag",
        version=_version(),
        instructions=instructions,
        cache_hints=CACHE_HINTS,
        get_tool_input_schema=tools.input_schema_of,
        on_list_tools=surface.list_tools,
        on_call_tool=tools.call_tool,
        on_list_resources=documents.list_resources,
        on_list_resource_templates=documents.list_templates,
        on_read_resource=documents.read,
        on_list_prompts=prompt.list_prompts,
        on_get_prompt=prompt.get_prompt,
        on_completion=completions.complete,
        on_subscribe_resource=subscriptions.subscribe if subscriptions else None,
        on_unsubscribe_resource=subscriptions.unsubscribe if subscriptions else None,
        on_subscriptions_listen=listen,
    )
    # Added, not passed: the SDK warns of the constructor's argument (gone in 2026-07-28,
    # where a request asks for log lines in its `_meta`; client_log.py).
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, levels.set_level)
    server.middleware.append(request_state)
    if subscriptions is not None:
        server.middleware.append(subscriptions.seen)
    server.add_notification_handler(
        "notifications/cancelled", types.CancelledNotificationParams, tools.cancelled
    )
    # Before the tasks' middleware: a task-augmented call passes the same gate.
    server.middleware.append(surface.guard)
    McpTasks(registry, tasks, principal_for).install(server)
    return server

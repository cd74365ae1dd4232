"""The caller's own model, through MCP sampling: `SkillContext.client_model` of a tool call.

A skill uses it only when the call asks for it (knowledge/skills.py: `use_client_model`, or the
`use_client_model` setting); what it sends leaves the server for the client's model.

- 2025-11-25 with a back channel (stdio, or a session): each `complete` is a
  `sampling/createMessage` request to the client while the call runs (`SessionModel`).
- 2026-07-28: multi round-trip requests. The skill runs until it needs a reply it does not
  have; the call then answers an `InputRequiredResult` whose input requests (`sample-1`, ...)
  are that `sampling/createMessage` and those the skill's concurrent steps made meanwhile, and
  the client retries the call with the model's replies. The skill runs again from the start,
  and the replies gathered so far answer the requests they were made for (`ReplayedModel`,
  matched by a digest of the request), so retrieval is not skipped: it is repeated, and a
  request that comes out differently (the knowledge base changed in between) is simply asked
  again. An answer is one round, an `llm` rerank then an answer two, a graph extraction one
  per step of Graphiti's that needs the previous one's reply.
- A handshake-era client over stateless HTTP has no back channel, and a client that did not
  declare `sampling` offers no model: `client_model` is None and answers quote.

The client's roots (`SkillContext.client_roots`, when the client declared `roots`) are asked
the same way: a `roots/list` request over the connection, or in 2026-07-28 an input request
(`roots`) of the round, beside the model's requests and a question the skill asked meanwhile
(server.py), the reply kept in the state like the model's.

Calls that run as tasks of the engine (resumable skills, MCP tasks) run apart from the request,
where no reply could come back: their skills see no client model.

The replies travel in `requestState`, beside (around) the elicitation's own state, and are
sealed with it by the adapter's request-state boundary. Even read or replayed they hold only
the client's own model's words, never the tenant (which comes from each round's credential),
and an answer made of them still passes the grounding check.
"""

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from agentic_rag.llm.chat import Chat, LLMError
from agentic_rag.mcp.access import Context
from agentic_rag.mcp.elicitation import Gathered
from agentic_rag.skills import ClientRoot, InputRequired, SkillError

ROOTS_KEY = "roots"
"""The key of the `roots/list` request an `InputRequiredResult` carries."""

SAMPLE_KEY = "sample"
"""The keys of the sampling requests an `InputRequiredResult` carries: sample-1, sample-2, ..."""

GATHER_SECONDS = 0.1
"""How long a round waits, once the skill needs a reply, for the requests of the skill's other
concurrent steps (Graphiti resolves a passage's facts at once), to ask them in the same round.
A request that comes later is asked in the next round: one round more, the same outcome."""

_PREFIX = "sampled:"
"""Marks a `requestState` of this module's (the elicitation's own states are JSON objects)."""

JSON_ONLY = "Reply with one JSON object and nothing else."


class SamplingNeeded(InputRequired):
    """Raised by `ReplayedModel`: the call must ask its client's model first (2026-07-28);
    the model's `asked` holds what.

    Input the call needs, as a question is (and counted so: skills/metering.py), not a
    `SkillError`: it passes the skills' refusals and reaches the adapter.
    """


def request_params(
    messages: Sequence[dict[str, str]], max_tokens: int, json_object: bool
) -> types.CreateMessageRequestParams:
    """The sampling request for a chat: system messages as its system prompt, the rest in turn."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    if json_object:
        system.append(JSON_ONLY)
    return types.CreateMessageRequestParams(
        messages=[
            types.SamplingMessage(
                role="assistant" if m["role"] == "assistant" else "user",
                content=types.TextContent(type="text", text=m["content"]),
            )
            for m in messages
            if m["role"] != "system"
        ],
        system_prompt="\n\n".join(system) or None,
        max_tokens=max_tokens,
        temperature=0.0,
    )


def digest(params: types.CreateMessageRequestParams) -> str:
    dumped = params.model_dump_json(by_alias=True, exclude_none=True)
    return hashlib.sha256(dumped.encode()).hexdigest()[:32]


def reply_text(result: types.CreateMessageResult) -> str:
    """The text of the client model's reply; LLMError when it holds none."""
    content = result.content if isinstance(result.content, list) else [result.content]
    texts = [c.text for c in content if isinstance(c, types.TextContent)]
    if not texts:
        raise LLMError("the client's model replied with no text")
    return "\n".join(texts)


def roots_of(result: types.ListRootsResult) -> list[ClientRoot]:
    return [ClientRoot(str(root.uri), root.name) for root in result.roots]


class SessionRoots:
    """The client's roots asked over the connection, while the call runs (2025-11-25)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def roots(self) -> list[ClientRoot]:
        try:
            result = await self._ctx.session.send_request(
                types.ListRootsRequest(),
                types.ListRootsResult,
                metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id),
            )
        except MCPError as exc:
            raise SkillError(f"the client did not list its roots: {exc.message}") from None
        return roots_of(result)


class SessionModel:
    """The client's model asked over the connection, while the call runs (2025-11-25)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        json_object: bool = False,
    ) -> str:
        request = types.CreateMessageRequest(
            params=request_params(messages, max_tokens, json_object)
        )
        try:
            result = await self._ctx.session.send_request(
                request,
                types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id),
            )
        except MCPError as exc:
            raise LLMError(f"the client did not sample: {exc.message}") from None
        return reply_text(result)


class ReplayedModel:
    """The client's model (and roots) of a 2026-07-28 call: the replies earlier rounds
    brought, or `SamplingNeeded` for a request none of them answered, once the requests made
    meanwhile are in `asked` (by digest) and `roots_asked` too."""

    def __init__(self, replies: dict[str, str], roots: list[ClientRoot] | None = None) -> None:
        self._replies, self._roots = replies, roots
        self.asked: dict[str, types.CreateMessageRequestParams] = {}
        self.roots_asked = False

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        json_object: bool = False,
    ) -> str:
        params = request_params(messages, max_tokens, json_object)
        key = digest(params)
        if key in self._replies:
            return self._replies[key]
        self.asked[key] = params
        await self._gathered()

    async def roots(self) -> list[ClientRoot]:
        """The client's roots an earlier round brought, or `SamplingNeeded` (asked with the
        round's other requests)."""
        if self._roots is not None:
            return list(self._roots)
        self.roots_asked = True
        await self._gathered()

    @property
    def pending(self) -> int:
        return len(self.asked) + self.roots_asked

    async def _gathered(self) -> NoReturn:
        while True:  # until the skill's concurrent steps have asked what they will
            seen = self.pending
            await anyio.sleep(GATHER_SECONDS)
            if self.pending == seen:
                raise SamplingNeeded(f"the client must answer {self.pending} requests")


class ClientRoots(Protocol):
    async def roots(self) -> list[ClientRoot]:
        """The client's roots; `SkillError` when it cannot list them."""
        ...


class _State(BaseModel):
    """A 2026-07-28 call's `requestState` once it sampled: the replies so far, and what the
    call had gathered (its arguments and texts after any elicitation, its rounds)."""

    replies: dict[str, str]
    pending: dict[str, str] = {}
    """The requests the last round asked the client's model: their digests by input key."""
    arguments: dict[str, Any] = {}
    texts: list[str] = []
    rounds: int = 0
    elicitation: str | None = None
    """The elicitation's own state, when the last round asked a question too."""
    roots: list[ClientRoot] | None = None
    """The client's roots, once a round brought them."""
    roots_pending: bool = False


@dataclass
class CallSampling:
    """The sampling of one `tools/call` round: its client model, and its part of the state."""

    model: Chat | None
    roots: ClientRoots | None = None
    replayed: ReplayedModel | None = None
    replies: dict[str, str] = field(default_factory=dict)
    known_roots: list[ClientRoot] | None = None
    """The client's roots an earlier round brought."""
    request_state: str | None = None
    """What is left of the incoming `requestState` for elicitation (None: nothing)."""
    resumed: tuple[Gathered, int] | None = None
    """What the call gathered, and its rounds, on a retry that brought the model's reply."""

    @classmethod
    def of(cls, ctx: Context, params: types.CallToolRequestParams) -> "CallSampling":
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        raw = params.request_state
        state = _decode(raw) if raw is not None and raw.startswith(_PREFIX) else None
        replies = dict(state.replies) if state is not None else {}
        known_roots = state.roots if state is not None else None
        responses = params.input_responses or {}
        for key, pending in (state.pending if state is not None else {}).items():
            answer = responses.get(key)
            # No reply (or not a sampling result, or no text): asked again in this round.
            if isinstance(answer, types.CreateMessageResult):
                with contextlib.suppress(LLMError):
                    replies[pending] = reply_text(answer)
        listed = responses.get(ROOTS_KEY)
        if state is not None and state.roots_pending and isinstance(listed, types.ListRootsResult):
            known_roots = roots_of(listed)
        capabilities = ctx.session.client_capabilities
        offered = capabilities is not None and capabilities.sampling is not None
        rooted = capabilities is not None and capabilities.roots is not None
        model: Chat | None = None
        roots: ClientRoots | None = None
        replayed = None
        if modern:
            replayed = ReplayedModel(replies, known_roots)
            model = replayed if offered else None
            roots = replayed if rooted else None
        elif ctx.session.can_send_request:
            model = SessionModel(ctx) if offered else None
            roots = SessionRoots(ctx) if rooted else None
        if state is None:
            return cls(model, roots, replayed, replies, known_roots, raw)
        resumed = None
        if state.pending or state.roots_pending:
            resumed = (Gathered(state.arguments, state.texts), state.rounds)
        return cls(model, roots, replayed, replies, known_roots, state.elicitation, resumed)

    def input_required(
        self, gathered: Gathered, rounds: int, asked: types.InputRequiredResult | None = None
    ) -> types.InputRequiredResult:
        """The round's answer when the skill needs its client: what it asked the client's
        model and for its roots, and `asked`, the question it asked meanwhile (an elicitation's
        result with that state), all in one round; and the state to come back with."""
        replayed = self.replayed
        asked_model = replayed.asked if replayed is not None else {}
        samples = {f"{SAMPLE_KEY}-{n}": k for n, k in enumerate(asked_model, start=1)}
        roots_pending = replayed is not None and replayed.roots_asked
        requests: dict[str, types.InputRequest] = {
            key: types.CreateMessageRequest(params=asked_model[sample])
            for key, sample in samples.items()
        }
        if roots_pending:
            requests[ROOTS_KEY] = types.ListRootsRequest(params=types.RequestParams())
        if asked is not None:
            if not requests:
                return self.carried(asked)
            requests.update(asked.input_requests or {})
        state = _State(
            replies=self.replies,
            pending=samples,
            arguments=gathered.arguments,
            texts=gathered.texts,
            rounds=rounds,
            elicitation=asked.request_state if asked is not None else None,
            roots=self.known_roots,
            roots_pending=roots_pending,
        )
        return types.InputRequiredResult(
            input_requests=requests, request_state=_PREFIX + state.model_dump_json()
        )

    def carried[R: types.CallToolResult | types.InputRequiredResult](self, result: R) -> R:
        """An elicitation's `InputRequiredResult` that keeps the replies and roots gathered so
        far (what the call gathered is in the elicitation's own state)."""
        if not isinstance(result, types.InputRequiredResult):
            return result
        if not self.replies and self.known_roots is None:
            return result
        state = _State(
            replies=self.replies, elicitation=result.request_state, roots=self.known_roots
        )
        return result.model_copy(update={"request_state": _PREFIX + state.model_dump_json()})


def _decode(raw: str) -> _State:
    try:
        return _State.model_validate_json(raw.removeprefix(_PREFIX))
    except ValidationError:
        raise MCPError(
            types.INVALID_PARAMS, "requestState is not one this server issued for tools/call"
        ) from None

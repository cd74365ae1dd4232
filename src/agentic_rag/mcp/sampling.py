"""The caller's own model, through MCP sampling: `SkillContext.client_model` of a tool call.

A skill uses it only when the call asks for it (knowledge/skills.py: `use_client_model`, or the
`use_client_model` setting); what it sends leaves the server for the client's model.

- 2025-11-25 with a back channel (stdio, or a session): each `complete` is a
  `sampling/createMessage` request to the client while the call runs (`SessionModel`).
- 2026-07-28: multi round-trip requests. The skill runs until it needs a reply it does not
  have; the call then answers an `InputRequiredResult` whose input request `sample` is that
  `sampling/createMessage`, and the client retries the call with the model's reply. The skill
  runs again from the start, and the replies gathered so far answer the requests they were
  made for (`ReplayedModel`, matched by a digest of the request), so retrieval is not skipped:
  it is repeated, and a request that comes out differently (the knowledge base changed in
  between) is simply asked for again. One reply per round: an answer is one round, an `llm`
  rerank then an answer two.
- A handshake-era client over stateless HTTP has no back channel, and a client that did not
  declare `sampling` offers no model: `client_model` is None and answers quote.

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
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from agentic_rag.llm.chat import Chat, LLMError
from agentic_rag.mcp.access import Context
from agentic_rag.mcp.elicitation import Gathered

SAMPLE_KEY = "sample"
"""The key of the one sampling request an `InputRequiredResult` carries."""

_PREFIX = "sampled:"
"""Marks a `requestState` of this module's (the elicitation's own states are JSON objects)."""

JSON_ONLY = "Reply with one JSON object and nothing else."


class SamplingNeeded(Exception):
    """Raised by `ReplayedModel`: the call must ask its client's model first (2026-07-28).

    Not a `SkillError`: it passes the skills' refusals and reaches the adapter.
    """

    def __init__(self, digest: str, params: types.CreateMessageRequestParams) -> None:
        super().__init__(f"the client's model must answer request {digest}")
        self.digest, self.params = digest, params


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
    """The client's model of a 2026-07-28 call: the replies earlier rounds brought, or
    `SamplingNeeded` for a request none of them answered."""

    def __init__(self, replies: dict[str, str]) -> None:
        self._replies = replies

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        json_object: bool = False,
    ) -> str:
        params = request_params(messages, max_tokens, json_object)
        key = digest(params)
        if key not in self._replies:
            raise SamplingNeeded(key, params)
        return self._replies[key]


class _State(BaseModel):
    """A 2026-07-28 call's `requestState` once it sampled: the replies so far, and what the
    call had gathered (its arguments and texts after any elicitation, its rounds)."""

    replies: dict[str, str]
    pending: str | None = None
    """The digest of the request the last round asked the client's model."""
    arguments: dict[str, Any] = {}
    texts: list[str] = []
    rounds: int = 0
    elicitation: str | None = None
    """The elicitation's own state, when the last round asked a question instead."""


@dataclass
class CallSampling:
    """The sampling of one `tools/call` round: its client model, and its part of the state."""

    model: Chat | None
    replies: dict[str, str] = field(default_factory=dict)
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
        if state is not None and state.pending is not None:
            answer = (params.input_responses or {}).get(SAMPLE_KEY)
            # No reply (or not a sampling result): the request is asked again in this round.
            if isinstance(answer, types.CreateMessageResult):
                with contextlib.suppress(LLMError):  # no text: asked again too
                    replies[state.pending] = reply_text(answer)
        capabilities = ctx.session.client_capabilities
        offered = capabilities is not None and capabilities.sampling is not None
        model: Chat | None = None
        if offered and modern:
            model = ReplayedModel(replies)
        elif offered and ctx.session.can_send_request:
            model = SessionModel(ctx)
        if state is None:
            return cls(model, replies, raw)
        resumed = None
        if state.pending is not None:
            resumed = (Gathered(state.arguments, state.texts), state.rounds)
        return cls(model, replies, state.elicitation, resumed)

    def input_required(
        self, needed: SamplingNeeded, gathered: Gathered, rounds: int
    ) -> types.InputRequiredResult:
        state = _State(
            replies=self.replies,
            pending=needed.digest,
            arguments=gathered.arguments,
            texts=gathered.texts,
            rounds=rounds,
        )
        return types.InputRequiredResult(
            input_requests={SAMPLE_KEY: types.CreateMessageRequest(params=needed.params)},
            request_state=_PREFIX + state.model_dump_json(),
        )

    def carried[R: types.CallToolResult | types.InputRequiredResult](self, result: R) -> R:
        """An elicitation's `InputRequiredResult` that keeps the replies gathered so far (what
        the call gathered is in the elicitation's own state)."""
        if not self.replies or not isinstance(result, types.InputRequiredResult):
            return result
        state = _State(replies=self.replies, elicitation=result.request_state)
        return result.model_copy(update={"request_state": _PREFIX + state.model_dump_json()})


def _decode(raw: str) -> _State:
    try:
        return _State.model_validate_json(raw.removeprefix(_PREFIX))
    except ValidationError:
        raise MCPError(
            types.INVALID_PARAMS, "requestState is not one this server issued for tools/call"
        ) from None

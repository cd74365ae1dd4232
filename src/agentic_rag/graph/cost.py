"""What the graph's LLM calls cost: calls, tokens and seconds, per episode and in the metrics.

Graphiti's `OpenAIGenericClient` reads only the content of a chat completion; the usage the
endpoint reports (OpenAI-compatible servers do, in `usage`) is dropped. So the client it is
given is `MeteredOpenAI`: the part of `AsyncOpenAI` it calls, answered by the product's own
client of the configured LLM (llm/chat.py, a server or the local model), each call counted: in
the metrics, and in the `EpisodeCost` of the episode being processed, which the ingestion sets
in its context (`episode_cost`; Graphiti's concurrent calls run in tasks that inherit it).
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from openai.types.chat import ChatCompletion

from agentic_rag.llm.chat import OpenAIChat
from agentic_rag.observability import metrics


@dataclass
class EpisodeCost:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0  # spent waiting for the LLM

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "EpisodeCost") -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds += other.seconds

    def describe(self) -> str:
        return (
            f"{self.calls} LLM calls, {self.tokens} tokens ({self.prompt_tokens} prompt, "
            f"{self.completion_tokens} completion), {self.seconds:.1f} s of LLM time"
        )


_CURRENT: ContextVar[EpisodeCost | None] = ContextVar("agentic_rag_episode_cost", default=None)


@contextmanager
def episode_cost() -> Iterator[EpisodeCost]:
    """Count the LLM calls made in this context (and the tasks it starts) into a new cost."""
    cost = EpisodeCost()
    token = _CURRENT.set(cost)
    try:
        yield cost
    finally:
        _CURRENT.reset(token)


class _Completions:
    def __init__(self, chat: OpenAIChat) -> None:
        self._chat = chat

    async def create(self, **request: Any) -> ChatCompletion:
        started = time.perf_counter()
        outcome = "error"
        usage: dict[str, Any] = {}
        try:
            completion = await self._chat.create(request)
            response = ChatCompletion.model_validate(completion)
            outcome, usage = "ok", completion.get("usage") or {}
            return response
        finally:
            call = EpisodeCost(
                1,
                usage.get("prompt_tokens", 0),
                usage.get("completion_tokens", 0),
                time.perf_counter() - started,
            )
            current = _CURRENT.get()
            if current is not None:
                current.add(call)
            metrics.record_graph_llm_call(outcome, call.prompt_tokens, call.completion_tokens)


class _Chat:
    def __init__(self, chat: OpenAIChat) -> None:
        self.completions = _Completions(chat)


class MeteredOpenAI:
    """The part of `AsyncOpenAI` Graphiti's client uses (`chat.completions.create`, `close`),
    each call counted."""

    def __init__(self, chat: OpenAIChat) -> None:
        self._client = chat
        self.chat = _Chat(chat)

    async def close(self) -> None:
        await self._client.aclose()

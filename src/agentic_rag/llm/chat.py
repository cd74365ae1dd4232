"""The optional LLM's chat API (OpenAI, Ollama, vLLM, a llama.cpp server, or the local model).

Answers are synthesised with it, the `llm` reranker asks it to grade passages, the orchestrator
plans with it and the graph extracts entities and facts with it (through graph/cost.py). Without
one, answers are extractive.
"""

from collections.abc import Sequence
from typing import Any

import httpx
import orjson
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from agentic_rag.llm.endpoint import ChatEndpoint, schema_in_json_object

# What answers, reranking and planning ask of a model, whichever it is: OpenAIChat below, or the
# caller's own (SkillContext.client_model). Defined in the skills layer, which names it too.
from agentic_rag.skills.chat import Chat as Chat
from agentic_rag.skills.chat import ChatError as ChatError


class LLMError(ChatError):
    """The LLM endpoint failed or answered something unusable; the message says which (the
    skill that needed it fails with it)."""


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and (
        exc.response.status_code == 429 or exc.response.status_code >= 500
    )


class OpenAIChat:
    """Chat completions from the configured LLM (llm/endpoint.py), retried when transient."""

    def __init__(self, chat: ChatEndpoint, *, timeout: float = 60.0, attempts: int = 3) -> None:
        self.model = chat.model
        self._schema_in_json_object = chat.structured_output == "json_object"
        self._client = chat.http_client(timeout)
        self._attempts = attempts

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        json_object: bool = False,
    ) -> str:
        """The assistant's reply to `messages`; with `json_object`, a JSON object as text."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if json_object:
            body["response_format"] = {"type": "json_object"}
        completion = await self.create(body)
        try:
            content = completion["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMError("the LLM endpoint answered without choices[0].message.content") from None
        if not isinstance(content, str):
            raise LLMError("the LLM endpoint answered a non-text message")
        return content

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion (OpenAI's JSON) for a request body; transient failures retried."""
        response_format = body.get("response_format")
        if self._schema_in_json_object and isinstance(response_format, dict):
            body = {**body, "response_format": schema_in_json_object(response_format)}
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential(multiplier=0.5, max=8),
                retry=retry_if_exception(_transient),
                reraise=True,
            ):
                with attempt:
                    response = await self._client.post("/chat/completions", json=body)
                    response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise LLMError(
                f"the LLM endpoint answered HTTP {exc.response.status_code}: "
                f"{exc.response.text[:200]}"
            ) from None
        except httpx.TransportError as exc:
            raise LLMError(f"the LLM endpoint cannot be reached: {exc}") from None
        try:
            completion = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise LLMError("the LLM endpoint answered something that is not JSON") from None
        if not isinstance(completion, dict):
            raise LLMError("the LLM endpoint answered JSON that is not a chat completion")
        return completion

    async def aclose(self) -> None:
        await self._client.aclose()

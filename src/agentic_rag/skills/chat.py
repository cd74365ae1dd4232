"""What a skill may ask of a chat model: the configured LLM (llm/chat.py) or the caller's own
model, reached through the protocol the call came in by (MCP sampling: mcp/sampling.py).

A protocol of this layer, so that `SkillContext.client_model` can name it: the skills registry
sits below the models (docs/architecture.md), which re-export it as `agentic_rag.llm.chat.Chat`.
"""

from collections.abc import Sequence
from typing import Protocol


class ChatError(Exception):
    """A chat model did not answer, or answered something unusable; the message says which.
    A skill that needs the answer fails with it (`refusals.refusing_skill` maps it)."""


class Chat(Protocol):
    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        json_object: bool = False,
    ) -> str:
        """The assistant's reply to `messages` (OpenAI's roles: system, user, assistant); with
        `json_object`, a JSON object as text. A model that cannot answer raises `ChatError`
        (llm/chat.py's LLMError) saying why."""
        ...

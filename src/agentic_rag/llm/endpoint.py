"""ChatEndpoint: where the LLM is, built once from the settings and shared by its clients."""

from contextlib import AsyncExitStack
from dataclasses import dataclass

import httpx

from agentic_rag.config import Settings, StructuredOutput

LOCAL_BASE_URL = "http://local-llm/v1"
"""The base URL the local model answers on; only its transport reaches it (no socket)."""


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat API: a server, or the local model's in-process transport."""

    base_url: str
    model: str
    small_model: str
    api_key: str | None = None
    transport: httpx.AsyncBaseTransport | None = None
    structured_output: StructuredOutput = "json_schema"
    """How a reply's JSON schema is sent (config.py: `llm_structured_output`)."""

    def describe(self) -> str:
        if self.transport is not None:
            return f"the local model {self.model}"
        return f"LLM {self.model} at {self.base_url}"

    def http_client(self, timeout: float) -> httpx.AsyncClient:
        """A client of the API's base URL, with its key."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            transport=self.transport,
        )


async def open_chat(settings: Settings, stack: AsyncExitStack) -> ChatEndpoint | None:
    """The configured LLM, or None; a local model is loaded now and closed by `stack`."""
    if settings.llm_local:
        # Imported only here: llama.cpp is an optional extra.
        from agentic_rag.llm.local import LocalModel, LocalTransport, model_path

        path = await model_path(settings)
        model = LocalModel(
            path, context=settings.llm_local_context, max_tokens=settings.llm_local_max_tokens
        )
        await model.start()
        stack.push_async_callback(model.aclose)
        return ChatEndpoint(LOCAL_BASE_URL, model.name, model.name, transport=LocalTransport(model))
    if settings.llm_base_url and settings.llm_model:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return ChatEndpoint(
            settings.llm_base_url,
            settings.llm_model,
            settings.llm_small_model or settings.llm_model,
            api_key=key,
            structured_output=settings.llm_structured_output,
        )
    return None

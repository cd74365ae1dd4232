"""open_chat: the LLM the settings configure (a server's API, or the local model loaded)."""

from contextlib import AsyncExitStack

from agentic_rag.config import Settings
from agentic_rag.llm.endpoint import LOCAL_BASE_URL, ChatEndpoint


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

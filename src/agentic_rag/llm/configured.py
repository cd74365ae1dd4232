"""The LLM the settings configure (a server's API, or the local model), built from them and
loaded on start: `ConfiguredChat`, or `open_chat` for a block."""

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from agentic_rag.config import Settings
from agentic_rag.llm.endpoint import LOCAL_BASE_URL, ChatEndpoint

if TYPE_CHECKING:
    from agentic_rag.llm.local import LocalModel


class ConfiguredChat:
    """`endpoint`: the configured LLM from construction on, or None; a local model is loaded
    by `start` (its file joined and checked first) and closed by `stop`."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._model: LocalModel | None = None
        self.endpoint: ChatEndpoint | None = None
        if settings.llm_local:
            # Imported only here: the module is light, but it is for the local-llm extra.
            from agentic_rag.llm import local

            model = local.LocalModel(
                local.model_file(settings),
                context=settings.llm_local_context,
                max_tokens=settings.llm_local_max_tokens,
            )
            self._model = model
            self.endpoint = ChatEndpoint(
                LOCAL_BASE_URL, model.name, model.name, transport=local.LocalTransport(model)
            )
        elif settings.llm_base_url and settings.llm_model:
            key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
            self.endpoint = ChatEndpoint(
                settings.llm_base_url,
                settings.llm_model,
                settings.llm_small_model or settings.llm_model,
                api_key=key,
                structured_output=settings.llm_structured_output,
            )

    async def start(self) -> None:
        if self._model is not None:
            from agentic_rag.llm.local import model_path

            await model_path(self._settings)  # the packaged model joined; either file checked
            await self._model.start()

    async def stop(self) -> None:
        if self._model is not None:
            await self._model.aclose()


async def open_chat(settings: Settings, stack: AsyncExitStack) -> ChatEndpoint | None:
    """The configured LLM, or None; a local model is loaded now and closed by `stack`."""
    chat = ConfiguredChat(settings)
    await chat.start()
    stack.push_async_callback(chat.stop)
    return chat.endpoint

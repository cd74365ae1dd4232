"""A test double of a hosted embeddings service (OpenAI, or Ollama, vLLM, TEI behind their
OpenAI-compatible `/v1/embeddings`), which these machines cannot reach.

It speaks the wire format of OpenAI's embeddings API, and its vectors are real: it runs the
local all-MiniLM-L6-v2. A test scripts its failures (statuses to answer first), its key, its
model and the dimension it answers with.
"""

from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentic_rag.embedding.embedders import LocalEmbedder


@dataclass
class EmbeddingsDouble:
    embedder: LocalEmbedder
    api_key: str = "test-key"
    model: str = "all-MiniLM-L6-v2"
    failures: list[int] = field(default_factory=list)
    """Statuses answered (with `Retry-After: 0`) before the requests that succeed."""
    dimension: int | None = None
    """Answer vectors cut to this many values, as another model would."""
    batches: list[int] = field(default_factory=list)
    """The number of texts of every request received."""

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])

    async def _embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        self.batches.append(len(texts))
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        if self.failures:
            status = self.failures.pop(0)
            return _error(status, "Rate limit reached, or the server is overloaded.", None)
        if body.get("model") != self.model:
            return _error(
                404, f"The model `{body.get('model')}` does not exist.", "model_not_found"
            )
        vectors = await self.embedder.embed(texts)
        if self.dimension is not None:
            vectors = vectors[:, : self.dimension]
        # Out of order on purpose: clients must place vectors by `index`.
        data = [
            {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
            for i in reversed(range(len(texts)))
        ]
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return JSONResponse({"object": "list", "data": data, "model": self.model, "usage": usage})


def _error(status: int, message: str, code: str | None) -> JSONResponse:
    error: dict[str, Any] = {"message": message, "type": "invalid_request_error", "code": code}
    return JSONResponse({"error": error}, status_code=status, headers={"Retry-After": "0"})

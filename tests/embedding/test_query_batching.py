"""QueryBatcher: concurrent one-text calls embedded together, each with its own vector.

The embedder is the local model, reached through an OpenAI-compatible endpoint (the test
double of a hosted service, which itself runs the local model) so that the model calls, and
the texts in each, can be counted."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import numpy as np
import pytest

from agentic_rag.embedding.batching import QueryBatcher
from agentic_rag.embedding.embedders import LocalEmbedder, OpenAIEmbedder
from agentic_rag.embedding.errors import EmbeddingError
from tests.support.embeddings_double import EmbeddingsDouble
from tests.support.live import free_port, serve

TEXTS = [
    "copy files and directories",
    "How do I install the server on Linux?",
    "report file system disk space usage",
    "Hi",
    "securely erase a file by overwriting it repeatedly",
]


@asynccontextmanager
async def endpoint(double: EmbeddingsDouble) -> AsyncIterator[str]:
    async with serve(double.app()) as port:
        yield f"http://127.0.0.1:{port}/v1"


def client(url: str, attempts: int = 5) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        base_url=url,
        model="all-MiniLM-L6-v2",
        api_key="test-key",
        attempts=attempts,
        backoff_seconds=0.01,
    )


@pytest.fixture(scope="module")
async def local() -> AsyncIterator[LocalEmbedder]:
    embedder = LocalEmbedder()
    await embedder.start()
    yield embedder
    await embedder.aclose()


async def test_concurrent_queries_go_in_one_call_and_each_gets_its_own_vector(
    local: LocalEmbedder,
) -> None:
    double = EmbeddingsDouble(local)
    async with endpoint(double) as url:
        remote = client(url)
        vectors = await asyncio.gather(*(QueryBatcher(remote).embed(t) for t in TEXTS[:1]))
        batcher = QueryBatcher(remote)
        together = await asyncio.gather(*(batcher.embed(text) for text in TEXTS))
        await remote.aclose()
    assert double.batches == [1, len(TEXTS)]
    np.testing.assert_allclose(vectors[0], (await local.embed(TEXTS[:1]))[0], atol=1e-6)
    np.testing.assert_allclose(np.stack(together), await local.embed(TEXTS), atol=1e-6)


async def test_a_batch_holds_at_most_the_texts_asked_for(local: LocalEmbedder) -> None:
    double = EmbeddingsDouble(local)
    async with endpoint(double) as url:
        remote = client(url)
        batcher = QueryBatcher(remote, most=2)
        together = await asyncio.gather(*(batcher.embed(text) for text in TEXTS))
        await remote.aclose()
    assert double.batches == [2, 2, 1]
    np.testing.assert_allclose(np.stack(together), await local.embed(TEXTS), atol=1e-6)


async def test_every_caller_of_a_failed_batch_gets_the_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    remote = client(url, attempts=1)
    batcher = QueryBatcher(remote)
    outcomes = await asyncio.gather(
        *(batcher.embed(text) for text in TEXTS[:3]), return_exceptions=True
    )
    await remote.aclose()
    assert [type(o) for o in outcomes] == [EmbeddingError] * 3
    assert all("cannot reach the embeddings endpoint" in str(o) for o in outcomes)

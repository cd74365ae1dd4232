"""Embeddings: the local all-MiniLM-L6-v2 (real model, offline) and an OpenAI-compatible
endpoint (a test double of the hosted service that itself runs the local model)."""

import random
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest

from agentic_rag.embedding.embedders import (
    DIMENSION,
    LocalEmbedder,
    OpenAIEmbedder,
    build_embedder,
    default_model_path,
    default_tokenizer_path,
    load_tokenizer,
)
from agentic_rag.embedding.errors import EmbeddingError
from tests.support.embeddings_double import EmbeddingsDouble
from tests.support.live import free_port, serve

TEXTS = [
    "How do I install the server on Linux?",
    "PostgreSQL full-text ranking has no inverse document frequency, so frequent words weigh "
    "as much as rare ones; BM25 fixes that.",
    "The cat sleeps on the warm windowsill all afternoon.",
    "Chunks follow the structure of the document: headings, paragraphs, pages and transcript "
    "segments, each within the embedder's limit of 256 word pieces.",
    "Hi",
]


@pytest.fixture(scope="session")
async def local() -> AsyncIterator[LocalEmbedder]:
    embedder = LocalEmbedder(batch_size=2)
    await embedder.start()
    yield embedder
    await embedder.aclose()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)  # rows are unit vectors


async def test_a_sentence_is_closer_to_its_paraphrase_than_to_an_unrelated_one(
    local: LocalEmbedder,
) -> None:
    sentence, paraphrase, unrelated = await local.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The girl is carrying a baby.",
        ]
    )
    assert cosine(sentence, paraphrase) > 0.7  # sentence-transformers gives 0.755 (fp32)
    assert cosine(sentence, unrelated) < 0.1


async def test_vectors_are_float32_unit_rows_one_per_text(local: LocalEmbedder) -> None:
    vectors = await local.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), DIMENSION) == (5, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_batches_give_the_vectors_of_texts_embedded_one_by_one(local: LocalEmbedder) -> None:
    together = await local.embed(TEXTS)  # batches of 2, sorted by length, so padded
    alone = np.stack([(await local.embed([text]))[0] for text in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)


async def test_no_text_gives_no_vector(local: LocalEmbedder) -> None:
    vectors = await local.embed([])
    assert vectors.shape == (0, 384)


def test_tokens_are_counted_as_the_model_reads_them(local: LocalEmbedder) -> None:
    assert local.max_tokens == 256
    assert local.count_tokens("") == 2  # [CLS] and [SEP]
    assert local.count_tokens("Hello, world!") == 6  # hello , world !
    assert local.count_tokens("river " * 1000) == 1002  # counting never truncates


async def test_a_text_is_read_up_to_256_tokens_not_the_128_of_tokenizer_json(
    local: LocalEmbedder,
) -> None:
    words = ["river", "mountain", "city", "music", "science", "garden", "ocean", "winter"]
    rng = random.Random(7)
    text = " ".join(rng.choice(words) for _ in range(400))
    assert local.count_tokens(text) == 402  # one word piece each

    def first(pieces: int) -> str:
        return " ".join(text.split()[:pieces])

    whole, first_254, first_253, first_126 = await local.embed(
        [text, first(254), first(253), first(126)]
    )
    assert cosine(whole, first_254) > 0.99999  # 254 pieces + [CLS] + [SEP] = 256
    assert cosine(whole, first_253) < 0.99999  # the 254th piece is read
    assert cosine(whole, first_126) < 0.999  # what a 128-token model would have read


def test_the_tokenizer_is_configured_for_the_model_input() -> None:
    tokenizer = load_tokenizer(default_tokenizer_path(), max_length=256)
    assert len(tokenizer.encode("river " * 1000).ids) == 256
    assert len(tokenizer.encode("river").ids) == 3  # no padding to a fixed length


@pytest.mark.parametrize("corrupt", ["model.onnx", "tokenizer.json"])
async def test_a_model_file_that_fails_its_hash_is_refused(
    tmp_path: Path, local: LocalEmbedder, corrupt: str
) -> None:
    model = Path(shutil.copy(default_model_path(), tmp_path / "model.onnx"))
    tokenizer = Path(shutil.copy(default_tokenizer_path(), tmp_path / "tokenizer.json"))
    copies = LocalEmbedder(model_path=model, tokenizer_path=tokenizer)
    np.testing.assert_allclose(
        await copies.embed(TEXTS[:2]), await local.embed(TEXTS[:2]), atol=1e-6
    )  # faithful copies load

    path = tmp_path / corrupt
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(EmbeddingError) as refused:
        await LocalEmbedder(model_path=model, tokenizer_path=tokenizer).embed(["hello"])
    message = str(refused.value)
    assert str(path) in message
    expected = {
        "model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    }[corrupt]
    assert f"expected {expected}" in message
    assert f"has sha256 {expected}" not in message  # and the actual, different hash


def test_a_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    embedder = LocalEmbedder(tokenizer_path=tmp_path / "tokenizer.json")
    with pytest.raises(EmbeddingError, match=r"cannot read the model file .*tokenizer\.json"):
        embedder.count_tokens("hello")


# -- an OpenAI-compatible endpoint ------------------------------------------------------------


@asynccontextmanager
async def endpoint(double: EmbeddingsDouble) -> AsyncIterator[str]:
    async with serve(double.app()) as port:
        yield f"http://127.0.0.1:{port}/v1"


def client(url: str, **options: object) -> OpenAIEmbedder:
    settings: dict[str, object] = {"model": "all-MiniLM-L6-v2", "api_key": "test-key"}
    settings.update(backoff_seconds=0.01, **options)
    return OpenAIEmbedder(base_url=url, **settings)  # type: ignore[arg-type]


async def test_an_endpoint_gives_the_vectors_of_its_model_in_batches(local: LocalEmbedder) -> None:
    double = EmbeddingsDouble(local)
    async with endpoint(double) as url:
        remote = client(url, batch_size=2)
        vectors = await remote.embed(TEXTS)
        await remote.aclose()
    np.testing.assert_allclose(vectors, await local.embed(TEXTS), atol=1e-6)
    assert double.batches == [2, 2, 1]
    assert remote.dimension == 384  # learnt from the answer
    assert remote.count_tokens("Hello, world!") == 6  # the local tokenizer, as an estimate
    assert remote.max_tokens == 512


async def test_the_dimension_is_unknown_until_the_endpoint_answers(local: LocalEmbedder) -> None:
    async with endpoint(EmbeddingsDouble(local)) as url:
        remote = client(url)
        with pytest.raises(EmbeddingError, match="not known before the endpoint's first answer"):
            _ = remote.dimension
        await remote.start()
        assert remote.dimension == 384
        await remote.aclose()


async def test_rate_limits_and_server_errors_are_retried(local: LocalEmbedder) -> None:
    double = EmbeddingsDouble(local, failures=[429, 503])
    async with endpoint(double) as url:
        remote = client(url)
        vectors = await remote.embed(TEXTS[:1])
        await remote.aclose()
    assert double.batches == [1, 1, 1]
    np.testing.assert_allclose(vectors, await local.embed(TEXTS[:1]), atol=1e-6)


async def test_retries_end_with_the_servers_last_answer(local: LocalEmbedder) -> None:
    double = EmbeddingsDouble(local, failures=[503, 503, 503])
    async with endpoint(double) as url:
        remote = client(url, attempts=3)
        with pytest.raises(EmbeddingError, match=r"answered 503: .*overloaded.*\(3 attempts\)"):
            await remote.embed(TEXTS[:1])
        await remote.aclose()


async def test_a_wrong_key_is_refused_at_once(local: LocalEmbedder) -> None:
    double = EmbeddingsDouble(local)
    async with endpoint(double) as url:
        remote = client(url, api_key="wrong")
        with pytest.raises(EmbeddingError, match=r"refused the API key \(401\): Incorrect API key"):
            await remote.embed(TEXTS[:1])
        await remote.aclose()
        keyless = client(url, api_key=None)
        with pytest.raises(EmbeddingError, match=r"needs an API key \(none is configured\)"):
            await keyless.embed(TEXTS[:1])
        await keyless.aclose()
    assert double.batches == [1, 1]  # not retried


async def test_an_unknown_model_is_named(local: LocalEmbedder) -> None:
    async with endpoint(EmbeddingsDouble(local)) as url:
        remote = client(url, model="text-embedding-9")
        with pytest.raises(
            EmbeddingError, match=r"404 for model 'text-embedding-9': .* does not exist"
        ):
            await remote.embed(TEXTS[:1])
        await remote.aclose()


async def test_vectors_of_another_dimension_are_refused(local: LocalEmbedder) -> None:
    async with endpoint(EmbeddingsDouble(local, dimension=256)) as url:
        remote = client(url, dimension=384)
        with pytest.raises(EmbeddingError, match="dimension 256, but the configured one is 384"):
            await remote.embed(TEXTS[:1])
        await remote.aclose()


async def test_an_endpoint_that_is_down_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    remote = client(url, attempts=2)
    with pytest.raises(
        EmbeddingError, match=f"cannot reach the embeddings endpoint {url}/embeddings"
    ):
        await remote.embed(TEXTS[:1])
    await remote.aclose()


def test_the_factory_builds_what_the_settings_name() -> None:
    assert isinstance(build_embedder(), LocalEmbedder)
    remote = build_embedder("openai", url="http://127.0.0.1:1/v1", model="m", max_tokens=8000)
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.max_tokens == 8000
    for wrong, message in [
        ({"provider": "openai", "model": "m"}, "needs an embeddings URL and a model"),
        ({"url": "http://127.0.0.1:1/v1"}, "applies to the provider 'openai' only"),
        ({"model": "bge-small"}, "runs all-MiniLM-L6-v2 only"),
        ({"max_tokens": 512}, "max_tokens must be 3 to 256"),
        ({"provider": "cohere"}, "unknown embeddings provider 'cohere'"),
        ({"provider": "openai", "url": "ftp://host", "model": "m"}, "must be http"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_embedder(**wrong)  # type: ignore[arg-type]

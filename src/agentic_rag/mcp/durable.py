"""Tool calls of resumable skills run as A2A tasks, so they are as durable as A2A calls.

A long ingestion outlives the MCP call that started it. The call creates an A2A task (a user
message with the DataPart `{"skill": name, "arguments": {...}}`, as an A2A client would
send), follows its events, turning every `working` status message into a progress
notification (the first one names the task, which A2A `tasks/get` shows), and answers with
the task's result artifact, read into the skill's output model: the same structured and text
content as a call run in-process. So:

- a client that cancels or times out stops following the task, not the task;
- a crash resumes the task when a worker starts (`Skill.resumable`, `TaskService.recover`);
- a retry of the same call starts a task whose ingestion job finds the running job with the
  same arguments and follows it (knowledge/jobs.py), instead of ingesting a second copy.
"""

from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError

from agentic_rag.ids import new_id
from agentic_rag.mcp.calls import tool_error, tool_result
from agentic_rag.mcp.context import ProgressSteps
from agentic_rag.schema.a2a import DataPart, Message, Role, TaskState, TaskStatusUpdateEvent
from agentic_rag.schema.a2a import Task as A2ATask
from agentic_rag.schema.compat import SendParams
from agentic_rag.skills import Skill
from agentic_rag.tasks import states
from agentic_rag.tasks.errors import TaskError, TaskRequestError
from agentic_rag.tasks.parts import data_part, text_of
from agentic_rag.tasks.service import Accepted, Reply, TaskService

TaskServiceFor = Callable[[], TaskService]
"""The engine's running task service (it exists once the engine has started)."""

# The metadata key of the creating message that says when the task was created: an A2A task
# carries no creation time of its own, and MCP's task status needs one (`createdAt`).
CREATED_AT = "createdAt"


async def create_task(
    service: TaskService, tenant: str, skill: Skill, arguments: dict[str, Any], *, reply: Reply
) -> Accepted:
    """The A2A task that runs `skill` with `arguments` for `tenant`, durably created.

    Raises `MCPError` when the task service refuses the message."""
    message = Message(
        role=Role.user,
        kind="message",
        message_id=new_id(),
        parts=[data_part({"skill": skill.name, "arguments": arguments})],
        metadata={CREATED_AT: states.now()},
    )
    try:
        return await service.send(tenant, SendParams(message=message), reply=reply)
    except TaskError as exc:
        code = types.INVALID_PARAMS if isinstance(exc, TaskRequestError) else types.INTERNAL_ERROR
        raise MCPError(code, f"tool {skill.name!r} could not start: {exc.message}") from None


def created_at(task: A2ATask) -> str | None:
    """When the task was created, if a message of MCP's created it (`create_task`)."""
    first = task.history[0] if task.history else None
    stamp = first.metadata.get(CREATED_AT) if first is not None and first.metadata else None
    return stamp if isinstance(stamp, str) else None


def status_text(task: A2ATask) -> str:
    message = task.status.message
    return text_of(message) if message is not None else ""


def outcome(skill: Skill, task: A2ATask) -> types.CallToolResult:
    """What a call of `skill` answers once its task has settled (final or paused)."""
    state, text = task.status.state, status_text(task)
    if state is TaskState.completed:
        data = _result_data(skill, task)
        if data is None:
            return tool_error(f"tool {skill.name!r}: task {task.id} completed without a result")
        return tool_result(skill, skill.output_model.model_validate(data))
    if state in (TaskState.failed, TaskState.rejected):
        return tool_error(f"tool {skill.name!r} failed: {text}")
    if state is TaskState.canceled:
        return tool_error(f"tool {skill.name!r} was canceled: {text} (task {task.id})")
    if state in states.PAUSED:
        return tool_error(
            f"tool {skill.name!r} needs input: {text} Task {task.id} waits for it: answer with "
            "an A2A message/send naming this taskId."
        )
    return tool_error(f"tool {skill.name!r}: task {task.id} is {state.value}")


def _result_data(skill: Skill, task: A2ATask) -> dict[str, Any] | None:
    # The runner's result artifact is named after the skill: a text part and a data part.
    for artifact in reversed(task.artifacts or []):
        if artifact.name != skill.name:
            continue
        for part in artifact.parts:
            if isinstance(part.root, DataPart):
                return part.root.data
    return None


class DurableCalls:
    """Runs tool calls as A2A tasks of the engine's task service."""

    def __init__(self, tasks: TaskServiceFor) -> None:
        self._tasks = tasks

    async def call(
        self, skill: Skill, arguments: dict[str, Any], tenant: str, steps: ProgressSteps
    ) -> types.CallToolResult:
        service = self._tasks()
        try:
            accepted = await create_task(service, tenant, skill, arguments, reply="stream")
        except MCPError as exc:
            return tool_error(exc.message)
        task_id, events = accepted.snapshot.id, accepted.events
        assert events is not None  # a "stream" reply subscribes before the task is queued
        try:
            await steps.step(
                f"{skill.name} runs as task {task_id} (A2A tasks/get shows it); it goes on "
                "if this call is cancelled, and the same call again follows it",
                level="debug",
            )
            async for event in events:
                if event.kind == "status-update":
                    status = TaskStatusUpdateEvent.model_validate_json(event.json).status
                    if status.state is TaskState.working and status.message is not None:
                        await steps.step(text_of(status.message))
                if event.final:
                    break
        finally:
            events.close()  # only this call stops following: the task goes on
        return outcome(skill, await service.get(tenant, task_id))

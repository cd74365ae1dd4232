"""Tool calls of resumable skills run as tasks of the task engine, so they are as durable as
A2A calls (and are the same tasks: A2A `tasks/get` shows them).

A long ingestion outlives the MCP call that started it. The call starts a task that runs the
skill (`TaskService.start_skill`), follows its progress, turning every progress text into a
progress notification (the first one names the task), and answers with the task's outcome:
the skill's output model and what it attached, the same structured and text content as a call
run in-process. So:

- a client that cancels or times out stops following the task, not the task;
- a crash resumes the task when a worker starts (`Skill.resumable`, `TaskService.recover`);
- a retry of the same call starts a task whose ingestion job finds the running job with the
  same arguments and follows it (knowledge/jobs.py), instead of ingesting a second copy.
"""

from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError

from agentic_rag.mcp.calls import tool_error, tool_result
from agentic_rag.mcp.context import ProgressSteps
from agentic_rag.security.auth import FORBIDDEN
from agentic_rag.security.principal import Principal
from agentic_rag.skills import Skill
from agentic_rag.tasks.errors import SkillForbiddenError, TaskError, TaskRequestError
from agentic_rag.tasks.outcomes import (
    Canceled,
    Completed,
    Failed,
    NeedsInput,
    Outcome,
    Running,
    Started,
)
from agentic_rag.tasks.service import TaskService


async def start_call(
    tasks: TaskService,
    principal: Principal,
    skill: Skill,
    arguments: dict[str, Any],
    *,
    follow: bool,
) -> Started:
    """The task that runs `skill` with `arguments` for `principal` (its tenant, its groups of
    tools), durably created.

    Raises `MCPError` when the task engine refuses it."""
    try:
        return await tasks.start_skill(
            principal.tenant, skill.name, arguments, groups=principal.groups, follow=follow
        )
    except SkillForbiddenError as exc:
        raise MCPError(FORBIDDEN, exc.message, data=exc.data) from None
    except TaskError as exc:
        code = types.INVALID_PARAMS if isinstance(exc, TaskRequestError) else types.INTERNAL_ERROR
        raise MCPError(code, f"tool {skill.name!r} could not start: {exc.message}") from None


def answer(outcome: Outcome) -> types.CallToolResult:
    """What a call answers once its task has settled (final or paused)."""
    name = outcome.skill.name
    match outcome:
        case Completed():
            return tool_result(outcome.skill, outcome.output, outcome.attached)
        case Failed():
            return tool_error(f"tool {name!r} failed: {outcome.reason}")
        case Canceled():
            return tool_error(
                f"tool {name!r} was canceled: {outcome.reason} (task {outcome.task_id})"
            )
        case NeedsInput():
            return tool_error(
                f"tool {name!r} needs input: {outcome.question} Task {outcome.task_id} waits "
                "for it: answer with an A2A message/send naming this taskId."
            )
        case Running():
            return tool_error(f"tool {name!r}: task {outcome.task_id} is {outcome.state.value}")


class DurableCalls:
    """Runs tool calls as tasks of the engine's task service."""

    def __init__(self, tasks: TaskService) -> None:
        self._tasks = tasks

    async def call(
        self, skill: Skill, arguments: dict[str, Any], principal: Principal, steps: ProgressSteps
    ) -> types.CallToolResult:
        try:
            started = await start_call(self._tasks, principal, skill, arguments, follow=True)
        except MCPError as exc:
            return tool_error(exc.message)
        try:
            await steps.step(
                f"{skill.name} runs as task {started.task_id} (A2A tasks/get shows it); it goes "
                "on if this call is cancelled, and the same call again follows it",
                level="debug",
            )
            async for text in started.progress():
                await steps.step(text)
        finally:
            started.close()  # only this call stops following: the task goes on
        return answer(await self._tasks.outcome(principal.tenant, started.task_id))

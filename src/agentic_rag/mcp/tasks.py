"""MCP tasks (protocol 2025-11-25) over the task engine's tasks: the same task that A2A sees.

A `tools/call` of a resumable tool (`execution.taskSupport: "optional"`) that carries `task`
params is answered at once with a `CreateTaskResult` whose task id is the id of the task
that runs the call (`TaskService.start_skill`; A2A `tasks/get` shows it too). `tasks/get`
shows its status, `tasks/result` waits for its end and answers what the call would have, and
`tasks/cancel` cancels it, as A2A's `tasks/cancel` does. A task is its tenant's: another
tenant's task id answers like an unknown one.

The SDK (mcp 2.3) has the types of tasks but dispatches none of it: it checks every
`tools/call` result against `CallToolResult`, which a `CreateTaskResult` is not, so the
task-augmented call is answered by a server middleware, whose results the SDK sends as they
are; the `tasks/*` methods are request handlers of their own; and the `tasks` capability is
added to the capabilities the SDK derives (`TaskServer`).
"""

from collections.abc import Mapping
from typing import Any

import mcp.types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from agentic_rag.mcp.access import Context, PrincipalFor, require
from agentic_rag.mcp.calls import ArgumentsError, find_skill, validate_arguments
from agentic_rag.mcp.durable import answer, start_call
from agentic_rag.schema.a2a import TaskState
from agentic_rag.skills import InputRequired, SkillRegistry
from agentic_rag.tasks import states
from agentic_rag.tasks.errors import TaskNotCancelableError, TaskNotFoundError, TaskRequestError
from agentic_rag.tasks.outcomes import TaskView, view_of
from agentic_rag.tasks.service import TaskService

# The protocol version whose core defines tasks (2026-07-28 moved them to an extension).
TASKS_VERSION = "2025-11-25"
RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
POLL_INTERVAL_MS = 1000
PAGE_SIZE = 50

EXECUTION = types.ToolExecution(task_support="optional")
CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
    ),
)

STATUS: dict[TaskState, types.TaskStatus] = {
    TaskState.submitted: "working",
    TaskState.working: "working",
    TaskState.input_required: "input_required",
    TaskState.auth_required: "input_required",
    TaskState.completed: "completed",
    TaskState.failed: "failed",
    TaskState.rejected: "failed",
    TaskState.canceled: "cancelled",
    TaskState.unknown: "failed",  # nothing moves a task on from `unknown`
}


class TaskServer(Server[Any]):
    """The SDK's server, declaring the `tasks` capability to handshake-era clients, and
    `resources.listChanged` wherever it serves `resources/subscribe`: both notifications go
    on the same lasting connection (stdio, or an HTTP session)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            return capabilities
        update: dict[str, Any] = {"tasks": CAPABILITY}
        resources = capabilities.resources
        if resources is not None and resources.subscribe:
            update["resources"] = resources.model_copy(update={"list_changed": True})
        return capabilities.model_copy(update=update)


def mcp_task(task: TaskView) -> dict[str, Any]:
    """The MCP task status of a task, as the wire has it (`ttl: null`: kept for good)."""
    updated = task.updated_at or states.now()
    status = types.Task(
        task_id=task.id,
        status=STATUS[task.state],
        status_message=task.message or None,
        created_at=task.created_at or updated,
        last_updated_at=updated,
        ttl=None,
        poll_interval=POLL_INTERVAL_MS,
    )
    return {**status.model_dump(by_alias=True, mode="json", exclude_none=True), "ttl": None}


class McpTasks:
    """The task-augmented `tools/call` and the `tasks/get`, `tasks/result`, `tasks/cancel`,
    `tasks/list` handlers, over the engine's A2A task service."""

    def __init__(
        self, registry: SkillRegistry, tasks: TaskService, principal_for: PrincipalFor
    ) -> None:
        self.registry, self._tasks, self._principal_for = registry, tasks, principal_for

    def install(self, server: Server[Any]) -> None:
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.cancel)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.list_tasks)
        server.middleware.append(self.intercept)  # innermost: the SDK's tracing still wraps it

    async def intercept(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """Answer a task-augmented `tools/call` with a `CreateTaskResult`; pass the rest on."""
        params = ctx.params
        if (
            ctx.method != "tools/call"
            or ctx.protocol_version != TASKS_VERSION
            or not isinstance(params, Mapping)
            or params.get("task") is None
        ):
            return await call_next(ctx)
        return await self.create(ctx, types.CallToolRequestParams.model_validate(params))

    async def create(self, ctx: Context, params: types.CallToolRequestParams) -> dict[str, Any]:
        principal = require(self._principal_for(ctx), "write", "tools/call")
        skill = find_skill(self.registry, params.name)
        if not skill.resumable:
            # The spec's answer to a task-augmented call of a tool whose taskSupport forbids it.
            raise MCPError(
                types.METHOD_NOT_FOUND,
                f"tool {skill.name!r} does not run as a task (execution.taskSupport is "
                "forbidden): call it without `task`",
            )
        arguments = params.arguments or {}
        try:
            validate_arguments(skill, arguments)
        except InputRequired as needed:
            # A task cannot ask its question before the caller has the task to answer on.
            raise MCPError(
                types.INVALID_PARAMS,
                f"tool {skill.name!r} needs the arguments {', '.join(needed.missing)}",
            ) from None
        except ArgumentsError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        started = await start_call(self._tasks, principal, skill, arguments, follow=False)
        return {
            "task": mcp_task(started.view),
            "_meta": {
                IMMEDIATE_RESPONSE: f"{skill.name} started as task {started.task_id}; "
                "its result comes with tasks/result."
            },
        }

    async def get(self, ctx: Context, params: types.GetTaskRequestParams) -> dict[str, Any]:
        principal = require(self._principal_for(ctx), "read", "tasks/get")
        try:
            return mcp_task(await self._tasks.view(principal.tenant, params.task_id))
        except TaskNotFoundError:
            raise _unknown(params.task_id) from None

    async def result(
        self, ctx: Context, params: types.GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        """What the task's call answers, once the task has ended (or waits for input)."""
        principal = require(self._principal_for(ctx), "read", "tasks/result")
        task_id = params.task_id
        try:
            # Once the task is final or paused; the service follows it on any worker.
            outcome = await self._tasks.outcome(principal.tenant, task_id, wait=True)
        except TaskNotFoundError:
            raise _unknown(task_id) from None
        except TaskRequestError as exc:
            raise MCPError(
                types.INVALID_PARAMS, f"task {task_id} runs no tool of this server: {exc.message}"
            ) from None
        return {
            **answer(outcome).model_dump(by_alias=True, mode="json", exclude_none=True),
            "_meta": {RELATED_TASK: {"taskId": task_id}},
        }

    async def cancel(self, ctx: Context, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        principal = require(self._principal_for(ctx), "write", "tasks/cancel")
        try:
            task = await self._tasks.cancel(principal.tenant, params.task_id)
        except TaskNotFoundError:
            raise _unknown(params.task_id) from None
        except TaskNotCancelableError as exc:
            raise MCPError(types.INVALID_PARAMS, f"cannot cancel: {exc.message}") from None
        return mcp_task(view_of(task))

    async def list_tasks(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> dict[str, Any]:
        """The caller's tenant's tasks (its A2A tasks too: the same tasks), a page at a time;
        the cursor is the last task id of the page before."""
        principal = require(self._principal_for(ctx), "read", "tasks/list")
        after = params.cursor if params is not None else None
        if after is not None and not after:
            raise MCPError(types.INVALID_PARAMS, "cursor '' is not one this server gave")
        # One more than a page: whether there is a next page, without counting them all.
        tasks = await self._tasks.views(principal.tenant, after, PAGE_SIZE + 1)
        page = tasks[:PAGE_SIZE]
        answer: dict[str, Any] = {"tasks": [mcp_task(t) for t in page]}
        if len(tasks) > PAGE_SIZE:
            answer["nextCursor"] = page[-1].id
        return answer


def _unknown(task_id: str) -> MCPError:
    # The spec's code for an unknown task id; another tenant's task answers the same.
    return MCPError(types.INVALID_PARAMS, f"no task {task_id!r}")

"""ListTasks of A2A 1.0 (spec §3.1.4): the request's filters as a store query, the page
token as an opaque cursor, the page as a ListTasksResponse."""

import base64
import binascii
from datetime import UTC, datetime

from a2a.compat.v0_3 import conversions
from a2a.types import a2a_pb2 as pb

from agentic_rag.a2a.errors import InvalidParamsError
from agentic_rag.a2a.v1 import wire
from agentic_rag.tasks.parts import with_history
from agentic_rag.tasks.store import Cursor, TaskQuery, TaskStore

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 100


def _cursor(token: str) -> Cursor | None:
    if not token:
        return None
    try:
        updated, task_id = base64.urlsafe_b64decode(token).decode().split("|", 1)
        return datetime.fromisoformat(updated), task_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidParamsError(
            f"pageToken {token!r} is not a token this server gave", data={"field": "pageToken"}
        ) from None


def _token(cursor: Cursor | None) -> str:
    if cursor is None:
        return ""
    updated, task_id = cursor
    return base64.urlsafe_b64encode(f"{updated.isoformat()}|{task_id}".encode()).decode()


def query_of(request: pb.ListTasksRequest) -> TaskQuery:
    """The store query of a ListTasksRequest; out-of-range values are invalid params."""
    size = request.page_size if request.HasField("page_size") else DEFAULT_PAGE_SIZE
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise InvalidParamsError(
            f"pageSize must be between 1 and {MAX_PAGE_SIZE} inclusive, got {size}",
            data={"field": "pageSize"},
        )
    if request.HasField("history_length") and request.history_length < 0:
        raise InvalidParamsError(
            f"historyLength must be a non-negative integer, got {request.history_length}",
            data={"field": "historyLength"},
        )
    state = None
    if request.status != pb.TaskState.TASK_STATE_UNSPECIFIED:
        state = conversions.to_compat_task_status(pb.TaskStatus(state=request.status)).state
    since = (
        request.status_timestamp_after.ToDatetime(tzinfo=UTC)
        if request.HasField("status_timestamp_after")
        else None
    )
    return TaskQuery(
        context_id=request.context_id or None,
        state=state.value if state is not None else None,
        status_since=since,
        after=_cursor(request.page_token),
        limit=size,
    )


async def list_tasks(
    store: TaskStore, tenant: str, request: pb.ListTasksRequest
) -> pb.ListTasksResponse:
    query = query_of(request)
    tasks, total, cursor = await store.recent(tenant, query)
    history = request.history_length if request.HasField("history_length") else None
    response = pb.ListTasksResponse(
        next_page_token=_token(cursor), page_size=query.limit, total_size=total
    )
    for task in tasks:
        listed = wire.task(with_history(task, history))
        if not request.include_artifacts:
            listed.ClearField("artifacts")
        response.tasks.append(listed)
    return response

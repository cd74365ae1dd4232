"""A2A and JSON-RPC errors (docs/a2a-notes.md §3). Raise one; the JSON-RPC layer answers with it."""

from typing import Any, ClassVar

from agentic_rag.tasks import errors as task_errors


class A2AError(Exception):
    code: ClassVar[int]
    default_message: ClassVar[str]

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class JSONParseError(A2AError):
    code, default_message = -32700, "Invalid JSON payload"


class InvalidRequestError(A2AError):
    code, default_message = -32600, "Request payload validation error"


class MethodNotFoundError(A2AError):
    code, default_message = -32601, "Method not found"


class InvalidParamsError(A2AError):
    code, default_message = -32602, "Invalid parameters"


class InternalError(A2AError):
    code, default_message = -32603, "Internal error"


class TaskNotFoundError(A2AError):
    code, default_message = -32001, "Task not found"


class TaskNotCancelableError(A2AError):
    code, default_message = -32002, "Task cannot be canceled"


class UnsupportedOperationError(A2AError):
    code, default_message = -32004, "This operation is not supported"


class ContentTypeNotSupportedError(A2AError):
    code, default_message = -32005, "Incompatible content types"


class AuthenticatedExtendedCardNotConfiguredError(A2AError):
    code, default_message = -32007, "Authenticated Extended Card is not configured"


class ForbiddenError(A2AError):
    """The credential is valid but lacks a scope, or the group of the skill it would run
    (HTTP 403 where the binding has a status for it; see docs/security.md)."""

    code, default_message = -32011, "Forbidden"


class SessionLimitReachedError(A2AError):
    """The tenant has as many active sessions as it may (network/sessions.py)."""

    code, default_message = -32013, "Session limit reached"


# The task engine's refusals as A2A errors: the codes are this protocol's, so the mapping is the
# adapter's (the engine raises the same errors to MCP and the network, which answer otherwise).
_TASK_ERRORS: dict[type[task_errors.TaskError], type[A2AError]] = {
    task_errors.TaskNotFoundError: TaskNotFoundError,
    task_errors.TaskNotCancelableError: TaskNotCancelableError,
    task_errors.TaskEndedError: UnsupportedOperationError,
    task_errors.TaskRequestError: InvalidParamsError,
    task_errors.SkillForbiddenError: ForbiddenError,
    task_errors.OutputNotAcceptedError: ContentTypeNotSupportedError,
    task_errors.TaskUnavailableError: InternalError,
}


def from_task_error(error: task_errors.TaskError) -> A2AError:
    """The A2A error that answers a refusal of the task engine."""
    kind = next(
        (a2a for engine, a2a in _TASK_ERRORS.items() if isinstance(error, engine)), InternalError
    )
    return kind(error.message, error.data)

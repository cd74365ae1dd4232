"""A2A 1.0 errors: the JSON-RPC codes of 0.x (docs/a2a-notes.md §3) plus 1.0's, each with the
`google.rpc.ErrorInfo` the 1.0 spec puts in `error.data` (spec §9.5), built by a2a-sdk's own
error tables so that the reasons are the spec's."""

from typing import Any

from a2a.utils import errors as sdk
from a2a.utils.error_handlers import build_error_details

from agentic_rag.a2a.errors import A2AError
from agentic_rag.storage.outage import database_unreachable
from agentic_rag.tasks.errors import TaskUnavailableError

_SDK_ERRORS: dict[int, type[sdk.A2AError]] = {
    code: kind for kind, code in sdk.JSON_RPC_ERROR_CODE_MAP.items()
}


class VersionNotSupportedError(A2AError):
    code, default_message = -32009, "Protocol version not supported"


class ExtendedAgentCardNotConfiguredError(A2AError):
    code, default_message = -32007, "Extended agent card is not configured"


def details(error: A2AError) -> list[dict[str, Any]]:
    """`error.data` of 1.0: a leading ErrorInfo whose reason names the error (our codes the
    SDK lacks, such as -32011 Forbidden, get a reason of their own)."""
    metadata = error.data if isinstance(error.data, dict) else None
    kind = _SDK_ERRORS.get(error.code)
    if kind is None:
        return [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": type(error).__name__.removesuffix("Error").upper() or "UNKNOWN_ERROR",
                "domain": "a2a-protocol.org",
                "metadata": metadata or {},
            }
        ]
    return build_error_details(kind(error.message, metadata))


def unavailable(exc: BaseException) -> str | None:
    """Why a call cannot be answered now, when `exc` says so (the database is unreachable, or
    the worker that runs the task): a refusal to retry after `Retry-After`, not a bug."""
    if isinstance(exc, TaskUnavailableError):
        return exc.message
    if database_unreachable(exc):
        return "the database cannot be reached now; retry shortly"
    return None


def rpc_error(error: A2AError) -> dict[str, Any]:
    """The JSON-RPC error object of 1.0."""
    return {"code": error.code, "message": error.message, "data": details(error)}


def rest_error(error: A2AError) -> tuple[int, dict[str, Any]]:
    """The HTTP status and `google.rpc.Status` JSON of the HTTP+JSON binding (spec §11.6)."""
    kind = _SDK_ERRORS.get(error.code)
    if kind is None:  # ours: Forbidden
        status, grpc = (403, "PERMISSION_DENIED") if error.code == -32011 else (500, "INTERNAL")
    else:
        mapping = sdk.A2A_ERROR_MAPPING.get(
            kind, sdk.ErrorMapping(500, "INTERNAL", "INTERNAL_ERROR")
        )
        status, grpc = mapping.http_code, mapping.grpc_status
    payload = {"code": status, "status": grpc, "message": error.message, "details": details(error)}
    return status, {"error": payload}

"""The JSON-RPC binding of A2A 1.0 (spec §9) at the same URL as 0.2.1 and 0.3 (`POST /`):
a call is 1.0 when its method is one of 1.0's PascalCase names, and the `A2A-Version` header
must then say 1.0 (an empty header means 0.3, spec §3.6.2); a version this server does not
speak is refused with VersionNotSupportedError (-32009) whatever the method."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from a2a.types import a2a_pb2 as pb
from google.protobuf.message import Message as ProtoMessage
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from agentic_rag.a2a import jsonrpc
from agentic_rag.a2a.errors import (
    A2AError,
    ForbiddenError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    from_task_error,
)
from agentic_rag.a2a.jsonrpc import RequestId, RPCRequest
from agentic_rag.a2a.v1 import wire
from agentic_rag.a2a.v1.errors import VersionNotSupportedError, rpc_error, unavailable
from agentic_rag.a2a.v1.service import A2AService
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.observability.middleware import record_rpc_call
from agentic_rag.security.auth import UNAVAILABLE_RETRY_SECONDS
from agentic_rag.security.principal import Scope, principal_of
from agentic_rag.tasks.errors import TaskError

log = logging.getLogger(__name__)

VERSION_HEADER = "A2A-Version"
# The versions `POST /` speaks, as major.minor: 0.2 and 0.3 by their slash-named methods.
KNOWN_VERSIONS = frozenset({"0.2", "0.3", "1.0"})

type Unary = Callable[[Request, Any], Awaitable[ProtoMessage | None]]
type Streaming = Callable[[Request, Any], Awaitable[AsyncIterator[pb.StreamResponse]]]


@dataclass(frozen=True)
class Method:
    params: type[ProtoMessage]
    scope: Scope
    streams: bool = False


METHODS: dict[str, Method] = {
    "SendMessage": Method(pb.SendMessageRequest, "write"),
    "SendStreamingMessage": Method(pb.SendMessageRequest, "write", streams=True),
    "GetTask": Method(pb.GetTaskRequest, "read"),
    "ListTasks": Method(pb.ListTasksRequest, "read"),
    "CancelTask": Method(pb.CancelTaskRequest, "write"),
    "SubscribeToTask": Method(pb.SubscribeToTaskRequest, "read", streams=True),
    "CreateTaskPushNotificationConfig": Method(pb.TaskPushNotificationConfig, "write"),
    "GetTaskPushNotificationConfig": Method(pb.GetTaskPushNotificationConfigRequest, "read"),
    "ListTaskPushNotificationConfigs": Method(pb.ListTaskPushNotificationConfigsRequest, "read"),
    "DeleteTaskPushNotificationConfig": Method(pb.DeleteTaskPushNotificationConfigRequest, "write"),
    "GetExtendedAgentCard": Method(pb.GetExtendedAgentCardRequest, "read"),
}
METHOD_SCOPES: dict[str, Scope] = {name: m.scope for name, m in METHODS.items()}


def major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])


_OLDER_VERSIONS = KNOWN_VERSIONS - {"1.0"}


def version_asked(header: str) -> str:
    """An A2A-Version header's value as major.minor; empty means 0.3 (spec §3.6.2)."""
    return major_minor(header) or "0.3"


def requested_version(request: Request) -> str:
    """The A2A-Version the caller asked for, as major.minor."""
    return version_asked(request.headers.get(VERSION_HEADER, ""))


def selects(version_header: str) -> bool:
    """Whether this binding answers a call with this A2A-Version header (empty if none): one
    that asks for A2A 1.0, or for a version no binding here speaks (to refuse it). Every other
    call is 0.2.1's or 0.3's, unchanged: a 1.0 method name without the header is a 0.3 call to
    a method 0.3 lacks (-32601). The caller reads the header (`A2AEndpoints.rpc` reads the
    headers it needs in one pass)."""
    return version_asked(version_header) not in _OLDER_VERSIONS


class JsonRpcV1:
    def __init__(self, service: A2AService, outage: RepeatedFailure) -> None:
        """`outage`: the A2A adapter's log of database outages, shared by every binding."""
        self._outage = outage
        s = service
        self._unary: dict[str, Unary] = {
            "SendMessage": s.send_message,
            "GetTask": s.get_task,
            "ListTasks": s.list_tasks,
            "CancelTask": s.cancel_task,
            "CreateTaskPushNotificationConfig": s.create_push_config,
            "GetTaskPushNotificationConfig": s.get_push_config,
            "ListTaskPushNotificationConfigs": s.list_push_configs,
            "DeleteTaskPushNotificationConfig": s.delete_push_config,
            "GetExtendedAgentCard": s.extended_card,
        }
        self._streaming: dict[str, Streaming] = {
            "SendStreamingMessage": s.stream_message,
            "SubscribeToTask": s.subscribe,
        }

    async def answer(self, http: Request, call: RPCRequest, body: bytes) -> Response:
        """The answer to a call `selects` chose: every refusal as a 1.0 error."""
        try:
            response = await self._answer(http, call, body)
            record_rpc_call(http.scope, call.method, "ok")
            self._outage.succeeded()
            return response
        except A2AError as exc:
            status = 403 if isinstance(exc, ForbiddenError) else 200
            return _refuse(http, call, exc, status)
        except Exception as exc:
            why = unavailable(exc)
            if why is not None:  # as the 0.x binding does: -32603, to retry (a2a/routes.py)
                if not isinstance(exc, TaskError):
                    self._outage.failed()
                refusal = _refuse(http, call, InternalError(why))
                refusal.headers["Retry-After"] = str(UNAVAILABLE_RETRY_SECONDS)
                return refusal
            if isinstance(exc, TaskError):
                error = from_task_error(exc)
                status = 403 if isinstance(error, ForbiddenError) else 200
                return _refuse(http, call, error, status)
            log.exception("internal error answering an A2A 1.0 JSON-RPC request")
            return _refuse(http, call, InternalError("internal error; the server log has details"))

    async def _answer(self, http: Request, call: RPCRequest, body: bytes) -> Response:
        if requested_version(http) != "1.0":
            said = http.headers.get(VERSION_HEADER, "").strip()
            raise VersionNotSupportedError(
                f"A2A-Version {said!r} is not served here: this server speaks 0.2 and 0.3 "
                "(slash-named methods such as message/send, no header needed) and 1.0 "
                "(PascalCase methods such as SendMessage, with the header A2A-Version: 1.0)"
            )
        method = METHODS.get(call.method)
        if method is None:
            raise MethodNotFoundError(
                f"Method not found: {call.method} is not an A2A 1.0 method (the request's "
                f"A2A-Version is 1.0); 1.0 has {', '.join(METHODS)}"
            )
        raw_params = call.params if call.params is not None else {}
        if not call.has_id:  # checked after the params, as for 0.x (§12.1)
            wire.parse(raw_params, method.params)
            raise InvalidRequestError("id is required: notifications are not supported")
        if not principal_of(http.scope).allows(method.scope):  # before the params, as 0.x
            raise ForbiddenError(
                f"this credential lacks the scope {method.scope!r} that {call.method} needs"
            )
        params = wire.parse(raw_params, method.params)
        if jsonrpc.may_contain_nul(body) and jsonrpc.contains_nul(call.params):
            raise InvalidParamsError("params must not contain the character U+0000 (NUL)")
        if method.streams:
            events = await self._streaming[call.method](http, params)
            return EventSourceResponse(_sse(call.id, events), sep="\n", ping=15)
        result = await self._unary[call.method](http, params)
        result_json = b"{}" if result is None else wire.dumps(result)
        return Response(jsonrpc.success(call.id, result_json), media_type="application/json")


def _refuse(http: Request, call: RPCRequest, error: A2AError, status: int = 200) -> Response:
    record_rpc_call(http.scope, call.method, str(error.code))
    return Response(_failure(call.id, error), status_code=status, media_type="application/json")


def _failure(request_id: RequestId, error: A2AError) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": rpc_error(error)})


async def _sse(
    request_id: RequestId, events: AsyncIterator[pb.StreamResponse]
) -> AsyncIterator[ServerSentEvent]:
    """Each StreamResponse as one JSON-RPC response; a failure after the stream began is one
    error event that ends it (§12.2)."""
    try:
        async for event in events:
            data = jsonrpc.success(request_id, wire.dumps(event)).decode()
            yield ServerSentEvent(data=data, sep="\n")
    except Exception as exc:
        error = from_task_error(exc) if isinstance(exc, TaskError) else exc
        if not isinstance(error, A2AError):
            log.error("internal error in an A2A 1.0 event stream", exc_info=exc)
            error = InternalError("internal error; the server log has details")
        yield ServerSentEvent(data=_failure(request_id, error).decode(), sep="\n")

"""The HTTP+JSON binding of A2A 1.0 (spec §11), under `/json` (a2a/v1/card.py says why):
the routes of the proto's `google.api.http` options, each a call of the one A2AService the
JSON-RPC binding uses. Bodies and answers are the proto messages in their JSON mapping;
errors are `google.rpc.Status` JSON with the HTTP status the spec maps each error to."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from a2a.types import a2a_pb2 as pb
from a2a.utils.proto_utils import parse_params
from google.protobuf.json_format import ParseError
from google.protobuf.message import Message as ProtoMessage
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentic_rag.a2a import jsonrpc
from agentic_rag.a2a.errors import (
    A2AError,
    ForbiddenError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    from_task_error,
)
from agentic_rag.a2a.v1 import wire
from agentic_rag.a2a.v1.card import HTTP_JSON_PREFIX
from agentic_rag.a2a.v1.errors import VersionNotSupportedError, rest_error, unavailable
from agentic_rag.a2a.v1.jsonrpc import VERSION_HEADER, requested_version
from agentic_rag.a2a.v1.service import A2AService
from agentic_rag.config import Settings
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.security.auth import UNAVAILABLE_RETRY_SECONDS
from agentic_rag.security.principal import Scope, principal_of
from agentic_rag.tasks.errors import TaskError

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/a2a+json"
type Handler = Callable[[Request], Awaitable[Response]]


class HttpJson:
    def __init__(self, service: A2AService, settings: Settings, outage: RepeatedFailure) -> None:
        """`outage`: the A2A adapter's log of database outages, shared by every binding."""
        self._service, self._settings, self._outage = service, settings, outage

    def routes(self) -> list[BaseRoute]:
        s, p = self._service, HTTP_JSON_PREFIX
        configs = p + "/tasks/{task_id}/pushNotificationConfigs"
        return [
            Route(
                p + "/message:send",
                self._unary(s.send_message, "write", body=pb.SendMessageRequest),
                methods=["POST"],
            ),
            Route(
                p + "/message:stream",
                self._stream(s.stream_message, "write", body=pb.SendMessageRequest),
                methods=["POST"],
            ),
            # Before /tasks/{id}: a path parameter takes any text without a slash.
            Route(
                p + "/tasks/{id}:cancel",
                self._unary(s.cancel_task, "write", query=pb.CancelTaskRequest),
                methods=["POST"],
            ),
            Route(
                p + "/tasks/{id}:subscribe",
                self._stream(s.subscribe, "read", query=pb.SubscribeToTaskRequest),
                methods=["GET", "POST"],
            ),
            Route(
                p + "/tasks/{id}",
                self._unary(s.get_task, "read", query=pb.GetTaskRequest),
                methods=["GET"],
            ),
            Route(
                p + "/tasks",
                self._unary(s.list_tasks, "read", query=pb.ListTasksRequest),
                methods=["GET"],
            ),
            Route(
                configs,
                self._unary(s.create_push_config, "write", body=pb.TaskPushNotificationConfig),
                methods=["POST"],
            ),
            Route(
                configs,
                self._unary(
                    s.list_push_configs, "read", query=pb.ListTaskPushNotificationConfigsRequest
                ),
                methods=["GET"],
            ),
            Route(
                configs + "/{id}",
                self._unary(
                    s.get_push_config, "read", query=pb.GetTaskPushNotificationConfigRequest
                ),
                methods=["GET"],
            ),
            Route(
                configs + "/{id}",
                self._unary(
                    s.delete_push_config, "write", query=pb.DeleteTaskPushNotificationConfigRequest
                ),
                methods=["DELETE"],
            ),
            Route(
                p + "/extendedAgentCard",
                self._unary(s.extended_card, "read", query=pb.GetExtendedAgentCardRequest),
                methods=["GET"],
            ),
        ]

    async def _request[P: ProtoMessage](
        self, http: Request, scope: Scope, body: type[P] | None, query: type[P] | None
    ) -> P:
        """The call's request message: the body's JSON, or the query string's parameters;
        the path's parameters (task ids) set on it either way. Checks the version and scope."""
        if requested_version(http) != "1.0":
            said = http.headers.get(VERSION_HEADER, "").strip()
            raise VersionNotSupportedError(
                f"A2A-Version {said or 'empty (0.3)'!r} is not served by the HTTP+JSON binding: "
                "it speaks A2A 1.0 only (send the header A2A-Version: 1.0)"
            )
        if not principal_of(http.scope).allows(scope):
            raise ForbiddenError(f"this credential lacks the scope {scope!r} this call needs")
        fields: dict[str, Any] = dict(http.path_params)
        if body is not None:
            payload = await self._json(http)
            request = wire.parse({**payload, **fields}, body)
        else:
            assert query is not None
            request = query()
            _check_enums(http, request)
            try:
                parse_params(http.query_params, request)
            except (ParseError, ValueError, TypeError) as exc:
                raise InvalidParamsError(f"Invalid parameters: {exc}") from None
            request.MergeFrom(wire.parse(fields, query))
        return request

    async def _json(self, http: Request) -> dict[str, Any]:
        limit = self._settings.max_body_bytes
        declared = http.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise InvalidRequestError(f"the body exceeds {limit} bytes")
        chunks, size = [], 0
        async for chunk in http.stream():  # never more than the limit in memory
            size += len(chunk)
            if size > limit:
                raise InvalidRequestError(f"the body exceeds {limit} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequestError(f"the body is not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise InvalidRequestError("the body must be a JSON object")
        if jsonrpc.contains_nul(payload):
            raise InvalidParamsError("the body must not contain the character U+0000 (NUL)")
        return payload

    def _unary(
        self,
        call: Callable[[Request, Any], Awaitable[ProtoMessage | None]],
        scope: Scope,
        *,
        body: type[ProtoMessage] | None = None,
        query: type[ProtoMessage] | None = None,
    ) -> Handler:
        return self._handler(call, scope, body, query, _json_response)

    def _stream(
        self,
        call: Callable[[Request, Any], Awaitable[AsyncIterator[pb.StreamResponse]]],
        scope: Scope,
        *,
        body: type[ProtoMessage] | None = None,
        query: type[ProtoMessage] | None = None,
    ) -> Handler:
        return self._handler(call, scope, body, query, _sse_response)

    def _handler[R](
        self,
        call: Callable[[Request, Any], Awaitable[R]],
        scope: Scope,
        body: type[ProtoMessage] | None,
        query: type[ProtoMessage] | None,
        respond: Callable[[R], Response],
    ) -> Handler:
        """The route's handler: the request message, the call, its answer or the refusal."""

        async def handle(http: Request) -> Response:
            try:
                result = await call(http, await self._request(http, scope, body, query))
            except Exception as exc:
                why = unavailable(exc)
                if why is None:
                    return _refusal(exc)
                if not isinstance(exc, TaskError):
                    self._outage.failed()
                return _unavailable(why)
            self._outage.succeeded()
            return respond(result)

        return handle


def _json_response(result: ProtoMessage | None) -> Response:
    return Response(b"{}" if result is None else wire.dumps(result), media_type=MEDIA_TYPE)


def _sse_response(events: AsyncIterator[pb.StreamResponse]) -> Response:
    return EventSourceResponse(_sse(events), sep="\n", ping=15)


def _check_enums(http: Request, request: ProtoMessage) -> None:
    """Refuse an enum query parameter of no known value (`status=TASK_STATE_RUNNING`), which
    a2a-sdk's `parse_params` would drop as if it were absent."""
    for field in request.DESCRIPTOR.fields:
        value = http.query_params.get(field.camelcase_name)
        if field.enum_type is None or value is None:
            continue
        if value not in field.enum_type.values_by_name:
            known = ", ".join(field.enum_type.values_by_name)
            raise InvalidParamsError(
                f"Invalid parameters: {field.camelcase_name} {value!r} is none of {known}",
                data={"field": field.camelcase_name},
            )


def _a2a_error(exc: Exception) -> A2AError:
    if isinstance(exc, TaskError):
        return from_task_error(exc)
    if isinstance(exc, A2AError):
        return exc
    log.error("internal error answering an A2A 1.0 HTTP+JSON request", exc_info=exc)
    return InternalError("internal error; the server log has details")


def _unavailable(why: str) -> Response:
    """503 with the gRPC status UNAVAILABLE, the one that says to retry (google.rpc.Code), and
    when: the service is there, its database or the task's worker is not, for now."""
    payload = {"error": {"code": 503, "status": "UNAVAILABLE", "message": why, "details": []}}
    headers = {"Retry-After": str(UNAVAILABLE_RETRY_SECONDS)}
    return Response(orjson.dumps(payload), 503, headers, media_type="application/json")


def _refusal(exc: Exception) -> Response:
    if isinstance(exc, ClientDisconnect):
        return Response(status_code=400)
    status, payload = rest_error(_a2a_error(exc))
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


async def _sse(events: AsyncIterator[pb.StreamResponse]) -> AsyncIterator[ServerSentEvent]:
    """Each StreamResponse as one event; a failure after the stream began is one `error`
    event with the Status JSON that ends it."""
    try:
        async for event in events:
            yield ServerSentEvent(data=wire.dumps(event).decode(), sep="\n")
    except Exception as exc:
        _, payload = rest_error(_a2a_error(exc))
        yield ServerSentEvent(data=orjson.dumps(payload).decode(), event="error", sep="\n")

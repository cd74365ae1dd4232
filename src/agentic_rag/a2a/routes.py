"""The A2A HTTP surface: JSON-RPC on `POST /`, SSE streams, the Agent Card and the JWKS."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agentic_rag.a2a import jsonrpc
from agentic_rag.a2a.card import agent_card, card_documents
from agentic_rag.a2a.errors import (
    A2AError,
    AuthenticatedExtendedCardNotConfiguredError,
    ForbiddenError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    SessionLimitReachedError,
    from_task_error,
)
from agentic_rag.a2a.jsonrpc import RequestId, RPCError
from agentic_rag.a2a.v1 import card as v1_card
from agentic_rag.a2a.v1 import jsonrpc as v1
from agentic_rag.a2a.v1.rest import HttpJson
from agentic_rag.a2a.v1.service import A2AService
from agentic_rag.config import Settings
from agentic_rag.network.sessions import SessionLimitError, SessionStore
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.observability.middleware import record_rpc_call
from agentic_rag.schema.a2a import Message, TaskIdParams
from agentic_rag.schema.base import wire_json
from agentic_rag.schema.compat import (
    PushConfigDelete,
    PushConfigQuery,
    QueryParams,
    SendParams,
    TaskPushConfig,
)
from agentic_rag.security.auth import UNAVAILABLE_RETRY_SECONDS, Authenticator
from agentic_rag.security.principal import ALL_SCOPES, Scope, principal_of
from agentic_rag.skills import SkillRegistry
from agentic_rag.storage.outage import database_unreachable
from agentic_rag.tasks.errors import TaskError, TaskUnavailableError
from agentic_rag.tasks.parts import agent_text, final_status, with_history
from agentic_rag.tasks.push import SigningKeys
from agentic_rag.tasks.service import Accepted, Reply, TaskService
from agentic_rag.tasks.store import Event

log = logging.getLogger(__name__)

JSON = "application/json"

METHOD_SCOPES: dict[str, Scope] = {
    "message/send": "write",
    "message/stream": "write",
    "tasks/get": "read",
    "tasks/cancel": "write",
    "tasks/resubscribe": "read",
    "tasks/pushNotificationConfig/set": "write",
    "tasks/pushNotificationConfig/get": "read",
    "tasks/pushNotificationConfig/list": "read",
    "tasks/pushNotificationConfig/delete": "write",
    "agent/getAuthenticatedExtendedCard": "read",
}
# The one method without params (it ignores any); every other one's params are an object.
PARAMLESS = frozenset({"agent/getAuthenticatedExtendedCard"})
# What each method's params must be: checked before a missing id is refused (§12.1).
METHOD_PARAMS: dict[str, type[BaseModel]] = {
    "message/send": SendParams,
    "message/stream": SendParams,
    "tasks/get": QueryParams,
    "tasks/cancel": TaskIdParams,
    "tasks/resubscribe": TaskIdParams,
    "tasks/pushNotificationConfig/set": TaskPushConfig,
    "tasks/pushNotificationConfig/get": PushConfigQuery,
    "tasks/pushNotificationConfig/list": PushConfigQuery,
    "tasks/pushNotificationConfig/delete": PushConfigDelete,
}


def tenant_of(request: Request) -> str:
    """The tenant every store query of this request is scoped by: the credential's."""
    return principal_of(request.scope).tenant


_VERSION_HEADER = v1.VERSION_HEADER.lower().encode("latin-1")  # ASGI names are lower case


def _header(headers: dict[bytes, bytes], name: bytes) -> str:
    """A header of `headers` (raw, by lower-case name) as Starlette decodes it; "" if absent."""
    return headers.get(name, b"").decode("latin-1")


def _validate[M: BaseModel](model: type[M], params: Any) -> M:
    if not isinstance(params, dict):
        raise InvalidParamsError("params must be an object")
    try:
        # Strict and in JSON mode: "2" is not an integer and "yes" not a boolean (§12.1).
        # By the model's validator itself: model_validate_json is a Python frame around it.
        validated: M = model.__pydantic_validator__.validate_json(orjson.dumps(params), strict=True)
        return validated
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]) or "params", "problem": e["msg"]}
            for e in exc.errors(include_url=False)
        ]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5])
        raise InvalidParamsError(f"Invalid parameters: {summary}", data=problems) from None


class A2AEndpoints:
    def __init__(
        self,
        tasks: TaskService,
        sessions: SessionStore,
        auth: Authenticator,
        keys: SigningKeys,
        registry: SkillRegistry,
        settings: Settings,
    ) -> None:
        self._tasks, self._sessions, self._auth, self._keys = tasks, sessions, auth, keys
        self._registry, self._settings = registry, settings
        self._outage = RepeatedFailure(log, "A2A calls: the database", settle_seconds=1.0)
        self._cards: dict[tuple[bool, bool, int], tuple[bytes, bytes]] = {}
        self._methods: dict[str, Callable[[Request, RequestId, Any], Awaitable[Response]]] = {
            "message/send": self._send,
            "message/stream": self._stream,
            "tasks/get": self._get,
            "tasks/cancel": self._cancel,
            "tasks/resubscribe": self._resubscribe,
            "tasks/pushNotificationConfig/set": self._set_push,
            "tasks/pushNotificationConfig/get": self._get_push,
            "tasks/pushNotificationConfig/list": self._list_push,
            "tasks/pushNotificationConfig/delete": self._delete_push,
            "agent/getAuthenticatedExtendedCard": self._extended_card,
        }
        self.v1 = A2AService(tasks, self._accept, self._extended_card_v030, registry)
        self._v1_rpc = v1.JsonRpcV1(self.v1, self._outage)

    def _card(self, *, extended: bool, v030: bool) -> bytes:
        """The card for the current authentication state (it changes once keys exist) and
        skills (an upstream MCP server's join when it first answers: mcp/upstream.py)."""
        auth = self._auth
        key = (auth.enforced, extended, len(self._registry))
        if key not in self._cards:
            card = agent_card(
                self._settings,
                self._registry,
                security_schemes=auth.security_schemes(),
                extended=extended,
            )
            self._cards[key] = card_documents(card)
        return self._cards[key][1 if v030 else 0]

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self.rpc, methods=["POST"]),
            # A2A 1.0's HTTP+JSON, under /json
            *HttpJson(self.v1, self._settings, self._outage).routes(),
            Route("/.well-known/agent.json", self.card_v021, methods=["GET"]),
            Route("/.well-known/agent-card.json", self.card_v030, methods=["GET"]),
            Route("/.well-known/jwks.json", self.jwks, methods=["GET"]),
            Route("/agent/authenticatedExtendedCard", self.extended_card, methods=["GET"]),
            Route(
                "/.well-known/oauth-protected-resource", self.protected_resource, methods=["GET"]
            ),
            Route(
                "/.well-known/oauth-protected-resource/mcp",
                self.protected_resource,
                methods=["GET"],
            ),
        ]

    # -- HTTP routes -----------------------------------------------------------------------

    async def card_v021(self, request: Request) -> Response:
        return v1_card.served(request, self._card(extended=False, v030=False))

    async def card_v030(self, request: Request) -> Response:
        return v1_card.served(request, self._card(extended=False, v030=True))

    async def protected_resource(self, request: Request) -> Response:
        """OAuth protected-resource metadata (RFC 9728), how MCP clients find the issuer."""
        base = self._settings.base_url()
        metadata: dict[str, Any] = {
            "resource": f"{base}/mcp",
            "resource_name": self._settings.agent_name,
            "bearer_methods_supported": ["header"],
            "scopes_supported": sorted(ALL_SCOPES),
        }
        if self._settings.jwt_issuer and self._auth.jwt_enabled:
            metadata["authorization_servers"] = [self._settings.jwt_issuer]
        return JSONResponse(metadata)

    async def jwks(self, request: Request) -> Response:
        return JSONResponse(self._keys.jwks())

    async def extended_card(self, request: Request) -> Response:
        if not self._auth.enforced:
            error = AuthenticatedExtendedCardNotConfiguredError(
                "this agent has no authenticated extended card: no authentication is configured"
            )
            return JSONResponse({"error": error.to_dict()}, status_code=404)
        return Response(self._card(extended=True, v030=False), media_type=JSON)

    async def rpc(self, request: Request) -> Response:
        request_id: RequestId = None
        method: str | None = None
        try:
            # The headers read here, in one pass over the raw list (a Headers.get scans it
            # each time); the first of a repeated header wins, as with Headers.get.
            headers = dict(reversed(request.scope["headers"]))
            body = await self._read_body(request, headers)
            call = jsonrpc.parse(body, max_depth=self._settings.max_json_depth)
            request_id, method = call.id, call.method
            if v1.selects(_header(headers, _VERSION_HEADER)):  # A2A 1.0, or a version none speaks
                return await self._v1_rpc.answer(request, call, body)
            handler = self._methods.get(call.method)
            if handler is None:
                raise MethodNotFoundError(f"Method not found: {call.method}")
            if not call.has_id:
                # Checked in the order of a request with an id (§12.1), the missing id last.
                if call.method not in PARAMLESS:
                    _validate(METHOD_PARAMS[call.method], call.params)
                raise InvalidRequestError("id is required: notifications are not supported")
            needed = METHOD_SCOPES[call.method]
            if not principal_of(request.scope).allows(needed):
                forbidden = ForbiddenError(
                    f"this credential lacks the scope {needed!r} that {call.method} needs"
                )
                return self._refuse(request, method, call.id, forbidden, 403)
            # PostgreSQL text and jsonb cannot store U+0000
            if jsonrpc.may_contain_nul(body) and jsonrpc.contains_nul(call.params):
                raise InvalidParamsError("params must not contain the character U+0000 (NUL)")
            response = await handler(request, call.id, call.params)
            record_rpc_call(request.scope, method, "ok")
            self._outage.succeeded()
            return response
        except RPCError as exc:
            return self._refuse(request, method, exc.request_id, exc.error, exc.status)
        except A2AError as exc:
            return self._refuse(request, method, request_id, exc)
        except TaskError as exc:
            refusal = self._refuse(request, method, request_id, from_task_error(exc))
            if isinstance(exc, TaskUnavailableError):  # the database is unreachable, or a worker
                refusal.headers["Retry-After"] = str(UNAVAILABLE_RETRY_SECONDS)
            return refusal
        except ClientDisconnect:  # gone before its body arrived: nobody to answer, nothing done
            record_rpc_call(request.scope, method, "disconnected")
            return Response(status_code=400)
        except Exception as exc:
            if database_unreachable(exc):  # a refusal to retry, logged once per outage
                self._outage.failed()
                unavailable = InternalError("the database cannot be reached now; retry shortly")
                refusal = self._refuse(request, method, request_id, unavailable)
                refusal.headers["Retry-After"] = str(UNAVAILABLE_RETRY_SECONDS)
                return refusal
            log.exception("internal error answering a JSON-RPC request")
            internal = InternalError("internal error; the server log has details")
            return self._refuse(request, method, request_id, internal)

    def _refuse(
        self,
        request: Request,
        method: str | None,
        request_id: RequestId,
        error: A2AError,
        status: int = 200,
    ) -> Response:
        if status not in (413, 415):  # those refuse a body before any call is read: <unread>
            record_rpc_call(request.scope, method, str(error.code))
        return self._error(request_id, error, status)

    async def _read_body(self, request: Request, headers: dict[bytes, bytes]) -> bytes:
        content_type = _header(headers, b"content-type")
        if content_type.split(";")[0].strip().lower() != JSON:
            raise RPCError(
                None,
                InvalidRequestError(
                    f"Content-Type must be application/json, not {content_type or 'missing'!r}"
                ),
                status=415,
            )
        limit = self._settings.max_body_bytes
        too_large = RPCError(
            None, InvalidRequestError(f"the body exceeds {limit} bytes"), status=413
        )
        declared = _header(headers, b"content-length")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    def _error(request_id: RequestId, error: A2AError, status: int = 200) -> Response:
        return Response(jsonrpc.failure(request_id, error), status_code=status, media_type=JSON)

    @staticmethod
    def _result(request_id: RequestId, result_json: str | bytes) -> Response:
        return Response(jsonrpc.success(request_id, result_json), media_type=JSON)

    # -- methods ---------------------------------------------------------------------------

    async def _send(self, request: Request, rid: RequestId, params: Any) -> Response:
        send = _validate(SendParams, params)
        config = send.configuration
        blocking = config is None or config.blocking is not False
        service = self._tasks
        outcome = await self._accept(request, send, "final" if blocking else "created")
        if (follow_up := _follow_up_notice(send, outcome)) is not None:
            return self._result(rid, wire_json(follow_up))
        history = config.history_length if config else None
        if outcome.events is None:
            return self._result(rid, wire_json(with_history(outcome.snapshot, history)))
        try:
            async for event in outcome.events:
                if event.seq > outcome.seq and event.final:
                    break
        finally:
            outcome.events.close()
        if outcome.relayed:  # another worker ran it: the task as it ended is in the store
            task = await service.get(outcome.task.tenant, outcome.task.task.id)
            return self._result(rid, wire_json(with_history(task, history)))
        return self._result(rid, outcome.task.snapshot_json(history))

    async def _stream(self, request: Request, rid: RequestId, params: Any) -> Response:
        send = _validate(SendParams, params)
        outcome = await self._accept(request, send, "stream")
        if (follow_up := _follow_up_notice(send, outcome)) is not None:
            return self._sse(_one_result(rid, wire_json(follow_up)))
        return self._sse(_accepted_events(rid, outcome))

    async def _accept(
        self, request: Request, send: SendParams, reply: Reply, *, follow_ups: bool = True
    ) -> Accepted:
        """`TaskService.send` in the caller's session (network/sessions.py): a message that
        would open a session beyond the tenant's limit is refused before any task exists.
        Without a limit the session entry is written while the task is created; either way
        it is durable before the caller is answered."""
        principal, sessions = principal_of(request.scope), self._sessions
        try:
            admission = await sessions.admit(principal, send)
        except SessionLimitError as exc:
            raise SessionLimitReachedError(str(exc)) from None
        try:
            outcome = await self._tasks.send(
                principal.tenant,
                send,
                groups=principal.groups,
                reply=reply,
                follow_ups=follow_ups,
                context_id=admission.context_id,
            )
        finally:
            await admission.entered()
        if admission.context_id is None:  # a message to a task: its context is the session
            await sessions.touch(principal, outcome.snapshot.context_id)
        return outcome

    async def _get(self, request: Request, rid: RequestId, params: Any) -> Response:
        query = _validate(QueryParams, params)
        task = await self._tasks.get(tenant_of(request), query.id)
        return self._result(rid, wire_json(with_history(task, query.history_length)))

    async def _cancel(self, request: Request, rid: RequestId, params: Any) -> Response:
        ids = _validate(TaskIdParams, params)
        return self._result(rid, wire_json(await self._tasks.cancel(tenant_of(request), ids.id)))

    async def _resubscribe(self, request: Request, rid: RequestId, params: Any) -> Response:
        ids = _validate(TaskIdParams, params)
        last_event_id = request.headers.get("last-event-id")
        after: int | None = None
        if last_event_id is not None:
            number = last_event_id.strip()
            # ASCII digits only ("²".isdigit() is true), and within the bigint of task_events.seq
            if not (number.isascii() and number.isdigit() and int(number) < 2**63):
                raise InvalidParamsError(
                    f"Last-Event-ID must be an event number, not {last_event_id!r}"
                )
            after = int(number)
        events = self._tasks.follow(tenant_of(request), ids.id, after)
        return self._sse(_logged_events(rid, events))

    async def _set_push(self, request: Request, rid: RequestId, params: Any) -> Response:
        setting = _validate(TaskPushConfig, params)
        saved = await self._tasks.set_push_config(
            tenant_of(request), setting.task_id, setting.push_notification_config
        )
        result = TaskPushConfig(task_id=setting.task_id, push_notification_config=saved)
        return self._result(rid, wire_json(result))

    async def _get_push(self, request: Request, rid: RequestId, params: Any) -> Response:
        query = _validate(PushConfigQuery, params)
        configs = await self._tasks.push_configs(tenant_of(request), query.id)
        wanted = query.push_notification_config_id
        chosen = next((c for c in configs if wanted is None or c.id == wanted), None)
        if chosen is None:
            which = f" {wanted!r}" if wanted else ""
            raise InvalidParamsError(f"task {query.id} has no push notification config{which}")
        result = TaskPushConfig(task_id=query.id, push_notification_config=chosen)
        return self._result(rid, wire_json(result))

    async def _list_push(self, request: Request, rid: RequestId, params: Any) -> Response:
        query = _validate(PushConfigQuery, params)
        configs = await self._tasks.push_configs(tenant_of(request), query.id)
        results = [TaskPushConfig(task_id=query.id, push_notification_config=c) for c in configs]
        return self._result(rid, b"[%b]" % b",".join(wire_json(r).encode() for r in results))

    async def _delete_push(self, request: Request, rid: RequestId, params: Any) -> Response:
        query = _validate(PushConfigDelete, params)
        await self._tasks.delete_push_config(
            tenant_of(request), query.id, query.push_notification_config_id
        )
        return self._result(rid, b"null")

    async def _extended_card(self, request: Request, rid: RequestId, params: Any) -> Response:
        if not self._auth.enforced:
            raise AuthenticatedExtendedCardNotConfiguredError(
                "this agent has no authenticated extended card: no authentication is configured"
            )
        card = self._card(extended=True, v030=True)
        return self._result(rid, card)

    def _extended_card_v030(self) -> bytes | None:
        return self._card(extended=True, v030=True) if self._auth.enforced else None

    @staticmethod
    def _sse(events: AsyncIterator[ServerSentEvent]) -> Response:
        return EventSourceResponse(events, sep="\n", ping=15)


def _sse_event(
    rid: RequestId, event: Event | None, result_json: str, with_id: bool
) -> ServerSentEvent:
    data = jsonrpc.success(rid, result_json).decode()
    return ServerSentEvent(data=data, id=str(event.seq) if event and with_id else None, sep="\n")


def _follow_up_notice(send: SendParams, outcome: Accepted) -> Message | None:
    """The answer to a message that named a final task (docs/a2a-notes.md §12.4): the task it
    named stays as it is, the follow-up task the message started runs on, and the caller is
    told both in an agent Message (the 0.2.x and 0.3 test kits accept the same task or a
    Message here, not another task). None for any other message."""
    named = send.message.task_id
    task = outcome.snapshot
    if named is None or task.id == named:
        return None
    if outcome.events is not None:
        outcome.events.close()
    text = (
        f"Task {named} has ended and takes no more messages, so this message started the "
        f"follow-up task {task.id} in the same context."
    )
    return agent_text(text, task).model_copy(update={"reference_task_ids": [named]})


async def _one_result(rid: RequestId, result_json: str) -> AsyncIterator[ServerSentEvent]:
    yield _sse_event(rid, None, result_json, with_id=False)


async def _accepted_events(rid: RequestId, outcome: Accepted) -> AsyncIterator[ServerSentEvent]:
    """message/stream: the task as accepted, then its events until the cycle ends."""
    snapshot = Event(outcome.seq, "task", False, wire_json(outcome.snapshot))
    yield _sse_event(rid, snapshot, snapshot.json, with_id=True)
    if outcome.events is None:  # the task is settled (a retry, or it settled meanwhile)
        yield _sse_event(rid, None, final_status(outcome.snapshot).json, with_id=False)
        return
    try:
        async for event in outcome.events:
            if event.seq <= outcome.seq or not event.streamed:
                continue
            yield _sse_event(rid, event, event.json, with_id=True)
            if event.final:
                return
    except Exception as exc:
        yield _failure_event(rid, exc)
    finally:
        outcome.events.close()


async def _logged_events(
    rid: RequestId, events: AsyncIterator[Event]
) -> AsyncIterator[ServerSentEvent]:
    """tasks/resubscribe: replayed and live events; a failure becomes one error event (§12.2)."""
    try:
        async for event in events:
            yield _sse_event(rid, event, event.json, with_id=event.seq > 0)
    except Exception as exc:
        yield _failure_event(rid, exc)


def _failure_event(rid: RequestId, exc: Exception) -> ServerSentEvent:
    """The one error event that ends a stream that failed after it started (§12.2)."""
    if isinstance(exc, TaskError):
        exc = from_task_error(exc)
    if not isinstance(exc, A2AError):  # not an empty or cut stream that looks like success
        log.error("internal error in an event stream", exc_info=exc)
        exc = InternalError("internal error; the server log has details")
    return ServerSentEvent(data=jsonrpc.failure(rid, exc).decode(), sep="\n")

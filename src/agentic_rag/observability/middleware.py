"""The outermost middleware: a request id for every request, and the HTTP and JSON-RPC metrics.

For each HTTP request it
- takes the caller's `X-Request-ID` if it is a sane token, or makes one, puts it in the
  logging context (so every line logged while answering carries it, uvicorn's access line
  included) and echoes it in the response;
- binds the app's metrics for the code that runs for the request (see `metrics`);
- counts the request by route template, method and status, and times it;
- for the A2A JSON-RPC endpoint, counts the call by method and outcome (`ok` or the error
  code), as the endpoint records them (`record_rpc_call`); a call refused before it reached
  the endpoint (401, 429) is `<unread>`, with the code of the refusal. A streamed (SSE)
  answer counts as `ok`: errors after the stream opened are events in it.
"""

import time
from collections.abc import Collection
from typing import Final

import orjson
from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentic_rag.observability import metrics as metrics_module
from agentic_rag.observability.logging import (
    REQUEST_ID,
    REQUEST_ID_HEADER,
    new_request_id,
    sane_request_id,
)
from agentic_rag.observability.metrics import Metrics

UNMATCHED: Final = "<unmatched>"  # the route label of requests no route matched (404s)
UNKNOWN_METHOD: Final = "<unknown>"  # JSON-RPC methods that do not exist
INVALID_CALL: Final = "<invalid>"  # bodies that are not a readable JSON-RPC call
UNREAD: Final = "<unread>"  # calls refused before their body was read (401, 429, 415...)

RPC_CALL_KEY: Final = "agentic_rag.rpc_call"  # (method or None if unreadable, outcome)
_REQUEST_ID_KEY: Final = REQUEST_ID_HEADER.lower().encode("latin-1")  # ASGI names are lower case


def record_rpc_call(scope: Scope, method: str | None, outcome: str) -> None:
    """The JSON-RPC endpoint says which method it answered (None: not a readable call) and how."""
    scope[RPC_CALL_KEY] = (method, outcome)


_HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

_ERROR_MARK = b'"error"'  # cheap test before parsing an answer again


class ObservabilityMiddleware:
    """`rpc_methods` are the methods served at `rpc_path`; any other is labelled `<unknown>`
    (labels come from callers, so they must be bounded)."""

    def __init__(
        self, app: ASGIApp, metrics: Metrics, rpc_methods: Collection[str], rpc_path: str = "/"
    ) -> None:
        self.app, self.metrics, self.rpc_path = app, metrics, rpc_path
        self.rpc_methods = frozenset(rpc_methods)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # From the raw list, first of repeated ones wins as with Headers.get, without
        # building Starlette's Headers for one header.
        given = dict(reversed(scope["headers"])).get(_REQUEST_ID_KEY)
        decoded = None if given is None else given.decode("latin-1")
        request_id = sane_request_id(decoded) or new_request_id()
        rid_token = REQUEST_ID.set(request_id)
        metrics_token = metrics_module.bind(self.metrics)
        started = time.perf_counter()
        method: str = scope["method"] if scope["method"] in _HTTP_METHODS else "OTHER"
        rpc = method == "POST" and scope["path"] == self.rpc_path
        # Before routing changes the scope, and even if it never runs; the busiest route
        # without matching every route against it.
        route = self.rpc_path if rpc else _route(scope)
        refusal_body: list[bytes] = []  # kept only for a call the endpoint never saw
        response: dict[str, object] = {}  # status and content type, once started

        async def send_and_count(message: Message) -> None:
            if message["type"] == "http.response.start":
                # The raw list, as MutableHeaders(scope=message) makes it, read through one
                # dict (first of a repeated name wins, as Headers.get) instead of Python scans.
                headers = message["headers"] = list(message["headers"])
                by_name = dict(reversed(headers))
                if _REQUEST_ID_KEY in by_name:  # the app set one: replaced, as MutableHeaders does
                    MutableHeaders(raw=headers)[REQUEST_ID_HEADER] = request_id
                else:
                    headers.append((_REQUEST_ID_KEY, request_id.encode("latin-1")))
                response["status"] = message["status"]
                response["type"] = by_name.get(b"content-type", b"").decode("latin-1")
                self.metrics.child(
                    self.metrics.http_requests, route, method, str(message["status"])
                ).inc()
            elif message["type"] == "http.response.body" and rpc and RPC_CALL_KEY not in scope:
                refusal_body.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_and_count)
        except BaseException:
            if "status" not in response:
                self.metrics.child(self.metrics.http_requests, route, method, "500").inc()
                response["status"], response["type"] = 500, ""
            # The request id stays set: the server logs this exception next, in this context.
            raise
        else:
            REQUEST_ID.reset(rid_token)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.child(self.metrics.http_duration, route, method).observe(elapsed)
            if rpc:
                status = response.get("status")
                self._count_call(
                    scope.get(RPC_CALL_KEY),
                    refusal_body,
                    status if isinstance(status, int) else 500,
                    str(response.get("type", "")),
                )
            metrics_module.unbind(metrics_token)

    def _count_call(
        self,
        recorded: tuple[str | None, str] | None,
        refusal: list[bytes],
        status: int,
        content_type: str,
    ) -> None:
        if recorded is None:  # refused before the endpoint: read the refusal's code
            label, outcome = UNREAD, _rpc_outcome(b"".join(refusal), status, content_type)
        else:
            method, outcome = recorded
            if method is None:
                label = INVALID_CALL
            else:
                label = method if method in self.rpc_methods else UNKNOWN_METHOD
        self.metrics.child(self.metrics.jsonrpc_calls, label, outcome).inc()


def _route(scope: Scope) -> str:
    """The template of the route the request is for (also when a middleware answers it)."""
    app = scope.get("app")
    routes = getattr(getattr(app, "router", None), "routes", None)
    return (_template(routes, scope) if routes else None) or UNMATCHED


def _template(routes: list[BaseRoute], scope: Scope) -> str | None:
    """Like Starlette's router: the first full match, else the first partial one (405)."""
    partial: tuple[BaseRoute, Scope] | None = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return _path(route, {**scope, **child})
        if match is Match.PARTIAL and partial is None:
            partial = (route, {**scope, **child})
    return _path(*partial) if partial is not None else None


def _path(route: BaseRoute, scope: Scope) -> str | None:
    if isinstance(route, Mount):
        inner = _template(route.routes, scope)
        return route.path + inner if inner else None
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else None


def _rpc_outcome(body: bytes, status: int, content_type: str) -> str:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "text/event-stream":
        return "ok"
    if media_type == "application/json":
        if _ERROR_MARK not in body:  # most answers: no need to parse them again
            return "ok" if status < 400 else f"http_{status}"
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            return f"http_{status}"
        error = answer.get("error") if isinstance(answer, dict) else None
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            return str(error["code"])
        return "ok" if status < 400 else f"http_{status}"
    return f"http_{status}"

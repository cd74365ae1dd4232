"""uvicorn's HTTP/1.1 protocol (httptools) with the bounds on request heads it lacks.

uvicorn's httptools protocol accepts a head of any size, kept whole in memory until it ends
(h11's limit applies only to h11, which is slower), and it times only the idle wait between a
response and the next request (`timeout_keep_alive`): a connection that sends nothing, or a head
a byte at a time, is held for ever. So here:

- a head (request line and headers) over `max_head_bytes` is answered 431 and the connection
  closed, once that many bytes of it have arrived or when it ends;
- a head must have arrived within `head_seconds` of the connection opening, or of the response
  before it ending; past that the connection is closed (after a 408 if part of a head came).

The time a request's body takes is not bounded here: the app reads it, within its size limit.
"""

import asyncio
import logging
from http import HTTPStatus
from typing import Any

from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a size and a time limit on each request head.

    uvicorn builds it with its own arguments; serving.py passes the limits with a partial."""

    def __init__(self, *args: Any, max_head_bytes: int, head_seconds: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._max_head_bytes, self._head_seconds = max_head_bytes, head_seconds
        self._in_head = True  # the bytes arriving belong to a head (not a body)
        self._head_bytes = 0  # of the head in progress, counted as they arrive
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._time_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # Still unfinished, and already too large: refused before more of it is kept.
        too_large = self._in_head and self._head_bytes > self._max_head_bytes
        if too_large and not self.transport.is_closing():
            self._refuse_head()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_head_timer()
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size <= self._max_head_bytes:
            super().on_headers_complete()
            return
        # Whole, in one read, and too large: the request is answered by a refusal instead of
        # the app (as uvicorn answers one over its concurrency limit).
        log.warning("refused a request head of %d bytes from %s", size, _client(self.client))
        app, self.app = self.app, _head_too_large
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0

    def on_response_complete(self) -> None:
        idle = not self.pipeline  # no request received meanwhile waits its turn
        super().on_response_complete()
        if idle and not self.transport.is_closing():
            self._time_head()

    def _time_head(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self._head_seconds, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._head_bytes:  # a head begun and not finished: say why the connection ends
            self._answer(HTTPStatus.REQUEST_TIMEOUT, "the request head took too long")
        else:  # nothing sent (or an idle keep-alive): closed without a word, as uvicorn does
            self.transport.close()

    def _refuse_head(self) -> None:
        log.warning(
            "refused a request head of more than %d bytes from %s",
            self._max_head_bytes,
            _client(self.client),
        )
        self._in_head = False
        self._stop_head_timer()
        self._answer(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, _TOO_LARGE)

    def _answer(self, status: HTTPStatus, text: str) -> None:
        """An answer outside any request (the head never ended), then the connection closed."""
        body = text.encode()
        lines = [f"HTTP/1.1 {status.value} {status.phrase}".encode()]
        lines += [name + b": " + value for name, value in self.server_state.default_headers]
        lines += [
            b"content-type: text/plain; charset=utf-8",
            b"content-length: " + str(len(body)).encode(),
            b"connection: close",
        ]
        self.transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        self.transport.close()


_TOO_LARGE = "the request head (request line and headers) is too large"


async def _head_too_large(scope: Scope, receive: Receive, send: Send) -> None:
    body = _TOO_LARGE.encode()
    await send(
        {
            "type": "http.response.start",
            "status": HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE.value,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _client(client: tuple[str, int] | None) -> str:
    return client[0] if client else "an unknown client"

"""A webhook for the push notification tests: it keeps what it is sent."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.live import serve_in_thread


class Webhook:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []

    async def hook(self, request: Request) -> Response:
        self.received.append((dict(request.headers), await request.json()))
        return Response(status_code=204)

    def wait_for(self, count: int) -> list[tuple[dict[str, str], dict[str, Any]]]:
        deadline = time.monotonic() + 20
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"only {len(self.received)} notifications"
            time.sleep(0.05)
        return self.received


@contextmanager
def served_webhook() -> Iterator[tuple[Webhook, str]]:
    """A webhook served in a background thread, and its URL."""
    hook = Webhook()
    app = Starlette(routes=[Route("/hook", hook.hook, methods=["POST"])])
    with serve_in_thread(app) as url:
        yield hook, f"{url}/hook"

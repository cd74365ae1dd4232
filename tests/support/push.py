"""A webhook for the push notification tests: it keeps what it is sent."""

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response


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

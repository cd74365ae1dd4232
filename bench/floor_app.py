"""The floor of the benchmark: a bare Starlette app, the upper bound of the framework.

POST / answers a fixed JSON-RPC result, a completed Task with one text artifact, without parsing
the request. A body that mentions `message/stream` gets a fixed SSE stream instead (the Task, an
artifact-update and a final status-update). If it carries the text `task N D`, N `working` status
updates D ms apart come first, like ours' run-sut, so the streaming benchmark can hold streams open
for the same time on every server.

Served like ours: uvicorn, one worker, uvloop and httptools:
    .venv/bin/python -m uvicorn floor_app:app --app-dir bench --loop uvloop --http httptools
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

_TASK_ID = "3f2b8c1e-0d4a-4e7b-9a51-6c2f0e8d7b10"
_CONTEXT_ID = "9d7e6a52-4b1c-4f83-8e2d-1a0b3c4d5e6f"
_STATUS = '"status":{"state":"%s","timestamp":"2025-06-01T00:00:00+00:00"}'
_ARTIFACT = '{"artifactId":"a1","name":"echo","parts":[{"kind":"text","text":"hello"}]}'
_USER = (
    '{"role":"user","parts":[{"kind":"text","text":"hello"}],"messageId":"m1",'
    f'"taskId":"{_TASK_ID}","contextId":"{_CONTEXT_ID}","kind":"message"}}'
)

TASK_RESULT = (
    '{"jsonrpc":"2.0","id":1,"result":{'
    f'"id":"{_TASK_ID}","contextId":"{_CONTEXT_ID}",{_STATUS % "completed"},'
    f'"artifacts":[{_ARTIFACT}],"history":[{_USER}],"kind":"task"}}}}'
).encode()


def _event(result: str) -> bytes:
    return b'data: {"jsonrpc":"2.0","id":1,"result":' + result.encode() + b"}\n\n"


_IDS = f'"taskId":"{_TASK_ID}","contextId":"{_CONTEXT_ID}"'
EVENT_SUBMITTED = _event(
    f'{{"id":"{_TASK_ID}","contextId":"{_CONTEXT_ID}",{_STATUS % "submitted"},'
    f'"history":[{_USER}],"kind":"task"}}'
)
EVENT_WORKING = _event(f'{{{_IDS},"kind":"status-update",{_STATUS % "working"},"final":false}}')
EVENT_ARTIFACT = _event(f'{{{_IDS},"kind":"artifact-update","artifact":{_ARTIFACT}}}')
EVENT_COMPLETED = _event(f'{{{_IDS},"kind":"status-update",{_STATUS % "completed"},"final":true}}')

_TASK_COMMAND = re.compile(rb'"text"\s*:\s*"task (\d+) (\d+)"')


async def _events(steps: int, delay: float) -> AsyncIterator[bytes]:
    yield EVENT_SUBMITTED
    for _ in range(steps):
        await asyncio.sleep(delay)
        yield EVENT_WORKING
    yield EVENT_ARTIFACT
    yield EVENT_COMPLETED


async def rpc(request: Request) -> Response:
    body = await request.body()
    if b'"message/stream"' not in body:
        return Response(TASK_RESULT, media_type="application/json")
    command = _TASK_COMMAND.search(body)
    steps, delay = (int(command[1]), int(command[2]) / 1000) if command else (0, 0.0)
    return StreamingResponse(
        _events(steps, delay),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


app = Starlette(routes=[Route("/", rpc, methods=["POST"])])

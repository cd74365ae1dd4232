"""A small JSON-RPC client for the tests, over httpx, that reads SSE streams by hand."""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson


def text_message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
        **fields,
    }


def call(client: httpx.Client, method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    response = client.post("/", json=body)
    assert response.headers["content-type"].startswith("application/json"), response.text
    result: dict[str, Any] = response.json()
    return result


@dataclass
class SSEEvent:
    id: int | None
    payload: dict[str, Any]


def stream(
    client: httpx.Client, method: str, params: Any, headers: dict[str, str] | None = None
) -> Iterator[SSEEvent]:
    body = {"jsonrpc": "2.0", "id": "s", "method": method, "params": params}
    with client.stream("POST", "/", json=body, headers=headers or {}) as response:
        assert response.headers["content-type"].startswith("text/event-stream"), response.read()
        event_id: int | None = None
        for line in response.iter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                yield SSEEvent(event_id, orjson.loads(line[5:].strip()))
            elif line == "":
                event_id = None

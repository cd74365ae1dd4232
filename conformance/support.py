"""Black-box helpers for the conformance suite: JSON-RPC over HTTP, SSE, schema checks.

Everything here talks to the server only over HTTP, so the suite runs against any A2A
v0.2.1 server. Every response body, and every SSE `data:` payload, is validated against the
response definitions of the official v0.2.1 JSON schema (`spec/a2a-v0.2.1.schema.json`);
the requests the suite means to be well-formed are validated against the request
definitions too, so that a failure always points at the server and never at the suite.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_0_2_1 = ROOT / "spec" / "a2a-v0.2.1.schema.json"
SCHEMA_0_3_0 = ROOT / "spec" / "a2a-v0.3.0.schema.json"

FINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})

# docs/a2a-notes.md §2, §8: the 0.2.1 schema's response definition for each method.
RESPONSE_DEFINITION = {
    "message/send": "SendMessageResponse",
    "message/stream": "SendStreamingMessageResponse",
    "tasks/get": "GetTaskResponse",
    "tasks/cancel": "CancelTaskResponse",
    "tasks/resubscribe": "SendStreamingMessageResponse",
    "tasks/pushNotificationConfig/set": "SetTaskPushNotificationConfigResponse",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfigResponse",
    # 0.2.5 additions, built below from 0.2.1 pieces (docs/a2a-notes.md §8).
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigResponse",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfigResponse",
}

# The request definition of each 0.2.1 method, used to check the suite's own requests.
REQUEST_DEFINITION = {
    "message/send": "SendMessageRequest",
    "message/stream": "SendStreamingMessageRequest",
    "tasks/get": "GetTaskRequest",
    "tasks/cancel": "CancelTaskRequest",
    "tasks/resubscribe": "TaskResubscriptionRequest",
    "tasks/pushNotificationConfig/set": "SetTaskPushNotificationConfigRequest",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfigRequest",
}

# docs/a2a-notes.md §3: the schema definition of each error code.
ERROR_DEFINITION = {
    -32700: "JSONParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
    -32001: "TaskNotFoundError",
    -32002: "TaskNotCancelableError",
    -32003: "PushNotificationNotSupportedError",
    -32004: "UnsupportedOperationError",
    -32005: "ContentTypeNotSupportedError",
    -32006: "InvalidAgentResponseError",
}


def _success_response(result_schema: dict[str, Any]) -> dict[str, Any]:
    """A 0.2.1-style success envelope (same `jsonrpc` and `id` as every 0.2.1 response)."""
    return {
        "type": "object",
        "required": ["jsonrpc", "result"],
        "properties": {
            "jsonrpc": {"type": "string", "const": "2.0"},
            "id": {"type": ["string", "integer"]},
            "result": result_schema,
        },
    }


# 0.2.1 has no list/delete methods (they arrived in 0.2.5). Their closest 0.2.1 shape: the
# 0.2.1 envelope around an array of 0.2.1 `TaskPushNotificationConfig` (list) or `null`
# (delete). The 0.2.5 `pushNotificationConfig.id` needs no extra definition: no 0.2.1
# object forbids additional properties.
_EXTRA_DEFINITIONS: dict[str, Any] = {
    "ListTaskPushNotificationConfigSuccessResponse": _success_response(
        {"type": "array", "items": {"$ref": "#/definitions/TaskPushNotificationConfig"}}
    ),
    "ListTaskPushNotificationConfigResponse": {
        "anyOf": [
            {"$ref": "#/definitions/JSONRPCErrorResponse"},
            {"$ref": "#/definitions/ListTaskPushNotificationConfigSuccessResponse"},
        ]
    },
    "DeleteTaskPushNotificationConfigSuccessResponse": _success_response({"type": "null"}),
    "DeleteTaskPushNotificationConfigResponse": {
        "anyOf": [
            {"$ref": "#/definitions/JSONRPCErrorResponse"},
            {"$ref": "#/definitions/DeleteTaskPushNotificationConfigSuccessResponse"},
        ]
    },
}


@cache
def _definitions(schema_file: Path) -> dict[str, Any]:
    definitions: dict[str, Any] = json.loads(schema_file.read_text())["definitions"]
    if schema_file == SCHEMA_0_2_1:
        definitions = {**definitions, **_EXTRA_DEFINITIONS}
    return definitions


@cache
def _validator(definition: str, schema_file: Path) -> Draft7Validator:
    definitions = _definitions(schema_file)
    if definition not in definitions:
        raise KeyError(f"{schema_file.name} has no definition {definition!r}")
    schema = {"$ref": f"#/definitions/{definition}", "definitions": definitions}
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def schema_errors(instance: Any, definition: str, schema_file: Path = SCHEMA_0_2_1) -> str | None:
    """None if `instance` is a valid `definition`, else a readable explanation."""
    validator = _validator(definition, schema_file)
    errors = list(validator.iter_errors(instance))
    if not errors:
        return None
    error = best_match(errors)
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return (
        f"not a valid {definition} ({schema_file.name}): at {where}: {error.message}\n"
        f"instance: {_short(instance)}"
    )


def assert_valid(instance: Any, definition: str, schema_file: Path = SCHEMA_0_2_1) -> None:
    problem = schema_errors(instance, definition, schema_file)
    assert problem is None, problem


def assert_valid_response(envelope: Any, definition: str) -> None:
    """Validate a JSON-RPC response envelope against a 0.2.1 response definition.

    JSON-RPC 2.0 §5 requires `"id": null` in an error response when the request's id could
    not be read (docs/a2a-notes.md §12.1); the 0.2.1 schema types `id` as string|integer and
    makes it optional (0.2.2+ allows null). So a null id on an error is checked by the caller,
    and the rest of the envelope is validated as is.
    """
    instance = envelope
    if isinstance(envelope, dict) and "error" in envelope and envelope.get("id", 0) is None:
        instance = {key: value for key, value in envelope.items() if key != "id"}
    assert_valid(instance, definition)


def _short(value: Any, limit: int = 1500) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def new_id(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4()}"


# --- Messages ------------------------------------------------------------------------------

TEXT_PLAIN = ["text/plain"]
_DEFAULT = object()


def text_message(
    text: str,
    *,
    task_id: str | None = None,
    context_id: str | None = None,
    message_id: str | None = None,
    role: str = "user",
    **extra: Any,
) -> dict[str, Any]:
    """A Message with one TextPart (`kind` discriminates parts, docs/a2a-notes.md §2, §11)."""
    message: dict[str, Any] = {
        "kind": "message",
        "role": role,
        "messageId": message_id or new_id("msg-"),
        "parts": [{"kind": "text", "text": text}],
    }
    if task_id is not None:
        message["taskId"] = task_id
    if context_id is not None:
        message["contextId"] = context_id
    message.update(extra)
    return message


def send_params(
    text: str,
    *,
    task_id: str | None = None,
    context_id: str | None = None,
    message_id: str | None = None,
    blocking: bool | None = None,
    history_length: int | None = None,
    accepted_output_modes: Any = _DEFAULT,
    push_notification_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`MessageSendParams`. `acceptedOutputModes` defaults to `["text/plain"]` (required in
    0.2.1); pass `accepted_output_modes=None` to leave it out."""
    configuration: dict[str, Any] = {}
    modes = TEXT_PLAIN if accepted_output_modes is _DEFAULT else accepted_output_modes
    if modes is not None:
        configuration["acceptedOutputModes"] = list(modes)
    if blocking is not None:
        configuration["blocking"] = blocking
    if history_length is not None:
        configuration["historyLength"] = history_length
    if push_notification_config is not None:
        configuration["pushNotificationConfig"] = push_notification_config
    params: dict[str, Any] = {
        "message": text_message(text, task_id=task_id, context_id=context_id, message_id=message_id)
    }
    if configuration:
        params["configuration"] = configuration
    return params


def texts(parts: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for part in parts if part.get("kind") == "text"]


def artifact_texts(task: dict[str, Any]) -> list[str]:
    return [text for artifact in task.get("artifacts") or [] for text in texts(artifact["parts"])]


def roles(messages: list[dict[str, Any]] | None) -> list[str]:
    return [message["role"] for message in messages or []]


def state(task_or_event: dict[str, Any]) -> str:
    state_name: str = task_or_event["status"]["state"]
    return state_name


# --- HTTP and JSON-RPC ---------------------------------------------------------------------


def check_envelope(
    response: httpx.Response, *, definition: str, expected_id: Any
) -> dict[str, Any]:
    """The checks every non-streaming answer must pass (docs/a2a-notes.md §1, §12.1).

    HTTP 200, `Content-Type: application/json`, one JSON object, valid against `definition`,
    `jsonrpc` "2.0", and the request id echoed with its type (null if it could not be read).
    """
    exchange = _exchange(response)
    assert response.status_code == 200, f"expected HTTP 200, got {response.status_code}\n{exchange}"
    content_type = response.headers.get("content-type", "")
    assert content_type.split(";")[0].strip().lower() == "application/json", (
        f"expected application/json, got {content_type!r}\n{exchange}"
    )
    try:
        envelope = response.json()
    except ValueError as exc:
        raise AssertionError(f"the body is not JSON: {exc}\n{exchange}") from exc
    assert isinstance(envelope, dict), f"the body is not one JSON object\n{exchange}"
    assert_valid_response(envelope, definition)
    assert envelope.get("jsonrpc") == "2.0", exchange
    assert ("result" in envelope) != ("error" in envelope), (
        f"exactly one of result/error expected\n{exchange}"
    )
    assert "id" in envelope, f"the response has no id\n{exchange}"
    assert envelope["id"] == expected_id and type(envelope["id"]) is type(expected_id), (
        f"expected id {expected_id!r}, got {envelope['id']!r}\n{exchange}"
    )
    if "error" in envelope:
        code = envelope["error"]["code"]
        if code in ERROR_DEFINITION:
            assert_valid(envelope["error"], ERROR_DEFINITION[code])
    return envelope


def _exchange(response: httpx.Response) -> str:
    request = response.request
    try:
        sent = request.content.decode(errors="replace")
    except httpx.RequestNotRead:
        sent = "(streamed)"
    try:
        received = response.text
    except httpx.ResponseNotRead:
        received = "(streamed)"
    return (
        f"--> {request.method} {request.url}\n{sent[:1500]}\n"
        f"<-- {response.status_code} {response.headers.get('content-type')}\n{received[:1500]}"
    )


_AUTO = object()


class Rpc:
    """A JSON-RPC 2.0 caller for the endpoint named by the Agent Card's `url`."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http = http
        self.url = url

    # Raw access, for malformed requests.
    def post_raw(
        self, content: bytes | str, *, content_type: str = "application/json"
    ) -> httpx.Response:
        try:
            return self.http.post(self.url, content=content, headers={"content-type": content_type})
        except httpx.TimeoutException as exc:
            sent = content if isinstance(content, str) else content.decode(errors="replace")
            raise AssertionError(
                f"no answer within the client's timeout ({exc.__class__.__name__})\n"
                f"--> POST {self.url}\n{sent[:1500]}"
            ) from exc

    def post_json(self, payload: Any) -> httpx.Response:
        return self.post_raw(json.dumps(payload))

    @staticmethod
    def envelope(method: str, params: Any = _AUTO, request_id: Any = _AUTO) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": new_id("req-") if request_id is _AUTO else request_id,
            "method": method,
        }
        if params is not _AUTO:
            payload["params"] = params
        return payload

    def call(
        self,
        method: str,
        params: Any = _AUTO,
        *,
        request_id: Any = _AUTO,
        strict_request: bool = False,
    ) -> dict[str, Any]:
        """POST one request; return the checked response envelope."""
        payload = self.envelope(method, params, request_id)
        if strict_request and method in REQUEST_DEFINITION:
            problem = schema_errors(payload, REQUEST_DEFINITION[method])
            assert problem is None, f"suite bug: the request is not valid 0.2.1: {problem}"
        response = self.post_json(payload)
        return check_envelope(
            response,
            definition=RESPONSE_DEFINITION.get(method, "JSONRPCResponse"),
            expected_id=payload["id"],
        )

    def result(self, method: str, params: Any = _AUTO, *, strict_request: bool = True) -> Any:
        """The result of a call that must succeed."""
        envelope = self.call(method, params, strict_request=strict_request)
        assert "error" not in envelope, (
            f"{method} failed: {envelope['error']}\nparams: {_short(params)}"
        )
        return envelope["result"]

    def error(self, method: str, params: Any = _AUTO, *, code: int) -> dict[str, Any]:
        """The error object of a call that must fail with `code`."""
        envelope = self.call(method, params)
        assert "error" in envelope, (
            f"{method} should fail with {code}, got result {_short(envelope.get('result'))}"
        )
        error: dict[str, Any] = envelope["error"]
        assert error["code"] == code, f"{method}: expected error {code}, got {error}"
        return error

    # A2A shortcuts.
    def send(self, text: str, **options: Any) -> dict[str, Any]:
        """`message/send`; returns the result (a Task or a Message)."""
        strict = options.get("accepted_output_modes", _DEFAULT) is not None
        result: dict[str, Any] = self.result(
            "message/send", send_params(text, **options), strict_request=strict
        )
        return result

    def send_task(self, text: str, **options: Any) -> dict[str, Any]:
        """`message/send` that must answer with a Task."""
        result = self.send(text, **options)
        assert result.get("kind") == "task", f"expected a Task, got {_short(result)}"
        return result

    def send_follow_up(self, text: str, **options: Any) -> dict[str, Any]:
        """`message/send` to a final task (`task_id` in options): the answer is an agent Message
        whose `taskId` is the follow-up task the message started and whose `referenceTaskIds`
        name the final task; returns that Message."""
        final_id = options["task_id"]
        message = self.send(text, **options)
        assert message.get("kind") == "message", f"expected a Message, got {_short(message)}"
        assert message["role"] == "agent"
        assert message["referenceTaskIds"] == [final_id]
        assert message["taskId"] != final_id
        named = " ".join(texts(message["parts"]))
        assert final_id in named and message["taskId"] in named, named
        return message

    def get_task(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        task: dict[str, Any] = self.result("tasks/get", params)
        assert task["kind"] == "task" and task["id"] == task_id, _short(task)
        return task

    def cancel(self, task_id: str) -> dict[str, Any]:
        task: dict[str, Any] = self.result("tasks/cancel", {"id": task_id})
        return task

    def wait_for_state(
        self, task_id: str, states: set[str] | frozenset[str], timeout: float = 30.0
    ) -> dict[str, Any]:
        """Poll `tasks/get` until the task reaches one of `states`."""
        deadline = time.monotonic() + timeout
        while True:
            task = self.get_task(task_id)
            if state(task) in states:
                return task
            assert time.monotonic() < deadline, (
                f"task {task_id} still {state(task)!r} after {timeout}s, expected {states}"
            )
            time.sleep(0.1)

    @contextmanager
    def stream(
        self,
        method: str,
        params: Any,
        *,
        headers: dict[str, str] | None = None,
        strict_request: bool = True,
    ) -> Iterator[SseStream]:
        """Open a streaming call (`message/stream`, `tasks/resubscribe`)."""
        payload = self.envelope(method, params)
        if strict_request and method in REQUEST_DEFINITION:
            problem = schema_errors(payload, REQUEST_DEFINITION[method])
            assert problem is None, f"suite bug: the request is not valid 0.2.1: {problem}"
        all_headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **(headers or {}),
        }
        with self.http.stream(
            "POST", self.url, content=json.dumps(payload), headers=all_headers
        ) as response:
            yield SseStream(response, payload["id"], RESPONSE_DEFINITION[method])


# --- Server-Sent Events --------------------------------------------------------------------


@dataclass
class SseEvent:
    """One dispatched SSE event: its own `id:` line (None if it had none) and its data."""

    id: str | None
    event: str | None
    data: dict[str, Any]

    @property
    def seq(self) -> int:
        """The event's sequence number, carried by its `id:` line."""
        assert self.id is not None, f"the event has no SSE id: line: {_short(self.data)}"
        assert self.id.isdigit(), f"the SSE id {self.id!r} is not a sequence number"
        return int(self.id)

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.data, f"expected a result event, got {_short(self.data)}"
        result: dict[str, Any] = self.data["result"]
        return result

    @property
    def kind(self) -> str:
        kind: str = self.result["kind"]
        return kind

    @property
    def task_id(self) -> str:
        """The task the event belongs to (`id` on a Task, `taskId` on an update)."""
        result = self.result
        task_id: str = result["id"] if result["kind"] == "task" else result["taskId"]
        return task_id


class SseStream:
    """Parses an SSE response by hand (WHATWG HTML §9.2) and checks every event.

    Each `data:` payload must be a valid `definition` (0.2.1 schema) with the request's id.
    """

    def __init__(self, response: httpx.Response, request_id: Any, definition: str) -> None:
        self.response = response
        self.request_id = request_id
        self.definition = definition
        self.closed = False
        self._lines = response.iter_lines()
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200 or not content_type.lower().startswith("text/event-stream"):
            response.read()
            raise AssertionError(
                f"expected HTTP 200 text/event-stream, got {response.status_code} "
                f"{content_type!r}\n{_exchange(response)}"
            )

    @property
    def content_type(self) -> str:
        return self.response.headers.get("content-type", "")

    def next_event(self, timeout: float = 30.0) -> SseEvent | None:
        """The next event, or None once the server has closed the stream."""
        deadline = time.monotonic() + timeout
        event_id: str | None = None
        event_name: str | None = None
        data: list[str] = []
        while True:
            assert time.monotonic() < deadline, f"no complete SSE event within {timeout}s"
            try:
                line = next(self._lines)
            except StopIteration:
                self.closed = True
                return None
            except httpx.ReadTimeout as exc:
                raise AssertionError(
                    "the stream neither sent an event nor closed within the read timeout"
                ) from exc
            if line == "":
                if not data:
                    event_id, event_name = None, None
                    continue
                return self._dispatch(event_id, event_name, "\n".join(data))
            if line.startswith(":"):
                continue  # comment, e.g. a keep-alive
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
            elif field == "id" and "\0" not in value:
                event_id = value
            elif field == "event":
                event_name = value

    def _dispatch(self, event_id: str | None, event_name: str | None, raw: str) -> SseEvent:
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise AssertionError(f"SSE data is not JSON: {raw[:500]!r}") from exc
        assert_valid_response(payload, self.definition)
        assert isinstance(payload, dict) and payload.get("jsonrpc") == "2.0", _short(payload)
        assert payload.get("id") == self.request_id, (
            f"SSE event id {payload.get('id')!r} is not the request id {self.request_id!r}"
        )
        return SseEvent(id=event_id, event=event_name, data=payload)

    def take(self, count: int, timeout: float = 30.0) -> list[SseEvent]:
        """Exactly the next `count` events (the stream stays open)."""
        events: list[SseEvent] = []
        for _ in range(count):
            event = self.next_event(timeout)
            assert event is not None, (
                f"the stream closed after {len(events)} of {count} expected events"
            )
            events.append(event)
        return events

    def until_closed(self, timeout: float = 30.0) -> list[SseEvent]:
        """Every remaining event, until the server closes the stream."""
        deadline = time.monotonic() + timeout
        events: list[SseEvent] = []
        while (event := self.next_event(max(deadline - time.monotonic(), 0.001))) is not None:
            events.append(event)
        return events

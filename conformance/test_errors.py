"""Error codes and their classification (docs/a2a-notes.md §3, §12.1, §12.2, §12.8).

Every error is HTTP 200, `application/json`, a valid 0.2.1 `JSONRPCErrorResponse`, and
echoes the request id, or `null` when the id could not be read (checked by `Rpc` and
`check_envelope` on every call).
"""

import json
import uuid
from typing import Any

import pytest

from conformance.support import Rpc, check_envelope, send_params, text_message

MISSING_TASK = "no-such-task-00000000"


def _error_of(response_body: dict[str, Any]) -> dict[str, Any]:
    assert "error" in response_body, f"expected an error, got {response_body}"
    error: dict[str, Any] = response_body["error"]
    return error


# --- -32700: not JSON ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}',
        b"{'jsonrpc': '2.0'}",
        b"not json at all",
        b"",
        b"\xff\xfe\x00",
    ],
    ids=["truncated", "single-quotes", "text", "empty", "not-utf8"],
)
def test_a_body_that_is_not_json_is_a_parse_error_with_a_null_id(rpc: Rpc, body: bytes) -> None:
    """§3, §12.1: not well-formed JSON → -32700, and the id could not be read → `null`."""
    envelope = check_envelope(
        rpc.post_raw(body), definition="JSONRPCErrorResponse", expected_id=None
    )
    assert _error_of(envelope)["code"] == -32700


# --- -32600: JSON, but not a JSON-RPC request -----------------------------------------------

VALID_GET = {"jsonrpc": "2.0", "id": "r-1", "method": "tasks/get", "params": {"id": "t"}}


@pytest.mark.parametrize(
    "request_object",
    [
        {key: value for key, value in VALID_GET.items() if key != "jsonrpc"},
        {**VALID_GET, "jsonrpc": "1.0"},
        {**VALID_GET, "jsonrpc": 2.0},
        {key: value for key, value in VALID_GET.items() if key != "method"},
        {**VALID_GET, "method": 42},
    ],
    ids=["jsonrpc-missing", "jsonrpc-1.0", "jsonrpc-number", "method-missing", "method-number"],
)
def test_a_malformed_request_object_is_an_invalid_request_echoing_its_id(
    rpc: Rpc, request_object: dict[str, Any]
) -> None:
    """§3, §12.1: a missing or wrong `jsonrpc`, or no `method` → -32600, id echoed."""
    envelope = check_envelope(
        rpc.post_json(request_object), definition="JSONRPCErrorResponse", expected_id="r-1"
    )
    assert _error_of(envelope)["code"] == -32600


@pytest.mark.parametrize(
    "bad_id", [{"a": 1}, [1], True, False], ids=["object", "array", "true", "false"]
)
def test_an_id_of_a_wrong_type_is_an_invalid_request_with_a_null_id(rpc: Rpc, bad_id: Any) -> None:
    """§2, §12.1: `id` is a string or an integer; anything else → -32600 with id `null`."""
    envelope = check_envelope(
        rpc.post_json({**VALID_GET, "id": bad_id}),
        definition="JSONRPCErrorResponse",
        expected_id=None,
    )
    assert _error_of(envelope)["code"] == -32600


@pytest.mark.parametrize(
    "body",
    [[], [VALID_GET], "tasks/get", 42, None, True],
    ids=["empty-array", "batch-array", "string", "number", "null", "boolean"],
)
def test_a_body_that_is_not_a_json_object_is_an_invalid_request(rpc: Rpc, body: Any) -> None:
    """§1, §12.1: the body is one request object (no batches) → else -32600, id `null`."""
    envelope = check_envelope(
        rpc.post_raw(json.dumps(body)), definition="JSONRPCErrorResponse", expected_id=None
    )
    assert _error_of(envelope)["code"] == -32600


# --- requests without an id ------------------------------------------------------------------

NO_ID = {key: value for key, value in VALID_GET.items() if key != "id"}


@pytest.mark.parametrize(
    ("request_object", "code"),
    [
        ({key: value for key, value in NO_ID.items() if key != "jsonrpc"}, -32600),
        ({**NO_ID, "jsonrpc": "1.0"}, -32600),
        ({key: value for key, value in NO_ID.items() if key != "method"}, -32600),
        ({**NO_ID, "method": 42}, -32600),
        ({**NO_ID, "method": "tasks/unknown"}, -32601),
        ({**NO_ID, "params": "t"}, -32602),
        ({**NO_ID, "params": ["t"]}, -32602),
        ({key: value for key, value in NO_ID.items() if key != "params"}, -32602),
        ({**NO_ID, "method": "message/send", "params": None}, -32602),
        (NO_ID, -32600),
        ({**NO_ID, "params": {}}, -32602),
        ({**NO_ID, "method": "message/send", "params": {"message": {"role": "user"}}}, -32602),
    ],
    ids=[
        "jsonrpc-missing",
        "jsonrpc-1.0",
        "method-missing",
        "method-number",
        "method-unknown",
        "params-string",
        "params-array",
        "params-missing",
        "params-null",
        "otherwise-valid",
        "params-invalid-but-an-object",
        "send-params-invalid-but-an-object",
    ],
)
def test_a_request_without_an_id_is_told_the_first_thing_wrong_with_it(
    rpc: Rpc, request_object: dict[str, Any], code: int
) -> None:
    """§12.1: checked in order: structure (-32600), method (-32601), params not an object or
    invalid for the method (-32602), and only then the missing id (-32600: notifications are
    not supported, every A2A method has a result). Always HTTP 200 with `"id": null`."""
    assert "id" not in request_object
    envelope = check_envelope(
        rpc.post_json(request_object), definition="JSONRPCErrorResponse", expected_id=None
    )
    assert _error_of(envelope)["code"] == code


def test_a_message_send_without_an_id_is_not_run(rpc: Rpc) -> None:
    """§12.1: a request without an id is refused, not run: the task it names is not created."""
    task_id = f"never-created-{uuid.uuid4()}"
    params = send_params("hello", task_id=task_id)
    request_object = {"jsonrpc": "2.0", "method": "message/send", "params": params}
    envelope = check_envelope(
        rpc.post_json(request_object), definition="JSONRPCErrorResponse", expected_id=None
    )
    assert _error_of(envelope)["code"] == -32600
    rpc.error("tasks/get", {"id": task_id}, code=-32001)


# --- -32601: unknown method -----------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/unknown", "message/Send", "SendMessage", "GetTask"])
def test_an_unknown_method_is_method_not_found(rpc: Rpc, method: str) -> None:
    """§3, §9: unknown (and the 1.0 PascalCase) methods → -32601, id echoed."""
    rpc.error(method, {"id": "t"}, code=-32601)


# --- -32602: known method, bad params -------------------------------------------------------


_DROP = object()


def _message(**changes: Any) -> dict[str, Any]:
    """A valid user message with some fields replaced (or dropped with `_DROP`)."""
    message = text_message("hello")
    for key, value in changes.items():
        if value is _DROP:
            del message[key]
        else:
            message[key] = value
    return message


CONFIG = {"acceptedOutputModes": ["text/plain"]}

BAD_SEND_PARAMS = {
    "params-array": [text_message("hello")],
    "params-string": "hello",
    "params-null": None,
    "message-missing": {"configuration": CONFIG},
    "message-not-object": {"message": "hello"},
    "messageId-missing": {"message": _message(messageId=_DROP)},
    "messageId-number": {"message": _message(messageId=7)},
    "role-missing": {"message": _message(role=_DROP)},
    "role-unknown": {"message": _message(role="robot")},
    "parts-missing": {"message": _message(parts=_DROP)},
    "parts-empty": {"message": _message(parts=[])},
    "parts-not-array": {"message": _message(parts={"kind": "text", "text": "hi"})},
    "part-without-kind": {"message": _message(parts=[{"text": "hello"}])},
    "part-with-type-not-kind": {"message": _message(parts=[{"type": "text", "text": "hello"}])},
    "part-unknown-kind": {"message": _message(parts=[{"kind": "video", "text": "hello"}])},
    "text-not-string": {"message": _message(parts=[{"kind": "text", "text": 5}])},
    "message-kind-missing": {"message": _message(kind=_DROP)},
    "message-kind-wrong": {"message": _message(kind="task")},
    "taskId-number": {"message": _message(taskId=5)},
    "referenceTaskIds-string": {"message": _message(referenceTaskIds="t-1")},
    "file-part-without-file": {"message": _message(parts=[{"kind": "file", "file": {}}])},
    "data-part-not-object": {"message": _message(parts=[{"kind": "data", "data": "x"}])},
    "acceptedOutputModes-string": {
        "message": _message(),
        "configuration": {"acceptedOutputModes": "text/plain"},
    },
    "historyLength-negative": {
        "message": _message(),
        "configuration": {**CONFIG, "historyLength": -1},
    },
    "historyLength-string": {
        "message": _message(),
        "configuration": {**CONFIG, "historyLength": "2"},
    },
    "blocking-string": {"message": _message(), "configuration": {**CONFIG, "blocking": "yes"}},
}


@pytest.mark.parametrize("params", BAD_SEND_PARAMS.values(), ids=BAD_SEND_PARAMS.keys())
def test_message_send_with_invalid_params_is_invalid_params(rpc: Rpc, params: Any) -> None:
    """§2, §12.1: params that do not match `MessageSendParams` → -32602, never -32600."""
    rpc.error("message/send", params, code=-32602)


def test_message_send_without_params_is_invalid_params(rpc: Rpc) -> None:
    """§12.1: a known method without its required params → -32602."""
    rpc.error("message/send", code=-32602)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {}),
        ("tasks/get", {"id": 123}),
        ("tasks/get", {"id": "t", "historyLength": -1}),
        ("tasks/get", {"id": "t", "historyLength": "2"}),
        ("tasks/get", ["t"]),
        ("tasks/cancel", {}),
        ("tasks/cancel", "t"),
        ("tasks/pushNotificationConfig/set", {"taskId": "t"}),
        ("tasks/pushNotificationConfig/set", {"taskId": "t", "pushNotificationConfig": {}}),
        ("tasks/pushNotificationConfig/get", {}),
    ],
    ids=[
        "get-id-missing",
        "get-id-number",
        "get-historyLength-negative",
        "get-historyLength-string",
        "get-params-array",
        "cancel-id-missing",
        "cancel-params-string",
        "push-set-config-missing",
        "push-set-url-missing",
        "push-get-id-missing",
    ],
)
def test_task_methods_with_invalid_params_are_invalid_params(
    rpc: Rpc, method: str, params: Any
) -> None:
    """§2, §12.1, §12.6: params not matching the schema (or a negative historyLength)
    → -32602."""
    rpc.error(method, params, code=-32602)


# --- -32001, -32002 -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {"id": MISSING_TASK}),
        ("tasks/cancel", {"id": MISSING_TASK}),
        ("tasks/pushNotificationConfig/get", {"id": MISSING_TASK}),
        (
            "tasks/pushNotificationConfig/set",
            {
                "taskId": MISSING_TASK,
                "pushNotificationConfig": {"url": "https://push-receiver.invalid/h"},
            },
        ),
    ],
    ids=["get", "cancel", "push-get", "push-set"],
)
def test_an_unknown_task_is_task_not_found(rpc: Rpc, method: str, params: Any) -> None:
    """§2, §3, §12.9: a task id the server does not know → -32001."""
    rpc.error(method, params, code=-32001)


def test_cancel_of_a_completed_task_is_not_cancelable(rpc: Rpc) -> None:
    """§3, §4, §12.8: a terminal task cannot be canceled → -32002."""
    task = rpc.send_task("hello")
    assert task["status"]["state"] == "completed"
    rpc.error("tasks/cancel", {"id": task["id"]}, code=-32002)


def test_cancel_of_an_already_canceled_task_is_not_cancelable(rpc: Rpc) -> None:
    """§12.8: canceling twice → the second is -32002 (canceled is terminal)."""
    task = rpc.send_task("task 50 100", blocking=False)
    assert rpc.cancel(task["id"])["status"]["state"] == "canceled"
    rpc.error("tasks/cancel", {"id": task["id"]}, code=-32002)


# --- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", ["abc-1", "", 0, 7, -3, 2**40], ids=repr)
def test_the_id_is_echoed_on_success(rpc: Rpc, request_id: Any) -> None:
    """§2: a response echoes the request's id with its type (string or integer)."""
    task = rpc.send_task("hello")
    envelope = rpc.call("tasks/get", {"id": task["id"]}, request_id=request_id)
    assert envelope["result"]["id"] == task["id"]


@pytest.mark.parametrize("request_id", ["abc-1", "", 0, 7, -3, 2**40], ids=repr)
def test_the_id_is_echoed_on_error(rpc: Rpc, request_id: Any) -> None:
    """§12.1: never an answer without the id: errors echo it with its type too."""
    envelope = rpc.call("tasks/unknown", {}, request_id=request_id)
    assert envelope["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("method", "params"),
    [("tasks/unknown", {}), ("tasks/get", {}), ("tasks/get", {"id": MISSING_TASK})],
    ids=["-32601", "-32602", "-32001"],
)
def test_errors_are_http_200_with_application_json(rpc: Rpc, method: str, params: Any) -> None:
    """§1, §12.1: JSON-RPC errors go out with HTTP 200 and `Content-Type: application/json`."""
    response = rpc.post_json(rpc.envelope(method, params, "r-200"))
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    assert "error" in response.json()


# --- streaming methods ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("message/stream", {"message": _message(messageId=_DROP)}),
        ("message/stream", {"message": _message(parts=[])}),
        ("message/stream", "hello"),
        ("tasks/resubscribe", {}),
        ("tasks/resubscribe", {"id": 5}),
    ],
    ids=[
        "stream-messageId-missing",
        "stream-parts-empty",
        "stream-params-string",
        "resubscribe-id-missing",
        "resubscribe-id-number",
    ],
)
def test_a_streaming_method_with_invalid_params_answers_one_json_error(
    rpc: Rpc, method: str, params: Any
) -> None:
    """§12.2: validation fails before any stream starts → one JSON-RPC error as
    `application/json` (not `text/event-stream`), -32602."""
    rpc.error(method, params, code=-32602)


def test_message_stream_without_params_answers_one_json_error(rpc: Rpc) -> None:
    """§12.2: a streaming request with no params → -32602 as `application/json`."""
    rpc.error("message/stream", code=-32602)


def test_resubscribe_to_an_unknown_task_streams_one_error_event(rpc: Rpc) -> None:
    """§12.2: a valid `tasks/resubscribe` is answered with `text/event-stream`; the unknown
    task is one error event (-32001), then the stream closes."""
    with rpc.stream("tasks/resubscribe", {"id": MISSING_TASK}) as stream:
        events = stream.until_closed()
    assert len(events) == 1, [event.data for event in events]
    assert "result" not in events[0].data
    assert events[0].data["error"]["code"] == -32001


def test_a_valid_send_still_works_after_errors(rpc: Rpc) -> None:
    """§12.1: errors are per request; the server keeps answering valid ones."""
    rpc.post_raw(b"{broken")
    result = rpc.result("message/send", send_params("still alive"))
    assert result["kind"] == "task"
    assert result["status"]["state"] == "completed"

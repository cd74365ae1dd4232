"""The live server against its OpenAPI document (spec/openapi.json), with schemathesis.

Schemathesis generates requests from the document, valid ones and invalid ones, and sends them
over HTTP to the session's server (`sut`, the conformance skills). For every answer:

- never a 5xx;
- it conforms to the OpenAPI document (status, content type, body schema, SSE events);
- an `application/json` answer to `POST /` is one JSON-RPC 2.0 response: `jsonrpc` "2.0", an `id`
  that echoes the request's (null only if it could not be read), exactly one of `result` and
  `error`, an error with an integer code and a string message, and it validates against the
  official v0.2.1 schema: `JSONRPCErrorResponse`, or `JSONRPCResponse` and the method's own
  success response (0.3.0's for the methods 0.2.1 lacks);
- an event stream answers a streaming method only, and each event is such a response.

The run is bounded (see `bounded` below) to well under two minutes on two cores.
"""

import copy
import json
import re
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck

from agentic_rag.a2a.routes import METHOD_SCOPES
from tests.support.live import LiveServer

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "spec" / "openapi.json"

# JSON-RPC errors are answered with HTTP 200 by design (docs/a2a-notes.md §12.1), so schemathesis'
# `negative_data_rejection` (which wants a 4xx for invalid input) does not apply; the tests below
# check the JSON-RPC error instead. `unsupported_method` wants 405 for, say, `PUT /`; the app
# mounts the MCP app at "/" after the A2A routes, and it answers every unmatched request 404.
CONFIG = schemathesis.Config.from_dict(
    {
        "phases": {
            "examples": {"enabled": False},
            "coverage": {"enabled": True},
            "fuzzing": {"enabled": True},
            "stateful": {"enabled": False},
        },
        "generation": {"mode": "all"},
        "checks": {
            "negative_data_rejection": {"enabled": False},
            "unsupported_method": {"enabled": False},
        },
    }
)
schema = schemathesis.openapi.from_path(OPENAPI, config=CONFIG)


# -- the official schemas, as jsonschema validators ------------------------------------------


def _definitions(version: str, *, null_ids: bool) -> dict[str, Any]:
    path = ROOT / "spec" / f"a2a-v{version}.schema.json"
    definitions: dict[str, Any] = copy.deepcopy(json.loads(path.read_text())["definitions"])
    if null_ids:
        # Erratum (also in spec/openapi.json): JSON-RPC 2.0 §5 answers `"id": null` when the
        # request's id cannot be read; A2A 0.3.0 allows it, the 0.2.1 schema forgot `null`.
        for name, definition in definitions.items():
            id_schema = definition.get("properties", {}).get("id")
            if name.endswith("Response") and id_schema is not None:
                id_schema["type"] = ["string", "integer", "null"]
    return definitions


V021 = _definitions("0.2.1", null_ids=True)
V030 = _definitions("0.3.0", null_ids=False)


def _validator(definitions: dict[str, Any], name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator({"$ref": f"#/definitions/{name}", "definitions": definitions})


ANY_RESPONSE = _validator(V021, "JSONRPCResponse")
ERROR_RESPONSE = _validator(V021, "JSONRPCErrorResponse")
STREAM_RESPONSE = _validator(V021, "SendStreamingMessageResponse")
SUCCESS = {
    "message/send": _validator(V021, "SendMessageSuccessResponse"),
    "tasks/get": _validator(V021, "GetTaskSuccessResponse"),
    "tasks/cancel": _validator(V021, "CancelTaskSuccessResponse"),
    "tasks/pushNotificationConfig/set": _validator(
        V021, "SetTaskPushNotificationConfigSuccessResponse"
    ),
    "tasks/pushNotificationConfig/get": _validator(
        V021, "GetTaskPushNotificationConfigSuccessResponse"
    ),
    "tasks/pushNotificationConfig/list": _validator(
        V030, "ListTaskPushNotificationConfigSuccessResponse"
    ),
    "tasks/pushNotificationConfig/delete": _validator(
        V030, "DeleteTaskPushNotificationConfigSuccessResponse"
    ),
}
IN_V021 = set(SUCCESS) - {
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
}
STREAMING = {"message/stream", "tasks/resubscribe"}
INTERNAL_ERROR = -32603  # an unexpected failure: a bug, like an HTTP 5xx


def _errors(validator: jsonschema.Draft7Validator, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}"
        for e in validator.iter_errors(instance)
    ]


# -- what the server must answer -------------------------------------------------------------


def readable_id(body: Any) -> Any:
    """The id a response must echo (docs/a2a-notes.md §12.1); None where the id cannot be read.

    Integers beyond 64 bits are read as floats by JSON parsers with 64-bit numbers, as the
    server's is, so they are not ids it can echo.
    """
    if not isinstance(body, dict):
        return None
    rid = body.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int):
        return None
    if isinstance(rid, int) and not -(2**63) <= rid < 2**64:
        return None
    return rid


def check_envelope(body: Any, expected_id: Any) -> None:
    """`body` is a JSON-RPC 2.0 response object answering a request with `expected_id`."""
    assert isinstance(body, dict), body
    assert body.get("jsonrpc") == "2.0", body
    assert "id" in body, f"no id: {body}"
    assert body["id"] == expected_id and type(body["id"]) is type(expected_id), (
        f"id {body['id']!r} answers a request with id {expected_id!r}"
    )
    assert ("result" in body) != ("error" in body), f"not exactly one of result/error: {body}"
    if "error" in body:
        error = body["error"]
        assert isinstance(error, dict), body
        assert type(error.get("code")) is int, body
        assert isinstance(error.get("message"), str), body
        assert error["code"] != INTERNAL_ERROR, f"the server failed unexpectedly: {body}"


def check_json_rpc(body: Any, method: Any, expected_id: Any) -> None:
    """`body` is one JSON-RPC 2.0 response to a request for `method` with `expected_id`."""
    check_envelope(body, expected_id)
    if "error" in body:
        problems = _errors(ERROR_RESPONSE, body) + _errors(ANY_RESPONSE, body)
    else:
        assert method in SUCCESS, f"a JSON success answers {method!r}: {body}"
        problems = _errors(SUCCESS[method], body)
        if method in IN_V021:
            problems += _errors(ANY_RESPONSE, body)
    assert not problems, f"{body}\n" + "\n".join(problems)


def sse_events(text: str) -> list[dict[str, Any]]:
    """The `data` of each event of an SSE stream, parsed as JSON."""
    events, data = [], []
    # Only CR, LF and CRLF end a line: str.splitlines() would also split at U+2028 and others.
    for line in [*re.split(r"\r\n|\r|\n", text), ""]:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line == "" and data:
            events.append(json.loads("\n".join(data)))
            data = []
    return events


def check_stream(text: str, method: Any, expected_id: Any) -> None:
    assert method in STREAMING, f"an event stream answers {method!r}"
    events = sse_events(text)
    assert events, "an empty event stream"
    for index, event in enumerate(events):
        check_envelope(event, expected_id)
        problems = _errors(STREAM_RESPONSE, event)
        assert not problems, f"{event}\n" + "\n".join(problems)
        if "error" in event:
            assert index == len(events) - 1, "an error event does not end the stream"
    last = events[-1]
    if "result" in last:
        result = last["result"]
        ends = result.get("kind") == "message" or (
            result.get("kind") == "status-update" and result.get("final") is True
        )
        assert ends, f"the stream closed after a non-final event: {last}"


# -- keeping generated requests quick and local ----------------------------------------------

TASK_WORD = re.compile(r"task", re.IGNORECASE)
PUSH_SINK = "http://127.0.0.1:9/schemathesis"  # the discard port: refused at once


def make_harmless(node: Any) -> None:
    """Rewrite, in place, what would make a generated request slow or reach out of the host.

    - A text (a `TextPart`, or a skill's `text` argument) that mentions "task" becomes "echo":
      the conformance skill runs `task N D` for N*D milliseconds.
    - A push notification URL with an http(s) scheme points at a refused local port instead of
      a generated host name; other URLs are left for the server to refuse.
    """
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str) and TASK_WORD.search(value):
                node[key] = "echo"
            elif key == "url" and isinstance(value, str) and value.lower().startswith("http"):
                node[key] = PUSH_SINK
            else:
                make_harmless(value)
    elif isinstance(node, list):
        for item in node:
            make_harmless(item)


# -- the tests -------------------------------------------------------------------------------


def exchange(case: schemathesis.Case[Any], sut: LiveServer) -> None:
    """Send `case` to the server and check the answer (see the module's docstring)."""
    make_harmless(case.body)
    response = case.call(base_url=sut.url, timeout=30)
    assert response.status_code < 500, response.text
    case.validate_response(response)
    if case.method.upper() != "POST" or case.path != "/":
        return
    media_type = response.headers.get("content-type", [""])[0].split(";")[0].strip()
    body = case.body
    method = body.get("method") if isinstance(body, dict) else None
    if media_type == "text/event-stream":
        check_stream(response.text, method, readable_id(body))
        return
    assert media_type == "application/json", response.headers
    # Refused before the body is read (413, 415, 401, 429): the id is unknown.
    expected_id = readable_id(body) if response.status_code in (200, 403) else None
    check_json_rpc(response.json(), method, expected_id)


def bounded(max_examples: int) -> hypothesis.settings:
    """Hypothesis settings for a schemathesis test; `max_examples` bounds its fuzzing phase."""
    return hypothesis.settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,  # the same cases on every run, so a failure reproduces
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@schema.parametrize()
@bounded(300)  # the coverage phase adds about 1100 cases
def test_the_server_conforms_to_its_openapi_document(
    case: schemathesis.Case[Any], sut: LiveServer
) -> None:
    exchange(case, sut)


def _messages_only(document: dict[str, Any]) -> dict[str, Any]:
    """The document with `POST /` alone, its body narrowed to `message/send` and `message/stream`.

    Generated from the whole union, few requests are messages that succeed (hypothesis favours
    the small methods); these are the requests that create tasks and run skills.
    """
    narrowed = copy.deepcopy(document)
    narrowed["paths"] = {"/": narrowed["paths"]["/"]}
    content = narrowed["paths"]["/"]["post"]["requestBody"]["content"]["application/json"]
    content["schema"] = {
        "type": "object",
        "required": ["id"],
        "anyOf": [
            {"$ref": "#/components/schemas/SendMessageRequest"},
            {"$ref": "#/components/schemas/SendStreamingMessageRequest"},
        ],
    }
    return narrowed


messages = schemathesis.openapi.from_dict(
    _messages_only(json.loads(OPENAPI.read_text())),
    config=schemathesis.Config.from_dict(
        {
            "phases": {
                "examples": {"enabled": False},
                "coverage": {"enabled": False},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": False},
            },
            "generation": {"mode": "positive", "allow-x00": False},
        }
    ),
)


@messages.parametrize()
@bounded(300)
def test_messages_run_and_answer_as_the_document_says(
    case: schemathesis.Case[Any], sut: LiveServer
) -> None:
    exchange(case, sut)


def test_the_checks_above_can_fail(sut: LiveServer) -> None:
    """The JSON-RPC checks reject answers that break the rules, and accept the server's."""
    good = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "Method not found"}}
    check_json_rpc(good, "nope", 7)
    bad = [
        ({**good, "id": 8}, 7),
        ({k: v for k, v in good.items() if k != "id"}, 7),
        ({**good, "jsonrpc": "1.0"}, 7),
        ({**good, "result": {}}, 7),
        ({**good, "error": {"code": "x", "message": "m"}}, 7),
        ({**good, "error": {"code": 1, "message": None}}, 7),
        ({"jsonrpc": "2.0", "id": 7, "result": {"kind": "task"}}, 7),
    ]
    for body, rid in bad:
        with pytest.raises(AssertionError):
            check_json_rpc(body, "tasks/get", rid)
    internal = {**good, "error": {"code": INTERNAL_ERROR, "message": "Internal error"}}
    with pytest.raises(AssertionError):
        check_json_rpc(internal, "tasks/get", 7)

    def sse(*events: dict[str, Any]) -> str:
        return "".join(f"id: {n}\ndata: {json.dumps(e)}\n\n" for n, e in enumerate(events))

    task = {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}}
    final: dict[str, Any] = {"kind": "status-update", "taskId": "t", "contextId": "c"}
    final |= {"final": True, "status": {"state": "completed"}}
    first = {"jsonrpc": "2.0", "id": "s", "result": task}
    last = {"jsonrpc": "2.0", "id": "s", "result": final}
    failed = {"jsonrpc": "2.0", "id": "s", "error": {"code": -32001, "message": "not found"}}
    check_stream(sse(first, last), "message/stream", "s")
    check_stream(sse(failed), "tasks/resubscribe", "s")
    broken_streams = [
        ("message/stream", sse(first)),  # ends before the final event
        ("message/stream", sse(first, {**last, "id": "t"})),  # another request's id
        ("message/stream", sse(failed, last)),  # goes on after an error
        ("message/stream", sse({**first, "result": {**task, "status": {}}}, last)),  # no state
        ("message/stream", ""),
        ("tasks/get", sse(first, last)),  # not a streaming method
    ]
    for method, stream in broken_streams:
        with pytest.raises(AssertionError):
            check_stream(stream, method, "s")
    with httpx.Client(base_url=sut.url, timeout=30) as client:
        reply = client.post("/", json={"jsonrpc": "2.0", "id": "x", "method": "nope"})
    check_json_rpc(reply.json(), "nope", "x")
    assert reply.json()["error"]["code"] == -32601


def test_every_schema_of_the_document_is_valid_json_schema() -> None:
    document = json.loads(OPENAPI.read_text())
    assert document["openapi"].startswith("3.1.")
    for name, definition in document["components"]["schemas"].items():
        try:
            jsonschema.Draft202012Validator.check_schema(definition)
        except jsonschema.SchemaError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{name}: {exc.message}")


def test_the_document_names_every_method_the_server_serves() -> None:
    schemas = json.loads(OPENAPI.read_text())["components"]["schemas"]

    def methods(union: str) -> set[str]:
        found = set()
        for variant in schemas[union]["anyOf"]:
            name = variant["$ref"].rsplit("/", 1)[1]
            if "anyOf" in schemas[name]:
                found |= methods(name)
            else:
                found.add(schemas[name]["properties"]["method"]["const"])
        return found

    assert len(methods("A2ARequest")) == 7
    assert methods("RPCRequest") == set(METHOD_SCOPES)

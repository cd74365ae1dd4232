"""A2A 1.0's HTTP+JSON binding on the wire, under `/json` (docs/a2a-notes.md §13): bodies and
answers in the JSON mapping, camelCase query parameters, SSE without an envelope, and errors
as AIP-193 `google.rpc.Status` with the spec's HTTP status and an ErrorInfo."""

import uuid
from typing import Any

import httpx
import orjson

from tests.support.live import LiveServer

V1 = {"A2A-Version": "1.0"}


def send_body(text: str, **message: Any) -> dict[str, Any]:
    parts = [{"text": text}]
    return {
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts, **message}
    }


def assert_status(response: httpx.Response, status: int, grpc: str, reason: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (status, grpc)
    assert error["message"]
    (info,) = [d for d in error["details"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert (info["reason"], info["domain"]) == (reason, "a2a-protocol.org")


def test_send_get_and_list_by_resource_urls(sut: LiveServer) -> None:
    with httpx.Client(base_url=sut.url + "/json", headers=V1, timeout=30) as http:
        sent = http.post("/message:send", json=send_body("rest hello"))
        assert sent.status_code == 200
        assert sent.headers["content-type"].startswith("application/a2a+json")
        task = sent.json()["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        read = http.get(f"/tasks/{task['id']}", params={"historyLength": 1}).json()
        assert read["id"] == task["id"]
        assert len(read["history"]) == 1
        listed = http.get(
            "/tasks", params={"contextId": task["contextId"], "includeArtifacts": "true"}
        ).json()
        assert [t["id"] for t in listed["tasks"]] == [task["id"]]
        assert {"text": "rest hello"} in listed["tasks"][0]["artifacts"][0]["parts"]
        assert listed["nextPageToken"] == ""
        assert listed["totalSize"] == 1


def test_stream_is_sse_of_bare_stream_responses(sut: LiveServer) -> None:
    with (
        httpx.Client(base_url=sut.url + "/json", headers=V1, timeout=30) as http,
        http.stream("POST", "/message:stream", json=send_body("task 2 10")) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [
            orjson.loads(line.removeprefix("data:"))
            for line in response.iter_lines()
            if line.startswith("data:")
        ]
    assert "task" in events[0]
    assert "jsonrpc" not in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_errors_have_the_spec_status_and_error_info(sut: LiveServer) -> None:
    with httpx.Client(base_url=sut.url + "/json", headers=V1, timeout=30) as http:
        assert_status(http.get("/tasks/no-such-task"), 404, "NOT_FOUND", "TASK_NOT_FOUND")
        assert_status(http.post("/tasks/no-such-task:cancel"), 404, "NOT_FOUND", "TASK_NOT_FOUND")
        bad = http.post("/message:send", json={"message": {"parts": "not a list"}})
        assert_status(bad, 400, "INVALID_ARGUMENT", "INVALID_PARAMS")
        too_many = http.get("/tasks", params={"pageSize": 150})
        assert_status(too_many, 400, "INVALID_ARGUMENT", "INVALID_PARAMS")
        unknown_state = http.get("/tasks", params={"status": "TASK_STATE_RUNNING"})
        assert_status(unknown_state, 400, "INVALID_ARGUMENT", "INVALID_PARAMS")
        done = http.post("/message:send", json=send_body("done")).json()["task"]
        again = http.post("/message:send", json=send_body("more", taskId=done["id"]))
        assert_status(again, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")
        canceled = http.post(f"/tasks/{done['id']}:cancel")
        assert_status(canceled, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE")
        card = http.get("/extendedAgentCard")
        assert_status(card, 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED")


def test_the_binding_speaks_1_0_only(sut: LiveServer) -> None:
    for headers in ({}, {"A2A-Version": "0.3"}, {"A2A-Version": "2.0"}):
        response = httpx.post(
            sut.url + "/json/message:send", json=send_body("old"), headers=headers, timeout=30
        )
        assert_status(response, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")

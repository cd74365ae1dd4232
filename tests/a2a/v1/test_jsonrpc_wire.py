"""A2A 1.0's JSON-RPC on the wire (docs/a2a-notes.md §13): version negotiation by the
`A2A-Version` header, the spec's JSON mapping, and errors with google.rpc.ErrorInfo."""

import re
import uuid
from typing import Any

import httpx

from tests.support.live import LiveServer


def call(
    server: LiveServer, method: str, params: dict[str, Any], version: str | None = "1.0"
) -> dict[str, Any]:
    headers = {} if version is None else {"A2A-Version": version}
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}
    response = httpx.post(server.url + "/", json=body, headers=headers, timeout=30)
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    assert answer["id"] == "r1"
    return answer


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def error_reason(answer: dict[str, Any]) -> str:
    (info,) = [d for d in answer["error"]["data"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert info["domain"] == "a2a-protocol.org"
    reason: str = info["reason"]
    return reason


def test_send_message_result_is_wrapped_in_the_1_0_json_mapping(sut: LiveServer) -> None:
    answer = call(sut, "SendMessage", {"message": message("mapping")})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", task["status"]["timestamp"])
    assert task["history"][0]["role"] == "ROLE_USER"
    assert "kind" not in task and "kind" not in task["history"][0]
    assert {"text": "mapping"} in task["artifacts"][0]["parts"]


def test_proto_field_names_are_accepted_too(sut: LiveServer) -> None:
    params = {
        "message": {
            "message_id": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "snake"}],
        },
        "configuration": {"return_immediately": False},
    }
    answer = call(sut, "SendMessage", params)
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_1_0_method_needs_the_1_0_version_header(sut: LiveServer) -> None:
    # An empty header means 0.3 (spec §3.6.2), which has no GetTask: the 0.x answer, unchanged.
    empty = call(sut, "GetTask", {"id": "x"}, version=None)
    assert empty["error"]["code"] == -32601
    assert "data" not in empty["error"]
    assert call(sut, "GetTask", {"id": "x"}, version="0.3")["error"]["code"] == -32601
    assert call(sut, "GetTask", {"id": "x"}, version="1.0.1")["error"]["code"] == -32001
    slash = call(sut, "tasks/get", {"id": "x"}, version="1.0")  # 1.0 has no slash methods
    assert slash["error"]["code"] == -32601
    assert error_reason(slash) == "METHOD_NOT_FOUND"


def test_an_unknown_version_is_refused_whatever_the_method(sut: LiveServer) -> None:
    refused = call(sut, "GetTask", {"id": "x"}, version="2.0")
    assert refused["error"]["code"] == -32009
    assert error_reason(refused) == "VERSION_NOT_SUPPORTED"
    assert call(sut, "tasks/get", {"id": "x"}, version="9.9")["error"]["code"] == -32009


def test_0_x_methods_keep_their_behaviour(sut: LiveServer) -> None:
    params = {
        "message": {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "text", "text": "old"}],
        }
    }
    for version in (None, "0.3", "0.2.1"):
        answer = call(
            sut,
            "message/send",
            params | {"message": params["message"] | {"messageId": str(uuid.uuid4())}},
            version=version,
        )
        assert answer["result"]["kind"] == "task"
        assert answer["result"]["status"]["state"] == "completed"


def test_errors_carry_error_info(sut: LiveServer) -> None:
    missing = call(sut, "GetTask", {"id": "no-such-task"})
    assert missing["error"]["code"] == -32001
    assert error_reason(missing) == "TASK_NOT_FOUND"
    bad = call(sut, "SendMessage", {"message": {"parts": "not a list"}})
    assert bad["error"]["code"] == -32602
    assert error_reason(bad) == "INVALID_PARAMS"
    card = call(sut, "GetExtendedAgentCard", {})
    assert card["error"]["code"] == -32007  # no authentication configured: no extended card
    assert error_reason(card) == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


def test_list_tasks_refuses_out_of_range_values(sut: LiveServer) -> None:
    for params in ({"pageSize": 150}, {"pageSize": 0}, {"historyLength": -5}, {"pageToken": "%%"}):
        answer = call(sut, "ListTasks", params)
        assert answer.get("error", {}).get("code") == -32602, (params, answer)
    assert call(sut, "ListTasks", {"status": "TASK_STATE_RUNNING"})["error"]["code"] == -32602


def test_cards_carry_cache_control_and_an_etag(sut: LiveServer) -> None:
    """Spec §8.6: both card documents can be cached and revalidated."""
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        first = httpx.get(sut.url + path)
        assert first.headers["cache-control"].startswith("public, max-age=")
        etag = first.headers["etag"]
        again = httpx.get(sut.url + path, headers={"If-None-Match": etag})
        assert again.status_code == 304
        assert again.content == b""
        changed = httpx.get(sut.url + path, headers={"If-None-Match": '"another"'})
        assert changed.status_code == 200
        assert changed.json() == first.json()


def test_required_fields_are_checked_before_anything_runs(sut: LiveServer) -> None:
    """DM-SERIAL-004: the fields the proto marks REQUIRED, and a part's one content."""
    no_id = call(sut, "GetTask", {})
    assert no_id["error"]["code"] == -32602
    assert "id" in no_id["error"]["message"]
    no_message_id = call(
        sut, "SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}
    )
    assert no_message_id["error"]["code"] == -32602
    assert "message.messageId" in no_message_id["error"]["message"]
    empty_part = call(sut, "SendMessage", {"message": message("x") | {"parts": [{}]}})
    assert empty_part["error"]["code"] == -32602
    assert "message.parts[0]" in empty_part["error"]["message"]
    no_url = call(sut, "CreateTaskPushNotificationConfig", {"taskId": "t"})
    assert no_url["error"]["code"] == -32602


def test_a_task_sent_over_1_0_is_the_task_mcp_and_0_2_1_see(sut: LiveServer) -> None:
    """One engine, one store: the task a 1.0 SendMessage made is MCP's task (tasks/get at
    protocol 2025-11-25) and 0.2.1's, in the same state."""
    task = call(sut, "SendMessage", {"message": message("every face")})["result"]["task"]
    mcp = httpx.post(
        sut.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task["id"]}},
        headers={"MCP-Protocol-Version": "2025-11-25", "Accept": "application/json"},
        timeout=30,
    ).json()["result"]
    assert (mcp["taskId"], mcp["status"]) == (task["id"], "completed")
    old = call(sut, "tasks/get", {"id": task["id"]}, version=None)["result"]
    assert (old["id"], old["status"]["state"]) == (task["id"], "completed")

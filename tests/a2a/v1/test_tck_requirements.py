"""MUST requirements of the A2A 1.0 test kit (tests/data/a2a-1.0-tck-must.txt), shown on the
wire over both 1.0 bindings against the conformance server; each test names the requirement ids
it shows (docs/a2a-notes.md §13.9 maps every id to its tests)."""

import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import httpx
import orjson
import pytest

from tests.support.live import LiveServer

V1 = {"A2A-Version": "1.0"}
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


class Refused(Exception):
    """A 1.0 error answer, by its google.rpc.ErrorInfo reason (the same on every binding)."""

    def __init__(self, reason: str, answer: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason, self.answer = reason, answer


def _reason(details: list[dict[str, Any]]) -> str:
    (info,) = [d for d in details if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert info["domain"] == "a2a-protocol.org"
    reason: str = info["reason"]
    return reason


class Binding:
    """The 1.0 operations over one binding, as the kit calls them: results as JSON, errors
    raised as `Refused`."""

    name: str

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, headers=V1, timeout=30)

    def __enter__(self) -> "Binding":
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def call(self, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    @contextmanager
    def stream(self, method: str, params: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
        raise NotImplementedError
        yield iter(())


class JsonRpc(Binding):
    name = "JSONRPC"

    def call(self, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": "tck", "method": method, "params": params}
        response = self.http.post("/", json=body)
        assert response.headers["content-type"] == "application/json"
        answer = response.json()
        if "error" in answer:
            error = answer["error"]
            assert -32099 <= error["code"] <= -32001 or -32700 <= error["code"] <= -32600
            raise Refused(_reason(error["data"]), error)
        return answer["result"]

    @contextmanager
    def stream(self, method: str, params: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
        body = {"jsonrpc": "2.0", "id": "tck", "method": method, "params": params}
        with self.http.stream("POST", "/", json=body) as response:
            if response.headers["content-type"].startswith("application/json"):
                response.read()  # refused before the stream began
                error = response.json()["error"]
                raise Refused(_reason(error["data"]), error)
            assert response.headers["content-type"].startswith("text/event-stream")

            def events() -> Iterator[dict[str, Any]]:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        answer = orjson.loads(line.removeprefix("data:"))
                        if "error" in answer:
                            raise Refused(_reason(answer["error"]["data"]), answer["error"])
                        yield answer["result"]

            yield events()


class HttpJson(Binding):
    name = "HTTP+JSON"
    ROUTES: ClassVar[dict[str, tuple[str, str]]] = {
        "SendMessage": ("POST", "/message:send"),
        "SendStreamingMessage": ("POST", "/message:stream"),
        "GetTask": ("GET", "/tasks/{id}"),
        "ListTasks": ("GET", "/tasks"),
        "CancelTask": ("POST", "/tasks/{id}:cancel"),
        "SubscribeToTask": ("GET", "/tasks/{id}:subscribe"),
        "CreateTaskPushNotificationConfig": ("POST", "/tasks/{taskId}/pushNotificationConfigs"),
        "GetTaskPushNotificationConfig": ("GET", "/tasks/{taskId}/pushNotificationConfigs/{id}"),
        "ListTaskPushNotificationConfigs": ("GET", "/tasks/{taskId}/pushNotificationConfigs"),
        "DeleteTaskPushNotificationConfig": (
            "DELETE",
            "/tasks/{taskId}/pushNotificationConfigs/{id}",
        ),
    }

    def _request(self, method: str, params: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        verb, template = self.ROUTES[method]
        rest = dict(params)
        path = re.sub(r"\{(\w+)\}", lambda m: str(rest.pop(m[1])), template)
        return verb, path, rest

    def call(self, method: str, params: dict[str, Any]) -> Any:
        verb, path, rest = self._request(method, params)
        if verb == "POST":
            response = self.http.post(path, json=rest)
        else:
            query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in rest.items()}
            response = self.http.request(verb, path, params=query)
        answer = response.json() if response.content else {}
        if response.status_code >= 400:
            raise Refused(_reason(answer["error"]["details"]), answer["error"])
        return answer

    @contextmanager
    def stream(self, method: str, params: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
        verb, path, rest = self._request(method, params)
        body = {"json": rest} if verb == "POST" else {}
        with self.http.stream(verb, path, **body) as response:  # type: ignore[arg-type]
            if response.status_code >= 400:
                response.read()
                raise Refused(_reason(response.json()["error"]["details"]), response.json())

            def events() -> Iterator[dict[str, Any]]:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        yield orjson.loads(line.removeprefix("data:"))

            yield events()


@pytest.fixture(params=[JsonRpc, HttpJson], ids=["jsonrpc", "http-json"])
def a2a(sut: LiveServer, request: pytest.FixtureRequest) -> Iterator[Binding]:
    kind: type[Binding] = request.param
    with kind(sut.url + ("/json" if kind is HttpJson else "")) as binding:
        yield binding


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def send(a2a: Binding, text: str, **params: Any) -> dict[str, Any]:
    message_fields = params.pop("message", {})
    task: dict[str, Any] = a2a.call(
        "SendMessage", {"message": message(text, **message_fields), **params}
    )["task"]
    return task


def refused(a2a: Binding, method: str, params: dict[str, Any]) -> str:
    with pytest.raises(Refused) as caught:
        a2a.call(method, params)
    return caught.value.reason


# -- SendMessage and contexts (spec §3.1.1, §3.4) -------------------------------------------


def test_core_send_003_a_media_type_the_agent_does_not_take_is_refused(a2a: Binding) -> None:
    """CORE-SEND-003; CORE-ERR-002: refused before anything runs (no task is made)."""
    before = a2a.call("ListTasks", {"pageSize": 1})["totalSize"]
    part = {"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}
    params = {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [part]}}
    assert refused(a2a, "SendMessage", params) == "CONTENT_TYPE_NOT_SUPPORTED"
    assert a2a.call("ListTasks", {"pageSize": 1})["totalSize"] == before


def test_core_multi_001a_003_new_tasks_get_their_own_ids_and_a_context(a2a: Binding) -> None:
    """CORE-MULTI-001a, CORE-MULTI-003, CORE-SEND-001."""
    first, second = send(a2a, "one"), send(a2a, "two")
    assert first["contextId"] and second["contextId"]
    assert first["id"] != second["id"]
    assert first["contextId"] != second["contextId"]
    assert first["history"][0]["contextId"] == first["contextId"]


def test_core_multi_002a_a_context_the_client_chose_is_kept(a2a: Binding) -> None:
    """CORE-MULTI-002a: every context id a client chooses is accepted (contexts are the
    caller's tenant's), and none other is made up in its place."""
    context = f"client-context-{uuid.uuid4()}"
    task = send(a2a, "in my context", message={"contextId": context})
    assert task["contextId"] == context


def test_core_multi_004_005_006_a_message_to_a_task(a2a: Binding) -> None:
    """CORE-MULTI-004 (unknown task), CORE-MULTI-005 (the context comes from the task),
    CORE-MULTI-006 (a context that is not the task's is refused and changes nothing)."""
    assert refused(a2a, "SendMessage", {"message": message("x", taskId="no-such")}) == (
        "TASK_NOT_FOUND"
    )
    asking = send(a2a, "ask")
    assert asking["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    wrong = {"message": message("answer", taskId=asking["id"], contextId="another")}
    assert refused(a2a, "SendMessage", wrong) == "INVALID_PARAMS"
    unchanged = a2a.call("GetTask", {"id": asking["id"]})
    assert unchanged["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert len(unchanged["history"]) == len(asking["history"])
    answered = send(a2a, "the answer", message={"taskId": asking["id"]})
    assert (answered["id"], answered["contextId"]) == (asking["id"], asking["contextId"])
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answered["history"][-1]["contextId"] == asking["contextId"]


def test_core_send_002_a_task_that_ends_meanwhile_is_never_followed_up(a2a: Binding) -> None:
    """CORE-SEND-002 under a race: messages sent to tasks while they end are taken by the
    task (still working) or refused (already final), never made a follow-up task."""
    context = f"ending-{uuid.uuid4()}"
    for attempt in range(12):
        running = send(
            a2a,
            "task 1 30",
            message={"contextId": context},
            configuration={"returnImmediately": True},
        )
        time.sleep(0.003 * attempt)  # the message lands earlier or later in the task's end
        params = {"message": message("late", taskId=running["id"]), "configuration": {}}
        try:
            answer = a2a.call("SendMessage", params)
        except Refused as exc:
            assert exc.reason == "UNSUPPORTED_OPERATION"
        else:
            assert answer["task"]["id"] == running["id"]
    listed = a2a.call("ListTasks", {"contextId": context, "pageSize": 100})
    assert listed["totalSize"] == 12


def test_core_hist_002_history_is_cut_to_history_length(a2a: Binding) -> None:
    """CORE-HIST-002, on SendMessage and GetTask."""
    asking = send(a2a, "ask")
    answered = send(
        a2a, "an answer", message={"taskId": asking["id"]}, configuration={"historyLength": 1}
    )
    assert len(answered["history"]) == 1
    assert len(a2a.call("GetTask", {"id": asking["id"], "historyLength": 2})["history"]) == 2
    assert "history" not in a2a.call("GetTask", {"id": asking["id"], "historyLength": 0})


def test_core_execution_mode_blocking_and_return_immediately(a2a: Binding) -> None:
    """CORE-EXECUTION-MODE-001 (blocking waits for a terminal or interrupted state),
    CORE-EXECUTION-MODE-002 (returnImmediately answers at once)."""
    assert send(a2a, "task 2 50")["status"]["state"] == "TASK_STATE_COMPLETED"
    assert send(a2a, "ask")["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    early = send(a2a, "task 3 300", configuration={"returnImmediately": True})
    assert early["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")


# -- GetTask, CancelTask (spec §3.1.3, §3.1.5) ---------------------------------------------


def test_core_get_and_cancel(a2a: Binding) -> None:
    """CORE-GET-001, CORE-GET-002, CORE-CANCEL-001, CORE-CANCEL-002, CORE-CANCEL-003."""
    running = send(a2a, "task 20 200", configuration={"returnImmediately": True})
    assert a2a.call("GetTask", {"id": running["id"]})["id"] == running["id"]
    assert refused(a2a, "GetTask", {"id": "no-such-task"}) == "TASK_NOT_FOUND"
    canceled = a2a.call("CancelTask", {"id": running["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert refused(a2a, "CancelTask", {"id": running["id"]}) == "TASK_NOT_CANCELABLE"
    assert refused(a2a, "CancelTask", {"id": "no-such-task"}) == "TASK_NOT_FOUND"
    assert a2a.call("GetTask", {"id": running["id"]})["status"]["state"] == "TASK_STATE_CANCELED"


# -- ListTasks (spec §3.1.4) ----------------------------------------------------------------


def test_core_list_pages_order_and_artifacts(a2a: Binding) -> None:
    """CORE-LIST-002 (cursor pages), CORE-LIST-003 (latest status first), CORE-LIST-004 (""
    on the last page), CORE-LIST-005 (no artifacts unless asked)."""
    context = f"list-{uuid.uuid4()}"
    sent = [send(a2a, f"item {i}", message={"contextId": context})["id"] for i in range(3)]
    seen: list[dict[str, Any]] = []
    token = None
    while True:
        query: dict[str, Any] = {"contextId": context, "pageSize": 2}
        if token:
            query["pageToken"] = token
        page = a2a.call("ListTasks", query)
        assert page["totalSize"] == 3
        seen += page["tasks"]
        token = page["nextPageToken"]
        if token == "":
            break
    assert [t["id"] for t in seen] == list(reversed(sent))
    stamps = [t["status"]["timestamp"] for t in seen]
    assert stamps == sorted(stamps, reverse=True)
    assert all("artifacts" not in t for t in seen)
    full = a2a.call("ListTasks", {"contextId": context, "includeArtifacts": True})["tasks"]
    assert all(t["artifacts"] for t in full)


def test_core_err_002_parameters_are_checked_before_anything_runs(a2a: Binding) -> None:
    """CORE-ERR-001, CORE-ERR-002: a precise message, and nothing made."""
    before = a2a.call("ListTasks", {"pageSize": 1})["totalSize"]
    with pytest.raises(Refused) as caught:
        a2a.call("SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}})
    assert caught.value.reason == "INVALID_PARAMS"
    assert "messageId" in str(caught.value.answer["message"])
    assert refused(a2a, "ListTasks", {"pageSize": 0}) == "INVALID_PARAMS"
    assert a2a.call("ListTasks", {"pageSize": 1})["totalSize"] == before


# -- Streams and subscriptions (spec §3.1.2, §3.1.6, §3.5) -----------------------------------


def test_stream_sub_first_the_task_then_its_events_to_the_end(a2a: Binding) -> None:
    """STREAM-SUB-001, STREAM-SUB-002, STREAM-SUB-003, STREAM-SUB-004, CORE-STREAM-001,
    CORE-STREAM-003."""
    with a2a.stream("SendStreamingMessage", {"message": message("task 2 50")}) as events:
        streamed = list(events)
    assert "task" in streamed[0]
    assert streamed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    running = send(a2a, "task 4 150", configuration={"returnImmediately": True})
    with a2a.stream("SubscribeToTask", {"id": running["id"]}) as events:
        followed = list(events)
    assert followed[0]["task"]["id"] == running["id"]
    assert followed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    with pytest.raises(Refused) as ended, a2a.stream("SubscribeToTask", {"id": running["id"]}) as e:
        list(e)
    assert ended.value.reason == "UNSUPPORTED_OPERATION"
    with pytest.raises(Refused) as unknown, a2a.stream("SubscribeToTask", {"id": "nope"}) as e:
        list(e)
    assert unknown.value.reason == "TASK_NOT_FOUND"


def test_stream_order_every_stream_gets_every_event_in_order(a2a: Binding) -> None:
    """STREAM-ORDER-001, STREAM-ORDER-002, STREAM-ORDER-003, STREAM-ORDER-004: two
    subscribers see the same events in the same order, and a third that leaves early
    changes nothing for them."""
    running = send(a2a, "task 5 150", configuration={"returnImmediately": True})
    with (
        a2a.stream("SubscribeToTask", {"id": running["id"]}) as first,
        a2a.stream("SubscribeToTask", {"id": running["id"]}) as second,
    ):
        with a2a.stream("SubscribeToTask", {"id": running["id"]}) as leaving:
            next(leaving)
        one, two = list(first), list(second)

    def updates(events: list[dict[str, Any]]) -> list[str]:
        return [
            e["statusUpdate"]["status"]["state"] + repr(e["statusUpdate"]["status"].get("message"))
            for e in events
            if "statusUpdate" in e
        ]

    # The second stream joined a moment later: from then on both saw the same, in order.
    assert len(updates(two)) >= 2
    assert updates(one)[-len(updates(two)) :] == updates(two)
    assert updates(two)[-1].startswith("TASK_STATE_COMPLETED")


# -- Push notification configs (spec §3.1.7-§3.1.10) ----------------------------------------


def test_push_configs_persist_and_delete_idempotently(a2a: Binding) -> None:
    """PUSH-CREATE-001, PUSH-CREATE-002 (the config outlives the task's updates), PUSH-GET-001,
    PUSH-GET-002, PUSH-LIST-001, PUSH-DEL-001, PUSH-DEL-002."""
    asking = send(a2a, "ask")
    config = {"taskId": asking["id"], "id": "hook", "url": "https://hooks.example.com/a2a"}
    created = a2a.call("CreateTaskPushNotificationConfig", config)
    assert (created["id"], created["url"]) == ("hook", config["url"])
    send(a2a, "ask", message={"taskId": asking["id"]})  # an update: still waiting for input
    kept = a2a.call("GetTaskPushNotificationConfig", {"taskId": asking["id"], "id": "hook"})
    assert kept["url"] == config["url"]
    listed = a2a.call("ListTaskPushNotificationConfigs", {"taskId": asking["id"]})
    assert [c["id"] for c in listed["configs"]] == ["hook"]
    missing = {"taskId": asking["id"], "id": "no-such-config"}
    assert refused(a2a, "GetTaskPushNotificationConfig", missing) == "TASK_NOT_FOUND"
    for _ in range(2):
        a2a.call("DeleteTaskPushNotificationConfig", {"taskId": asking["id"], "id": "hook"})
    assert (
        a2a.call("ListTaskPushNotificationConfigs", {"taskId": asking["id"]}).get("configs", [])
        == []
    )


# -- The data model on the wire (spec §4, §5.5) ----------------------------------------------


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            if key not in ("metadata", "data"):  # free-form JSON of the caller or a skill
                yield from _keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _keys(inner)


def test_dm_a_task_in_the_json_mapping(a2a: Binding) -> None:
    """DM-TASK-001, DM-TASK-002, DM-MSG-001, DM-MSG-002, DM-PART-001, DM-ART-001,
    DM-STATUS-001, DM-SERIAL-001, DM-SERIAL-002, DM-SERIAL-003, DM-SERIAL-004."""
    task = send(a2a, "the data model", message={"messageId": f"tck-artifact-data-{uuid.uuid4()}"})
    assert task["id"] and task["contextId"] and task["status"]["state"].startswith("TASK_STATE_")
    assert TIMESTAMP.fullmatch(task["status"]["timestamp"])
    messages = task["history"]
    assert messages and all(m["messageId"] and m["parts"] for m in messages)
    assert {m["role"] for m in messages} <= {"ROLE_USER", "ROLE_AGENT"}
    artifacts = task["artifacts"]
    assert artifacts and all(a["artifactId"] and a["parts"] for a in artifacts)
    parts = [p for m in messages for p in m["parts"]] + [p for a in artifacts for p in a["parts"]]
    assert any("data" in p for p in parts)
    for part in parts:
        assert len({"text", "raw", "url", "data"} & part.keys()) == 1, part
    assert all("_" not in key for key in _keys(task)), "snake_case key in the JSON mapping"
    assert "kind" not in task


# -- Versions, bindings, the card (spec §3.6, §5, §8) ----------------------------------------


def test_ver_patch_versions_are_ignored_and_others_refused(sut: LiveServer) -> None:
    """VER-CLIENT-002, VER-SERVER-001, VER-SERVER-002, VER-SERVER-003, JSONRPC-SVC-002."""

    def get(version: str | None, method: str = "GetTask") -> dict[str, Any]:
        headers = {} if version is None else {"A2A-Version": version}
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": "no-such"}}
        answer: dict[str, Any] = httpx.post(sut.url + "/", json=body, headers=headers).json()
        return answer

    for version in ("1.0", "1.0.0", "1.0.1"):
        assert get(version)["error"]["code"] == -32001  # 1.0's GetTask: task not found
    assert get("2.0")["error"]["code"] == -32009
    assert get(None)["error"]["code"] == -32601  # empty means 0.3, which has no GetTask
    assert get(None, "tasks/get")["error"]["code"] == -32001  # 0.3's own method


def test_bind_equiv_both_bindings_answer_alike(sut: LiveServer) -> None:
    """BIND-EQUIV-001, BIND-EQUIV-002, BIND-EQUIV-003: a task made over one binding reads the
    same over the other, and errors carry the same reasons."""
    with JsonRpc(sut.url) as rpc, HttpJson(sut.url + "/json") as rest:
        task = send(rpc, "over JSON-RPC")
        assert rest.call("GetTask", {"id": task["id"]}) == rpc.call("GetTask", {"id": task["id"]})
        other = send(rest, "over HTTP+JSON")
        assert rpc.call("GetTask", {"id": other["id"]}) == rest.call("GetTask", {"id": other["id"]})
        for method, params in (
            ("GetTask", {"id": "no-such"}),
            ("CancelTask", {"id": task["id"]}),
            ("ListTasks", {"pageSize": 1000}),
            ("SendMessage", {"message": message("more", taskId=task["id"])}),
        ):
            assert refused(rpc, method, params) == refused(rest, method, params), method


def test_card_declares_its_interfaces_and_required_fields(sut: LiveServer) -> None:
    """CARD-DISC-001, CARD-PROTO-001, CARD-PROTO-002, CARD-STRUCT-001, BIND-FIELD-001,
    CORE-CAP-001, CORE-CAP-002, CORE-CAP-004 (no extension is required, so none is refused)."""
    response = httpx.get(sut.url + "/.well-known/agent-card.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    card = response.json()
    for field in ("name", "description", "version", "capabilities", "skills"):
        assert card[field], field
    assert card["defaultInputModes"] and card["defaultOutputModes"]
    for skill in card["skills"]:
        assert skill["id"] and skill["name"] and skill["description"] and skill["tags"]
    interfaces = card["supportedInterfaces"]
    assert {(i["protocolBinding"], i["protocolVersion"]) for i in interfaces} >= {
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
    }
    assert all(i["url"].startswith(sut.url) for i in interfaces)
    assert card["capabilities"]["streaming"] and card["capabilities"]["pushNotifications"]
    assert not [e for e in card["capabilities"].get("extensions", []) if e.get("required")]
    assert "signatures" not in card  # CARD-SIGN-*: this card is not signed

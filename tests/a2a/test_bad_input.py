"""Malformed, oversized and hostile request bodies: a clear JSON-RPC error, and nothing stored.

Every bad request here would change a task if the server acted on it: most are a valid
`tasks/cancel` (or `message/send`) of a paused task, broken in one way. Around each one the
stored state is recorded twice, through JSON-RPC (`tasks/get`) and through SQL on the server's
database, and must come out identical.
"""

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.live import LiveServer
from tests.support.rpc import call, text_message

JSON = {"content-type": "application/json"}
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
TASK_NOT_FOUND = -32001
PUSH_SINK = "http://127.0.0.1:9/bad-input"  # the discard port: nothing is ever delivered


@dataclass(frozen=True)
class Tasks:
    done: str  # completed, with a push notification config
    paused: str  # input-required: a cancel or a reply would change it


@pytest.fixture(scope="module")
def client(sut: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sut.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def tasks(client: httpx.Client) -> Tasks:
    done = call(client, "message/send", {"message": text_message("hello, bad input")})["result"]
    assert done["status"]["state"] == "completed", done
    config = {"url": PUSH_SINK, "token": "bad-input-token", "id": "bad-input"}
    saved = call(
        client,
        "tasks/pushNotificationConfig/set",
        {"taskId": done["id"], "pushNotificationConfig": config},
    )
    assert "result" in saved, saved
    paused = call(client, "message/send", {"message": text_message("ask")})["result"]
    assert paused["status"]["state"] == "input-required", paused
    return Tasks(done["id"], paused["id"])


# -- the stored state ------------------------------------------------------------------------


def _sql_state(database_url: str, tasks: Tasks) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        conn = await asyncpg.connect(database_url)
        try:
            deadline = time.monotonic() + 30
            # Tasks of other tests may still be running: wait until every task has settled.
            while await conn.fetchval(
                "SELECT count(*) FROM tasks WHERE state IN ('submitted', 'working')"
            ):
                assert time.monotonic() < deadline, "the server's tasks did not settle"
                await asyncio.sleep(0.05)
            ids = [tasks.done, tasks.paused]
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM tasks) AS tasks,"
                " (SELECT count(*) FROM task_events) AS events,"
                " (SELECT count(*) FROM contexts) AS contexts,"
                " (SELECT count(*) FROM push_configs) AS push_configs"
            )
            assert counts is not None
            return {
                "counts": dict(counts),
                # Any write to any task moves its last_seq or updated_at.
                "all_tasks": await conn.fetchval(
                    "SELECT md5(string_agg(tenant || '/' || id || '/' || last_seq || '/'"
                    " || updated_at::text, ',' ORDER BY tenant, id)) FROM tasks"
                ),
                "known_tasks": [
                    dict(r)
                    for r in await conn.fetch(
                        "SELECT tenant, id, context_id, state, last_seq, task::text AS task,"
                        " created_at, updated_at FROM tasks WHERE id = ANY($1) ORDER BY id",
                        ids,
                    )
                ],
                "known_events": [
                    tuple(r)
                    for r in await conn.fetch(
                        "SELECT task_id, seq, kind, final, event::text FROM task_events"
                        " WHERE task_id = ANY($1) ORDER BY task_id, seq",
                        ids,
                    )
                ],
                "known_push_configs": [
                    tuple(r)
                    for r in await conn.fetch(
                        "SELECT task_id, config_id, config::text FROM push_configs"
                        " WHERE task_id = ANY($1) ORDER BY task_id, config_id",
                        ids,
                    )
                ],
            }
        finally:
            await conn.close()

    return asyncio.run(read())


def snapshot(sut: LiveServer, tasks: Tasks) -> dict[str, Any]:
    assert sut.settings.database_url is not None
    state = _sql_state(sut.settings.database_url, tasks)
    with httpx.Client(base_url=sut.url, timeout=60) as fresh:  # not the connection under test
        for name, task_id in (("done", tasks.done), ("paused", tasks.paused)):
            reply = call(fresh, "tasks/get", {"id": task_id})
            assert "result" in reply, reply
            state[f"rpc_{name}"] = reply["result"]
        push = call(fresh, "tasks/pushNotificationConfig/list", {"id": tasks.done})
        state["rpc_push_configs"] = push["result"]
    assert len(state["known_tasks"]) == 2 and state["known_push_configs"], state
    return state


@contextmanager
def unchanged(sut: LiveServer, tasks: Tasks) -> Iterator[None]:
    """The stored state is the same after the block as before it."""
    before = snapshot(sut, tasks)
    yield
    after = snapshot(sut, tasks)
    changed = sorted(key for key in before if before[key] != after[key])
    assert not changed, f"the stored state changed: {changed}"


# -- requests and answers --------------------------------------------------------------------


def request(method: str, params: Any, rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def cancel_body(tasks: Tasks, rid: Any = "cancel-1") -> bytes:
    """A valid request that would cancel the paused task: what the bad bodies are made from."""
    return orjson.dumps(request("tasks/cancel", {"id": tasks.paused}, rid))


def post(
    client: httpx.Client, content: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return client.post("/", content=content, headers=JSON if headers is None else headers)


def rpc_error(response: httpx.Response, code: int, rid: Any = None, status: int = 200) -> str:
    """Assert `response` is exactly one JSON-RPC error with `code` and `rid`; its message."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    body = response.json()
    assert isinstance(body, dict) and body.get("jsonrpc") == "2.0", body
    assert "id" in body and body["id"] == rid and type(body["id"]) is type(rid), body
    assert "result" not in body, body
    error = body["error"]
    assert type(error["code"]) is int and isinstance(error["message"], str), error
    assert error["code"] == code, error
    assert error["message"].strip(), error
    return str(error["message"])


def assert_alive(client: httpx.Client, tasks: Tasks) -> None:
    """The server, and this client's connection to it, still answer a valid request."""
    reply = client.post("/", json=request("tasks/get", {"id": tasks.done}, "alive"))
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["id"] == tasks.done


# -- not UTF-8, not JSON, not a request object -----------------------------------------------


def _not_utf8(tasks: Tasks) -> dict[str, bytes]:
    valid = cancel_body(tasks)
    return {
        "latin-1 byte in a string": valid.replace(b'"cancel-1"', b'"caf\xe9"'),
        "lone 0xff": valid[:-1] + b"\xff}",
        "truncated sequence": valid.replace(b'"cancel-1"', b'"\xe2\x82"'),
        "overlong slash": valid.replace(b'"cancel-1"', b'"\xc0\xaf"'),
        "encoded surrogate": valid.replace(b'"cancel-1"', b'"\xed\xa0\x80"'),
        "UTF-16 with BOM": valid.decode().encode("utf-16"),
        "UTF-32 with BOM": valid.decode().encode("utf-32"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "latin-1 byte in a string",
        "lone 0xff",
        "truncated sequence",
        "overlong slash",
        "encoded surrogate",
        "UTF-16 with BOM",
        "UTF-32 with BOM",
    ],
)
def test_a_body_that_is_not_utf8_is_a_parse_error(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, case: str
) -> None:
    body = _not_utf8(tasks)[case]
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    with unchanged(sut, tasks):
        rpc_error(post(client, body), PARSE_ERROR, rid=None)


INVALID_JSON = [
    b"{",
    b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": "x"},}',
    b"{'jsonrpc': '2.0', 'id': 1, 'method': 'tasks/cancel'}",
    b'{"jsonrpc": "2.0" "id": 1}',
    b"NaN",
    b"[1, 2",
    b'{"id": 1}{"id": 2}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"} trailing',
    b'{"jsonrpc": "2.0", "id": 01, "method": "tasks/get"}',
    b'{"text": "a raw\ncontrol character"}',
    b"\x00",
    b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark, which JSON forbids
]


@pytest.mark.parametrize("body", INVALID_JSON, ids=range(len(INVALID_JSON)))
def test_invalid_json_is_a_parse_error(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, body: bytes
) -> None:
    with unchanged(sut, tasks):
        rpc_error(post(client, body), PARSE_ERROR, rid=None)


def test_invalid_json_that_would_cancel_is_a_parse_error(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    with unchanged(sut, tasks):
        rpc_error(post(client, cancel_body(tasks)[:-1]), PARSE_ERROR, rid=None)
        rpc_error(post(client, cancel_body(tasks) + b"}"), PARSE_ERROR, rid=None)


@pytest.mark.parametrize("body", [b"", b" ", b"\r\n\t "])
def test_an_empty_body_is_a_parse_error(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, body: bytes
) -> None:
    with unchanged(sut, tasks):
        rpc_error(post(client, body), PARSE_ERROR, rid=None)


def test_a_batch_is_an_invalid_request_and_none_of_it_runs(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    cancel = orjson.loads(cancel_body(tasks))
    reply = request("message/send", {"message": text_message("ok", taskId=tasks.paused)}, 2)
    new = request("message/send", {"message": text_message("a new task")}, 3)
    with unchanged(sut, tasks):
        batches: list[list[Any]] = [[cancel], [reply, new], [cancel, reply, new], [], [[]], [1]]
        for batch in batches:
            message = rpc_error(post(client, orjson.dumps(batch)), INVALID_REQUEST, rid=None)
            assert "batch" in message


@pytest.mark.parametrize("body", [b"null", b"1", b"-0.5", b'"tasks/cancel"', b"true", b"false"])
def test_a_json_value_that_is_not_an_object_is_an_invalid_request(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, body: bytes
) -> None:
    with unchanged(sut, tasks):
        rpc_error(post(client, body), INVALID_REQUEST, rid=None)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)
NOT_REQUESTS = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    # JSON objects go inside an array (a batch), so that none is a valid request by chance.
    JSON_VALUES.map(lambda v: orjson.dumps([v] if isinstance(v, dict) else v)),
)


def test_arbitrary_bytes_get_a_json_rpc_error_and_change_nothing(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    """Bytes that are not a request object: never a 5xx, always one JSON-RPC error, id null."""

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(body=NOT_REQUESTS)
    def answered_with_an_error(body: bytes) -> None:
        response = post(client, body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["jsonrpc"] == "2.0" and answer["id"] is None and "result" not in answer
        assert answer["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST), answer

    with unchanged(sut, tasks):
        answered_with_an_error()


# -- size ------------------------------------------------------------------------------------


def padded(body: bytes, size: int) -> bytes:
    """`body`, a JSON object, grown to exactly `size` bytes with whitespace (still valid JSON)."""
    assert len(body) <= size
    return body[:-1] + b" " * (size - len(body)) + b"}"


def test_a_body_over_the_limit_with_content_length_is_413(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    limit = sut.settings.max_body_bytes
    body = padded(cancel_body(tasks), limit + 1)
    assert orjson.loads(body)["method"] == "tasks/cancel"  # a valid request, only too large
    with unchanged(sut, tasks):
        response = post(client, body)
        assert response.request.headers["content-length"] == str(limit + 1)
        rpc_error(response, INVALID_REQUEST, rid=None, status=413)
        # Far over the limit: refused on the declared length alone.
        response = post(client, padded(cancel_body(tasks), 8 * limit))
        rpc_error(response, INVALID_REQUEST, rid=None, status=413)
    assert_alive(client, tasks)


def test_a_chunked_body_over_the_limit_is_413(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    limit = sut.settings.max_body_bytes
    body = padded(cancel_body(tasks), limit + 1)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    with unchanged(sut, tasks):
        response = post(client, chunks())
        assert response.request.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in response.request.headers
        rpc_error(response, INVALID_REQUEST, rid=None, status=413)
    assert_alive(client, tasks)


def test_a_body_at_the_limit_is_read(sut: LiveServer, client: httpx.Client, tasks: Tasks) -> None:
    limit = sut.settings.max_body_bytes
    get = orjson.dumps(request("tasks/get", {"id": tasks.done}, "at-limit"))
    before = snapshot(sut, tasks)
    for body in (padded(get, limit), iter([padded(get, limit)])):  # with a length, and chunked
        response = post(client, body)
        assert response.status_code == 200, response.text[:300]
        assert response.json() == {"jsonrpc": "2.0", "id": "at-limit", "result": before["rpc_done"]}
    assert snapshot(sut, tasks) == before


# -- depth -----------------------------------------------------------------------------------


def nested(depth: int) -> Any:
    """A JSON value `depth` levels deep: objects and arrays, alternating."""
    value: Any = "bottom"
    for level in range(depth):
        value = {"a": value} if level % 2 else [value]
    return value


def get_with_metadata(task_id: str, total_depth: int, rid: Any) -> bytes:
    """`tasks/get` whose request nests `total_depth` levels deep, in `params.metadata`."""
    # request object (1) > params (2) > metadata (3) > ...
    metadata = {"deep": nested(total_depth - 3)}
    return orjson.dumps(request("tasks/get", {"id": task_id, "metadata": metadata}, rid))


def test_nesting_beyond_max_json_depth_is_refused(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    limit = sut.settings.max_json_depth
    with unchanged(sut, tasks):
        body = get_with_metadata(tasks.done, limit + 1, "deep")
        message = rpc_error(post(client, body), INVALID_REQUEST, rid="deep")
        assert str(limit) in message
        deep_cancel = request("tasks/cancel", {"id": tasks.paused, "metadata": nested(limit)}, 9)
        rpc_error(post(client, orjson.dumps(deep_cancel)), INVALID_REQUEST, rid=9)


def test_nesting_at_max_json_depth_is_accepted(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    limit = sut.settings.max_json_depth
    reply = post(client, get_with_metadata(tasks.done, limit, "at-depth")).json()
    assert reply["id"] == "at-depth" and reply["result"]["id"] == tasks.done, reply


def _absurd(tasks: Tasks) -> dict[str, bytes]:
    n = 100_000
    head = cancel_body(tasks)[:-1] + b', "metadata": {"x": '
    return {
        "arrays": b"[" * n + b"]" * n,
        "objects": b'{"a":' * n + b"1" + b"}" * n,
        "unclosed": b"[" * n,
        "in a cancel": head + b"[" * n + b"]" * n + b"}}",
        "in a cancel, unclosed": head + b'{"a":[' * n,
    }


@pytest.mark.parametrize(
    "case", ["arrays", "objects", "unclosed", "in a cancel", "in a cancel, unclosed"]
)
def test_absurdly_deep_nesting_is_refused_without_harm(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, case: str
) -> None:
    body = _absurd(tasks)[case]
    assert len(body) <= sut.settings.max_body_bytes  # the size limit is not what refuses it
    with unchanged(sut, tasks):
        response = post(client, body)
        assert response.status_code == 200, response.text[:300]
        answer = response.json()
        assert answer["jsonrpc"] == "2.0" and answer["id"] is None and "result" not in answer
        assert answer["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST), answer
    assert_alive(client, tasks)


# -- content type ----------------------------------------------------------------------------

WRONG_CONTENT_TYPES: list[str | None] = [
    None,
    "",
    "text/plain",
    "text/json",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "application/jsonx",
    "application/json-patch+json",
    "application/jsonrequest",
    "application",
    "json",
    "*/*",
]


@pytest.mark.parametrize("content_type", WRONG_CONTENT_TYPES)
def test_a_wrong_or_missing_content_type_is_415(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    with unchanged(sut, tasks):
        response = post(client, cancel_body(tasks), headers)
        assert response.request.headers.get("content-type") == content_type
        rpc_error(response, INVALID_REQUEST, rid=None, status=415)


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/json ;x=y"]
)
def test_json_content_types_with_parameters_are_accepted(
    client: httpx.Client, tasks: Tasks, content_type: str
) -> None:
    body = orjson.dumps(request("tasks/get", {"id": tasks.done}, "ct"))
    reply = post(client, body, {"content-type": content_type}).json()
    assert reply["result"]["id"] == tasks.done, reply


# -- large strings, NUL characters, headers --------------------------------------------------


def _huge_strings(tasks: Tasks, size: int) -> list[tuple[bytes, int, Any]]:
    """Requests with one string of about `size` bytes, the error each must get, and its id."""
    big = "é" * (size // 2)  # two bytes each in UTF-8
    no_message_id = {"role": "user", "kind": "message", "parts": [{"kind": "text", "text": big}]}
    reply = {**no_message_id, "taskId": tasks.paused}
    return [
        (orjson.dumps(request("tasks/get", {"id": big}, "get")), TASK_NOT_FOUND, "get"),
        (orjson.dumps(request("tasks/cancel", {"id": big}, 4)), TASK_NOT_FOUND, 4),
        (orjson.dumps(request(big, {"id": tasks.paused}, "m")), METHOD_NOT_FOUND, "m"),
        (orjson.dumps(request("message/send", {"message": reply}, 5)), INVALID_PARAMS, 5),
        (
            orjson.dumps(request("message/send", {"message": {**no_message_id, "role": "x"}}, 6)),
            INVALID_PARAMS,
            6,
        ),
        (
            orjson.dumps(request("tasks/cancel", {"id": tasks.paused, "metadata": [big]}, 7)),
            INVALID_PARAMS,
            7,
        ),
    ]


def test_huge_strings_within_the_limit_get_a_clear_error(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    size = sut.settings.max_body_bytes - 1000
    with unchanged(sut, tasks):
        for body, code, rid in _huge_strings(tasks, size):
            assert size // 2 < len(body) <= sut.settings.max_body_bytes
            rpc_error(post(client, body), code, rid=rid)


def test_a_huge_request_id_is_echoed(sut: LiveServer, client: httpx.Client, tasks: Tasks) -> None:
    big = "i" * (sut.settings.max_body_bytes - 200)
    with unchanged(sut, tasks):
        response = post(client, orjson.dumps(request("tasks/get", {"id": "missing"}, big)))
        rpc_error(response, TASK_NOT_FOUND, rid=big)


@pytest.mark.parametrize(
    "params",
    [
        {"message": text_message("ok\u0000")},
        {"message": text_message("a reply\x00", taskId="PAUSED")},
        {"message": text_message("ok"), "metadata": {"k\x00": 1}},
        {"message": {**text_message("ok"), "contextId": "c\x00"}},
    ],
    ids=["text", "reply to a paused task", "metadata key", "contextId"],
)
def test_nul_characters_in_params_are_invalid_params(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, params: dict[str, Any]
) -> None:
    """PostgreSQL cannot store U+0000: the request is refused, not failed half-way (-32603)."""
    body = orjson.dumps(request("message/send", params, "nul")).replace(
        b'"PAUSED"', orjson.dumps(tasks.paused)
    )
    assert b"\\u0000" in body
    with unchanged(sut, tasks):
        message = rpc_error(post(client, body), INVALID_PARAMS, rid="nul")
        assert "U+0000" in message


def test_a_nul_character_in_a_push_config_is_invalid_params(
    sut: LiveServer, client: httpx.Client, tasks: Tasks
) -> None:
    config = {"url": PUSH_SINK, "id": "bad\x00input"}
    body = request(
        "tasks/pushNotificationConfig/set", {"taskId": tasks.done, "pushNotificationConfig": config}
    )
    with unchanged(sut, tasks):
        rpc_error(post(client, orjson.dumps(body)), INVALID_PARAMS, rid=1)


BAD_LAST_EVENT_IDS = {
    "letters": b"abc",
    "negative": b"-1",
    "fraction": b"1.5",
    "hex": b"0x10",
    "empty": b"",
    "superscript two": b"\xb2",  # "²" in Latin-1, as headers are read: "²".isdigit() is true
    "superscripts": b"\xb9\xb2",
    "2^63": str(2**63).encode(),
    "huge": b"9" * 40,
}


@pytest.mark.parametrize("name", list(BAD_LAST_EVENT_IDS))
def test_a_malformed_last_event_id_is_invalid_params(
    sut: LiveServer, client: httpx.Client, tasks: Tasks, name: str
) -> None:
    """`tasks/resubscribe` answers one JSON-RPC error, not a failed (or empty) event stream."""
    body = orjson.dumps(request("tasks/resubscribe", {"id": tasks.done}, "resub"))
    headers = [(b"content-type", b"application/json"), (b"last-event-id", BAD_LAST_EVENT_IDS[name])]
    with unchanged(sut, tasks):
        message = rpc_error(
            client.post("/", content=body, headers=headers), INVALID_PARAMS, "resub"
        )
        assert "Last-Event-ID" in message


def test_a_valid_last_event_id_replays_the_events_after_it(
    client: httpx.Client, tasks: Tasks
) -> None:
    body = orjson.dumps(request("tasks/resubscribe", {"id": tasks.done}, "resub"))
    with client.stream("POST", "/", content=body, headers={**JSON, "last-event-id": "1"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        ids = [int(line[3:]) for line in r.iter_lines() if line.startswith("id:")]
    assert ids and min(ids) == 2, ids

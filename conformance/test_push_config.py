"""Push notification configs: set/get/list/delete (docs/a2a-notes.md §2, §8, §12.9).

Delivery itself is tested elsewhere. The accepted webhook URLs use a host name under the
reserved `.invalid` TLD (RFC 2606): it passes the shape check when set (host names are only
resolved at delivery time, §12.9) and can never receive anything.
"""

from typing import Any
from urllib.parse import urlsplit

import pytest

from conformance.support import Rpc, send_params, state

HOOK = "https://push-receiver.invalid/a2a-hook"


@pytest.fixture
def task_id(rpc: Rpc) -> str:
    """A live task (paused in `input-required`)."""
    task = rpc.send_task("ask")
    assert state(task) == "input-required"
    task_id: str = task["id"]
    return task_id


def _set(rpc: Rpc, task_id: str, config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = rpc.result(
        "tasks/pushNotificationConfig/set", {"taskId": task_id, "pushNotificationConfig": config}
    )
    return result


def _list(rpc: Rpc, task_id: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = rpc.result(
        "tasks/pushNotificationConfig/list", {"id": task_id}, strict_request=False
    )
    return result


# --- 0.2.1 shapes ---------------------------------------------------------------------------


def test_set_returns_the_config_for_the_task(rpc: Rpc, task_id: str) -> None:
    """§2: tasks/pushNotificationConfig/set answers the `TaskPushNotificationConfig`."""
    result = _set(rpc, task_id, {"url": HOOK, "token": "client-token-1"})
    assert result["taskId"] == task_id
    assert result["pushNotificationConfig"]["url"] == HOOK
    assert result["pushNotificationConfig"]["token"] == "client-token-1"


def test_get_returns_the_config_that_was_set(rpc: Rpc, task_id: str) -> None:
    """§2: tasks/pushNotificationConfig/get with 0.2.1's `{id}` answers the config."""
    _set(rpc, task_id, {"url": HOOK, "token": "client-token-2"})
    result = rpc.result("tasks/pushNotificationConfig/get", {"id": task_id})
    assert result["taskId"] == task_id
    assert result["pushNotificationConfig"]["url"] == HOOK
    assert result["pushNotificationConfig"]["token"] == "client-token-2"


def test_set_keeps_the_authentication_schemes(rpc: Rpc, task_id: str) -> None:
    """§2, §8: `authentication.schemes` is kept (the server MAY mask `credentials`)."""
    config = {"url": HOOK, "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}
    _set(rpc, task_id, config)
    result = rpc.result("tasks/pushNotificationConfig/get", {"id": task_id})
    assert result["pushNotificationConfig"]["authentication"]["schemes"] == ["Bearer"]


def test_an_inline_config_on_message_send_is_kept_for_the_task(rpc: Rpc) -> None:
    """§8: a client may set the config inline in `configuration.pushNotificationConfig`."""
    task = rpc.send_task("ask", push_notification_config={"url": HOOK, "token": "inline"})
    result = rpc.result("tasks/pushNotificationConfig/get", {"id": task["id"]})
    assert result["pushNotificationConfig"]["url"] == HOOK
    assert result["pushNotificationConfig"]["token"] == "inline"


# --- 0.2.5 shapes (config ids, list, delete) ------------------------------------------------


def test_configs_with_ids_are_listed(rpc: Rpc, task_id: str) -> None:
    """§8, §12.9: 0.2.5 gives each config an `id`; list answers all of a task's configs."""
    _set(rpc, task_id, {"id": "cfg-a", "url": f"{HOOK}/a"})
    _set(rpc, task_id, {"id": "cfg-b", "url": f"{HOOK}/b"})
    configs = _list(rpc, task_id)
    assert all(config["taskId"] == task_id for config in configs)
    urls = {c["pushNotificationConfig"]["id"]: c["pushNotificationConfig"]["url"] for c in configs}
    assert urls == {"cfg-a": f"{HOOK}/a", "cfg-b": f"{HOOK}/b"}


def test_get_by_config_id_returns_that_config(rpc: Rpc, task_id: str) -> None:
    """§8: get takes `{id, pushNotificationConfigId?}` (0.2.5)."""
    _set(rpc, task_id, {"id": "cfg-a", "url": f"{HOOK}/a"})
    _set(rpc, task_id, {"id": "cfg-b", "url": f"{HOOK}/b"})
    result = rpc.result(
        "tasks/pushNotificationConfig/get",
        {"id": task_id, "pushNotificationConfigId": "cfg-b"},
    )
    assert result["pushNotificationConfig"]["id"] == "cfg-b"
    assert result["pushNotificationConfig"]["url"] == f"{HOOK}/b"


def test_set_with_an_existing_config_id_replaces_that_config(rpc: Rpc, task_id: str) -> None:
    """§8: a config id names one config; setting it again updates it."""
    _set(rpc, task_id, {"id": "cfg-a", "url": f"{HOOK}/old"})
    _set(rpc, task_id, {"id": "cfg-a", "url": f"{HOOK}/new"})
    configs = _list(rpc, task_id)
    assert [c["pushNotificationConfig"]["url"] for c in configs] == [f"{HOOK}/new"]


def test_delete_removes_one_config_and_answers_null(rpc: Rpc, task_id: str) -> None:
    """§8: delete takes `{id, pushNotificationConfigId}` and answers `null`."""
    _set(rpc, task_id, {"id": "cfg-a", "url": f"{HOOK}/a"})
    _set(rpc, task_id, {"id": "cfg-b", "url": f"{HOOK}/b"})
    result = rpc.result(
        "tasks/pushNotificationConfig/delete",
        {"id": task_id, "pushNotificationConfigId": "cfg-a"},
        strict_request=False,
    )
    assert result is None
    assert [c["pushNotificationConfig"]["id"] for c in _list(rpc, task_id)] == ["cfg-b"]


@pytest.mark.parametrize("existing", [True, False], ids=["deleted-twice", "never-set"])
def test_delete_of_a_config_id_the_task_does_not_have_succeeds(
    rpc: Rpc, task_id: str, existing: bool
) -> None:
    """§8: deletes are idempotent: deleting a config id the task has not (or no longer) got
    answers `null`, like the first delete, and leaves the task's other configs."""
    _set(rpc, task_id, {"id": "cfg-kept", "url": f"{HOOK}/kept"})
    if existing:
        _set(rpc, task_id, {"id": "cfg-gone", "url": f"{HOOK}/gone"})
    params = {"id": task_id, "pushNotificationConfigId": "cfg-gone"}
    for _ in range(2 if existing else 1):
        result = rpc.result("tasks/pushNotificationConfig/delete", params, strict_request=False)
        assert result is None
    assert [c["pushNotificationConfig"]["id"] for c in _list(rpc, task_id)] == ["cfg-kept"]


def test_list_of_a_task_without_configs_is_empty(rpc: Rpc, task_id: str) -> None:
    """§8: list answers an array, empty when the task has no config."""
    assert _list(rpc, task_id) == []


# --- errors ---------------------------------------------------------------------------------

UNKNOWN = "no-such-task-for-push"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        (
            "tasks/pushNotificationConfig/set",
            {"taskId": UNKNOWN, "pushNotificationConfig": {"url": HOOK}},
        ),
        ("tasks/pushNotificationConfig/get", {"id": UNKNOWN}),
        ("tasks/pushNotificationConfig/list", {"id": UNKNOWN}),
        ("tasks/pushNotificationConfig/delete", {"id": UNKNOWN, "pushNotificationConfigId": "x"}),
    ],
    ids=["set", "get", "list", "delete"],
)
def test_push_config_of_an_unknown_task_is_task_not_found(
    rpc: Rpc, method: str, params: dict[str, Any]
) -> None:
    """§2, §12.9: an unknown task → -32001."""
    rpc.error(method, params, code=-32001)


PRIVATE_HOOKS = [
    "http://10.0.0.1/hook",
    "https://172.16.5.4/hook",
    "http://192.168.1.20:8080/hook",
    "http://127.0.0.1/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]/hook",
    "http://[fd00::1]/hook",
    "http://0.0.0.0/hook",
]


def _says_why(error: dict[str, Any], url: str) -> bool:
    """The error names the address it refused, or says what is wrong with it."""
    text = f"{error['message']} {error.get('data', '')}".lower()
    address = urlsplit(url).hostname or ""
    reasons = ("private", "loopback", "link-local", "reserved", "not allowed", "internal")
    return address in text or any(reason in text for reason in reasons)


@pytest.mark.parametrize("url", PRIVATE_HOOKS)
def test_a_webhook_on_a_literal_private_address_is_refused(
    rpc: Rpc, task_id: str, url: str
) -> None:
    """§8, §12.9: SSRF: a literal private, loopback or link-local address is refused when
    it is set → -32602 with a message that says why (nothing is allow-listed by default)."""
    error = rpc.error(
        "tasks/pushNotificationConfig/set",
        {"taskId": task_id, "pushNotificationConfig": {"url": url}},
        code=-32602,
    )
    assert _says_why(error, url), error


def test_an_inline_webhook_on_a_private_address_is_refused(rpc: Rpc) -> None:
    """§12.9: the same check applies to a config set inline in message/send."""
    params = send_params("hello", push_notification_config={"url": "http://10.0.0.1/hook"})
    error = rpc.error("message/send", params, code=-32602)
    assert _says_why(error, "http://10.0.0.1/hook"), error


@pytest.mark.parametrize("url", ["not a url", "", "/relative/hook", "mailto:someone@example.com"])
def test_a_webhook_url_of_the_wrong_shape_is_refused(rpc: Rpc, task_id: str, url: str) -> None:
    """§8, §12.9: the webhook is an absolute http(s) URL, checked for shape when set."""
    rpc.error(
        "tasks/pushNotificationConfig/set",
        {"taskId": task_id, "pushNotificationConfig": {"url": url}},
        code=-32602,
    )


def test_a_refused_webhook_is_not_stored(rpc: Rpc, task_id: str) -> None:
    """§12.9: a refused config leaves the task's configs as they were."""
    rpc.error(
        "tasks/pushNotificationConfig/set",
        {"taskId": task_id, "pushNotificationConfig": {"url": "http://10.0.0.1/hook"}},
        code=-32602,
    )
    assert _list(rpc, task_id) == []


def test_config_ids_are_scoped_to_their_task(rpc: Rpc, task_id: str) -> None:
    """§8: a config id names a config of one task; another task's list does not show it."""
    other = rpc.send_task("ask")["id"]
    _set(rpc, task_id, {"id": "shared-name", "url": f"{HOOK}/one"})
    _set(rpc, other, {"id": "shared-name", "url": f"{HOOK}/two"})
    assert [c["pushNotificationConfig"]["url"] for c in _list(rpc, task_id)] == [f"{HOOK}/one"]
    assert [c["pushNotificationConfig"]["url"] for c in _list(rpc, other)] == [f"{HOOK}/two"]

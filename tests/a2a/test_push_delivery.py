"""Push notifications through the public API: a webhook set with a message gets the task when
it pauses and when it ends, signed with a key the agent publishes at /.well-known/jwks.json."""

import time
from collections.abc import Iterator

import httpx
import jwt
import pytest

from tests.support.live import LiveServer
from tests.support.push import Webhook, served_webhook
from tests.support.rpc import call, text_message


@pytest.fixture
def webhook() -> Iterator[tuple[Webhook, str]]:
    with served_webhook() as served:
        yield served


def test_webhook_gets_the_paused_and_the_final_task_signed(
    sut: LiveServer, webhook: tuple[Webhook, str]
) -> None:
    hook, url = webhook
    with httpx.Client(base_url=sut.url, timeout=30) as client:
        config = {"pushNotificationConfig": {"url": url, "token": "client-secret"}}
        asked = call(
            client, "message/send", {"message": text_message("ask"), "configuration": config}
        )
        task = asked["result"]
        reply = text_message("done", taskId=task["id"], contextId=task["contextId"])
        call(client, "message/send", {"message": reply})
        jwks = client.get("/.well-known/jwks.json").json()

    (first_headers, first), (second_headers, second) = hook.wait_for(2)
    assert [first["status"]["state"], second["status"]["state"]] == ["input-required", "completed"]
    assert first["id"] == second["id"] == task["id"]
    for headers in (first_headers, second_headers):
        assert headers["x-a2a-notification-token"] == "client-secret"
        token = headers["authorization"].removeprefix("Bearer ")
        kid = jwt.get_unverified_header(token)["kid"]
        key = next(k for k in jwks["keys"] if k["kid"] == kid)
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["ES256"], audience=url)
        assert claims["taskId"] == task["id"]


def test_a_config_set_later_is_used_and_can_be_deleted(
    sut: LiveServer, webhook: tuple[Webhook, str]
) -> None:
    hook, url = webhook
    with httpx.Client(base_url=sut.url, timeout=30) as client:
        task = call(client, "message/send", {"message": text_message("ask")})["result"]
        for config_id in ("keep", "drop"):
            setting = {
                "taskId": task["id"],
                "pushNotificationConfig": {"url": url, "id": config_id},
            }
            saved = call(client, "tasks/pushNotificationConfig/set", setting)["result"]
            assert saved["pushNotificationConfig"]["id"] == config_id
        deleted = call(
            client,
            "tasks/pushNotificationConfig/delete",
            {"id": task["id"], "pushNotificationConfigId": "drop"},
        )
        assert deleted["result"] is None
        listed = call(client, "tasks/pushNotificationConfig/list", {"id": task["id"]})["result"]
        assert [c["pushNotificationConfig"]["id"] for c in listed] == ["keep"]
        reply = text_message("go on", taskId=task["id"])
        call(client, "message/send", {"message": reply})
    ((_, body),) = hook.wait_for(1)
    time.sleep(0.3)  # a second, deleted config would have been delivered by now
    assert len(hook.received) == 1
    assert body["status"]["state"] == "completed"

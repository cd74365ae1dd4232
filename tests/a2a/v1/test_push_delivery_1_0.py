"""Push notifications for configs set over A2A 1.0 (spec §4.3.3): the webhook gets the 1.0
StreamResponse, with the authentication the client configured (scheme and credentials) or,
without one, our signed JWT; a 0.2.1 config on the same task still gets the 0.2.1 Task."""

import uuid
from collections.abc import Iterator

import httpx
import jwt
import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)

from tests.support.live import LiveServer
from tests.support.push import Webhook, served_webhook
from tests.support.rpc import call


@pytest.fixture
def webhook() -> Iterator[tuple[Webhook, str]]:
    with served_webhook() as served:
        yield served


def send(
    text: str, *, task: Task | None = None, push: TaskPushNotificationConfig | None = None
) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    config = SendMessageConfiguration()
    if push is not None:
        config.task_push_notification_config.CopyFrom(push)
    return SendMessageRequest(message=message, configuration=config)


async def sent(client: Client, request: SendMessageRequest) -> Task:
    (response,) = [r async for r in client.send_message(request)]
    return response.task


async def test_a_1_0_config_gets_the_stream_response_with_its_scheme_and_credentials(
    client: Client, sut: LiveServer, webhook: tuple[Webhook, str]
) -> None:
    hook, url = webhook
    task = await sent(client, send("ask"))
    auth = AuthenticationInfo(scheme="Basic", credentials="dXNlcjpwYXNz")
    await client.create_task_push_notification_config(
        TaskPushNotificationConfig(
            task_id=task.id, id="v1", url=url, token="client-token", authentication=auth
        )
    )
    with httpx.Client(base_url=sut.url, timeout=30) as rpc:  # a 0.2.1 config beside it
        setting = {"taskId": task.id, "pushNotificationConfig": {"url": url, "id": "v0"}}
        call(rpc, "tasks/pushNotificationConfig/set", setting)
    done = await sent(client, send("the answer", task=task))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED

    received = hook.wait_for(2)
    by_shape = {("task" in body): (headers, body) for headers, body in received}
    headers, body = by_shape[True]  # 1.0: {"task": {...}}, TASK_STATE_*, camelCase
    assert body["task"]["id"] == task.id
    assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert headers["authorization"] == "Basic dXNlcjpwYXNz"
    assert headers["x-a2a-notification-token"] == "client-token"
    headers, body = by_shape[False]  # 0.2.1: the Task itself, signed
    assert (body["kind"], body["status"]["state"]) == ("task", "completed")
    assert headers["authorization"].startswith("Bearer ey")


async def test_a_1_0_config_without_authentication_gets_our_signed_jwt(
    client: Client, sut: LiveServer, webhook: tuple[Webhook, str]
) -> None:
    hook, url = webhook
    push = TaskPushNotificationConfig(url=url)
    task = await sent(client, send("ask", push=push))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    ((headers, body),) = hook.wait_for(1)
    assert body["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    token = headers["authorization"].removeprefix("Bearer ")
    async with httpx.AsyncClient() as http:
        jwks = (await http.get(sut.url + "/.well-known/jwks.json")).json()
    key = next(k for k in jwks["keys"] if k["kid"] == jwt.get_unverified_header(token)["kid"])
    claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["ES256"], audience=url)
    assert claims["taskId"] == task.id


async def test_a_1_0_config_with_a_header_breaking_scheme_is_refused(
    client: Client, webhook: tuple[Webhook, str]
) -> None:
    _, url = webhook
    task = await sent(client, send("ask"))
    auth = AuthenticationInfo(scheme="Basic\r\nX-Injected: 1", credentials="abc")
    with pytest.raises(Exception, match="scheme must not contain CR or LF"):
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=url, authentication=auth)
        )


async def test_a_1_0_config_to_an_address_the_guard_refuses_is_refused(client: Client) -> None:
    task = await sent(client, send("ask"))
    config = TaskPushNotificationConfig(task_id=task.id, url="http://169.254.169.254/latest")
    with pytest.raises(Exception, match="pushNotificationConfig refused"):
        await client.create_task_push_notification_config(config)

"""A2A 1.0 through the official a2a-sdk 1.x client, unmodified, speaking 1.0 natively over
each binding the card offers (docs/a2a-notes.md §13): JSON-RPC at `POST /` and HTTP+JSON
under `/json`, against the conformance skills (conformance/skills.py); and the same tasks
read over 0.2.1."""

import asyncio
import uuid

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from tests.support.live import LiveServer


def request(
    text: str,
    *,
    task_id: str = "",
    context_id: str = "",
    return_immediately: bool = False,
    history_length: int | None = None,
) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    config = SendMessageConfiguration(return_immediately=return_immediately)
    if history_length is not None:
        config.history_length = history_length
    return SendMessageRequest(message=message, configuration=config)


async def collect(client: Client, send: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(send)]


async def test_the_card_offers_1_0_first_and_the_client_speaks_1_0(
    sut: LiveServer, binding: str
) -> None:
    async with httpx.AsyncClient() as http:
        card = (await http.get(sut.url + "/.well-known/agent-card.json")).json()
    versions = [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]]
    assert versions == [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]
    assert card["capabilities"]["extendedAgentCard"] is False
    assert card["protocolVersion"] == "0.3.0"  # 0.3 clients read the same document
    # The 1.0 method answers only with A2A-Version 1.0: the client sent it.
    async with await create_client(
        sut.url, client_config=ClientConfig(supported_protocol_bindings=[binding])
    ) as c:
        responses = await collect(c, request("who speaks?"))
    assert responses[0].HasField("task")  # it streams: the task, then its updates
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_send_returns_the_completed_task(client: Client) -> None:
    (response,) = await collect(client, request("hello in 1.0"))
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "hello in 1.0" in [p.text for p in task.artifacts[0].parts]
    assert task.history[0].role == Role.ROLE_USER
    assert task.status.timestamp.seconds > 0


async def test_return_immediately_answers_before_the_task_ends(client: Client) -> None:
    (response,) = await collect(client, request("task 2 300", return_immediately=True))
    assert response.task.status.state in (
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
    )
    task = await client.get_task(GetTaskRequest(id=response.task.id, history_length=0))
    assert task.id == response.task.id
    assert len(task.history) == 0


async def test_stream_sends_task_updates_and_the_final_status(streaming: Client) -> None:
    responses = await collect(streaming, request("task 3 20"))
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds[0] == "task"
    assert "artifact_update" in kinds
    assert kinds.count("status_update") >= 4
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_input_required_then_the_follow_up_completes(client: Client) -> None:
    (first,) = await collect(client, request("ask"))
    asked = first.task
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    (second,) = await collect(
        client, request("forty-two", task_id=asked.id, context_id=asked.context_id)
    )
    assert second.task.id == asked.id
    assert second.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "you said: forty-two" in [p.text for p in second.task.artifacts[0].parts]


async def test_a_message_to_a_final_task_is_unsupported(client: Client) -> None:
    (done,) = await collect(client, request("over"))
    with pytest.raises(UnsupportedOperationError):
        await collect(client, request("more", task_id=done.task.id))


async def test_unknown_tasks_are_not_found(client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="no-such-task"))
    with pytest.raises(TaskNotFoundError):
        await collect(client, request("to nowhere", task_id="no-such-task"))


async def test_cancel_a_running_task_then_not_again(client: Client) -> None:
    (started,) = await collect(client, request("listen", return_immediately=True))
    canceled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=started.task.id))


async def test_subscribe_follows_a_running_task_to_its_end(
    client: Client, streaming: Client
) -> None:
    (started,) = await collect(client, request("task 3 200", return_immediately=True))
    events = [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=started.task.id))]
    assert events[0].task.id == started.task.id
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(UnsupportedOperationError):  # a final task has nothing to follow
        _ = [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=started.task.id))]


async def test_list_tasks_filters_pages_and_orders_by_update(client: Client) -> None:
    (first,) = await collect(client, request("one"))
    context = first.task.context_id
    (second,) = await collect(client, request("two", context_id=context))
    (asked,) = await collect(client, request("ask", context_id=context))
    page = await client.list_tasks(ListTasksRequest(context_id=context, page_size=2))
    assert [t.id for t in page.tasks] == [asked.task.id, second.task.id]
    assert page.total_size == 3
    assert page.page_size == 2
    assert all(len(t.artifacts) == 0 for t in page.tasks)  # includeArtifacts is false
    rest = await client.list_tasks(
        ListTasksRequest(
            context_id=context, page_size=2, page_token=page.next_page_token, include_artifacts=True
        )
    )
    assert [t.id for t in rest.tasks] == [first.task.id]
    assert rest.next_page_token == ""
    assert rest.tasks[0].artifacts[0].parts[0].text == "one"
    waiting = await client.list_tasks(
        ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_INPUT_REQUIRED)
    )
    assert [t.id for t in waiting.tasks] == [asked.task.id]


async def test_push_configs_are_created_read_listed_and_deleted(client: Client) -> None:
    (task,) = await collect(client, request("ask"))
    task_id = task.task.id
    created = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(
            task_id=task_id, id="hook-1", url="http://127.0.0.1:9/hook", token="secret"
        )
    )
    assert (created.task_id, created.id, created.url) == (
        task_id,
        "hook-1",
        "http://127.0.0.1:9/hook",
    )
    read = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")
    )
    assert read.url == created.url
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert [c.id for c in listed.configs] == ["hook-1"]
    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")
    )
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert list(listed.configs) == []


async def test_a_task_sent_over_1_0_reads_the_same_over_0_2_1(
    client: Client, sut: LiveServer
) -> None:
    (sent,) = await collect(client, request("seen everywhere"))
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": sent.task.id}}
    async with httpx.AsyncClient() as http:
        task = (await http.post(sut.url + "/", json=rpc)).json()["result"]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0] == {"kind": "text", "text": "seen everywhere"}


async def test_the_0_3_interface_still_serves_the_compat_client(sut: LiveServer) -> None:
    """The same card, restricted to its 0.3 interface: a2a-sdk 1.x then uses its 0.3
    compatibility transport (message/send, tasks/get), which this server still answers."""
    async with httpx.AsyncClient() as http:
        document = (await http.get(sut.url + "/.well-known/agent-card.json")).json()
    card = parse_agent_card(document)
    legacy = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(legacy)
    async with await create_client(card, client_config=ClientConfig(streaming=False)) as c:
        (sent,) = await collect(c, request("over 0.3"))
        assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED
        read = await c.get_task(GetTaskRequest(id=sent.task.id))
    assert read.id == sent.task.id
    assert "over 0.3" in [p.text for p in read.artifacts[0].parts]


async def test_a_subscription_stays_open_while_the_task_waits_for_input(
    client: Client, streaming: Client
) -> None:
    """Spec §3.1.6: the stream ends when the task does, not when it asks for input."""
    (asked,) = await collect(client, request("ask"))
    task = asked.task
    first_event = asyncio.Event()

    async def follow() -> list[StreamResponse]:
        seen = []
        async for event in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
            seen.append(event)
            first_event.set()
        return seen

    following = asyncio.create_task(follow())
    await asyncio.wait_for(first_event.wait(), 30)
    assert not following.done()  # open, though the task waits for input
    await collect(client, request("the answer", task_id=task.id, context_id=task.context_id))
    events = await asyncio.wait_for(following, 30)
    assert events[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert "you said: the answer" in [p.text for a in artifacts for p in a.parts]

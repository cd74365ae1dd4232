"""Interop: the current official a2a-sdk client (1.x), unmodified (docs/a2a-notes.md §10).

`create_client(url)` reads `/.well-known/agent-card.json`; its `supportedInterfaces` list the
1.0 JSON-RPC interface first, so the client speaks 1.0 natively (`SendMessage`, `GetTask`, ...
with `A2A-Version: 1.0`, docs/a2a-notes.md §13). Restricted to the card's 0.3 interface it
uses its v0.3 compat transport instead (`message/send`, ...): tests/a2a/v1/test_sdk_client.py.
"""

import uuid
from collections.abc import AsyncIterator

import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError


def _request(text: str, *, return_immediately: bool = False) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)]),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


@pytest.fixture
async def client(sut_url: str) -> AsyncIterator[Client]:
    """A non-streaming client (message/send), as `create_client` builds it from the card."""
    async with await create_client(sut_url, client_config=ClientConfig(streaming=False)) as c:
        yield c


@pytest.fixture
async def streaming_client(sut_url: str) -> AsyncIterator[Client]:
    """The default client: it streams (message/stream) because the card says it can."""
    async with await create_client(sut_url) as c:
        yield c


async def _send(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(request)]


async def test_the_sdk_discovers_the_card(sut_url: str) -> None:
    """§10: the 1.x client resolves `agent-card.json` and builds a client from it."""
    async with await create_client(sut_url) as client:
        assert isinstance(client, Client)


async def test_the_sdk_sends_a_message_and_gets_the_completed_task(client: Client) -> None:
    """§10: message/send through the compat layer returns the completed Task."""
    responses = await _send(client, _request("hello from a2a-sdk"))
    assert len(responses) == 1
    assert responses[0].HasField("task")
    task = responses[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    texts = [part.text for part in task.artifacts[0].parts if part.HasField("text")]
    assert "hello from a2a-sdk" in texts


async def test_the_sdk_streams_a_message(streaming_client: Client) -> None:
    """§6, §10: message/stream: the Task, status and artifact updates, the final status."""
    responses = await _send(streaming_client, _request("task 3 50"))
    kinds = [response.WhichOneof("payload") for response in responses]
    assert kinds[0] == "task"
    assert kinds.count("status_update") >= 4  # three working updates and completed
    assert "artifact_update" in kinds
    last = responses[-1]
    assert last.HasField("status_update")
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_sdk_gets_a_task(client: Client) -> None:
    """§10: tasks/get returns the task the client created."""
    created = (await _send(client, _request("get me")))[0].task
    task: Task = await client.get_task(GetTaskRequest(id=created.id))
    assert task.id == created.id
    assert task.context_id == created.context_id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_sdk_cancels_a_task(client: Client) -> None:
    """§10: tasks/cancel of a running task returns it canceled."""
    running = (await _send(client, _request("task 50 100", return_immediately=True)))[0].task
    assert running.status.state in (
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
    )
    canceled = await client.cancel_task(CancelTaskRequest(id=running.id))
    assert canceled.id == running.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_the_sdk_maps_an_unknown_task_to_task_not_found(client: Client) -> None:
    """§3, §10: the server's -32001 reaches the SDK user as `TaskNotFoundError`."""
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id=f"no-such-task-{uuid.uuid4()}"))

"""The A2A 1.0 test kit's scenarios (shared/spec/a2a-1.0-tck/scenarios/*.feature) as
conformance/skills.py plays them, keyed by the message id's prefix, through the official
a2a-sdk 1.x client over both 1.0 bindings."""

import uuid
from datetime import timedelta

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from conformance.skills import KIT_STREAMING_TIMEOUT, LONG_RUNNING_SECONDS

# The 0.2.5 kit's client gives up on an answer after this long (its tck/sut_client.py).
KIT_0_2_5_REQUEST_TIMEOUT = 10.0


def tck(prefix: str, text: str = "from the kit", *, task: Task | None = None) -> SendMessageRequest:
    return with_id(f"{prefix}-{uuid.uuid4().hex[:8]}", text, task=task)


def with_id(message_id: str, text: str, *, task: Task | None = None) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=message_id, parts=[Part(text=text)])
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    return SendMessageRequest(message=message)


async def sent(client: Client, send: SendMessageRequest) -> Task:
    (response,) = [r async for r in client.send_message(send)]
    return response.task


def texts(task: Task) -> list[str]:
    return [p.text for a in task.artifacts for p in a.parts if p.HasField("text")]


async def test_complete_task_answers_hello_from_tck(client: Client) -> None:
    task = await sent(client, tck("tck-complete-task", "anything at all"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "Hello from TCK" in texts(task)


async def test_input_required_waits_across_follow_ups_until_complete_task(client: Client) -> None:
    task = await sent(client, tck("tck-input-required"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    for follow_up in ("tck-input-required", "tck-other"):
        task = await sent(client, tck(follow_up, "not yet", task=task))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    task = await sent(client, tck("tck-complete-task", "now", task=task))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "Hello from TCK" in texts(task)


async def test_text_artifact(client: Client) -> None:
    task = await sent(client, tck("tck-artifact-text"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "Generated text content"


async def test_file_artifact_has_bytes_a_name_and_a_media_type(client: Client) -> None:
    task = await sent(client, tck("tck-artifact-file"))
    (part,) = task.artifacts[0].parts
    assert (part.filename, part.media_type) == ("output.txt", "text/plain")
    assert part.raw == b"Generated file"


async def test_file_url_artifact(client: Client) -> None:
    task = await sent(client, tck("tck-artifact-file-url"))
    (part,) = task.artifacts[0].parts
    assert part.url == "https://example.com/output.txt"
    assert (part.filename, part.media_type) == ("output.txt", "text/plain")


async def test_data_artifact(client: Client) -> None:
    task = await sent(client, tck("tck-artifact-data"))
    (part,) = task.artifacts[0].parts
    assert MessageToDict(part.data) == {"key": "value", "count": 42}


async def test_reject_task_ends_rejected(client: Client) -> None:
    task = await sent(client, tck("tck-reject-task"))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert task.status.message.parts[0].text == "rejected"


async def test_message_response_answers_with_a_message_alone(client: Client) -> None:
    (response,) = [r async for r in client.send_message(tck("tck-message-response"))]
    assert response.WhichOneof("payload") == "message"
    answer = response.message
    assert answer.role == Role.ROLE_AGENT
    assert [p.text for p in answer.parts] == ["Direct message response"]
    assert answer.context_id
    # The engine keeps the record of every message: the task it names is completed.
    task = await client.get_task(GetTaskRequest(id=answer.task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert not task.artifacts


def kinds(responses: list[StreamResponse]) -> list[str]:
    """Each response's kind, status updates by state (`working`, `completed`)."""
    named = []
    for r in responses:
        kind = r.WhichOneof("payload") or ""
        if kind == "status_update":
            kind = TaskState.Name(r.status_update.status.state).removeprefix("TASK_STATE_")
        named.append(kind.lower())
    return named


@pytest.mark.parametrize(
    ("prefix", "text"),
    [
        ("tck-stream-001", "Stream hello from TCK"),
        ("tck-stream-003", "Stream task lifecycle"),
        ("tck-stream-ordering-001", "Ordered output"),
        ("tck-stream-artifact-text", "Streamed text content"),
    ],
)
async def test_streams_working_then_the_artifact_then_completed(
    streaming: Client, prefix: str, text: str
) -> None:
    responses = [r async for r in streaming.send_message(tck(prefix))]
    named = kinds(responses)
    assert named[:3] == ["task", "working", "artifact_update"]
    assert named[-1] == "completed"
    assert responses[2].artifact_update.artifact.parts[0].text == text


async def test_stream_002_ends_completed(streaming: Client) -> None:
    responses = [r async for r in streaming.send_message(tck("tck-stream-002"))]
    assert kinds(responses)[-1] == "completed"


async def test_streamed_file_artifact(streaming: Client) -> None:
    responses = [r async for r in streaming.send_message(tck("tck-stream-artifact-file"))]
    assert kinds(responses)[:3] == ["task", "working", "artifact_update"]
    (part,) = responses[2].artifact_update.artifact.parts
    assert (part.filename, part.media_type) == ("output.txt", "text/plain")


async def test_chunked_artifact_streams_two_chunks_of_one_artifact(streaming: Client) -> None:
    responses = [r async for r in streaming.send_message(tck("tck-stream-artifact-chunked"))]
    assert kinds(responses)[:4] == ["task", "working", "artifact_update", "artifact_update"]
    first, second = responses[2].artifact_update, responses[3].artifact_update
    assert first.artifact.artifact_id == second.artifact.artifact_id
    assert (first.artifact.parts[0].text, first.append, first.last_chunk) == (
        "chunk-1 ",
        False,
        False,
    )
    assert (second.artifact.parts[0].text, second.append, second.last_chunk) == (
        "chunk-2",
        True,
        True,
    )
    assert kinds(responses)[-1] == "completed"


async def test_a_repeated_message_id_is_a_retry_only_with_identical_parts(client: Client) -> None:
    task = await sent(client, tck("tck-input-required"))
    follow_up = f"tck-again-{uuid.uuid4().hex[:8]}"
    await sent(client, with_id(follow_up, "first words", task=task))
    retried = await sent(client, with_id(follow_up, "first words", task=task))
    assert [m.message_id for m in retried.history if m.role == Role.ROLE_USER].count(follow_up) == 1
    await sent(client, with_id(follow_up, "other words", task=task))
    stored = await client.get_task(GetTaskRequest(id=task.id))
    users = [m for m in stored.history if m.role == Role.ROLE_USER]
    assert [m.parts[0].text for m in users if m.message_id == follow_up] == [
        "first words",
        "other words",
    ]
    assert stored.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


def test_the_long_running_scenario_fits_both_kits() -> None:
    """The kits' long-running scenario (`test-resubscribe-message-id`) works twice the 1.0
    kit's streaming timeout (streaming.feature), and answers a blocking send well within the
    0.2.5 kit's request timeout: that kit sends the same prefix in a blocking message/send."""
    assert LONG_RUNNING_SECONDS >= 2 * KIT_STREAMING_TIMEOUT
    assert LONG_RUNNING_SECONDS <= KIT_0_2_5_REQUEST_TIMEOUT / 2


async def test_long_running_task_works_while_the_kit_subscribes_then_completes(
    streaming: Client,
) -> None:
    """streaming.feature, "Long-running task for resubscription test": `working`, then (after
    twice the kit's streaming timeout) `completed`; a subscription made meanwhile sees the task
    working, then follows it to its end."""
    stream = streaming.send_message(tck("test-resubscribe-message-id"))
    seen = [await anext(stream), await anext(stream)]
    assert kinds(seen) == ["task", "working"]
    subscribed = [r async for r in streaming.subscribe(SubscribeToTaskRequest(id=seen[0].task.id))]
    rest = [r async for r in stream]
    assert subscribed[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert kinds(subscribed)[-1] == kinds(rest)[-1] == "completed"
    working = seen[1].status_update.status.timestamp.ToDatetime()
    completed = rest[-1].status_update.status.timestamp.ToDatetime()
    assert completed - working >= timedelta(seconds=2 * KIT_STREAMING_TIMEOUT)

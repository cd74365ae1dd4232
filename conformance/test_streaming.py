"""message/stream and tasks/resubscribe (docs/a2a-notes.md §1, §2, §6, §12.2).

Every `data:` payload is validated as a 0.2.1 `SendStreamingMessageResponse` carrying the
request's id (`SseStream`). The SSE `id:` line of a task event is its sequence number.
"""

import uuid
from itertools import pairwise
from typing import Any

import pytest

from conformance.support import FINAL_STATES, Rpc, SseEvent, send_params, state


def _kinds(events: list[SseEvent]) -> list[str]:
    return [event.kind for event in events]


@pytest.fixture(scope="module")
def short_stream(rpc: Rpc) -> dict[str, Any]:
    """One `message/stream` of `task 3 50`, read until the server closed it."""
    with rpc.stream("message/stream", send_params("task 3 50")) as stream:
        content_type = stream.content_type
        events = stream.until_closed()
        closed = stream.closed
    return {"content_type": content_type, "events": events, "closed": closed}


# --- message/stream -------------------------------------------------------------------------


def test_message_stream_answers_text_event_stream(short_stream: dict[str, Any]) -> None:
    """§1: a streaming method answers `200 OK` with `Content-Type: text/event-stream`."""
    assert short_stream["content_type"].split(";")[0].strip() == "text/event-stream"


def test_the_first_event_is_the_submitted_task(short_stream: dict[str, Any]) -> None:
    """§1, §6: the first event is the `Task` in state `submitted`."""
    first = short_stream["events"][0]
    assert first.kind == "task"
    assert state(first.result) == "submitted"


def test_working_updates_follow_for_each_step(short_stream: dict[str, Any]) -> None:
    """§6: `task 3 50` reports three `working` status updates, none of them final."""
    working = [
        event
        for event in short_stream["events"]
        if event.kind == "status-update" and state(event.result) == "working"
    ]
    assert len(working) >= 3
    assert all(event.result["final"] is False for event in working)


def test_the_artifact_arrives_as_an_artifact_update_after_the_work(
    short_stream: dict[str, Any],
) -> None:
    """§6: the text artifact is an `artifact-update`, after the working updates and
    before the final status."""
    kinds = _kinds(short_stream["events"])
    assert "artifact-update" in kinds
    artifact_at = kinds.index("artifact-update")
    working_at = [
        index
        for index, event in enumerate(short_stream["events"])
        if event.kind == "status-update" and state(event.result) == "working"
    ]
    assert max(working_at) < artifact_at < len(kinds) - 1
    artifact = short_stream["events"][artifact_at].result["artifact"]
    assert any(part["kind"] == "text" for part in artifact["parts"])


def test_the_last_event_is_the_final_completed_status(short_stream: dict[str, Any]) -> None:
    """§6: the last event is a `status-update` `completed` with `final: true` …"""
    last = short_stream["events"][-1]
    assert last.kind == "status-update"
    assert state(last.result) == "completed"
    assert last.result["final"] is True


def test_only_the_last_event_is_final(short_stream: dict[str, Any]) -> None:
    """§6: `final: true` marks the end of the cycle; no earlier event carries it."""
    finals = [event.result.get("final") is True for event in short_stream["events"]]
    assert finals == [False] * (len(finals) - 1) + [True]


def test_the_stream_closes_after_the_final_event(short_stream: dict[str, Any]) -> None:
    """§1, §6: … after which the server closes the stream."""
    assert short_stream["closed"] is True


def test_every_event_belongs_to_the_same_task_and_context(short_stream: dict[str, Any]) -> None:
    """§6: updates carry the `taskId` and `contextId` of the Task they update."""
    task = short_stream["events"][0].result
    for event in short_stream["events"]:
        assert event.task_id == task["id"]
        assert event.result["contextId"] == task["contextId"]


def test_every_event_has_a_strictly_increasing_sse_id(short_stream: dict[str, Any]) -> None:
    """SSE `id:` lines carry the task event's sequence number; they strictly increase."""
    sequence = [event.seq for event in short_stream["events"]]
    assert all(a < b for a, b in pairwise(sequence)), sequence


def test_the_streamed_task_matches_tasks_get(rpc: Rpc, short_stream: dict[str, Any]) -> None:
    """§2: the stream and tasks/get tell the same story: completed, the same artifact."""
    task_id = short_stream["events"][0].task_id
    artifact = next(e for e in short_stream["events"] if e.kind == "artifact-update")
    task = rpc.get_task(task_id)
    assert state(task) == "completed"
    assert task["artifacts"] == [artifact.result["artifact"]]


def test_an_ask_stream_ends_final_in_input_required(rpc: Rpc) -> None:
    """§4: `final: true` is also sent for `input-required`, and the stream closes."""
    with rpc.stream("message/stream", send_params("ask")) as stream:
        events = stream.until_closed()
    last = events[-1]
    assert last.kind == "status-update"
    assert state(last.result) == "input-required"
    assert last.result["final"] is True


def test_message_stream_continues_an_input_required_task(rpc: Rpc) -> None:
    """§4 (spec §9.4): a `message/stream` with the paused task's `taskId` and `contextId`
    resumes it; the stream ends with the final `completed` status."""
    asked = rpc.send_task("ask")
    params = send_params("my answer", task_id=asked["id"], context_id=asked["contextId"])
    with rpc.stream("message/stream", params) as stream:
        events = stream.until_closed()
    assert all(event.task_id == asked["id"] for event in events)
    assert all(event.result["contextId"] == asked["contextId"] for event in events)
    last = events[-1]
    assert last.kind == "status-update"
    assert state(last.result) == "completed"
    assert last.result["final"] is True
    assert state(rpc.get_task(asked["id"])) == "completed"


def test_message_stream_to_a_final_task_answers_one_message_naming_its_follow_up(
    rpc: Rpc,
) -> None:
    """§12.4: a `message/stream` naming a final task answers as `message/send` does: one agent
    Message naming the follow-up task it started in the same context, and the stream ends; the
    follow-up runs to its end and the final task is as it was."""
    task = rpc.send_task("hello")
    params = send_params("task 2 50", task_id=task["id"], context_id=task["contextId"])
    with rpc.stream("message/stream", params) as stream:
        events = stream.until_closed()
    (only,) = events
    assert only.kind == "message"
    assert only.result["role"] == "agent"
    assert only.result["referenceTaskIds"] == [task["id"]]
    follow_up = rpc.wait_for_state(only.result["taskId"], FINAL_STATES)
    assert follow_up["contextId"] == task["contextId"]
    assert follow_up["history"][0]["referenceTaskIds"] == [task["id"]]
    assert state(follow_up) == "completed"
    assert rpc.get_task(task["id"]) == task  # the final task is as it was


def test_message_stream_to_a_working_task_streams_that_task_from_now_on(rpc: Rpc) -> None:
    """A `message/stream` naming a task that works: the message joins the task, and the
    stream is that task as it stands (the message in its history), then its later events to
    the final status (only that status when the skill, having read the message, ended
    first)."""
    task = rpc.send_task("listen", blocking=False)
    rpc.wait_for_state(task["id"], {"working"})
    params = send_params("still there?", task_id=task["id"])
    with rpc.stream("message/stream", params) as stream:
        events = stream.until_closed()
    first, last = events[0], events[-1]
    assert first.kind == "task" and first.result["id"] == task["id"]
    sent = [m for m in first.result["history"] if m["role"] == "user"][-1]
    assert sent["messageId"] == params["message"]["messageId"]
    assert all(event.task_id == task["id"] for event in events)
    logged = [event.seq for event in events if event.id is not None]
    assert all(a < b for a, b in pairwise(logged)), logged
    assert last.kind == "status-update" and state(last.result) == "completed"
    assert last.result["final"] is True
    artifact = rpc.get_task(task["id"])["artifacts"][0]
    assert [p["text"] for p in artifact["parts"] if p["kind"] == "text"] == ["heard: still there?"]


# --- tasks/resubscribe ----------------------------------------------------------------------

LONG_TASK = "task 10 200"  # ten working updates over about two seconds


def test_resubscribe_starts_with_a_snapshot_then_continues_live(rpc: Rpc) -> None:
    """§2, §6: without `Last-Event-ID`, the stream starts with the current Task, then
    carries the later events live (none already covered by the snapshot) to the final one."""
    with rpc.stream("message/stream", send_params(LONG_TASK)) as original:
        seen = original.take(3)
        task_id = seen[0].task_id
        with rpc.stream("tasks/resubscribe", {"id": task_id}) as resubscribed:
            resubscribed_events = resubscribed.until_closed()
        original_events = seen + original.until_closed()

    snapshot, live = resubscribed_events[0], resubscribed_events[1:]
    assert snapshot.kind == "task"
    assert snapshot.result["id"] == task_id
    assert state(snapshot.result) == "working"
    assert live, "no live events after the snapshot"
    assert all(event.kind in ("status-update", "artifact-update") for event in live)
    assert all(event.seq > seen[-1].seq for event in live), "events before the snapshot"
    original_tail = original_events[-len(live) :]
    assert [event.seq for event in live] == [event.seq for event in original_tail]
    assert [event.result for event in live] == [event.result for event in original_tail]
    assert state(live[-1].result) == "completed"
    assert live[-1].result["final"] is True


def test_resubscribe_with_last_event_id_replays_exactly_the_later_events(rpc: Rpc) -> None:
    """§2 (backfill is up to the server; this one does it): with `Last-Event-ID: k` the
    stream replays exactly the events with id > k, then continues live to the final one."""
    with rpc.stream("message/stream", send_params(LONG_TASK)) as original:
        seen = original.take(3)
        task_id, last_seen = seen[0].task_id, seen[-1].seq
        with rpc.stream(
            "tasks/resubscribe", {"id": task_id}, headers={"last-event-id": str(last_seen)}
        ) as resubscribed:
            replayed = resubscribed.until_closed()
        original_events = seen + original.until_closed()

    later = [event for event in original_events if event.seq > last_seen]
    assert [event.seq for event in replayed] == [event.seq for event in later]
    assert [event.result for event in replayed] == [event.result for event in later]
    assert replayed[-1].result["final"] is True


def test_the_0_2_5_kits_resubscribe_test_gets_its_task_then_its_stream(rpc: Rpc) -> None:
    """§12.2, as the official 0.2.5 kit's `test_tasks_resubscribe` plays it: a blocking
    message/send whose message id starts `test-resubscribe-message-id` (run-sut's long-running
    scenario, a few seconds) answers with its task, and tasks/resubscribe then streams it."""
    task = rpc.send_task(
        "Test message for resubscribe", message_id=f"test-resubscribe-message-id-{uuid.uuid4()}"
    )
    assert state(task) == "completed"
    with rpc.stream("tasks/resubscribe", {"id": task["id"]}) as stream:
        events = stream.until_closed()
    assert _kinds(events) == ["task", "status-update"]
    assert events[-1].result["final"] is True


def test_resubscribe_to_a_finished_task_sends_the_snapshot_and_final_status(rpc: Rpc) -> None:
    """§12.2: a task already final → its current snapshot, then its final status, then the
    stream closes."""
    task = rpc.send_task("hello")
    with rpc.stream("tasks/resubscribe", {"id": task["id"]}) as stream:
        events = stream.until_closed()
        assert stream.closed
    assert _kinds(events) == ["task", "status-update"]
    assert events[0].result["id"] == task["id"]
    assert state(events[0].result) == "completed"
    assert state(events[1].result) == "completed"
    assert events[1].result["final"] is True
    assert events[1].result["taskId"] == task["id"]


def test_resubscribe_to_a_finished_task_with_nothing_later_still_tells_its_status(
    rpc: Rpc,
) -> None:
    """§12.2: with `Last-Event-ID` at (or past) the task's last event there is nothing to
    replay; the stream is not empty all the same: it carries the final status, without an
    event id (it is not in the log), then closes."""
    with rpc.stream("message/stream", send_params("hello")) as original:
        last = original.until_closed()[-1]
    for after in (last.seq, last.seq + 100):
        with rpc.stream(
            "tasks/resubscribe", {"id": last.task_id}, headers={"last-event-id": str(after)}
        ) as stream:
            events = stream.until_closed()
            assert stream.closed
        assert _kinds(events) == ["status-update"]
        assert events[0].id is None
        assert state(events[0].result) == "completed"
        assert events[0].result["final"] is True

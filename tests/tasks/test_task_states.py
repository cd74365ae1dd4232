"""The transition table and `apply`: the rules every task change goes through."""

import pytest

from agentic_rag.schema.a2a import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TextPart,
)
from agentic_rag.tasks import states

S = TaskState


def new_task() -> Task:
    return Task(id="t1", context_id="c1", kind="task", status=TaskStatus(state=S.submitted))


def moved(task: Task, *path: TaskState) -> Task:
    for state in path:
        task = states.apply(task, states.status_event(task, state))
    return task


def text(t: str) -> list[Part]:
    return [Part(TextPart(kind="text", text=t))]


def test_final_states_have_no_way_out() -> None:
    for state in states.TERMINAL:
        assert states.TRANSITIONS[state] == frozenset()


def test_every_state_but_unknown_is_reachable_from_submitted() -> None:
    seen, todo = {S.submitted}, [S.submitted]
    while todo:
        for nxt in states.TRANSITIONS[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert seen == set(TaskState) - {S.unknown}


@pytest.mark.parametrize("final", sorted(states.TERMINAL))
@pytest.mark.parametrize("target", list(TaskState))
def test_a_final_task_never_changes(final: TaskState, target: TaskState) -> None:
    task = moved(new_task(), S.working) if final is not S.rejected else new_task()
    task = moved(task, final)
    with pytest.raises(states.IllegalTransition):
        moved(task, target)


def test_a_task_starts_submitted_and_only_once() -> None:
    working = new_task().model_copy(update={"status": TaskStatus(state=S.working)})
    with pytest.raises(states.IllegalTransition):
        states.apply(None, working)
    with pytest.raises(states.IllegalTransition):
        states.apply(new_task(), new_task())


def test_submitted_cannot_complete_without_working() -> None:
    with pytest.raises(states.IllegalTransition):
        moved(new_task(), S.completed)


def test_input_required_continues_the_same_task_with_the_message_in_history() -> None:
    task = moved(new_task(), S.working, S.input_required)
    reply = Message(role=Role.user, kind="message", message_id="m2", parts=text("yes"))
    task = states.apply(task, reply)
    task = moved(task, S.working, S.completed)
    assert task.id == "t1"
    assert [m.message_id for m in task.history or []] == ["m2"]


@pytest.mark.parametrize("state", [S.submitted, S.working])
def test_a_message_to_a_task_in_progress_joins_its_history_and_changes_no_state(
    state: TaskState,
) -> None:
    task = moved(new_task(), state) if state is not S.submitted else new_task()
    message = Message(role=Role.user, kind="message", message_id="m2", parts=text("also"))
    after = states.apply(task, message)
    assert after.status == task.status
    assert [m.message_id for m in after.history or []] == ["m2"]
    assert moved(after, S.working, S.completed).status.state is S.completed


@pytest.mark.parametrize("final", sorted(states.TERMINAL))
def test_a_message_to_a_final_task_is_illegal(final: TaskState) -> None:
    task = moved(new_task(), S.working) if final is not S.rejected else new_task()
    message = Message(role=Role.user, kind="message", message_id="m2", parts=text("yes"))
    with pytest.raises(states.IllegalTransition):
        states.apply(moved(task, final), message)


def test_status_messages_join_the_history() -> None:
    task = moved(new_task(), S.working)
    question = Message(role=Role.agent, kind="message", message_id="q", parts=text("which?"))
    task = states.apply(task, states.status_event(task, S.input_required, question))
    assert task.history == [question]
    assert task.status.message == question


def test_progress_replaces_the_last_and_never_joins_the_history() -> None:
    """Issue 34, point 3: a working status's message is progress; a skill that reports every
    page of a long PDF must not grow the task by a message a page."""
    task = moved(new_task(), S.working)
    for n in range(1, 4):
        said = Message(role=Role.agent, kind="message", message_id=f"p{n}", parts=text(f"{n}"))
        task = states.apply(task, states.status_event(task, S.working, said))
    assert task.history is None
    assert task.status.message is not None and task.status.message.message_id == "p3"
    question = Message(role=Role.agent, kind="message", message_id="q", parts=text("which?"))
    task = states.apply(task, states.status_event(task, S.input_required, question))
    assert task.history == [question]


def test_artifact_chunks_append_or_replace_by_id() -> None:
    task = moved(new_task(), S.working)

    def chunk(t: str, append: bool) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id="t1",
            context_id="c1",
            kind="artifact-update",
            append=append,
            artifact=Artifact(artifact_id="a", parts=text(t)),
        )

    task = states.apply(task, chunk("one ", False))
    task = states.apply(task, chunk("two", True))
    assert [p.root.text for p in (task.artifacts or [])[0].parts] == ["one ", "two"]  # type: ignore[union-attr]
    task = states.apply(task, chunk("new", False))
    assert [p.root.text for p in (task.artifacts or [])[0].parts] == ["new"]  # type: ignore[union-attr]


def test_artifacts_only_while_working() -> None:
    event = TaskArtifactUpdateEvent(
        task_id="t1",
        context_id="c1",
        kind="artifact-update",
        artifact=Artifact(artifact_id="a", parts=text("x")),
    )
    with pytest.raises(states.IllegalTransition):
        states.apply(new_task(), event)


def test_final_flag_marks_final_and_paused_states() -> None:
    for state in TaskState:
        expected = state in states.TERMINAL or state in states.PAUSED
        assert states.status_event(new_task(), state).final is expected

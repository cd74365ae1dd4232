"""The task state machine: one table of allowed transitions, one function that applies an event.

Every change of a task goes through `apply`. An event the table does not allow raises
`IllegalTransition`: that is a bug in the caller, never something to ignore.
"""

import time
from datetime import UTC, datetime

from agentic_rag.schema.a2a import (
    Artifact,
    Message,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from agentic_rag.schema.base import changed

S = TaskState

TERMINAL: frozenset[TaskState] = frozenset({S.completed, S.canceled, S.failed, S.rejected})
PAUSED: frozenset[TaskState] = frozenset({S.input_required, S.auth_required})
IN_PROGRESS: frozenset[TaskState] = frozenset({S.submitted, S.working})
# Where a client's message joins the history: a paused task goes on with it; a task in
# progress keeps running, and its skill reads it (`SkillContext.texts`).
TAKES_MESSAGES: frozenset[TaskState] = PAUSED | IN_PROGRESS

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    S.submitted: frozenset({S.working, S.canceled, S.failed, S.rejected}),
    # working -> rejected: a skill may refuse a task once it has read it (SkillRejected).
    S.working: frozenset(
        {
            S.working,
            S.input_required,
            S.auth_required,
            S.completed,
            S.canceled,
            S.failed,
            S.rejected,
        }
    ),
    S.input_required: frozenset({S.working, S.canceled, S.failed}),
    S.auth_required: frozenset({S.working, S.canceled, S.failed}),
    **{state: frozenset() for state in TERMINAL},
    S.unknown: frozenset(),
}

# What a task-changing event is: the task itself (creation), a status or artifact update, or a
# message from the client to a task that is not final.
TaskEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent | Message


class IllegalTransition(Exception):
    pass


def is_final(state: TaskState) -> bool:
    """Whether a status in this state ends a stream cycle (`final: true`)."""
    return state in TERMINAL or state in PAUSED


# The current second as isoformat writes it, made once a second: isoformat costs more than
# the rest of a status event (15,100 instructions a call with datetime.now; `now` 6,600).
_second: tuple[int, str] = (-1, "")


def now() -> str:
    """The current time in UTC as `datetime.isoformat` writes it (microseconds, +00:00)."""
    global _second
    clock = time.time()
    second = int(clock)
    micro = int((clock - second) * 1_000_000)
    if second != _second[0]:
        _second = (second, datetime.fromtimestamp(second, UTC).isoformat()[:19])
    if not micro:  # isoformat leaves out a zero fraction
        return f"{_second[1]}+00:00"
    return f"{_second[1]}.{str(1_000_000 + micro)[1:]}+00:00"


def apply(task: Task | None, event: TaskEvent) -> Task:
    """Return the task after `event`; `task` is not modified."""
    if isinstance(event, Task):
        if task is not None:
            raise IllegalTransition(f"task {task.id} already exists")
        if event.status.state is not S.submitted:
            raise IllegalTransition(f"a task starts submitted, not {event.status.state}")
        return event
    if task is None:
        raise IllegalTransition("the first event of a task must be the task itself")
    state = task.status.state
    match event:
        case TaskStatusUpdateEvent(status=status):
            if status.state not in TRANSITIONS[state]:
                raise IllegalTransition(f"task {task.id}: {state} -> {status.state}")
            if status.message is None or status.state is S.working:
                # A working status's message is progress: the status shows the latest, the
                # event log keeps each; the history keeps the conversation only (the client's
                # messages, the agent's questions and final words), so it stays bounded.
                return changed(task, status=status)
            history = [*(task.history or []), status.message]
            return changed(task, status=status, history=history)
        case TaskArtifactUpdateEvent(artifact=artifact, append=append):
            if state is not S.working:
                raise IllegalTransition(f"task {task.id}: artifact while {state}")
            artifacts = _merge_artifact(task.artifacts or [], artifact, bool(append))
            return changed(task, artifacts=artifacts)
        case Message(role=Role.user):
            if state not in TAKES_MESSAGES:
                raise IllegalTransition(f"task {task.id}: message while {state}")
            return changed(task, history=[*(task.history or []), event])
        case _:
            raise IllegalTransition(f"task {task.id}: unexpected event {type(event).__name__}")


def _merge_artifact(artifacts: list[Artifact], update: Artifact, append: bool) -> list[Artifact]:
    merged = list(artifacts)
    for i, existing in enumerate(merged):
        if existing.artifact_id == update.artifact_id:
            if append:
                update = existing.model_copy(update={"parts": existing.parts + update.parts})
            merged[i] = update
            return merged
    merged.append(update)
    return merged


def status_event(
    task: Task, state: TaskState, message: Message | None = None
) -> TaskStatusUpdateEvent:
    """The status-update event that moves `task` to `state`."""
    # Built validated: faster than model_construct for these small models (tasks/parts.py);
    # the status as a dict, validated within the event's validation (0.5 us less).
    return TaskStatusUpdateEvent(
        task_id=task.id,
        context_id=task.context_id,
        kind="status-update",
        status={"state": state, "message": message, "timestamp": now()},
        final=is_final(state),
    )

"""What a task is and how it ended, in the engine's terms: for callers that start skills as
tasks (`TaskService.start_skill`) and read them back without the record's A2A shapes.

A skill's result is read back as its output model; a task that did not complete is a typed
outcome with the reason it gives (`Failed`, `Canceled`, `NeedsInput`), or `Running`.
"""

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from agentic_rag.schema.a2a import DataPart, Task, TaskState, TaskStatusUpdateEvent
from agentic_rag.skills import ResultPart, Skill
from agentic_rag.tasks import states
from agentic_rag.tasks.journal import Subscription
from agentic_rag.tasks.parts import attached_parts, text_of
from agentic_rag.tasks.store import Event

# The metadata key of a task's first message that says when it was created: the record (an
# A2A task) carries no creation time of its own. The name is kept from the tasks MCP created.
CREATED_AT = "createdAt"


@dataclass(frozen=True)
class TaskView:
    """A task as a caller that is no A2A client sees it."""

    id: str
    context_id: str
    state: TaskState
    message: str  # what the task's status says ("" when nothing)
    created_at: str | None  # for tasks started by `start_skill`
    updated_at: str | None


@dataclass(frozen=True)
class Completed:
    task_id: str
    skill: Skill
    output: BaseModel  # an instance of `skill.output_model`
    attached: list[ResultPart] = field(default_factory=list)  # what the skill attached
    state: TaskState = TaskState.completed


@dataclass(frozen=True)
class Failed:
    """Failed or rejected: `reason` says why."""

    task_id: str
    skill: Skill
    reason: str
    state: TaskState = TaskState.failed


@dataclass(frozen=True)
class Canceled:
    task_id: str
    skill: Skill
    reason: str
    state: TaskState = TaskState.canceled


@dataclass(frozen=True)
class NeedsInput:
    """Paused until the caller answers `question` (input or authorization required)."""

    task_id: str
    skill: Skill
    question: str
    state: TaskState = TaskState.input_required


@dataclass(frozen=True)
class Running:
    """Not settled yet (submitted or working), or in a state nothing moves on (`unknown`)."""

    task_id: str
    skill: Skill
    state: TaskState
    message: str


Outcome = Completed | Failed | Canceled | NeedsInput | Running


class Started:
    """A task `start_skill` started: its id and context; with `follow`, its progress."""

    def __init__(self, view: TaskView, events: Subscription | None) -> None:
        self.view, self._events = view, events

    @property
    def task_id(self) -> str:
        return self.view.id

    async def progress(self) -> AsyncIterator[str]:
        """The texts of the task's progress until it settles (final or paused); only for a
        task started with `follow`."""
        if self._events is None:
            raise RuntimeError("progress() needs start_skill(..., follow=True)")
        async for text in progress_texts(self._events):
            yield text

    def close(self) -> None:
        """Stop following the task (the task goes on)."""
        if self._events is not None:
            self._events.close()


async def progress_texts(events: AsyncIterable[Event]) -> AsyncIterator[str]:
    """The texts of `working` status updates among a task's logged `events`, until one is
    final."""
    async for event in events:
        if event.kind == "status-update":
            status = TaskStatusUpdateEvent.model_validate_json(event.json).status
            if status.state is TaskState.working and status.message is not None:
                text = text_of(status.message)
                if text:
                    yield text
        if event.final:
            return


def view_of(task: Task) -> TaskView:
    first = task.history[0] if task.history else None
    stamp = first.metadata.get(CREATED_AT) if first is not None and first.metadata else None
    message = task.status.message
    return TaskView(
        id=task.id,
        context_id=task.context_id,
        state=task.status.state,
        message=text_of(message) if message is not None else "",
        created_at=stamp if isinstance(stamp, str) else None,
        updated_at=task.status.timestamp,
    )


def outcome_of(skill: Skill, task: Task) -> Outcome:
    """How the task of a call of `skill` stands, its result read into the output model."""
    state = task.status.state
    text = text_of(task.status.message) if task.status.message is not None else ""
    if state is TaskState.completed:
        data = _result_data(skill, task)
        if data is None:
            return Failed(task.id, skill, "the task completed without a result")
        output = skill.output_model.model_validate(data)
        return Completed(task.id, skill, output, attached_parts(task))
    if state in (TaskState.failed, TaskState.rejected):
        return Failed(task.id, skill, text, state)
    if state is TaskState.canceled:
        return Canceled(task.id, skill, text)
    if state in states.PAUSED:
        return NeedsInput(task.id, skill, text, state)
    return Running(task.id, skill, state, text)


def _result_data(skill: Skill, task: Task) -> dict[str, Any] | None:
    # The runner's result artifact is named after the skill: a text part and a data part.
    for artifact in reversed(task.artifacts or []):
        if artifact.name != skill.name:
            continue
        for part in artifact.parts:
            if isinstance(part.root, DataPart):
                return part.root.data
    return None

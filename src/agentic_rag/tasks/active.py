"""The tasks queued or running on this worker, and the queue they wait in for the runner.

`ActiveTasks` owns them: the service submits the tasks it accepts (or takes over), the runner
takes them in turn and releases each once it settles; both ask it whether a task is here.
"""

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel

from agentic_rag.schema.a2a import Task
from agentic_rag.schema.base import wire_json
from agentic_rag.tasks import states
from agentic_rag.tasks.calls import Invocation
from agentic_rag.tasks.parts import with_history
from agentic_rag.tasks.store import TaskWrite


@dataclass
class ActiveTask:
    """A task in memory: `task` as it is now (what the runner and the service decide on), and
    `stored_task` as the database has it (what answers show: a crash cannot take it back)."""

    tenant: str
    task: Task
    last_seq: int
    runner: asyncio.Task[None] | None = None
    started: bool = (
        False  # whether the runner's coroutine has begun (it can be cancelled only then)
    )
    cancel_requested: bool = False
    in_skill: bool = False  # whether the skill runs (not yet returned or raised)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    written: asyncio.Future[None] | None = None  # the journal write of the latest events
    journaled: TaskWrite | None = None  # what that write holds
    invocation: Invocation | None = None  # resolved when the message was accepted
    arguments: BaseModel | None = None  # the invocation's, validated then (unless missing)
    body_seq: int = 0  # the event that last changed more than the status (history, artifacts)
    stored_task: Task = field(init=False)
    stored_seq: int = field(init=False)  # 0: nothing stored yet
    stored_write: TaskWrite | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.stored_task, self.stored_seq = self.task, self.last_seq

    def stored(self, write: TaskWrite) -> None:
        """The journal made `write` durable (and is about to publish its events)."""
        if write.last_seq > self.stored_seq:
            self.stored_task, self.stored_seq, self.stored_write = (
                write.task,
                write.last_seq,
                write,
            )

    async def durable(self) -> "ActiveTask":
        """Wait until the events emitted so far are in the database (or failed to be stored).

        One write is waited for, the latest when called: a skill that reports progress faster
        than the journal commits cannot keep a caller (a cancel) waiting here."""
        written = self.written
        if written is not None and not written.done():
            await asyncio.shield(written)
        return self

    def snapshot_json(self, history_length: int | None = None) -> str:
        """The stored task as JSON, as `with_history` cuts it; the journal may have made it."""
        stored = self.stored_write
        if history_length is None and stored is not None and stored.task is self.stored_task:
            return stored.snapshot_json
        return wire_json(with_history(self.stored_task, history_length))

    @property
    def key(self) -> tuple[str, str]:
        return (self.tenant, self.task.id)


@dataclass(frozen=True)
class Job:
    tenant: str
    task_id: str


class WorkQueue(Protocol):
    """Where accepted tasks wait for this worker's runner (a task runs where it was accepted)."""

    async def put(self, job: Job) -> None: ...

    async def get(self) -> Job: ...


class LocalWorkQueue:
    """The work queue of a single process."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Job] = asyncio.Queue()

    async def put(self, job: Job) -> None:
        self._queue.put_nowait(job)

    async def get(self) -> Job:
        return await self._queue.get()


class ActiveTasks:
    """The tasks this worker has accepted and not yet settled, by (tenant, task id)."""

    def __init__(self, queue: WorkQueue) -> None:
        self._queue = queue
        self._tasks: dict[tuple[str, str], ActiveTask] = {}

    def get(self, tenant: str, task_id: str) -> ActiveTask | None:
        return self._tasks.get((tenant, task_id))

    def runs_here(self, tenant: str, task_id: str) -> bool:
        return (tenant, task_id) in self._tasks

    def canceling(self, tenant: str, task_id: str) -> bool:
        """Whether a client asked to stop the task that runs here (not a shutdown)."""
        active = self._tasks.get((tenant, task_id))
        return active is not None and active.cancel_requested

    def hold(self, active: ActiveTask) -> None:
        """Keep `active` here from now on (before it is queued: a client may already see it)."""
        self._tasks[active.key] = active

    async def queue(self, active: ActiveTask) -> None:
        """Hold `active` and queue it for the runner."""
        self.hold(active)
        await self._queue.put(Job(active.tenant, active.task.id))

    def release(self, active: ActiveTask) -> None:
        """`active` settled (or was never accepted): it is no longer this worker's."""
        self._tasks.pop(active.key, None)

    async def waiting(self) -> Job:
        """The next queued task, as the runner waits for it."""
        return await self._queue.get()

    def runnable(self, job: Job) -> ActiveTask | None:
        """The task `job` queued, unless it settled meanwhile (canceled while it waited)."""
        active = self._tasks.get((job.tenant, job.task_id))
        if active is not None and active.task.status.state in states.TERMINAL:
            self.release(active)
            return None
        return active

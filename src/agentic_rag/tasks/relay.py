"""Reaching a task that another worker runs: its events read from the log as that worker
commits them, a client's message handed on to it, a cancel request passed to it.

Each waits on the cluster's notifications, and reads the store again at each one (or after a
while without: a notification lost with a dropped connection costs a delay, not a hang).
"""

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable

from agentic_rag.schema.a2a import Message, Task, TaskState
from agentic_rag.storage.cluster import Cluster
from agentic_rag.tasks import states
from agentic_rag.tasks.errors import TaskNotCancelableError, TaskUnavailableError
from agentic_rag.tasks.parts import has_message
from agentic_rag.tasks.store import Event, StoredTask, TaskConflict, TaskStore

# How long `tasks/cancel` waits for another worker to stop a task it runs.
REMOTE_CANCEL_SECONDS = 10.0
# How long a follower of another worker's task waits for news before reading the log anyway.
REMOTE_POLL_SECONDS = 5.0
# How long a message handed on to the worker that runs its task may take to be stored.
REMOTE_MESSAGE_SECONDS = 10.0


class Relayed:
    """A `Subscription` to the events of a task that another worker runs (`Relay.follow`)."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._closing: asyncio.Future[None] | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    def close(self) -> None:
        # An async generator closes asynchronously; closing it leaves its watch of the task.
        self._closing = asyncio.ensure_future(self._events.aclose())


class Relay:
    def __init__(self, store: TaskStore, cluster: Cluster) -> None:
        self._store, self._cluster = store, cluster

    async def follow(self, tenant: str, task_id: str, last: int) -> AsyncGenerator[Event, None]:
        """The events after `last` of a task that another worker runs, read from the log
        whenever a commit of that task is announced."""
        with self._cluster.watch(tenant, task_id) as changed:
            while True:
                changed.clear()
                for event in await self._store.events_after(tenant, task_id, last):
                    last = event.seq
                    if event.streamed:
                        yield event
                    if event.final:
                        return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), REMOTE_POLL_SECONDS)

    async def hand_message(
        self, tenant: str, task_id: str, message: Message, *, here: Callable[[], bool]
    ) -> StoredTask:
        """Give `message` to the worker that runs the task, and return the task once it is
        stored with the message.

        Raises `TaskConflict` when the task moves on first (paused, final, or, as `here`
        says, taken over by this worker from one that is gone): the caller decides again.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REMOTE_MESSAGE_SECONDS
        raw = message.model_dump_json(by_alias=True, exclude_none=True).encode()
        with self._cluster.watch(tenant, task_id) as changed:
            await self._cluster.hand_message(tenant, task_id, raw)
            while True:
                changed.clear()
                current = await self._store.get(tenant, task_id)
                assert current is not None  # tasks are never deleted
                if has_message(current.task, message):
                    return current
                if current.task.status.state not in states.IN_PROGRESS or here():
                    raise TaskConflict(f"task {task_id} moved on before it took the message")
                if loop.time() >= deadline:
                    raise TaskUnavailableError(
                        f"task {task_id} runs on another worker, which did not take the message "
                        f"within {REMOTE_MESSAGE_SECONDS:.0f} s; send it again (a messageId "
                        "joins a task once)"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), deadline - loop.time())

    async def cancel(self, tenant: str, task_id: str) -> Task:
        """Ask the worker that runs the task to cancel it; the task once canceled, or as it
        stands after a while ("the server will attempt to cancel; success is not
        guaranteed")."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REMOTE_CANCEL_SECONDS
        with self._cluster.watch(tenant, task_id) as changed:
            await self._cluster.request_cancel(tenant, task_id)
            while True:
                changed.clear()
                stored = await self._store.get(tenant, task_id)
                assert stored is not None  # tasks are never deleted
                state = stored.task.status.state
                if state in states.TERMINAL - {TaskState.canceled}:
                    raise TaskNotCancelableError(
                        f"task {task_id} became {state.value} before it could be canceled"
                    )
                if state is TaskState.canceled or loop.time() >= deadline:
                    return stored.task
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), deadline - loop.time())

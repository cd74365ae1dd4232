"""The journal: group commit of task events, then live fan-out of what is durable.

Emitters append without waiting; one flusher writes everything pending in one transaction,
then publishes it to live subscribers and resolves the appenders' futures. So a subscriber
only ever sees events that are already in the database (replay and live agree on sequence
numbers), and under load one commit carries the events of many tasks.
"""

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from agentic_rag.a2a.schema import Task
from agentic_rag.a2a.store import Event, TaskStore, TaskWrite

log = logging.getLogger(__name__)

COMMIT_DELAY_TURNS = 4


class Subscription(Protocol):
    def __aiter__(self) -> AsyncIterator[Event]: ...

    def close(self) -> None: ...


class EventBus(Protocol):
    """Live delivery of durable events to the streams that follow a task."""

    def subscribe(self, tenant: str, task_id: str) -> Subscription: ...

    def publish(self, tenant: str, task_id: str, events: Sequence[Event]) -> None: ...


class _LocalSubscription:
    """Events for one follower, in order; lighter than an asyncio.Queue (one per request)."""

    def __init__(self, bus: "LocalEventBus", key: tuple[str, str]) -> None:
        self._bus, self._key = bus, key
        self._events: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def push(self, event: Event) -> None:
        self._events.append(event)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            while self._events:
                yield self._events.popleft()
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None

    def close(self) -> None:
        subscribers = self._bus.subscribers.get(self._key)
        if subscribers is not None:
            subscribers.discard(self)
            if not subscribers:
                del self._bus.subscribers[self._key]


class LocalEventBus:
    """The event bus of a single process."""

    def __init__(self) -> None:
        self.subscribers: dict[tuple[str, str], set[_LocalSubscription]] = {}

    def subscribe(self, tenant: str, task_id: str) -> Subscription:
        sub = _LocalSubscription(self, (tenant, task_id))
        self.subscribers.setdefault((tenant, task_id), set()).add(sub)
        return sub

    def publish(self, tenant: str, task_id: str, events: Sequence[Event]) -> None:
        for sub in self.subscribers.get((tenant, task_id), ()):
            for event in events:
                sub.push(event)


class Journal:
    def __init__(self, store: TaskStore, bus: EventBus) -> None:
        self._store = store
        self._bus = bus
        self._pending: list[tuple[TaskWrite, asyncio.Future[None]]] = []
        self._wakeup = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._flusher = asyncio.create_task(self._run(), name="journal-flusher")

    async def stop(self) -> None:
        """Flush what is pending, then stop."""
        if self._flusher is None:
            return
        while self._pending:
            await self._flush()
        self._flusher.cancel()
        await asyncio.gather(self._flusher, return_exceptions=True)
        self._flusher = None

    def append(
        self, tenant: str, task: Task, last_seq: int, events: list[Event]
    ) -> asyncio.Future[None]:
        """Queue `events` and the snapshot they lead to; the future resolves once durable."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((TaskWrite(tenant, task, last_seq, events), done))
        self._wakeup.set()
        return done

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            # A few turns of the event loop before committing, so that what is already under
            # way joins this commit: a quick skill's start, result and end then cost one
            # round trip instead of two. It costs microseconds when nothing else is ready.
            for _ in range(COMMIT_DELAY_TURNS):
                await asyncio.sleep(0)
            while self._pending:
                await self._flush()

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        try:
            await self._store.write([w for w, _ in batch])
        except Exception:
            # One bad write must not sink the others: write each task's events on its own.
            log.warning(
                "journal: a batch of %d writes failed; retrying them one by one", len(batch)
            )
            for write, done in batch:
                try:
                    await self._store.write([write])
                except Exception as exc:
                    log.exception("journal: writing events of task %s failed", write.task.id)
                    if not done.done():
                        done.set_exception(exc)
                else:
                    self._publish([(write, done)])
            return
        self._publish(batch)

    def _publish(self, batch: list[tuple[TaskWrite, asyncio.Future[None]]]) -> None:
        by_task: dict[tuple[str, str], list[Event]] = defaultdict(list)
        for write, _ in batch:
            by_task[(write.tenant, write.task.id)].extend(write.events)
        for (tenant, task_id), events in by_task.items():
            self._bus.publish(tenant, task_id, events)
        for _, done in batch:
            if not done.done():
                done.set_result(None)

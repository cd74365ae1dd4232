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

from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.storage.outage import database_unreachable
from agentic_rag.tasks.errors import TaskUnavailableError
from agentic_rag.tasks.store import Event, TaskConflict, TaskStore, TaskWrite, unreachable

log = logging.getLogger(__name__)

COMMIT_DELAY_TURNS = 4


class Subscription(Protocol):
    def __aiter__(self) -> AsyncIterator[Event]: ...

    def close(self) -> None: ...


class EventBus(Protocol):
    """Live delivery of durable events to the streams that follow a task."""

    def subscribe(self, tenant: str, task_id: str) -> Subscription: ...

    def publish(self, tenant: str, task_id: str, events: Sequence[Event]) -> None: ...

    def fail(self, tenant: str, task_id: str, error: Exception) -> None:
        """The task's events could not be stored: its followers stop waiting, with `error`."""


class _LocalSubscription:
    """Events for one follower, in order; lighter than an asyncio.Queue (one per request)."""

    def __init__(self, bus: "LocalEventBus", key: tuple[str, str]) -> None:
        self._bus, self._key = bus, key
        self._events: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None

    def push(self, event: Event) -> None:
        self._events.append(event)
        self._wake()

    def fail(self, error: Exception) -> None:
        self._error = error
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            while self._events:
                yield self._events.popleft()
            if self._error is not None:
                raise self._error
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

    def fail(self, tenant: str, task_id: str, error: Exception) -> None:
        for sub in self.subscribers.get((tenant, task_id), ()):
            sub.fail(error)


class Journal:
    """Group commit with `in_flight` commits under way at once, published in order.

    While one batch commits, the next gathers and starts committing on another connection, so
    a request never waits for a commit it is not in. The store keeps the newest snapshot
    whatever order commits finish in; publication waits for every earlier batch, so followers
    see a task's events in order.
    """

    def __init__(self, store: TaskStore, bus: EventBus, *, in_flight: int = 2) -> None:
        self._store = store
        self._bus = bus
        self._pending: list[tuple[TaskWrite, asyncio.Future[None]]] = []
        self._wakeup = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(in_flight)
        self._published: asyncio.Future[None] | None = None  # the latest batch's publication
        self._flushes: set[asyncio.Task[None]] = set()
        self._outage = RepeatedFailure(log, "journal: writing task events", settle_seconds=1.0)

    def start(self) -> None:
        self._flusher = asyncio.create_task(self._run(), name="journal-flusher")

    async def stop(self) -> None:
        """Flush what is pending, then stop."""
        if self._flusher is None:
            return
        self._flusher.cancel()
        await asyncio.gather(self._flusher, return_exceptions=True)
        self._flusher = None
        while self._pending:
            await self._launch()
        await asyncio.gather(*self._flushes, return_exceptions=True)

    def append(self, write: TaskWrite) -> asyncio.Future[None]:
        """Queue events and the snapshot they lead to; the future resolves once durable."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((write, done))
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
                await self._launch()

    async def _launch(self) -> None:
        """Start committing everything pending once a commit slot is free."""
        await self._slots.acquire()
        batch, self._pending = self._pending, []
        earlier, published = self._published, asyncio.get_running_loop().create_future()
        self._published = published
        flush = asyncio.create_task(self._flush(batch, earlier, published))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushes.discard)

    async def _flush(
        self,
        batch: list[tuple[TaskWrite, asyncio.Future[None]]],
        earlier: asyncio.Future[None] | None,
        published: asyncio.Future[None],
    ) -> None:
        try:
            failed = await self._write(batch)
            if earlier is not None:
                await earlier
            self._publish([(w, done) for w, done in batch if w not in failed])
            for write, done in batch:
                if write in failed and not done.done():
                    done.set_exception(failed[write])
                    # Marked retrieved: many writes are never awaited (a skill's progress); a
                    # failure is logged here and shows in the task's outcome, not as
                    # "exception was never retrieved". An awaiting caller still gets it.
                    done.exception()
                    if unreachable(failed[write]):  # else the runner stores why at once
                        self._bus.fail(write.tenant, write.task.id, _unavailable(write))
        finally:
            published.set_result(None)
            self._slots.release()

    async def _write(
        self, batch: list[tuple[TaskWrite, asyncio.Future[None]]]
    ) -> dict[TaskWrite, Exception]:
        """Write the batch; return the writes that failed, with why."""
        try:
            await self._store.write([w for w, _ in batch])
            self._outage.succeeded()
            return {}
        except Exception as exc:
            if database_unreachable(exc):  # so is every write of the batch: once per outage
                self._outage.failed()
                return dict.fromkeys((w for w, _ in batch), exc)
            # One bad write must not sink the others: write each task's events on its own.
            log.warning(
                "journal: a batch of %d writes failed; retrying them one by one", len(batch)
            )
        failed: dict[TaskWrite, Exception] = {}
        for write, _ in batch:
            try:
                await self._store.write([write])
            except TaskConflict as exc:  # expected when workers race: the caller decides again
                log.info("journal: %s", exc)
                failed[write] = exc
            except Exception as exc:
                log.exception("journal: writing events of task %s failed", write.task.id)
                failed[write] = exc
        return failed

    def _publish(self, batch: list[tuple[TaskWrite, asyncio.Future[None]]]) -> None:
        by_task: dict[tuple[str, str], list[Event]] = defaultdict(list)
        for write, _ in batch:
            by_task[(write.tenant, write.task.id)].extend(write.events)
            if write.on_stored is not None:  # what answers show moves on with what is live
                write.on_stored(write)
        for (tenant, task_id), events in by_task.items():
            self._bus.publish(tenant, task_id, events)
        for _, done in batch:
            if not done.done():
                done.set_result(None)


def _unavailable(write: TaskWrite) -> TaskUnavailableError:
    """What a client following a task is told when its events could not be stored (the
    database is unreachable, most likely): answered at once, not after the outage."""
    return TaskUnavailableError(
        f"task {write.task.id}: its events could not be stored (the database may be"
        " unreachable); retry shortly"
    )

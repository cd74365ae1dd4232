"""The task service: what the JSON-RPC methods do to tasks, for one tenant at a time.

Tasks that are queued or running live in memory as `ActiveTask`s (the runner owns them);
every other task is read from the store when needed. Every change goes through
`states.apply` and is appended to the journal, which makes it durable and then live.
"""

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agentic_rag.ids import new_id
from agentic_rag.observability import metrics as observed
from agentic_rag.schema.a2a import (
    Message,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from agentic_rag.schema.compat import PushConfig, SendParams
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.skills import SkillRegistry
from agentic_rag.storage.cluster import WORKER_LOCK_CLASS, Cluster
from agentic_rag.tasks import states
from agentic_rag.tasks.calls import OUTPUT_MODES, CallReader, Invocation, accepts_output
from agentic_rag.tasks.errors import (
    OutputNotAcceptedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskRequestError,
    TaskUnavailableError,
)
from agentic_rag.tasks.journal import EventBus, Journal, Subscription
from agentic_rag.tasks.parts import agent_text, has_message, with_history
from agentic_rag.tasks.push import PushNotifier, validate_config
from agentic_rag.tasks.store import Event, StoredTask, TaskConflict, TaskStore, TaskWrite

log = logging.getLogger(__name__)

# How long `tasks/cancel` waits for another worker to stop a task it runs.
REMOTE_CANCEL_SECONDS = 10.0
# How long a follower of another worker's task waits for news before reading the log anyway
# (a notification lost with a dropped connection then costs this much delay, not a hang).
REMOTE_POLL_SECONDS = 5.0
# How long a message handed on to the worker that runs its task may take to be stored.
REMOTE_MESSAGE_SECONDS = 10.0
# The namespace of follow-up task ids (`follow_up_id`).
FOLLOW_UPS = uuid.UUID("5d0c8f3e-8a4b-4c1e-9d59-2f0b7a6c3e41")


@dataclass
class ActiveTask:
    tenant: str
    task: Task
    last_seq: int
    runner: asyncio.Task[None] | None = None
    started: bool = (
        False  # whether the runner's coroutine has begun (it can be cancelled only then)
    )
    cancel_requested: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    written: asyncio.Future[None] | None = None  # the journal write of the latest events
    journaled: TaskWrite | None = None  # what that write holds
    invocation: Invocation | None = None  # resolved when the message was accepted

    async def durable(self) -> "ActiveTask":
        """Wait until what this task shows is in the database, so clients see no state that
        a crash could take back."""
        while self.written is not None and not self.written.done():
            await asyncio.shield(self.written)
        return self

    def snapshot_json(self, history_length: int | None = None) -> str:
        """The task as JSON, as `with_history` cuts it; the journal made it once already."""
        journaled = self.journaled
        if history_length is None and journaled is not None and journaled.task is self.task:
            return journaled.snapshot_json
        return with_history(self.task, history_length).model_dump_json(
            by_alias=True, exclude_none=True
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.tenant, self.task.id)


@dataclass
class Accepted:
    """A task created or continued by a message: its snapshot at `seq`, and its events after.

    `relayed`: another worker runs the task, so `task` stays as accepted; its events come
    from the log."""

    task: ActiveTask
    snapshot: Task
    seq: int
    events: Subscription | None
    relayed: bool = False


Reply = Literal["final", "created", "stream"]


class Relayed:
    """A `Subscription` to the events of a task that another worker runs, read from the log
    (`TaskService._follow_elsewhere`)."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._closing: asyncio.Future[None] | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    def close(self) -> None:
        # An async generator closes asynchronously; closing it leaves its watch of the task.
        self._closing = asyncio.ensure_future(self._events.aclose())


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


def serialize(event: states.TaskEvent, seq: int) -> Event:
    final = isinstance(event, TaskStatusUpdateEvent) and event.final
    return Event(seq, event.kind, final, event.model_dump_json(by_alias=True, exclude_none=True))


def final_status(task: Task) -> Event:
    """The status-update that tells a follower a settled task's state; not logged (no seq)."""
    final = states.status_event(task, task.status.state)
    return serialize(final.model_copy(update={"status": task.status}), 0)


def follow_up_id(task_id: str, message_id: str) -> str:
    """The id of the task that message `message_id` to the final task `task_id` starts: the
    same for every retry of the message, so that one follow-up runs, once."""
    return uuid.uuid5(FOLLOW_UPS, f"{task_id}\n{message_id}").hex


class TaskService:
    def __init__(
        self,
        store: TaskStore,
        journal: Journal,
        bus: EventBus,
        registry: SkillRegistry,
        queue: WorkQueue,
        notifier: PushNotifier | None,
        guard: SSRFGuard,
        cluster: Cluster,
        *,
        read_call: CallReader,
    ) -> None:
        self.store, self.journal, self.bus, self.cluster = store, journal, bus, cluster
        self.read_call = read_call
        self.registry, self.queue, self.notifier, self.guard = registry, queue, notifier, guard
        self.active: dict[tuple[str, str], ActiveTask] = {}
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._background: set[asyncio.Task[None]] = set()
        cluster.take_messages(runs_here=self.runs_here, take=self.take_message)

    # -- changing tasks --------------------------------------------------------------------

    def emit(self, active: ActiveTask, *events: states.TaskEvent) -> asyncio.Future[None]:
        """Apply `events` to the task and journal them; the future resolves once durable."""
        logged = []
        for event in events:
            before = active.task.status.state if active.last_seq else None
            active.task = states.apply(active.task if active.last_seq else None, event)
            if active.task.status.state is not before:  # messages and artifacts change none
                observed.record_task_state(active.task.status.state.value)
            active.last_seq += 1
            logged.append(serialize(event, active.last_seq))
        active.journaled = TaskWrite(active.tenant, active.task, active.last_seq, logged)
        active.written = self.journal.append(active.journaled)
        return active.written

    def _lock(self, tenant: str, task_id: str) -> asyncio.Lock:
        lock = self._locks.get((tenant, task_id))
        if lock is None:
            lock = self._locks[(tenant, task_id)] = asyncio.Lock()
        return lock

    async def _load(self, tenant: str, task_id: str) -> ActiveTask | None:
        active = self.active.get((tenant, task_id))
        if active is not None:
            return await active.durable()
        stored = await self.store.get(tenant, task_id)
        return None if stored is None else ActiveTask(tenant, stored.task, stored.last_seq)

    # -- message/send and message/stream ---------------------------------------------------

    async def send(self, tenant: str, params: SendParams, *, reply: Reply) -> Accepted:
        """Create or continue the task `params.message` is for.

        `reply` says what the caller will be shown: the task as it ends ("final", a blocking
        send), as created ("created"), or both and all between ("stream"). For "final" and
        "stream" the result subscribes to the task's events before any is produced.

        A message to a paused task continues it; to a task in progress, it joins the history
        and the task is answered as it stands; to a final task, it starts a follow-up task.
        """
        message, config = params.message, params.configuration
        if message.role is not Role.user:
            raise TaskRequestError("a message sent to an agent must have role 'user'")
        push_config = config.push_notification_config if config else None
        if push_config is not None:
            self._check_push_config(push_config)
        if config and not accepts_output(config.accepted_output_modes):
            raise OutputNotAcceptedError(
                f"this agent answers with {', '.join(OUTPUT_MODES)}; "
                f"none is in acceptedOutputModes {config.accepted_output_modes}"
            )
        if message.task_id is None:
            return await self._create(tenant, new_id(), message, push_config, reply)
        async with self._lock(tenant, message.task_id):
            while True:
                try:
                    existing = await self._load(tenant, message.task_id)
                    if existing is None:  # a client-chosen id (§12.3)
                        return await self._create(
                            tenant, message.task_id, message, push_config, reply, claim=True
                        )
                    return await self._continue(existing, message, push_config, reply)
                except TaskConflict:
                    # Another worker created, continued or ended the task first: decide again
                    # from what it stored (a retry of the same message, or a task moved on).
                    continue

    async def _create(
        self,
        tenant: str,
        task_id: str,
        message: Message,
        push: PushConfig | None,
        reply: Reply,
        *,
        claim: bool = False,
    ) -> Accepted:
        """Create a task; with `claim` (a client-chosen id, which another worker may be
        creating too), queue it only once its creation is durably this one."""
        context_id = message.context_id or new_id()
        message = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        invocation = self.read_call([message])
        invocation.check()
        task = Task(
            id=task_id,
            context_id=context_id,
            kind="task",
            status=TaskStatus(state=TaskState.submitted, timestamp=states.now()),
            history=[message],
        )
        active = ActiveTask(tenant, task, 0, invocation=invocation)
        durable = self.emit(active, task)
        events = self.bus.subscribe(tenant, task_id) if reply != "created" else None
        self.active[active.key] = active
        try:
            if reply != "final" or claim:
                # The caller sees the task as created, so that must be durable first; a
                # blocking caller only sees the end, which the journal commits after the
                # creation anyway.
                await durable
            if push is not None:
                await self._save_push_config(tenant, task_id, push)
        except BaseException:
            self.active.pop(active.key, None)
            if events is not None:
                events.close()
            raise
        await self.queue.put(Job(tenant, task_id))
        return Accepted(active, task, active.last_seq, events)

    async def _continue(
        self, active: ActiveTask, message: Message, push: PushConfig | None, reply: Reply
    ) -> Accepted:
        task = active.task
        if message.context_id is not None and message.context_id != task.context_id:
            raise TaskRequestError(
                f"task {task.id} belongs to context {task.context_id}, not {message.context_id}"
            )
        if has_message(task, message.message_id):
            # A retry of a message the task already has: answer with the task as it is.
            return self._accepted(active, follow=reply != "created")
        state = task.status.state
        if state in states.TERMINAL:
            return await self._follow_up(active, message, push, reply)
        message = message.model_copy(update={"task_id": task.id, "context_id": task.context_id})
        invocation = self.read_call([*(task.history or []), message])
        invocation.check()
        if state in states.PAUSED:
            return await self._resume(active, message, invocation, push, reply)
        if active.key in self.active:
            return await self._append(active, message, push, reply)
        return await self._hand_over(active, message, push, reply)

    async def _resume(
        self,
        active: ActiveTask,
        message: Message,
        invocation: Invocation,
        push: PushConfig | None,
        reply: Reply,
    ) -> Accepted:
        """Continue a paused task with the client's message: its skill runs again."""
        task = active.task
        events = self.bus.subscribe(active.tenant, task.id) if reply != "created" else None
        try:
            # The message and `working` are stored together, before the task runs: another
            # worker may be continuing (or canceling) the same paused task, and only the first
            # to store its events goes on; the others then see it working.
            await self.emit(active, message, states.status_event(task, TaskState.working))
            if push is not None:
                await self._save_push_config(active.tenant, task.id, push)
        except BaseException:
            if events is not None:
                events.close()
            raise
        active.done = asyncio.Event()
        active.invocation = invocation
        self.active[active.key] = active
        await self.queue.put(Job(active.tenant, task.id))
        return Accepted(active, active.task, active.last_seq, events)

    async def _append(
        self, active: ActiveTask, message: Message, push: PushConfig | None, reply: Reply
    ) -> Accepted:
        """A message to a task in progress here joins its history, where the skill reads it
        (`ctx.texts`). The answer is the task as it stands; a stream goes on with its events."""
        await self.emit(active, message)
        if push is not None:
            await self._save_push_config(active.tenant, active.task.id, push)
        return self._accepted(await active.durable(), follow=reply == "stream")

    async def _hand_over(
        self, stored: ActiveTask, message: Message, push: PushConfig | None, reply: Reply
    ) -> Accepted:
        """A message to a task in progress on another worker: that worker appends it (see
        `take_message`); the answer comes once it is stored, as `_append`'s does.

        Raises `TaskConflict` when the task moves on first (paused, final, or taken over by
        this worker from one that is gone): the caller decides again from what is stored.
        """
        tenant, task_id = stored.key
        await self.recover()  # the worker that ran it may be gone
        if stored.key in self.active:
            raise TaskConflict(f"task {task_id} is now this worker's")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REMOTE_MESSAGE_SECONDS
        raw = message.model_dump_json(by_alias=True, exclude_none=True).encode()
        with self.cluster.watch(tenant, task_id) as changed:
            await self.cluster.hand_message(tenant, task_id, raw)
            while True:
                changed.clear()
                current = await self.store.get(tenant, task_id)
                assert current is not None  # tasks are never deleted
                if has_message(current.task, message.message_id):
                    break
                if current.task.status.state not in states.IN_PROGRESS or stored.key in self.active:
                    raise TaskConflict(f"task {task_id} moved on before it took the message")
                if loop.time() >= deadline:
                    raise TaskUnavailableError(
                        f"task {task_id} runs on another worker, which did not take the message "
                        f"within {REMOTE_MESSAGE_SECONDS:.0f} s; send it again (a messageId "
                        "joins a task once)"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), deadline - loop.time())
        if push is not None:
            await self._save_push_config(tenant, task_id, push)
        return self._accepted(
            ActiveTask(tenant, current.task, current.last_seq), follow=reply == "stream"
        )

    def runs_here(self, tenant: str, task_id: str) -> bool:
        return (tenant, task_id) in self.active

    def take_message(self, tenant: str, task_id: str, raw: bytes) -> None:
        """Another worker hands on a client's message to a task in progress here."""
        active = self.active.get((tenant, task_id))
        if active is None:
            return  # it settled meanwhile: the other worker sees that and decides again
        message = Message.model_validate_json(raw)
        task = active.task
        if task.status.state in states.IN_PROGRESS and not has_message(task, message.message_id):
            self.emit(active, message)

    async def _follow_up(
        self, final: ActiveTask, message: Message, push: PushConfig | None, reply: Reply
    ) -> Accepted:
        """A message to a final task starts a new task in the same context whose message
        references the final one (`referenceTaskIds`, as the spec asks clients to do, §12.4);
        the final task stays as it is."""
        old = final.task
        task_id = follow_up_id(old.id, message.message_id)
        references = list(dict.fromkeys([*(message.reference_task_ids or []), old.id]))
        message = message.model_copy(
            update={
                "task_id": task_id,
                "context_id": old.context_id,
                "reference_task_ids": references,
            }
        )
        existing = await self._load(final.tenant, task_id)
        if existing is not None:  # a retry: this message has started its follow-up already
            return await self._continue(existing, message, push, reply)
        return await self._create(final.tenant, task_id, message, push, reply, claim=True)

    def _accepted(self, active: ActiveTask, *, follow: bool) -> Accepted:
        """The task as it stands; with `follow`, also its events from now on until the cycle
        ends, from this worker's runner or, when another worker runs it, from the log."""
        task, seq = active.task, active.last_seq
        if not follow or states.is_final(task.status.state):
            return Accepted(active, task, seq, None)
        if active.key in self.active:
            return Accepted(active, task, seq, self.bus.subscribe(active.tenant, task.id))
        relayed = Relayed(self._follow_elsewhere(active.tenant, task.id, seq))
        return Accepted(active, task, seq, relayed, relayed=True)

    # -- tasks/get, tasks/cancel, tasks/resubscribe ----------------------------------------

    async def get(self, tenant: str, task_id: str) -> Task:
        stored = await self.store.get(tenant, task_id)
        if stored is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        return stored.task

    async def cancel(self, tenant: str, task_id: str) -> Task:
        while True:
            async with self._lock(tenant, task_id):
                active = await self._load(tenant, task_id)
                if active is None:
                    raise TaskNotFoundError(f"task {task_id} not found")
                state = active.task.status.state
                if state in states.TERMINAL:
                    raise TaskNotCancelableError(f"task {task_id} is already {state.value}")
                if active.key not in self.active and state not in states.PAUSED:
                    break  # submitted or working on another worker
                if active.runner is not None and active.started:
                    # The runner records `canceled` when the skill stops (see Runner._execute).
                    active.cancel_requested = True
                    active.runner.cancel()
                    await active.done.wait()
                    return active.task
                try:
                    await self.emit(active, states.status_event(active.task, TaskState.canceled))
                except TaskConflict:
                    continue  # another worker continued or canceled the paused task first
                self.active.pop(active.key, None)
                active.done.set()
            await self.notify(active)
            return active.task
        return await self._cancel_elsewhere(tenant, task_id)

    async def _cancel_elsewhere(self, tenant: str, task_id: str) -> Task:
        """Cancel a task that another worker runs, or ran before it went away."""
        await self.recover()  # a task of a worker that is gone becomes this worker's
        if (tenant, task_id) in self.active:
            return await self.cancel(tenant, task_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REMOTE_CANCEL_SECONDS
        with self.cluster.watch(tenant, task_id) as changed:
            await self.cluster.request_cancel(tenant, task_id)
            while True:
                changed.clear()
                stored = await self.store.get(tenant, task_id)
                assert stored is not None  # tasks are never deleted
                state = stored.task.status.state
                if state in states.TERMINAL - {TaskState.canceled}:
                    raise TaskNotCancelableError(
                        f"task {task_id} became {state.value} before it could be canceled"
                    )
                if state is TaskState.canceled or loop.time() >= deadline:
                    # "The server will attempt to cancel; success is not guaranteed": a task
                    # still working after the wait is answered as it stands.
                    return stored.task
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), deadline - loop.time())

    def cancel_requested(self, tenant: str, task_id: str) -> None:
        """Another worker asks to cancel a task: stop it if it runs here."""
        if (tenant, task_id) not in self.active:
            return

        async def cancel() -> None:
            with contextlib.suppress(TaskNotFoundError, TaskNotCancelableError):
                await self.cancel(tenant, task_id)  # unless it ended meanwhile

        task = asyncio.create_task(cancel(), name=f"cancel {task_id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def follow(self, tenant: str, task_id: str, after: int | None) -> AsyncIterator[Event]:
        """The events of a task for `tasks/resubscribe`.

        Without `after`: the current snapshot, then live events. With `after` (the client's
        Last-Event-ID): exactly the logged events after it, then live events. A task that is
        final or paused ends the stream once it has been told.
        """
        events = self.bus.subscribe(tenant, task_id)
        try:
            stored = await self.store.get(tenant, task_id)
            if stored is None:
                raise TaskNotFoundError(f"task {task_id} not found")
            settled = states.is_final(stored.task.status.state)
            last = stored.last_seq
            if after is None:
                snapshot = stored.task.model_dump_json(by_alias=True, exclude_none=True)
                yield Event(stored.last_seq, "task", False, snapshot)
                if settled:
                    yield final_status(stored.task)
                    return
            else:
                told = False
                for event in await self.store.events_after(tenant, task_id, after):
                    last = max(last, event.seq)
                    if event.streamed:
                        told = True
                        yield event
                if settled:
                    if not told:  # the client has seen it all: say again how the task stands
                        yield final_status(stored.task)
                    return
            if (tenant, task_id) not in self.active:  # another worker runs it
                events.close()
                async for event in self._follow_elsewhere(tenant, task_id, last):
                    yield event
                return
            async for event in events:
                if event.seq <= last:
                    continue
                if event.streamed:
                    yield event
                if event.final:
                    return
        finally:
            events.close()

    async def _follow_elsewhere(
        self, tenant: str, task_id: str, last: int
    ) -> AsyncGenerator[Event, None]:
        """The events after `last` of a task that another worker runs, read from the log
        whenever a commit of that task is announced."""
        with self.cluster.watch(tenant, task_id) as changed:
            while True:
                changed.clear()
                for event in await self.store.events_after(tenant, task_id, last):
                    last = event.seq
                    if event.streamed:
                        yield event
                    if event.final:
                        return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), REMOTE_POLL_SECONDS)

    # -- push notification configs ---------------------------------------------------------

    def _check_push_config(self, config: PushConfig) -> None:
        try:
            validate_config(config, self.guard)
        except ValueError as exc:
            raise TaskRequestError(f"pushNotificationConfig refused: {exc}") from None

    async def _save_push_config(self, tenant: str, task_id: str, config: PushConfig) -> PushConfig:
        if config.id is None:
            config = config.model_copy(update={"id": new_id()})
        await self.store.put_push_config(tenant, task_id, config)
        return config

    async def set_push_config(self, tenant: str, task_id: str, config: PushConfig) -> PushConfig:
        self._check_push_config(config)
        if await self._load(tenant, task_id) is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        return await self._save_push_config(tenant, task_id, config)

    async def push_configs(self, tenant: str, task_id: str) -> list[PushConfig]:
        if await self._load(tenant, task_id) is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        return await self.store.push_configs(tenant, task_id)

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        """Delete one config of a task; a config id the task does not have is deleted already
        (deletes are idempotent, so a retried delete succeeds)."""
        if await self._load(tenant, task_id) is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        await self.store.delete_push_config(tenant, task_id, config_id)

    async def notify(self, active: ActiveTask) -> None:
        """Send the task to its webhooks; called once it is durably final or paused."""
        if self.notifier is None or active.journaled is None or not active.journaled.push:
            return  # the commit that settled the task found no push configs
        configs = await self.store.push_configs(active.tenant, active.task.id)
        if configs:
            self.notifier.notify(active.task, configs)

    # -- recovery --------------------------------------------------------------------------

    def _resumable(self, task: Task) -> bool:
        try:
            return self.read_call(task.history or []).skill.resumable
        except TaskRequestError:
            return False

    async def recover(self) -> tuple[int, int]:
        """Take over the unfinished tasks of workers that are gone (this one's previous
        process included): requeue those that never started and those of resumable skills,
        fail the others left working."""
        requeued = failed = 0
        for tenant, stored in await self.store.claim_orphans(WORKER_LOCK_CLASS):
            if (tenant, stored.task.id) in self.active:
                continue  # queued here already
            if await self._recover(tenant, stored):
                requeued += 1
            else:
                failed += 1
        if requeued or failed:
            log.info("recovered tasks: %d requeued, %d failed as interrupted", requeued, failed)
        return requeued, failed

    async def _recover(self, tenant: str, stored: StoredTask) -> bool:
        active = ActiveTask(tenant, stored.task, stored.last_seq)
        if stored.task.status.state is TaskState.submitted:
            self.active[active.key] = active
            await self.queue.put(Job(tenant, stored.task.id))
            return True
        if self._resumable(stored.task):
            # A long job that keeps its progress in the database: run it again, and it
            # continues where it was.
            self.active[active.key] = active
            resuming = agent_text(
                "Resuming after the server that ran this task stopped.", active.task
            )
            await self.emit(active, states.status_event(active.task, TaskState.working, resuming))
            await self.queue.put(Job(tenant, stored.task.id))
            return True
        reason = agent_text(
            "The server stopped while this task was running; its work is lost. "
            "Send the message again to retry.",
            stored.task,
        )
        await self.emit(active, states.status_event(active.task, TaskState.failed, reason))
        await self.notify(active)
        return False

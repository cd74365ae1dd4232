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
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from agentic_rag.ids import new_id
from agentic_rag.observability import metrics as observed
from agentic_rag.schema.a2a import (
    Message,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from agentic_rag.schema.base import changed
from agentic_rag.schema.compat import PushConfig, SendParams
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.skills import SkillRegistry
from agentic_rag.storage.cluster import WORKER_LOCK_CLASS, Cluster
from agentic_rag.tasks import states
from agentic_rag.tasks.active import ActiveTask, ActiveTasks
from agentic_rag.tasks.calls import (
    OUTPUT_MODES,
    CallReader,
    Groups,
    Invocation,
    accepts_output,
    permit,
    stamped,
)
from agentic_rag.tasks.errors import (
    OutputNotAcceptedError,
    TaskEndedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskRequestError,
)
from agentic_rag.tasks.journal import EventBus, Journal, Subscription
from agentic_rag.tasks.outcomes import (
    CREATED_AT,
    Outcome,
    Started,
    TaskView,
    outcome_of,
    progress_texts,
    view_of,
)
from agentic_rag.tasks.parts import agent_text, data_part, final_status, has_message, serialize
from agentic_rag.tasks.push import PushNotifier
from agentic_rag.tasks.push_configs import PushConfigs
from agentic_rag.tasks.relay import Relay, Relayed
from agentic_rag.tasks.store import Event, StoredTask, TaskConflict, TaskStore, TaskWrite

log = logging.getLogger(__name__)

# How long a cancel waits for a running skill to stop before it records `canceled` itself.
CANCEL_GRACE_SECONDS = 0.5
CANCELED = "Canceled at the client's request."

# The namespace of follow-up task ids (`follow_up_id`).
FOLLOW_UPS = uuid.UUID("5d0c8f3e-8a4b-4c1e-9d59-2f0b7a6c3e41")


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
        work: ActiveTasks,
        notifier: PushNotifier | None,
        guard: SSRFGuard,
        cluster: Cluster,
        *,
        read_call: CallReader,
    ) -> None:
        self.store, self.journal, self.bus, self.cluster = store, journal, bus, cluster
        self.read_call = read_call
        self.registry, self.work = registry, work
        self.push = PushConfigs(store, notifier, guard)
        self.relay = Relay(store, cluster)
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._background: set[asyncio.Task[None]] = set()
        cluster.take_messages(runs_here=work.runs_here, take=self.take_message)

    # -- changing tasks --------------------------------------------------------------------

    def emit(self, active: ActiveTask, *events: states.TaskEvent) -> asyncio.Future[None]:
        """Apply `events` to the task and journal them; the future resolves once durable."""
        logged = []
        for event in events:
            task = active.task if active.last_seq else None
            active.task = states.apply(task, event)
            after = active.task
            if task is None or after.status.state is not task.status.state:
                # A TaskState is its name (a StrEnum): no `.value`, a Python property.
                observed.record_task_state(after.status.state)
            active.last_seq += 1
            if (
                task is None
                or after.history is not task.history
                or after.artifacts is not (task.artifacts)
            ):
                active.body_seq = active.last_seq  # more than the status changed
            logged.append(serialize(event, active.last_seq))
        active.journaled = TaskWrite(
            active.tenant,
            active.task,
            active.last_seq,
            logged,
            # The body goes with every write until a write that holds it is durable: commits
            # may fail, or finish out of order.
            body=active.body_seq > active.stored_seq,
            on_stored=active.stored,
        )
        active.written = self.journal.append(active.journaled)
        return active.written

    def _lock(self, tenant: str, task_id: str) -> asyncio.Lock:
        lock = self._locks.get((tenant, task_id))
        if lock is None:
            lock = self._locks[(tenant, task_id)] = asyncio.Lock()
        return lock

    async def _load(self, tenant: str, task_id: str) -> ActiveTask | None:
        active = self.work.get(tenant, task_id)
        if active is not None:
            return await active.durable()
        stored = await self.store.get(tenant, task_id)
        return None if stored is None else ActiveTask(tenant, stored.task, stored.last_seq)

    # -- message/send and message/stream ---------------------------------------------------

    async def send(
        self,
        tenant: str,
        params: SendParams,
        *,
        groups: Groups,
        reply: Reply,
        follow_ups: bool = True,
        context_id: str | None = None,
    ) -> Accepted:
        """Create or continue the task `params.message` is for, for a credential that selects
        `groups` of tools: a message that would run a skill outside them is refused
        (`SkillForbiddenError`) before any task exists or changes, and a task it creates runs
        with them.

        `reply` says what the caller will be shown: the task as it ends ("final", a blocking
        send), as created ("created"), or both and all between ("stream"). For "final" and
        "stream" the result subscribes to the task's events before any is produced.

        A message to a paused task continues it; to a task in progress, it joins the history
        and the task is answered as it stands; to a final task, it starts a follow-up task.
        Without `follow_ups` (A2A 1.0), a message naming an unknown task is refused with
        TaskNotFoundError and one naming a final task with TaskEndedError, decided under the
        task's lock (so a task that ends meanwhile is never followed up).
        `context_id`: the context a new task goes in when the message names none (the
        caller's session, `SessionStore.admit`); else a new one.
        """
        message, config = params.message, params.configuration
        if message.role is not Role.user:
            raise TaskRequestError("a message sent to an agent must have role 'user'")
        push_config = config.push_notification_config if config else None
        if push_config is not None:
            self.push.check(push_config)
        if config and not accepts_output(config.accepted_output_modes):
            raise OutputNotAcceptedError(
                f"this agent answers with {', '.join(OUTPUT_MODES)}; "
                f"none is in acceptedOutputModes {config.accepted_output_modes}"
            )
        return await self._accept(
            tenant,
            message,
            push_config,
            reply,
            groups=groups,
            follow_ups=follow_ups,
            context_id=context_id,
        )

    async def _accept(
        self,
        tenant: str,
        message: Message,
        push: PushConfig | None,
        reply: Reply,
        invocation: Invocation | None = None,
        *,
        groups: Groups,
        follow_ups: bool = True,
        context_id: str | None = None,
    ) -> Accepted:
        """Create or continue the task of a checked `message` (`invocation`: the skill call
        it starts, when the caller knows it; `groups` and `context_id` as `send` says)."""
        if message.task_id is None:
            return await self._create(
                tenant,
                new_id(),
                message,
                push,
                reply,
                invocation,
                groups=groups,
                context_id=context_id,
            )
        async with self._lock(tenant, message.task_id):
            while True:
                try:
                    existing = await self._load(tenant, message.task_id)
                    if existing is None and not follow_ups:
                        raise TaskNotFoundError(f"task {message.task_id} not found")
                    if existing is None:  # a client-chosen id (§12.3)
                        return await self._create(
                            tenant,
                            message.task_id,
                            message,
                            push,
                            reply,
                            invocation,
                            groups=groups,
                            claim=True,
                        )
                    return await self._continue(
                        existing, message, push, reply, groups=groups, follow_ups=follow_ups
                    )
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
        invocation: Invocation | None = None,
        *,
        groups: Groups,
        claim: bool = False,
        context_id: str | None = None,
    ) -> Accepted:
        """Create a task in the message's context, else in `context_id`, else in a new one,
        if `groups` allow its skill; with `claim` (a client-chosen id, which another worker may
        be creating too), queue it only once its creation is durably this one."""
        context_id = message.context_id or context_id or new_id()
        message = changed(message, task_id=task_id, context_id=context_id)
        if invocation is None:
            invocation = self.read_call([message])
        permit(groups, invocation.skill)
        message = stamped(message, groups)
        arguments = invocation.check()
        task = Task(
            id=task_id,
            context_id=context_id,
            kind="task",
            status=TaskStatus(state=TaskState.submitted, timestamp=states.now()),
            history=[message],
        )
        active = ActiveTask(tenant, task, 0, invocation=invocation, arguments=arguments)
        durable = self.emit(active, task)
        events = self.bus.subscribe(tenant, task_id) if reply != "created" else None
        self.work.hold(active)
        try:
            if reply != "final" or claim:
                # The caller sees the task as created, so that must be durable first; a
                # blocking caller only sees the end, which the journal commits after the
                # creation anyway.
                await durable
            if push is not None:
                await self.push.save(tenant, task_id, push)
        except BaseException:
            self.work.release(active)
            if events is not None:
                events.close()
            raise
        await self.work.queue(active)
        return Accepted(active, task, active.last_seq, events)

    async def _continue(
        self,
        active: ActiveTask,
        message: Message,
        push: PushConfig | None,
        reply: Reply,
        *,
        groups: Groups,
        follow_ups: bool = True,
    ) -> Accepted:
        """A message to an existing task: a retry, a follow-up of a final task, or the
        continuation of an open one, whose skill `groups` must allow; the task runs on with
        the groups of the credential that created it."""
        task = active.task
        if message.context_id is not None and message.context_id != task.context_id:
            raise TaskRequestError(
                f"task {task.id} belongs to context {task.context_id}, not {message.context_id}"
            )
        if has_message(task, message):
            # A retry of a message the task already has: answer with the task as it is.
            return self._accepted(active, follow=reply != "created")
        state = task.status.state
        if state in states.TERMINAL:
            if not follow_ups:
                raise TaskEndedError(
                    f"task {task.id} is {state.value} and takes no more messages; "
                    "send a new message in its context (contextId) instead"
                )
            return await self._follow_up(active, message, push, reply, groups)
        message = message.model_copy(update={"task_id": task.id, "context_id": task.context_id})
        invocation = self.read_call([*(task.history or []), message])
        permit(groups, invocation.skill)
        arguments = invocation.check()
        if state in states.PAUSED:
            return await self._resume(active, message, invocation, arguments, push, reply)
        if self.work.runs_here(*active.key):
            return await self._append(active, message, push, reply)
        return await self._hand_over(active, message, push, reply)

    async def _resume(
        self,
        active: ActiveTask,
        message: Message,
        invocation: Invocation,
        arguments: BaseModel | None,
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
                await self.push.save(active.tenant, task.id, push)
        except BaseException:
            if events is not None:
                events.close()
            raise
        active.done = asyncio.Event()
        active.invocation, active.arguments = invocation, arguments
        await self.work.queue(active)
        return Accepted(active, active.task, active.last_seq, events)

    async def _append(
        self, active: ActiveTask, message: Message, push: PushConfig | None, reply: Reply
    ) -> Accepted:
        """A message to a task in progress here joins its history, where the skill reads it
        (`ctx.texts`). The answer is the task as it stands; a stream goes on with its events."""
        await self.emit(active, message)
        if push is not None:
            await self.push.save(active.tenant, active.task.id, push)
        return self._accepted(active, follow=reply == "stream")

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
        if self.work.runs_here(tenant, task_id):
            raise TaskConflict(f"task {task_id} is now this worker's")
        current = await self.relay.hand_message(
            tenant, task_id, message, here=lambda: self.work.runs_here(tenant, task_id)
        )
        if push is not None:
            await self.push.save(tenant, task_id, push)
        return self._accepted(
            ActiveTask(tenant, current.task, current.last_seq), follow=reply == "stream"
        )

    def take_message(self, tenant: str, task_id: str, raw: bytes) -> None:
        """Another worker hands on a client's message to a task in progress here."""
        active = self.work.get(tenant, task_id)
        if active is None:
            return  # it settled meanwhile: the other worker sees that and decides again
        message = Message.model_validate_json(raw)
        task = active.task
        if task.status.state in states.IN_PROGRESS and not has_message(task, message):
            self.emit(active, message)

    async def _follow_up(
        self,
        final: ActiveTask,
        message: Message,
        push: PushConfig | None,
        reply: Reply,
        groups: Groups,
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
            return await self._continue(existing, message, push, reply, groups=groups)
        return await self._create(
            final.tenant, task_id, message, push, reply, groups=groups, claim=True
        )

    def _accepted(self, active: ActiveTask, *, follow: bool) -> Accepted:
        """The task as it stands (stored); with `follow`, also its events from then on until the
        cycle ends, from this worker's runner or, when another worker runs it, from the log."""
        task, seq = active.stored_task, active.stored_seq
        if not follow or states.is_final(task.status.state):
            return Accepted(active, task, seq, None)
        if self.work.runs_here(*active.key):
            return Accepted(active, task, seq, self.bus.subscribe(active.tenant, task.id))
        relayed = Relayed(self.relay.follow(active.tenant, task.id, seq))
        return Accepted(active, task, seq, relayed, relayed=True)

    # -- skills run as tasks, for callers that are no A2A client -----------------------------

    async def start_skill(
        self,
        tenant: str,
        skill: str,
        arguments: Mapping[str, Any],
        *,
        groups: Groups,
        context_id: str | None = None,
        task_id: str | None = None,
        references: Sequence[str] = (),
        push: PushConfig | None = None,
        follow: bool = False,
    ) -> Started:
        """Start a task of `tenant` that runs `skill` with `arguments`, durably created, for a
        credential that selects `groups` of tools (a skill that starts skills passes on its
        own caller's: `SkillContext.groups`).

        Raises `TaskRequestError` for an unknown skill or wrong arguments (missing ones
        pause the task, which asks for them: `NeedsInput`), `SkillForbiddenError` for a skill
        outside `groups`. A caller-chosen `task_id` makes
        the start idempotent: starting it again answers with the task as it stands.
        `references`: tasks this one follows from. `push`: a webhook told when it settles.
        With `follow`, `Started.progress()` relays its progress from its very start.
        """
        found = self.registry.get(skill)
        if found is None:
            known = ", ".join(s.name for s in self.registry)
            raise TaskRequestError(f"unknown skill {skill!r}; this agent has: {known}")
        if push is not None:
            self.push.check(push)
        # The record is the one an A2A client's message would make, so that the call is read
        # back from it (`read_call`) when the task is recovered or continued.
        message = Message(
            role=Role.user,
            kind="message",
            message_id=task_id or new_id(),  # starting a chosen task again is a retry
            task_id=task_id,
            context_id=context_id,
            reference_task_ids=list(references) or None,
            parts=[data_part({"skill": skill, "arguments": dict(arguments)})],
            metadata={CREATED_AT: states.now()},
        )
        invocation = Invocation(found, dict(arguments), [])
        reply: Reply = "stream" if follow else "created"
        accepted = await self._accept(tenant, message, push, reply, invocation, groups=groups)
        return Started(view_of(accepted.snapshot), accepted.events)

    async def outcome(self, tenant: str, task_id: str, *, wait: bool = False) -> Outcome:
        """How the task stands, a completed one's result as its skill's output model; with
        `wait`, once it has settled (final, or paused for input), whichever worker runs it.

        Raises `TaskNotFoundError`, and `TaskRequestError` for a task whose skill this
        registry does not have."""
        task = await self.get(tenant, task_id)
        if wait and not states.is_final(task.status.state):
            async for _ in self.follow(tenant, task_id, None):
                pass  # ends once the task is final or paused
            task = await self.get(tenant, task_id)
        return outcome_of(self.read_call(task.history or []).skill, task)

    async def progress(self, tenant: str, task_id: str) -> AsyncIterator[str]:
        """The texts of the task's progress from now until it settles."""
        async for text in progress_texts(self.follow(tenant, task_id, None)):
            yield text

    async def skill_of(self, tenant: str, task_id: str) -> str | None:
        """The name of the skill the task runs; None if it names none this registry has."""
        task = await self.get(tenant, task_id)
        try:
            return self.read_call(task.history or []).skill.name
        except TaskRequestError:
            return None

    async def view(self, tenant: str, task_id: str) -> TaskView:
        return view_of(await self.get(tenant, task_id))

    async def views(self, tenant: str, after: str | None, limit: int) -> list[TaskView]:
        """A page of the tenant's tasks, in id order after the id `after`."""
        return [view_of(t) for t in await self.store.page(tenant, after, limit)]

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
                if not self.work.runs_here(*active.key) and state not in states.PAUSED:
                    break  # submitted or working on another worker
                if active.runner is not None and active.started:
                    return await self._stop(active, active.runner)
                try:
                    await self.emit(active, states.status_event(active.task, TaskState.canceled))
                except TaskConflict:
                    continue  # another worker continued or canceled the paused task first
                self.work.release(active)
                active.done.set()
            await self.push.settled(active)
            return active.task
        return await self._cancel_elsewhere(tenant, task_id)

    async def _stop(self, active: ActiveTask, runner: "asyncio.Task[None]") -> Task:
        """Cancel a task whose skill runs here: the runner records `canceled` once the skill
        stops (Runner._execute). A skill still running after CANCEL_GRACE_SECONDS (it ignores
        cancellation, or waits on something that does not give way to it) is not waited for:
        `canceled` is recorded here, the runner drops whatever the skill still returns, and
        the skill is stopped at its next report (`TaskSkillContext`). A skill that has stopped
        is the runner's to settle, however long storing its end takes (the database away)."""
        active.cancel_requested = True
        runner.cancel()
        try:
            async with asyncio.timeout(CANCEL_GRACE_SECONDS):
                await active.done.wait()
        except TimeoutError:
            if active.in_skill and active.task.status.state not in states.TERMINAL:
                log.warning(
                    "task %s: its skill did not stop within %.1f s of the cancel; canceled"
                    " without waiting for it",
                    active.task.id,
                    CANCEL_GRACE_SECONDS,
                )
                await self._cancel_now(active)
            else:
                await active.done.wait()
        return active.stored_task

    async def _cancel_now(self, active: ActiveTask) -> None:
        before = (active.task, active.last_seq)
        said = agent_text(CANCELED, active.task)
        try:
            await self.emit(active, states.status_event(active.task, TaskState.canceled, said))
        except Exception:
            # Not stored: the runner records the end when the skill stops (cancel_requested).
            active.task, active.last_seq = before
            raise
        await self.push.settled(active)

    async def _cancel_elsewhere(self, tenant: str, task_id: str) -> Task:
        """Cancel a task that another worker runs, or ran before it went away."""
        await self.recover()  # a task of a worker that is gone becomes this worker's
        if self.work.runs_here(tenant, task_id):
            return await self.cancel(tenant, task_id)
        return await self.relay.cancel(tenant, task_id)

    def canceling(self, tenant: str, task_id: str) -> bool:
        """Whether a client asked to cancel the task that runs here (its skill is stopping)."""
        return self.work.canceling(tenant, task_id)

    def cancel_requested(self, tenant: str, task_id: str) -> None:
        """Another worker asks to cancel a task: stop it if it runs here."""
        if not self.work.runs_here(tenant, task_id):
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
            if not self.work.runs_here(tenant, task_id):  # another worker runs it
                events.close()
                async for event in self.relay.follow(tenant, task_id, last):
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

    # -- push notification configs ---------------------------------------------------------

    async def set_push_config(self, tenant: str, task_id: str, config: PushConfig) -> PushConfig:
        self.push.check(config)
        await self._require(tenant, task_id)
        return await self.push.save(tenant, task_id, config)

    async def push_configs(self, tenant: str, task_id: str) -> list[PushConfig]:
        await self._require(tenant, task_id)
        return await self.push.of(tenant, task_id)

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        await self._require(tenant, task_id)
        await self.push.delete(tenant, task_id, config_id)

    async def tell_webhook(self, tenant: str, task_id: str, url: str) -> None:
        """Send the task as it stands (durably) to its push config at `url`, if it has one."""
        active = await self._load(tenant, task_id)
        if active is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        await self.push.tell(active.stored_task, tenant, url)

    async def _require(self, tenant: str, task_id: str) -> None:
        if await self._load(tenant, task_id) is None:
            raise TaskNotFoundError(f"task {task_id} not found")

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
        spared = await self.cluster.spared()
        if spared is None:  # this worker holds no lease, or every worker may be renewing its own
            return requeued, failed
        for tenant, stored in await self.store.claim_orphans(WORKER_LOCK_CLASS, spared):
            if self.work.runs_here(tenant, stored.task.id):
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
            await self.work.queue(active)
            return True
        if self._resumable(stored.task):
            # A long job that keeps its progress in the database: run it again, and it
            # continues where it was.
            self.work.hold(active)
            resuming = agent_text(
                "Resuming after the server that ran this task stopped.", active.task
            )
            await self.emit(active, states.status_event(active.task, TaskState.working, resuming))
            await self.work.queue(active)
            return True
        reason = agent_text(
            "The server stopped while this task was running; its work is lost. "
            "Send the message again to retry.",
            stored.task,
        )
        await self.emit(active, states.status_event(active.task, TaskState.failed, reason))
        await self.push.settled(active)
        return False

"""The runner: takes queued tasks and runs their skills, recording what they do as events."""

import asyncio
import logging
from collections.abc import Sequence
from typing import NoReturn

from agentic_rag.ids import new_id
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.schema.a2a import (
    Artifact,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
)
from agentic_rag.skills import (
    AnswerOnly,
    InputRequired,
    ResultPart,
    Skill,
    SkillError,
    SkillRejected,
)
from agentic_rag.skills.metering import SkillCall
from agentic_rag.storage.outage import database_unreachable
from agentic_rag.tasks import states
from agentic_rag.tasks.active import ActiveTask, ActiveTasks
from agentic_rag.tasks.calls import Groups, groups_of
from agentic_rag.tasks.parts import agent_text, attached_artifact, data_part, text_of, text_part
from agentic_rag.tasks.service import CANCELED, TaskService

log = logging.getLogger(__name__)

# Pauses between tries to store the outcome of a task while the database is unreachable.
STORE_RETRY_FIRST_SECONDS = 0.5
STORE_RETRY_MAX_SECONDS = 5.0


class TaskSkillContext:
    """A skill's view of the A2A task it runs for (see `agentic_rag.skills.SkillContext`)."""

    def __init__(self, service: TaskService, active: ActiveTask) -> None:
        self._service, self._active = service, active
        self._artifacts_started: set[str] = set()

    @property
    def tenant(self) -> str:
        return self._active.tenant

    @property
    def task_id(self) -> str:
        return self._active.task.id

    @property
    def context_id(self) -> str:
        return self._active.task.context_id

    @property
    def texts(self) -> list[str]:
        return [text_of(m) for m in self._active.task.history or [] if m.role is Role.user]

    @property
    def message_ids(self) -> list[str]:
        return [m.message_id for m in self._active.task.history or [] if m.role is Role.user]

    @property
    def client_model(self) -> None:
        return None  # a task runs apart from any request: no caller's model to reach

    @property
    def groups(self) -> Groups:
        return groups_of(self._active.task)

    async def progress(self, text: str) -> None:
        await self._leased()
        self._stop_if_canceled()
        task = self._active.task
        self._service.emit(
            self._active, states.status_event(task, TaskState.working, agent_text(text, task))
        )

    async def partial(self, text: str, *, artifact_id: str, last_chunk: bool = False) -> None:
        await self._leased()
        self._stop_if_canceled()
        append = artifact_id in self._artifacts_started
        self._artifacts_started.add(artifact_id)
        artifact = Artifact(artifact_id=artifact_id, parts=[text_part(text)])
        self._emit_artifact(artifact, append=append, last_chunk=last_chunk)

    async def attach(self, *parts: ResultPart, name: str | None = None) -> None:
        await self._leased()
        self._stop_if_canceled()
        self._emit_artifact(attached_artifact(parts, name), append=False, last_chunk=True)

    async def _leased(self) -> None:
        """Go on only while this worker holds its lease: after its database connection
        dropped, another worker may take the task over, so the skill waits here (at its next
        progress report) until the lease is taken again, and is stopped if it was taken over
        meanwhile (`Runner.drop_taken_over`)."""
        if not self._service.cluster.holds_lease:
            await self._service.cluster.until_held()

    def _stop_if_canceled(self) -> None:
        """A skill that went on after its task was canceled (it caught the cancellation, or
        was in a call that does not give way to it) is stopped at its next report."""
        if self._active.cancel_requested:
            raise asyncio.CancelledError

    def _emit_artifact(self, artifact: Artifact, *, append: bool, last_chunk: bool) -> None:
        task = self._active.task
        self._service.emit(
            self._active,
            TaskArtifactUpdateEvent(
                task_id=task.id,
                context_id=task.context_id,
                kind="artifact-update",
                artifact=artifact,
                append=append,
                last_chunk=last_chunk,
            ),
        )

    async def client_roots(self) -> None:
        return None  # no caller's client to ask either

    def offers(self, skill: Skill) -> bool:
        return True  # as the Agent Card does: a key's groups are checked when it calls

    def ask(
        self, question: str, missing: Sequence[str] = (), *, name: str | None = None
    ) -> NoReturn:
        raise InputRequired(question, missing, name)


class Runner:
    def __init__(
        self, service: TaskService, work: ActiveTasks, *, max_running: int, grace: float = 5.0
    ) -> None:
        self._service, self._work = service, work
        self._slots = asyncio.Semaphore(max_running)
        self._running: set[asyncio.Task[None]] = set()
        self._dispatcher: asyncio.Task[None] | None = None
        self._grace = grace
        # Tasks another worker took over while this one had lost its lease: stopped here
        # without storing anything, since their outcome is that worker's to store.
        self._dropped: set[tuple[str, str]] = set()
        # Skills failing, and outcomes not stored, for want of the database: logged once per
        # outage, not once per task.
        self._outage = RepeatedFailure(
            log, "tasks: running skills and storing their outcomes", settle_seconds=1.0
        )
        self._active: dict[asyncio.Task[None], ActiveTask] = {}
        # The task as it was before the events that end its run, until they are stored.
        self._unsettled: dict[tuple[str, str], tuple[Task, int]] = {}

    def start(self) -> None:
        self._dispatcher = asyncio.create_task(self._dispatch(), name="runner")

    async def stop(self) -> None:
        """Let running skills finish for a grace period, then fail the rest with a reason."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            await asyncio.gather(self._dispatcher, return_exceptions=True)
        if self._running:
            await asyncio.wait(self._running, timeout=self._grace)
        for job in self._running:
            job.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def _dispatch(self) -> None:
        while True:
            job = await self._work.waiting()
            await self._slots.acquire()
            active = self._work.runnable(job)
            if active is None:
                self._slots.release()  # canceled while queued
                continue
            run = asyncio.create_task(self._execute(active), name=f"task {job.task_id}")
            active.runner = run
            self._running.add(run)
            self._active[run] = active
            run.add_done_callback(self._finished)  # one callback: each is a turn of the loop

    def _finished(self, run: "asyncio.Task[None]") -> None:
        self._running.discard(run)
        active = self._active.pop(run)
        self._dropped.discard(active.key)
        self._slots.release()

    async def drop_taken_over(self) -> None:
        """Stop, storing nothing, the tasks running here that another worker took over while
        this worker's lease was lost (called once it holds the lease again)."""
        running = {active.key: run for run, active in self._active.items()}
        taken = await self._service.store.taken_over_of(sorted(running))
        for key in sorted(taken):
            log.warning(
                "task %s: taken over by another worker while this one had lost its lease;"
                " stopped here",
                key[1],
            )
            self._dropped.add(key)
            running[key].cancel()

    async def _execute(self, active: ActiveTask) -> None:
        service = self._service
        active.started = True
        if active.task.status.state in states.TERMINAL:  # canceled before it could start
            active.runner = None
            self._work.release(active)
            active.done.set()
            return
        task = active.task
        if task.status.state is not TaskState.working:  # a continued task works already
            service.emit(active, states.status_event(task, TaskState.working))
        # Resolved when the message was accepted; a recovered task resolves it again.
        invocation = active.invocation or service.read_call(task.history or [])
        skill = invocation.skill
        try:
            arguments = active.arguments or invocation.validate()
            active.in_skill = True
            try:
                with SkillCall(skill.name, "a2a"):
                    output = await skill.run(TaskSkillContext(service, active), arguments)
            finally:
                active.in_skill = False
            if not isinstance(output, skill.output_model):
                raise TypeError(f"skill {skill.name} returned {type(output).__name__}")
            result = Artifact(
                artifact_id=new_id(),
                name=skill.name,
                parts=[
                    text_part(skill.readable(output)),
                    data_part(output.model_dump(mode="json")),
                ],
            )
            task = active.task
            final = self._settle(
                active,
                TaskArtifactUpdateEvent(
                    task_id=task.id,
                    context_id=task.context_id,
                    kind="artifact-update",
                    artifact=result,
                    append=False,
                    last_chunk=True,
                ),
                states.status_event(task, TaskState.completed),
            )
        except AnswerOnly as answer:
            final = self._end(active, TaskState.completed, answer.text)
        except InputRequired as question:
            final = self._end(active, TaskState.input_required, question.question)
        except SkillRejected as refusal:
            final = self._end(active, TaskState.rejected, str(refusal))
        except SkillError as error:
            final = self._end(active, TaskState.failed, str(error))
        except asyncio.CancelledError:
            if active.key in self._dropped:  # another worker runs it now
                active.runner = None
                self._work.release(active)
                active.done.set()
                return
            if active.cancel_requested:
                final = self._end(active, TaskState.canceled, CANCELED)
            elif skill.resumable:
                # Left working: the worker that takes it over (this one after a restart)
                # runs it again and it resumes (TaskService.recover).
                final = self._end(
                    active,
                    TaskState.working,
                    "The server is stopping; this task resumes when a worker starts.",
                )
            else:
                final = self._end(
                    active,
                    TaskState.failed,
                    "The server shut down while this task was running. Send the message again.",
                )
        except Exception as exc:
            if database_unreachable(exc):
                self._outage.failed()
            else:
                log.exception("skill %s failed on task %s", skill.name, task.id)
            final = self._end(
                active, TaskState.failed, f"skill {skill.name} failed: {type(exc).__name__}: {exc}"
            )
        if final is None:  # canceled by `TaskService.cancel` before the skill stopped: settled
            active.runner = None
            self._work.release(active)
            active.done.set()
            return
        try:
            try:
                await final
                self._outage.succeeded()
            except Exception as exc:  # the outcome could not be stored: fail from what is stored
                await self._fail_when_stored(active, exc)
        finally:
            self._unsettled.pop(active.key, None)
            active.runner = None
            self._work.release(active)
            active.done.set()
        await service.push.settled(active)

    async def _fail_when_stored(self, active: ActiveTask, error: Exception) -> None:
        """The outcome could not be stored (the database is unreachable, most likely): keep
        the task here and try again until the database answers, then fail it from what is
        stored (cancel it, if the client asked meanwhile). Never left `working` on this live
        worker, whose tasks no sweep takes over. A shutdown meanwhile leaves it to recovery."""
        if database_unreachable(error):
            self._outage.failed()
        else:
            log.error(
                "task %s: its outcome could not be stored (%s): failing it once the database"
                " answers",
                active.task.id,
                error,
            )
        pause = STORE_RETRY_FIRST_SECONDS
        while True:
            # Shown as it was before the ending that was not stored (working), so that a
            # cancel meanwhile is taken, not refused as if the task had ended.
            active.task, active.last_seq = self._unsettled[active.key]
            try:
                await self._fail_from_stored(active, error)
                return
            except asyncio.CancelledError:
                if not active.cancel_requested:
                    raise
            except Exception:
                active.task, active.last_seq = self._unsettled[active.key]
                try:
                    await asyncio.sleep(pause)
                except asyncio.CancelledError:
                    if not active.cancel_requested:
                        raise
                pause = min(pause * 2, STORE_RETRY_MAX_SECONDS)

    async def _fail_from_stored(self, active: ActiveTask, error: Exception) -> None:
        """Roll the task back to its durable state, then fail it with the reason (or cancel
        it, if the client asked)."""
        stored = await self._service.store.get(active.tenant, active.task.id)
        if stored is None or stored.task.status.state in states.TERMINAL:
            return
        if await self._service.store.taken_over(active.tenant, active.task.id):
            # This worker's lease was lost with the database, and another worker's sweep took
            # the task: it runs (or fails) it now, so its outcome is that worker's to store.
            log.warning("task %s: taken over by another worker; left to it", active.task.id)
            return
        active.task, active.last_seq = stored.task, stored.last_seq
        if active.cancel_requested:
            ending = self._end(active, TaskState.canceled, CANCELED)
        else:
            ending = self._end(
                active,
                TaskState.failed,
                f"the result could not be stored ({type(error).__name__}); nothing was kept",
            )
        if ending is not None:
            await ending

    def _end(
        self, active: ActiveTask, state: TaskState, reason: str
    ) -> "asyncio.Future[None] | None":
        message = agent_text(reason, active.task)
        return self._settle(active, states.status_event(active.task, state, message))

    def _settle(
        self, active: ActiveTask, *events: states.TaskEvent
    ) -> "asyncio.Future[None] | None":
        """Emit the events that end the run, remembering the task as it was before them; None
        if the task has ended already (canceled while its skill would not stop)."""
        if active.task.status.state in states.TERMINAL:
            return None
        self._unsettled[active.key] = (active.task, active.last_seq)
        return self._service.emit(active, *events)

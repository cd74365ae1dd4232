"""The operations of A2A 1.0 (spec §3.1), one per method, over the task engine: 1.0 proto
requests in, 1.0 proto responses (or streams of them) out, whichever binding carries them."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import orjson
from a2a.types import a2a_pb2 as pb
from starlette.requests import Request

from agentic_rag.a2a.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from agentic_rag.a2a.invocation import media_types_read, reads_media_type
from agentic_rag.a2a.v1 import card as v1_card
from agentic_rag.a2a.v1 import wire
from agentic_rag.a2a.v1.errors import ExtendedAgentCardNotConfiguredError
from agentic_rag.a2a.v1.listing import list_tasks
from agentic_rag.schema.compat import SendParams
from agentic_rag.security.principal import principal_of
from agentic_rag.skills import SkillRegistry
from agentic_rag.tasks import states
from agentic_rag.tasks.parts import final_status, with_history
from agentic_rag.tasks.service import Accepted, Reply, TaskService
from agentic_rag.tasks.store import Event

# How often a subscription to a task that waits for input looks for it in the store.
RECHECK_SECONDS = 1.0


class Accept(Protocol):
    """How a message reaches the engine in the caller's session (A2AEndpoints' admission)."""

    async def __call__(
        self, request: Request, send: SendParams, reply: Reply, *, follow_ups: bool = True
    ) -> Accepted: ...


# The 0.3 JSON of the extended card, or None when the agent has none (no authentication).
type ExtendedCard = Callable[[], bytes | None]


def _tenant(request: Request) -> str:
    return principal_of(request.scope).tenant


def _history(request: pb.GetTaskRequest | pb.SendMessageConfiguration) -> int | None:
    if not request.HasField("history_length"):
        return None
    if request.history_length < 0:
        raise InvalidParamsError(
            f"historyLength must be a non-negative integer, got {request.history_length}"
        )
    return request.history_length


class A2AService:
    def __init__(
        self,
        tasks: TaskService,
        accept: Accept,
        extended_card: ExtendedCard,
        registry: SkillRegistry,
    ) -> None:
        self._tasks, self._accept, self._extended_card = tasks, accept, extended_card
        self._registry = registry

    def _check_media_types(self, message: pb.Message) -> None:
        """A file part (raw or url) of a media type no skill reads is refused before any task
        exists (spec §3.1.1: ContentTypeNotSupportedError). 0.x keeps its behaviour."""
        for i, part in enumerate(message.parts):
            media_type = part.media_type
            is_file = part.WhichOneof("content") in ("raw", "url")
            if is_file and media_type and not reads_media_type(self._registry, media_type):
                takes = sorted(media_types_read(self._registry))
                raise ContentTypeNotSupportedError(
                    f"message.parts[{i}] is {media_type!r}, which no skill of this agent "
                    f"reads; it reads {', '.join(takes)}"
                )

    async def _accepted(
        self, http: Request, request: pb.SendMessageRequest, reply: Reply
    ) -> Accepted:
        """The message accepted by the engine; 1.0 refuses a message to a final task with
        -32004 (0.x starts a follow-up task instead: docs/a2a-notes.md §12.4) and one that
        names an unknown task with -32001: the engine decides both under the task's lock."""
        self._check_media_types(request.message)
        return await self._accept(http, wire.send_params(request), reply, follow_ups=False)

    async def send_message(
        self, http: Request, request: pb.SendMessageRequest
    ) -> pb.SendMessageResponse:
        """The task once it is final or waits for input; with `returnImmediately`, as soon
        as it exists."""
        config = request.configuration
        blocking = not config.return_immediately
        history = _history(config) if request.HasField("configuration") else None
        outcome = await self._accepted(http, request, "final" if blocking else "created")
        if outcome.events is None:
            return _answer(wire.task(with_history(outcome.snapshot, history)))
        try:
            async for event in outcome.events:
                if event.seq > outcome.seq and event.final:
                    break
        finally:
            outcome.events.close()
        if outcome.relayed:  # another worker ran it: the task as it ended is in the store
            ended = await self._tasks.get(outcome.task.tenant, outcome.task.task.id)
            return _answer(wire.task(with_history(ended, history)))
        return _answer(wire.task(orjson.loads(outcome.task.snapshot_json(history))))

    async def stream_message(
        self, http: Request, request: pb.SendMessageRequest
    ) -> AsyncIterator[pb.StreamResponse]:
        """The task as accepted, then its updates until it is final or waits for input.
        Refusals are raised here, before the first event."""
        outcome = await self._accepted(http, request, "stream")
        return _accepted_stream(outcome)

    async def get_task(self, http: Request, request: pb.GetTaskRequest) -> pb.Task:
        task = await self._tasks.get(_tenant(http), request.id)
        return wire.task(with_history(task, _history(request)))

    async def list_tasks(self, http: Request, request: pb.ListTasksRequest) -> pb.ListTasksResponse:
        return await list_tasks(self._tasks.store, _tenant(http), request)

    async def cancel_task(self, http: Request, request: pb.CancelTaskRequest) -> pb.Task:
        return wire.task(await self._tasks.cancel(_tenant(http), request.id))

    async def subscribe(
        self, http: Request, request: pb.SubscribeToTaskRequest
    ) -> AsyncIterator[pb.StreamResponse]:
        """The task as it stands, then its updates. A final task has nothing to subscribe
        to (spec §3.1.6: UnsupportedOperationError)."""
        tenant = _tenant(http)
        task = await self._tasks.get(tenant, request.id)
        if task.status.state in states.TERMINAL:
            raise UnsupportedOperationError(
                f"task {request.id} is {task.status.state.value}: there is nothing to subscribe to"
            )
        return _followed(self._until_final(tenant, request.id))

    async def _until_final(self, tenant: str, task_id: str) -> AsyncIterator[Event]:
        """The task's events until it ends. 1.0 keeps a subscription open while the task
        waits for input (spec §3.1.6), where the engine's `follow` ends a 0.x stream cycle:
        so follow again from the last event once the task moves on."""
        after: int | None = None
        while True:
            async for event in self._tasks.follow(tenant, task_id, after):
                if after is not None and event.seq == 0:
                    continue  # the state a settled task is re-told in: already sent
                after = max(after or 0, event.seq)
                yield event
                if event.final and _ends(event):
                    return  # also when the log told it before the live events began
            stored = await self._tasks.store.get(tenant, task_id)
            if stored is None or stored.task.status.state in states.TERMINAL:
                return
            await self._moved_on(tenant, task_id, after or 0)

    async def _moved_on(self, tenant: str, task_id: str, seq: int) -> None:
        """Return once the task has an event after `seq`: woken by this worker's bus, and
        checked in the store every RECHECK_SECONDS for a task another worker resumes."""
        events = self._tasks.bus.subscribe(tenant, task_id)
        try:
            while True:
                stored = await self._tasks.store.get(tenant, task_id)
                if stored is None or stored.last_seq > seq:
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RECHECK_SECONDS):
                        async for _ in events:
                            break
        finally:
            events.close()

    async def create_push_config(
        self, http: Request, request: pb.TaskPushNotificationConfig
    ) -> pb.TaskPushNotificationConfig:
        saved = await self._tasks.set_push_config(
            _tenant(http), request.task_id, wire.push_config(request)
        )
        return wire.task_push_config(request.task_id, saved)

    async def get_push_config(
        self, http: Request, request: pb.GetTaskPushNotificationConfigRequest
    ) -> pb.TaskPushNotificationConfig:
        configs = await self._tasks.push_configs(_tenant(http), request.task_id)
        chosen = next((c for c in configs if c.id == request.id), None)
        if chosen is None:
            raise TaskNotFoundError(
                f"task {request.task_id} has no push notification config {request.id!r}"
            )
        return wire.task_push_config(request.task_id, chosen)

    async def list_push_configs(
        self, http: Request, request: pb.ListTaskPushNotificationConfigsRequest
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        configs = await self._tasks.push_configs(_tenant(http), request.task_id)
        return pb.ListTaskPushNotificationConfigsResponse(
            configs=[wire.task_push_config(request.task_id, c) for c in configs]
        )

    async def delete_push_config(
        self, http: Request, request: pb.DeleteTaskPushNotificationConfigRequest
    ) -> None:
        await self._tasks.delete_push_config(_tenant(http), request.task_id, request.id)

    async def extended_card(
        self, http: Request, request: pb.GetExtendedAgentCardRequest
    ) -> pb.AgentCard:
        card = self._extended_card()
        if card is None:
            raise ExtendedAgentCardNotConfiguredError(
                "this agent has no extended card: no authentication is configured"
            )
        return v1_card.card(orjson.loads(card))


def _answer(task: pb.Task) -> pb.SendMessageResponse:
    """The task; or the message its skill answered with alone (`AnswerOnly`: completed with a
    status message and no artifact, which a skill's result always makes), as SendMessage may
    answer (spec §3.1.1). The message names the task, which GetTask still reads."""
    status = task.status
    if (
        status.state == pb.TASK_STATE_COMPLETED
        and not task.artifacts
        and status.HasField("message")
    ):
        return pb.SendMessageResponse(message=status.message)
    return pb.SendMessageResponse(task=task)


def _ends(event: Event) -> bool:
    """Whether a final status update puts its task in a terminal state (not a pause)."""
    state = orjson.loads(event.json)["status"]["state"]
    return any(state == terminal.value for terminal in states.TERMINAL)


async def _accepted_stream(outcome: Accepted) -> AsyncIterator[pb.StreamResponse]:
    yield pb.StreamResponse(task=wire.task(outcome.snapshot))
    if outcome.events is None:  # the task is settled (a retry, or it settled meanwhile)
        yield wire.event_response(final_status(outcome.snapshot))
        return
    try:
        async for event in outcome.events:
            if event.seq <= outcome.seq or not event.streamed:
                continue
            yield wire.event_response(event)
            if event.final:
                return
    finally:
        outcome.events.close()


async def _followed(events: AsyncIterator[Event]) -> AsyncIterator[pb.StreamResponse]:
    async for event in events:
        yield wire.event_response(event)

"""Delegation: a local task handed to a peer over A2A and followed there to its end.

`delegate_task` is a resumable skill, so a delegation is a durable local A2A task whose id is
the correlation id (and the `delegations` row's). Running it:

1. **Place** it: the target peer, or for "best" the tenant's healthy peers offering the
   capability (healthy and most recently heard from first). A peer that is unavailable
   (refused connection, 5xx, 429) is tried again with backoff, `retries` times; a peer that
   never accepted the task is passed over for the next one that offers the capability
   (failover). The remote task id is stored as soon as the peer answers with it.
2. **Follow** the remote task: its stream when the peer's card says it streams, else polling
   `tasks/get`; a stream that breaks is followed by polling. Remote progress messages become
   the local task's progress, remote artifacts its partial artifacts, and the remote result its
   result.
3. **End**: completed with the remote artifacts; failed with the peer's reason; failed with a
   reason at the deadline (`timeout_seconds`, kept across restarts), after canceling the remote
   task; canceled, after canceling the remote task, when the local task is canceled. A remote
   task that asks for input pauses the local one with the peer's question; the caller's answer
   (a message to the local task) runs it again, which sends the answer to the remote task and
   follows it on.

The delegation is referenced by the caller's session (the local task's context), with the peer
as a participant. `statusCallbackUrl` hears of every change of the local task (progress too),
`resultWebhookUrl` of its pauses and its end (A2A push notifications, signed).

A restart (or another worker, when this one dies) runs the task again (`Skill.resumable`,
`TaskService.recover`); it finds the delegation and follows the remote task it had, instead
of sending the message again.
"""

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from agentic_rag.network.delegation_store import SETTLED, Delegation, DelegationStore
from agentic_rag.network.errors import DelegationFailed, DelegationRefused
from agentic_rag.network.peer_client import (
    Backoff,
    PeerCallError,
    PeerClient,
    PeerHttp,
    PeerRefusal,
    PeerUnavailable,
    RemoteEvent,
    connect,
    retrying,
)
from agentic_rag.network.peers import Peer
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.network.sessions import SessionStore
from agentic_rag.schema.a2a import (
    Artifact,
    DataPart,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)
from agentic_rag.schema.compat import PushConfig
from agentic_rag.security.principal import Principal
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.skills import SkillContext
from agentic_rag.tasks import states
from agentic_rag.tasks.errors import TaskError, TaskNotFoundError
from agentic_rag.tasks.parts import data_part, text_of, text_part
from agentic_rag.tasks.service import TaskService

log = logging.getLogger(__name__)

# How long a local cancel waits for the peer to cancel its task.
REMOTE_CANCEL_SECONDS = 10.0
# The namespace of the ids of messages sent to peers: one id per delegation and peer, so a
# peer that supports it sees a resent message as a retry.
MESSAGES = uuid.UUID("a8f3c1de-5b0e-4c7a-9a61-0d9b2f4e7c15")
BEST = "best"


class DelegationRequest(BaseModel):
    """What to delegate, to whom, and how patiently (the seed's fields)."""

    target_agent: str = Field(
        BEST, min_length=1, description='A peer id, or "best": a healthy peer with the skill.'
    )
    capability_name: str = Field(
        min_length=1, description="The skill (id, name or tag) the peer must offer."
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict,
        description='The skill\'s arguments: sent as a DataPart {"skill", "arguments"}.',
    )
    message: str | None = Field(None, description="Text sent to the peer with the arguments.")
    priority: int = Field(5, ge=1, le=10, description="1 (lowest) to 10, told to the peer.")
    timeout_seconds: float = Field(
        300.0, gt=0, le=7 * 86400, description="The delegation fails after this long."
    )
    retries: int = Field(
        3, ge=0, le=20, description="Tries again per peer that is unavailable (5xx, 429, down)."
    )
    statusCallbackUrl: str | None = Field(  # the seed's field name
        None,
        description=(
            "Told (signed push notification) of every status change: progress, a question, the end."
        ),
    )
    resultWebhookUrl: str | None = Field(  # the seed's field name
        None, description="Sent the task (signed push notification) when it pauses or ends."
    )


class RemoteArtifact(BaseModel):
    name: str | None = None
    text: str
    data: list[dict[str, Any]] = Field(default_factory=list)


class DelegationResult(BaseModel):
    delegation_id: str = Field(description="The local task's id: the correlation id.")
    peer_id: str
    peer_name: str
    remote_task_id: str | None
    state: str = Field(description="The remote task's final state.")
    text: str = Field(description="The text of the remote result.")
    artifacts: list[RemoteArtifact]

    def render(self) -> str:
        return self.text or f"peer {self.peer_name} completed task {self.remote_task_id}"


@dataclass(frozen=True, slots=True)
class DelegationSettings:
    poll_seconds: float
    backoff: Backoff


class DelegationService:
    def __init__(
        self,
        store: DelegationStore,
        peers: PeerRegistry,
        sessions: SessionStore,
        tasks: TaskService,
        guard: SSRFGuard,
        http: PeerHttp,
        settings: DelegationSettings,
    ) -> None:
        self._store, self._peers, self._sessions, self._tasks = store, peers, sessions, tasks
        self._guard, self._http, self._settings = guard, http, settings

    # -- the REST routes' calls --------------------------------------------------------------

    async def delegate(self, principal: Principal, request: DelegationRequest) -> str:
        """Start a delegation as a local task of `principal`'s tenant; its id.

        Raises DelegationRefused when the target peer is unknown or no peer offers the
        capability, UnsafeURLError for a callback URL the SSRF guard refuses."""
        tenant = principal.tenant
        await self._check(tenant, request)
        arguments = request.model_dump(mode="json")
        # The callbacks are the task's push configs: signed, sent when it pauses or ends (the
        # status callback also on progress: `status_changed`). Set here, so that a refused
        # URL is refused before the task exists.
        hooks = [u for u in (request.statusCallbackUrl, request.resultWebhookUrl) if u]
        push = PushConfig(url=hooks[0]) if hooks else None
        service = self._tasks
        started = await service.start_skill(
            tenant, "delegate_task", arguments, groups=principal.groups, push=push
        )
        task_id = started.task_id
        for url in hooks[1:]:
            await service.set_push_config(tenant, task_id, PushConfig(url=url))
        return task_id

    async def result(self, principal: Principal, task_id: str, wait_seconds: float) -> Task | None:
        """The delegation's task once final, waiting up to `wait_seconds`; None if not by then.

        Raises TaskNotFoundError for a task the tenant does not have, or that is no delegation."""
        tenant, service = principal.tenant, self._tasks
        if await service.skill_of(tenant, task_id) != "delegate_task":
            raise TaskNotFoundError(f"task {task_id} is not a delegation")
        task = await service.get(tenant, task_id)
        if task.status.state not in states.TERMINAL:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_seconds):
                    async for _ in service.follow(tenant, task_id, None):
                        pass
            task = await service.get(tenant, task_id)
        return task if task.status.state in states.TERMINAL else None

    async def cancel(self, principal: Principal, task_id: str) -> Task:
        """Cancel the delegation's local task, which cancels the remote one."""
        return await self._tasks.cancel(principal.tenant, task_id)

    async def _check(self, tenant: str, request: DelegationRequest) -> None:
        if request.target_agent != BEST:
            if await self._peers.get(tenant, request.target_agent) is None:
                raise DelegationRefused(f"no peer {request.target_agent!r} is registered")
        elif not await self._peers.find(tenant, request.capability_name):
            raise DelegationRefused(f"no healthy peer offers {request.capability_name!r}")
        for url in (request.statusCallbackUrl, request.resultWebhookUrl):
            if url is not None:
                self._guard.check_shape(url)

    # -- the skill ---------------------------------------------------------------------------

    async def run(self, ctx: SkillContext, request: DelegationRequest) -> DelegationResult:
        """Run the delegation that is the task `ctx` runs for, or continue following it."""
        tenant = ctx.tenant
        deadline = datetime.now(UTC) + timedelta(seconds=request.timeout_seconds)
        delegation = await self._store.open(
            tenant,
            ctx.task_id,
            capability=request.capability_name,
            target=request.target_agent,
            request=request.model_dump(mode="json"),
            deadline=deadline,
        )
        if delegation.state in SETTLED:
            return self._settled(delegation)
        request = DelegationRequest.model_validate(delegation.request)
        await self._hooks(tenant, ctx.task_id, request)
        run = _Run(self, ctx, delegation, request)
        remaining = (delegation.deadline - datetime.now(UTC)).total_seconds()
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                return await run.run()
        except TimeoutError:
            reason = await run.timed_out()
        except PeerCallError as exc:
            reason = str(exc)
        except DelegationFailed as exc:
            reason = str(exc)
        except asyncio.CancelledError:
            if self._cancel_requested(tenant, ctx.task_id):
                await run.canceled()
            raise  # else a shutdown: the task resumes, following the remote task
        finally:
            await run.close()
        await self._store.finish(tenant, ctx.task_id, "failed", error=reason)
        raise DelegationFailed(reason)

    async def _hooks(self, tenant: str, task_id: str, request: DelegationRequest) -> None:
        """The callbacks as push configs of the task (`delegate` sets them for the REST
        route; a caller of the skill names them in its arguments): told when it pauses or
        ends. The status callback also hears of every progress message (`status_changed`)."""
        service = self._tasks
        known = {c.url for c in await service.push_configs(tenant, task_id)}
        for url in (request.statusCallbackUrl, request.resultWebhookUrl):
            if url is not None and url not in known:
                known.add(url)
                try:
                    await service.set_push_config(tenant, task_id, PushConfig(url=url))
                except TaskError as exc:
                    raise DelegationFailed(exc.message) from None

    async def status_changed(self, tenant: str, task_id: str, url: str) -> None:
        """Send the task as it is now, signed, to its status callback `url`."""
        await self._tasks.tell_webhook(tenant, task_id, url)

    def _cancel_requested(self, tenant: str, task_id: str) -> bool:
        return self._tasks.canceling(tenant, task_id)

    def _settled(self, delegation: Delegation) -> DelegationResult:
        if delegation.state == "completed" and delegation.result is not None:
            return DelegationResult.model_validate(delegation.result)
        raise DelegationFailed(delegation.error or f"delegation {delegation.id} {delegation.state}")


class _Run:
    """One run of a delegation's task: placing it, following it, mirroring what it does."""

    def __init__(
        self,
        service: DelegationService,
        ctx: SkillContext,
        delegation: Delegation,
        request: DelegationRequest,
    ) -> None:
        self._service, self._ctx = service, ctx
        self._delegation, self._request = delegation, request
        self._store = service._store
        self._peer: Peer | None = None
        self._client: PeerClient | None = None
        self._remote_id = delegation.remote_task_id
        self._remote_state = delegation.remote_state or "submitted"
        self._said: str | None = None
        self._artifacts: dict[str, Artifact] = {}

    @property
    def _settings(self) -> DelegationSettings:
        return self._service._settings

    async def run(self) -> DelegationResult:
        d = self._delegation
        if d.remote_task_id is not None and d.peer_id is not None:
            peer = await self._service._peers.get(d.tenant, d.peer_id)
            if peer is None:
                raise DelegationFailed(
                    f"peer {d.peer_id} was removed while it ran task {d.remote_task_id}"
                )
            self._use(peer)
            if d.remote_state == TaskState.input_required.value and len(self._ctx.texts) > 1:
                return await self._follow(await self._answer(self._ctx.texts[-1]))
            await self._progress(
                f"following task {d.remote_task_id} on peer {peer.name} again after a restart"
            )
            return await self._follow(None)
        events = await self._place()
        return await self._follow(events)

    # -- placing -----------------------------------------------------------------------------

    async def _candidates(self) -> list[Peer]:
        d, peers = self._delegation, self._service._peers
        found = await peers.find(d.tenant, d.capability)
        if d.target != BEST:
            target = await peers.get(d.tenant, d.target)
            if target is None:
                raise DelegationFailed(f"no peer {d.target!r} is registered")
            if not target.offers(d.capability):
                raise DelegationFailed(
                    f"peer {target.name} ({target.id}) does not offer {d.capability!r}"
                )
            found = [target, *(p for p in found if p.id != target.id)]
        passed = {peer_id for peer_id, _ in d.passed_over}
        return [p for p in found if p.id not in passed]

    async def _place(self) -> AsyncIterator[RemoteEvent]:
        """Send the message to the first candidate that accepts it; its events from there."""
        reasons = [f"{peer_id}: {why}" for peer_id, why in self._delegation.passed_over]
        for peer in await self._candidates():
            self._use(peer)
            try:
                events = await retrying(
                    self._send,
                    retries=self._request.retries,
                    backoff=self._settings.backoff,
                    sleep=asyncio.sleep,
                    on_retry=self._retrying,
                )
            except PeerCallError as exc:
                why = str(exc)
                reasons.append(f"{peer.id}: {why}")
                await self._store.pass_over(self._ctx.tenant, self._ctx.task_id, peer.id, why)
                await self._progress(f"peer {peer.name} did not accept the task: {why}")
                await self._close_client()
                continue
            return events
        raise DelegationFailed(
            f"no peer accepted the task for {self._delegation.capability!r}"
            + (f" ({'; '.join(reasons)})" if reasons else ": no healthy peer offers it")
        )

    async def _send(self) -> AsyncIterator[RemoteEvent]:
        """Send the message; return once the peer answered with its task (accepted)."""
        assert self._client is not None and self._peer is not None
        events = aiter(self._client.send(self._message(self._peer)))
        first = await anext(events, None)
        if first is None:
            raise PeerRefusal(f"peer {self._peer.id} answered nothing")
        await self._accepted(first)
        return _prepend(first, events)

    async def _retrying(self, error: PeerUnavailable, delay: float) -> None:
        await self._progress(f"{error}; trying again in {delay:.1f} s")

    async def _answer(self, text: str) -> AsyncIterator[RemoteEvent]:
        """Send the caller's answer to the remote task that asked for it; its events."""
        client, peer, remote_id = self._client, self._peer, self._remote_id
        assert client is not None and peer is not None and remote_id is not None
        message = Message(
            role=Role.user,
            kind="message",
            # One id per answer: an answer sent again after a restart is a retry to the peer.
            message_id=uuid.uuid5(
                MESSAGES, f"{self._ctx.task_id}\n{peer.id}\n{len(self._ctx.texts)}"
            ).hex,
            task_id=remote_id,
            context_id=self._delegation.remote_context_id or None,
            parts=[text_part(text)],
            metadata={"correlationId": self._ctx.task_id},
        )

        async def send() -> AsyncIterator[RemoteEvent]:
            events = aiter(client.send(message))
            first = await anext(events, None)
            if first is None:
                raise PeerRefusal(f"peer {peer.id} answered nothing")
            return _prepend(first, events)

        events = await retrying(
            send,
            retries=self._request.retries,
            backoff=self._settings.backoff,
            sleep=asyncio.sleep,
            on_retry=self._retrying,
        )
        await self._progress(f"sent the answer to task {remote_id} on peer {peer.name}")
        return events

    async def _progress(self, text: str) -> None:
        """Progress of the local task, which its status callback hears of too."""
        await self._ctx.progress(text)
        url = self._request.statusCallbackUrl
        if url is not None:
            await self._service.status_changed(self._ctx.tenant, self._ctx.task_id, url)

    def _message(self, peer: Peer) -> Message:
        request, parts = self._request, []
        if request.message:
            parts.append(text_part(request.message))
        if request.parameters or not request.message:
            skill = _skill_for(peer, self._delegation.capability)
            parts.append(data_part({"skill": skill, "arguments": request.parameters}))
        return Message(
            role=Role.user,
            kind="message",
            message_id=uuid.uuid5(MESSAGES, f"{self._ctx.task_id}\n{peer.id}").hex,
            parts=parts,
            metadata={"priority": request.priority, "correlationId": self._ctx.task_id},
        )

    async def _accepted(self, first: RemoteEvent) -> None:
        assert self._peer is not None
        # The caller's session (this task's context) references the delegation, and the peer
        # takes part in it from now on.
        await self._service._sessions.reference_delegation(
            self._ctx.tenant, self._ctx.context_id, self._ctx.task_id, self._peer.id
        )
        if isinstance(first, Message):  # answered at once, without a task
            return
        task_id = first.id if isinstance(first, Task) else first.task_id
        state = (
            first.status.state.value
            if isinstance(first, Task | TaskStatusUpdateEvent)
            else "submitted"
        )
        self._remote_id, self._remote_state = task_id, state
        await self._store.accepted(
            self._ctx.tenant,
            self._ctx.task_id,
            peer_id=self._peer.id,
            remote_task_id=task_id,
            remote_context_id=first.context_id or "",
            remote_state=state,
        )
        await self._progress(f"delegated to peer {self._peer.name} as task {task_id}")

    # -- following ---------------------------------------------------------------------------

    async def _follow(self, events: AsyncIterator[RemoteEvent] | None) -> DelegationResult:
        """Mirror the remote task until it is final: its stream, then polling."""
        assert self._client is not None
        if events is None and self._client.streams and self._remote_id is not None:
            events = self._client.resubscribe(self._remote_id)
        if events is not None:
            try:
                async for event in events:
                    if isinstance(event, Message) and self._remote_id is None:
                        return await self._completed_with_message(event)
                    task = await self._mirror(event)
                    if task is not None:
                        return await self._end(task)
            except PeerCallError as exc:
                log.info("delegation %s: the stream broke (%s); polling", self._ctx.task_id, exc)
        return await self._poll()

    async def _poll(self) -> DelegationResult:
        while True:
            task = await self._remote_task()
            if await self._mirror(task) is not None:
                return await self._end(task)
            await asyncio.sleep(self._settings.poll_seconds)

    async def _remote_task(self) -> Task:
        """The remote task as the peer has it now. The peer accepted it, and keeps it across
        its own restarts: a peer that is unavailable is asked again, with backoff, until it
        answers; the delegation's deadline bounds the wait, not `retries` (which are for
        placing the task)."""
        assert self._client is not None and self._remote_id is not None
        attempt = 0
        while True:
            try:
                return await self._client.get(self._remote_id)
            except PeerUnavailable as exc:
                if attempt == 0:
                    await self._progress(f"{exc}; asking again until it answers")
                await asyncio.sleep(self._settings.backoff.delay(attempt, exc.retry_after))
                attempt = min(attempt + 1, 30)  # the cap is reached long before

    async def _mirror(self, event: RemoteEvent) -> Task | None:
        """Show `event` in the local task; the remote task once it is final (or paused)."""
        if isinstance(event, TaskArtifactUpdateEvent):
            await self._artifact(
                event.artifact, append=bool(event.append), last=bool(event.last_chunk)
            )
            return None
        if isinstance(event, Message):
            return None
        if isinstance(event, Task):
            for artifact in event.artifacts or []:
                if artifact.artifact_id not in self._artifacts:
                    await self._artifact(artifact, append=False, last=True)
        await self._status(event.status.state, event.status.message)
        if event.status.state in states.TERMINAL or event.status.state in states.PAUSED:
            if isinstance(event, Task):
                return event
            assert self._client is not None and self._remote_id is not None
            return await self._client.get(self._remote_id)
        return None

    async def _status(self, state: TaskState, message: Message | None) -> None:
        if state.value != self._remote_state:
            self._remote_state = state.value
            await self._store.remote_state(self._ctx.tenant, self._ctx.task_id, state.value)
        said = text_of(message) if message is not None else ""
        if said and said != self._said:
            self._said = said
            assert self._peer is not None
            await self._progress(f"{self._peer.name}: {said}")

    async def _artifact(self, artifact: Artifact, *, append: bool, last: bool) -> None:
        known = self._artifacts.get(artifact.artifact_id)
        if append and known is not None:
            artifact = known.model_copy(update={"parts": [*known.parts, *artifact.parts]})
        self._artifacts[artifact.artifact_id] = artifact
        text = _text(artifact.parts)
        if text:
            await self._ctx.partial(text, artifact_id=artifact.artifact_id, last_chunk=last)

    async def _end(self, task: Task) -> DelegationResult:
        assert self._peer is not None
        state, peer = task.status.state, self._peer
        reason = text_of(task.status.message) if task.status.message else ""
        if state is TaskState.input_required:
            # The caller answers on this task; the answer goes to the remote task (`_answer`).
            self._ctx.ask(f"peer {peer.name} asks: {reason or 'input is required'}")
        if state is not TaskState.completed:
            what = {
                TaskState.auth_required: "asks for authentication",
            }.get(state, f"ended {state.value}")
            raise DelegationFailed(
                f"peer {peer.name}'s task {task.id} {what}" + (f": {reason}" if reason else "")
            )
        for artifact in task.artifacts or []:
            self._artifacts.setdefault(artifact.artifact_id, artifact)
        artifacts = [
            RemoteArtifact(name=a.name, text=_text(a.parts), data=_data(a.parts))
            for a in self._artifacts.values()
        ]
        result = DelegationResult(
            delegation_id=self._ctx.task_id,
            peer_id=peer.id,
            peer_name=peer.name,
            remote_task_id=task.id,
            state=state.value,
            text="\n".join(a.text for a in artifacts if a.text),
            artifacts=artifacts,
        )
        await self._store.finish(
            self._ctx.tenant, self._ctx.task_id, "completed", result=result.model_dump(mode="json")
        )
        return result

    async def _completed_with_message(self, message: Message) -> DelegationResult:
        """A peer that answered with a message instead of a task: that message is the result."""
        assert self._peer is not None
        text = text_of(message)
        result = DelegationResult(
            delegation_id=self._ctx.task_id,
            peer_id=self._peer.id,
            peer_name=self._peer.name,
            remote_task_id=None,
            state="completed",
            text=text,
            artifacts=[RemoteArtifact(text=text, data=_data(message.parts))],
        )
        await self._store.finish(
            self._ctx.tenant, self._ctx.task_id, "completed", result=result.model_dump(mode="json")
        )
        return result

    # -- ending early ------------------------------------------------------------------------

    async def timed_out(self) -> str:
        timeout = self._request.timeout_seconds
        if self._remote_id is None or self._peer is None:
            return f"timed out after {timeout:g} s before a peer accepted the task"
        state = self._remote_state
        await self._cancel_remote()
        return (
            f"timed out after {timeout:g} s: task {self._remote_id} on peer {self._peer.name} "
            f"was still {state}; it was asked to cancel"
        )

    async def canceled(self) -> None:
        await self._cancel_remote()
        await self._store.finish(
            self._ctx.tenant, self._ctx.task_id, "canceled", error="canceled by the client"
        )

    async def _cancel_remote(self) -> None:
        if self._client is None or self._remote_id is None:
            return
        try:
            async with asyncio.timeout(REMOTE_CANCEL_SECONDS):
                await self._client.cancel(self._remote_id)
        except (PeerCallError, TimeoutError) as exc:
            log.warning(
                "delegation %s: canceling task %s on peer %s failed: %s",
                self._ctx.task_id,
                self._remote_id,
                self._peer.id if self._peer else "?",
                exc,
            )

    # -- the connection ----------------------------------------------------------------------

    def _use(self, peer: Peer) -> None:
        self._peer = peer
        self._client = connect(peer, self._service._http.of(peer.tenant))

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def close(self) -> None:
        await self._close_client()


async def _prepend(
    first: RemoteEvent, rest: AsyncIterator[RemoteEvent]
) -> AsyncIterator[RemoteEvent]:
    yield first
    async for event in rest:
        yield event


def _skill_for(peer: Peer, capability: str) -> str:
    """The id of the peer's skill that offers `capability` (an id, a name or a tag)."""
    for skill in peer.skills:
        if capability in (skill.id, skill.name):
            return skill.id
    for skill in peer.skills:
        if capability in skill.tags:
            return skill.id
    return capability


def _text(parts: list[Part]) -> str:
    return "\n".join(p.root.text for p in parts if isinstance(p.root, TextPart))


def _data(parts: list[Part]) -> list[dict[str, Any]]:
    return [p.root.data for p in parts if isinstance(p.root, DataPart)]

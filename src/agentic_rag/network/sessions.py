"""Sessions: an A2A context is a session; all SQL of the session tables.

A session records who sent messages in it (callers, by credential, and peers, by peer id) and
the delegations it references; its tasks are the context's tasks. It expires after
`idle_seconds` without a message, and with a `limit` a tenant may have at most that many active
sessions: a message that would open one more is refused (`SessionLimitError`), before any task
is created.
"""

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from agentic_rag.ids import new_id
from agentic_rag.schema.compat import SendParams
from agentic_rag.security.principal import Principal
from agentic_rag.storage.pool import Pool

# The first key of the advisory lock that serialises the opening of a tenant's sessions: "agss".
_OPEN_LOCK_CLASS = 0x61677373

ParticipantKind = Literal["caller", "peer"]

# $1 tenant, $2 context id, $3 kind, $4 participant, $5 idle seconds.
# A message in an active session: its activity and its sender, if the session is active.
_CONTINUE = (
    "WITH s AS (UPDATE sessions SET last_activity = now() "
    "  WHERE tenant = $1 AND context_id = $2 "
    "  AND last_activity > now() - make_interval(secs => $5) RETURNING context_id) "
    "INSERT INTO session_participants (tenant, context_id, kind, participant) "
    "SELECT $1, context_id, $3, $4 FROM s ON CONFLICT (tenant, context_id, kind, participant) "
    "DO UPDATE SET last_seen = now() RETURNING true"
)
# Messages in any sessions: each opens its session (again, if expired: a new start) and records
# its sender, and the tenants' other expired sessions are dropped. $1-$4 are parallel arrays of
# tenant, context id, kind and participant, sorted and without duplicates (a row may be
# upserted once per statement; one lock order, so concurrent writes cannot deadlock on them);
# $5 the idle seconds. One statement for every message that arrived meanwhile (`_Entries`).
_ENTER = (
    "WITH m AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) "
    "  AS m (tenant, context_id, kind, participant)), "
    "expired AS (DELETE FROM sessions WHERE tenant IN (SELECT tenant FROM m) "
    "  AND last_activity <= now() - make_interval(secs => $5) "
    "  AND (tenant, context_id) NOT IN (SELECT tenant, context_id FROM m)), "
    "s AS (INSERT INTO sessions (tenant, context_id) SELECT DISTINCT tenant, context_id FROM m "
    "  ORDER BY tenant, context_id "
    "  ON CONFLICT (tenant, context_id) DO UPDATE SET last_activity = now(), "
    "  created_at = CASE WHEN sessions.last_activity <= now() - make_interval(secs => $5) "
    "   THEN now() ELSE sessions.created_at END "
    "  RETURNING tenant, context_id) "
    "INSERT INTO session_participants (tenant, context_id, kind, participant) "
    "SELECT m.tenant, m.context_id, m.kind, m.participant FROM m JOIN s USING (tenant, context_id) "
    "ORDER BY 1, 2, 3, 4 "
    "ON CONFLICT (tenant, context_id, kind, participant) DO UPDATE SET last_seen = now()"
)
# Wait this many turns of the event loop before writing, so that the messages that arrive
# meanwhile share the statement (under load, one round trip for many messages).
_ENTER_DELAY_TURNS = 4

Entry = tuple[str, str, ParticipantKind, str]  # tenant, context id, kind, participant


class SessionLimitError(Exception):
    """The tenant has as many active sessions as it may: a message that would open one more is
    refused (the A2A adapter answers JSON-RPC error -32013)."""


@dataclass(frozen=True, slots=True)
class Participant:
    kind: ParticipantKind
    id: str  # a caller's `method:subject` (api-key:<key id>, jwt:<sub>, local:local); a peer id
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class TaskReference:
    id: str
    state: str


@dataclass(frozen=True, slots=True)
class DelegationReference:
    task_id: str
    peer_id: str | None


@dataclass(frozen=True, slots=True)
class Session:
    context_id: str
    created_at: datetime
    last_activity: datetime
    expires_at: datetime
    participants: tuple[Participant, ...] = ()
    tasks: tuple[TaskReference, ...] = ()
    delegations: tuple[DelegationReference, ...] = ()


def caller_id(principal: Principal) -> str:
    return f"{principal.method}:{principal.subject}"


class _Entries:
    """Group write of session entries: the messages that arrive within a few loop turns of the
    first share one `_ENTER` statement, and each caller returns once its entry is durable."""

    def __init__(self, pool: Pool, idle_seconds: float) -> None:
        self._pool, self._idle_seconds = pool, idle_seconds
        self._pending: list[tuple[Entry, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._writing: set[asyncio.Task[None]] = set()

    def enter(self, entry: Entry) -> asyncio.Future[None]:
        """Queue `entry`; the future resolves once it is durable. A caller that stops waiting
        (cancelled) leaves the others' write alone: results go only to futures not done."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((entry, done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_soon(), name="session-entries")
            self._writing.add(self._writer)  # a reference, so that it is not collected
            self._writer.add_done_callback(self._writing.discard)
        return done

    async def _write_soon(self) -> None:
        for _ in range(_ENTER_DELAY_TURNS):
            await asyncio.sleep(0)
        batch, self._pending, self._writer = self._pending, [], None
        rows = sorted({entry for entry, _ in batch})
        columns = [list(column) for column in zip(*rows, strict=True)]
        try:
            await self._pool.execute(_ENTER, *columns, self._idle_seconds)
        except asyncio.CancelledError:  # shutting down: nothing was entered
            for _, done in batch:
                done.cancel()
            raise
        except Exception as exc:  # each message it held fails with it
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            return
        for _, done in batch:
            if not done.done():
                done.set_result(None)


@dataclass(frozen=True, slots=True)
class Admission:
    """A message let into its session: `context_id` is the session's context (None for a
    message to a task that names no context: it is in its task's), and `entered` returns once
    the message is recorded in it (durably)."""

    context_id: str | None
    pending: asyncio.Future[None] | None = None  # the entry, while it is being written

    async def entered(self) -> None:
        if self.pending is not None:
            await self.pending


class SessionStore:
    def __init__(self, pool: Pool, *, idle_seconds: float, limit: int | None) -> None:
        self._pool = pool
        self.idle_seconds, self.limit = idle_seconds, limit
        self._entries = _Entries(pool, idle_seconds)

    async def admit(self, principal: Principal, params: SendParams) -> Admission:
        """Let the caller's message into its session, opening the session if need be (within
        the limit). A message that starts a task in no named context gets its new context's
        id here (the task is created in it: `TaskService.send(context_id=...)`, so the message
        is not copied to name it). A message to an existing task (no context named) is
        recorded after it was accepted, with `touch`.

        With a limit, this returns once the message is in its session (or raises
        `SessionLimitError`), so a refused message creates no task. Without one nothing can
        be refused: the entry is written (with other messages' entries) while the caller goes
        on, and the caller awaits `entered()` before it answers."""
        message = params.message
        if message.task_id is not None and message.context_id is None:
            return Admission(None)
        context_id = message.context_id or new_id()
        entry: Entry = (principal.tenant, context_id, "caller", caller_id(principal))
        if self.limit is None:
            return Admission(context_id, self._entries.enter(entry))
        await self.join(*entry)
        return Admission(context_id)

    async def touch(self, principal: Principal, context_id: str) -> None:
        """Record the caller's message in a session it continues."""
        await self.join(principal.tenant, context_id, "caller", caller_id(principal))

    async def join(
        self,
        tenant: str,
        context_id: str,
        kind: ParticipantKind,
        participant: str,
        *,
        limited: bool = True,
    ) -> None:
        """A message from `participant` in the session: its activity, and who sent it.
        Opening the session counts against the limit unless not `limited`."""
        entry = (tenant, context_id, kind, participant)
        if self.limit is None or not limited:
            await self._entries.enter(entry)
            return
        async with self._pool.acquire() as conn:
            if await conn.fetchval(_CONTINUE, *entry, self.idle_seconds):  # the usual case
                return
            async with conn.transaction():
                # One opening per tenant at a time: two at once cannot both take the last place.
                await conn.execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))", _OPEN_LOCK_CLASS, tenant
                )
                active = await conn.fetchval(
                    "SELECT count(*) FROM sessions WHERE tenant = $1 AND context_id <> $2 "
                    "AND last_activity > now() - make_interval(secs => $3)",
                    tenant,
                    context_id,
                    self.idle_seconds,
                )
                if active >= self.limit:
                    raise SessionLimitError(
                        f"this tenant has {active} active sessions, the most it may have "
                        f"(AGENTIC_RAG_SESSION_LIMIT); continue one of them (send its "
                        f"contextId) or wait until one has been idle for {self.idle_seconds:g} s"
                    )
                await conn.execute(_ENTER, *([value] for value in entry), self.idle_seconds)

    async def reference_delegation(
        self, tenant: str, context_id: str, task_id: str, peer_id: str | None
    ) -> None:
        """The session's delegation `task_id` went to `peer_id` (a participant from now on).
        Work under way is never refused: this does not count against the limit."""
        if peer_id is not None:
            await self.join(tenant, context_id, "peer", peer_id, limited=False)
        else:
            await self._pool.execute(
                "INSERT INTO sessions (tenant, context_id) VALUES ($1, $2) "
                "ON CONFLICT (tenant, context_id) DO UPDATE SET last_activity = now()",
                tenant,
                context_id,
            )
        await self._pool.execute(
            "INSERT INTO session_delegations (tenant, context_id, task_id, peer_id) "
            "VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, context_id, task_id) "
            "DO UPDATE SET peer_id = coalesce(excluded.peer_id, session_delegations.peer_id)",
            tenant,
            context_id,
            task_id,
            peer_id,
        )

    async def list(self, tenant: str) -> list[Session]:
        """The tenant's active sessions, the most recently active first."""
        rows = await self._pool.fetch(
            "SELECT context_id, created_at, last_activity, "
            " last_activity + make_interval(secs => $2) AS expires_at FROM sessions "
            "WHERE tenant = $1 AND last_activity > now() - make_interval(secs => $2) "
            "ORDER BY last_activity DESC",
            tenant,
            self.idle_seconds,
        )
        return [Session(**dict(r)) for r in rows]

    async def get(self, tenant: str, context_id: str) -> Session | None:
        """An active session with its participants, tasks and delegations; None if there is
        none (or it expired)."""
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT context_id, created_at, last_activity, "
                " last_activity + make_interval(secs => $3) AS expires_at FROM sessions "
                "WHERE tenant = $1 AND context_id = $2 "
                "AND last_activity > now() - make_interval(secs => $3)",
                tenant,
                context_id,
                self.idle_seconds,
            )
            if row is None:
                return None
            participants = await conn.fetch(
                "SELECT kind, participant AS id, first_seen, last_seen FROM session_participants "
                "WHERE tenant = $1 AND context_id = $2 ORDER BY first_seen, participant",
                tenant,
                context_id,
            )
            tasks = await conn.fetch(
                "SELECT id, state FROM tasks WHERE tenant = $1 AND context_id = $2 "
                "ORDER BY created_at, id",
                tenant,
                context_id,
            )
            delegations = await conn.fetch(
                "SELECT task_id, peer_id FROM session_delegations "
                "WHERE tenant = $1 AND context_id = $2 ORDER BY created_at, task_id",
                tenant,
                context_id,
            )
        return Session(
            **dict(row),
            participants=tuple(Participant(**dict(p)) for p in participants),
            tasks=tuple(TaskReference(**dict(t)) for t in tasks),
            delegations=tuple(DelegationReference(**dict(d)) for d in delegations),
        )

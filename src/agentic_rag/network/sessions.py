"""Sessions: an A2A context is a session; all SQL of the session tables.

A session records who sent messages in it (callers, by credential, and peers, by peer id) and
the delegations it references; its tasks are the context's tasks. It expires after
`idle_seconds` without a message, and with a `limit` a tenant may have at most that many active
sessions: a message that would open one more is refused (`SessionLimitError`), before any task
is created.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg

from agentic_rag.a2a.compat import SendParams
from agentic_rag.a2a.errors import A2AError
from agentic_rag.ids import new_id
from agentic_rag.security.principal import Principal

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
# A message in any session: opens it (again, if expired: a new start), records the sender, and
# drops the tenant's other expired sessions. One statement: this runs for every message.
_ENTER = (
    "WITH expired AS (DELETE FROM sessions WHERE tenant = $1 AND context_id <> $2 "
    "  AND last_activity <= now() - make_interval(secs => $5)), "
    "s AS (INSERT INTO sessions (tenant, context_id) VALUES ($1, $2) "
    "  ON CONFLICT (tenant, context_id) DO UPDATE SET last_activity = now(), "
    "  created_at = CASE WHEN sessions.last_activity <= now() - make_interval(secs => $5) "
    "   THEN now() ELSE sessions.created_at END "
    "  RETURNING context_id) "
    "INSERT INTO session_participants (tenant, context_id, kind, participant) "
    "SELECT $1, context_id, $3, $4 FROM s ON CONFLICT (tenant, context_id, kind, participant) "
    "DO UPDATE SET last_seen = now()"
)


class SessionLimitError(A2AError):
    """The tenant has as many active sessions as it may (JSON-RPC error -32013)."""

    code, default_message = -32013, "Session limit reached"


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


class SessionStore:
    def __init__(self, pool: asyncpg.Pool, *, idle_seconds: float, limit: int | None) -> None:
        self._pool = pool
        self.idle_seconds, self.limit = idle_seconds, limit

    async def admit(self, principal: Principal, params: SendParams) -> SendParams:
        """Let the caller's message into its session, opening the session if need be (within
        the limit). A message that starts a task in no named context gets its new context's
        id here. A message to an existing task (no context named) is recorded after it was
        accepted, with `touch`."""
        message = params.message
        if message.task_id is not None and message.context_id is None:
            return params
        if message.context_id is None:
            context_id = new_id()
            params = params.model_copy(
                update={"message": message.model_copy(update={"context_id": context_id})}
            )
        else:
            context_id = message.context_id
        await self.join(principal.tenant, context_id, "caller", caller_id(principal))
        return params

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
        arguments = (tenant, context_id, kind, participant, self.idle_seconds)
        if self.limit is None or not limited:
            await self._pool.execute(_ENTER, *arguments)
            return
        async with self._pool.acquire() as conn:
            if await conn.fetchval(_CONTINUE, *arguments):  # the usual case: it is active
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
                await conn.execute(_ENTER, *arguments)

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

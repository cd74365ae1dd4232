"""DelegationStore: all SQL of the `delegations` table.

A delegation's id is the id of the local A2A task that runs it (`delegate_task` is a resumable
skill), so the task run again after a restart finds the delegation and follows the remote task
it recorded, with the deadline it had.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
import orjson

from agentic_rag.storage.pool import Pool

DelegationState = Literal["placing", "following", "completed", "failed", "canceled"]
SETTLED: frozenset[str] = frozenset({"completed", "failed", "canceled"})

_COLUMNS = (
    "id, capability, target, request, deadline, state, peer_id, remote_task_id, "
    "remote_context_id, remote_state, passed_over, result, error"
)


@dataclass(frozen=True, slots=True)
class Delegation:
    tenant: str
    id: str
    capability: str
    target: str
    request: dict[str, Any]
    deadline: datetime
    state: DelegationState
    peer_id: str | None
    remote_task_id: str | None
    remote_context_id: str | None
    remote_state: str | None
    passed_over: tuple[tuple[str, str], ...]  # (peer id, why) of peers that never accepted it
    result: dict[str, Any] | None
    error: str | None


class DelegationStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def open(
        self,
        tenant: str,
        delegation_id: str,
        *,
        capability: str,
        target: str,
        request: dict[str, Any],
        deadline: datetime,
    ) -> Delegation:
        """The delegation `delegation_id`: created, or as stored (a task run again)."""
        row = await self._pool.fetchrow(
            "WITH created AS ("
            " INSERT INTO delegations (tenant, id, capability, target, request, deadline, state)"
            " VALUES ($1, $2, $3, $4, $5::jsonb, $6, 'placing')"
            f" ON CONFLICT (tenant, id) DO NOTHING RETURNING {_COLUMNS})"
            f" SELECT {_COLUMNS} FROM created UNION ALL"
            f" SELECT {_COLUMNS} FROM delegations WHERE tenant = $1 AND id = $2",
            tenant,
            delegation_id,
            capability,
            target,
            orjson.dumps(request).decode(),
            deadline,
        )
        assert row is not None
        return _delegation(tenant, row)

    async def get(self, tenant: str, delegation_id: str) -> Delegation | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM delegations WHERE tenant = $1 AND id = $2",
            tenant,
            delegation_id,
        )
        return _delegation(tenant, row) if row is not None else None

    async def pass_over(self, tenant: str, delegation_id: str, peer_id: str, why: str) -> None:
        """Record that `peer_id` never accepted the delegation (it is not tried again)."""
        await self._pool.execute(
            "UPDATE delegations SET passed_over = passed_over || $3::jsonb, updated_at = now()"
            " WHERE tenant = $1 AND id = $2",
            tenant,
            delegation_id,
            orjson.dumps([[peer_id, why]]).decode(),
        )

    async def accepted(
        self,
        tenant: str,
        delegation_id: str,
        *,
        peer_id: str,
        remote_task_id: str,
        remote_context_id: str,
        remote_state: str,
    ) -> None:
        await self._pool.execute(
            "UPDATE delegations SET state = 'following', peer_id = $3, remote_task_id = $4,"
            " remote_context_id = $5, remote_state = $6, updated_at = now()"
            " WHERE tenant = $1 AND id = $2",
            tenant,
            delegation_id,
            peer_id,
            remote_task_id,
            remote_context_id,
            remote_state,
        )

    async def remote_state(self, tenant: str, delegation_id: str, state: str) -> None:
        await self._pool.execute(
            "UPDATE delegations SET remote_state = $3, updated_at = now()"
            " WHERE tenant = $1 AND id = $2 AND remote_state IS DISTINCT FROM $3",
            tenant,
            delegation_id,
            state,
        )

    async def finish(
        self,
        tenant: str,
        delegation_id: str,
        state: DelegationState,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        await self._pool.execute(
            "UPDATE delegations SET state = $3, result = $4::jsonb, error = $5, updated_at = now()"
            " WHERE tenant = $1 AND id = $2",
            tenant,
            delegation_id,
            state,
            orjson.dumps(result).decode() if result is not None else None,
            error,
        )


def _delegation(tenant: str, row: asyncpg.Record) -> Delegation:
    return Delegation(
        tenant=tenant,
        id=row["id"],
        capability=row["capability"],
        target=row["target"],
        request=orjson.loads(row["request"]),
        deadline=row["deadline"],
        state=row["state"],
        peer_id=row["peer_id"],
        remote_task_id=row["remote_task_id"],
        remote_context_id=row["remote_context_id"],
        remote_state=row["remote_state"],
        passed_over=tuple((p, w) for p, w in orjson.loads(row["passed_over"])),
        result=orjson.loads(row["result"]) if row["result"] is not None else None,
        error=row["error"],
    )

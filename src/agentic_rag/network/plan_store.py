"""PlanStore: all SQL of orchestration plans and their steps (`plans`, `plan_steps`).

A plan's id is the id of the `orchestrate` task that runs it (a resumable skill): the task run
again after a crash, on whichever worker takes it over, finds the plan as decided and every
step as it was, and continues from there.
"""

from dataclasses import dataclass
from typing import Any, Literal

import asyncpg
import orjson

from agentic_rag.storage.pool import Pool

StepState = Literal["pending", "running", "completed", "failed", "canceled"]
PlanState = Literal["running", "completed", "failed", "canceled"]


@dataclass(frozen=True, slots=True)
class StoredStep:
    step_id: str
    state: StepState
    task_id: str | None
    attempt: int
    output: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class StoredPlan:
    id: str
    goal: str
    plan: list[dict[str, Any]]
    state: PlanState
    steps: dict[str, StoredStep]


class PlanStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def get(self, tenant: str, plan_id: str) -> StoredPlan | None:
        async with self._pool.acquire() as conn:
            return await _read(conn, tenant, plan_id)

    async def create(
        self, tenant: str, plan_id: str, goal: str, steps: list[dict[str, Any]]
    ) -> StoredPlan:
        """Store the plan and its steps (pending), unless it exists: the plan as stored."""
        async with self._pool.acquire() as conn, conn.transaction():
            created = await conn.fetchval(
                "INSERT INTO plans (tenant, id, goal, plan, state)"
                " VALUES ($1, $2, $3, $4::jsonb, 'running')"
                " ON CONFLICT (tenant, id) DO NOTHING RETURNING true",
                tenant,
                plan_id,
                goal,
                orjson.dumps(steps).decode(),
            )
            if created:
                await conn.executemany(
                    "INSERT INTO plan_steps (tenant, plan_id, step_id, state)"
                    " VALUES ($1, $2, $3, 'pending')",
                    [(tenant, plan_id, step["id"]) for step in steps],
                )
            stored = await _read(conn, tenant, plan_id)
        assert stored is not None
        return stored

    async def start_step(
        self, tenant: str, plan_id: str, step_id: str, *, task_id: str, attempt: int
    ) -> None:
        await self._pool.execute(
            "UPDATE plan_steps SET state = 'running', task_id = $4, attempt = $5,"
            " error = NULL, updated_at = now() WHERE tenant = $1 AND plan_id = $2 AND step_id = $3",
            tenant,
            plan_id,
            step_id,
            task_id,
            attempt,
        )

    async def finish_step(
        self,
        tenant: str,
        plan_id: str,
        step_id: str,
        state: StepState,
        *,
        output: Any = None,
        error: str | None = None,
    ) -> None:
        await self._pool.execute(
            "UPDATE plan_steps SET state = $4, output = $5::jsonb, error = $6, updated_at = now()"
            " WHERE tenant = $1 AND plan_id = $2 AND step_id = $3",
            tenant,
            plan_id,
            step_id,
            state,
            orjson.dumps(output).decode() if output is not None else None,
            error,
        )

    async def finish(self, tenant: str, plan_id: str, state: PlanState) -> None:
        await self._pool.execute(
            "UPDATE plans SET state = $3, updated_at = now() WHERE tenant = $1 AND id = $2",
            tenant,
            plan_id,
            state,
        )


async def _read(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, tenant: str, plan_id: str
) -> StoredPlan | None:
    plan = await conn.fetchrow(
        "SELECT goal, plan, state FROM plans WHERE tenant = $1 AND id = $2", tenant, plan_id
    )
    if plan is None:
        return None
    rows = await conn.fetch(
        "SELECT step_id, state, task_id, attempt, output, error FROM plan_steps"
        " WHERE tenant = $1 AND plan_id = $2",
        tenant,
        plan_id,
    )
    steps = {
        r["step_id"]: StoredStep(
            step_id=r["step_id"],
            state=r["state"],
            task_id=r["task_id"],
            attempt=r["attempt"],
            output=orjson.loads(r["output"]) if r["output"] is not None else None,
            error=r["error"],
        )
        for r in rows
    }
    return StoredPlan(plan_id, plan["goal"], orjson.loads(plan["plan"]), plan["state"], steps)

"""TrajectoryStore: all SQL of retrieval trajectories, what `explain_answer` replays."""

from datetime import timedelta
from typing import Any

import orjson

from agentic_rag.storage.pool import Pool


class TrajectoryStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def save(
        self, tenant: str, trajectory_id: str, query: str, trace: dict[str, Any]
    ) -> None:
        # A trajectory is a diagnostic record written on every search: its commit does not wait
        # for the WAL flush (synchronous_commit off for this one transaction, set inside the
        # statement so that it costs no extra round trip). A crash may lose the last few
        # trajectories, never leave one half-written.
        await self._pool.execute(
            "INSERT INTO retrievals (tenant, id, query, trace) "
            "SELECT $1, $2, $3, $4::jsonb "
            "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit",
            tenant,
            trajectory_id,
            query,
            orjson.dumps(trace).decode(),
        )

    async def get(self, tenant: str, trajectory_id: str) -> dict[str, Any] | None:
        value = await self._pool.fetchval(
            "SELECT trace FROM retrievals WHERE tenant = $1 AND id = $2", tenant, trajectory_id
        )
        return orjson.loads(value) if value is not None else None

    async def forget_older_than(self, age: timedelta) -> int:
        deleted = await self._pool.fetchval(
            "WITH gone AS (DELETE FROM retrievals WHERE created_at < now() - $1::interval "
            "RETURNING 1) SELECT count(*) FROM gone",
            age,
        )
        return int(deleted or 0)

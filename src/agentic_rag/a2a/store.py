"""The durable task store: tasks, their event log, contexts and push configs in PostgreSQL.

Every query is scoped by tenant. The SQL of these tables lives here and nowhere else.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import asyncpg
import orjson

from agentic_rag.a2a.compat import PushConfig
from agentic_rag.a2a.schema import Task


@dataclass(frozen=True)
class Event:
    """One entry of a task's event log, serialised once for the database and the wire."""

    seq: int
    kind: str  # task | status-update | artifact-update | message
    final: bool  # a status that ends a stream cycle
    json: str

    @property
    def streamed(self) -> bool:
        # The client's own continuation messages are logged but are not stream results.
        return self.kind != "message"


@dataclass(frozen=True)
class StoredTask:
    task: Task
    last_seq: int


@dataclass(eq=False)  # identity: the journal tells writes apart by which one it is
class TaskWrite:
    """A task's new snapshot and the events that led to it, written in one transaction."""

    tenant: str
    task: Task
    last_seq: int
    events: list[Event]

    @cached_property
    def snapshot_json(self) -> str:
        """The snapshot as JSON: made once, for the database and for the answer that shows it."""
        return self.task.model_dump_json(by_alias=True, exclude_none=True)


# The whole batch travels as one JSON document that PostgreSQL takes apart: encoding it is one
# orjson call (events and snapshots are embedded already serialised), where 14 array
# parameters cost the client more CPU than the rest of the request.
_WRITE = """
WITH batch AS (SELECT $1::jsonb AS doc),
new_contexts AS (
    INSERT INTO contexts (tenant, id)
    SELECT c->>0, c->>1 FROM batch, jsonb_array_elements(doc->'contexts') AS c
    ON CONFLICT DO NOTHING
), new_events AS (
    INSERT INTO task_events (tenant, task_id, seq, kind, final, event)
    SELECT e->>'tenant', e->>'task', (e->>'seq')::bigint, e->>'kind', (e->>'final')::boolean,
           e->'event'
    FROM batch, jsonb_array_elements(doc->'events') AS e
)
INSERT INTO tasks (tenant, id, context_id, state, last_seq, task)
SELECT t->>'tenant', t->>'id', t->>'context', t->>'state', (t->>'seq')::bigint, t->'task'
FROM batch, jsonb_array_elements(doc->'tasks') AS t
ON CONFLICT (tenant, id) DO UPDATE
SET state = excluded.state, last_seq = excluded.last_seq, task = excluded.task, updated_at = now()
WHERE tasks.last_seq < excluded.last_seq  -- commits may finish out of order: keep the newest
"""


class TaskStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def get(self, tenant: str, task_id: str) -> StoredTask | None:
        row = await self._pool.fetchrow(
            "SELECT task, last_seq FROM tasks WHERE tenant = $1 AND id = $2", tenant, task_id
        )
        if row is None:
            return None
        return StoredTask(Task.model_validate_json(row["task"]), row["last_seq"])

    async def write(self, writes: Sequence[TaskWrite]) -> None:
        """Append the events and upsert the snapshots of several tasks, atomically.

        One statement, so one round trip however many tasks the journal batched.
        """
        latest: dict[tuple[str, str], TaskWrite] = {}
        for w in writes:
            latest[(w.tenant, w.task.id)] = w  # a row may be upserted once per statement
        batch = {
            "contexts": sorted(
                {(w.tenant, w.task.context_id) for w in writes if w.events[0].seq == 1}
            ),
            "events": [
                {
                    "tenant": w.tenant,
                    "task": w.task.id,
                    "seq": e.seq,
                    "kind": e.kind,
                    "final": e.final,
                    "event": orjson.Fragment(e.json),
                }
                for w in writes
                for e in w.events
            ],
            "tasks": [
                {
                    "tenant": w.tenant,
                    "id": w.task.id,
                    "context": w.task.context_id,
                    "state": w.task.status.state.value,
                    "seq": w.last_seq,
                    "task": orjson.Fragment(w.snapshot_json),
                }
                for _, w in sorted(
                    latest.items()
                )  # one lock order: concurrent commits cannot deadlock
            ],
        }
        await self._pool.execute(_WRITE, orjson.dumps(batch).decode())

    async def events_after(self, tenant: str, task_id: str, seq: int) -> list[Event]:
        rows = await self._pool.fetch(
            "SELECT seq, kind, final, event FROM task_events"
            " WHERE tenant = $1 AND task_id = $2 AND seq > $3 ORDER BY seq",
            tenant,
            task_id,
            seq,
        )
        return [Event(r["seq"], r["kind"], r["final"], r["event"]) for r in rows]

    async def unfinished(self) -> list[tuple[str, StoredTask]]:
        """Every task, of any tenant, left submitted or working (for recovery at start)."""
        rows = await self._pool.fetch(
            "SELECT tenant, task, last_seq FROM tasks WHERE state IN ('submitted', 'working')"
        )
        return [
            (r["tenant"], StoredTask(Task.model_validate_json(r["task"]), r["last_seq"]))
            for r in rows
        ]

    async def put_push_config(self, tenant: str, task_id: str, config: PushConfig) -> None:
        assert config.id is not None
        await self._pool.execute(
            "INSERT INTO push_configs (tenant, task_id, config_id, config) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (tenant, task_id, config_id) DO UPDATE SET config = excluded.config",
            tenant,
            task_id,
            config.id,
            config.model_dump_json(by_alias=True, exclude_none=True),
        )

    async def push_configs(self, tenant: str, task_id: str) -> list[PushConfig]:
        rows = await self._pool.fetch(
            "SELECT config FROM push_configs WHERE tenant = $1 AND task_id = $2"
            " ORDER BY created_at, config_id",
            tenant,
            task_id,
        )
        return [PushConfig.model_validate_json(r["config"]) for r in rows]

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> bool:
        status: str = await self._pool.execute(
            "DELETE FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id = $3",
            tenant,
            task_id,
            config_id,
        )
        return status != "DELETE 0"

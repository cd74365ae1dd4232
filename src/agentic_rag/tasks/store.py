"""The durable task store: tasks, their event log, contexts and push configs in PostgreSQL.

Every query is scoped by tenant. The SQL of these tables lives here and nowhere else.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

import asyncpg
import orjson

from agentic_rag.schema.a2a import Task
from agentic_rag.schema.base import wire_json
from agentic_rag.schema.compat import PushConfig
from agentic_rag.storage.cluster import TASK_EVENTS_CHANNEL
from agentic_rag.storage.pool import Pool

# Every commit of task events notifies TASK_EVENTS_CHANNEL with the JSON list of [tenant,
# task id] it wrote, so that other workers following those tasks read on.
_NOTIFY_BYTES = 7000  # PostgreSQL refuses payloads of 8000 bytes or more


class TaskConflict(Exception):
    """Another writer (another worker) logged events of the task first: re-read it."""


def unreachable(error: Exception) -> bool:
    """Whether a failed write failed for want of the database (down, restarting, cut off), not
    for what it wrote (a value PostgreSQL cannot hold, a conflict), which no retry mends."""
    return not isinstance(
        error,
        TaskConflict | asyncpg.DataError | asyncpg.IntegrityConstraintViolationError,
    )


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
    """A task's new snapshot and the events that led to it, written in one transaction.

    The status is written every time; the rest of the snapshot (history, artifacts) only with
    `body`, when it changed since the task's last durable write: so a progress event costs its
    event and its status, not the whole snapshot again (see `TaskStore.write`)."""

    tenant: str
    task: Task
    last_seq: int
    events: list[Event]
    body: bool = True
    # Called by the journal once the write is durable, before its events go live.
    on_stored: "Callable[[TaskWrite], None] | None" = None
    # Set once written: whether the task is settled (final or paused) with push configs.
    push: bool = False

    @cached_property
    def snapshot_json(self) -> str:
        """The snapshot as JSON: made once, for the database and for the answer that shows it."""
        return wire_json(self.task)


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
), snapshots AS (
    -- A task's row is written in two parts, each kept at its newest (commits may finish out
    -- of order): the status with every commit, the body (`task`: history, artifacts) only when
    -- the commit carries it. A body left out stays where it is, its TOASTed value untouched.
    -- (A row proposed without a body has body_seq 0: NOT NULL is checked before conflicts.)
    INSERT INTO tasks (tenant, id, context_id, state, last_seq, status, task, body_seq, worker)
    SELECT t->>'tenant', t->>'id', t->>'context', t->>'state', (t->>'seq')::bigint,
           t->'status', coalesce(t->'task', '{}'), CASE WHEN t ? 'task' THEN
           (t->>'seq')::bigint ELSE 0 END, (doc->>'worker')::integer
    FROM batch, jsonb_array_elements(doc->'tasks') AS t
    ON CONFLICT (tenant, id) DO UPDATE
    SET state = CASE WHEN tasks.last_seq < excluded.last_seq
                     THEN excluded.state ELSE tasks.state END,
        status = CASE WHEN tasks.last_seq < excluded.last_seq
                      THEN excluded.status ELSE tasks.status END,
        last_seq = greatest(tasks.last_seq, excluded.last_seq),
        task = CASE WHEN tasks.body_seq < excluded.body_seq
                    THEN excluded.task ELSE tasks.task END,
        body_seq = greatest(tasks.body_seq, excluded.body_seq),
        worker = excluded.worker, updated_at = now()
    WHERE tasks.last_seq < excluded.last_seq OR tasks.body_seq < excluded.body_seq
)
SELECT
    (SELECT count(pg_notify($3, payload)) FROM unnest($2::text[]) AS payload) AS notified,
    -- Which tasks that this commit ends or pauses have webhooks: read in the same transaction,
    -- so a config stored (by any worker) before the task settled is never missed.
    (SELECT jsonb_agg(DISTINCT jsonb_build_array(c.tenant, c.task_id))
     FROM batch, jsonb_array_elements(doc->'settled') AS s
     JOIN push_configs AS c ON c.tenant = s->>0 AND c.task_id = s->>1) AS pushed
"""

# The unfinished tasks of workers that are gone (no advisory lock of theirs is held on this
# database, and none among those spared, $3), taken over by worker $1. Concurrent sweeps take
# each task once: the second re-checks the row after the first commits, and finds it owned by
# a live worker.
_CLAIM_ORPHANS = """
UPDATE tasks SET worker = $1
WHERE state IN ('submitted', 'working')
  AND worker IS DISTINCT FROM $1
  AND (worker IS NULL OR worker <> ALL($3::integer[]))
  AND NOT EXISTS (
    SELECT 1 FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $2 AND l.objsubid = 2
      AND l.objid = tasks.worker::oid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
RETURNING tenant, task || jsonb_build_object('status', status) AS task, last_seq
"""


def _snapshot(write: TaskWrite) -> dict[str, object]:
    """What the batch carries of a task's row: its status, and its body when it changed."""
    task = write.task
    row: dict[str, object] = {
        "tenant": write.tenant,
        "id": task.id,
        "context": task.context_id,
        "state": task.status.state.value,
        "seq": write.last_seq,
        "status": orjson.Fragment(wire_json(task.status)),
    }
    if write.body:
        row["task"] = orjson.Fragment(write.snapshot_json)
    return row


def _notifications(keys: Sequence[tuple[str, str]]) -> list[str]:
    """`keys` as JSON lists small enough for NOTIFY payloads."""
    payloads: list[bytes] = []
    chunk: list[bytes] = []
    size = 2
    for key in keys:
        item = orjson.dumps(key)
        if chunk and size + len(item) + 1 > _NOTIFY_BYTES:
            payloads.append(b"[" + b",".join(chunk) + b"]")
            chunk, size = [], 2
        chunk.append(item)
        size += len(item) + 1
    if chunk:
        payloads.append(b"[" + b",".join(chunk) + b"]")
    return [p.decode() for p in payloads]


# Where a listing of tasks goes on: the status time and id of the last task of a page.
type Cursor = tuple[datetime, str]
# When a task's status last changed, as its snapshot says.
_STATUS_AT = "(status ->> 'timestamp')::timestamptz"
# A task as stored: its body with its status laid over (the body's may be older).
_TASK = "task || jsonb_build_object('status', status)"


@dataclass(frozen=True)
class TaskQuery:
    """Which of a tenant's tasks to list (A2A 1.0 ListTasks); None matches any."""

    context_id: str | None
    state: str | None  # a TaskState value, as stored
    status_since: datetime | None  # status timestamp at or after
    after: Cursor | None
    limit: int


class TaskStore:
    """The tasks of every tenant, written by `worker` (None: no worker, as in tests)."""

    def __init__(self, pool: Pool, worker: int | None = None) -> None:
        self._pool, self.worker = pool, worker

    async def get(self, tenant: str, task_id: str) -> StoredTask | None:
        row = await self._pool.fetchrow(
            f"SELECT {_TASK} AS task, last_seq FROM tasks WHERE tenant = $1 AND id = $2",
            tenant,
            task_id,
        )
        if row is None:
            return None
        return StoredTask(Task.model_validate_json(row["task"]), row["last_seq"])

    async def taken_over(self, tenant: str, task_id: str) -> bool:
        """Whether another worker's sweep has claimed the task (this worker's lease was lost)."""
        return bool(await self.taken_over_of([(tenant, task_id)]))

    async def taken_over_of(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the (tenant, task id) `keys` that another worker's sweep has claimed."""
        if not keys:
            return set()
        rows = await self._pool.fetch(
            "SELECT t.tenant, t.id FROM tasks AS t"
            " JOIN unnest($1::text[], $2::text[]) AS k (tenant, id)"
            " ON t.tenant = k.tenant AND t.id = k.id"
            " WHERE t.worker IS DISTINCT FROM $3 AND t.worker IS NOT NULL",
            [tenant for tenant, _ in keys],
            [task_id for _, task_id in keys],
            self.worker,
        )
        return {(r["tenant"], r["id"]) for r in rows}

    async def page(self, tenant: str, after: str | None, limit: int) -> list[Task]:
        """The tenant's tasks by id, from the first after `after` (None: from the first)."""
        rows = await self._pool.fetch(
            f"SELECT {_TASK} AS task FROM tasks WHERE tenant = $1 "
            "AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3",
            tenant,
            after,
            limit,
        )
        return [Task.model_validate_json(r["task"]) for r in rows]

    async def recent(self, tenant: str, query: TaskQuery) -> tuple[list[Task], int, Cursor | None]:
        """The tenant's tasks that match `query`, latest status change first, from the one
        after `query.after`: a page of at most `query.limit`, how many match in all, and the
        cursor of the next page (None: this is the last)."""
        status_at = f"coalesce({_STATUS_AT}, updated_at)"
        where = (
            "tenant = $1 AND ($2::text IS NULL OR context_id = $2) "
            "AND ($3::text IS NULL OR state = $3) "
            f"AND ($4::timestamptz IS NULL OR {status_at} >= $4)"
        )
        filters = (tenant, query.context_id, query.state, query.status_since)
        after = query.after or (None, None)
        async with self._pool.acquire() as conn:
            total = await conn.fetchval(f"SELECT count(*) FROM tasks WHERE {where}", *filters)
            rows = await conn.fetch(
                f"SELECT {_TASK} AS task, {status_at} AS status_at, id FROM tasks WHERE {where} "
                f"AND ($5::timestamptz IS NULL OR ({status_at}, id) < ($5, $6::text)) "
                f"ORDER BY {status_at} DESC, id DESC LIMIT $7",
                *filters,
                *after,
                query.limit + 1,
            )
        page = rows[: query.limit]
        more = len(rows) > query.limit
        cursor = (page[-1]["status_at"], page[-1]["id"]) if more else None
        return [Task.model_validate_json(r["task"]) for r in page], total, cursor

    async def write(self, writes: Sequence[TaskWrite]) -> None:
        """Append the events and upsert the snapshots of several tasks, atomically, and mark
        the latest write of each settled task that has push configs (`TaskWrite.push`).

        One statement, so one round trip however many tasks the journal batched.
        """
        latest: dict[tuple[str, str], TaskWrite] = {}
        for w in writes:
            latest[(w.tenant, w.task.id)] = w  # a row may be upserted once per statement
        batch = {
            "worker": self.worker,
            "settled": [key for key, w in latest.items() if w.events[-1].final],
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
            # One lock order: concurrent commits cannot deadlock.
            "tasks": [_snapshot(w) for _, w in sorted(latest.items())],
        }
        notifications = _notifications(sorted(latest))
        try:
            row = await self._pool.fetchrow(
                _WRITE, orjson.dumps(batch).decode(), notifications, TASK_EVENTS_CHANNEL
            )
        except asyncpg.UniqueViolationError as exc:  # an event's (tenant, task_id, seq) exists
            tasks = ", ".join(task_id for _, task_id in sorted(latest))
            raise TaskConflict(f"task {tasks} was changed by another writer") from exc
        assert row is not None
        if row["pushed"] is not None:
            for tenant, task_id in orjson.loads(row["pushed"]):
                latest[(tenant, task_id)].push = True

    async def events_after(self, tenant: str, task_id: str, seq: int) -> list[Event]:
        rows = await self._pool.fetch(
            "SELECT seq, kind, final, event FROM task_events"
            " WHERE tenant = $1 AND task_id = $2 AND seq > $3 ORDER BY seq",
            tenant,
            task_id,
            seq,
        )
        return [Event(r["seq"], r["kind"], r["final"], r["event"]) for r in rows]

    async def claim_orphans(
        self, lock_class: int, spared: Sequence[int] = ()
    ) -> list[tuple[str, StoredTask]]:
        """Take over the submitted and working tasks of workers that are gone.

        A worker is alive while it holds the advisory lock (`lock_class`, its id), and those
        `spared` are taken for alive whether or not they hold it now (`Cluster.spared`).
        """
        assert self.worker is not None, "only a worker can take tasks over"
        rows = await self._pool.fetch(_CLAIM_ORPHANS, self.worker, lock_class, list(spared))
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
            _stored_config(config),
        )

    async def push_configs(self, tenant: str, task_id: str) -> list[PushConfig]:
        rows = await self._pool.fetch(
            "SELECT config FROM push_configs WHERE tenant = $1 AND task_id = $2"
            " ORDER BY created_at, config_id",
            tenant,
            task_id,
        )
        return [_push_config(r["config"]) for r in rows]

    async def delete_push_config(self, tenant: str, task_id: str, config_id: str) -> None:
        await self._pool.execute(
            "DELETE FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id = $3",
            tenant,
            task_id,
            config_id,
        )


# The key of a stored push config that says what its notifications carry when not the Task
# (`PushConfig.body`): no wire model has it, and a config read back ignores it.
_BODY = "agentic_rag.body"


def _stored_config(config: PushConfig) -> str:
    stored = config.model_dump(mode="json", by_alias=True, exclude_none=True)
    if config.body != "task":
        stored[_BODY] = config.body
    return orjson.dumps(stored).decode()


def _push_config(stored: str) -> PushConfig:
    record = orjson.loads(stored)
    config = PushConfig.model_validate(record)
    body = record.get(_BODY)
    return config.delivering(body) if body == "stream-response" else config

"""The task store keeps the newest snapshot, whatever order the journal's commits finish in."""

import asyncpg

from agentic_rag.schema.a2a import TaskState
from agentic_rag.tasks import states
from agentic_rag.tasks.parts import serialize
from agentic_rag.tasks.store import TaskStore, TaskWrite
from tests.support.tasks import a_task


async def test_an_older_snapshot_committed_late_does_not_replace_a_newer_one(
    pool: asyncpg.Pool,
) -> None:
    created = a_task("t", TaskState.submitted)
    working = states.status_event(created, TaskState.working)
    completed_event = states.status_event(states.apply(created, working), TaskState.completed)
    completed = states.apply(states.apply(created, working), completed_event)
    store = TaskStore(pool)

    # The later commit (events 2-3) finishes before the earlier one (event 1).
    await store.write(
        [TaskWrite("acme", completed, 3, [serialize(working, 2), serialize(completed_event, 3)])]
    )
    await store.write([TaskWrite("acme", created, 1, [serialize(created, 1)])])

    stored = await store.get("acme", "t")
    assert stored is not None
    assert (stored.task.status.state, stored.last_seq) == (TaskState.completed, 3)
    assert [e.seq for e in await store.events_after("acme", "t", 0)] == [1, 2, 3]
    assert await store.get("other-tenant", "t") is None

"""The graph's episode queue under the workers' leases: an episode being processed by a worker
that holds no lock is taken back, unless that worker is spared (a sweep saw it holding its
lease within the lease's time: it may be taking it again after its connection dropped)."""

import asyncpg

from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.queue import EpisodeQueue
from agentic_rag.storage.cluster import WORKER_LOCK_CLASS


async def test_a_spared_workers_episode_is_not_taken_back_and_a_gone_workers_is(
    pool: asyncpg.Pool,
) -> None:
    queue = EpisodeQueue(pool)
    assert await queue.add("acme", "episode-1", Namespace("acme"), {"name": "a"})
    claimed = await queue.claim(worker=7, per_namespace=1)  # worker 7 holds no lock
    assert claimed is not None and claimed.uuid == "episode-1"

    assert await queue.recover(WORKER_LOCK_CLASS, max_attempts=3, spared=[7]) == 0
    state = await pool.fetchval("SELECT state FROM graph_episodes WHERE uuid = 'episode-1'")
    assert state == "processing"

    assert await queue.recover(WORKER_LOCK_CLASS, max_attempts=3) == 1
    state = await pool.fetchval("SELECT state FROM graph_episodes WHERE uuid = 'episode-1'")
    assert state == "queued"

"""EpisodeQueue: all SQL of the graph's episode queue (storage/migrations/0009_graph_episodes.sql).

An episode is queued by add_memory and claimed by a worker of any process. A claim writes the
worker's id; the worker's lease is its advisory lock (`storage.cluster`), so an episode whose
worker died (its lock gone) is put back in the queue by the next `recover` of any worker.
Every write after the claim is conditioned on the worker still holding the episode, so a
worker that lost it (taken over after its connection dropped) changes nothing.

Order: an episode is claimable only while fewer than `per_namespace` episodes of its namespace
are ahead of it unfinished (queued or processing). With 1, a namespace's episodes run one
after the other in the order they were added; a failed one is retried (after a pause) before
the next starts, and once out of attempts it is `failed` and the next one goes.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from agentic_rag.graph.cost import EpisodeCost
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.storage.pool import Pool

STATES = ("queued", "processing", "done", "failed")


@dataclass(frozen=True)
class QueuedEpisode:
    tenant: str
    uuid: str
    namespace: Namespace
    arguments: dict[str, Any]
    attempts: int
    seq: int  # its place in the queue: a new one if it is deleted and queued again


@dataclass(frozen=True)
class EpisodeRecord:
    """An episode as the queue knows it: what add_memory was given, its state and what it
    cost."""

    uuid: str
    group_id: str
    name: str
    content: str
    source: str  # as given: text, json or message in any case
    source_description: str
    state: str
    attempts: int
    error: str | None
    cost: EpisodeCost
    seconds: float
    created_at: datetime


@dataclass(frozen=True)
class EpisodeSource:
    """An episode of an ingested document: the document and chunks it was made from, and
    what extracting it cost."""

    document_id: str
    chunk_ids: list[int]
    cost: EpisodeCost
    seconds: float


@dataclass(frozen=True)
class NamespaceCounts:
    group_id: str
    counts: dict[str, int]  # by state
    cost: EpisodeCost
    last_error: str | None


class EpisodeQueue:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def add(self, tenant: str, uuid: str, ns: Namespace, arguments: dict[str, Any]) -> bool:
        """Queue an episode; False if one with this uuid is queued or processing already.

        A finished episode given again (Graphiti's way to re-extract an episode) is queued
        again, at the end of the queue.
        """
        added = await self._pool.fetchval(
            "INSERT INTO graph_episodes (tenant, uuid, namespace, sub_group, arguments) "
            "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (tenant, uuid) DO UPDATE SET "
            "seq = nextval(pg_get_serial_sequence('graph_episodes', 'seq')), "
            "namespace = excluded.namespace, sub_group = excluded.sub_group, "
            "arguments = excluded.arguments, state = 'queued', attempts = 0, worker = NULL, "
            "not_before = now(), error = NULL, created_at = now(), finished_at = NULL "
            "WHERE graph_episodes.state IN ('done', 'failed') RETURNING true",
            tenant,
            uuid,
            ns.graph,
            ns.sub_group,
            orjson.dumps(arguments).decode(),
        )
        return bool(added)

    async def claim(self, worker: int, per_namespace: int) -> QueuedEpisode | None:
        """The next claimable episode, now this worker's; None if there is none."""
        row = await self._pool.fetchrow(_CLAIM, worker, per_namespace)
        if row is None:
            return None
        return QueuedEpisode(
            tenant=row["tenant"],
            uuid=row["uuid"],
            namespace=Namespace(row["tenant"], row["sub_group"]),
            arguments=orjson.loads(row["arguments"]),
            attempts=row["attempts"],
            seq=row["seq"],
        )

    async def done(
        self, worker: int, episode: QueuedEpisode, cost: EpisodeCost, seconds: float
    ) -> bool:
        """Record an extracted episode; False if this worker no longer holds it."""
        return await self._finish(worker, episode, "done", None, cost, seconds, retry_seconds=None)

    async def failed(
        self,
        worker: int,
        episode: QueuedEpisode,
        error: str,
        cost: EpisodeCost,
        seconds: float,
        *,
        retry_seconds: float | None,
    ) -> bool:
        """Record a failed attempt: queued again after `retry_seconds`, or failed for good.
        False if this worker no longer holds it."""
        state = "queued" if retry_seconds is not None else "failed"
        return await self._finish(worker, episode, state, error, cost, seconds, retry_seconds)

    async def _finish(
        self,
        worker: int,
        episode: QueuedEpisode,
        state: str,
        error: str | None,
        cost: EpisodeCost,
        seconds: float,
        retry_seconds: float | None,
    ) -> bool:
        updated = await self._pool.fetchval(
            "UPDATE graph_episodes SET state = $4, error = $5, worker = NULL, "
            "llm_calls = llm_calls + $6, prompt_tokens = prompt_tokens + $7, "
            "completion_tokens = completion_tokens + $8, llm_seconds = llm_seconds + $9, "
            "seconds = seconds + $10, "
            "not_before = now() + make_interval(secs => coalesce($11::float8, 0)), "
            "finished_at = CASE WHEN $4 IN ('done', 'failed') THEN now() END "
            "WHERE tenant = $1 AND uuid = $2 AND worker = $3 AND state = 'processing' "
            "RETURNING true",
            episode.tenant,
            episode.uuid,
            worker,
            state,
            error,
            cost.calls,
            cost.prompt_tokens,
            cost.completion_tokens,
            cost.seconds,
            seconds,
            retry_seconds,
        )
        return bool(updated)

    async def present(self, episode: QueuedEpisode) -> bool:
        """Whether a claimed episode is still in the queue as it was claimed: not deleted
        (delete_episode, or its document deleted), nor deleted and queued again since."""
        return bool(
            await self._pool.fetchval(
                "SELECT true FROM graph_episodes WHERE tenant = $1 AND uuid = $2 AND seq = $3",
                episode.tenant,
                episode.uuid,
                episode.seq,
            )
        )

    # -- the episodes of ingested documents (graph/documents.py) --------------------------

    async def document_episodes(
        self, tenant: str, document_ids: list[str]
    ) -> list[tuple[str, Namespace, str]]:
        """(uuid, namespace, state) of the episodes made from these documents."""
        rows = await self._pool.fetch(
            "SELECT uuid, sub_group, state FROM graph_episodes WHERE tenant = $1 "
            "AND arguments->>'document_id' = ANY($2::text[])",
            tenant,
            document_ids,
        )
        return [(r["uuid"], Namespace(tenant, r["sub_group"]), r["state"]) for r in rows]

    async def delete(self, tenant: str, uuids: list[str]) -> list[tuple[str, Namespace, str]]:
        """Remove these episodes from the queue; (uuid, namespace, state) of each removed.

        A queued one is never claimed then; a worker extracting one finds it gone when it
        ends (`present`) and removes what it extracted."""
        rows = await self._pool.fetch(
            "DELETE FROM graph_episodes WHERE tenant = $1 AND uuid = ANY($2::text[]) "
            "RETURNING uuid, sub_group, state",
            tenant,
            uuids,
        )
        return [(r["uuid"], Namespace(tenant, r["sub_group"]), r["state"]) for r in rows]

    async def has_document_episodes(self, tenant: str) -> bool:
        """Whether an episode of an ingested document of `tenant` is in the graph."""
        return bool(
            await self._pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM graph_episodes WHERE tenant = $1 "
                "AND state = 'done' AND arguments ? 'document_id')",
                tenant,
            )
        )

    async def episode_sources(self, tenant: str, uuids: list[str]) -> dict[str, EpisodeSource]:
        """The document and chunks each of these episodes of ingested documents was made
        from, and what extracting it cost (episodes of no document are left out)."""
        rows = await self._pool.fetch(
            "SELECT uuid, arguments->>'document_id' AS document_id, "
            "arguments->'chunk_ids' AS chunk_ids, llm_calls, prompt_tokens, completion_tokens, "
            "llm_seconds, seconds FROM graph_episodes "
            "WHERE tenant = $1 AND uuid = ANY($2::text[]) AND arguments ? 'document_id'",
            tenant,
            uuids,
        )
        return {
            r["uuid"]: EpisodeSource(
                document_id=r["document_id"],
                chunk_ids=[int(c) for c in orjson.loads(r["chunk_ids"])],
                cost=EpisodeCost(
                    r["llm_calls"], r["prompt_tokens"], r["completion_tokens"], r["llm_seconds"]
                ),
                seconds=r["seconds"],
            )
            for r in rows
        }

    async def release(self, worker: int) -> None:
        """Put this worker's unfinished episodes back in the queue (it is stopping); the
        interrupted attempt does not count."""
        await self._pool.execute(
            "UPDATE graph_episodes SET state = 'queued', worker = NULL, "
            "attempts = greatest(attempts - 1, 0) WHERE worker = $1 AND state = 'processing'",
            worker,
        )

    async def recover(self, lock_class: int, max_attempts: int, spared: Sequence[int] = ()) -> int:
        """Put back the episodes of workers that are gone (no advisory lock of theirs held,
        and not among those `spared`: `Cluster.spared`); fail those that were out of attempts.
        The number recovered."""
        rows = await self._pool.fetch(_RECOVER, lock_class, max_attempts, list(spared))
        return len(rows)

    async def counts(self, tenant: str) -> list[NamespaceCounts]:
        """Per namespace of `tenant`: episodes by state, their LLM cost, the last error."""
        rows = await self._pool.fetch(
            "SELECT sub_group, state, count(*) AS n, sum(llm_calls) AS calls, "
            "sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion, "
            "sum(llm_seconds) AS llm_seconds, "
            "(SELECT error FROM graph_episodes l WHERE l.tenant = $1 "
            " AND l.sub_group IS NOT DISTINCT FROM g.sub_group AND l.error IS NOT NULL "
            " ORDER BY l.seq DESC LIMIT 1) AS last_error "
            "FROM graph_episodes g WHERE tenant = $1 GROUP BY sub_group, state "
            "ORDER BY sub_group NULLS FIRST",
            tenant,
        )
        found: dict[str | None, NamespaceCounts] = {}
        for row in rows:
            sub = row["sub_group"]
            entry = found.get(sub)
            if entry is None:
                entry = found[sub] = NamespaceCounts(
                    Namespace(tenant, sub).name,
                    dict.fromkeys(STATES, 0),
                    EpisodeCost(),
                    row["last_error"],
                )
            entry.counts[row["state"]] = row["n"]
            entry.cost.add(
                EpisodeCost(
                    row["calls"], row["prompt"], row["completion"], float(row["llm_seconds"])
                )
            )
        return list(found.values())

    async def records(self, tenant: str, uuids: list[str]) -> dict[str, EpisodeRecord]:
        rows = await self._pool.fetch(
            f"SELECT {_RECORD} FROM graph_episodes WHERE tenant = $1 AND uuid = ANY($2::text[])",
            tenant,
            uuids,
        )
        return {row["uuid"]: _record(row) for row in rows}

    async def unfinished(
        self, tenant: str, namespaces: list[Namespace], limit: int
    ) -> list[EpisodeRecord]:
        """The newest episodes of `namespaces` not (yet) in the graph: queued, processing,
        or failed."""
        rows = await self._pool.fetch(
            f"SELECT {_RECORD} FROM graph_episodes WHERE tenant = $1 "
            "AND namespace = ANY($2::text[]) AND state <> 'done' ORDER BY seq DESC LIMIT $3",
            tenant,
            [ns.graph for ns in namespaces],
            limit,
        )
        return [_record(row) for row in rows]


_RECORD = (
    "tenant, uuid, sub_group, arguments->>'name' AS name, arguments->>'episode_body' AS content, "
    "arguments->>'source' AS source, arguments->>'source_description' AS source_description, "
    "state, attempts, error, llm_calls, prompt_tokens, completion_tokens, llm_seconds, seconds, "
    "created_at"
)


def _record(row: asyncpg.Record) -> EpisodeRecord:
    return EpisodeRecord(
        uuid=row["uuid"],
        group_id=Namespace(row["tenant"], row["sub_group"]).name,
        name=row["name"],
        content=row["content"],
        source=row["source"],
        source_description=row["source_description"],
        state=row["state"],
        attempts=row["attempts"],
        error=row["error"],
        cost=EpisodeCost(
            row["llm_calls"], row["prompt_tokens"], row["completion_tokens"], row["llm_seconds"]
        ),
        seconds=row["seconds"],
        created_at=row["created_at"],
    )


# The oldest queued episode due now with fewer than $2 unfinished episodes of its namespace
# ahead of it, claimed by worker $1. SKIP LOCKED: workers claiming at once take different ones;
# an episode being claimed still counts as unfinished for the ones behind it.
_CLAIM = """
UPDATE graph_episodes SET state = 'processing', worker = $1, attempts = attempts + 1
WHERE (tenant, uuid) = (
    SELECT e.tenant, e.uuid FROM graph_episodes AS e
    WHERE e.state = 'queued' AND e.not_before <= now()
      AND (SELECT count(*) FROM graph_episodes AS a
           WHERE a.namespace = e.namespace AND a.seq < e.seq
             AND a.state IN ('queued', 'processing')) < $2
    ORDER BY e.seq
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING tenant, uuid, sub_group, arguments, attempts, seq
"""

# The processing episodes of workers that hold no lock on this database: queued again, or
# failed if that attempt was their last.
_RECOVER = """
UPDATE graph_episodes SET worker = NULL,
    state = CASE WHEN attempts >= $2 THEN 'failed' ELSE 'queued' END,
    error = CASE WHEN attempts >= $2
        THEN 'its worker stopped while processing it, ' || attempts || ' times'
        ELSE error END,
    finished_at = CASE WHEN attempts >= $2 THEN now() END
WHERE state = 'processing'
  AND (worker IS NULL OR worker <> ALL($3::integer[]))
  AND NOT EXISTS (
    SELECT 1 FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 AND l.objsubid = 2
      AND l.objid = graph_episodes.worker::oid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
RETURNING uuid
"""

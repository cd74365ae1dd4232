"""EpisodeIngestion: this worker's share of the episode queue (queue.py).

It claims episodes while fewer than `graph_ingest_concurrency` are extracting here, extracts
each with the LLM into its namespace's graph (`GraphService.extract`), and records the outcome
and the cost (cost.py). It looks for work when an episode is queued in this process (`wake`),
when one of its extractions ends, and every `POLL_SECONDS` (episodes queued by other processes,
retries coming due, episodes of workers that died, which it puts back in the queue first).

Stopping cancels the extractions under way and puts their episodes back in the queue; the next
worker to start (or any other running) takes them, and Graphiti extracts them again from the
start (an episode's node is kept, so its uuid stays).

What extracts is an `Extractor` (GraphService is one); the ingestion knows nothing else of it.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from agentic_rag.config import Settings
from agentic_rag.graph.cost import episode_cost
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.queue import EpisodeQueue, QueuedEpisode
from agentic_rag.observability import metrics
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.storage.cluster import WORKER_LOCK_CLASS

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # how soon work queued by another process, or a retry due, is noticed

# The workers whose episodes a recovery must not take back now (None: no one's may be taken).
type Spared = Callable[[], Awaitable[Sequence[int] | None]]


async def _nobody() -> Sequence[int]:
    return ()


class Extractor(Protocol):
    """What the ingestion asks of the graph: extract a queued episode into its namespace's
    graph, and remove one that was deleted while it was extracted."""

    async def extract(self, ns: Namespace, uuid: str, arguments: dict[str, Any]) -> None: ...

    async def remove_episode(self, ns: Namespace, uuid: str) -> None: ...


class EpisodeIngestion:
    def __init__(
        self, settings: Settings, queue: EpisodeQueue, graph: Extractor, worker: int
    ) -> None:
        self._queue, self._graph, self._worker = queue, graph, worker
        self._concurrency = settings.graph_ingest_concurrency
        self._per_namespace = settings.graph_ingest_per_namespace
        self._max_attempts = settings.graph_ingest_max_attempts
        self._retry_seconds = settings.graph_ingest_retry_seconds
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None
        self._spared: Spared = _nobody

    def start(self, spared: Spared | None = None) -> None:
        """Work the queue; `spared` says whose episodes to leave alone though their lock is
        gone (`Cluster.spared`; None from it: recover no one's now)."""
        if spared is not None:
            self._spared = spared
        self._loop = asyncio.create_task(self._run(), name="graph-ingestion")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        tasks = [t for t in (self._loop, *self._running) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop = None
        await self._queue.release(self._worker)

    async def _run(self) -> None:
        outage = RepeatedFailure(log, "graph ingestion: looking for queued episodes")
        while True:
            self._wake.clear()
            try:
                await self._fill()
                outage.succeeded()
            except Exception:  # the database may be down for a while: try again next time
                outage.failed()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)

    async def _fill(self) -> None:
        spared = await self._spared()
        recovered = 0
        if spared is not None:
            recovered = await self._queue.recover(WORKER_LOCK_CLASS, self._max_attempts, spared)
        if recovered:
            log.warning("graph ingestion: %d episodes of stopped workers queued again", recovered)
        while len(self._running) < self._concurrency:
            episode = await self._queue.claim(self._worker, self._per_namespace)
            if episode is None:
                return
            task = asyncio.create_task(self._process(episode), name=f"episode {episode.uuid}")
            self._running.add(task)
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._wake.set()  # a place is free, and the namespace's next episode may go

    async def _process(self, episode: QueuedEpisode) -> None:
        started = time.perf_counter()
        failure: Exception | None = None
        with episode_cost() as cost:
            try:
                await self._graph.extract(episode.namespace, episode.uuid, episode.arguments)
            except Exception as exc:
                failure = exc
        seconds = time.perf_counter() - started
        if failure is None:
            metrics.record_graph_episode("done", seconds)
            recorded = await self._queue.done(self._worker, episode, cost, seconds)
        else:
            retry = episode.attempts < self._max_attempts
            error = f"attempt {episode.attempts}: {_reason(failure)}"
            log.warning("graph episode %s failed (%s)", episode.uuid, error)
            metrics.record_graph_episode("retry" if retry else "failed", seconds)
            recorded = await self._queue.failed(
                self._worker,
                episode,
                error,
                cost,
                seconds,
                retry_seconds=self._retry_seconds if retry else None,
            )
        if not recorded and not await self._queue.present(episode):
            # Deleted while it was extracted (delete_episode, or its document deleted): what
            # it wrote, now or in an earlier extraction of the same uuid, goes too.
            await self._graph.remove_episode(episode.namespace, episode.uuid)


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

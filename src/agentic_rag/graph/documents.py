"""DocumentGraph: the knowledge engine's documents in the tenant's graph (docs/graph.md).

- A stored document becomes episodes of the tenant's main graph, one per run of consecutive
  chunks of at most `EPISODE_CHARS` characters (small enough for a local model's context),
  queued like add_memory's (the ingestion job calls no LLM). Each episode's queue row keeps the
  document id and its chunk ids; its `source_description` names them too.
- A document deleted or replaced by a new version takes its episodes with it: queued ones
  leave the queue, extracted ones leave the graph (with what only they produced).
- Retrieval: Graphiti's edge search for the query, each fact standing for the chunks of the
  episodes it came from, so that the graph's hits are chunks with their provenance; each fact
  also says what extracting its episodes cost (explain_answer shows it).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.queue import EpisodeSource
from agentic_rag.graph.results import AddMemoryArguments
from agentic_rag.graph.service import GraphService
from agentic_rag.knowledge.store import StoredDocument

EPISODE_CHARS = 4000
"""Most characters of document text in one episode."""


@dataclass(frozen=True)
class EpisodeExtraction:
    """What extracting one episode cost (graph/cost.py), as get_episodes names it."""

    episode: str
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_seconds: float
    seconds: float  # its processing time, every attempt


@dataclass(frozen=True)
class GraphFact:
    """A fact the graph retriever found, the chunks it stands for, and what extracting the
    episodes behind it cost."""

    uuid: str
    fact: str
    rank: int
    score: float
    episodes: list[str]
    chunk_ids: list[int]
    extraction: list[EpisodeExtraction]


def chunk_groups(
    spans: Sequence[tuple[int, int, int]], limit: int = EPISODE_CHARS
) -> list[list[tuple[int, int, int]]]:
    """Consecutive chunks (id, start, end) in runs whose text spans at most `limit`
    characters (a longer chunk is a run of its own)."""
    groups: list[list[tuple[int, int, int]]] = []
    for span in spans:
        if groups and span[2] - groups[-1][0][1] <= limit:
            groups[-1].append(span)
        else:
            groups.append([span])
    return groups


class DocumentGraph:
    def __init__(self, graph: GraphService, *, ingest_documents: bool) -> None:
        self._graph, self._queue = graph, graph.queue
        self.ingest_documents = ingest_documents

    async def replace(
        self,
        tenant: str,
        document_id: str,
        title: str,
        text: str,
        spans: Sequence[tuple[int, int, int]],
    ) -> list[str]:
        """The document's episodes, after a new version was stored: the old ones forgotten,
        new ones queued when the setting says so. The uuids queued."""
        await self.forget(tenant, [document_id])
        if not self.ingest_documents:
            return []
        groups = chunk_groups(spans)
        queued = []
        for i, group in enumerate(groups, start=1):
            ids = [chunk_id for chunk_id, _, _ in group]
            part = f" (part {i} of {len(groups)})" if len(groups) > 1 else ""
            args = AddMemoryArguments(
                name=f"{title}{part}",
                episode_body=text[group[0][1] : group[-1][2]],
                source_description=f"document {document_id}, chunks {', '.join(map(str, ids))}",
            )
            provenance = {"document_id": document_id, "chunk_ids": ids}
            queued.append(await self._graph.queue_episode(Namespace(tenant), args, provenance))
        return queued

    async def lacks_episodes(self, tenant: str, document: StoredDocument | None) -> bool:
        """Whether an unchanged document should have episodes and has none: it was stored
        before the setting was on, or by a job that stopped before it queued them."""
        if not self.ingest_documents or document is None:
            return False
        return not await self._queue.document_episodes(tenant, [document.id])

    async def forget(self, tenant: str, document_ids: list[str]) -> None:
        """Delete the episodes of these documents: from the graph first (so that a failure
        leaves them listed, to be deleted again), then from the queue. An episode being
        extracted meanwhile is removed by its worker when it ends (ingestion.py)."""
        if not document_ids:
            return
        episodes = await self._queue.document_episodes(tenant, document_ids)
        removed = set()
        for uuid, ns, state in episodes:
            if state == "done":
                await self._graph.remove_episode(ns, uuid)
                removed.add(uuid)
        for uuid, ns, state in await self._queue.delete(tenant, [e[0] for e in episodes]):
            if state == "done" and uuid not in removed:  # extracted since it was listed
                await self._graph.remove_episode(ns, uuid)

    async def has_facts(self, tenant: str) -> bool:
        """Whether the tenant's graph holds an extracted document episode (one indexed query,
        no graph call): the graph retriever runs only then."""
        return await self._queue.has_document_episodes(tenant)

    async def retrieve(
        self, tenant: str, query: str, limit: int
    ) -> tuple[list[GraphFact], list[tuple[int, float]]]:
        """The retriever: the facts found (`search`), and the chunks they stand for, each
        scored by its best fact, best first."""
        facts = await self.search(tenant, query, limit)
        return facts, chunk_ranking(facts)

    async def search(self, tenant: str, query: str, limit: int) -> list[GraphFact]:
        """The facts for `query` in the tenant's main graph that came from documents, best
        first, each with the chunks of its episodes and what extracting them cost (one query
        for all the episodes)."""
        edges = await self._graph.search_edges(Namespace(tenant), query, limit)
        episodes = sorted({uuid for edge, _ in edges for uuid in edge.episodes})
        sources = await self._queue.episode_sources(tenant, episodes) if episodes else {}
        found: list[GraphFact] = []
        for edge, score in edges:
            behind = [(uuid, sources[uuid]) for uuid in edge.episodes if uuid in sources]
            ids = [c for _, source in behind for c in source.chunk_ids]
            if ids:
                extraction = [extraction_cost(uuid, source) for uuid, source in behind]
                found.append(
                    GraphFact(
                        edge.uuid, edge.fact, len(found) + 1, score, edge.episodes, ids, extraction
                    )
                )
        return found


def extraction_cost(uuid: str, source: EpisodeSource) -> EpisodeExtraction:
    cost = source.cost
    return EpisodeExtraction(
        episode=uuid,
        llm_calls=cost.calls,
        prompt_tokens=cost.prompt_tokens,
        completion_tokens=cost.completion_tokens,
        llm_seconds=round(cost.seconds, 3),
        seconds=round(source.seconds, 3),
    )


def chunk_ranking(facts: Sequence[GraphFact]) -> list[tuple[int, float]]:
    best: dict[int, float] = {}
    for fact in facts:
        for chunk_id in fact.chunk_ids:
            best[chunk_id] = max(best.get(chunk_id, fact.score), fact.score)
    return sorted(best.items(), key=lambda pair: (-pair[1], pair[0]))

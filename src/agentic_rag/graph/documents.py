"""DocumentGraph: the knowledge engine's documents in the tenant's graph (docs/graph.md).

- A stored document becomes episodes of the tenant's main graph, one per run of consecutive
  chunks of at most `EPISODE_CHARS` characters (small enough for a local model's context),
  queued like add_memory's (the ingestion job calls no LLM). Each episode's queue row keeps the
  document id and its chunk ids; its `source_description` names them too.
- A document deleted or replaced by a new version takes its episodes with it: queued ones
  leave the queue, extracted ones leave the graph (with what only they produced).
- An unchanged document that has no episodes while it should gets them (`lacks_episodes`):
  it was stored before the setting was on, or by a job that stopped before it queued them.
- Retrieval: one Graphiti search for the query, of facts and of entities; a fact stands for
  the chunks of the episodes it came from, an entity for those of the episodes that mention
  it, so that the graph's hits are chunks with their provenance. The two rankings are fused
  by reciprocal rank (`chunk_ranking`). Each fact also says what extracting its episodes
  cost (explain_answer shows it). A filtered search keeps the chunks that satisfy its
  filters (`GraphRetrieval.kept`): every fact and entity found stays listed, saying which of
  its chunks were kept.
"""

from collections.abc import Sequence

from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.queue import EpisodeSource
from agentic_rag.graph.results import AddMemoryArguments
from agentic_rag.graph.service import GraphService
from agentic_rag.knowledge.document_graph import (
    EpisodeExtraction,
    GraphEntity,
    GraphFact,
    GraphRetrieval,
)

EPISODE_CHARS = 4000
"""Most characters of document text in one episode."""

RRF_K = 60
"""k of the reciprocal rank fusion of the facts' and the entities' chunks: the usual constant
(not measured here, like the graph retriever's weight)."""


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
    """The knowledge engine's documents in the tenant's graph, over the graph service
    (agentic_rag.knowledge.document_graph.DocumentGraph, as the knowledge engine sees it)."""

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

    async def lacks_episodes(self, tenant: str, document_id: str) -> bool:
        """Whether an unchanged document should have episodes and has none (queued,
        extracted or failed): it was stored before the setting was on, or by a job that
        stopped before it queued them. One query, none with the setting off."""
        if not self.ingest_documents:
            return False
        return not await self._queue.document_episodes(tenant, [document_id])

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

    async def retrieve(self, tenant: str, query: str, limit: int) -> GraphRetrieval:
        """The retriever: at most `limit` facts and `limit` entities for `query` in the
        tenant's main graph, those that came from documents, each with the chunks it stands
        for; and those chunks, fused. One graph search, one graph query for the entities'
        episodes, one PostgreSQL query for all the episodes' chunks and costs."""
        matches = await self._graph.search_graph(Namespace(tenant), query, limit)
        episodes = {uuid for edge, _ in matches.facts for uuid in edge.episodes}
        episodes.update(uuid for _, _, mentioned in matches.entities for uuid in mentioned)
        sources = await self._queue.episode_sources(tenant, sorted(episodes)) if episodes else {}
        facts: list[GraphFact] = []
        for edge, score in matches.facts:
            behind = [(uuid, sources[uuid]) for uuid in edge.episodes if uuid in sources]
            ids = [c for _, source in behind for c in source.chunk_ids]
            if ids:
                extraction = [extraction_cost(uuid, source) for uuid, source in behind]
                facts.append(
                    GraphFact(
                        edge.uuid, edge.fact, len(facts) + 1, score, edge.episodes, ids, extraction
                    )
                )
        entities: list[GraphEntity] = []
        for node, score, mentioned in matches.entities:
            ids = [c for uuid in mentioned if uuid in sources for c in sources[uuid].chunk_ids]
            if ids:
                entities.append(
                    GraphEntity(node.uuid, node.name, len(entities) + 1, score, mentioned, ids)
                )
        return GraphRetrieval(facts, entities, chunk_ranking(facts, entities))


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


def chunk_ranking(
    facts: Sequence[GraphFact], entities: Sequence[GraphEntity]
) -> list[tuple[int, float]]:
    """The chunks the facts and the entities stand for, best first, by reciprocal rank
    fusion of the two rankings: a chunk scores 1 / (RRF_K + rank) of the best fact that
    stands for it, plus the same of the best entity. Ranks, not scores: the two come from
    separate searches whose scores are not comparable. A chunk that a fact and an entity
    both point to comes first; the chunks of one fact (or entity) tie, their order by id."""
    scores: dict[int, float] = {}
    for ranked in (facts, entities):
        best: dict[int, int] = {}
        for found in ranked:  # best first: the first rank seen is the chunk's best
            for chunk_id in found.chunk_ids:
                best.setdefault(chunk_id, found.rank)
        for chunk_id, rank in best.items():
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))

"""What the knowledge engine needs of a graph of its documents (`DocumentGraph`), and what the
graph's retriever gives back. The graph (agentic_rag.graph.documents) implements it; the
knowledge engine never imports the graph: the composition root attaches one when it runs."""

from collections.abc import Sequence, Set
from dataclasses import dataclass, replace
from typing import Protocol


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
    kept_chunk_ids: list[int] | None = None
    """With filters, those of `chunk_ids` that satisfy them; None without (all kept)."""


@dataclass(frozen=True)
class GraphEntity:
    """An entity the graph retriever found, and the chunks it stands for: those of the
    episodes that mention it."""

    uuid: str
    name: str
    rank: int
    score: float
    episodes: list[str]
    chunk_ids: list[int]
    kept_chunk_ids: list[int] | None = None
    """With filters, those of `chunk_ids` that satisfy them; None without (all kept)."""


@dataclass(frozen=True)
class GraphRetrieval:
    """What the graph retriever found for a query: facts and entities that stand for chunks
    of documents (best first), and those chunks, fused (`chunk_ranking`)."""

    facts: list[GraphFact]
    entities: list[GraphEntity]
    chunks: list[tuple[int, float]]

    def kept(self, chunk_ids: Set[int]) -> "GraphRetrieval":
        """What a filtered search keeps: only these chunks as hits, scored as before (a
        chunk's score depends on the best fact and entity that stand for it only); every
        fact and entity found, each saying which of its chunks were kept."""
        return GraphRetrieval(
            [
                replace(f, kept_chunk_ids=[c for c in f.chunk_ids if c in chunk_ids])
                for f in self.facts
            ],
            [
                replace(e, kept_chunk_ids=[c for c in e.chunk_ids if c in chunk_ids])
                for e in self.entities
            ],
            [(c, score) for c, score in self.chunks if c in chunk_ids],
        )


class DocumentGraph(Protocol):
    """The stored documents as episodes of the tenant's graph, and the graph's retriever."""

    @property
    def ingest_documents(self) -> bool:
        """Whether stored documents become episodes (the setting)."""
        ...

    async def replace(
        self,
        tenant: str,
        document_id: str,
        title: str,
        text: str,
        spans: Sequence[tuple[int, int, int]],
    ) -> list[str]:
        """The document's episodes after a new version was stored: the old ones forgotten,
        new ones queued from its chunks' spans (id, start, end). The uuids queued."""
        ...

    async def lacks_episodes(self, tenant: str, document_id: str) -> bool:
        """Whether an unchanged document should have episodes and has none."""
        ...

    async def forget(self, tenant: str, document_ids: list[str]) -> None:
        """Delete the episodes of these documents."""
        ...

    async def has_facts(self, tenant: str) -> bool:
        """Whether the tenant's graph holds an extracted document episode."""
        ...

    async def retrieve(self, tenant: str, query: str, limit: int) -> GraphRetrieval:
        """At most `limit` facts and `limit` entities for `query`, with the chunks each
        stands for, and those chunks fused."""
        ...

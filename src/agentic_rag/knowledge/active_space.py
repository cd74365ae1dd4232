"""ActiveSpace: what the knowledge engine learns when it starts, behind an object built before.

The store's active embedding space needs the database, and the chunker's limits the model's
tokenizer; both are known once `KnowledgeService.start` has loaded the model and opened the
space. Retrieval and ingestion are built with this handle and read it when they run.
"""

from agentic_rag.embedding.embedders import Embedder
from agentic_rag.knowledge.chunking import Chunker
from agentic_rag.knowledge.store.spaces import Space, Spaces


class KnowledgeNotStarted(RuntimeError):
    pass


class ActiveSpace:
    """The embedding space this process reads and writes, and the chunker of its model."""

    def __init__(self, spaces: Spaces, embedder: Embedder, overlap_tokens: int) -> None:
        self._spaces, self._embedder, self._overlap = spaces, embedder, overlap_tokens
        self._space: Space | None = None
        self._chunker: Chunker | None = None

    async def open(self) -> None:
        """The store's active space for the (started) embedder's model, created if the store
        has none; EmbeddingModelMismatch if its vectors come from another model or recipe."""
        embedder = self._embedder
        self._space = await self._spaces.open_space(embedder.name, embedder.dimension)
        self._chunker = Chunker(embedder.count_tokens, embedder.max_tokens, self._overlap)

    @property
    def space(self) -> Space:
        if self._space is None:
            raise KnowledgeNotStarted("the knowledge engine is not started (the engine starts it)")
        return self._space

    @property
    def chunker(self) -> Chunker:
        if self._chunker is None:
            raise KnowledgeNotStarted("the knowledge engine is not started (the engine starts it)")
        return self._chunker

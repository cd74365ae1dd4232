"""KnowledgeStore: all SQL of the knowledge base, one module per thing it stores.

Every method takes the tenant and every statement filters by it.
"""

from agentic_rag.knowledge.store.documents import Documents
from agentic_rag.knowledge.store.search import EXACT_SEARCH_MAX_CHUNKS, Search
from agentic_rag.knowledge.store.sources import Sources
from agentic_rag.knowledge.store.spaces import Spaces
from agentic_rag.storage.pool import Pool


class KnowledgeStore(Spaces, Sources, Documents, Search):
    """The one object the knowledge services share over one pool: embedding spaces (spaces.py),
    sources (sources.py), documents with their chunks and vectors (documents.py) and the two
    search legs (search.py); the lexicon (lexicon.py) changes inside the document writes."""

    def __init__(
        self, pool: Pool, *, exact_search_max_chunks: int = EXACT_SEARCH_MAX_CHUNKS
    ) -> None:
        self._pool = pool
        self._exact_max = exact_search_max_chunks

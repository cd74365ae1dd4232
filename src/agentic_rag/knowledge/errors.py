"""The knowledge engine's refusals, kept apart from the modules that raise them: the skills
layer maps `KnowledgeError` to the task's failure (knowledge/skills.py), and the CLI catches
`EmbeddingModelMismatch` without importing the models' libraries."""


class EmbeddingModelMismatch(RuntimeError):
    """The store's vectors were made by another model than the one configured."""


class KnowledgeError(Exception):
    """Work the knowledge engine refuses or cannot do; the message is the caller's to read."""


class InvalidRequest(KnowledgeError):
    """Arguments the engine cannot serve as given: empty, too large, of an unsafe or unknown
    kind, or naming what this deployment does not offer."""


class NotFound(KnowledgeError):
    """No such document, retrieval or file for this caller."""


class Unreadable(KnowledgeError):
    """A source that could not be read: not fetched, not a readable PDF, no transcript."""


class NoTextToIndex(KnowledgeError):
    """A document with no text to chunk: a crawl skips such a page and goes on."""


class NothingIngested(KnowledgeError):
    """The job found nothing to store: the message says what happened to each input."""


class IngestionJobFailed(KnowledgeError):
    """The ingestion job this call follows or finds ended without completing."""

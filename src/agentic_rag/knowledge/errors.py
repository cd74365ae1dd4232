"""The knowledge engine's refusals that reach the command line: kept apart from the modules
that raise them, so the CLI can catch them without importing the models' libraries."""


class EmbeddingModelMismatch(RuntimeError):
    """The store's vectors were made by another model than the one configured."""

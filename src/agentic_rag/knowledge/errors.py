"""The knowledge engine's refusals that reach the command line: kept apart from the modules
that raise them, so the CLI can catch them without importing the models' libraries."""


class EmbeddingError(Exception):
    """The embedder cannot produce vectors: a model file that fails its hash, an endpoint
    that refuses the key, does not know the model, answers with the wrong dimension or
    cannot be reached."""


class EmbeddingModelMismatch(RuntimeError):
    """The store's vectors were made by another model than the one configured."""

"""The embedder's refusal, kept apart from the embedders so the command line can catch it
without importing the models' libraries."""


class EmbeddingError(Exception):
    """The embedder cannot produce vectors: a model file that fails its hash, an endpoint
    that refuses the key, does not know the model, answers with the wrong dimension or
    cannot be reached."""

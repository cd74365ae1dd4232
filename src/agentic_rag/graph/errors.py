"""The graph's refusals, kept apart from the modules that raise them: the skills layer maps
`GraphError` to the task's failure (graph/skills.py), word for word."""


class GraphError(Exception):
    """Work the graph refuses or cannot do; the message is the caller's to read."""


class InvalidRequest(GraphError):
    """Arguments the graph cannot serve as given: a bad time or source kind, an episode uuid
    queued already."""


class NotFound(GraphError):
    """No such fact, episode or saga in the caller's graph."""


class Unavailable(GraphError):
    """What the operation needs is not configured here (an LLM)."""

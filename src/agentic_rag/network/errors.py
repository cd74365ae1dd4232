"""The agent network's refusals, kept apart from the modules that raise them: the REST routes
answer `DelegationRefused` with a problem (rest.py), and the delegation skills map every
`NetworkError` to the task's failure (delegation_skills.py), word for word."""


class NetworkError(Exception):
    """Work the network refuses or cannot do; the message is the caller's to read."""


class DelegationRefused(NetworkError, ValueError):
    """A delegation that cannot start: its target peer is unknown, or no peer offers it."""


class DelegationFailed(NetworkError):
    """A delegation that ended without a result: no peer took it, the peer's task did not
    complete, the peer went away, or a callback could not be set."""


class PlanRefused(NetworkError):
    """A plan that cannot run: a step names no skill of this agent, or one outside the caller's
    groups of tools, or there is no plan and no usable one from the LLM."""


class PlanFailed(NetworkError):
    """A plan whose required steps failed: the message gives each step's reason."""

"""What the task engine refuses, in its own words; each protocol adapter answers with its own
codes for them (the A2A adapter: `agentic_rag.a2a.errors.from_task_error`)."""

from typing import Any


class TaskError(Exception):
    """A request about a task that the engine refuses; `data` details it for the caller."""

    def __init__(self, message: str, data: Any = None) -> None:
        self.message = message
        self.data = data
        super().__init__(message)


class TaskNotFoundError(TaskError):
    """No task of this tenant has the id."""


class TaskEndedError(TaskError):
    """A message names a task in a final state, to a caller that starts no follow-up task
    (A2A 1.0: such a task takes no more messages)."""


class TaskNotCancelableError(TaskError):
    """The task is final already, or became final before it could be canceled."""


class TaskRequestError(TaskError):
    """The request is invalid: wrong arguments, an unknown skill, a message that does not fit
    the task, a refused push-notification config."""


class SkillForbiddenError(TaskError):
    """The caller's credential does not select the group of tools of the skill the request
    would run (skills/groups.py), whichever door the request came in by."""


class OutputNotAcceptedError(TaskError):
    """The caller accepts none of the media types a skill's result comes in."""


class TaskUnavailableError(TaskError):
    """The worker running the task did not take the request in time; the caller may retry."""

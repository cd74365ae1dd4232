"""SkillCall: one call of a skill, timed and counted by how it ended (observability/metrics.py).

The outcome is read from the exception leaving the block: none or `AnswerOnly` is `ok`,
`InputRequired` is `input_required`, `SkillError` is `error`, cancellation is `canceled`,
anything else `exception`. Exceptions are never swallowed. The outcome is named here, where
these exceptions are defined; the metrics count names.
"""

import asyncio
import time
from types import TracebackType

from agentic_rag.observability import metrics as observed
from agentic_rag.skills.registry import AnswerOnly, InputRequired, SkillError


class SkillCall:
    """`with SkillCall("search", "mcp"): ...` times the block as one call of the skill; a
    context manager (sync, usable in async code)."""

    def __init__(self, skill: str, protocol: str) -> None:
        self._skill, self._protocol = skill, protocol
        self._started = 0.0

    def __enter__(self) -> "SkillCall":
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        elapsed = time.perf_counter() - self._started
        observed.record_skill_call(self._skill, self._protocol, skill_outcome(exc), elapsed)


def skill_outcome(exc: BaseException | None) -> str:
    if exc is None or isinstance(exc, AnswerOnly):
        return "ok"
    if isinstance(exc, InputRequired):
        return "input_required"
    if isinstance(exc, SkillError):
        return "error"
    if isinstance(exc, asyncio.CancelledError):
        return "canceled"
    return "exception"

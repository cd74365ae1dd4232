"""A service's own refusals as the skills layer's `SkillError`: services raise errors of their
own domain (graph/errors.py, network/errors.py), and chat models theirs (`ChatError`); the skills
that call them end failed with the error's message, word for word, as a skill's `SkillError`
does."""

import functools
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from agentic_rag.skills.chat import ChatError
from agentic_rag.skills.registry import Handler, SkillContext, SkillError, SkillRegistry


def refusing_skill(
    registry: SkillRegistry, refusal: type[Exception], **options: Any
) -> Callable[[Handler], Handler]:
    """`registry.skill(**options)` for a handler whose `refusal` (an exception class), or a
    chat model's `ChatError`, ends the task failed with the error's message."""
    register = registry.skill(**options)

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def refusing(ctx: SkillContext, args: Any) -> BaseModel:
            try:
                return await handler(ctx, args)
            except (refusal, ChatError) as refused:
                raise SkillError(str(refused)) from refused

        register(refusing)
        return handler

    return decorate

"""`Skill.run`: a skill that asks several things at once, in a task group, asks as any skill
does (the group's question comes out as itself: tasks pause input-required, MCP asks it); a
service's refusal and a chat model's `ChatError` come out as `SkillError` with their message
(skills/refusals.py), a bug as itself."""

import functools
from typing import Any, cast

import anyio
import pytest
from pydantic import BaseModel

from agentic_rag.llm.chat import LLMError
from agentic_rag.skills import InputRequired, SkillContext, SkillError, SkillRegistry
from agentic_rag.skills.refusals import refusing_skill


class Nothing(BaseModel):
    pass


class Done(BaseModel):
    text: str


class Asking:
    """The part of a skill context these skills use: `ask`."""

    def ask(self, question: str, missing: Any = (), *, name: str | None = None) -> None:
        raise InputRequired(question, missing, name)


def registry() -> SkillRegistry:
    skills = SkillRegistry()

    @skills.skill(description="Asks a name while waiting for something else.")
    async def asks_at_once(ctx: SkillContext, args: Nothing) -> Done:
        async def wait() -> None:
            await anyio.sleep(10)

        async def name() -> None:
            ctx.ask("What is your name?", ["name"], name="user_name")

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            group.start_soon(name)
        return Done(text="never")

    @skills.skill(description="Fails in a task group.")
    async def fails_at_once(ctx: SkillContext, args: Nothing) -> Done:
        async def fail() -> None:
            raise SkillError("the step failed")

        async with anyio.create_task_group() as group:
            group.start_soon(fail)
        return Done(text="never")

    return skills


async def test_a_question_asked_in_a_task_group_comes_out_as_itself() -> None:
    skill = registry().get("asks_at_once")
    assert skill is not None
    with pytest.raises(InputRequired) as asked:
        await skill.run(cast(SkillContext, Asking()), Nothing())
    assert (asked.value.question, asked.value.missing) == ("What is your name?", ("name",))
    assert asked.value.name == "user_name"


async def test_other_failures_in_a_task_group_stay_a_group() -> None:
    skill = registry().get("fails_at_once")
    assert skill is not None
    with pytest.raises(ExceptionGroup) as failed:
        await skill.run(cast(SkillContext, Asking()), Nothing())
    assert failed.group_contains(SkillError)


class Refused(Exception):
    """A service's own refusal, as knowledge/errors.py and graph/errors.py define theirs."""


def refusing_registry() -> SkillRegistry:
    skills = SkillRegistry()
    skill = functools.partial(refusing_skill, skills, Refused)

    @skill(description="Refused by its service.")
    async def refused(ctx: SkillContext, args: Nothing) -> Done:
        raise Refused("no such shelf")

    @skill(description="Its chat model cannot answer.")
    async def unanswered(ctx: SkillContext, args: Nothing) -> Done:
        raise LLMError("the LLM endpoint cannot be reached: connection refused")

    @skill(description="Fails on a bug.")
    async def broken(ctx: SkillContext, args: Nothing) -> Done:
        raise KeyError("shelf")

    return skills


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("refused", "no such shelf"),
        ("unanswered", "the LLM endpoint cannot be reached: connection refused"),
    ],
)
async def test_a_services_and_a_models_errors_are_the_skills_refusals(
    name: str, message: str
) -> None:
    skill = refusing_registry().get(name)
    assert skill is not None
    with pytest.raises(SkillError) as refused:
        await skill.run(cast(SkillContext, Asking()), Nothing())
    assert str(refused.value) == message
    assert not isinstance(refused.value.__cause__, SkillError)  # raised in its own terms


async def test_a_bug_is_no_refusal() -> None:
    skill = refusing_registry().get("broken")
    assert skill is not None
    with pytest.raises(KeyError):
        await skill.run(cast(SkillContext, Asking()), Nothing())

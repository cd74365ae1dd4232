"""The skills registry derives every schema from the handler's type hints."""

import pytest
from pydantic import BaseModel

from agentic_rag.skills import SkillContext, SkillRegistry
from agentic_rag.skills.help import default_registry


class In(BaseModel):
    name: str


class Out(BaseModel):
    greeting: str


def test_models_come_from_type_hints() -> None:
    registry = SkillRegistry()

    @registry.skill(description="Greets.", tags=["demo"], text_argument="name", default=True)
    async def hello(ctx: SkillContext, args: In) -> Out:
        return Out(greeting=f"hello {args.name}")

    skill = registry.get("hello")
    assert skill is not None
    assert (skill.input_model, skill.output_model) == (In, Out)
    assert registry.default_skill == "hello"
    assert skill.readable(Out(greeting="hi")) == '{\n  "greeting": "hi"\n}'


def test_a_handler_without_models_is_refused() -> None:
    registry = SkillRegistry()
    with pytest.raises(TypeError, match="pydantic model"):

        @registry.skill(description="Bad.")
        async def bad(ctx: SkillContext, args: dict) -> Out:  # type: ignore[type-arg]
            return Out(greeting="")


def test_text_argument_must_be_a_field() -> None:
    registry = SkillRegistry()
    with pytest.raises(ValueError, match="no field 'text'"):

        @registry.skill(description="Bad.", text_argument="text")
        async def bad(ctx: SkillContext, args: In) -> Out:
            return Out(greeting="")


def test_names_are_unique() -> None:
    registry = default_registry()
    with pytest.raises(ValueError, match="already registered"):

        @registry.skill(description="Again.")
        async def help(ctx: SkillContext, args: In) -> Out:
            return Out(greeting="")


def test_the_product_ships_help_as_the_default_skill() -> None:
    registry = default_registry()
    assert registry.default_skill == "help"
    assert [s.name for s in registry] == ["help"]

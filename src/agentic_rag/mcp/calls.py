"""What every tool call shares: finding its skill, checking its arguments, and its result."""

from collections.abc import Sequence
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from agentic_rag.mcp.content import attached_block, content_of
from agentic_rag.skills import InputRequired, ResultPart, Skill, SkillRegistry


def find_skill(registry: SkillRegistry, name: str) -> Skill:
    skill = registry.get(name)
    if skill is None:
        known = ", ".join(s.name for s in registry)
        raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}; this server has: {known}")
    return skill


class ArgumentsError(Exception):
    """The arguments are present but wrong: the call ends `isError` with this message."""


def validate_arguments(skill: Skill, arguments: dict[str, Any]) -> BaseModel:
    """The skill's input, or `InputRequired` naming what is missing (asked for like `ctx.ask`)."""
    try:
        return skill.input_model.model_validate(arguments)
    except ValidationError as exc:
        errors = exc.errors()
        missing = [_field(e["loc"]) for e in errors if e["type"] == "missing"]
        if len(missing) == len(errors):
            raise InputRequired(
                f"Which {', '.join(missing)} should tool {skill.name!r} use?", missing
            ) from None
        problems = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in errors)
        raise ArgumentsError(f"invalid arguments for tool {skill.name!r}: {problems}") from None


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "arguments"


def tool_result(
    skill: Skill, output: BaseModel, attached: Sequence[ResultPart] = ()
) -> types.CallToolResult:
    """The output's text, its content blocks, then what the skill attached (`ctx.attach`)."""
    text = types.TextContent(type="text", text=skill.readable(output))
    return types.CallToolResult(
        content=[text, *content_of(output), *(attached_block(part) for part in attached)],
        # by_alias: the output schema names fields by alias, as pydantic's schemas do.
        structured_content=output.model_dump(mode="json", by_alias=True),
    )


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

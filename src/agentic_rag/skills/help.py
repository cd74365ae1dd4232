"""The `help` skill: what this agent can do, and how to call each skill."""

import json
import re

from pydantic import BaseModel, Field

from agentic_rag.skills.registry import SkillContext, SkillRegistry

HOW_TO_CALL = (
    'Send a message with a DataPart {"skill": "<name>", "arguments": {...}} whose arguments '
    "match the skill's input schema. Plain text goes to the default skill."
)


class HelpInput(BaseModel):
    topic: str | None = Field(
        None, description="A skill or group name, or a question; empty for all skills."
    )


class SkillHelp(BaseModel):
    name: str
    description: str = Field(description="In full: MCP's tools/list shows a summary")
    group: str | None = Field(description="Its group of tools (docs/skills.md); none: always")
    tags: list[str]
    examples: list[str]
    input_schema: dict[str, object]
    output_schema: dict[str, object]


class HelpOutput(BaseModel):
    how_to_call: str
    default_skill: str | None
    skills: list[SkillHelp]


def _render(output: HelpOutput) -> str:
    """Each skill with its arguments; one skill (a topic that names it) with its whole input
    schema too."""
    lines = [output.how_to_call, ""]
    for skill in output.skills:
        lines.append(f"- {skill.name}: {skill.description}")
        required = skill.input_schema.get("required") or []
        properties = skill.input_schema.get("properties") or {}
        if isinstance(properties, dict) and properties:
            args = ", ".join(f"{n}{'' if n in required else '?'}" for n in properties)  # type: ignore[operator]
            lines.append(f"  arguments: {args}")
        lines.extend(f"  example: {e}" for e in skill.examples)
        if len(output.skills) == 1:
            schema = json.dumps(skill.input_schema, indent=2, ensure_ascii=False)
            lines += ["  input schema:", *(f"    {line}" for line in schema.splitlines())]
    return "\n".join(lines)


def add_help(registry: SkillRegistry, *, default: bool = True) -> None:
    @registry.skill(
        description="Lists what this agent can do: every skill the caller is offered, its "
        "description in full, its input and output schemas and examples; a topic naming a "
        "skill or a group of tools narrows it.",
        summary="What this agent can do: each skill in full; topic: a skill or group name.",
        tags=["help", "discovery"],
        examples=["What can you do?", '{"skill": "help", "arguments": {"topic": "help"}}'],
        text_argument="topic",
        render=_render,
        default=default,
    )
    async def help(ctx: SkillContext, args: HelpInput) -> HelpOutput:
        skills = [skill for skill in registry if ctx.offers(skill)]
        if args.topic:
            words = set(re.findall(r"[\w-]+", args.topic.lower()))
            named = [s for s in skills if s.name.lower() in words or s.group in words]
            skills = named or skills
        return HelpOutput(
            how_to_call=HOW_TO_CALL,
            default_skill=registry.default_skill,
            skills=[
                SkillHelp(
                    name=s.name,
                    description=s.description,
                    group=s.group,
                    tags=list(s.tags),
                    examples=list(s.examples),
                    input_schema=s.input_model.model_json_schema(),
                    output_schema=s.output_model.model_json_schema(),
                )
                for s in skills
            ],
        )


def default_registry() -> SkillRegistry:
    """A registry with `help` alone, answering plain text: the base every server has. The
    product's skills join it in the composition root (engine.py)."""
    registry = SkillRegistry()
    add_help(registry)
    return registry

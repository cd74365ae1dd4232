"""The tools of `tools/list`: one per skill the caller may see, with compact schemas.

What a caller sees and may call is the registry's skills that the deployment's groups and the
caller's credential allow (skills/groups.py): `ToolSurface` lists them and refuses a
`tools/call` (plain or task-augmented) of any other before a handler runs.

Every MCP client pays for the list in its context before its first question, so the schemas
are the skills' pydantic schemas made compact by fixed rules, never restated by hand:

- input: what says nothing a model needs is dropped: `title` (pydantic derives it from the
  field's name), the model's own description (the tool's says it), a default of null (an
  optional field left out is null) and `additionalProperties: true` (JSON Schema's default);
  `anyOf: [{type: X, ...}, {type: null}]` is written `type: [X, null], ...` (when its other
  keywords check only values of type X); the fields' descriptions,
  defaults and constraints stay, as a model needs them to call the tool;
- output: titles, descriptions and defaults dropped too; a schema still longer than
  `OUTPUT_BUDGET` characters is inlined only as deep as fits, deeper objects written
  `{"type": "object"}`, so it still validates every result the tool gives.

The full schemas, with every description, are the `help` skill's (`help` with the tool's name
as topic) and docs/skills.md's.
"""

import json
from collections.abc import Mapping
from typing import Any

import mcp.types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from agentic_rag.mcp.access import Context, PrincipalFor, require
from agentic_rag.mcp.tasks import EXECUTION
from agentic_rag.security.auth import FORBIDDEN
from agentic_rag.security.principal import Principal
from agentic_rag.skills import Skill, SkillRegistry
from agentic_rag.skills.groups import ToolGroups

# Characters an output schema may take in the list before its deeper levels are cut.
OUTPUT_BUDGET = 250
# Levels inlined at most (a model that refers to itself would never end).
MAX_DEPTH = 8

# Keywords that annotate rather than constrain (dropped from every schema, and from outputs).
INPUT_ANNOTATIONS = frozenset({"title"})
OUTPUT_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
# Keywords whose value maps names to schemas (a property may be named "title").
NAMED_SCHEMAS = frozenset({"properties", "$defs", "patternProperties"})
NULL = {"type": "null"}
# Keywords that check a value of any type: a nullable schema with one of them stays an anyOf.
ANY_TYPE_KEYWORDS = frozenset(
    {"enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not", "if", "then", "else"}
)
# What JSON Schema and an optional field imply when left out.
IMPLIED = (("default", None), ("additionalProperties", True))


def compact(schema: Any, drop: frozenset[str]) -> Any:
    """`schema` without the keywords `drop` and the defaults said twice, nullable simple types
    as a list of types."""
    if isinstance(schema, list):
        return [compact(item, drop) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in drop or (key, value) in IMPLIED:
            continue
        if key in NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: compact(sub, drop) for name, sub in value.items()}
        else:
            out[key] = compact(value, drop)
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and NULL in options:
        (other,) = [option for option in options if option != NULL]
        # Keywords of one type (format, items, minimum...) let a null through unchecked.
        if isinstance(other.get("type"), str) and not set(other) & ANY_TYPE_KEYWORDS:
            del out["anyOf"]
            out.update(other)
            out["type"] = [other["type"], "null"]
    return out


def limited(schema: Any, defs: dict[str, Any], depth: int) -> Any:
    """`schema` with its references inlined `depth` levels of properties deep; below that an
    object is `{"type": "object"}`, with no properties to check."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$defs":
            continue
        if key in ("properties", "required") and depth <= 0:
            out["type"] = "object"
        elif key == "properties":
            out[key] = {name: limited(sub, defs, depth - 1) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = limited(value, defs, depth)
        elif key in ("anyOf", "oneOf", "allOf"):
            out[key] = [limited(option, defs, depth) for option in value]
        else:
            out[key] = value
    return out


def _length(schema: Any) -> int:
    return len(json.dumps(schema, separators=(",", ":")))


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    return compact_input(model.model_json_schema())


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    # Serialization mode: the structured content is the output dumped, so it must validate.
    return compact_output(model.model_json_schema(mode="serialization"))


def compact_input(full: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as listed, from the model's full one."""
    schema: dict[str, Any] = compact(full, INPUT_ANNOTATIONS)
    schema.pop("description", None)
    return schema


def compact_output(full: dict[str, Any]) -> dict[str, Any]:
    """A tool's output schema as listed, from the model's full one."""
    schema: dict[str, Any] = compact(full, OUTPUT_ANNOTATIONS)
    schema.pop("description", None)
    if _length(schema) <= OUTPUT_BUDGET:
        return schema
    defs = schema.get("$defs", {})
    depth = 1  # the top level's fields are always listed
    while depth < MAX_DEPTH and _length(limited(schema, defs, depth + 1)) <= OUTPUT_BUDGET:
        depth += 1
    # Compacted again: a reference cut to an object may now be a nullable simple type.
    result: dict[str, Any] = compact(limited(schema, defs, depth), frozenset())
    return result


def tool_for(skill: Skill) -> types.Tool:
    return types.Tool(
        name=skill.name,
        description=skill.summary or skill.description,
        input_schema=input_schema(skill.input_model),
        output_schema=output_schema(skill.output_model),
        # A resumable skill runs as a task (durable.py), which 2025-11-25 clients may poll.
        execution=EXECUTION if skill.resumable else None,
    )


class ToolSurface:
    """`tools/list` and the gate of `tools/call`: the tools `groups` offer, narrowed by the
    caller's credential."""

    def __init__(
        self, registry: SkillRegistry, groups: ToolGroups, principal_for: PrincipalFor
    ) -> None:
        self._registry, self._groups, self._principal_for = registry, groups, principal_for
        self._tools: dict[str, tuple[Skill, types.Tool]] = {}

    def visible(self, principal: Principal) -> list[Skill]:
        return [s for s in self._registry if self.allows(principal, s)]

    def _tool(self, skill: Skill) -> types.Tool:
        # Made once per skill (pydantic's schemas take milliseconds); a skill registered
        # again under its name (an upstream's tools, refreshed) is made again.
        known = self._tools.get(skill.name)
        if known is None or known[0] is not skill:
            known = self._tools[skill.name] = (skill, tool_for(skill))
        return known[1]

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal = require(self._principal_for(ctx), "read", "tools/list")
        return types.ListToolsResult(tools=[self._tool(s) for s in self.visible(principal)])

    async def guard(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """Middleware: a `tools/call` of a tool the caller may not call ends here, with a
        protocol error saying why; everything else passes on."""
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            name = params.get("name")
            skill = self._registry.get(name) if isinstance(name, str) else None
            principal = self._principal_for(ctx)
            if skill is not None:
                self.check(principal, skill)
            elif isinstance(name, str):
                # Named from the caller's own list: the other tools are not theirs to know of.
                known = ", ".join(s.name for s in self.visible(principal))
                raise MCPError(
                    types.INVALID_PARAMS, f"unknown tool {name!r}; this server has: {known}"
                )
        return await call_next(ctx)

    def allows(self, principal: Principal, skill: Skill) -> bool:
        return self._groups.allows(skill, principal.groups)

    def check(self, principal: Principal, skill: Skill) -> None:
        """Nothing, if `principal` may call `skill`; else the MCP error that says why: a tool
        the server does not offer is an unknown one (invalid params), a tool outside the
        credential's groups a refusal (the code of a missing scope)."""
        if self.allows(principal, skill):
            return
        selected = principal.groups
        reason = self._groups.refusal(skill, selected)
        if selected is not None and skill.group not in selected:
            raise MCPError(
                FORBIDDEN,
                reason,
                data={"tool_group": skill.group, "granted_groups": sorted(selected)},
            )
        raise MCPError(types.INVALID_PARAMS, reason)

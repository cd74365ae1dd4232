"""Asking the caller for what a skill needs, with MCP elicitation forms.

A skill that needs input raises `InputRequired` (through `ctx.ask`, or because required
arguments are missing). The form asks for:

- the missing arguments, when the skill names them: the answers are merged into the arguments;
- otherwise one free-text `answer`, which becomes the next of `ctx.texts` (what a reply on an
  A2A task would be).

Then the skill runs again from the start with what was gathered.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from agentic_rag.skills import InputRequired, Skill

ANSWER = "answer"

# What the spec's PrimitiveSchemaDefinition allows in a form field; the rest of a model's field
# schema (examples, patterns, ...) would make a client reject the whole form.
_PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean"})
_FORM_KEYWORDS = frozenset(
    {
        "type",
        "title",
        "description",
        "default",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
    }
)
_STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_ARRAY_KEYWORDS = frozenset({"type", "title", "description", "default", "minItems", "maxItems"})


class Declined(Exception):
    """The user did not answer: the call ends with this message as its error."""


@dataclass
class Gathered:
    """What a call has so far: its arguments, and the texts the skill sees in `ctx.texts`."""

    arguments: dict[str, Any]
    texts: list[str] = field(default_factory=list)

    @classmethod
    def first(cls, skill: Skill, arguments: dict[str, Any]) -> "Gathered":
        # The text argument plays the first message's part, so `ctx.texts` reads as over A2A.
        value = arguments.get(skill.text_argument) if skill.text_argument else None
        return cls(dict(arguments), [value] if isinstance(value, str) and value else [])


@dataclass(frozen=True)
class Question:
    message: str
    fields: tuple[str, ...]
    """The arguments the answers fill; empty for one free-text `answer`."""
    schema: dict[str, Any]
    """The form's `requestedSchema`."""
    name: str | None = None
    """What the skill calls the answer (`InputRequired.name`): the input request's key."""


def question_for(skill: Skill, needed: InputRequired) -> Question | None:
    """The form that asks for what `needed` says, or None when a form cannot hold it."""
    if not needed.missing:
        answer = {"type": "string", "title": "Answer", "description": needed.question}
        schema = {"type": "object", "properties": {ANSWER: answer}, "required": [ANSWER]}
        return Question(needed.question, (), schema, needed.name)
    model_schema = skill.input_model.model_json_schema()
    known, defs = model_schema.get("properties", {}), model_schema.get("$defs", {})
    properties: dict[str, Any] = {}
    for name in needed.missing:
        prop = _form_field(known.get(name), defs)
        if prop is None:
            return None
        properties[name] = prop
    schema = {"type": "object", "properties": properties, "required": list(needed.missing)}
    return Question(needed.question, tuple(needed.missing), schema, needed.name)


def _form_field(prop: Any, defs: dict[str, Any]) -> dict[str, Any] | None:
    """The form field of a model's field schema, or None when no form field can hold it.

    The spec's fields: a string, number, integer or boolean (with its default), a choice of
    values (`enum`, with the legacy `enumNames` if given, or `oneOf` of titled `const`s) and
    a list of choices (an array of such items, a multi-select). An Enum's `$ref` and an
    optional field's `anyOf` with null, as pydantic writes them, are resolved first; nested
    objects and other unions are not fields.
    """
    prop = _resolved(prop, defs)
    if prop is None:
        return None
    if prop.get("type") == "array":
        items = _resolved(prop.get("items"), defs)
        choices = _choices(items) if items is not None else None
        if choices is None:
            return None
        kept = {k: v for k, v in prop.items() if k in _ARRAY_KEYWORDS}
        return {**kept, "items": choices}
    if prop.get("type") not in _PRIMITIVE_TYPES:
        return None
    kept = {k: v for k, v in prop.items() if k in _FORM_KEYWORDS}
    if prop.get("format") in _STRING_FORMATS:
        kept["format"] = prop["format"]
    titled = prop.get("oneOf")
    if isinstance(titled, list) and all(_is_titled_const(o) for o in titled):
        kept["oneOf"] = titled
    names, values = prop.get("enumNames"), prop.get("enum")
    if _are_names_of(names, values):
        kept["enumNames"] = names  # 2025-11-25's legacy titled enum: a title per value
    return kept


def _are_names_of(names: Any, values: Any) -> bool:
    return (
        isinstance(names, list)
        and isinstance(values, list)
        and len(names) == len(values)
        and all(isinstance(n, str) for n in names)
    )


def _resolved(prop: Any, defs: dict[str, Any]) -> dict[str, Any] | None:
    """`prop` with a `$ref` into `$defs` and an `anyOf` with null taken out; the field's own
    title, description and default win over the referenced schema's."""
    if not isinstance(prop, dict):
        return None
    schema: dict[str, Any] = prop
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if not ref.startswith("#/$defs/") or not isinstance(target, dict):
            return None
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    options = schema.get("anyOf")
    # Titled `const`s are a multi-select's choices, not a union.
    if isinstance(options, list) and not all(_is_titled_const(o) for o in options):
        values = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(values) != 1:
            return None  # a real union: no one field can hold it
        inner = _resolved(values[0], defs)
        if inner is None:
            return None
        outer = {k: v for k, v in schema.items() if k != "anyOf"}
        if outer.get("default", 0) is None:
            del outer["default"]  # "not given" is no value a form can show
        schema = {**inner, **outer}
    return schema


def _choices(items: dict[str, Any]) -> dict[str, Any] | None:
    """The `items` of a multi-select: string values, or titled `const`s."""
    values = items.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return {"type": "string", "enum": values}
    titled = items.get("anyOf", items.get("oneOf"))
    if isinstance(titled, list) and titled and all(_is_titled_const(o) for o in titled):
        return {"anyOf": titled}
    return None


def _is_titled_const(option: Any) -> bool:
    return isinstance(option, dict) and isinstance(option.get("const"), str) and "title" in option


def merge(gathered: Gathered, fields: Sequence[str], message: str, answer: Any) -> Gathered:
    """`gathered` with the user's answer to the question `message` that asked for `fields`."""
    if not isinstance(answer, types.ElicitResult):
        raise Declined(f"the client answered the question with no elicitation result: {message}")
    if answer.action != "accept":
        verb = "declined" if answer.action == "decline" else "cancelled"
        raise Declined(f"the user {verb} the question, so the tool cannot go on: {message}")
    content = answer.content or {}
    if not fields:
        text = content.get(ANSWER)
        if not isinstance(text, str) or not text:
            raise Declined(f"the user accepted the question without an answer: {message}")
        return Gathered(dict(gathered.arguments), [*gathered.texts, text])
    arguments = dict(gathered.arguments)
    arguments.update({name: content[name] for name in fields if content.get(name) is not None})
    return Gathered(arguments, list(gathered.texts))


def cannot_ask(tool: str, message: str, fields: Sequence[str], reason: str) -> str:
    """The error a call ends with when its question cannot be asked: says what is missing."""
    if fields:
        return (
            f"tool {tool!r} needs input: {message} Missing arguments: {', '.join(fields)}. "
            f"It cannot ask for them because {reason}; call it again with them."
        )
    return f"tool {tool!r} needs an answer to: {message} It cannot ask for it because {reason}."


class _State(BaseModel):
    """What a 2026-07-28 round trip carries from one round to the next (`requestState`).

    The client may read or alter it: it holds only what the client sent or answered, never
    the tenant, which comes from the credential of every round.
    """

    tool: str
    arguments: dict[str, Any]
    texts: list[str]
    fields: list[str]
    message: str
    rounds: int
    name: str | None = None


@dataclass(frozen=True)
class Round:
    gathered: Gathered
    fields: tuple[str, ...]
    message: str
    rounds: int
    name: str | None = None


def encode_state(tool: str, gathered: Gathered, question: Question, rounds: int) -> str:
    return _State(
        tool=tool,
        arguments=gathered.arguments,
        texts=gathered.texts,
        fields=list(question.fields),
        message=question.message,
        rounds=rounds,
        name=question.name,
    ).model_dump_json()


def decode_state(raw: str, tool: str) -> Round:
    try:
        state = _State.model_validate_json(raw)
    except ValidationError:
        raise MCPError(
            types.INVALID_PARAMS, "requestState is not one this server issued for tools/call"
        ) from None
    if state.tool != tool:
        raise MCPError(
            types.INVALID_PARAMS, f"requestState was issued for tool {state.tool!r}, not {tool!r}"
        )
    return Round(
        Gathered(state.arguments, state.texts),
        tuple(state.fields),
        state.message,
        state.rounds,
        state.name,
    )

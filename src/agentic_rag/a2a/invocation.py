"""How the messages of a task select a skill and its arguments (docs/skills.md).

- A `DataPart` `{"skill": name, "arguments": {...}}` names the skill; the first one of the task
  wins. `arguments` of every DataPart of the task are merged in order, later ones winning, so
  a continuation can send just `{"arguments": {...}}`.
- Without a named skill, plain text that a text route matches (a bare URL: something to
  ingest) goes to that route's skill; other text goes to the registry's default skill, and
  the text of the first message fills its `text_argument`.
- A `FilePart` fills the skill's `file_argument` (base64 content), or `url` (a file by URI),
  and `filename` with its name, unless the arguments give them.
- When arguments are missing the task pauses in `input-required` saying which; if exactly one
  is missing, a plain-text reply fills it.
"""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from agentic_rag.a2a.errors import InvalidParamsError
from agentic_rag.schema.a2a import DataPart, FilePart, FileWithBytes, Message, Role, TextPart
from agentic_rag.skills import InputRequired, Skill, SkillRegistry

# What every skill's result artifact is made of: a text part and a data part.
OUTPUT_MODES = ("text/plain", "application/json")


@dataclass(frozen=True)
class Invocation:
    skill: Skill
    arguments: dict[str, Any]
    replies: list[str]  # plain texts of the messages after the first

    def check(self) -> None:
        """Raise `InvalidParamsError` for wrong arguments; missing ones are asked for later."""
        with contextlib.suppress(InputRequired):
            self.validate()

    def validate(self) -> BaseModel:
        """The skill's input model, or `InputRequired` naming what is missing.

        Raises `InvalidParamsError` when arguments are present but wrong.
        """
        arguments = dict(self.arguments)
        try:
            return self.skill.input_model.model_validate(arguments)
        except ValidationError as exc:
            missing = [_field(e["loc"]) for e in exc.errors() if e["type"] == "missing"]
            if len(missing) != len(exc.errors()):
                raise InvalidParamsError(
                    f"invalid arguments for skill {self.skill.name!r}: {_describe(exc)}",
                    data={"errors": _errors(exc)},
                ) from None
            if len(missing) == 1 and self.replies:
                arguments[missing[0]] = self.replies[-1]
                return Invocation(self.skill, arguments, []).validate()
            raise InputRequired(
                f"skill {self.skill.name!r} needs {', '.join(missing)}: reply with a DataPart "
                '{"arguments": {...}}' + (" or plain text" if len(missing) == 1 else ""),
                missing,
            ) from None


def text_of(message: Message) -> str:
    return "\n".join(p.root.text for p in message.parts if isinstance(p.root, TextPart))


def resolve(registry: SkillRegistry, history: Sequence[Message]) -> Invocation:
    """The invocation the user messages of `history` ask for."""
    user_messages = [m for m in history if m.role is Role.user]
    name: str | None = None
    arguments: dict[str, Any] = {}
    for message in user_messages:
        for part in message.parts:
            if not isinstance(part.root, DataPart):
                continue
            data = part.root.data
            if name is None and isinstance(data.get("skill"), str):
                name = data["skill"]
            args = data.get("arguments")
            if args is not None and not isinstance(args, dict):
                raise InvalidParamsError('a DataPart\'s "arguments" must be an object')
            arguments.update(args or {})
    routed = None
    if name is None and user_messages:
        routed = registry.routed(text_of(user_messages[0]))
        if routed is not None:
            name, given = routed
            arguments = {**given, **arguments}
    skill_name = name or registry.default_skill
    if skill_name is None:
        raise InvalidParamsError('name a skill with a DataPart {"skill": name, "arguments": {}}')
    skill = registry.get(skill_name)
    if skill is None:
        known = ", ".join(s.name for s in registry)
        raise InvalidParamsError(f"unknown skill {skill_name!r}; this agent has: {known}")
    if name is None and skill.text_argument and user_messages:
        text = text_of(user_messages[0])
        if text and skill.text_argument not in arguments:
            arguments[skill.text_argument] = text
    if skill.file_argument is not None:
        _fill_from_file(skill, user_messages, arguments)
    replies = [t for t in map(text_of, user_messages[1:]) if t]
    return Invocation(skill, arguments, replies)


def _fill_from_file(skill: Skill, messages: Sequence[Message], arguments: dict[str, Any]) -> None:
    """The first FilePart of the task gives the skill its file, unless the arguments do."""
    fields = skill.input_model.model_fields
    for message in messages:
        for part in message.parts:
            if not isinstance(part.root, FilePart):
                continue
            file = part.root.file
            if isinstance(file, FileWithBytes):
                assert skill.file_argument is not None
                arguments.setdefault(skill.file_argument, file.bytes)
            elif "url" in fields:
                arguments.setdefault("url", file.uri)
            if file.name and "filename" in fields:
                arguments.setdefault("filename", file.name)
            return


def accepts_output(accepted: Sequence[str] | None) -> bool:
    """Whether a client accepting `accepted` MIME types can read a skill's result (§12.7)."""
    if not accepted:
        return True
    return any(_mime_matches(want, have) for want in accepted for have in OUTPUT_MODES)


def _mime_matches(want: str, have: str) -> bool:
    want = want.split(";")[0].strip().lower()
    kind, _, sub = have.partition("/")
    return want in ("*/*", "*", have, kind, f"{kind}/*") or (want == sub)


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "arguments"


def _errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": _field(e["loc"]), "problem": e["msg"]} for e in exc.errors()]


def _describe(exc: ValidationError) -> str:
    return "; ".join(f"{e['field']}: {e['problem']}" for e in _errors(exc))

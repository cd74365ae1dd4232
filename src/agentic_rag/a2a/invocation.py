"""How the messages of a task select a skill and its arguments (docs/skills.md).

- A `DataPart` `{"skill": name, "arguments": {...}}` names the skill; the first one of the task
  wins. `arguments` of every DataPart of the task are merged in order, later ones winning, so
  a continuation can send just `{"arguments": {...}}`.
- Without a named skill, plain text that a text route matches (a bare URL: something to
  ingest) goes to that route's skill; else a file in the first message of a type only one
  skill takes (a PDF: `ingest_pdf`) goes to that skill; other text goes to the registry's
  default skill, and the text of the first message fills its `text_argument`.
- A `FilePart` fills the skill's `file_argument` (base64 content), or `url` (a file by URI),
  and `filename` with its name, unless the arguments give them.
- When arguments are missing the task pauses in `input-required` saying which; if exactly one
  is missing, a plain-text reply fills it.
"""

import functools
from collections.abc import Sequence
from typing import Any

from agentic_rag.schema.a2a import DataPart, FilePart, FileWithBytes, Message, Role
from agentic_rag.skills import Skill, SkillRegistry
from agentic_rag.tasks.calls import CallReader, Invocation
from agentic_rag.tasks.errors import TaskRequestError
from agentic_rag.tasks.parts import text_of

# What every skill reads from a message: text, and JSON in a DataPart.
INPUT_MODES = ("text/plain", "application/json")


def input_modes(skill: Skill) -> list[str]:
    """The media types `skill` reads from a message: text and JSON, and the files it takes."""
    return [*INPUT_MODES, *skill.file_media_types]


def media_types_read(registry: SkillRegistry) -> frozenset[str]:
    """The media types some skill of `registry` reads."""
    return frozenset({*INPUT_MODES, *(t for skill in registry for t in skill.file_media_types)})


def reads_media_type(registry: SkillRegistry, media_type: str) -> bool:
    """Whether some skill of `registry` reads content of `media_type` (its parameters, such
    as a charset, aside)."""
    return media_type.split(";", 1)[0].strip().lower() in media_types_read(registry)


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
                raise TaskRequestError('a DataPart\'s "arguments" must be an object')
            arguments.update(args or {})
    routed = None
    if name is None and user_messages:
        routed = registry.routed(text_of(user_messages[0]))
        if routed is not None:
            name, given = routed
            arguments = {**given, **arguments}
        else:
            name = _file_reader(registry, user_messages[0])
    skill_name = name or registry.default_skill
    if skill_name is None:
        raise TaskRequestError('name a skill with a DataPart {"skill": name, "arguments": {}}')
    skill = registry.get(skill_name)
    if skill is None:
        known = ", ".join(s.name for s in registry)
        raise TaskRequestError(f"unknown skill {skill_name!r}; this agent has: {known}")
    if name is None and skill.text_argument and user_messages:
        text = text_of(user_messages[0])
        if text and skill.text_argument not in arguments:
            arguments[skill.text_argument] = text
    if skill.file_argument is not None:
        _fill_from_file(skill, user_messages, arguments)
    replies = [t for t in map(text_of, user_messages[1:]) if t]
    return Invocation(skill, arguments, replies)


def _file_reader(registry: SkillRegistry, message: Message) -> str | None:
    """The skill that takes the message's first file, by its media type, if one alone does."""
    for part in message.parts:
        if isinstance(part.root, FilePart):
            media_type = part.root.file.mime_type
            reader = registry.reading(media_type) if media_type else None
            return reader.name if reader is not None else None
    return None


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


def call_reader(registry: SkillRegistry) -> CallReader:
    """How the task engine reads back the skill call of a task it stores (its `read_call`)."""
    return functools.partial(resolve, registry)

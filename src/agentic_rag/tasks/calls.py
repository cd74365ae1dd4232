"""A skill call as the engine runs it: the skill, its arguments, and the replies that may fill
a missing one; and how a task's stored messages are read back into one (`CallReader`)."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from agentic_rag.schema.a2a import Message, Task
from agentic_rag.schema.base import changed
from agentic_rag.skills import InputRequired, Skill
from agentic_rag.skills.groups import refusal, selects
from agentic_rag.tasks.errors import SkillForbiddenError, TaskRequestError

# What every skill's result is recorded as: a text part and a data part.
OUTPUT_MODES = ("text/plain", "application/json")
# The metadata key of a task's first message naming the groups of tools of the credential that
# created the task (absent: it selects none, so every group). The engine writes it, over
# whatever a client put there, so the task's skill, and every skill it starts (a plan's steps),
# runs with the caller's groups, after a restart too.
TOOL_GROUPS = "agentic-rag/toolGroups"

type Groups = frozenset[str] | None
"""The groups of tools a credential selects; None: no selection (skills/groups.py)."""


def permit(groups: Collection[str] | None, skill: Skill) -> None:
    """Nothing, if a credential that selects `groups` may run `skill`; else
    `SkillForbiddenError`, saying why. The one check of every door that runs skills as tasks."""
    if groups is not None and not selects(groups, skill):
        raise SkillForbiddenError(
            refusal(groups, skill),
            data={"skill_group": skill.group, "granted_groups": sorted(groups)},
        )


def stamped(message: Message, groups: Groups) -> Message:
    """`message`, the first of a new task, naming `groups` in its metadata (and only them)."""
    metadata = dict(message.metadata or {})
    if groups is None and TOOL_GROUPS not in metadata:
        return message
    metadata.pop(TOOL_GROUPS, None)
    if groups is not None:
        metadata[TOOL_GROUPS] = sorted(groups)
    return changed(message, metadata=metadata or None)


def groups_of(task: Task) -> Groups:
    """The groups of tools of the credential that created `task` (`stamped`)."""
    first = task.history[0] if task.history else None
    named = (first.metadata or {}).get(TOOL_GROUPS) if first is not None else None
    return frozenset(named) if isinstance(named, list) else None


class CallReader(Protocol):
    """The skill call the messages of a task's history ask for (the A2A adapter's
    `agentic_rag.a2a.invocation.resolve`, bound to the registry by the composition root).

    Raises `TaskRequestError` when they name no skill the registry has, or wrong arguments."""

    def __call__(self, history: Sequence[Message], /) -> "Invocation": ...


@dataclass(frozen=True)
class Invocation:
    skill: Skill
    arguments: dict[str, Any]
    replies: list[str]  # plain texts of the messages after the first

    def check(self) -> BaseModel | None:
        """The skill's input model (the runner uses it as it is), or None while arguments are
        missing (they are asked for when it runs); `TaskRequestError` for wrong ones."""
        try:
            return self.validate()
        except InputRequired:
            return None

    def validate(self) -> BaseModel:
        """The skill's input model, or `InputRequired` naming what is missing.

        Raises `TaskRequestError` when arguments are present but wrong.
        """
        arguments = dict(self.arguments)
        try:
            # By the model's validator itself: model_validate is a Python frame around it.
            validated: BaseModel = self.skill.input_model.__pydantic_validator__.validate_python(
                arguments
            )
            return validated
        except ValidationError as exc:
            missing = [_field(e["loc"]) for e in exc.errors() if e["type"] == "missing"]
            if len(missing) != len(exc.errors()):
                raise TaskRequestError(
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


def _matching(have: str) -> set[str]:
    """What an accepted MIME type may say (lower case, parameters left out) to take `have`:
    itself, its wildcards, its kind or its subtype alone."""
    kind, _, sub = have.partition("/")
    return {"*/*", "*", have, kind, f"{kind}/*", sub}


_ACCEPTING = frozenset().union(*(_matching(have) for have in OUTPUT_MODES))


def accepts_output(accepted: Sequence[str] | None) -> bool:
    """Whether a client accepting `accepted` MIME types can read a skill's result (§12.7)."""
    if not accepted:
        return True
    # A loop, not any() over a generator: 0.25 against 1.2 us a send (timeit).
    for want in accepted:  # noqa: SIM110
        if want.split(";")[0].strip().lower() in _ACCEPTING:
            return True
    return False


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "arguments"


def _errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": _field(e["loc"]), "problem": e["msg"]} for e in exc.errors()]


def _describe(exc: ValidationError) -> str:
    return "; ".join(f"{e['field']}: {e['problem']}" for e in _errors(exc))

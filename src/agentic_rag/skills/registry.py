"""The skills registry: a skill is a typed async function plus metadata, defined once.

The input and output models come from the handler's type hints, so every protocol derives
its schema from the same source (A2A Agent Card skills, MCP tool schemas, CLI options).

    registry = SkillRegistry()

    @registry.skill(description="Say hello.", tags=["demo"], text_argument="name")
    async def hello(ctx: SkillContext, args: HelloInput) -> HelloOutput:
        await ctx.progress("thinking")
        return HelloOutput(greeting=f"hello {args.name}")
"""

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from pydantic import BaseModel

from agentic_rag.config import ToolGroup
from agentic_rag.skills.chat import Chat


class SkillError(Exception):
    """A failure the caller should read: the task ends `failed` with this message."""


class SkillRejected(SkillError):
    """The skill refuses the task outright (not a failure while doing it): the task ends
    `rejected` with this message."""


class AnswerOnly(Exception):
    """Raised by a skill that answers with a message alone and no result: the task completes
    with `text` as its status message and no artifact of the skill's; A2A 1.0 answers the
    blocking send with that message instead of the task (spec §3.1.1)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class InputRequired(Exception):
    """Raised by `SkillContext.ask`: the task pauses in `input-required` with this question.

    The handler exits; the caller's next message on the same task runs it again with every
    message so far in `ctx.messages` and the arguments of all of them merged.
    """

    def __init__(self, question: str, missing: Sequence[str] = (), name: str | None = None) -> None:
        super().__init__(question)
        self.question = question
        self.missing = tuple(missing)
        # What the answer is called where a protocol names it (MCP: the input request's key).
        self.name = name


@dataclass(frozen=True)
class ClientRoot:
    """A directory or file the caller's client works in (MCP roots), which it lets the
    server know of."""

    uri: str
    name: str | None = None


@dataclass(frozen=True)
class FileResult:
    """A file a skill hands back beside its output: its bytes, or a URL where it is."""

    name: str
    media_type: str
    content: bytes | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.content is None) == (self.url is None):
            raise ValueError(f"file result {self.name!r} needs either content or a url")


@dataclass(frozen=True)
class DataResult:
    """Structured data a skill hands back beside its output."""

    data: dict[str, Any]


# One part of a result a skill attaches: text, a file, or data.
type ResultPart = str | FileResult | DataResult


class SkillContext(Protocol):
    """What a running skill may know and do. Each protocol adapter implements it."""

    @property
    def tenant(self) -> str:
        """The tenant of the caller's credential; every store query is scoped by it."""
        ...

    @property
    def task_id(self) -> str: ...

    @property
    def context_id(self) -> str: ...

    @property
    def texts(self) -> list[str]:
        """The text of every message the caller sent on this task, oldest first."""
        ...

    @property
    def message_ids(self) -> list[str]:
        """The id of every message the caller sent on this task, oldest first (as `texts`);
        empty where the protocol has no message ids (MCP)."""
        ...

    @property
    def client_model(self) -> Chat | None:
        """The caller's own model, when the caller offers it for this call (MCP sampling, while
        the request lasts); None otherwise (A2A, the CLI, a task running outside the request).
        What a skill sends it leaves the server: use it only when the caller asked for it."""
        ...

    @property
    def groups(self) -> frozenset[str] | None:
        """The groups of tools the caller's credential selects (None: no selection,
        skills/groups.py). A skill that runs other skills (a plan's steps) runs them with
        these, so that it does no more than its caller may."""
        ...

    async def progress(self, text: str) -> None:
        """Report progress (A2A: a `working` status update; MCP: a progress notification)."""
        ...

    async def partial(self, text: str, *, artifact_id: str, last_chunk: bool = False) -> None:
        """Stream a partial text result; chunks with one `artifact_id` append to each other."""
        ...

    async def attach(self, *parts: ResultPart, name: str | None = None) -> None:
        """Hand back a result beside the output (A2A: an artifact of these parts)."""
        ...

    async def client_roots(self) -> list[ClientRoot] | None:
        """The roots the caller's client works in, when it offers them for this call (MCP
        `roots/list`, while the request lasts); None otherwise (A2A, the CLI, a task)."""
        ...

    def offers(self, skill: "Skill") -> bool:
        """Whether the caller is offered `skill`: over MCP, the tools its credential and the
        deployment select (what its `tools/list` shows); elsewhere every skill (the Agent Card
        lists them all)."""
        ...

    def ask(
        self, question: str, missing: Sequence[str] = (), *, name: str | None = None
    ) -> NoReturn:
        """Pause for the caller's input; never returns. `name` names the answer where the
        protocol keys it (MCP: the input request's key)."""
        raise InputRequired(question, missing, name)


Handler = Callable[[SkillContext, Any], Awaitable[BaseModel]]


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...]
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    handler: Handler
    text_argument: str | None = None
    """The argument that plain text fills when this skill answers a message without data."""
    render: Callable[[Any], str] | None = None
    """Turns the output into text a person can read; JSON when absent."""
    public: bool = True
    """Listed in the public Agent Card; otherwise only in the authenticated extended card."""
    resumable: bool = False
    """Safe to run again after a crash, picking up where it was (long jobs that keep their
    progress in the database): a task interrupted by a crash is run again, not failed."""
    file_argument: str | None = None
    """The argument an A2A FilePart's content fills (base64); its `uri`, if it has one
    instead, fills `url`, and its name fills `filename`, when the input model has them."""
    file_media_types: tuple[str, ...] = ()
    """The media types of the files `file_argument` takes: the Agent Card lists them among
    the skill's input modes, and A2A 1.0 refuses a file of a type no skill takes."""
    summary: str | None = None
    """One line for the lists every conversation pays for (MCP's tools/list); None: the
    description. The description, in full, is what `help` and the Agent Card show."""
    group: ToolGroup | None = None
    """The group of tools it belongs to, which a deployment and an API key select (groups.py);
    None: in every selection (help)."""
    needs_client_model: bool = False
    """Works only with the caller's own model (`SkillContext.client_model`): an MCP client
    that offers none is refused before the skill runs (2026-07-28:
    MissingRequiredClientCapabilityError naming `sampling`). Where no protocol offers one (A2A,
    the CLI) the skill sees None, and says so with a `SkillError`."""

    async def run(self, ctx: SkillContext, args: BaseModel) -> BaseModel:
        """The handler's output. A skill that asks several things at once (in a task group)
        raises the group: its question comes out as itself (see `question_in`)."""
        try:
            return await self.handler(ctx, args)
        except BaseExceptionGroup as group:
            asked = question_in(group)
            if asked is None:
                raise
            raise asked from group

    def readable(self, output: BaseModel) -> str:
        if self.render is not None:
            return self.render(output)
        return output.model_dump_json(indent=2)


def question_in(group: BaseExceptionGroup[BaseException]) -> InputRequired | None:
    """What a skill that asked several things at once asks: a question if it asked one, else
    another input it needs (MCP gathers the client's requests made meanwhile into the same
    round); None when something else went wrong in the group."""
    needed, rest = group.split(InputRequired)
    if needed is None or rest is not None:
        return None
    asked = [e for e in _leaves(needed) if isinstance(e, InputRequired)]
    questions = [e for e in asked if type(e) is InputRequired]
    return (questions or asked)[0]


def _leaves(group: BaseExceptionGroup[BaseException]) -> typing.Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


@dataclass(frozen=True)
class TextRoute:
    """Plain text that obviously asks for another skill than the default one (a bare URL is
    something to ingest, not a question): the text matches `pattern`, whose group `value`
    fills `argument` of `skill`."""

    pattern: re.Pattern[str]
    skill: str
    argument: str


@dataclass
class SkillRegistry:
    """The skills this agent offers, and which one answers plain text."""

    default_skill: str | None = None
    _skills: dict[str, Skill] = field(default_factory=dict)
    _routes: list[TextRoute] = field(default_factory=list)

    def route_text(self, pattern: str, skill: str, argument: str) -> None:
        """Send plain text matching `pattern` (first match wins, in the order added) to
        `skill`, with the pattern's group `value` as `argument`."""
        compiled = re.compile(pattern, re.IGNORECASE)
        if "value" not in compiled.groupindex:
            raise ValueError(f"text route {pattern!r} has no group named 'value'")
        self._routes.append(TextRoute(compiled, skill, argument))

    def routed(self, text: str) -> tuple[str, dict[str, str]] | None:
        """The skill and arguments plain `text` asks for, if a route matches it."""
        for route in self._routes:
            match = route.pattern.fullmatch(text.strip())
            if match is not None:
                return route.skill, {route.argument: match.group("value")}
        return None

    def reading(self, media_type: str) -> Skill | None:
        """The skill that takes files of `media_type` (its parameters aside), if exactly one
        does: a file sent with no skill named is for it."""
        bare = media_type.split(";", 1)[0].strip().lower()
        readers = [skill for skill in self if bare in skill.file_media_types]
        return readers[0] if len(readers) == 1 else None

    def add(self, skill: Skill) -> Skill:
        if skill.name in self._skills:
            raise ValueError(f"skill {skill.name!r} is already registered")
        self._skills[skill.name] = skill
        return skill

    def skill(
        self,
        *,
        description: str,
        name: str | None = None,
        tags: Sequence[str] = (),
        examples: Sequence[str] = (),
        text_argument: str | None = None,
        render: Callable[[Any], str] | None = None,
        default: bool = False,
        public: bool = True,
        resumable: bool = False,
        file_argument: str | None = None,
        file_media_types: Sequence[str] = (),
        summary: str | None = None,
        group: ToolGroup | None = None,
        needs_client_model: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated `async def f(ctx, args: In) -> Out` as a skill."""

        def register(handler: Handler) -> Handler:
            input_model, output_model = _models_of(handler)
            for argument in (text_argument, file_argument):
                if argument is not None and argument not in input_model.model_fields:
                    raise ValueError(f"{input_model.__name__} has no field {argument!r}")
            if file_media_types and file_argument is None:
                raise ValueError("file_media_types are the types of a file_argument: name it")
            skill = self.add(
                Skill(
                    name=name or handler.__name__,
                    description=description,
                    tags=tuple(tags),
                    examples=tuple(examples),
                    input_model=input_model,
                    output_model=output_model,
                    handler=handler,
                    text_argument=text_argument,
                    render=render,
                    public=public,
                    resumable=resumable,
                    file_argument=file_argument,
                    file_media_types=tuple(file_media_types),
                    summary=summary,
                    group=group,
                    needs_client_model=needs_client_model,
                )
            )
            if default:
                self.default_skill = skill.name
            return handler

        return register

    def get(self, name: str) -> Skill | None:
        return self._skills.get(name)

    def __iter__(self) -> typing.Iterator[Skill]:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)


def _models_of(handler: Handler) -> tuple[type[BaseModel], type[BaseModel]]:
    """The input and output models, read from `handler(ctx, args: In) -> Out`."""
    hints = typing.get_type_hints(handler)
    params = list(inspect.signature(handler).parameters)
    if len(params) != 2:
        raise TypeError(f"{handler.__name__} must take (ctx, args), not {params}")
    input_model, output_model = hints.get(params[1]), hints.get("return")
    for role, model in (("argument", input_model), ("return", output_model)):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{handler.__name__}'s {role} type must be a pydantic model")
    return input_model, output_model  # type: ignore[return-value]

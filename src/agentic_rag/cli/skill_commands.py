"""The CLI's `agentic-rag skills` and `agentic-rag call SKILL [ARGUMENTS]`: any skill of the
registry the product serves, from the command line.

What the user typed is read and checked against the skill's input model before anything
starts (no engine, no connection); the call itself goes through `agentic_rag.cli.skill_client`, on
the local data directory or on a running server, with progress on stderr.
"""

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import orjson
from pydantic import ValidationError
from tqdm import tqdm

from agentic_rag.cli.skill_client import SkillCallError, Skills
from agentic_rag.skills import Skill, SkillRegistry


class ArgumentsRefused(ValueError):
    """What the user typed is not a call of a skill: the message says why, in one line."""


def describe_skills(registry: SkillRegistry, *, out: TextIO = sys.stdout) -> int:
    """Each skill with the first sentence of its description (the Agent Card's and `help`'s
    description), one line each; `call help topic=SKILL` tells the rest."""
    width = max(len(s.name) for s in registry)
    for skill in sorted(registry, key=lambda s: s.name):
        print(f"{skill.name:<{width}}  {first_sentence(skill.description)}", file=out)
    return 0


def first_sentence(text: str) -> str:
    sentence, stop, _ = text.partition(". ")
    return sentence + stop.strip()


def parse_arguments(given: Sequence[str], stdin: TextIO) -> dict[str, Any]:
    """The arguments a user typed: one JSON object, `-` for a JSON object on stdin, or pairs
    `key=value` (a string, read by the input model as its field's type) and `key:=JSON`."""
    if len(given) == 1 and (given[0] == "-" or given[0].lstrip().startswith("{")):
        source = "standard input" if given[0] == "-" else "the argument"
        text = stdin.read() if given[0] == "-" else given[0]
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ArgumentsRefused(f"{source} is not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise ArgumentsRefused(f"{source} must be a JSON object of arguments")
        return document
    arguments: dict[str, Any] = {}
    for pair in given:
        key, json_value, value = _pair(pair)
        if key in arguments:
            raise ArgumentsRefused(f"{key} is given twice")
        arguments[key] = json_value if value is None else value
    return arguments


def _pair(pair: str) -> tuple[str, Any, str | None]:
    """`key=value` -> (key, None, value); `key:=JSON` -> (key, the JSON value, None)."""
    key, equals, value = pair.partition("=")
    if not equals or not key or key == ":":
        raise ArgumentsRefused(
            f"{pair!r} is not key=value or key:=JSON (or one JSON object, or - for stdin)"
        )
    if not key.endswith(":"):
        return key, None, value
    try:
        return key[:-1], orjson.loads(value), None
    except orjson.JSONDecodeError as exc:
        raise ArgumentsRefused(f"{pair!r}: the value after := is not JSON: {exc}") from None


def checked_call(
    registry: SkillRegistry, name: str, arguments: dict[str, Any]
) -> tuple[Skill, dict[str, Any]]:
    """The skill named `name` and its arguments, once its input model accepts them.

    The arguments are sent as typed (the skill reads them with the same model); missing ones
    are refused here, since a command line cannot answer a question."""
    skill = registry.get(name)
    if skill is None:
        known = ", ".join(sorted(s.name for s in registry))
        raise ArgumentsRefused(f"unknown skill {name!r}; the skills are: {known}")
    try:
        skill.input_model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ArgumentsRefused(f"invalid arguments for skill {name!r}: {problems}") from None
    return skill, arguments


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[str], None]]:
    """On a terminal, a bar on stderr that each progress text advances (shown next to it),
    gone at the end; elsewhere (a log, a pipe) each text on a line of its own, since a bar's
    redrawn lines would bury what the command says last."""
    if not sys.stderr.isatty():
        yield lambda text: print(f"{description}: {text}", file=sys.stderr)
        return
    with tqdm(desc=description, unit=" step", file=sys.stderr, leave=False) as bar:

        def advance(text: str) -> None:
            bar.set_postfix_str(text[:80], refresh=False)
            bar.update()

        yield advance


async def call(
    skills: Skills,
    skill: Skill,
    arguments: dict[str, Any],
    *,
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """Run the skill; print its readable result, or its structured result as JSON."""
    try:
        with progress_bar(skill.name) as advance:
            data, text = await skills.call(skill.name, arguments, advance)
    except SkillCallError as exc:
        print(f"agentic-rag call: {skill.name}: {exc}", file=sys.stderr)
        return 1
    print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() if as_json else text, file=out)
    return 0

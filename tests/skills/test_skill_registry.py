"""The skills registry derives every schema from the handler's type hints."""

import pytest
from pydantic import BaseModel

from agentic_rag.a2a.invocation import resolve
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.schema.a2a import FilePart, FileWithBytes, Message, Part, Role, TextPart
from agentic_rag.skills import SkillContext, SkillRegistry
from agentic_rag.skills.help import default_registry


class In(BaseModel):
    name: str


class FileIn(BaseModel):
    data: str


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


def test_without_the_knowledge_engine_help_answers_plain_text() -> None:
    registry = default_registry()
    assert registry.default_skill == "help"
    assert [s.name for s in registry] == ["help"]


def _resolve(registry: SkillRegistry, text: str) -> tuple[str, dict[str, object]]:
    message = Message(
        role=Role.user,
        message_id="m",
        kind="message",
        parts=[Part(TextPart(kind="text", text=text))],
    )
    invocation = resolve(registry, [message])
    return invocation.skill.name, invocation.arguments


def test_the_product_answers_questions_and_ingests_bare_urls() -> None:
    registry = Engine(Settings()).registry  # built, not started: no skill runs here
    assert registry.default_skill == "hybrid_retrieve"
    assert {"help", "hybrid_retrieve", "ingest_url", "ingest_pdf", "explain_answer"} <= {
        s.name for s in registry
    }
    assert _resolve(registry, "How do I reset it?") == (
        "hybrid_retrieve",
        {"query": "How do I reset it?"},
    )
    assert _resolve(registry, " https://docs.example.com/guide ") == (
        "ingest_url",
        {"url": "https://docs.example.com/guide"},
    )
    assert _resolve(registry, "ingest https://example.com/") == (
        "ingest_url",
        {"url": "https://example.com/"},
    )
    assert _resolve(registry, "https://youtu.be/dQw4w9WgXcQ") == (
        "ingest_youtube",
        {"video_url": "https://youtu.be/dQw4w9WgXcQ"},
    )
    # A URL inside a question is part of the question.
    asked = "What does https://example.com/ say about pricing?"
    assert _resolve(registry, asked) == ("hybrid_retrieve", {"query": asked})


def _with_file(text: str, media_type: str) -> Message:
    file = FileWithBytes(bytes="JVBERi0=", name="sent.pdf", mimeType=media_type)
    return Message(
        role=Role.user,
        message_id="m",
        kind="message",
        parts=[Part(TextPart(kind="text", text=text)), Part(FilePart(kind="file", file=file))],
    )


def test_a_file_with_no_skill_named_goes_to_the_one_skill_that_takes_its_type() -> None:
    registry = Engine(Settings()).registry
    pdf = resolve(registry, [_with_file("Keep this", "application/pdf; version=1.7")])
    assert (pdf.skill.name, pdf.arguments) == (
        "ingest_pdf",
        {"data": "JVBERi0=", "filename": "sent.pdf"},
    )
    # A type no skill takes is no route: the text is a question, as without the file.
    other = resolve(registry, [_with_file("Keep this", "image/png")])
    assert (other.skill.name, other.arguments["query"]) == ("hybrid_retrieve", "Keep this")


def test_a_file_type_two_skills_take_routes_to_neither() -> None:
    registry = SkillRegistry()
    for name in ("first_reader", "second_reader"):

        @registry.skill(
            name=name,
            description="Reads PDFs.",
            file_argument="data",
            file_media_types=["application/pdf"],
        )
        async def reader(ctx: SkillContext, args: FileIn) -> Out:
            return Out(greeting="")

    assert registry.reading("application/pdf") is None
    assert registry.get("first_reader") is not None

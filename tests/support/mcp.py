"""Helpers of the MCP tests: the watched skills, SDK clients with a key, elicitation and progress
callbacks, and the stdio server's environment."""

import asyncio
import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, Field

from agentic_rag.skills import SkillContext, SkillRegistry
from conformance.skills import ScriptOutput, conformance_registry
from tests.support.live import LiveServer


class SlowInput(BaseModel):
    steps: int = 100
    delay_ms: int = 100


class Nothing(BaseModel):
    pass


class Whoami(BaseModel):
    tenant: str


class DeleteInput(BaseModel):
    target: str
    confirm: bool = False


class Colour(StrEnum):
    RED = "red"
    OCHRE = "ochre"


class PaintInput(BaseModel):
    """Choices a person makes, asked with a form when the colour is not given."""

    colour: Colour | None = Field(None, description="The paint's colour")
    shades: list[Literal["light", "dark"]] = Field(default_factory=list, min_length=1)
    finish: Literal["matte", "gloss"] = "matte"


def watched_registry(record: Callable[[str], None]) -> SkillRegistry:
    """The conformance skills, plus skills that report to `record` what they did."""
    registry = conformance_registry()

    @registry.skill(description="Counts slowly, recording every step and how it ended.")
    async def slow(ctx: SkillContext, args: SlowInput) -> ScriptOutput:
        try:
            for i in range(args.steps):
                record(f"step {i + 1}")
                await ctx.progress(f"step {i + 1} of {args.steps}")
                await asyncio.sleep(args.delay_ms / 1000)
        except asyncio.CancelledError:
            record("cancelled")
            raise
        record("finished")
        return ScriptOutput(text=f"{args.steps} steps")

    @registry.skill(description="Says whose call this is.")
    async def whoami(ctx: SkillContext, args: Nothing) -> Whoami:
        return Whoami(tenant=ctx.tenant)

    @registry.skill(description="Streams its answer in two chunks.")
    async def chunks(ctx: SkillContext, args: Nothing) -> ScriptOutput:
        await ctx.partial("Hello, ", artifact_id="answer")
        await ctx.partial("world", artifact_id="answer", last_chunk=True)
        return ScriptOutput(text="Hello, world")

    @registry.skill(description="Deletes a target once the caller confirms.")
    async def delete(ctx: SkillContext, args: DeleteInput) -> ScriptOutput:
        if not args.confirm:
            ctx.ask(f"Really delete {args.target}?", missing=["confirm"])
        return ScriptOutput(text=f"deleted {args.target}")

    @registry.skill(description="Paints with the colour, shades and finish the caller picks.")
    async def paint(ctx: SkillContext, args: PaintInput) -> ScriptOutput:
        if args.colour is None:
            ctx.ask("Which colour, shades and finish?", missing=["colour", "shades", "finish"])
        return ScriptOutput(text=f"{args.finish} {args.colour} in {' and '.join(args.shades)}")

    @registry.skill(description="Fails with an exception nobody expected.")
    async def boom(ctx: SkillContext, args: Nothing) -> ScriptOutput:
        raise RuntimeError("the database password is hunter2")

    return registry


async def until(check: Callable[[], bool]) -> None:
    """Wait up to 10 s for `check()`: the server runs in another thread or process."""
    for _ in range(500):
        if check():
            return
        await anyio.sleep(0.02)
    raise AssertionError("the server did not get there within 10 s")


def mcp_url(server: LiveServer) -> str:
    return f"{server.url}/mcp"


def keyed_client(url: str, key: str | None, **options: Any) -> Client:
    """An SDK client sending `X-API-Key`, as Cursor and VS Code do (docs/clients.md)."""
    http = httpx2.AsyncClient(headers={"X-API-Key": key} if key else {})
    return Client(streamable_http_client(url, http_client=http), **options)


class Elicitations:
    """An elicitation callback that answers with `content` and remembers what it was asked."""

    def __init__(self, *answers: dict[str, Any], action: str = "accept") -> None:
        self.answers, self.action = list(answers), action
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=self.answers.pop(0))


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message))

    @property
    def messages(self) -> list[str | None]:
        return [m for _, m in self.seen]


def text_of(result: types.CallToolResult) -> str:
    """The result's text block: the first (links to documents, or a document, may follow)."""
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIC_RAG_")}
    env.pop("DATABASE_URL", None)
    return {**env, **extra}

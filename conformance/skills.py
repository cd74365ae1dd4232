"""Skills for black-box conformance suites, driven by plain text (see `run-sut`).

- `task N D`: N `working` updates D milliseconds apart, then a text artifact, then `completed`
- `ask`: `input-required`; the next message on the task completes it
- `listen`: works until another message arrives on the task (at most LISTEN_SECONDS), then
  completes with "heard: " and that message's text
- `fail`: ends `failed` with a reason
- anything else: echoed back in a completed task, after the configured echo delay

A message whose id starts with one of the A2A 1.0 test kit's prefixes (`tck-complete-task`,
`tck-artifact-file`, ...: shared/spec/a2a-1.0-tck/scenarios/*.feature) plays that scenario
whatever its text (`TCK_SCENARIOS`); the first message of the task names it.
"""

import asyncio
import os
import re
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field
from starlette.applications import Starlette

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.skills import (
    AnswerOnly,
    DataResult,
    FileResult,
    SkillContext,
    SkillError,
    SkillRegistry,
    SkillRejected,
)
from agentic_rag.skills.help import add_help

# run-sut hands --echo-delay to its worker processes in this environment variable.
ECHO_DELAY_VARIABLE = "RUN_SUT_ECHO_DELAY"

LISTEN_SECONDS = 30.0
LISTEN_POLL = 0.02

# The kits' long-running scenario (message ids starting `test-resubscribe-message-id`) works
# twice the 1.0 kit's default streaming timeout (TCK_STREAMING_TIMEOUT, 2 s: its
# docs/SUT_REQUIREMENTS.md, and its reference SUT's 4 s), so the kit can resubscribe meanwhile.
# Not longer: the 0.2.5 kit sends the same prefix in a blocking message/send and waits for the
# answer 10 s at most (its tck/sut_client.py).
KIT_STREAMING_TIMEOUT = 2.0
LONG_RUNNING_SECONDS = 2 * KIT_STREAMING_TIMEOUT

TASK = re.compile(r"^\s*task(?:\s+(\d+))?(?:\s+(\d+))?\s*$", re.IGNORECASE)


class ScriptInput(BaseModel):
    text: str = Field(description="task N D | ask | listen | fail | any text to echo")


class ScriptOutput(BaseModel):
    text: str


type Scenario = Callable[[SkillContext], Awaitable[ScriptOutput]]


async def _complete(ctx: SkillContext) -> ScriptOutput:
    return ScriptOutput(text="Hello from TCK")


async def _input_required(ctx: SkillContext) -> ScriptOutput:
    # Asked again on every follow-up until one whose id says to complete.
    if not ctx.message_ids[-1].startswith("tck-complete-task"):
        ctx.ask("Waiting for input: reply with a message whose id starts tck-complete-task.")
    return ScriptOutput(text="Hello from TCK")


def _attaching(*parts: str | FileResult | DataResult, done: str) -> Scenario:
    async def scenario(ctx: SkillContext) -> ScriptOutput:
        await ctx.attach(*parts, name="tck-artifact")
        return ScriptOutput(text=done)

    return scenario


async def _answer_only(ctx: SkillContext) -> ScriptOutput:
    raise AnswerOnly("Direct message response")


async def _reject(ctx: SkillContext) -> ScriptOutput:
    raise SkillRejected("rejected")


async def _chunked(ctx: SkillContext) -> ScriptOutput:
    await ctx.partial("chunk-1 ", artifact_id="tck-chunked")
    await ctx.partial("chunk-2", artifact_id="tck-chunked", last_chunk=True)
    return ScriptOutput(text="streamed in chunks")


async def _long_running(ctx: SkillContext) -> ScriptOutput:
    await asyncio.sleep(LONG_RUNNING_SECONDS)
    return ScriptOutput(text="done after a long while")


OUTPUT_FILE = FileResult(name="output.txt", media_type="text/plain", content=b"Generated file")
OUTPUT_URL = FileResult(
    name="output.txt", media_type="text/plain", url="https://example.com/output.txt"
)

# Message id prefix -> scenario; a longer prefix comes before a shorter one it starts with.
TCK_SCENARIOS: tuple[tuple[str, Scenario], ...] = (
    ("tck-complete-task", _complete),
    ("tck-input-required", _input_required),
    ("tck-artifact-text", _attaching("Generated text content", done="text attached")),
    ("tck-artifact-file-url", _attaching(OUTPUT_URL, done="file url attached")),
    ("tck-artifact-file", _attaching(OUTPUT_FILE, done="file attached")),
    (
        "tck-artifact-data",
        _attaching(DataResult({"key": "value", "count": 42}), done="data attached"),
    ),
    ("tck-message-response", _answer_only),
    ("tck-reject-task", _reject),
    ("tck-stream-001", _attaching("Stream hello from TCK", done="streamed")),
    ("tck-stream-002", _complete),
    ("tck-stream-003", _attaching("Stream task lifecycle", done="streamed")),
    ("tck-stream-ordering-001", _attaching("Ordered output", done="streamed")),
    ("tck-stream-artifact-text", _attaching("Streamed text content", done="streamed")),
    ("tck-stream-artifact-file", _attaching(OUTPUT_FILE, done="streamed")),
    ("tck-stream-artifact-chunked", _chunked),
    ("test-resubscribe-message-id", _long_running),
)


_TCK_PREFIXES = tuple(prefix for prefix, _ in TCK_SCENARIOS)


def tck_scenario(message_id: str) -> Scenario | None:
    """The 1.0 kit's scenario a message id names, if it names one."""
    if not message_id.startswith(_TCK_PREFIXES):  # one test for every other message
        return None
    return next((s for prefix, s in TCK_SCENARIOS if message_id.startswith(prefix)), None)


def conformance_registry(echo_delay: float = 0.0) -> SkillRegistry:
    registry = SkillRegistry()

    @registry.skill(
        description=(
            "Follows a script given as plain text: 'task N D', 'ask', 'listen', 'fail', or echo."
        ),
        tags=["conformance"],
        examples=["task 3 50", "ask", "listen", "fail", "hello"],
        text_argument="text",
        render=lambda output: output.text,
        default=True,
    )
    async def script(ctx: SkillContext, args: ScriptInput) -> ScriptOutput:
        if ctx.message_ids and (scenario := tck_scenario(ctx.message_ids[0])) is not None:
            return await scenario(ctx)
        text = args.text.strip()
        if match := TASK.match(text):
            updates, delay = int(match[1] or 0), int(match[2] or 0)
            for i in range(updates):
                await ctx.progress(f"step {i + 1} of {updates}")
                await asyncio.sleep(delay / 1000)
            return ScriptOutput(text=f"done after {updates} updates")
        if text.lower() == "ask":
            if len(ctx.texts) < 2:
                ctx.ask("What should I answer? Reply on this task.")
            return ScriptOutput(text=f"you said: {ctx.texts[-1]}")
        if text.lower() == "listen":
            # A message to the working task joins ctx.texts; a skill has nothing to await it by.
            for _ in range(int(LISTEN_SECONDS / LISTEN_POLL)):
                if len(ctx.texts) > 1:
                    break
                await asyncio.sleep(LISTEN_POLL)
            heard = ctx.texts[1:]
            return ScriptOutput(text=f"heard: {heard[0]}" if heard else "heard nothing")
        if text.lower() == "fail":
            raise SkillError("failed as asked: the message was 'fail'")
        if echo_delay:
            await asyncio.sleep(echo_delay)
        return ScriptOutput(text=args.text)

    add_help(registry, default=False)
    return registry


def sut_app() -> Starlette:
    """What each run-sut worker serves: these skills, settings from the environment."""
    return build_app(Settings(), conformance_registry(float(os.environ[ECHO_DELAY_VARIABLE])))

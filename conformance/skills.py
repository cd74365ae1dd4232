"""Skills for black-box conformance suites, driven by plain text (see `run-sut`).

- `task N D`: N `working` updates D milliseconds apart, then a text artifact, then `completed`
- `ask`: `input-required`; the next message on the task completes it
- `listen`: works until another message arrives on the task (at most LISTEN_SECONDS), then
  completes with "heard: " and that message's text
- `fail`: ends `failed` with a reason
- anything else: echoed back in a completed task, after the configured echo delay
"""

import asyncio
import os
import re

from pydantic import BaseModel, Field
from starlette.applications import Starlette

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.skills import SkillContext, SkillError, SkillRegistry
from agentic_rag.skills.help import add_help

# run-sut hands --echo-delay to its worker processes in this environment variable.
ECHO_DELAY_VARIABLE = "RUN_SUT_ECHO_DELAY"

LISTEN_SECONDS = 30.0
LISTEN_POLL = 0.02

TASK = re.compile(r"^\s*task(?:\s+(\d+))?(?:\s+(\d+))?\s*$", re.IGNORECASE)


class ScriptInput(BaseModel):
    text: str = Field(description="task N D | ask | listen | fail | any text to echo")


class ScriptOutput(BaseModel):
    text: str


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

"""The conformance suite's fixtures for multi-round-trip requests that need more than one
question a round (see `run-mcp-sut`, beside `mcp_skills.py`'s fixtures).

Skills like the product's own, using what the skill API offers for it: a skill that works only
with the client's model (`needs_client_model`), the client's roots (`ctx.client_roots`), and
several requests at once (a task group of a question, the client's model and its roots, asked
in one `InputRequiredResult`).
"""

from typing import Any

import anyio
from mcp_skills import sut_app as fixture_app
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from agentic_rag.skills import ClientRoot, SkillContext, SkillError, SkillRegistry


class NoArguments(BaseModel):
    pass


class NameInput(BaseModel):
    name: str = Field(default="", description="Your name")


class Reply(BaseModel):
    text: str


def _text(output: Reply) -> str:
    return output.text


def _listed(roots: list[ClientRoot] | None) -> str:
    if roots is None:
        raise SkillError("the client offers no roots to list (it did not declare roots)")
    return ", ".join(f"{root.name or 'unnamed'} ({root.uri})" for root in roots) or "none"


def add_rounds_skills(registry: SkillRegistry) -> None:
    """The suite's tools of multi-round-trip requests, as skills of `registry`."""

    def skill(description: str, **options: Any):  # type: ignore[no-untyped-def]
        return registry.skill(
            description=description, tags=["mcp-conformance"], render=_text, **options
        )

    @skill(
        "Asks the client's model, which it cannot do without (server-stateless: "
        "MissingRequiredClientCapabilityError when the client did not declare sampling).",
        needs_client_model=True,
    )
    async def test_missing_capability(ctx: SkillContext, args: NoArguments) -> Reply:
        model = ctx.client_model
        if model is None:  # only outside MCP: the adapter refuses a call without one
            raise SkillError("the caller offers no model to ask (MCP sampling)")
        reply = await model.complete([{"role": "user", "content": "Say hello"}], max_tokens=50)
        return Reply(text=f"LLM response: {reply}")

    @skill("Lists the client's roots (input-required-result-basic-list-roots).")
    async def test_input_required_result_list_roots(ctx: SkillContext, args: NoArguments) -> Reply:
        return Reply(text=f"Client roots: {_listed(await ctx.client_roots())}")

    @skill(
        "Asks a name, the client's model and its roots at once "
        "(input-required-result-multiple-input-requests)."
    )
    async def test_input_required_result_multiple_inputs(
        ctx: SkillContext, args: NameInput
    ) -> Reply:
        model = ctx.client_model
        if model is None:
            raise SkillError("the client offers no model to ask (no sampling)")
        found: dict[str, Any] = {}

        async def greeting() -> None:
            prompt = [{"role": "user", "content": "Generate a greeting"}]
            found["greeting"] = await model.complete(prompt, max_tokens=50)

        async def roots() -> None:
            found["roots"] = await ctx.client_roots()

        async def name() -> None:
            if not args.name:
                ctx.ask("What is your name?", ["name"], name="user_name")

        # Asked together: the adapter puts all three in one round.
        async with anyio.create_task_group() as group:
            for step in (greeting, roots, name):
                group.start_soon(step)
        return Reply(text=f"{found['greeting']} {args.name}; roots: {_listed(found['roots'])}")


def sut_app() -> Starlette:
    """`mcp_skills.sut_app` with these fixtures too: what run-mcp-sut serves."""
    app = fixture_app()
    add_rounds_skills(app.state.engine.registry)
    return app

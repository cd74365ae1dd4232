"""A registry of skills that ask their client in several ways (tests/mcp/test_mcp_rounds.py):
the client's model they cannot do without, a question under a name, the client's roots, and
all three at once."""

from typing import Any

import anyio
from pydantic import BaseModel, Field

from agentic_rag.skills import ClientRoot, SkillContext, SkillRegistry


class Nothing(BaseModel):
    pass


class Name(BaseModel):
    name: str = Field(default="", description="Your name")


class Said(BaseModel):
    text: str


def listed(roots: list[ClientRoot] | None) -> str:
    return "no roots" if roots is None else ", ".join(f"{r.name}={r.uri}" for r in roots)


def rounds_registry() -> SkillRegistry:
    registry = SkillRegistry()

    @registry.skill(description="Greets with the client's model.", needs_client_model=True)
    async def greet(ctx: SkillContext, args: Nothing) -> Said:
        assert ctx.client_model is not None
        reply = await ctx.client_model.complete([{"role": "user", "content": "Greet me"}])
        return Said(text=reply)

    @registry.skill(description="Asks a name under its own key.")
    async def named(ctx: SkillContext, args: Name) -> Said:
        if not args.name:
            ctx.ask("What is your name?", ["name"], name="user_name")
        return Said(text=f"Hello, {args.name}!")

    @registry.skill(description="Lists the client's roots.")
    async def roots(ctx: SkillContext, args: Nothing) -> Said:
        return Said(text=listed(await ctx.client_roots()))

    @registry.skill(description="Asks a name, the client's model and its roots at once.")
    async def everything(ctx: SkillContext, args: Name) -> Said:
        model = ctx.client_model
        assert model is not None
        found: dict[str, Any] = {}

        async def greeting() -> None:
            found["greeting"] = await model.complete([{"role": "user", "content": "Greet me"}])

        async def client_roots() -> None:
            found["roots"] = await ctx.client_roots()

        async def name() -> None:
            if not args.name:
                ctx.ask("What is your name?", ["name"], name="user_name")

        async with anyio.create_task_group() as group:
            for step in (greeting, client_roots, name):
                group.start_soon(step)
        return Said(text=f"{found['greeting']} {args.name} ({listed(found['roots'])})")

    return registry

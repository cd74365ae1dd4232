"""An API key's groups of tools over A2A (docs/skills.md, "Groups of tools"): a message that
would run a skill outside them is refused before any task exists, whichever way the message
selects the skill (naming it, plain text for the default skill, a reply to an open task); the
Agent Card still lists every skill."""

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import BaseModel

from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.skills import SkillContext, SkillRegistry
from agentic_rag.storage.postgres import connect
from tests.support.live import LiveServer, live_server
from tests.support.rpc import call, text_message

FORBIDDEN = -32011


class Question(BaseModel):
    query: str


class Memory(BaseModel):
    text: str
    confirm: bool = False


class Done(BaseModel):
    text: str


def grouped_registry() -> SkillRegistry:
    registry = SkillRegistry()

    @registry.skill(description="Answers.", group="knowledge", text_argument="query", default=True)
    async def ask(ctx: SkillContext, args: Question) -> Done:
        return Done(text=f"answer to {args.query}")

    @registry.skill(description="Remembers once confirmed.", group="graph")
    async def remember(ctx: SkillContext, args: Memory) -> Done:
        if not args.confirm:
            ctx.ask("Remember it?", missing=["confirm"])
        return Done(text=f"remembered {args.text}")

    return registry


@dataclass
class Served:
    server: LiveServer
    keys: dict[str, str]

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.server.url, headers={"X-API-Key": self.keys[key]})

    def send(self, key: str, message: dict[str, Any]) -> dict[str, Any]:
        with self.client(key) as client:
            return call(client, "message/send", {"message": message})


@pytest.fixture
async def served(database_url: str, data_dir: Path) -> AsyncIterator[Served]:
    pool: asyncpg.Pool = await connect(database_url, size=1)
    try:
        store = ApiKeyStore(pool)
        keys = {
            "all": (await store.create("acme", ["read", "write"]))[0],
            "knowledge": (await store.create("acme", ["read", "write"], groups=["knowledge"]))[0],
            "graph": (await store.create("acme", ["read", "write"], groups=["graph"]))[0],
        }
    finally:
        await pool.close()
    with live_server(grouped_registry(), database_url=database_url, data_dir=data_dir) as server:
        yield Served(server, keys)


def skill_message(skill: str, **fields: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "data", "data": {"skill": skill, "arguments": {"text": "otters"}}}],
        **fields,
    }


def refusal(answer: dict[str, Any], skill: str, groups: str) -> None:
    assert "result" not in answer, answer
    assert answer["error"]["code"] == FORBIDDEN
    assert answer["error"]["message"] == (
        f"skill {skill!r} is in the group {'graph' if skill == 'remember' else 'knowledge'!r}, "
        f"which this credential does not select (its groups: {groups})"
    )


def test_a_key_runs_the_skills_of_its_groups_only(served: Served) -> None:
    refusal(served.send("knowledge", skill_message("remember")), "remember", "knowledge")
    answered = served.send("knowledge", text_message("otters?"))
    assert answered["result"]["status"]["state"] == "completed"
    # Plain text goes to the default skill, which is outside the graph key's groups.
    refusal(served.send("graph", text_message("otters?")), "ask", "graph")


def test_a_reply_to_an_open_task_is_checked_against_that_tasks_skill(served: Served) -> None:
    started = served.send("all", skill_message("remember"))["result"]
    assert started["status"]["state"] == "input-required"
    reply = {
        **text_message("yes", taskId=started["id"], contextId=started["contextId"]),
        "parts": [{"kind": "data", "data": {"arguments": {"confirm": True}}}],
    }
    refusal(served.send("knowledge", reply), "remember", "knowledge")
    continued = served.send("graph", {**reply, "messageId": uuid.uuid4().hex})
    assert continued["result"]["id"] == started["id"]
    assert continued["result"]["status"]["state"] == "completed"


def test_the_card_still_lists_every_skill(served: Served) -> None:
    card = httpx.get(served.server.url + "/.well-known/agent.json").json()
    assert {s["id"] for s in card["skills"]} == {"ask", "remember"}

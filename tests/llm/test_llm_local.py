"""The local LLM (the `local-llm` extra): Qwen2.5-Coder-1.5B-Instruct run by llama.cpp in the
server's process, with no endpoint configured. Nothing here is a double: the packaged model is
joined from its PyPI parts, checked by sha256, and extracts a real episode.

A call takes seconds on two cores, so the end-to-end test extracts one short episode.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from jsonschema import validate

from agentic_rag.config import Settings
from agentic_rag.llm.configured import open_chat
from agentic_rag.llm.endpoint import ChatEndpoint
from tests.support.databases import new_database
from tests.support.graph import Tenant, queued_uuid
from tests.support.live import LiveServer, live_server
from tests.support.security import create_keys

EPISODE = "Alice Moreau joined Acme Rockets in March 2024 as a propulsion engineer."
FACTS = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"subject": {"type": "string"}, "object": {"type": "string"}},
                "required": ["subject", "object"],
            },
        }
    },
    "required": ["facts"],
}


@pytest.fixture(scope="module")
async def chat() -> AsyncIterator[ChatEndpoint]:
    async with AsyncExitStack() as stack:
        endpoint = await open_chat(Settings(llm_local=True), stack)
        assert endpoint is not None
        yield endpoint


async def test_the_local_model_answers_the_openai_chat_api_with_json_of_the_schema(
    chat: ChatEndpoint,
) -> None:
    """Graphiti sends `response_format` of type `json_schema`, which llama-cpp-python would
    ignore; the local transport hands the schema to llama.cpp's grammar instead."""
    async with chat.http_client(timeout=600) as http:
        answered = await http.post(
            "/chat/completions",
            json={
                "model": chat.model,
                "messages": [
                    {"role": "system", "content": "List the facts of the text as JSON."},
                    {"role": "user", "content": EPISODE},
                ],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "Facts", "schema": FACTS},
                },
                "max_tokens": 200,
            },
        )
        assert answered.status_code == 200, answered.text
        completion = answered.json()
        message = completion["choices"][0]["message"]["content"]
        facts = json.loads(message)
        validate(facts, FACTS)
        assert facts["facts"], message
        assert completion["usage"]["completion_tokens"] > 0

        streamed = await http.post(
            "/chat/completions", json={"messages": [], "stream": True, "model": chat.model}
        )
        assert streamed.status_code == 400
        assert streamed.json()["error"]["message"] == "the local model does not stream"
        elsewhere = await http.get("/models")
        assert elsewhere.status_code == 404


async def test_a_caller_that_gives_up_does_not_let_two_replies_share_the_model(
    chat: ChatEndpoint,
) -> None:
    """The model generates one reply at a time, on its own thread: a caller that gives up (a
    timeout, a cancelled task) leaves its reply to end there, and the next one waits for it."""

    def ask(content: str, max_tokens: int) -> dict[str, Any]:
        return {
            "model": chat.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens,
        }

    async with chat.http_client(timeout=600) as http:
        counting = asyncio.create_task(
            http.post("/chat/completions", json=ask("Count from 1 to 3000, one per line.", 300))
        )
        await asyncio.sleep(3)
        counting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await counting
        answered = await http.post(
            "/chat/completions", json=ask("What is the capital of France? One word.", 8)
        )
    assert answered.status_code == 200, answered.text
    assert "Paris" in answered.json()["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    database_url = await new_database(postgres_dsn)
    with live_server(
        None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("graph-local-llm"),
        llm_local=True,
    ) as live:
        yield live


async def until_processed(tenant: Tenant, uuid: str) -> dict[str, Any]:
    """The episode once the queue is done with it: the local model takes minutes, not seconds."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        found = await tenant.result("get_episodes", max_episodes=10)
        (episode,) = [e for e in found["episodes"] if e["uuid"] == uuid]
        if episode["status"] in ("done", "failed"):
            return episode
        await asyncio.sleep(1)
    raise AssertionError(f"episode {uuid} was not processed within 15 minutes")


async def test_add_memory_then_search_memory_facts_with_the_local_model(
    server: LiveServer,
) -> None:
    keys = await create_keys(server.settings.database_url or "", "acme", key=["read", "write"])
    acme = Tenant("acme", server, keys["key"])
    added = await acme.result(
        "add_memory", name="Team news", episode_body=EPISODE, source_description="newsletter"
    )
    episode = await until_processed(acme, queued_uuid(added))
    assert episode["status"] == "done", episode
    assert episode["llm_calls"] > 0 and episode["completion_tokens"] > 0, episode

    async with acme.mcp() as client:
        found = await client.call_tool(
            "search_memory_facts", {"query": "Where does Alice Moreau work?"}
        )
    assert found.structured_content is not None, found
    facts = found.structured_content["result"]["facts"]
    assert facts, found.structured_content
    assert any("Acme" in fact["fact"] for fact in facts), facts
    assert all(fact["episodes"] == [episode["uuid"]] for fact in facts), facts

    status = await acme.skill("get_status")
    assert "the local model qwen2.5-coder-1.5b-instruct-q4_k_m" in str(status)

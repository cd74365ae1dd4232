"""Helpers of the graph tests: a tenant's graph skills over MCP, the recorded LLM answers, the
queue's episodes and the graph with the knowledge engine."""

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.support.databases import new_database
from tests.support.hosted_chat import HostedChatDouble, Refused
from tests.support.live import LiveServer, live_server
from tests.support.mcp import keyed_client
from tests.support.outcomes import output
from tests.support.security import create_keys


@dataclass
class Tenant:
    """A tenant of its own for one test, and the ways it calls the server."""

    name: str
    server: LiveServer
    key: str

    def mcp(self, **options: Any) -> Client:
        return keyed_client(f"{self.server.url}/mcp", self.key, **options)

    async def send(self, message: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        async with httpx.AsyncClient(
            base_url=self.server.url, headers={"X-API-Key": self.key}, timeout=120
        ) as http:
            answer: dict[str, Any] = (await http.post("/", json=body)).json()
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task

    async def skill(self, skill: str, /, **arguments: Any) -> dict[str, Any]:
        """Call a skill over A2A with a DataPart; the final (or paused) task."""
        return await self.send(
            message([{"kind": "data", "data": {"skill": skill, "arguments": arguments}}])
        )

    async def result(self, skill: str, /, **arguments: Any) -> dict[str, Any]:
        """A skill's `result` (Graphiti's shapes wrap it so), which must have completed."""
        data = output(await self.skill(skill, **arguments))
        result: dict[str, Any] = data.get("result", data)
        return result

    async def triplet(self, source: str, edge: str, fact: str, target: str, **more: Any) -> str:
        """Add a fact; its uuid."""
        added = await self.result("add_triplet", **triplet(source, edge, fact, target), **more)
        (written,) = added["edges"]
        return str(written["uuid"])


def triplet(source: str, edge: str, fact: str, target: str) -> dict[str, str]:
    """add_triplet's arguments."""
    return {
        "source_node_name": source,
        "edge_name": edge,
        "fact": fact,
        "target_node_name": target,
    }


def message(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "parts": parts,
        **fields,
    }


RECORDED = Path(__file__).resolve().parents[1] / "data" / "graph" / "llm-responses.json"


def response_schema(body: dict[str, Any]) -> str:
    """The name of the JSON schema a chat request asks its answer in ("" if none)."""
    name: str = body.get("response_format", {}).get("json_schema", {}).get("name", "")
    return name


class RecordedChat(HostedChatDouble):
    """The hosted chat double with recorded answers, by response schema."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: dict[str, Any] = json.loads(RECORDED.read_text())
        self.asked: list[str] = []

    async def answer(self, body: dict[str, Any]) -> str:
        schema = response_schema(body)
        self.asked.append(schema)
        if schema not in self.recorded:
            raise Refused(f"nothing recorded for {schema!r}")
        return json.dumps(self.recorded[schema])


def queued_uuid(added: dict[str, Any]) -> str:
    """The episode uuid in add_memory's answer ("... queued ... (uuid <uuid>)")."""
    match = re.search(r"\(uuid ([^)]+)\)$", added["message"])
    assert match, added
    return match.group(1)


async def until_processed(tenant: Tenant, uuid: str, group_id: str) -> dict[str, Any]:
    """The episode once the queue is done with it (done or failed), as get_episodes shows it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = await tenant.result("get_episodes", group_ids=group_id, max_episodes=50)
        (episode,) = [e for e in found["episodes"] if e["uuid"] == uuid]
        if episode["status"] in ("done", "failed"):
            return episode
        await asyncio.sleep(0.05)
    raise AssertionError(f"episode {uuid} was not processed within a minute")


POISON = "POISON"  # an episode whose text holds this is refused by the LLM double


class GatedChat(RecordedChat):
    """RecordedChat (the hosted chat double) whose answers wait for an open gate, and which
    refuses, as a hosted API refuses a bad request, any prompt that holds `POISON`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.bodies: list[str] = []  # the user messages asked, in order

    async def answer(self, body: dict[str, Any]) -> str:
        self.bodies.append(" ".join(str(m.get("content", "")) for m in body["messages"]))
        await asyncio.to_thread(self.gate.wait)  # the gate is opened from the test's thread
        if POISON in self.bodies[-1]:
            raise Refused("the prompt was refused")
        return await super().answer(body)


async def until_asked(chat: GatedChat, text: str) -> None:
    """Wait until the LLM was asked about `text`: its extraction is under way."""
    for _ in range(1200):
        if any(text in body for body in chat.bodies):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the LLM was never asked about {text!r}")


def graph_server(database_url: str, data_dir: Path, chat_url: str) -> Any:
    return live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        llm_base_url=chat_url,
        llm_model="recorded-model",
        graph_ingest_max_attempts=2,
        graph_ingest_retry_seconds=0,
    )


async def new_tenant(server: LiveServer) -> Tenant:
    name = f"t{uuid.uuid4().hex[:10]}"
    keys = await create_keys(server.settings.database_url or "", name, key=["read", "write"])
    return Tenant(name, server, keys["key"])


async def add(tenant: Tenant, name: str, body: str, group_id: str) -> str:
    added = await tenant.result("add_memory", name=name, episode_body=body, group_id=group_id)
    assert added["message"].startswith(f"Episode '{name}' queued for processing in group")
    return queued_uuid(added)


async def statuses(tenant: Tenant, group_id: str) -> dict[str, str]:
    found = await tenant.result("get_episodes", group_ids=group_id, max_episodes=50)
    return {e["uuid"]: e["status"] for e in found["episodes"]}


async def until_status(tenant: Tenant, group_id: str, uuid: str, status: str) -> None:
    for _ in range(1200):
        if (await statuses(tenant, group_id)).get(uuid) == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"episode {uuid} never became {status}")


TEXT = "# Team news\n\nAlice joined Acme last spring as a rocket engineer."


QUERY = "Who builds rockets for Acme?"


async def knowledge_server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, chat: str, *, documents: bool
) -> AsyncIterator[LiveServer]:
    database_url = await new_database(postgres_dsn)
    await create_keys(database_url, "nobody", key=["read"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("graph-knowledge"),
        llm_base_url=chat,
        llm_model="recorded-model",
        graph_ingest_documents=documents,
    ) as live:
        yield live


async def episodes(tenant: Tenant) -> list[dict[str, Any]]:
    found = await tenant.result("get_episodes", group_ids=tenant.name, max_episodes=50)
    listed: list[dict[str, Any]] = found["episodes"]
    return listed


async def retrieve(tenant: Tenant) -> dict[str, Any]:
    # answer=False: the recorded LLM answers Graphiti's structured prompts only.
    return await tenant.result("hybrid_retrieve", query=QUERY, answer=False)


FACT = "rocket engineer"  # what TEXT says, and the recorded fact states
MENTIONS = "# Launch day\n\nAcme flew its first rocket; Alice watched it from the desert."


class StatingChat(RecordedChat):
    """RecordedChat (the hosted chat double) that answers the fact extraction with the
    recorded fact only when the episode being extracted says it, as a model would: any other
    episode yields the entities (Alice, Acme) and no fact."""

    async def answer(self, body: dict[str, Any]) -> str:
        schema = response_schema(body)
        prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
        current = prompt.partition("<CURRENT_MESSAGE>")[2].partition("</CURRENT_MESSAGE>")[0]
        if schema == "ExtractedEdges" and FACT not in current:
            self.asked.append(schema)
            return '{"edges": []}'
        return await super().answer(body)

"""The CLI's `agentic-rag peers add | list | remove`: the agent network's registry of peers.

Two ways, one answer (`AgentRecord`), as the REST routes give it:

- `LocalPeers`: the registry of the data directory (or DATABASE_URL), with the registrar a
  server uses (the card fetched through the SSRF guard, AGENTIC_RAG_PEERS_ALLOW_PRIVATE of
  this process); a server on the same database sees the peer at once.
- `RemotePeers`: the operators' REST routes of a running server (`/a2a/agents...`), with an
  API key; the server's own settings (its SSRF guard) decide.

A refusal says which of the two decided it: "in this process", or "the server at URL".
"""

import sys
from contextlib import AsyncExitStack
from typing import Protocol, TextIO
from urllib.parse import quote

import httpx

from agentic_rag.config import Settings
from agentic_rag.network.records import AgentList, AgentRecord, Registered, agent_record
from agentic_rag.network.registration import RegistrationError
from agentic_rag.network.service import Network


class PeerCommandError(RuntimeError):
    """The peer could not be registered, listed or removed: the message says why."""


class Peers(Protocol):
    async def add(self, card_url: str) -> AgentRecord: ...

    async def registered(self) -> list[AgentRecord]: ...

    async def remove(self, agent_id: str) -> None: ...

    async def aclose(self) -> None: ...


class LocalPeers:
    def __init__(self, settings: Settings, tenant: str) -> None:
        self._settings, self._tenant = settings, tenant
        self._stack = AsyncExitStack()

    async def start(self) -> "LocalPeers":
        from agentic_rag.storage.database import open_database

        try:
            pool = await self._stack.enter_async_context(open_database(self._settings))
            self._network = Network(self._settings, pool)
            self._network.start()
            self._stack.push_async_callback(self._network.stop)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def add(self, card_url: str) -> AgentRecord:
        try:
            peer = await self._network.registrar.from_card_url(self._tenant, card_url)
        except RegistrationError as exc:
            raise PeerCommandError(f"{exc} (in this process)") from None
        return agent_record(peer)

    async def registered(self) -> list[AgentRecord]:
        peers = await self._network.peers.find(self._tenant, healthy_only=False)
        return [agent_record(p) for p in peers]

    async def remove(self, agent_id: str) -> None:
        if not await self._network.peers.remove(self._tenant, agent_id):
            raise PeerCommandError(f"no peer {agent_id!r} is registered for this tenant")

    async def aclose(self) -> None:
        await self._stack.aclose()


class RemotePeers:
    def __init__(self, url: str, api_key: str | None) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        self._url = url.rstrip("/")
        # Registering fetches the peer's card: give the server the time its fetch may take.
        self._client = httpx.AsyncClient(base_url=self._url, headers=headers, timeout=60)

    async def add(self, card_url: str) -> AgentRecord:
        answer = await self._send("POST", "/a2a/agents/register", json={"card_url": card_url})
        return Registered.model_validate_json(answer.content).agent

    async def registered(self) -> list[AgentRecord]:
        answer = await self._send("GET", "/a2a/agents")
        return AgentList.model_validate_json(answer.content).agents

    async def remove(self, agent_id: str) -> None:
        await self._send("DELETE", f"/a2a/agents/{quote(agent_id, safe='')}")

    async def _send(self, method: str, path: str, json: object = None) -> httpx.Response:
        try:
            answer = await self._client.request(method, path, json=json)
        except httpx.TransportError as exc:
            raise PeerCommandError(f"cannot reach {self._url}: {exc}") from None
        if answer.is_success:
            return answer
        try:
            detail = answer.json().get("detail") or answer.text  # an RFC 7807 problem
        except ValueError:
            detail = answer.text
        raise PeerCommandError(f"the server at {self._url}: HTTP {answer.status_code}: {detail}")

    async def aclose(self) -> None:
        await self._client.aclose()


def describe(agent: AgentRecord) -> str:
    skills = ", ".join(c.name for c in agent.capabilities) or "no skills"
    return (
        f"{agent.agent_id}  {agent.health_status:<9} A2A {agent.protocol_version:<6} "
        f"{agent.agent_type} at {agent.endpoint_url}: {skills}"
    )


async def run(peers: Peers, action: str, target: str | None, *, out: TextIO = sys.stdout) -> int:
    """`peers add CARD_URL`, `peers list`, `peers remove ID`."""
    try:
        if action == "add":
            assert target is not None
            print(f"registered {describe(await peers.add(target))}", file=out)
        elif action == "remove":
            assert target is not None
            await peers.remove(target)
            print(f"removed {target}", file=out)
        else:
            agents = await peers.registered()
            if not agents:
                print("no peers yet: agentic-rag peers add CARD_URL registers one", file=out)
            for agent in agents:
                print(describe(agent), file=out)
    except PeerCommandError as exc:
        print(f"agentic-rag peers {action}: {exc}", file=sys.stderr)
        return 1
    return 0

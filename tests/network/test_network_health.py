"""Peer health: heartbeats keep a peer healthy and their absence makes it unhealthy within the
timeout; peers that send none are probed; with several workers each change is judged (and
counted) once. Intervals are short, set by the settings of the test's servers.
"""

import re
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import httpx

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.network.cards import Capability, CardFetcher, describe_declaration
from agentic_rag.network.credentials import PeerCredentials
from agentic_rag.network.health import HealthMonitor
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.skills.help import default_registry
from tests.support.live import serve_in_thread
from tests.support.network import conforms, declaration, network_server

FAST = {
    "peers_allow_private": ["127.0.0.1"],
    "peer_heartbeat_interval_seconds": 0.2,
    "peer_heartbeat_timeout_seconds": 1.0,
}


def until(condition: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    """Wait for `condition` (a bound for a hung test, not a measurement)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def health(client: httpx.Client, agent_id: str) -> str:
    status: str = conforms(client.get(f"/a2a/agents/{agent_id}"), "AgentRecord")["health_status"]
    return status


def changes(url: str, status: str) -> float:
    """How many health changes to `status` the server's /metrics counted."""
    text = httpx.get(f"{url}/metrics").text
    found = re.search(rf'agentic_rag_peer_health_changes_total{{status="{status}"}} (\S+)', text)
    return float(found.group(1)) if found else 0.0


def test_a_peer_whose_heartbeats_stop_becomes_unhealthy(database_url: str, data_dir: Path) -> None:
    with (
        network_server(database_url, data_dir, **FAST) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        body = declaration("http://127.0.0.1:9/", "summarize")
        agent_id = client.post("/a2a/agents/register", json=body).json()["agent_id"]
        # Heartbeats for longer than the timeout keep it healthy.
        beats_until = time.monotonic() + 2.0
        while time.monotonic() < beats_until:
            assert client.post(f"/a2a/agents/{agent_id}/heartbeat").status_code == 200
            assert health(client, agent_id) == "healthy"
            time.sleep(0.2)
        assert changes(us.url, "unhealthy") == 0

        until(lambda: health(client, agent_id) == "unhealthy", "marked unhealthy")
        assert changes(us.url, "unhealthy") == 1
        assert conforms(client.get("/a2a/agents?healthy_only=true"), "AgentList")["agents"] == []
        assert (
            conforms(client.get("/a2a/capabilities?capability=summarize"), "CapabilityList")[
                "capabilities"
            ]
            == []
        )

        # A heartbeat brings it back at once.
        beat = client.post(f"/a2a/agents/{agent_id}/heartbeat").json()
        assert beat["health_status"] == "healthy"
        assert changes(us.url, "healthy") == 1


def test_a_peer_without_heartbeats_is_probed(database_url: str, data_dir: Path) -> None:
    peer_settings = Settings(
        host="127.0.0.1", data_dir=data_dir / "peer", database_url=database_url
    )
    peer_app = build_app(peer_settings, default_registry())
    with (
        network_server(database_url, data_dir / "us", **FAST) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        with serve_in_thread(peer_app, lifespan="on") as peer_url:
            card = httpx.get(f"{peer_url}/.well-known/agent-card.json").json()
            # Served on a port of the test's choosing: the card's addresses say where.
            configured = card["url"].rstrip("/")
            card["url"] = f"{peer_url}/"
            for interface in card["supportedInterfaces"]:
                interface["url"] = interface["url"].replace(configured, peer_url)
            registered = client.post("/a2a/agents/register", json={"card": card}).json()
            agent_id = registered["agent_id"]
            assert registered["agent"]["health_status"] == "unknown"  # given inline: not seen
            until(lambda: health(client, agent_id) == "healthy", "a probe reaches the peer")
        # The peer is gone: probes fail, and it is unhealthy once silent for the timeout.
        until(lambda: health(client, agent_id) == "unhealthy", "the dead peer marked unhealthy")
        agent = conforms(client.get(f"/a2a/agents/{agent_id}"), "AgentRecord")
        assert agent["last_heartbeat"] is None  # probed, never a heartbeat


def test_health_is_judged_once_across_workers(database_url: str, data_dir: Path) -> None:
    with (
        network_server(database_url, data_dir / "one", **FAST) as one,
        network_server(database_url, data_dir / "two", **FAST) as two,
        httpx.Client(base_url=one.url, timeout=30) as client,
    ):
        agent_ids = [
            client.post(
                "/a2a/agents/register", json=declaration(f"http://127.0.0.1:{port}/", "summarize")
            ).json()["agent_id"]
            for port in (9, 10, 11)
        ]
        for agent_id in agent_ids:
            until(lambda a=agent_id: health(client, a) == "unhealthy", "marked unhealthy")
        time.sleep(0.5)  # both monitors looked again meanwhile
        assert changes(one.url, "unhealthy") + changes(two.url, "unhealthy") == 3


async def test_the_monitor_wakes_at_the_soonest_heartbeat_deadline(pool: asyncpg.Pool) -> None:
    """Not on a fixed period: a silent peer is judged when its timeout runs out, so detection
    takes the timeout plus a few milliseconds of scheduling."""
    registry, cards = PeerRegistry(pool), CardFetcher(SSRFGuard([]), PeerCredentials({}))
    monitor = HealthMonitor(registry, cards, interval=300.0, timeout=60.0)
    try:
        assert await monitor.next_sleep() == 60.0  # no peers: the longest sleep
        peer = await registry.register(
            "acme",
            describe_declaration(
                "summarizer",
                "http://127.0.0.1:9/",
                [Capability(name="summarize")],
            ),
            health="healthy",
            heartbeat=True,
        )
        # Its heartbeat just now: the deadline is the timeout from now, not a tenth of it.
        assert 30.0 < await monitor.next_sleep() <= 60.0
        async with pool.acquire() as conn:  # as if its last heartbeat was 55 s ago
            await conn.execute(
                "UPDATE peers SET last_seen = now() - interval '55 s' WHERE id = $1", peer.id
            )
        assert 4.0 < await monitor.next_sleep() <= 5.005
        await monitor.check()
        assert (await registry.get("acme", peer.id)) == peer  # not yet silent for 60 s
        async with pool.acquire() as conn:
            await conn.execute(
                "UPDATE peers SET last_seen = now() - interval '61 s' WHERE id = $1", peer.id
            )
        await monitor.check()
        marked = await registry.get("acme", peer.id)
        assert marked is not None and marked.health == "unhealthy"
        assert await monitor.next_sleep() == 60.0  # nothing left to watch
    finally:
        await cards.aclose()

"""The registry side of the agent network, built from settings and started with the engine."""

from contextlib import AsyncExitStack
from dataclasses import dataclass

import asyncpg

from agentic_rag.config import Settings
from agentic_rag.network.cards import CardFetcher
from agentic_rag.network.credentials import PeerCredentials
from agentic_rag.network.health import HealthMonitor
from agentic_rag.network.registration import Registrar
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.network.sessions import SessionStore
from agentic_rag.security.ssrf import SSRFGuard


@dataclass(frozen=True)
class Network:
    peers: PeerRegistry
    registrar: Registrar
    health: HealthMonitor
    sessions: SessionStore
    guard: SSRFGuard  # every URL of a peer passes it (AGENTIC_RAG_PEERS_ALLOW_PRIVATE)
    credentials: PeerCredentials  # sent to peers' origins (AGENTIC_RAG_PEER_CREDENTIALS)


async def open_network(settings: Settings, pool: asyncpg.Pool, stack: AsyncExitStack) -> Network:
    """The registry, the health monitor (running until `stack` closes) and the sessions."""
    guard = SSRFGuard(settings.peers_allow_private)
    credentials = PeerCredentials(settings.peer_credentials)
    cards = CardFetcher(guard, credentials)
    stack.push_async_callback(cards.aclose)
    peers = PeerRegistry(pool)
    health = HealthMonitor(
        peers,
        cards,
        interval=settings.peer_heartbeat_interval_seconds,
        timeout=settings.peer_heartbeat_timeout_seconds,
    )
    health.start()
    stack.push_async_callback(health.stop)
    sessions = SessionStore(
        pool,
        idle_seconds=settings.session_idle_seconds,
        limit=settings.session_limit if settings.session_limit_enabled else None,
    )
    return Network(peers, Registrar(peers, guard, cards), health, sessions, guard, credentials)

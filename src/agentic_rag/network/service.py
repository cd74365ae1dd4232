"""The registry side of the agent network, built from settings and started with the engine."""

from agentic_rag.config import Settings
from agentic_rag.network.cards import CardFetcher
from agentic_rag.network.credentials import PeerCredentials
from agentic_rag.network.health import HealthMonitor
from agentic_rag.network.registration import Registrar
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.network.sessions import SessionStore
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.storage.pool import Pool


class Network:
    """The registry side of the agent network: peers, registration, health, sessions."""

    def __init__(self, settings: Settings, pool: Pool) -> None:
        self.guard = SSRFGuard(settings.peers_allow_private)  # every URL of a peer passes it
        # Sent to peers' origins by the tenant they belong to, and by no other.
        self.credentials = PeerCredentials(settings.peer_credentials)
        self._cards = CardFetcher(self.guard, self.credentials)
        self.peers = PeerRegistry(pool)
        self.registrar = Registrar(self.peers, self.guard, self._cards)
        self.health = HealthMonitor(
            self.peers,
            self._cards,
            interval=settings.peer_heartbeat_interval_seconds,
            timeout=settings.peer_heartbeat_timeout_seconds,
        )
        self.sessions = SessionStore(
            pool,
            idle_seconds=settings.session_idle_seconds,
            limit=settings.session_limit if settings.session_limit_enabled else None,
        )

    def start(self) -> None:
        """Start watching the peers' health."""
        self.health.start()

    async def stop(self) -> None:
        await self.health.stop()
        await self._cards.aclose()

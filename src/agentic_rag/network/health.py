"""The health of peers: heartbeats, the monitor that marks silent peers unhealthy, and probes of
the peers that send no heartbeats.

A peer is healthy while it was heard from (a heartbeat, or a successful probe) within the
timeout. The monitor wakes at the soonest deadline (last heard from + timeout) or due probe, so
a silent peer is judged when its timeout runs out, not up to a period later. Every worker runs
the monitor, but each health change is one UPDATE that names the
change it makes, and each due probe is claimed by one worker (`PeerRegistry.claim_probes`): so
with several workers a change is judged, logged and counted once, not once per worker.
"""

import asyncio
import logging

from agentic_rag.network.cards import CARD_LIMITS, CardFetcher
from agentic_rag.network.peers import Peer
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.observability.metrics import record_peer_health

log = logging.getLogger(__name__)

# The monitor wakes when the soonest heartbeat deadline (or probe) is due, this much after it
# (the deadline is `last_seen < now() - timeout`, strictly), and never sooner than this apart.
WAKE_SLACK = 0.005
MIN_SLEEP = 0.01
# A probe that keeps failing is retried ever later, up to this many heartbeat intervals apart.
MAX_BACKOFF_INTERVALS = 8


class HealthMonitor:
    def __init__(
        self, registry: PeerRegistry, cards: CardFetcher, *, interval: float, timeout: float
    ) -> None:
        self._registry, self._cards = registry, cards
        self.interval, self.timeout = interval, timeout
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop = asyncio.create_task(self._run(), name="peer health monitor")

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None

    async def heartbeat(self, tenant: str, peer_id: str) -> Peer | None:
        """Record a peer's heartbeat; None if the tenant has no such peer."""
        beat = await self._registry.heartbeat(tenant, peer_id)
        if beat is None:
            return None
        peer, before = beat
        if before != "healthy":
            _changed(peer, "a heartbeat arrived")
        return peer

    async def check(self) -> None:
        """One round: mark the silent peers unhealthy, then probe those that are due."""
        for peer in await self._registry.mark_silent(self.timeout):
            _changed(peer, f"not heard from for {self.timeout:g} s")
        # Claimed for as long as a probe can take, so no other worker probes them meanwhile.
        due = await self._registry.claim_probes(CARD_LIMITS.total_seconds + self.interval)
        await asyncio.gather(*(self._probe(peer) for peer in due))

    async def _probe(self, peer: Peer) -> None:
        url = peer.card_url or peer.endpoint
        failure = await self._cards.alive(peer.tenant, url)
        if failure is not None:
            log.info("probe of peer %s (%s) failed: %s", peer.id, peer.name, failure)
        changed = await self._registry.probed(
            peer,
            alive=failure is None,
            interval=self.interval,
            max_backoff=MAX_BACKOFF_INTERVALS * self.interval,
        )
        if changed is not None:
            _changed(changed, "a probe succeeded")

    async def next_sleep(self) -> float:
        """How long to sleep before the next round: until the soonest deadline or due probe.

        At most the interval (and the timeout): a peer registered or heard from meanwhile, on
        any worker, has its deadline a full timeout later, so it is not looked at too late."""
        longest = min(self.interval, self.timeout)
        due = await self._registry.next_due(self.timeout)
        if due is None:
            return longest
        return min(max(due + WAKE_SLACK, MIN_SLEEP), longest)

    async def _run(self) -> None:
        outage = RepeatedFailure(log, "the peer health check")
        while True:
            pause = min(self.interval, self.timeout)
            try:
                await self.check()
                pause = await self.next_sleep()
                outage.succeeded()
            except Exception:  # the database may be down for a while: try again next time
                outage.failed()
            await asyncio.sleep(pause)


def _changed(peer: Peer, why: str) -> None:
    level = logging.INFO if peer.health == "healthy" else logging.WARNING
    log.log(
        level,
        "peer %s (%s, tenant %s) is %s: %s",
        peer.id,
        peer.name,
        peer.tenant,
        peer.health,
        why,
    )
    record_peer_health(peer.health)

"""Registering a peer: by its Agent Card's URL, by a card given inline, or by the operators'
REST capability declaration; each is checked, then stored through `PeerRegistry`.

Every URL of a peer (the card's and the endpoint) must pass the SSRF guard: a peer on a private
address is registered only if `AGENTIC_RAG_PEERS_ALLOW_PRIVATE` names it.
"""

import socket
from typing import Any, Literal

from agentic_rag.network.cards import (
    Capability,
    CardError,
    CardFetcher,
    PeerDescription,
    describe_card,
    describe_declaration,
)
from agentic_rag.network.peers import Peer
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.security.fetch import FetchError
from agentic_rag.security.ssrf import SSRFGuard, UnsafeURLError

ALLOW_SETTING = "AGENTIC_RAG_PEERS_ALLOW_PRIVATE"


RegistrationFailure = Literal["invalid-card", "card-unreachable", "unsafe-url"]


class RegistrationError(ValueError):
    """A peer that cannot be registered; the message says why. `field` names the request field
    at fault; `kind` what went wrong: the card or declaration is invalid, the card could not be
    fetched, or a URL is refused by the SSRF guard (or does not resolve)."""

    def __init__(self, message: str, *, field: str, kind: RegistrationFailure) -> None:
        super().__init__(message)
        self.field, self.kind = field, kind


class Registrar:
    def __init__(self, registry: PeerRegistry, guard: SSRFGuard, cards: CardFetcher) -> None:
        self._registry, self._guard, self._cards = registry, guard, cards

    async def from_card_url(self, tenant: str, url: str) -> Peer:
        """Fetch the card at `url` (a card's URL, or an agent's base URL), then register it."""
        await self._check_url(url, field="card_url")
        try:
            card, card_url = await self._cards.fetch(tenant, url)
            description = describe_card(card, card_url)
        except FetchError as exc:
            raise RegistrationError(
                f"cannot fetch the Agent Card at {url}: {exc}",
                field="card_url",
                kind="card-unreachable",
            ) from None
        except CardError as exc:
            raise RegistrationError(str(exc), field="card_url", kind="invalid-card") from None
        await self._check_url(description.endpoint, field="card_url")
        return await self._registry.register(tenant, description, health="healthy")

    async def from_card(self, tenant: str, card: dict[str, Any]) -> Peer:
        """Register a card given inline; a probe of its endpoint tells its health."""
        try:
            description = describe_card(card)
        except CardError as exc:
            raise RegistrationError(str(exc), field="card", kind="invalid-card") from None
        await self._check_url(description.endpoint, field="card")
        return await self._registry.register(tenant, description, health="unknown")

    async def from_declaration(
        self, tenant: str, agent_type: str, endpoint_url: str, capabilities: list[Capability]
    ) -> Peer:
        """The seed's registration: the agent registers itself, which counts as its first
        heartbeat; from then on its heartbeats keep it healthy."""
        try:
            description: PeerDescription = describe_declaration(
                agent_type, endpoint_url, capabilities
            )
        except CardError as exc:
            raise RegistrationError(str(exc), field="capabilities", kind="invalid-card") from None
        await self._check_url(endpoint_url, field="endpoint_url")
        return await self._registry.register(tenant, description, health="healthy", heartbeat=True)

    async def _check_url(self, url: str, *, field: str) -> None:
        try:
            await self._guard.resolve(url)
        except UnsafeURLError as exc:
            raise RegistrationError(
                f"{exc}{exc.hint(ALLOW_SETTING)}",
                field=field,
                kind="unsafe-url",
            ) from None
        except OSError as exc:  # socket.gaierror: the name does not resolve
            reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
            raise RegistrationError(
                f"cannot resolve the host of {url}: {reason}", field=field, kind="unsafe-url"
            ) from None

"""The records of the agent network: a peer and the skills it offers.

A peer registered by an Agent Card (0.2.x, 0.3 or 1.0), an inline card or the operators' REST
capability declaration is normalised into one `Peer`; everything else reads only this shape.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

HealthStatus = Literal["healthy", "unhealthy", "unknown"]


@dataclass(frozen=True, slots=True)
class PeerSkill:
    id: str  # the card's skill id, or the REST capability name
    name: str
    description: str
    tags: tuple[str, ...] = ()
    input_schema: dict[str, Any] | None = None  # REST parameters_schema, or a card extension
    output_schema: dict[str, Any] | None = None  # REST returns_schema


@dataclass(frozen=True, slots=True)
class Peer:
    id: str  # our id for the peer (the REST route's agent_id)
    tenant: str
    name: str
    endpoint: str  # the URL JSON-RPC requests are POSTed to
    protocol_version: str  # as the card says: "0.2.1", "0.2.5", "0.3.0", "1.0", ...
    card: dict[str, Any] | None  # the card as fetched or given (None for REST declarations)
    card_url: str | None
    skills: tuple[PeerSkill, ...]
    security: tuple[dict[str, Any], ...]  # the card's security requirements, as given
    health: HealthStatus
    last_heartbeat: datetime | None
    registered_at: datetime

    def offers(self, capability: str) -> bool:
        """Whether a skill of this peer has `capability` as its id, its name or one of its tags."""
        return any(
            capability == skill.id or capability == skill.name or capability in skill.tags
            for skill in self.skills
        )

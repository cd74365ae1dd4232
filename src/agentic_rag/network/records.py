"""The documents of the agent network's REST routes and discovery skills, and how peers and
sessions become them (spec/network-openapi.json is generated from these models)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_rag.network.cards import Capability
from agentic_rag.network.peers import HealthStatus, Peer, PeerSkill
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.network.sessions import Session
from agentic_rag.skills import SkillRegistry

SELF = "self"  # the agent_id under which this agent's own skills are listed


class RegisterRequest(BaseModel):
    """A peer by the seed's declaration (`agent_type`, `endpoint_url`, `capabilities`), by its
    Agent Card's URL (`card_url`: the card, or the agent's base URL), or by a card (`card`)."""

    model_config = ConfigDict(extra="forbid")

    agent_type: str | None = Field(None, min_length=1, description="The agent's kind (seed)")
    endpoint_url: str | None = Field(None, description="Its A2A JSON-RPC endpoint (seed)")
    capabilities: list[Capability] | None = Field(None, description="What it offers (seed)")
    card_url: str | None = Field(None, description="Its Agent Card, or its base URL")
    card: dict[str, Any] | None = Field(None, description="Its Agent Card (0.2.x, 0.3 or 1.0)")

    @model_validator(mode="after")
    def _one_way(self) -> "RegisterRequest":
        declared = [self.agent_type, self.endpoint_url, self.capabilities]
        ways = [
            any(v is not None for v in declared),
            self.card_url is not None,
            self.card is not None,
        ]
        if sum(ways) != 1:
            raise ValueError(
                "give exactly one of: agent_type, endpoint_url and capabilities; card_url; card"
            )
        if ways[0] and any(v is None for v in declared):
            raise ValueError("a declaration needs agent_type, endpoint_url and capabilities")
        return self


class CapabilityRecord(BaseModel):
    name: str
    description: str
    tags: list[str]
    parameters_schema: dict[str, Any] | None
    returns_schema: dict[str, Any] | None


class AgentRecord(BaseModel):
    agent_id: str
    agent_type: str = Field(description="The agent's name (its card's), or its declared type")
    endpoint_url: str
    protocol_version: str
    card_url: str | None
    capabilities: list[CapabilityRecord]
    security: list[dict[str, list[str]]] = Field(description="The card's security requirements")
    health_status: HealthStatus = Field(description="unknown: not probed yet")
    last_heartbeat: datetime | None
    registered_at: datetime


class Registered(BaseModel):
    agent_id: str
    registered_at: datetime
    agent: AgentRecord
    heartbeat_interval_seconds: float = Field(description="How often to send heartbeats")


class Heartbeat(BaseModel):
    agent_id: str
    health_status: HealthStatus
    last_heartbeat: datetime
    heartbeat_interval_seconds: float
    heartbeat_timeout_seconds: float


class AgentList(BaseModel):
    agents: list[AgentRecord]


class OfferedCapability(CapabilityRecord):
    agent_id: str = Field(description=f"The peer's id, or {SELF!r} for this agent")
    agent_type: str


class CapabilityList(BaseModel):
    capabilities: list[OfferedCapability]


class DelegationAccepted(BaseModel):
    task_id: str = Field(description="The local task that follows the delegation")


class DelegatedTask(BaseModel):
    task_id: str
    status: str = Field(description="The task's state: completed, failed, canceled, ...")
    task: dict[str, Any] = Field(description="The A2A Task, its artifacts included")


class ParticipantRecord(BaseModel):
    kind: Literal["caller", "peer"]
    id: str
    first_seen: datetime
    last_seen: datetime


class TaskRecord(BaseModel):
    id: str
    state: str


class DelegationRecord(BaseModel):
    task_id: str
    peer_id: str | None


class SessionRecord(BaseModel):
    context_id: str
    created_at: datetime
    last_activity: datetime
    expires_at: datetime
    participants: list[ParticipantRecord] | None = None
    tasks: list[TaskRecord] | None = None
    delegations: list[DelegationRecord] | None = None


class SessionList(BaseModel):
    sessions: list[SessionRecord]


def capability_record(skill: PeerSkill) -> CapabilityRecord:
    return CapabilityRecord(
        name=skill.id,
        description=skill.description,
        tags=list(skill.tags),
        parameters_schema=skill.input_schema,
        returns_schema=skill.output_schema,
    )


def agent_record(peer: Peer) -> AgentRecord:
    return AgentRecord(
        agent_id=peer.id,
        agent_type=peer.name,
        endpoint_url=peer.endpoint,
        protocol_version=peer.protocol_version,
        card_url=peer.card_url,
        capabilities=[capability_record(s) for s in peer.skills],
        security=list(peer.security),
        health_status=peer.health,
        last_heartbeat=peer.last_heartbeat,
        registered_at=peer.registered_at,
    )


def own_capabilities(registry: SkillRegistry) -> list[CapabilityRecord]:
    """This agent's skills as capabilities (their input and output schemas included)."""
    return [
        CapabilityRecord(
            name=skill.name,
            description=skill.description,
            tags=list(skill.tags),
            parameters_schema=skill.input_model.model_json_schema(),
            returns_schema=skill.output_model.model_json_schema(),
        )
        for skill in registry
    ]


def session_record(session: Session, *, whole: bool = False) -> SessionRecord:
    """A session; `whole`: with its participants, tasks and delegations."""
    record = SessionRecord(
        context_id=session.context_id,
        created_at=session.created_at,
        last_activity=session.last_activity,
        expires_at=session.expires_at,
    )
    if whole:
        record.participants = [
            ParticipantRecord(kind=p.kind, id=p.id, first_seen=p.first_seen, last_seen=p.last_seen)
            for p in session.participants
        ]
        record.tasks = [TaskRecord(id=t.id, state=t.state) for t in session.tasks]
        record.delegations = [
            DelegationRecord(task_id=d.task_id, peer_id=d.peer_id) for d in session.delegations
        ]
    return record


async def discover(
    peers: PeerRegistry,
    own: SkillRegistry,
    agent_name: str,
    tenant: str,
    capability: str | None,
) -> CapabilityList:
    """This agent's and every healthy peer's capabilities, or only those matching `capability`
    (a skill's id, name or tag)."""
    offered = [
        OfferedCapability(agent_id=SELF, agent_type=agent_name, **c.model_dump())
        for c in own_capabilities(own)
        if capability is None or capability == c.name or capability in c.tags
    ]
    for peer in await peers.find(tenant, capability):
        offered += [
            OfferedCapability(
                agent_id=peer.id, agent_type=peer.name, **capability_record(s).model_dump()
            )
            for s in peer.skills
            if capability is None or capability in (s.id, s.name, *s.tags)
        ]
    return CapabilityList(capabilities=offered)

"""The registry's skills: `list_agents`, `find_capability`, `register_agent` and
`remove_agent`, so that A2A and MCP callers can discover and grow the network as operators do
with the REST routes under /a2a/agents and /a2a/capabilities."""

from typing import Any

from pydantic import BaseModel, Field, model_validator

from agentic_rag.network.records import (
    AgentList,
    AgentRecord,
    CapabilityList,
    agent_record,
    discover,
)
from agentic_rag.network.registration import RegistrationError
from agentic_rag.network.service import Network
from agentic_rag.skills import SkillContext, SkillError, SkillRegistry


class ListAgentsInput(BaseModel):
    capability: str | None = Field(
        None, description="Only peers offering this skill (its id, name or tag)"
    )
    healthy_only: bool = Field(True, description="Only peers that are healthy now")


class FindCapabilityInput(BaseModel):
    capability: str = Field(description="A skill's id, name or tag")


class RegisterAgentInput(BaseModel):
    card_url: str | None = Field(
        None, description="The peer's Agent Card URL, or its base URL (the card is fetched)"
    )
    card: dict[str, Any] | None = Field(None, description="The peer's Agent Card, inline")

    @model_validator(mode="after")
    def _one_source(self) -> "RegisterAgentInput":
        if (self.card_url is None) == (self.card is None):
            raise ValueError("give card_url or card (one of them)")
        return self


class RemoveAgentInput(BaseModel):
    agent_id: str = Field(description="The peer's id (list_agents shows it)")


class RemovedAgent(BaseModel):
    agent_id: str
    removed: bool = Field(description="Always true: an unknown id is an error")


def _render_agents(output: AgentList) -> str:
    if not output.agents:
        return "No peer agent matches."
    return "\n".join(
        f"- {a.agent_type} ({a.agent_id}, {a.health_status}, A2A {a.protocol_version}) at "
        f"{a.endpoint_url}: {', '.join(c.name for c in a.capabilities)}"
        for a in output.agents
    )


def _render_capabilities(output: CapabilityList) -> str:
    if not output.capabilities:
        return "Neither this agent nor a healthy peer offers it."
    return "\n".join(
        f"- {c.name} on {c.agent_type} ({c.agent_id}): {c.description}" for c in output.capabilities
    )


def add_network_skills(registry: SkillRegistry, network: Network, agent_name: str) -> None:
    """Register the network's skills, which call `network`."""

    @registry.skill(
        description="The peer agents this agent knows, with their skills (input and output "
        "schemas where known), protocol version and health; filterable by capability.",
        summary="The peer agents known here, with their skills and health.",
        group="network",
        tags=["network", "discovery"],
        text_argument="capability",
        render=_render_agents,
    )
    async def list_agents(ctx: SkillContext, args: ListAgentsInput) -> AgentList:
        found = await network.peers.find(
            ctx.tenant, args.capability, healthy_only=args.healthy_only
        )
        return AgentList(agents=[agent_record(p) for p in found])

    @registry.skill(
        description="Who offers a capability: this agent (agent_id 'self') and the healthy "
        "peers whose skill has it as id, name or tag.",
        summary="Who offers a capability: this agent or healthy peers.",
        group="network",
        tags=["network", "discovery"],
        text_argument="capability",
        render=_render_capabilities,
    )
    async def find_capability(ctx: SkillContext, args: FindCapabilityInput) -> CapabilityList:
        return await discover(network.peers, registry, agent_name, ctx.tenant, args.capability)

    @registry.skill(
        description="Register a peer agent by its Agent Card (fetched from card_url through the "
        "SSRF guard, or given inline); registering the same endpoint again updates it.",
        summary="Register a peer agent by its Agent Card (a URL, or inline).",
        group="admin",
        tags=["network"],
        text_argument="card_url",
    )
    async def register_agent(ctx: SkillContext, args: RegisterAgentInput) -> AgentRecord:
        registrar = network.registrar
        try:
            if args.card_url is not None:
                peer = await registrar.from_card_url(ctx.tenant, args.card_url)
            else:
                assert args.card is not None
                peer = await registrar.from_card(ctx.tenant, args.card)
        except RegistrationError as exc:
            raise SkillError(str(exc)) from None
        return agent_record(peer)

    @registry.skill(
        description="Remove a peer agent from this tenant's registry.",
        group="admin",
        tags=["network"],
        text_argument="agent_id",
    )
    async def remove_agent(ctx: SkillContext, args: RemoveAgentInput) -> RemovedAgent:
        if not await network.peers.remove(ctx.tenant, args.agent_id):
            raise SkillError(f"no peer agent {args.agent_id!r} here")
        return RemovedAgent(agent_id=args.agent_id, removed=True)

"""The registry's skills: `list_agents` and `find_capability`, so that A2A and MCP callers can
discover the network as operators do with `GET /a2a/agents` and `GET /a2a/capabilities`."""

from collections.abc import Callable

from pydantic import BaseModel, Field

from agentic_rag.network.records import AgentList, CapabilityList, agent_record, discover
from agentic_rag.network.registry import PeerRegistry
from agentic_rag.skills import SkillContext, SkillRegistry

PeersProvider = Callable[[], PeerRegistry]


class ListAgentsInput(BaseModel):
    capability: str | None = Field(
        None, description="Only peers offering this skill (its id, name or tag)"
    )
    healthy_only: bool = Field(True, description="Only peers that are healthy now")


class FindCapabilityInput(BaseModel):
    capability: str = Field(description="A skill's id, name or tag")


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


def add_network_skills(registry: SkillRegistry, peers: PeersProvider, agent_name: str) -> None:
    """Register the discovery skills; `peers()` gives the running registry."""

    @registry.skill(
        description="The peer agents this agent knows, with their skills (input and output "
        "schemas where known), protocol version and health; filterable by capability.",
        tags=["network", "discovery"],
        text_argument="capability",
        render=_render_agents,
    )
    async def list_agents(ctx: SkillContext, args: ListAgentsInput) -> AgentList:
        found = await peers().find(ctx.tenant, args.capability, healthy_only=args.healthy_only)
        return AgentList(agents=[agent_record(p) for p in found])

    @registry.skill(
        description="Who offers a capability: this agent (agent_id 'self') and the healthy "
        "peers whose skill has it as id, name or tag.",
        tags=["network", "discovery"],
        text_argument="capability",
        render=_render_capabilities,
    )
    async def find_capability(ctx: SkillContext, args: FindCapabilityInput) -> CapabilityList:
        return await discover(peers(), registry, agent_name, ctx.tenant, args.capability)

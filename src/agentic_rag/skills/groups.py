"""Groups of tools: which skills a deployment offers over MCP, and which a credential may call.

A skill belongs to one group (`Skill.group`) or to none (`help`: in every selection). The
deployment names the groups it offers (AGENTIC_RAG_MCP_TOOL_GROUPS; none named: every group
but the opt-in ones); an API key may name groups too, which narrows that to their overlap. An
opt-in group (Graphiti's older tool names) is offered only when named: by the deployment, or,
where the deployment names none, by the key. docs/skills.md lists the groups and their skills.
"""

from collections.abc import Collection
from dataclasses import dataclass

from agentic_rag.config import ToolGroup
from agentic_rag.skills.registry import Skill

OPT_IN: frozenset[ToolGroup] = frozenset({"graphiti-compat"})

GROUP_SUMMARIES: dict[ToolGroup, str] = {
    "knowledge": "search the knowledge base, explain a search, read its catalogue",
    "ingest": "add URLs, PDFs, YouTube transcripts and text to the knowledge base",
    "graph": "the knowledge graph's memory: add and search episodes, entities and facts",
    "network": "peer agents: find them, delegate to them, orchestrate plans",
    "admin": "delete documents, sources, graph data; register and remove peers",
    "graphiti-compat": "Graphiti's older tool names (add_episode, search_facts); opt-in",
    "upstream": "tools of the configured upstream MCP servers (AGENTIC_RAG_UPSTREAM_MCP)",
}


def selects(selected: Collection[str] | None, skill: Skill) -> bool:
    """Whether a credential that selects `selected` groups (None: no selection) may call
    `skill`: the rule on every protocol (over A2A, where the MCP setting has no say, alone)."""
    return selected is None or skill.group is None or skill.group in selected


def refusal(selected: Collection[str], skill: Skill) -> str:
    """Why a credential that selects `selected` groups may not call `skill`."""
    return (
        f"skill {skill.name!r} is in the group {skill.group!r}, which this credential "
        f"does not select (its groups: {', '.join(sorted(selected)) or 'none'})"
    )


@dataclass(frozen=True)
class ToolGroups:
    """The groups a deployment offers: `named`, or (empty) every group but the opt-in ones."""

    named: frozenset[ToolGroup] = frozenset()

    @classmethod
    def of(cls, names: Collection[ToolGroup]) -> "ToolGroups":
        return cls(frozenset(names))

    def allows(self, skill: Skill, selected: Collection[str] | None) -> bool:
        """Whether a caller whose credential selects `selected` groups (None: no selection)
        sees and may call `skill` over MCP."""
        group = skill.group
        if group is None:
            return True
        chosen = selects(selected, skill)
        if self.named:
            return group in self.named and chosen
        if group in OPT_IN:
            return selected is not None and group in selected
        return chosen

    def refusal(self, skill: Skill, selected: Collection[str] | None) -> str:
        """Why `skill` is not the caller's to call (when `allows` is false), in words a model
        and a person can act on."""
        if selected is not None and skill.group not in selected:
            return (
                f"tool {skill.name!r} is in the group {skill.group!r}, which this credential "
                f"does not select (its groups: {', '.join(sorted(selected)) or 'none'})"
            )
        return (
            f"tool {skill.name!r} is in the group {skill.group!r}, which this server does not "
            "offer (AGENTIC_RAG_MCP_TOOL_GROUPS)"
        )


# No group named: every group but the opt-in ones (the setting's default).
DEFAULT_GROUPS = ToolGroups()

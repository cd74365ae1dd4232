"""Graphiti's nodes, edges, episodes and communities as the graph skills' results
(results.py), shaped as Graphiti's own MCP server gives them; and an episode's state in our
queue (queue.py) as the fields get_episodes adds to them.
"""

from datetime import datetime
from typing import Any

from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodicNode

from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.queue import EpisodeRecord
from agentic_rag.graph.results import CommunityResult, EdgeResult, NodeResult


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def node_result(node: EntityNode, ns: Namespace, origin: dict[str, Any]) -> NodeResult:
    """A node as Graphiti's server gives it, its provenance (provenance.py) in `attributes`:
    the one open field of Graphiti's NodeResult."""
    attributes = {k: v for k, v in node.attributes.items() if k != "name_embedding"}
    attributes["provenance"] = origin
    return NodeResult(
        uuid=node.uuid,
        name=node.name,
        # Every entity is stored with the label Entity; a node not read back yet lacks it.
        labels=["Entity", *(label for label in node.labels if label != "Entity")],
        created_at=_iso(node.created_at),
        summary=node.summary,
        group_id=ns.name,
        attributes=attributes,
    )


def edge_result(edge: EntityEdge, ns: Namespace) -> EdgeResult:
    return EdgeResult(
        uuid=edge.uuid,
        name=edge.name,
        fact=edge.fact,
        source_node_uuid=edge.source_node_uuid,
        target_node_uuid=edge.target_node_uuid,
        group_id=ns.name,
        created_at=_iso(edge.created_at),
        valid_at=_iso(edge.valid_at),
        invalid_at=_iso(edge.invalid_at),
    )


def fact(edge: EntityEdge, ns: Namespace, origin: dict[str, Any]) -> dict[str, Any]:
    """A fact as Graphiti's server gives it (the whole edge, without its embedding), with its
    provenance (provenance.py) as nodes have it."""
    data = edge.model_dump(mode="json", exclude={"fact_embedding"})
    data.get("attributes", {}).pop("fact_embedding", None)
    data["group_id"] = ns.name
    data["provenance"] = origin
    return data


def episode(node: EpisodicNode, ns: Namespace) -> dict[str, Any]:
    return {
        "uuid": node.uuid,
        "name": node.name,
        "content": node.content,
        "created_at": _iso(node.created_at),
        "source": node.source.value,
        "source_description": node.source_description,
        "group_id": ns.name,
    }


def community_result(community: CommunityNode, ns: Namespace) -> CommunityResult:
    return CommunityResult(
        uuid=community.uuid, name=community.name, group_id=ns.name, summary=community.summary
    )


def queue_state(record: EpisodeRecord) -> dict[str, Any]:
    """An episode's state in the queue and its cost, as fields added to Graphiti's episode."""
    return {
        "status": record.state,
        "attempts": record.attempts,
        "error": record.error,
        "llm_calls": record.cost.calls,
        "prompt_tokens": record.cost.prompt_tokens,
        "completion_tokens": record.cost.completion_tokens,
        "llm_seconds": round(record.cost.seconds, 3),
        "seconds": round(record.seconds, 3),
    }


def pending_episode(record: EpisodeRecord) -> dict[str, Any]:
    """An episode not (yet) in the graph, as get_episodes lists it."""
    return {
        "uuid": record.uuid,
        "name": record.name,
        "created_at": record.created_at.isoformat(),
        "group_id": record.group_id,
        **queue_state(record),
    }

"""Graphiti's nodes, edges, episodes and communities as the graph skills' results
(results.py), shaped as Graphiti's own MCP server gives them; an episode with its state in our
queue (queue.py), in one shape whether it is in the graph or only in the queue.
"""

from datetime import datetime
from typing import Any

from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode

from agentic_rag.graph.cost import EpisodeCost
from agentic_rag.graph.errors import InvalidRequest
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.queue import EpisodeRecord
from agentic_rag.graph.results import CommunityResult, EdgeResult, EpisodeResult, NodeResult


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


def episode_type(source: str) -> EpisodeType:
    """add_memory's `source` (any case) as Graphiti's episode type, or a clear refusal."""
    try:
        return EpisodeType[source.lower()]
    except KeyError:
        raise InvalidRequest(f"source {source!r} is not one of text, json, message") from None


def episode_result(
    node: EpisodicNode, ns: Namespace, record: EpisodeRecord | None
) -> EpisodeResult:
    """An episode of the graph, with its state in the queue (`record`; None when the queue
    does not hold it)."""
    return EpisodeResult(
        uuid=node.uuid,
        name=node.name,
        content=node.content,
        created_at=_iso(node.created_at),
        source=node.source.value,
        source_description=node.source_description,
        group_id=ns.name,
        **_queue_state(record),
    )


def queued_episode_result(record: EpisodeRecord) -> EpisodeResult:
    """An episode not (yet) in the graph, queued or failed: as add_memory was given it."""
    return EpisodeResult(
        uuid=record.uuid,
        name=record.name,
        content=record.content,
        created_at=record.created_at.isoformat(),
        source=episode_type(record.source).value,
        source_description=record.source_description,
        group_id=record.group_id,
        **_queue_state(record),
    )


def _queue_state(record: EpisodeRecord | None) -> dict[str, Any]:
    """An episode's state in the queue and its cost: EpisodeResult's fields past Graphiti's."""
    if record is None:
        return {"status": None, "attempts": 0, "error": None, **_cost(EpisodeCost(), 0.0)}
    return {
        "status": record.state,
        "attempts": record.attempts,
        "error": record.error,
        **_cost(record.cost, record.seconds),
    }


def _cost(cost: EpisodeCost, seconds: float) -> dict[str, Any]:
    return {
        "llm_calls": cost.calls,
        "prompt_tokens": cost.prompt_tokens,
        "completion_tokens": cost.completion_tokens,
        "llm_seconds": round(cost.seconds, 3),
        "seconds": round(seconds, 3),
    }


def community_result(community: CommunityNode, ns: Namespace) -> CommunityResult:
    return CommunityResult(
        uuid=community.uuid, name=community.name, group_id=ns.name, summary=community.summary
    )

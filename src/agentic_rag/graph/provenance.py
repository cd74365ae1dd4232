"""Provenance: where a node or a fact of the graph came from, in one shape for both
(docs/graph.md, Provenance and cost):

    {"episodes": [episode uuid, ...],
     "documents": [{"document_id": "01J...", "chunk_ids": [17, 18]}, ...]}

A fact's episodes are Graphiti's own list on the edge; a node's are the episodes that mention
it (Graphiti's MENTIONS edges), found for a whole result list in one query (`mentions`).
`documents` names the ingested documents among those episodes (graph/documents.py), from
their rows in the episode queue (`EpisodeQueue.episode_sources`).
"""

from collections.abc import Mapping, Sequence
from typing import Any

from graphiti_core.driver.driver import GraphDriver

from agentic_rag.graph.queue import EpisodeSource


async def mentions(driver: GraphDriver, uuids: Sequence[str]) -> dict[str, list[str]]:
    """The episodes that mention each of these entities, oldest first (one query)."""
    if not uuids:
        return {}
    records, _, _ = await driver.execute_query(
        "MATCH (e:Episodic)-[:MENTIONS]->(n:Entity) WHERE n.uuid IN $uuids "
        "RETURN n.uuid AS node, e.uuid AS episode ORDER BY e.created_at, e.uuid",
        uuids=list(uuids),
    )
    found: dict[str, list[str]] = {}
    for record in records:
        found.setdefault(record["node"], []).append(record["episode"])
    return found


def provenance(episodes: Sequence[str], sources: Mapping[str, EpisodeSource]) -> dict[str, Any]:
    """The provenance of a node or fact that came from `episodes`; `sources` holds those of
    them that were made from ingested documents (a document's chunks merged, in order)."""
    documents: dict[str, set[int]] = {}
    for uuid in episodes:
        source = sources.get(uuid)
        if source is not None:
            documents.setdefault(source.document_id, set()).update(source.chunk_ids)
    return {
        "episodes": list(episodes),
        "documents": [
            {"document_id": document_id, "chunk_ids": sorted(chunk_ids)}
            for document_id, chunk_ids in documents.items()
        ],
    }

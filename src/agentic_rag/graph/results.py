"""The graph skills' arguments and results, shaped as Graphiti's own MCP server shapes them.

Their JSON schemas equal the ones in `spec/graphiti-mcp-tools.json` (a test compares them), so
a client written for Graphiti's server reads them unchanged; the one narrowing is get_episodes'
episodes, any object in the spec, here `EpisodeResult`. The class names of nested models are
the spec's `$defs` names; top-level models carry the spec's titles.

Arguments keep Graphiti's names and defaults and no constraints of their own (a constraint
would change the schema): handlers check values and refuse bad ones with a clear error.
The one addition is `clear_graph`'s `confirm` (docs/graph.md); `parse_time` reads the time
arguments, for the skills and the service alike.
"""

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_rag.graph.errors import InvalidRequest

GroupIds = str | list[str] | None


# -- arguments --------------------------------------------------------------------------


class AddMemoryArguments(BaseModel):
    model_config = ConfigDict(title="add_memoryArguments")

    name: str
    episode_body: str
    group_id: str | None = None
    source: str = "text"
    source_description: str = ""
    uuid: str | None = None
    reference_time: str | None = None
    excluded_entity_types: list[str] | None = None
    custom_extraction_instructions: str | None = None
    previous_episode_uuids: list[str] | None = None
    update_communities: bool = False
    saga: str | None = None
    saga_previous_episode_uuid: str | None = None
    use_client_model: bool | None = Field(
        None,
        description="Without a server LLM, extract now with your MCP client's model (sampling); "
        "the episode goes to that model. Unset: the server's setting",
    )


class SearchNodesArguments(BaseModel):
    model_config = ConfigDict(title="search_nodesArguments")

    query: str
    group_ids: GroupIds = None
    max_nodes: int = 10
    entity_types: list[str] | None = None
    center_node_uuid: str | None = None


class SearchMemoryFactsArguments(BaseModel):
    model_config = ConfigDict(title="search_memory_factsArguments")

    query: str
    group_ids: GroupIds = None
    max_facts: int = 10
    center_node_uuid: str | None = None
    edge_types: list[str] | None = None
    valid_at_after: str | None = None
    valid_at_before: str | None = None
    invalid_at_after: str | None = None
    invalid_at_before: str | None = None


class DeleteEntityEdgeArguments(BaseModel):
    model_config = ConfigDict(title="delete_entity_edgeArguments")

    uuid: str


class DeleteEpisodeArguments(BaseModel):
    model_config = ConfigDict(title="delete_episodeArguments")

    uuid: str


class GetEntityEdgeArguments(BaseModel):
    model_config = ConfigDict(title="get_entity_edgeArguments")

    uuid: str


class GetEpisodesArguments(BaseModel):
    model_config = ConfigDict(title="get_episodesArguments")

    group_ids: GroupIds = None
    max_episodes: int = 10


class SummarizeSagaArguments(BaseModel):
    model_config = ConfigDict(title="summarize_sagaArguments")

    saga_name: str
    group_id: str | None = None


class BuildCommunitiesArguments(BaseModel):
    model_config = ConfigDict(title="build_communitiesArguments")

    group_ids: GroupIds = None


class AddTripletArguments(BaseModel):
    model_config = ConfigDict(title="add_tripletArguments")

    source_node_name: str
    edge_name: str
    fact: str
    target_node_name: str
    group_id: str | None = None
    source_node_uuid: str | None = None
    target_node_uuid: str | None = None


class GetEpisodeEntitiesArguments(BaseModel):
    model_config = ConfigDict(title="get_episode_entitiesArguments")

    episode_uuids: list[str]


class ClearGraphArguments(BaseModel):
    model_config = ConfigDict(title="clear_graphArguments")

    group_ids: GroupIds = None
    confirm: bool = False
    """Ours: true clears without asking first (for callers that cannot be asked)."""


class GetStatusArguments(BaseModel):
    model_config = ConfigDict(title="get_statusArguments")


def parse_time(value: str | None, argument: str) -> datetime | None:
    """An ISO-8601 argument as an aware datetime (naive means UTC), or a clear refusal."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidRequest(f"{argument} {value!r} is not an ISO-8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# -- results (the spec's $defs) ----------------------------------------------------------


class SuccessResponse(BaseModel):
    message: str


class ErrorResponse(BaseModel):
    error: str


class NodeResult(BaseModel):
    uuid: str
    name: str
    labels: list[str]
    created_at: str | None
    summary: str | None
    group_id: str
    attributes: dict[str, Any]


class EdgeResult(BaseModel):
    uuid: str
    name: str
    fact: str
    source_node_uuid: str
    target_node_uuid: str
    group_id: str
    created_at: str | None
    valid_at: str | None
    invalid_at: str | None


class NodeSearchResponse(BaseModel):
    message: str
    nodes: list[NodeResult]


class FactSearchResponse(BaseModel):
    message: str
    facts: list[dict[str, Any]]


EpisodeStatus = Literal["queued", "processing", "done", "failed"]


# Graphiti's schema lets an episode be any object; this narrows it to the seven fields its
# server gives and ours, so a client written for Graphiti's server reads it unchanged.
class EpisodeResult(BaseModel):
    """An episode as get_episodes lists it, in one shape whatever its state: Graphiti's
    episode, its state in the episode queue and what extracting it cost (null and 0 for an
    episode the queue does not hold)."""

    uuid: str
    name: str
    content: str
    created_at: str | None
    source: str = Field(description="text, json or message")
    source_description: str
    group_id: str
    status: EpisodeStatus | None = Field(
        description="Its state in the episode queue; null when the queue does not hold it "
        "(extracted within its call by the client's model, or deleted while being extracted)"
    )
    attempts: int = Field(description="Extractions started")
    error: str | None = Field(description="The last failed attempt's reason")
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_seconds: float = Field(description="Time spent waiting for the LLM, every attempt")
    seconds: float = Field(description="Processing time, every attempt")


class EpisodeSearchResponse(BaseModel):
    message: str
    episodes: list[EpisodeResult]


class SagaSummaryResponse(BaseModel):
    message: str
    uuid: str
    name: str
    summary: str


class CommunityResult(BaseModel):
    uuid: str
    name: str
    group_id: str
    summary: str | None


class BuildCommunitiesResponse(BaseModel):
    message: str
    community_count: int
    edge_count: int
    communities: list[CommunityResult]


class TripletResponse(BaseModel):
    message: str
    nodes: list[NodeResult]
    edges: list[EdgeResult]


class EpisodeEntitiesResponse(BaseModel):
    message: str
    nodes: list[NodeResult]
    edges: list[EdgeResult]


# -- the tools' outputs: {"result": ...} as FastMCP wraps a union ---------------------------


class AddMemoryOutput(BaseModel):
    model_config = ConfigDict(title="add_memoryOutput")
    result: SuccessResponse | ErrorResponse


class SearchNodesOutput(BaseModel):
    model_config = ConfigDict(title="search_nodesOutput")
    result: NodeSearchResponse | ErrorResponse


class SearchMemoryFactsOutput(BaseModel):
    model_config = ConfigDict(title="search_memory_factsOutput")
    result: FactSearchResponse | ErrorResponse


class DeleteEntityEdgeOutput(BaseModel):
    model_config = ConfigDict(title="delete_entity_edgeOutput")
    result: SuccessResponse | ErrorResponse


class DeleteEpisodeOutput(BaseModel):
    model_config = ConfigDict(title="delete_episodeOutput")
    result: SuccessResponse | ErrorResponse


class GetEntityEdgeOutput(BaseModel):
    model_config = ConfigDict(title="get_entity_edgeOutput")
    result: dict[str, Any] | ErrorResponse


class GetEpisodesOutput(BaseModel):
    model_config = ConfigDict(title="get_episodesOutput")
    result: EpisodeSearchResponse | ErrorResponse


class SummarizeSagaOutput(BaseModel):
    model_config = ConfigDict(title="summarize_sagaOutput")
    result: SagaSummaryResponse | ErrorResponse


class BuildCommunitiesOutput(BaseModel):
    model_config = ConfigDict(title="build_communitiesOutput")
    result: BuildCommunitiesResponse | ErrorResponse


class AddTripletOutput(BaseModel):
    model_config = ConfigDict(title="add_tripletOutput")
    result: TripletResponse | ErrorResponse


class GetEpisodeEntitiesOutput(BaseModel):
    model_config = ConfigDict(title="get_episode_entitiesOutput")
    result: EpisodeEntitiesResponse | ErrorResponse


class ClearGraphOutput(BaseModel):
    model_config = ConfigDict(title="clear_graphOutput")
    result: SuccessResponse | ErrorResponse


class StatusResponse(BaseModel):
    status: str
    message: str

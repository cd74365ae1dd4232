"""The graph skills: Graphiti's MCP tools, with their names, arguments and result shapes
(results.py), plus the aliases `add_episode` and `search_facts`.

Each handler checks the caller's `group_id`/`group_ids` against the tenant (namespaces.py)
before anything else, then asks `GraphService`. Refusals (another tenant's group, an LLM that
is not configured, a uuid not in the caller's graph, bad values) raise `SkillError` here, or
`GraphError` below (the service, the tenant guard, `parse_time`), which every handler maps
to `SkillError` word for word (`refusing_skill`): the A2A task fails, the MCP call answers
`isError`, each with the reason.
"""

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentic_rag.graph.errors import GraphError
from agentic_rag.graph.namespaces import namespace, namespaces
from agentic_rag.graph.reachability import GraphUnreachable, Reachability
from agentic_rag.graph.results import (
    AddMemoryArguments,
    AddMemoryOutput,
    AddTripletArguments,
    AddTripletOutput,
    BuildCommunitiesArguments,
    BuildCommunitiesOutput,
    BuildCommunitiesResponse,
    ClearGraphArguments,
    ClearGraphOutput,
    DeleteEntityEdgeArguments,
    DeleteEntityEdgeOutput,
    DeleteEpisodeArguments,
    DeleteEpisodeOutput,
    EpisodeEntitiesResponse,
    EpisodeSearchResponse,
    FactSearchResponse,
    GetEntityEdgeArguments,
    GetEntityEdgeOutput,
    GetEpisodeEntitiesArguments,
    GetEpisodeEntitiesOutput,
    GetEpisodesArguments,
    GetEpisodesOutput,
    GetStatusArguments,
    NodeSearchResponse,
    SagaSummaryResponse,
    SearchMemoryFactsArguments,
    SearchMemoryFactsOutput,
    SearchNodesArguments,
    SearchNodesOutput,
    StatusResponse,
    SuccessResponse,
    SummarizeSagaArguments,
    SummarizeSagaOutput,
    TripletResponse,
    parse_time,
)
from agentic_rag.skills import SkillContext, SkillError, SkillRegistry
from agentic_rag.skills.refusals import refusing_skill
from agentic_rag.skills.registry import Handler

if TYPE_CHECKING:  # its import (graphiti_core) waits until the engine starts the graph
    from agentic_rag.graph.service import GraphService

TAGS = ("graph", "memory")
GROUPS = (
    "group_id/group_ids may name only your tenant's graph: your tenant's name, or "
    "'<tenant>:<name>' for a sub-group; left out, your tenant's main graph."
)
YES = frozenset({"yes", "y", "confirm", "confirmed", "ok", "true"})
NO = frozenset({"no", "n", "cancel", "stop", "abort", "false"})


def _positive(value: int, argument: str) -> int:
    if value <= 0:
        raise SkillError(f"{argument} must be a positive integer, not {value}")
    return value


def add_graph_skills(registry: SkillRegistry, graph: "GraphService") -> None:
    """Register the graph skills, which call `graph`; while its database does not answer
    they refuse with `GraphUnreachable` (reachability.py), get_status says so."""
    refusing = functools.partial(refusing_skill, registry, GraphError)
    reachability = Reachability(graph.settings.graph_url, graph.backend)

    def skill(**options: Any) -> Callable[[Handler], Handler]:
        register = refusing(**options)

        def decorate(handler: Handler) -> Handler:
            register(reachability.guarded(handler))
            return handler

        return decorate

    async def add_memory(ctx: SkillContext, args: AddMemoryArguments) -> AddMemoryOutput:
        ns = namespace(ctx.tenant, args.group_id)
        asked = args.use_client_model
        wanted = graph.settings.use_client_model if asked is None else asked
        if wanted and not graph.has_llm and ctx.client_model is not None:
            # The caller's model is reachable only while the call lasts: extracted now.
            uuid = await graph.extract_now(ns, args, ctx.client_model)
            return AddMemoryOutput(
                result=SuccessResponse(
                    message=f"Episode '{args.name}' extracted with the client's model in group "
                    f"'{ns.name}' (uuid {uuid})"
                )
            )
        uuid = await graph.queue_episode(ns, args)
        # Graphiti's server answers so too: the episode is queued, extracted in the background.
        return AddMemoryOutput(
            result=SuccessResponse(
                message=f"Episode '{args.name}' queued for processing in group '{ns.name}' "
                f"(uuid {uuid})"
            )
        )

    add_description = (
        "Add an episode (text, message or JSON) to the graph memory: it is queued, and an LLM "
        "extracts its entities and facts in the background, in order per group; the answer "
        "gives its uuid, and get_episodes and get_status show its progress. Needs an LLM "
        "(AGENTIC_RAG_LLM_BASE_URL, AGENTIC_RAG_LLM_MODEL). " + GROUPS
    )
    skill(
        description=add_description,
        summary="Queue an episode (text, message or JSON); an LLM extracts its entities and facts.",
        group="graph",
        tags=TAGS,
    )(add_memory)
    skill(
        description="The same as add_memory (Graphiti's older name). " + add_description,
        summary="Graphiti's older name of add_memory.",
        group="graphiti-compat",
        name="add_episode",
        tags=TAGS,
    )(add_memory)

    @skill(
        description="Search the graph for entities (nodes): semantic and keyword search fused, "
        "optionally by entity type or around a center node. " + GROUPS,
        summary="Search the graph's entities (nodes).",
        group="graph",
        tags=TAGS,
    )
    async def search_nodes(ctx: SkillContext, args: SearchNodesArguments) -> SearchNodesOutput:
        targets = namespaces(ctx.tenant, args.group_ids)
        nodes = await graph.search_nodes(
            targets,
            args.query,
            limit=_positive(args.max_nodes, "max_nodes"),
            entity_types=args.entity_types,
            center_node_uuid=args.center_node_uuid,
        )
        message = "Nodes retrieved successfully" if nodes else "No relevant nodes found"
        return SearchNodesOutput(result=NodeSearchResponse(message=message, nodes=nodes))

    async def search_memory_facts(
        ctx: SkillContext, args: SearchMemoryFactsArguments
    ) -> SearchMemoryFactsOutput:
        targets = namespaces(ctx.tenant, args.group_ids)
        facts = await graph.search_facts(
            targets,
            args.query,
            limit=_positive(args.max_facts, "max_facts"),
            center_node_uuid=args.center_node_uuid,
            edge_types=args.edge_types,
            valid_at=(
                parse_time(args.valid_at_after, "valid_at_after"),
                parse_time(args.valid_at_before, "valid_at_before"),
            ),
            invalid_at=(
                parse_time(args.invalid_at_after, "invalid_at_after"),
                parse_time(args.invalid_at_before, "invalid_at_before"),
            ),
        )
        message = "Facts retrieved successfully" if facts else "No relevant facts found"
        return SearchMemoryFactsOutput(result=FactSearchResponse(message=message, facts=facts))

    facts_description = (
        "Search the graph for facts (relationships between entities), optionally by fact "
        "type, validity dates or around a center node. " + GROUPS
    )
    skill(
        description=facts_description,
        summary="Search the graph's facts (relationships between entities).",
        group="graph",
        tags=TAGS,
    )(search_memory_facts)
    skill(
        description="The same as search_memory_facts. " + facts_description,
        summary="Graphiti's older name of search_memory_facts.",
        group="graphiti-compat",
        name="search_facts",
        tags=TAGS,
    )(search_memory_facts)

    @skill(
        description="The most recent episodes of the graph. " + GROUPS,
        summary="The most recent episodes of the graph.",
        group="graph",
        tags=TAGS,
    )
    async def get_episodes(ctx: SkillContext, args: GetEpisodesArguments) -> GetEpisodesOutput:
        targets = namespaces(ctx.tenant, args.group_ids)
        found = await graph.episodes(targets, _positive(args.max_episodes, "max_episodes"))
        message = "Episodes retrieved successfully" if found else "No episodes found"
        return GetEpisodesOutput(result=EpisodeSearchResponse(message=message, episodes=found))

    @skill(
        description="The entities and facts that given episodes produced (provenance), "
        "in your tenant's graphs.",
        group="graph",
        tags=TAGS,
    )
    async def get_episode_entities(
        ctx: SkillContext, args: GetEpisodeEntitiesArguments
    ) -> GetEpisodeEntitiesOutput:
        if not args.episode_uuids:
            raise SkillError("episode_uuids must contain at least one UUID")
        nodes, edges = await graph.episode_entities(ctx.tenant, args.episode_uuids)
        return GetEpisodeEntitiesOutput(
            result=EpisodeEntitiesResponse(
                message=f"Retrieved provenance for {len(args.episode_uuids)} episode(s)",
                nodes=nodes,
                edges=edges,
            )
        )

    @skill(
        description="One fact (entity edge) of your graph by its UUID.", group="graph", tags=TAGS
    )
    async def get_entity_edge(
        ctx: SkillContext, args: GetEntityEdgeArguments
    ) -> GetEntityEdgeOutput:
        return GetEntityEdgeOutput(result=await graph.entity_edge(ctx.tenant, args.uuid))

    @skill(description="Delete one fact (entity edge) of your graph.", group="admin", tags=TAGS)
    async def delete_entity_edge(
        ctx: SkillContext, args: DeleteEntityEdgeArguments
    ) -> DeleteEntityEdgeOutput:
        await graph.delete_entity_edge(ctx.tenant, args.uuid)
        return DeleteEntityEdgeOutput(
            result=SuccessResponse(
                message=f"Entity edge with UUID {args.uuid} deleted successfully"
            )
        )

    @skill(
        description="Delete an episode of your graph, with the entities and facts only it "
        "produced (those other episodes support stay).",
        summary="Delete an episode with what only it produced.",
        group="admin",
        tags=TAGS,
    )
    async def delete_episode(
        ctx: SkillContext, args: DeleteEpisodeArguments
    ) -> DeleteEpisodeOutput:
        await graph.delete_episode(ctx.tenant, args.uuid)
        return DeleteEpisodeOutput(
            result=SuccessResponse(message=f"Episode with UUID {args.uuid} deleted successfully")
        )

    @skill(
        description="Write one fact directly (source entity -[edge]-> target entity), without "
        "extraction. Entities are matched by name (and deduplicated by an LLM when one is "
        "configured). " + GROUPS,
        summary="Write one fact (source -[edge]-> target) directly, without extraction.",
        group="graph",
        tags=TAGS,
    )
    async def add_triplet(ctx: SkillContext, args: AddTripletArguments) -> AddTripletOutput:
        ns = namespace(ctx.tenant, args.group_id)
        for argument in ("source_node_name", "edge_name", "fact", "target_node_name"):
            if not getattr(args, argument).strip():
                raise SkillError(f"{argument} must not be empty")
        nodes, edges = await graph.add_triplet(
            ns,
            source_name=args.source_node_name,
            edge_name=args.edge_name,
            fact_text=args.fact,
            target_name=args.target_node_name,
            source_uuid=args.source_node_uuid,
            target_uuid=args.target_node_uuid,
        )
        return AddTripletOutput(
            result=TripletResponse(
                message=f"Triplet '{args.source_node_name} -[{args.edge_name}]-> "
                f"{args.target_node_name}' added",
                nodes=nodes,
                edges=edges,
            )
        )

    @skill(
        description="Summarize a saga (the ordered episodes added with the same `saga`). "
        "Needs an LLM. " + GROUPS,
        summary="Summarize a saga's ordered episodes (needs an LLM).",
        group="graph",
        tags=TAGS,
    )
    async def summarize_saga(
        ctx: SkillContext, args: SummarizeSagaArguments
    ) -> SummarizeSagaOutput:
        ns = namespace(ctx.tenant, args.group_id)
        saga = await graph.summarize_saga(ns, args.saga_name)
        return SummarizeSagaOutput(
            result=SagaSummaryResponse(
                message=f"Saga '{args.saga_name}' summarized successfully",
                uuid=saga.uuid,
                name=saga.name,
                summary=saga.summary,
            )
        )

    @skill(
        description="Detect communities of densely connected entities and summarize them. "
        "Needs an LLM. " + GROUPS,
        summary="Detect and summarize communities of entities (needs an LLM).",
        group="graph",
        tags=TAGS,
    )
    async def build_communities(
        ctx: SkillContext, args: BuildCommunitiesArguments
    ) -> BuildCommunitiesOutput:
        targets = namespaces(ctx.tenant, args.group_ids)
        communities, edge_count = await graph.build_communities(targets)
        return BuildCommunitiesOutput(
            result=BuildCommunitiesResponse(
                message=f"Built {len(communities)} communities",
                community_count=len(communities),
                edge_count=edge_count,
                communities=communities,
            )
        )

    @skill(
        description="Delete every episode, entity and fact of your graph (or of the sub-groups "
        "named). Asks for confirmation first, unless called with confirm=true. " + GROUPS,
        summary="Delete all of your graph (or the sub-groups named), once confirmed.",
        group="admin",
        tags=TAGS,
    )
    async def clear_graph(ctx: SkillContext, args: ClearGraphArguments) -> ClearGraphOutput:
        targets = namespaces(ctx.tenant, args.group_ids)
        names = ", ".join(ns.name for ns in targets)
        if not args.confirm:
            answer = ctx.texts[-1].strip().lower().rstrip(".!") if ctx.texts else ""
            if answer in NO:
                raise SkillError(f"clearing {names} was not confirmed: nothing was deleted")
            if answer not in YES:
                ctx.ask(
                    f"Clear the graph of {names}? Every episode, entity and fact in it will be "
                    "deleted, which cannot be undone. Answer yes to clear it or no to keep it "
                    "(or call clear_graph with confirm=true)."
                )
        await graph.clear(targets)
        return ClearGraphOutput(
            result=SuccessResponse(
                message=f"Graph data cleared successfully for group IDs: {names}"
            )
        )

    @refusing(  # not guarded: it reports an unreachable database as its status
        description="Whether the graph database answers, whether an LLM is configured, and "
        "your episodes in the queue: queued, processing, done and failed per group, their LLM "
        "calls, tokens and time, and the last error.",
        summary="The graph's health and your episode queue.",
        group="graph",
        tags=TAGS,
    )
    async def get_status(ctx: SkillContext, args: GetStatusArguments) -> StatusResponse:
        try:
            with reachability.call():
                message = await graph.status(ctx.tenant)
        except GraphUnreachable as unreachable:
            return StatusResponse(status="error", message=str(unreachable))
        except (GraphError, SkillError):
            raise
        except Exception as exc:  # the database is down: that is the status, not a failure
            return StatusResponse(status="error", message=f"the graph database fails: {exc}")
        return StatusResponse(status="ok", message=message)

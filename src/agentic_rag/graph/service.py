"""GraphService: Graphiti on FalkorDB, one graph per namespace (namespaces.py), per tenant.

Built once per process from the settings, with the embedder (the product's), the LLM when one
is configured, the episode queue and this worker's episode ingestion; `start` starts the
embedded FalkorDB server of the data directory (or reaches AGENTIC_RAG_GRAPH_URL's) and opens
the connection, `start_ingestion` works the queue.

FalkorDB keeps one graph per Graphiti group id, and Graphiti's `remove_episode`, `add_triplet`
and `clear_data` act on the graph their driver is bound to; so every namespace gets a Graphiti
of its own whose driver is bound to that namespace's graph (`_graphiti`), and nothing here ever
uses an unbound one.

A tenant's sub-groups are remembered in a set in FalkorDB itself (`_remember`), so that the
calls that name only a uuid (get_entity_edge, delete_episode, ...) look in every graph of the
caller's tenant, and in no other.
"""

import contextlib
import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from falkordb.asyncio import FalkorDB
from graphiti_core import Graphiti
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge
from graphiti_core.errors import EdgeNotFoundError, NodeNotFoundError
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode, SagaNode
from graphiti_core.search.search_config import SearchConfig
from graphiti_core.search.search_config_recipes import (
    EDGE_HYBRID_SEARCH_NODE_DISTANCE,
    EDGE_HYBRID_SEARCH_RRF,
    NODE_HYBRID_SEARCH_NODE_DISTANCE,
    NODE_HYBRID_SEARCH_RRF,
)
from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters
from graphiti_core.search.search_utils import RELEVANT_SCHEMA_LIMIT
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk
from graphiti_core.utils.maintenance.graph_data_operations import clear_data
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from agentic_rag.config import Settings
from agentic_rag.embedding.embedders import Embedder
from agentic_rag.graph.clients import (
    ChatLLM,
    FusionOrder,
    GraphEmbedder,
    LLMRequired,
    NoLLM,
    graphiti_llm,
)
from agentic_rag.graph.embedded import EmbeddedFalkorDB
from agentic_rag.graph.errors import InvalidRequest, NotFound
from agentic_rag.graph.ingestion import EpisodeIngestion, Spared
from agentic_rag.graph.mapping import (
    community_result,
    edge_result,
    episode_result,
    episode_type,
    fact,
    node_result,
    queued_episode_result,
)
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.provenance import mentions, provenance
from agentic_rag.graph.queue import EpisodeQueue, EpisodeSource
from agentic_rag.graph.results import (
    AddMemoryArguments,
    CommunityResult,
    EdgeResult,
    EpisodeResult,
    NodeResult,
    parse_time,
)
from agentic_rag.graph.search import use_fact_index
from agentic_rag.llm.chat import Chat
from agentic_rag.llm.endpoint import ChatEndpoint
from agentic_rag.storage.pool import Pool

log = logging.getLogger(__name__)

# Tries of a graph command whose connection the server closed (it restarted), each on a new
# connection, after pauses growing up to the cap.
RECONNECT_ATTEMPTS = 3
RECONNECT_BACKOFF_CAP_SECONDS = 1.0


class GraphDatabaseError(RuntimeError):
    """The graph database cannot be reached at start."""


class GraphNotStarted(RuntimeError):
    pass


Mentioned = tuple[EntityNode, Namespace, list[str]]
"""A node, its namespace, and the episodes that mention it."""


@dataclass(frozen=True)
class GraphMatches:
    """What one search of a namespace found (`search_graph`), best first, with Graphiti's
    scores: facts, and entities with the episodes that mention them (oldest first)."""

    facts: list[tuple[EntityEdge, float]]
    entities: list[tuple[EntityNode, float, list[str]]]


class GraphService:
    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        pool: Pool,
        chat: ChatEndpoint | None = None,
        *,
        worker: int,
    ) -> None:
        """`worker`: this worker's id, whose lease covers the episodes it extracts."""
        self.settings = settings
        self._embedder = GraphEmbedder(embedder)
        self._cross_encoder = FusionOrder()
        self._chat = chat
        self._llm = graphiti_llm(chat) if chat is not None else None
        if settings.graph_url is None:
            self._embedded: EmbeddedFalkorDB | None = EmbeddedFalkorDB(settings.data_dir)
            self.backend = f"the embedded FalkorDB in {self._embedded.directory}"
        else:
            self._embedded = None
            self.backend = "the FalkorDB server of AGENTIC_RAG_GRAPH_URL"
        # Opened by `start`: FalkorDB's client asks the server (synchronously) whether it is a
        # cluster as it is built, so it cannot exist before the server does.
        self._connection: FalkorDB | None = None
        self._graphs: dict[str, Graphiti] = {}
        self.queue = EpisodeQueue(pool)
        self._ingestion = EpisodeIngestion(settings, self.queue, self, worker)
        self._ingesting = False

    @property
    def _db(self) -> FalkorDB:
        if self._connection is None:
            raise GraphNotStarted("the graph is not started (the engine starts it)")
        return self._connection

    def require_llm(self, skill: str) -> None:
        if self._llm is None:
            raise LLMRequired(skill)

    @property
    def has_llm(self) -> bool:
        """Whether an LLM is configured (else the caller's own model may extract, asked for)."""
        return self._llm is not None

    async def start(self) -> None:
        if self._embedded is not None:
            socket = await self._embedded.start()
            self._connection = FalkorDB(unix_socket_path=str(socket))
        else:
            assert self.settings.graph_url is not None
            self._connection = FalkorDB.from_url(self.settings.graph_url)
        # A restarted server closed the pooled connections: a command reconnects and is tried
        # again instead of failing once per connection. Set after construction: FalkorDB's
        # cluster probe copies the pool's arguments into a synchronous client, which an
        # asyncio Retry would break.
        self._db.connection.connection_pool.connection_kwargs["retry"] = Retry(
            ExponentialBackoff(cap=RECONNECT_BACKOFF_CAP_SECONDS), RECONNECT_ATTEMPTS
        )
        try:
            await self._db.connection.ping()
        except Exception as exc:
            await self.stop()
            raise GraphDatabaseError(f"cannot reach {self.backend}: {exc}") from exc

    def start_ingestion(self, spared: Spared | None = None) -> None:
        """Work the episode queue as this worker (once its lease is taken), sparing the
        episodes of the workers `spared` names (`Cluster.spared`)."""
        self._ingestion.start(spared)
        self._ingesting = True

    async def stop_ingestion(self) -> None:
        """Stop extracting; this worker's unfinished episodes go back to the queue."""
        if self._ingesting:
            self._ingesting = False
            await self._ingestion.stop()

    async def stop(self) -> None:
        await self.stop_ingestion()
        graphs, self._graphs = self._graphs, {}
        for graphiti in graphs.values():
            driver = graphiti.driver
            assert isinstance(driver, FalkorDriver)
            if driver._init_task is not None and not driver._init_task.done():
                driver._init_task.cancel()  # its index build, if still under way
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.connection.aclose()
        if self._llm is not None:
            await self._llm.client.close()
        if self._embedded is not None:
            await self._embedded.stop()

    # -- namespaces -------------------------------------------------------------------------

    async def _graphiti(self, ns: Namespace) -> Graphiti:
        """The Graphiti whose driver is bound to `ns`'s graph (indices built on first use)."""
        graphiti = self._graphs.get(ns.graph)
        if graphiti is None:
            driver = FalkorDriver(falkor_db=self._db, database=ns.graph)
            if driver._init_task is not None:  # the graph's indices, which it starts building
                await driver._init_task
            await use_fact_index(driver, self._embedder.dimension)
            graphiti = Graphiti(
                graph_driver=driver,
                llm_client=self._llm or NoLLM(),
                embedder=self._embedder,
                cross_encoder=self._cross_encoder,
            )
            self._graphs[ns.graph] = graphiti
        return graphiti

    def _sub_groups_key(self, tenant: str) -> str:
        return "agentic-rag:sub-groups:" + hashlib.sha256(tenant.encode()).hexdigest()[:40]

    async def _remember(self, ns: Namespace) -> None:
        if ns.sub_group is not None:
            await self._db.connection.sadd(self._sub_groups_key(ns.tenant), ns.sub_group)

    async def tenant_namespaces(self, tenant: str) -> list[Namespace]:
        """Every namespace of `tenant` that holds data: its main one and its sub-groups."""
        subs = await self._db.connection.smembers(self._sub_groups_key(tenant))
        names = sorted(s.decode() if isinstance(s, bytes) else str(s) for s in subs)
        return [Namespace(tenant), *(Namespace(tenant, sub) for sub in names)]

    # -- writing ----------------------------------------------------------------------------

    async def queue_episode(
        self, ns: Namespace, args: AddMemoryArguments, provenance: dict[str, Any] | None = None
    ) -> str:
        """Queue an episode for extraction (ingestion.py); its uuid, at once. `provenance`
        (an ingested document's id and chunk ids) is kept with its arguments in the queue."""
        self.require_llm("add_memory")
        episode_type(args.source)
        parse_time(args.reference_time, "reference_time")
        uuid = args.uuid or str(uuid4())
        arguments = {**args.model_dump(), **(provenance or {})}
        if not await self.queue.add(ns.tenant, uuid, ns, arguments):
            raise InvalidRequest(f"episode {uuid!r} is queued or being processed already")
        self._ingestion.wake()
        return uuid

    async def extract_now(self, ns: Namespace, args: AddMemoryArguments, chat: Chat) -> str:
        """Extract an episode within the call, with `chat` (the caller's own model), instead of
        queuing it; its uuid once its entities and facts are in the graph.

        Without a `reference_time`, the episode is dated at the start of the current UTC day,
        not this instant: a 2026-07-28 call runs again for each reply of the client's model
        (mcp/sampling.py), and the prompts, which carry the time, must be the same each time.
        """
        episode_type(args.source)
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        reference_time = parse_time(args.reference_time, "reference_time") or today
        uuid = args.uuid or str(uuid4())
        arguments = {**args.model_dump(), "reference_time": reference_time.isoformat()}
        await self.extract(ns, uuid, arguments, chat=chat)
        return uuid

    async def extract(
        self, ns: Namespace, uuid: str, arguments: dict[str, Any], *, chat: Chat | None = None
    ) -> None:
        """Extract a queued episode into `ns`'s graph (LLM calls), under its uuid; with `chat`,
        the caller's own model does, for an episode extracted within its call.

        The episode's node is saved first (unless it exists: Graphiti's way of extracting an
        episode again), so that Graphiti extracts it under the uuid add_memory answered with;
        it is left out of its own previous episodes, and removed again if the extraction
        fails (Graphiti writes what it extracted only at the end), so that no later episode
        reads a failed one as its context.
        """
        if chat is None:
            self.require_llm("add_memory")
        args = AddMemoryArguments.model_validate(arguments)
        kind = episode_type(args.source)
        reference_time = parse_time(args.reference_time, "reference_time") or datetime.now(UTC)
        graphiti = await self._graphiti(ns)
        if chat is not None:  # the same graph, through the caller's model
            graphiti = Graphiti(
                graph_driver=graphiti.driver,
                llm_client=ChatLLM(chat),
                embedder=self._embedder,
                cross_encoder=self._cross_encoder,
            )
        await self._remember(ns)
        driver = graphiti.driver
        created: EpisodicNode | None = None
        try:
            await EpisodicNode.get_by_uuid(driver, uuid)
        except NodeNotFoundError:
            created = EpisodicNode(
                uuid=uuid,
                name=args.name,
                group_id=ns.graph,
                labels=[],
                source=kind,
                content=args.episode_body,
                source_description=args.source_description,
                created_at=datetime.now(UTC),
                valid_at=reference_time,
            )
            await created.save(driver)
        try:
            await self._extract(graphiti, ns, uuid, args, kind, reference_time)
        except BaseException:
            if created is not None:
                await created.delete(driver)
            raise

    async def _extract(
        self,
        graphiti: Graphiti,
        ns: Namespace,
        uuid: str,
        args: AddMemoryArguments,
        kind: EpisodeType,
        reference_time: datetime,
    ) -> None:
        driver = graphiti.driver
        previous = args.previous_episode_uuids
        if previous is None:  # Graphiti's default, less the episode itself
            recent = await graphiti.retrieve_episodes(
                reference_time,
                last_n=RELEVANT_SCHEMA_LIMIT + 1,
                group_ids=[ns.graph],
                source=kind,
                driver=driver,
            )
            previous = [e.uuid for e in recent if e.uuid != uuid][-RELEVANT_SCHEMA_LIMIT:]
        await graphiti.add_episode(
            name=args.name,
            episode_body=args.episode_body,
            source_description=args.source_description,
            reference_time=reference_time,
            source=kind,
            group_id=ns.graph,
            uuid=uuid,
            excluded_entity_types=args.excluded_entity_types,
            previous_episode_uuids=previous,
            update_communities=args.update_communities,
            custom_extraction_instructions=args.custom_extraction_instructions,
            saga=args.saga,
            saga_previous_episode_uuid=args.saga_previous_episode_uuid,
        )

    async def add_triplet(
        self,
        ns: Namespace,
        *,
        source_name: str,
        edge_name: str,
        fact_text: str,
        target_name: str,
        source_uuid: str | None,
        target_uuid: str | None,
    ) -> tuple[list[NodeResult], list[EdgeResult]]:
        """Write one fact. With an LLM, Graphiti resolves it (duplicates, contradictions,
        dates); without, entities are matched by exact name and facts by exact text."""
        graphiti = await self._graphiti(ns)
        await self._remember(ns)
        now = datetime.now(UTC)

        def new_edge(source: EntityNode, target: EntityNode) -> EntityEdge:
            return EntityEdge(
                name=edge_name,
                fact=fact_text,
                group_id=ns.graph,
                source_node_uuid=source.uuid,
                target_node_uuid=target.uuid,
                created_at=now,
            )

        if self._llm is not None:
            source, target = (
                EntityNode(uuid=uuid or str(uuid4()), name=name, group_id=ns.graph, created_at=now)
                for name, uuid in ((source_name, source_uuid), (target_name, target_uuid))
            )
            added = await graphiti.add_triplet(source, new_edge(source, target), target)
            return (
                await self._node_results(ns.tenant, await self._mentioned(ns, added.nodes)),
                [edge_result(edge, ns) for edge in added.edges],
            )
        driver = graphiti.driver
        source = await self._entity(graphiti, ns, source_name, source_uuid, now)
        target = await self._entity(graphiti, ns, target_name, target_uuid, now)
        records, _, _ = await driver.execute_query(
            "MATCH (a:Entity {uuid: $source})-[e:RELATES_TO]->(b:Entity {uuid: $target}) "
            "WHERE e.fact = $fact RETURN e.uuid AS uuid LIMIT 1",
            source=source.uuid,
            target=target.uuid,
            fact=fact_text,
        )
        if records:
            edge = await EntityEdge.get_by_uuid(driver, records[0]["uuid"])
        else:
            edge = new_edge(source, target)
            await edge.generate_embedding(self._embedder)
        for node in (source, target):
            if node.name_embedding is None:
                await node.generate_name_embedding(self._embedder)
        await add_nodes_and_edges_bulk(driver, [], [], [source, target], [edge], self._embedder)
        nodes = await self._node_results(ns.tenant, await self._mentioned(ns, [source, target]))
        return nodes, [edge_result(edge, ns)]

    async def _entity(
        self, graphiti: Graphiti, ns: Namespace, name: str, uuid: str | None, now: datetime
    ) -> EntityNode:
        """The entity `uuid` names, else the one named exactly `name`, else a new one."""
        driver = graphiti.driver
        if uuid is None:
            records, _, _ = await driver.execute_query(
                "MATCH (n:Entity {group_id: $group_id}) WHERE toLower(n.name) = toLower($name) "
                "RETURN n.uuid AS uuid LIMIT 1",
                group_id=ns.graph,
                name=name,
            )
            uuid = records[0]["uuid"] if records else None
        if uuid is not None:
            try:
                found: EntityNode = await EntityNode.get_by_uuid(driver, uuid)
                return found
            except NodeNotFoundError:
                pass
        return EntityNode(
            uuid=uuid or str(uuid4()), name=name, group_id=ns.graph, labels=[], created_at=now
        )

    # -- reading ----------------------------------------------------------------------------

    async def search_nodes(
        self,
        namespaces: Sequence[Namespace],
        query: str,
        *,
        limit: int,
        entity_types: list[str] | None,
        center_node_uuid: str | None,
    ) -> list[NodeResult]:
        config = NODE_HYBRID_SEARCH_NODE_DISTANCE if center_node_uuid else NODE_HYBRID_SEARCH_RRF
        found: list[Mentioned] = []
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            results = await graphiti.search_(
                query=query,
                config=config.model_copy(update={"limit": limit}),
                group_ids=[ns.graph],
                center_node_uuid=center_node_uuid,
                search_filter=SearchFilters(node_labels=entity_types),
            )
            found += await self._mentioned(ns, results.nodes[: limit - len(found)])
        return await self._node_results(namespaces[0].tenant, found)

    async def search_facts(
        self,
        namespaces: Sequence[Namespace],
        query: str,
        *,
        limit: int,
        center_node_uuid: str | None,
        edge_types: list[str] | None,
        valid_at: tuple[datetime | None, datetime | None],
        invalid_at: tuple[datetime | None, datetime | None],
    ) -> list[dict[str, Any]]:
        config = EDGE_HYBRID_SEARCH_NODE_DISTANCE if center_node_uuid else EDGE_HYBRID_SEARCH_RRF
        search_filter = SearchFilters(
            edge_types=edge_types,
            valid_at=_between(*valid_at),
            invalid_at=_between(*invalid_at),
        )
        found: list[tuple[EntityEdge, Namespace]] = []
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            results = await graphiti.search_(
                query=query,
                config=config.model_copy(update={"limit": limit}),
                group_ids=[ns.graph],
                center_node_uuid=center_node_uuid,
                search_filter=search_filter,
            )
            found += [(edge, ns) for edge in results.edges]
        return await self._facts(namespaces[0].tenant, found[:limit])

    async def episodes(self, namespaces: Sequence[Namespace], limit: int) -> list[EpisodeResult]:
        """The newest episodes: those in the graph, and those queued, processing or failed;
        each with its state in the queue and what it cost (episodes not added through the
        queue have no state and no cost)."""
        tenant = namespaces[0].tenant
        found: list[tuple[EpisodicNode, Namespace]] = []
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            nodes = await EpisodicNode.get_by_group_ids(graphiti.driver, [ns.graph], limit=limit)
            found += [(node, ns) for node in nodes]
        records = await self.queue.records(tenant, [node.uuid for node, _ in found])
        listed = [episode_result(node, ns, records.get(node.uuid)) for node, ns in found]
        in_graph = {node.uuid for node, _ in found}
        for record in await self.queue.unfinished(tenant, list(namespaces), limit):
            if record.uuid not in in_graph:
                listed.append(queued_episode_result(record))
        listed.sort(key=lambda listing: listing.created_at or "", reverse=True)
        return listed[:limit]

    async def _find_edge(self, tenant: str, uuid: str) -> tuple[Graphiti, Namespace, EntityEdge]:
        for ns in await self.tenant_namespaces(tenant):
            graphiti = await self._graphiti(ns)
            try:
                return graphiti, ns, await EntityEdge.get_by_uuid(graphiti.driver, uuid)
            except EdgeNotFoundError:
                continue
        raise NotFound(f"no fact (entity edge) {uuid!r} in your graph")

    async def entity_edge(self, tenant: str, uuid: str) -> dict[str, Any]:
        _, ns, edge = await self._find_edge(tenant, uuid)
        (found,) = await self._facts(tenant, [(edge, ns)])
        return found

    async def delete_entity_edge(self, tenant: str, uuid: str) -> None:
        graphiti, _, edge = await self._find_edge(tenant, uuid)
        await edge.delete(graphiti.driver)

    async def delete_episode(self, tenant: str, uuid: str) -> None:
        """Delete one of the tenant's episodes, in whatever state: out of the queue (a queued
        one is never extracted) and out of the graph with what only it produced. One being
        extracted right now is left to its worker, which finds it gone from the queue when the
        extraction ends and removes what it wrote (ingestion.py): removing it under a running
        extraction would only be undone by the extraction's final write."""
        for _, ns, state in await self.queue.delete(tenant, [uuid]):
            if state != "processing":
                await self.remove_episode(ns, uuid)  # a re-queued one is in the graph still
            return
        for ns in await self.tenant_namespaces(tenant):  # one that never was in the queue
            graphiti = await self._graphiti(ns)
            try:
                await EpisodicNode.get_by_uuid(graphiti.driver, uuid)
            except NodeNotFoundError:
                continue
            await graphiti.remove_episode(uuid)
            return
        raise NotFound(f"no episode {uuid!r} in your graph")

    async def remove_episode(self, ns: Namespace, uuid: str) -> None:
        """Remove an episode and what only it produced from `ns`'s graph, if it is there."""
        graphiti = await self._graphiti(ns)
        with contextlib.suppress(NodeNotFoundError):
            await graphiti.remove_episode(uuid)

    async def search_graph(self, ns: Namespace, query: str, limit: int) -> GraphMatches:
        """Facts and entities of `ns` for `query`: one Graphiti search (the query embedded
        once; the hybrid edge and node searches, each fused by RRF, run at once), then one
        query for the episodes that mention the entities."""
        graphiti = await self._graphiti(ns)
        results = await graphiti.search_(
            query=query,
            config=SearchConfig(
                edge_config=EDGE_HYBRID_SEARCH_RRF.edge_config,
                node_config=NODE_HYBRID_SEARCH_RRF.node_config,
                limit=limit,
            ),
            group_ids=[ns.graph],
        )
        mentioned = await mentions(graphiti.driver, [node.uuid for node in results.nodes])
        return GraphMatches(
            facts=_scored(results.edges, results.edge_reranker_scores),
            entities=[
                (node, score, mentioned.get(node.uuid, []))
                for node, score in _scored(results.nodes, results.node_reranker_scores)
            ],
        )

    async def episode_entities(
        self, tenant: str, uuids: list[str]
    ) -> tuple[list[NodeResult], list[EdgeResult]]:
        nodes: list[Mentioned] = []
        edges: list[EdgeResult] = []
        for ns in await self.tenant_namespaces(tenant):
            graphiti = await self._graphiti(ns)
            present = await EpisodicNode.get_by_uuids(graphiti.driver, uuids)
            if not present:
                continue
            found = await graphiti.get_nodes_and_edges_by_episode([e.uuid for e in present])
            nodes += await self._mentioned(ns, found.nodes)
            edges += [edge_result(edge, ns) for edge in found.edges]
        return await self._node_results(tenant, nodes), edges

    # -- provenance (provenance.py) ----------------------------------------------------------

    async def _mentioned(self, ns: Namespace, nodes: Sequence[EntityNode]) -> list[Mentioned]:
        """These nodes of `ns`, each with the episodes that mention it (one query)."""
        graphiti = await self._graphiti(ns)
        episodes = await mentions(graphiti.driver, [node.uuid for node in nodes])
        return [(node, ns, episodes.get(node.uuid, [])) for node in nodes]

    async def _node_results(self, tenant: str, nodes: Sequence[Mentioned]) -> list[NodeResult]:
        sources = await self._sources(tenant, (e for _, _, episodes in nodes for e in episodes))
        return [node_result(node, ns, provenance(eps, sources)) for node, ns, eps in nodes]

    async def _facts(
        self, tenant: str, edges: Sequence[tuple[EntityEdge, Namespace]]
    ) -> list[dict[str, Any]]:
        sources = await self._sources(tenant, (e for edge, _ in edges for e in edge.episodes))
        return [fact(edge, ns, provenance(edge.episodes, sources)) for edge, ns in edges]

    async def _sources(self, tenant: str, episodes: Iterable[str]) -> dict[str, EpisodeSource]:
        """The documents of these episodes that came from ingested ones (one query, none
        when there are no episodes)."""
        uuids = sorted(set(episodes))
        return await self.queue.episode_sources(tenant, uuids) if uuids else {}

    async def clear(self, namespaces: Sequence[Namespace]) -> None:
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            await clear_data(graphiti.driver, group_ids=[ns.graph])
            if ns.sub_group is not None:
                await self._db.connection.srem(self._sub_groups_key(ns.tenant), ns.sub_group)

    async def summarize_saga(self, ns: Namespace, saga_name: str) -> SagaNode:
        """The saga named `saga_name` in `ns`, its summary refreshed (LLM calls)."""
        self.require_llm("summarize_saga")
        graphiti = await self._graphiti(ns)
        sagas = await SagaNode.get_by_group_ids(graphiti.driver, [ns.graph])
        match = next((saga for saga in sagas if saga.name == saga_name), None)
        if match is None:
            raise NotFound(f"no saga named {saga_name!r} in group {ns.name!r}")
        return await graphiti.summarize_saga(match.uuid)

    async def build_communities(
        self, namespaces: Sequence[Namespace]
    ) -> tuple[list[CommunityResult], int]:
        self.require_llm("build_communities")
        communities: list[CommunityResult] = []
        edge_count = 0
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            nodes, edges = await graphiti.build_communities(group_ids=[ns.graph])
            communities += [community_result(community, ns) for community in nodes]
            edge_count += len(edges)
        return communities, edge_count

    async def status(self, tenant: str) -> str:
        """What get_status says: the database answers (for the caller's graph), the LLM, and
        the caller's episodes in the queue: counts by state, LLM cost, the last error."""
        graphiti = await self._graphiti(Namespace(tenant))
        await graphiti.driver.execute_query("MATCH (n) RETURN count(n) AS count")
        llm = (
            self._chat.describe()
            if self._chat is not None
            else "no LLM configured (add_memory, summarize_saga and build_communities need one)"
        )
        parts = [f"the graph is running on {self.backend}", llm]
        for entry in await self.queue.counts(tenant):
            counts = ", ".join(f"{n} {state}" for state, n in entry.counts.items())
            line = f"episodes of {entry.group_id}: {counts}; {entry.cost.describe()}"
            if entry.last_error:
                line += f"; last error: {entry.last_error}"
            parts.append(line)
        return "; ".join(parts)


def _scored[T](items: Sequence[T], scores: Sequence[float]) -> list[tuple[T, float]]:
    """Items with Graphiti's reranker scores (1 / rank where it gave none)."""
    return [(item, scores[i] if i < len(scores) else 1 / (i + 1)) for i, item in enumerate(items)]


def _between(after: datetime | None, before: datetime | None) -> list[list[DateFilter]] | None:
    """A date range as Graphiti's filter: one AND group of its bounds, or None."""
    bounds = []
    if after is not None:
        bounds.append(
            DateFilter(date=after, comparison_operator=ComparisonOperator.greater_than_equal)
        )
    if before is not None:
        bounds.append(
            DateFilter(date=before, comparison_operator=ComparisonOperator.less_than_equal)
        )
    return [bounds] if bounds else None

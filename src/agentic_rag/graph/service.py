"""GraphService: Graphiti on FalkorDB, one graph per namespace (namespaces.py), per tenant.

Built once per process from the settings (`start`): the FalkorDB connection (the embedded
server of the data directory, or AGENTIC_RAG_GRAPH_URL), the embedder (the product's), and the
LLM when one is configured. FalkorDB keeps one graph per Graphiti group id, and Graphiti's
`remove_episode`, `add_triplet` and `clear_data` act on the graph their driver is bound to; so
every namespace gets a Graphiti of its own whose driver is bound to that namespace's graph
(`_graphiti`), and nothing here ever uses an unbound one.

A tenant's sub-groups are remembered in a set in FalkorDB itself (`_remember`), so that the
calls that name only a uuid (get_entity_edge, delete_episode, ...) look in every graph of the
caller's tenant, and in no other.
"""

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from falkordb.asyncio import FalkorDB
from graphiti_core import Graphiti
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge
from graphiti_core.errors import EdgeNotFoundError, NodeNotFoundError
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode, SagaNode
from graphiti_core.search.search_config_recipes import (
    EDGE_HYBRID_SEARCH_NODE_DISTANCE,
    EDGE_HYBRID_SEARCH_RRF,
    NODE_HYBRID_SEARCH_NODE_DISTANCE,
    NODE_HYBRID_SEARCH_RRF,
)
from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk
from graphiti_core.utils.maintenance.graph_data_operations import clear_data

from agentic_rag.config import Settings
from agentic_rag.graph.clients import (
    FusionOrder,
    GraphEmbedder,
    LLMRequired,
    NoLLM,
    chat_client,
)
from agentic_rag.graph.embedded import EmbeddedFalkorDB
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.results import (
    CommunityResult,
    EdgeResult,
    NodeResult,
)
from agentic_rag.knowledge.embeddings import Embedder
from agentic_rag.skills import SkillError

log = logging.getLogger(__name__)


class GraphDatabaseError(RuntimeError):
    """The graph database cannot be reached at start."""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def node_result(node: EntityNode, ns: Namespace) -> NodeResult:
    attributes = {k: v for k, v in node.attributes.items() if k != "name_embedding"}
    return NodeResult(
        uuid=node.uuid,
        name=node.name,
        labels=list(node.labels),
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


def fact(edge: EntityEdge, ns: Namespace) -> dict[str, Any]:
    """A fact as Graphiti's server gives it: the whole edge, without its embedding."""
    data = edge.model_dump(mode="json", exclude={"fact_embedding"})
    data.get("attributes", {}).pop("fact_embedding", None)
    data["group_id"] = ns.name
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


class GraphService:
    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        self.settings = settings
        self._embedder = GraphEmbedder(embedder)
        self._cross_encoder = FusionOrder()
        self._llm = chat_client(settings)
        self._embedded: EmbeddedFalkorDB | None = None
        self._graphs: dict[str, Graphiti] = {}
        self._writing: dict[str, asyncio.Lock] = {}  # episodes of one namespace, one at a time
        self.backend = ""

    def require_llm(self, skill: str) -> None:
        if self._llm is None:
            raise LLMRequired(skill)

    async def start(self) -> None:
        url = self.settings.graph_url
        if url is None:
            self._embedded = EmbeddedFalkorDB(self.settings.data_dir)
            socket = await self._embedded.start()
            self._db = FalkorDB(unix_socket_path=str(socket))
            self.backend = f"the embedded FalkorDB in {self._embedded.directory}"
        else:
            self._db = FalkorDB.from_url(url)
            self.backend = "the FalkorDB server of AGENTIC_RAG_GRAPH_URL"
        try:
            await self._db.connection.ping()
        except Exception as exc:
            await self.stop()
            raise GraphDatabaseError(f"cannot reach {self.backend}: {exc}") from exc

    async def stop(self) -> None:
        graphs, self._graphs = self._graphs, {}
        for graphiti in graphs.values():
            driver = graphiti.driver
            assert isinstance(driver, FalkorDriver)
            if driver._init_task is not None and not driver._init_task.done():
                driver._init_task.cancel()  # its index build, if still under way
        db = getattr(self, "_db", None)
        if db is not None:
            await db.connection.aclose()
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

    async def add_episode(
        self,
        ns: Namespace,
        *,
        name: str,
        body: str,
        source: str,
        source_description: str,
        uuid: str | None,
        reference_time: datetime | None,
        excluded_entity_types: list[str] | None,
        custom_extraction_instructions: str | None,
        previous_episode_uuids: list[str] | None,
        update_communities: bool,
        saga: str | None,
        saga_previous_episode_uuid: str | None,
    ) -> str:
        """Extract the episode into `ns`'s graph (LLM calls); its uuid."""
        self.require_llm("add_memory")
        try:
            kind = EpisodeType[source.lower()]
        except KeyError:
            raise SkillError(f"source {source!r} is not one of text, json, message") from None
        graphiti = await self._graphiti(ns)
        await self._remember(ns)
        lock = self._writing.setdefault(ns.graph, asyncio.Lock())
        async with lock:
            added = await graphiti.add_episode(
                name=name,
                episode_body=body,
                source_description=source_description,
                reference_time=reference_time or datetime.now(UTC),
                source=kind,
                group_id=ns.graph,
                uuid=uuid,
                excluded_entity_types=excluded_entity_types,
                previous_episode_uuids=previous_episode_uuids,
                update_communities=update_communities,
                custom_extraction_instructions=custom_extraction_instructions,
                saga=saga,
                saga_previous_episode_uuid=saga_previous_episode_uuid,
            )
        return added.episode.uuid

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
        if self._llm is not None:
            source, target = (
                EntityNode(uuid=uuid or str(uuid4()), name=name, group_id=ns.graph, created_at=now)
                for name, uuid in ((source_name, source_uuid), (target_name, target_uuid))
            )
            edge = EntityEdge(
                name=edge_name,
                fact=fact_text,
                group_id=ns.graph,
                source_node_uuid=source.uuid,
                target_node_uuid=target.uuid,
                created_at=now,
            )
            added = await graphiti.add_triplet(source, edge, target)
            return (
                [node_result(node, ns) for node in added.nodes],
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
            edge = EntityEdge(
                name=edge_name,
                fact=fact_text,
                group_id=ns.graph,
                source_node_uuid=source.uuid,
                target_node_uuid=target.uuid,
                created_at=now,
            )
            await edge.generate_embedding(self._embedder)
        for node in (source, target):
            if node.name_embedding is None:
                await node.generate_name_embedding(self._embedder)
        await add_nodes_and_edges_bulk(driver, [], [], [source, target], [edge], self._embedder)
        return [node_result(source, ns), node_result(target, ns)], [edge_result(edge, ns)]

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
        found: list[NodeResult] = []
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            results = await graphiti.search_(
                query=query,
                config=config.model_copy(update={"limit": limit}),
                group_ids=[ns.graph],
                center_node_uuid=center_node_uuid,
                search_filter=SearchFilters(node_labels=entity_types),
            )
            found += [node_result(node, ns) for node in results.nodes]
        return found[:limit]

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
        found: list[dict[str, Any]] = []
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            results = await graphiti.search_(
                query=query,
                config=config.model_copy(update={"limit": limit}),
                group_ids=[ns.graph],
                center_node_uuid=center_node_uuid,
                search_filter=search_filter,
            )
            found += [fact(edge, ns) for edge in results.edges]
        return found[:limit]

    async def episodes(self, namespaces: Sequence[Namespace], limit: int) -> list[dict[str, Any]]:
        found: list[tuple[EpisodicNode, Namespace]] = []
        for ns in namespaces:
            graphiti = await self._graphiti(ns)
            nodes = await EpisodicNode.get_by_group_ids(graphiti.driver, [ns.graph], limit=limit)
            found += [(node, ns) for node in nodes]
        found.sort(key=lambda pair: pair[0].created_at, reverse=True)
        return [episode(node, ns) for node, ns in found[:limit]]

    async def _find_edge(self, tenant: str, uuid: str) -> tuple[Graphiti, Namespace, EntityEdge]:
        for ns in await self.tenant_namespaces(tenant):
            graphiti = await self._graphiti(ns)
            try:
                return graphiti, ns, await EntityEdge.get_by_uuid(graphiti.driver, uuid)
            except EdgeNotFoundError:
                continue
        raise SkillError(f"no fact (entity edge) {uuid!r} in your graph")

    async def entity_edge(self, tenant: str, uuid: str) -> dict[str, Any]:
        _, ns, edge = await self._find_edge(tenant, uuid)
        return fact(edge, ns)

    async def delete_entity_edge(self, tenant: str, uuid: str) -> None:
        graphiti, _, edge = await self._find_edge(tenant, uuid)
        await edge.delete(graphiti.driver)

    async def delete_episode(self, tenant: str, uuid: str) -> None:
        for ns in await self.tenant_namespaces(tenant):
            graphiti = await self._graphiti(ns)
            try:
                await EpisodicNode.get_by_uuid(graphiti.driver, uuid)
            except NodeNotFoundError:
                continue
            await graphiti.remove_episode(uuid)
            return
        raise SkillError(f"no episode {uuid!r} in your graph")

    async def episode_entities(
        self, tenant: str, uuids: list[str]
    ) -> tuple[list[NodeResult], list[EdgeResult]]:
        nodes: list[NodeResult] = []
        edges: list[EdgeResult] = []
        for ns in await self.tenant_namespaces(tenant):
            graphiti = await self._graphiti(ns)
            present = await EpisodicNode.get_by_uuids(graphiti.driver, uuids)
            if not present:
                continue
            found = await graphiti.get_nodes_and_edges_by_episode([e.uuid for e in present])
            nodes += [node_result(node, ns) for node in found.nodes]
            edges += [edge_result(edge, ns) for edge in found.edges]
        return nodes, edges

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
            raise SkillError(f"no saga named {saga_name!r} in group {ns.name!r}")
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
            communities += [
                CommunityResult(uuid=c.uuid, name=c.name, group_id=ns.name, summary=c.summary)
                for c in nodes
            ]
            edge_count += len(edges)
        return communities, edge_count

    async def status(self, tenant: str) -> str:
        """What get_status says: the database answers (for the caller's graph), the LLM."""
        graphiti = await self._graphiti(Namespace(tenant))
        await graphiti.driver.execute_query("MATCH (n) RETURN count(n) AS count")
        llm = (
            f"LLM {self.settings.llm_model} at {self.settings.llm_base_url}"
            if self._llm is not None
            else "no LLM configured (add_memory, summarize_saga and build_communities need one)"
        )
        return f"the graph is running on {self.backend}; {llm}"


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

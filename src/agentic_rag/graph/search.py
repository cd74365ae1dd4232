"""Fact search by FalkorDB's vector index, inside Graphiti's own search.

Graphiti's similarity search over facts on FalkorDB is a scan: it computes the cosine of every
`RELATES_TO` edge's `fact_embedding` with the query and sorts (350 ms on 10,000 facts). FalkorDB
has vector indexes; Graphiti's hook for a backend's own search is the driver's
`search_interface`. `FactVectorSearch` is that hook: it answers `edge_similarity_search` from
an HNSW index on `RELATES_TO.fact_embedding`, and every other search the way Graphiti does
(through a copy of the driver without the hook), so the RRF recipes fuse the same legs as
before.

Same results as the scan: the index only proposes candidates, the nearest first; each is then
kept or dropped by Graphiti's own filter clauses (group ids, edge types, dates, node labels, ...)
and scored by Graphiti's own cosine expression against its `min_score`. When fewer than `limit`
candidates pass, more are asked for (4 times as many) unless none further could pass (the index
had no more, or the farthest one is already below `min_score`); past `MAX_CANDIDATES`, the scan
answers. Graphiti writes fact embeddings on FalkorDB as `vecf32`, the type the index holds.

One difference, a correction: with validity dates the scan can return facts outside the window
(FalkorDB plans Graphiti's `e.valid_at >= $a AND e.valid_at <= $b` with its range index on
RELATES_TO, which lets through later dates: falkordblite 0.11.0); here each candidate's dates
are compared one by one, so only facts inside it come back.

The index is made when a namespace's Graphiti is built (`use_fact_index`), if it is not there.
On a graph that already holds facts FalkorDB builds it in the background; until it is
`OPERATIONAL`, the scan answers.
"""

import copy
import logging
from typing import Any

from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.driver.search_interface.search_interface import SearchInterface
from graphiti_core.edges import EntityEdge, get_entity_edge_from_record
from graphiti_core.graph_queries import get_vector_cosine_func_query
from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query
from graphiti_core.search import search_utils
from graphiti_core.search.search_filters import SearchFilters, edge_search_filter_query_constructor
from pydantic import PrivateAttr

log = logging.getLogger(__name__)

LABEL = "RELATES_TO"
PROPERTY = "fact_embedding"
OVERFETCH = 4  # candidates asked for per result wanted, and growth when too few pass
MAX_CANDIDATES = 4096  # beyond this many, the scan is cheaper than the index

_CANDIDATES = (
    f"CALL db.idx.vector.queryRelationships('{LABEL}', '{PROPERTY}', $candidates,"
    " vecf32($search_vector)) YIELD relationship AS e, score AS distance"
)
_SCORE = get_vector_cosine_func_query("e.fact_embedding", "$search_vector", FalkorDriver.provider)


class FactVectorSearch(SearchInterface):
    """Graphiti's search on one namespace's FalkorDB graph, facts by the vector index."""

    _plain: FalkorDriver = PrivateAttr()
    _dimension: int = PrivateAttr()
    _operational: bool = PrivateAttr(default=False)

    def __init__(self, driver: FalkorDriver, dimension: int) -> None:
        super().__init__()
        # The same connection and graph without this hook: Graphiti's own searches.
        self._plain = copy.copy(driver)
        self._plain.search_interface = None
        self._dimension = dimension

    async def ensure_index(self) -> None:
        """Create the index unless it exists (another process may create it meanwhile:
        FalkorDriver.execute_query ignores FalkorDB's 'already indexed')."""
        index = await self._index()
        if index is None:
            await self._plain.execute_query(
                f"CREATE VECTOR INDEX FOR ()-[e:{LABEL}]-() ON (e.{PROPERTY}) OPTIONS"
                " {dimension: $dimension, similarityFunction: 'cosine'}",
                dimension=self._dimension,
            )
        elif index[0] != self._dimension:
            log.warning(
                "graph %s: its fact index holds %d-dimensional vectors, the embedder makes %d;"
                " facts are searched by a scan",
                self._plain._database,
                index[0],
                self._dimension,
            )

    async def _index(self) -> tuple[int, str] | None:
        """The index's dimension and status (`OPERATIONAL`, or its progress while FalkorDB
        builds it); None when there is none."""
        records, _, _ = await self._plain.execute_query(
            "CALL db.indexes() YIELD label, types, options, entitytype, status"
            " WHERE label = $label AND entitytype = 'RELATIONSHIP'"
            " RETURN types, options, status",
            label=LABEL,
        )
        for record in records:
            if "VECTOR" in record["types"].get(PROPERTY, []):
                return int(record["options"][PROPERTY]["dimension"]), str(record["status"])
        return None

    async def operational(self) -> bool:
        """Whether searches use the index: it exists, for the embedder's dimension, built."""
        if not self._operational:
            self._operational = await self._index() == (self._dimension, "OPERATIONAL")
        return self._operational

    # -- facts by similarity: the index ---------------------------------------------------

    async def edge_similarity_search(
        self,
        driver: Any,
        search_vector: list[float],
        source_node_uuid: str | None,
        target_node_uuid: str | None,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = search_utils.RELEVANT_SCHEMA_LIMIT,
        min_score: float = search_utils.DEFAULT_MIN_SCORE,
    ) -> list[EntityEdge]:
        if len(search_vector) != self._dimension or not await self.operational():
            return await search_utils.edge_similarity_search(
                self._plain,
                search_vector,
                source_node_uuid,
                target_node_uuid,
                search_filter,
                group_ids,
                limit,
                min_score,
            )
        filters, params = _filters(source_node_uuid, target_node_uuid, search_filter, group_ids)
        where = " AND ".join(["n:Entity", "m:Entity", *filters])
        query = f"""{_CANDIDATES}
            WITH e, startNode(e) AS n, endNode(e) AS m
            WHERE {where}
            WITH e, n, m, {_SCORE} AS score
            WHERE score > $min_score
            RETURN {get_entity_edge_return_query(FalkorDriver.provider)}
            ORDER BY score DESC
            LIMIT $limit"""
        candidates = OVERFETCH * limit
        while candidates <= MAX_CANDIDATES:
            records, _, _ = await self._plain.execute_query(
                query,
                candidates=candidates,
                search_vector=search_vector,
                min_score=min_score,
                limit=limit,
                **params,
            )
            if len(records) >= limit or not await self._more(search_vector, candidates, min_score):
                return [get_entity_edge_from_record(r, FalkorDriver.provider) for r in records]
            candidates *= OVERFETCH
        return await search_utils.edge_similarity_search(
            self._plain,
            search_vector,
            source_node_uuid,
            target_node_uuid,
            search_filter,
            group_ids,
            limit,
            min_score,
        )

    async def _more(self, search_vector: list[float], candidates: int, min_score: float) -> bool:
        """Whether facts beyond the nearest `candidates` could still score above `min_score`:
        the index held that many, and the farthest of them scored above it."""
        records, _, _ = await self._plain.execute_query(
            f"{_CANDIDATES} RETURN count(e) AS found, max(distance) AS farthest",
            candidates=candidates,
            search_vector=search_vector,
        )
        (stats,) = records
        # FalkorDB's cosine distance d is 1 - cos; Graphiti's score is (2 - d) / 2.
        return bool(stats["found"] == candidates and (2 - stats["farthest"]) / 2 > min_score)

    # -- everything else: Graphiti's own ----------------------------------------------------
    # The methods below are those Graphiti calls without a fallback when the hook is set; for
    # the others, SearchInterface's defaults tell Graphiti to use its own code.

    async def edge_fulltext_search(
        self,
        driver: Any,
        query: str,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = search_utils.RELEVANT_SCHEMA_LIMIT,
    ) -> list[Any]:
        return await search_utils.edge_fulltext_search(
            self._plain, query, search_filter, group_ids, limit
        )

    async def node_fulltext_search(
        self,
        driver: Any,
        query: str,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = search_utils.RELEVANT_SCHEMA_LIMIT,
    ) -> list[Any]:
        return await search_utils.node_fulltext_search(
            self._plain, query, search_filter, group_ids, limit
        )

    async def node_similarity_search(
        self,
        driver: Any,
        search_vector: list[float],
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = search_utils.RELEVANT_SCHEMA_LIMIT,
        min_score: float = search_utils.DEFAULT_MIN_SCORE,
    ) -> list[Any]:
        return await search_utils.node_similarity_search(
            self._plain, search_vector, search_filter, group_ids, limit, min_score
        )

    async def episode_fulltext_search(
        self,
        driver: Any,
        query: str,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = search_utils.RELEVANT_SCHEMA_LIMIT,
    ) -> list[Any]:
        return await search_utils.episode_fulltext_search(
            self._plain, query, search_filter, group_ids, limit
        )


def _filters(
    source_node_uuid: str | None,
    target_node_uuid: str | None,
    search_filter: SearchFilters,
    group_ids: list[str] | None,
) -> tuple[list[str], dict[str, Any]]:
    """Graphiti's WHERE clauses and parameters for edge_similarity_search, over e, n, m."""
    filters, params = edge_search_filter_query_constructor(search_filter, FalkorDriver.provider)
    if group_ids is not None:
        filters.append("e.group_id IN $group_ids")
        params["group_ids"] = group_ids
        # As in Graphiti's scan, the endpoints only count with group ids.
        if source_node_uuid is not None:
            filters.append("n.uuid = $source_uuid")
            params["source_uuid"] = source_node_uuid
        if target_node_uuid is not None:
            filters.append("m.uuid = $target_uuid")
            params["target_uuid"] = target_node_uuid
    return filters, params


async def use_fact_index(driver: FalkorDriver, dimension: int) -> None:
    """Search `driver`'s graph's facts by a vector index of `dimension`, made if missing."""
    search = FactVectorSearch(driver, dimension)
    await search.ensure_index()
    driver.search_interface = search

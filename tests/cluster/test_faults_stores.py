"""Fault injection, the stores beside PostgreSQL (issue 19, points 9 and 13): the Redis server
with the FalkorDB module, which is both the replicas' AGENTIC_RAG_GRAPH_URL (the knowledge
graph) and their REDIS_URL (the rate limits' counts), stopped under a cluster whose clients
carry API keys.

- While FalkorDB is down a graph call, over A2A or MCP, is refused with one clear sentence
  naming the database; each replica logs that once, not a traceback per call, and the same
  call succeeds once FalkorDB is back, without a restart.
- While Redis is down requests are served without rate limits (not refused with 503), with
  one warning per replica; once Redis is back a key over its limit is refused (429) again.

Real servers, started once for the module (tests/support/cluster.py).
"""

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.cluster import Answers, Cluster, ExternalPostgres, cluster, wait_for
from tests.support.mcp import keyed_client, text_of
from tests.support.outcomes import failure, output
from tests.support.security import create_key

TIGHT_PER_MINUTE = 5  # the requests the tenant "tight" may make in a minute
FACT = "Lighthouse 9 guards the western shoal"


@dataclass
class Keyed:
    cluster: Cluster
    acme: str  # an API key of the tenant acme, under the default limits
    tight: str  # an API key of the tenant tight, limited to TIGHT_PER_MINUTE


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keyed]:
    limits = {"tight": {"per_minute": TIGHT_PER_MINUTE, "burst": TIGHT_PER_MINUTE}}
    postgres = ExternalPostgres()
    try:
        with cluster(
            tmp_path_factory.mktemp("cluster"),
            postgres,
            AGENTIC_RAG_RATE_LIMIT_TENANTS=json.dumps(limits),
        ) as started:
            keys = Keyed(
                started,
                create_key(started.database_url, "acme", ["read", "write"]),
                create_key(started.database_url, "tight", ["read", "write"]),
            )
            for replica in started.replicas:  # each leaves open mode at its next request
                anonymous = Answers(replica.url)
                wait_for(
                    f"{replica.name} asks for credentials",
                    lambda client=anonymous: refused_code(client) == -32010,  # type: ignore[misc]
                    30,
                )
                anonymous.close()
            yield keys
    finally:
        postgres.close()


def refused_code(client: Answers) -> int | None:
    answer = client.call("tasks/get", {"id": "absent"})
    assert answer is not None
    return answer["error"]["code"] if "error" in answer else None


def client(url: str, key: str) -> Answers:
    answers = Answers(url)
    answers.client.headers["X-API-Key"] = key
    return answers


def search_facts_over_mcp(url: str, key: str) -> tuple[bool, str]:
    """search_memory_facts called over MCP: whether it is an error, and its text."""

    async def call() -> tuple[bool, str]:
        async with keyed_client(f"{url}/mcp", key) as session:
            result = await session.call_tool("search_memory_facts", {"query": "western shoal"})
        return result.is_error, text_of(result)

    return asyncio.run(call())


def unreachable(cluster: Cluster) -> str:
    return f"the knowledge graph's database at {cluster.falkordb.url} is unreachable; retry later"


def test_falkordb_stopped_refuses_graph_calls_clearly_and_they_work_again_once_it_is_back(
    keyed: Keyed,
) -> None:
    running = keyed.cluster
    a_replica, b_replica = running.replicas
    a, b = client(a_replica.url, keyed.acme), client(b_replica.url, keyed.acme)
    added = a.skill(
        "add_triplet",
        source_node_name="Lighthouse 9",
        edge_name="GUARDS",
        fact=FACT,
        target_node_name="Western shoal",
    )
    assert added is not None and added["result"]["status"]["state"] == "completed", added
    logged = [replica.log_size() for replica in running.replicas]

    with running.falkordb.outage():
        for _ in range(3):
            found = b.skill("search_memory_facts", query="western shoal")
            assert found is not None and "result" in found, found
            assert failure(found["result"]) == unreachable(running)
        is_error, text = search_facts_over_mcp(a_replica.url, keyed.acme)
        assert is_error and text == f"tool 'search_memory_facts' failed: {unreachable(running)}"
        searched = a.skill("hybrid_retrieve", query="lighthouse", top_k=3)
        assert searched is not None and searched["result"]["status"]["state"] == "completed"

    again = b.skill("search_memory_facts", query="western shoal")
    assert again is not None and FACT in json.dumps(output(again["result"])), again
    is_error, text = search_facts_over_mcp(a_replica.url, keyed.acme)
    assert not is_error and FACT in text, text
    a.close()
    b.close()

    database = f"the knowledge graph's database at {running.falkordb.url}"
    b_log = b_replica.log_since(logged[1])
    assert b_log.count(f"{database} failed (ConnectionError: ") == 1, b_log
    assert b_log.count(f"{database} works again after 3 failed attempts") == 1, b_log
    for replica, offset in zip(running.replicas, logged, strict=True):
        log = replica.log_since(offset)
        for line in ("Traceback", "skill search_memory_facts failed", "Error executing"):
            assert line not in log, f"{line!r} logged by {replica.name}:\n{log}"


def test_redis_stopped_serves_requests_without_rate_limits_and_they_count_again_once_it_is_back(
    keyed: Keyed,
) -> None:
    running = keyed.cluster
    replica = running.replicas[0]
    tight, acme = client(replica.url, keyed.tight), client(replica.url, keyed.acme)
    limits = f"rate limits: Redis (REDIS_URL {running.falkordb.url}/0)"

    def counting() -> bool:
        """Whether the replica's limits count (an earlier outage may not have ended for them:
        Redis is tried again at a request a second after a failure)."""
        assert refused_code(acme) == -32001
        log = replica.log_since(0)
        return log.count(f"{limits} failed") == log.count(f"{limits} works again")

    wait_for("the replica's rate limits count", counting, 30)
    logged = replica.log_size()

    with running.falkordb.outage():
        # Twice the tenant's limit, each past authentication and the limits: answered by the
        # A2A method itself (no such task), neither 503 nor 429.
        for _ in range(2 * TIGHT_PER_MINUTE):
            assert refused_code(tight) == -32001
        searched = acme.skill("hybrid_retrieve", query="lighthouse", top_k=3)
        assert searched is not None and searched["result"]["status"]["state"] == "completed"

    over_limit: dict[str, Any] = {}

    def refused_over_its_limit() -> bool:
        over_limit.update(tight.call("tasks/get", {"id": "absent"}) or {})
        return "error" in over_limit and over_limit["error"]["code"] != -32001

    wait_for("the tight key is refused over its limit", refused_over_its_limit, 60)
    assert over_limit["error"]["code"] == -32012, over_limit  # rate limited
    tight.close()
    acme.close()

    log = replica.log_since(logged)
    assert log.count(f"{limits} failed (ConnectionError: ") == 1, log
    assert log.count(f"{limits} works again after ") == 1, log
    assert "checking credentials failed" not in log, log  # authentication kept working

"""Fault injection in the agent network and the graph (issue 19, point 9): a replica killed with
`kill -9` while it delegates a task to a peer, the peer killed (and started again) while it runs
a delegated task, a replica killed while it runs a plan of several steps, and while it extracts
a graph episode. Two replicas of `agentic-rag serve` (processes with their own data
directories) share an external PostgreSQL and a Redis server with the FalkorDB module; the peer
of the delegations is the other replica, the graph's LLM the hosted-chat double (the one service
these machines cannot reach). After each fault, once the cluster is healthy again: every task
ended and none was lost, none ended twice, no job completed twice, no document or chunk was
stored twice, and every answer was a protocol answer (tests/support/cluster.py).
"""

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentic_rag.network.orchestration import STEP_TASKS
from tests.support.cluster import (
    Answers,
    Cluster,
    ExternalPostgres,
    Invariants,
    Replica,
    SlowSite,
    cluster,
    final_task,
    query,
    wait_for,
    worker_of,
)
from tests.support.graph import TEXT, GatedChat, queued_uuid
from tests.support.live import serve_in_thread

PAGES = 16
# A search that asks the LLM nothing (the double answers the graph's prompts only).
NO_LLM = {"answer": False, "use_reranking": False}


@pytest.fixture(scope="module")
def chat() -> Iterator[tuple[GatedChat, str]]:
    double = GatedChat()
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"


@pytest.fixture(scope="module")
def running(
    tmp_path_factory: pytest.TempPathFactory, chat: tuple[GatedChat, str]
) -> Iterator[Cluster]:
    postgres = ExternalPostgres()
    try:
        with cluster(
            tmp_path_factory.mktemp("cluster-network"),
            postgres,
            AGENTIC_RAG_LLM_BASE_URL=chat[1],
            AGENTIC_RAG_LLM_MODEL="recorded-model",
            AGENTIC_RAG_GRAPH_INGEST_RETRY_SECONDS="0",
            AGENTIC_RAG_PEERS_ALLOW_PRIVATE="127.0.0.1",
            AGENTIC_RAG_DELEGATION_POLL_SECONDS="0.2",
            # A peer that is down is asked again within 2 s (30 s by default).
            AGENTIC_RAG_DELEGATION_BACKOFF_MAX_SECONDS="2",
        ) as started:
            yield started
    finally:
        postgres.close()


@pytest.fixture
def site() -> Iterator[tuple[SlowSite, str]]:
    pages = SlowSite(PAGES, delay=0.3)
    with serve_in_thread(pages.app()) as url:
        yield pages, url


@pytest.fixture(scope="module")
def peer(running: Cluster) -> str:
    """Replica B, registered (in the shared database) as a peer by its card: its id."""
    a, b = running.replicas
    response = httpx.post(f"{a.url}/a2a/agents/register", json={"card_url": b.url}, timeout=60)
    assert response.status_code == 201, response.text
    agent_id: str = response.json()["agent_id"]
    return agent_id


def sent(answer: dict[str, Any] | None) -> str:
    """The id of the task a non-blocking send created."""
    assert answer is not None and "result" in answer, answer
    task_id: str = answer["result"]["id"]
    return task_id


def result(task: dict[str, Any]) -> dict[str, Any]:
    """The data of a completed task's result (its last artifact; partial ones come before)."""
    assert task["status"]["state"] == "completed", task["status"]
    (data,) = [p["data"] for p in task["artifacts"][-1]["parts"] if p["kind"] == "data"]
    assert isinstance(data, dict)
    return data


def accepted_remote_task(cluster: Cluster, delegation_id: str) -> str:
    """The id of the peer's task, once the peer accepted the delegation."""
    remote: list[str] = []

    def accepted() -> bool:
        rows = query(
            cluster.database_url,
            "SELECT remote_task_id FROM delegations WHERE id = $1",
            delegation_id,
        )
        remote.extend(r["remote_task_id"] for r in rows if r["remote_task_id"])
        return bool(remote)

    wait_for("the peer accepted the delegation", accepted, 120, cluster.logs())
    return remote[0]


def peer_tasks(cluster: Cluster, delegation_id: str) -> list[str]:
    """The tasks the peer made of messages of this delegation (its correlation id)."""
    rows = query(
        cluster.database_url,
        "SELECT id FROM tasks WHERE task -> 'history' -> 0 -> 'metadata' ->> 'correlationId' = $1",
        delegation_id,
    )
    return [row["id"] for row in rows]


def replica_of_worker(cluster: Cluster, clients: tuple[Answers, Answers], worker: int) -> Replica:
    """The replica whose worker id is `worker`: each runs the blocking sends it is given, so
    the worker of a `help` task sent to it names it."""
    for replica, client in zip(cluster.replicas, clients, strict=True):
        answer = client.skill("help")
        assert answer is not None and "result" in answer, answer
        if worker_of(cluster, answer["result"]["id"]) == worker:
            return replica
    raise AssertionError(f"no replica runs as worker {worker}\n{cluster.logs()}")


def test_a_replica_killed_mid_delegation_is_taken_over_and_follows_the_same_remote_task(
    running: Cluster, answers: tuple[Answers, Answers], site: tuple[SlowSite, str], peer: str
) -> None:
    a, b = answers
    pages, url = site
    invariants = Invariants(running)
    task_id = sent(
        a.skill(
            "delegate_task",
            blocking=False,
            target_agent=peer,
            capability_name="ingest_url",
            parameters={"url": f"{url}/0", "depth": 1, "max_pages": 50},
            timeout_seconds=240,
        )
    )
    remote = accepted_remote_task(running, task_id)
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 3, 180, running.logs())
    running.replicas[0].kill()

    task = final_task(b, task_id, running)
    delegated = result(task)
    # The replica that took it over followed the remote task the dead one had started: the
    # message was not sent to the peer again, and the peer's crawl ran once.
    assert delegated["remote_task_id"] == remote
    assert delegated["peer_id"] == peer
    running.heal()
    invariants.hold([task_id, remote])
    assert invariants.documents(url) == PAGES
    assert peer_tasks(running, task_id) == [remote]
    fetched_again = sum(n - 1 for path, n in pages.served.items() if path != "/robots.txt")
    assert fetched_again == 0, pages.served


def test_a_peer_killed_mid_delegation_is_waited_for_and_its_task_followed_to_its_end(
    running: Cluster, answers: tuple[Answers, Answers], site: tuple[SlowSite, str], peer: str
) -> None:
    a, _ = answers
    pages, url = site
    invariants = Invariants(running)
    task_id = sent(
        a.skill(
            "delegate_task",
            blocking=False,
            target_agent=peer,
            capability_name="ingest_url",
            parameters={"url": f"{url}/0", "depth": 1, "max_pages": 50},
            timeout_seconds=240,
        )
    )
    remote = accepted_remote_task(running, task_id)
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 3, 180, running.logs())
    running.replicas[1].kill()  # the peer: its crawl is taken over by the other replica
    running.heal()  # the peer answers again, on the same address, some seconds later

    task = final_task(a, task_id, running)
    # The peer accepted the task, which outlives the peer's restart: the delegation waited for
    # the peer to answer again and followed that task to its end, not failed meanwhile.
    delegated = result(task)
    assert (delegated["remote_task_id"], delegated["state"]) == (remote, "completed")
    assert peer_tasks(running, task_id) == [remote]
    invariants.hold([task_id, remote])
    assert invariants.documents(url) == PAGES
    fetched_again = sum(n - 1 for path, n in pages.served.items() if path != "/robots.txt")
    assert fetched_again <= 4, pages.served


def test_a_replica_killed_mid_orchestration_is_taken_over_and_each_step_runs_once(
    running: Cluster, answers: tuple[Answers, Answers], site: tuple[SlowSite, str], peer: str
) -> None:
    a, b = answers
    pages, url = site
    invariants = Invariants(running)
    plan = [
        {"id": "crawl", "skill": "ingest_url", "input": {"url": f"{url}/0", "depth": 1}},
        {
            "id": "search",
            "skill": "hybrid_retrieve",
            "input": {"query": "lighthouse lamp nautical miles", "top_k": 3, **NO_LLM},
            "depends_on": ["crawl"],
        },
        {
            "id": "ask_peer",
            "capability": "hybrid_retrieve",
            "peer": peer,
            "input": {"query": "lighthouse built in year", "top_k": 2, **NO_LLM},
            "depends_on": ["crawl"],
        },
    ]
    task_id = sent(a.skill("orchestrate", blocking=False, goal="survey the coast", plan=plan))
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 3, 180, running.logs())
    # A crash may also come between the two writes that start a step (PlanStore.start_step,
    # then the step's task): too short a window for a signal to hit, so it is made here. While
    # the replica is paused (its lease holds: nobody takes over), "search" is recorded started
    # as start_step records it, with the id its task would have; then the replica is killed.
    running.replicas[0].pause()
    query(
        running.database_url,
        "UPDATE plan_steps SET state = 'running', task_id = $2, attempt = 0"
        " WHERE plan_id = $1 AND step_id = 'search'",
        task_id,
        uuid.uuid5(STEP_TASKS, f"{task_id}\nsearch\n0").hex,
    )
    running.replicas[0].kill()

    task = final_task(b, task_id, running)
    outcome = result(task)
    assert outcome["state"] == "completed", outcome
    assert [(s["id"], s["state"]) for s in outcome["steps"]] == [
        ("crawl", "completed"),
        ("search", "completed"),
        ("ask_peer", "completed"),
    ]
    steps = query(
        running.database_url,
        "SELECT step_id, state, attempt, task_id FROM plan_steps WHERE plan_id = $1",
        task_id,
    )
    # The crawl's task (resumable) was taken over, not started again as a new attempt; the
    # search, recorded started without a task, was started as that attempt.
    assert {r["step_id"]: r["attempt"] for r in steps} == {"crawl": 0, "search": 0, "ask_peer": 0}
    running.heal()
    invariants.hold([task_id, *(r["task_id"] for r in steps)])
    assert invariants.documents(url) == PAGES
    fetched_again = sum(n - 1 for path, n in pages.served.items() if path != "/robots.txt")
    assert fetched_again <= 4, pages.served


def test_a_replica_killed_mid_episode_extraction_leaves_the_episode_to_the_other(
    running: Cluster, answers: tuple[Answers, Answers], chat: tuple[GatedChat, str]
) -> None:
    double, _ = chat
    a, b = answers
    group = f"local:coast-{uuid.uuid4().hex[:8]}"  # a sub-group of the tenant `local`
    asked = len(double.bodies)
    double.gate.clear()  # the LLM answers nothing until the extracting replica is dead
    try:
        added = a.skill("add_memory", name="Team news", episode_body=TEXT, group_id=group)
        assert added is not None and "result" in added, added
        episode = queued_uuid(result(added["result"])["result"])
        wait_for("the LLM is asked", lambda: len(double.bodies) > asked, 120, running.logs())
        (row,) = query(
            running.database_url,
            "SELECT state, worker, attempts FROM graph_episodes WHERE uuid = $1",
            episode,
        )
        assert (row["state"], row["attempts"]) == ("processing", 1), dict(row)
        extracting = replica_of_worker(running, answers, int(row["worker"]))
        extracting.kill()
    finally:
        double.gate.set()
    survivor = b if extracting is running.replicas[0] else a

    def done() -> bool:
        (now,) = query(
            running.database_url, "SELECT state FROM graph_episodes WHERE uuid = $1", episode
        )
        assert now["state"] != "failed", dict(now)
        return bool(now["state"] == "done")

    wait_for(f"episode {episode} is extracted", done, 180, running.logs())
    (row,) = query(
        running.database_url,
        "SELECT attempts, worker, error FROM graph_episodes WHERE uuid = $1",
        episode,
    )
    assert (row["attempts"], row["worker"], row["error"]) == (2, None, None), dict(row)
    found = survivor.skill("get_episodes", group_ids=[group], max_episodes=10)
    assert found is not None and "result" in found, found
    episodes = result(found["result"])["result"]["episodes"]
    assert [(e["uuid"], e["status"]) for e in episodes] == [(episode, "done")]
    running.heal()
    Invariants(running).hold([added["result"]["id"]])

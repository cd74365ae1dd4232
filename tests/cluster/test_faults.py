"""Fault injection (issue 19, point 9): two replicas of `agentic-rag serve`, each a process with
its own data directory, share an external PostgreSQL and a Redis server with the FalkorDB module
(REDIS_URL and AGENTIC_RAG_GRAPH_URL); the tests kill, pause and cut them off, and then check
that every answer was a protocol answer and, once the cluster is healthy again, that no task is
left unfinished or lost, no job completed twice, no document or chunk stored twice.

Real servers throughout, started once for the module (tests/support/cluster.py).
"""

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import (
    FINAL,
    Answers,
    Cluster,
    ExternalPostgres,
    Invariants,
    SlowSite,
    cluster,
    query,
    wait_for,
)
from tests.support.live import serve_in_thread
from tests.support.outcomes import output

PAGES = 24


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    postgres = ExternalPostgres()
    try:
        with cluster(tmp_path_factory.mktemp("cluster"), postgres) as started:
            yield started
    finally:
        postgres.close()


@pytest.fixture
def answers(running: Cluster) -> Iterator[tuple[Answers, Answers]]:
    a, b = (Answers(replica.url) for replica in running.replicas)
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def site() -> Iterator[tuple[SlowSite, str]]:
    pages = SlowSite(PAGES, delay=0.3)
    with serve_in_thread(pages.app()) as url:
        yield pages, url


def start_crawl(client: Answers, url: str) -> str:
    """A crawl of the site, sent without waiting; its task id."""
    answer = client.skill("ingest_url", blocking=False, url=f"{url}/0", depth=1, max_pages=50)
    assert answer is not None and "result" in answer, answer
    task_id: str = answer["result"]["id"]
    return task_id


def final_task(client: Answers, task_id: str, cluster: Cluster) -> dict[str, Any]:
    """The task once it has ended, read through `client`."""
    ended: dict[str, Any] = {}

    def has_ended() -> bool:
        task = client.task(task_id)
        if task is not None and task["status"]["state"] in FINAL:
            ended.update(task)
        return bool(ended)

    wait_for(f"task {task_id} ends", has_ended, 300, cluster.logs())
    return ended


def worker_of(cluster: Cluster, task_id: str) -> int:
    (row,) = query(cluster.database_url, "SELECT worker FROM tasks WHERE id = $1", task_id)
    return int(row["worker"])


def test_a_replica_killed_mid_crawl_is_taken_over_and_nothing_is_stored_twice(
    running: Cluster, answers: tuple[Answers, Answers], site: tuple[SlowSite, str]
) -> None:
    a, b = answers
    pages, url = site
    invariants = Invariants(running)
    task_id = start_crawl(a, url)
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 4, 180, running.logs())
    running.replicas[0].kill()

    task = final_task(b, task_id, running)
    assert output(task)["source_id"]
    running.heal()
    invariants.hold([task_id])
    assert invariants.documents(url) == PAGES
    # Pages stored before the kill were not fetched again: at most those in flight were.
    fetched_again = sum(n - 1 for path, n in pages.served.items() if path != "/robots.txt")
    assert fetched_again <= 4, pages.served


def test_a_paused_replica_keeps_its_tasks_and_finishes_them_when_resumed(
    running: Cluster, answers: tuple[Answers, Answers], site: tuple[SlowSite, str]
) -> None:
    a, b = answers
    _, url = site
    invariants = Invariants(running)
    task_id = start_crawl(a, url)
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 3, 180, running.logs())
    owner = worker_of(running, task_id)
    running.replicas[0].pause()
    try:
        # Many sweeps of the other replica (AGENTIC_RAG_WORKER_SWEEP_SECONDS=1) while paused:
        # the paused replica's lease is live (its connection is open), so none takes it over.
        time.sleep(6)
        assert worker_of(running, task_id) == owner
        task = b.task(task_id)
        assert task is not None and task["status"]["state"] == "working", task
    finally:
        running.replicas[0].resume()

    task = final_task(a, task_id, running)
    assert output(task)["source_id"]
    assert worker_of(running, task_id) == owner
    running.heal()
    invariants.hold([task_id])
    assert invariants.documents(url) == PAGES


class Load:
    """Searches, blocking and not, to both replicas, each kind from a thread of its own (a
    blocking send may wait for its task's outcome to be stored), until stopped; every answer
    checked (Answers.call); the first failed check is raised by `stop`."""

    def __init__(self, clients: tuple[Answers, Answers], cluster: Cluster) -> None:
        self.cluster, self.task_ids = cluster, list[str]()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(client, blocking), daemon=True)
            for client in clients
            for blocking in (True, False)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, client: Answers, blocking: bool) -> None:
        while not self._stop.is_set():
            try:
                sent = client.skill(
                    "hybrid_retrieve", blocking=blocking, query="lighthouse lamp", top_k=3
                )
                if sent is not None and "result" in sent:
                    self.task_ids.append(sent["result"]["id"])
            except BaseException as error:
                self.errors.append(error)
                return
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(150)
        if self.errors:
            raise AssertionError(f"{self.errors[0]}\n{self.cluster.logs()}") from self.errors[0]


@pytest.mark.parametrize("outage_seconds", [5])
def test_postgresql_stopped_under_load_refuses_with_protocol_errors_and_leaves_no_task_stuck(
    running: Cluster,
    answers: tuple[Answers, Answers],
    site: tuple[SlowSite, str],
    outage_seconds: float,
) -> None:
    a, b = answers
    _, url = site
    invariants = Invariants(running)
    task_id = start_crawl(b, url)
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 3, 180, running.logs())
    load = Load(answers, running)
    try:
        with running.postgres.outage():
            time.sleep(outage_seconds)  # the fault's length, not a wait for a result
        wait_for("both replicas ready", lambda: all(r.ready() for r in running.replicas), 120)
    finally:
        load.stop()
    refused = [x for c in answers for x in c.answered if "error" in x]
    assert refused, "no request was refused while the database was down"

    final_task(a, task_id, running)
    running.heal()
    invariants.hold([task_id, *load.task_ids])


def test_falkordb_stopped_fails_graph_calls_with_a_protocol_answer_and_nothing_else(
    running: Cluster, answers: tuple[Answers, Answers]
) -> None:
    a, b = answers
    added = a.skill(
        "add_triplet",
        source_node_name="Lighthouse 7",
        edge_name="GUARDS",
        fact="Lighthouse 7 guards the northern reef",
        target_node_name="Northern reef",
    )
    assert added is not None and added["result"]["status"]["state"] == "completed", added
    found = b.skill("search_memory_facts", query="northern reef")
    assert found is not None
    assert "northern reef" in str(output(found["result"])).lower()  # one graph for both

    with running.falkordb.outage():
        graph = b.skill("search_memory_facts", query="northern reef")
        assert graph is not None
        if "result" in graph:  # or a JSON-RPC error: both are protocol answers
            assert graph["result"]["status"]["state"] == "failed", graph
        search = a.skill("hybrid_retrieve", query="lighthouse lamp", top_k=3)
        assert search is not None and search["result"]["status"]["state"] == "completed", search

    again = b.skill("search_memory_facts", query="northern reef")
    assert again is not None
    assert "northern reef" in str(output(again["result"])).lower()
    running.heal()
    Invariants(running).hold([])

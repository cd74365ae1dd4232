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

import pytest

from agentic_rag.storage.cluster import WORKER_LOCK_CLASS
from tests.support.cluster import (
    LEASE_SECONDS,
    Answers,
    Cluster,
    ExternalPostgres,
    Invariants,
    SlowSite,
    cluster,
    final_task,
    query,
    wait_for,
    worker_of,
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
    summary = output(task)
    assert summary["source_id"]
    running.heal()
    invariants.hold([task_id])
    assert invariants.documents(url) == PAGES
    # The taker's summary counts the whole job: the pages the killed replica stored too.
    assert summary["ingested"] == len(summary["documents"]) == PAGES
    # Pages stored before the kill were not fetched again: at most those in flight were.
    fetched_again = sum(n - 1 for path, n in pages.served.items() if path != "/robots.txt")
    assert fetched_again <= 4, pages.served


def cut_off(cluster: Cluster, worker: int) -> None:
    """End the database session that holds `worker`'s lease, as a network failure would."""
    (row,) = query(
        cluster.database_url,
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_locks WHERE locktype = 'advisory'"
        " AND granted AND classid = $1 AND objid::bigint = $2 AND objsubid = 2",
        WORKER_LOCK_CLASS,
        worker,
    )
    assert row["n"] == 1


def test_a_paused_replica_cut_off_for_less_than_its_lease_keeps_its_tasks(
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
        # Its lease's connection ends while it is paused: its lock is gone. Sweeps of the other
        # replica (every second) during a pause longer than that but shorter than the lease
        # spare it: they saw it holding its lease within LEASE_SECONDS.
        cut_off(running, owner)
        time.sleep(LEASE_SECONDS / 2)
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


def test_a_replica_cut_off_past_its_lease_is_taken_over_and_drops_the_task_when_back(
    running: Cluster, answers: tuple[Answers, Answers], site: tuple[SlowSite, str]
) -> None:
    a, b = answers
    _, url = site
    invariants = Invariants(running)
    task_id = start_crawl(a, url)
    wait_for("a few pages stored", lambda: invariants.documents(url) >= 3, 180, running.logs())
    owner = worker_of(running, task_id)
    paused = running.replicas[0]
    logged = paused.log_size()
    paused.pause()
    try:
        cut_off(running, owner)
        wait_for(
            "the other replica takes the task over once the lease is gone",
            lambda: worker_of(running, task_id) != owner,
            LEASE_SECONDS * 10,
            running.logs(),
        )
    finally:
        paused.resume()

    task = final_task(b, task_id, running)
    assert output(task)["source_id"]
    # Back, the replica took its lease again and stopped its run of the task, storing nothing.
    wait_for(
        "the replica stops the task it lost",
        lambda: (
            "taken over by another worker while this one had lost its lease"
            in paused.log_since(logged)
        ),
        60,
        paused.log_since(logged),
    )
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


# Lines a replica may log at most once per outage (once per change of state), not per attempt.
ONCE_PER_OUTAGE = (
    "graph ingestion: looking for queued episodes failed",
    "lost the database connection that holds its lease",
    "taking its lease again failed",
    "the sweep failed",
    "journal: writing task events failed",
    "tasks: running skills and storing their outcomes failed",
    "A2A calls: the database failed",
)
NEVER = (
    "exception was never retrieved",  # a future or task whose failure nobody looked at
    "internal error answering a JSON-RPC request",  # an outage is answered as one, not as a bug
    "Internal Server Error",
)


@pytest.mark.parametrize("outage_seconds", [5, 60])
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
    logged = [replica.log_size() for replica in running.replicas]
    load = Load(answers, running)
    try:
        with running.postgres.outage():
            stopped = time.monotonic()
            time.sleep(outage_seconds)  # the fault's length, not a wait for a result
            restarted = time.monotonic()
        wait_for("both replicas ready", lambda: all(r.ready() for r in running.replicas), 120)
    finally:
        load.stop()
    refused = [x for c in answers for x in c.answered if "error" in x]
    assert refused, "no request was refused while the database was down"
    # Every call under way in the first half of the outage (blocking sends among them, whose
    # task's outcome cannot be stored) was answered while the database was still down.
    middle = stopped + (restarted - stopped) / 2
    held = [
        (method, round(answered - stopped, 1))
        for c in answers
        for method, sent, answered in c.calls
        if sent < middle and answered > stopped and answered > restarted
    ]
    assert not held, f"calls answered only once the database was back: {held}"

    # A cancel of the crawl that ran on B through the outage (whose outcome B may not yet
    # have stored): it ends, or has ended, never left working.
    canceled = a.call("tasks/cancel", {"id": task_id})
    assert canceled is not None, "replica A does not answer"
    if "error" in canceled:
        assert canceled["error"]["code"] == -32002, canceled  # not cancelable: it has ended
    else:
        assert canceled["result"]["status"]["state"] == "canceled", canceled
    final_task(a, task_id, running)
    running.heal()
    invariants.hold([task_id, *load.task_ids])

    for replica, offset in zip(running.replicas, logged, strict=True):
        log = replica.log_since(offset)
        for line in ONCE_PER_OUTAGE:
            assert log.count(line) <= 1, f"{line!r} logged {log.count(line)} times:\n{log}"
        for line in NEVER:
            assert line not in log, f"{line!r} logged:\n{log}"


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

"""A cluster for the fault-injection tests (tests/cluster/), made of real servers the tests start
and break:

- `ExternalPostgres`: the project's PostgreSQL binaries run as a server the service does not
  own (the replicas reach it by DATABASE_URL); `outage` stops it (fast shutdown: sessions end)
  and starts it again on the same socket;
- `FalkorServer`: a redis-server with the FalkorDB module on a TCP port of 127.0.0.1, both the
  replicas' REDIS_URL and their AGENTIC_RAG_GRAPH_URL; it can be stopped and started again;
- `Replica`: `agentic-rag serve` as a process of its own, with its own data directory, that a
  test may kill (-9), pause (SIGSTOP), resume and start again;
- `SlowSite`: pages a crawl follows, each served after a pause, so that a fault lands mid-crawl;
- `Answers`: a JSON-RPC client that checks every answer is a protocol answer, never a bare 500;
- `Invariants`: what must hold once the cluster is healthy again (no unfinished task, no lost
  task, no job completed twice, no duplicate document or chunk).
"""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentic_rag.graph.embedded import binaries
from agentic_rag.storage.embedded import EmbeddedPostgres, postgres_processes
from tests.support.databases import create_database
from tests.support.knowledge import page
from tests.support.live import free_port
from tests.support.rpc import text_message

BIN = Path(sys.executable).parent
START_SECONDS = 120  # a replica loads the embedding model; the machine may be busy
SETTLE_SECONDS = 180  # for every task to end once the cluster is healthy again
LEASE_SECONDS = 8  # the replicas' AGENTIC_RAG_WORKER_LEASE_SECONDS (their sweeps: every second)


def wait_for(what: str, condition: Callable[[], bool], seconds: float, log: str = "") -> None:
    """Poll `condition` until it holds; fail naming `what` (and the logs) at the deadline."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s\n{log}"
        time.sleep(0.2)


def query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def fetch() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(fetch())


# -- the servers ------------------------------------------------------------------------------


class ExternalPostgres:
    """A PostgreSQL server the replicas do not own, in a directory of its own."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="agentic-rag-cluster-pg-"))
        self.server = EmbeddedPostgres(self.root)
        self.pgdata = self.server.pgdata
        self.dsn = self.server.start()

    def database(self) -> str:
        return create_database(self.dsn, f"cluster_{uuid.uuid4().hex[:12]}")

    @contextmanager
    def outage(self) -> Iterator[None]:
        """Stopped while the block runs; started again on the same socket after it."""
        self.server.stop()
        try:
            yield
        finally:
            assert self.server.start() == self.dsn

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Every process of the server stopped (SIGSTOP) while the block runs, resumed
        (SIGCONT) after it, whatever happens."""
        stopped: set[int] = set()
        try:
            # Again until none is new: a backend forked while the postmaster was being stopped.
            while new := {p for p, d in postgres_processes().items() if d == self.pgdata} - stopped:
                for pid in new:
                    os.kill(pid, signal.SIGSTOP)
                stopped |= new
            yield
        finally:
            for pid in stopped:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def close(self) -> None:
        self.server.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "ExternalPostgres":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class FalkorServer:
    """redis-server with the FalkorDB module on 127.0.0.1, its data in an append-only file."""

    def __init__(self, directory: Path) -> None:
        self.directory, self.port = directory, free_port()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        server, module = binaries()
        config = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(self.directory),
            "appendonly": "yes",
            "save": "",
            "daemonize": "no",
            "logfile": str(self.directory / "redis.log"),
            "loadmodule": str(module),
        }
        arguments = [arg for key, value in config.items() for arg in (f"--{key}", value)]
        self._process = subprocess.Popen(
            [str(server), *arguments], cwd=self.directory, stdin=subprocess.DEVNULL
        )
        try:
            wait_for("FalkorDB answers", self._answers, 60, self._log())
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    @contextmanager
    def outage(self) -> Iterator[None]:
        self.stop()
        try:
            yield
        finally:
            self.start()

    def _answers(self) -> bool:
        assert self._process is not None and self._process.poll() is None, self._log()
        try:
            return httpx.post(f"http://127.0.0.1:{self.port}", timeout=1) is not None
        except httpx.RemoteProtocolError:
            return True  # something listens (Redis does not speak HTTP)
        except httpx.TransportError:
            return False

    def _log(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


class Replica:
    """`agentic-rag serve` in a process of its own, on its own port and data directory."""

    def __init__(self, name: str, directory: Path, environment: dict[str, str]) -> None:
        self.name, self.port = name, free_port()
        directory.mkdir(parents=True, exist_ok=True)
        self.data_dir = directory / "data"
        self.log_path = directory / "serve.log"
        self.url = f"http://127.0.0.1:{self.port}"
        self._environment = environment
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [str(BIN / "agentic-rag"), "serve", "--port", str(self.port)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--data-dir", str(self.data_dir)],
                env=self._environment,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(f"replica {self.name} is ready", self.ready, START_SECONDS, self.log())

    def ready(self) -> bool:
        assert self.running, f"replica {self.name} ended:\n{self.log()}"
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (after SIGCONT, in case it is paused); SIGKILL if it does not end."""
        if not self.running:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)

    def log(self) -> str:
        if not self.log_path.exists():
            return ""
        return f"-- {self.name}'s log --\n" + self.log_path.read_text(errors="replace")[-6000:]

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_since(self, offset: int) -> str:
        """What the replica logged after its log was `offset` bytes long (`log_size`)."""
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")


class Cluster:
    """PostgreSQL, FalkorDB (also the Redis of rate limits) and two replicas sharing them."""

    def __init__(self, root: Path, postgres: ExternalPostgres, **settings: str) -> None:
        self.postgres, self.database_url = postgres, postgres.database()
        self.falkordb = FalkorServer(root / "falkordb")
        environment = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": f"{self.falkordb.url}/0",
            "AGENTIC_RAG_GRAPH_URL": self.falkordb.url,
            "AGENTIC_RAG_INGEST_ALLOW_PRIVATE": "127.0.0.1",
            "AGENTIC_RAG_INGEST_HOST_INTERVAL_SECONDS": "0",
            "AGENTIC_RAG_WORKER_SWEEP_SECONDS": "1",
            # A replica cut off from the database keeps its tasks this long (sweeps spare it).
            "AGENTIC_RAG_WORKER_LEASE_SECONDS": str(LEASE_SECONDS),
            "AGENTIC_RAG_LOG_FORMAT": "text",
            **settings,
        }
        self.replicas = [
            Replica(name, root / name, environment) for name in ("replica-a", "replica-b")
        ]
        try:
            for replica in self.replicas:
                replica.start()
        except BaseException:
            self.close()  # what did start
            raise

    def logs(self) -> str:
        return "\n".join(replica.log() for replica in self.replicas)

    def heal(self) -> None:
        """Every replica running and not paused (a killed one is started again)."""
        for replica in self.replicas:
            if replica.running:
                replica.resume()
            else:
                replica.start()

    def close(self) -> None:
        for replica in self.replicas:
            replica.stop()
        self.falkordb.stop()


@contextmanager
def cluster(root: Path, postgres: ExternalPostgres, **settings: str) -> Iterator[Cluster]:
    """A started cluster on a new database of `postgres`; everything stopped after the block."""
    running = Cluster(root, postgres, **settings)
    try:
        yield running
    finally:
        running.close()


# -- what the replicas crawl ------------------------------------------------------------------


class SlowSite:
    """`pages` pages linked from the index /0, each served after `delay` seconds. Their texts
    are this site's own (the knowledge base stores a text seen at another URL only once)."""

    def __init__(self, pages: int, delay: float) -> None:
        self.pages, self.delay = pages, delay
        self.coast = uuid.uuid4().hex[:8]
        self.served: dict[str, int] = {}
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        async def serve_page(request: Request) -> Response:
            path = request.url.path
            with self._lock:
                self.served[path] = self.served.get(path, 0) + 1
            if path == "/robots.txt":
                return PlainTextResponse("User-agent: *\nAllow: /\n")
            number = int(path.strip("/") or 0) if path.strip("/").isdigit() else self.pages
            if number >= self.pages:
                return PlainTextResponse("not found", status_code=404)
            await asyncio.sleep(self.delay)
            links = [f"/{n}" for n in range(1, self.pages)] if number == 0 else []
            text = (
                f"Page {number} of coast {self.coast} tells of lighthouse number {number}, "
                f"built in year {1800 + number}, whose lamp is seen {number + 5} nautical "
                "miles away."
            )
            return HTMLResponse(page(f"Lighthouse {number}", text, *links))

        return Starlette(routes=[Route("/{path:path}", serve_page)])


# -- the clients' answers ---------------------------------------------------------------------


class Answers:
    """A JSON-RPC client of one replica that checks each answer is a protocol answer: a JSON-RPC
    result or error, whatever state the cluster is in. A refused connection is no answer (the
    replica is down), and is returned as None."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=120)
        self.answered: list[dict[str, Any]] = []
        # (method, when sent, when answered), on time.monotonic(): which calls an outage held.
        self.calls: list[tuple[str, float, float]] = []

    def call(self, method: str, params: Any) -> dict[str, Any] | None:
        body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
        sent = time.monotonic()
        try:
            response = self.client.post("/", json=body)
        except httpx.TransportError:
            return None
        finally:
            self.calls.append((method, sent, time.monotonic()))
        assert response.headers.get("content-type", "").startswith("application/json"), (
            f"{method}: HTTP {response.status_code}, not a JSON-RPC answer: {response.text[:300]}"
        )
        answer: dict[str, Any] = response.json()
        assert answer.get("jsonrpc") == "2.0" and ("result" in answer) != ("error" in answer), (
            f"{method}: HTTP {response.status_code}, not a JSON-RPC answer: {answer}"
        )
        if "error" in answer:
            assert isinstance(answer["error"].get("code"), int), answer
        self.answered.append(answer)
        return answer

    def skill(
        self, name: str, /, *, blocking: bool = True, **arguments: Any
    ) -> dict[str, Any] | None:
        message = text_message("")
        message["parts"] = [{"kind": "data", "data": {"skill": name, "arguments": arguments}}]
        return self.call(
            "message/send", {"message": message, "configuration": {"blocking": blocking}}
        )

    def task(self, task_id: str) -> dict[str, Any] | None:
        answer = self.call("tasks/get", {"id": task_id})
        return None if answer is None or "error" in answer else answer["result"]

    def close(self) -> None:
        self.client.close()


FINAL = {"completed", "failed", "canceled", "rejected"}
UNFINISHED = ("submitted", "working")


# -- the invariants ---------------------------------------------------------------------------


class Invariants:
    """What must hold in the cluster's database once it is healthy again."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.dsn = cluster, cluster.database_url

    def unfinished(self) -> list[tuple[str, str, int | None]]:
        rows = query(
            self.dsn,
            "SELECT id, state, worker FROM tasks WHERE state = ANY($1::text[]) ORDER BY id",
            list(UNFINISHED),
        )
        return [(row["id"], row["state"], row["worker"]) for row in rows]

    def hold(self, task_ids: list[str]) -> None:
        """No task left unfinished (within SETTLE_SECONDS), none lost, none ended twice; no
        ingestion job completed twice; no document or chunk stored twice."""
        wait_for(
            "every task ends once the cluster is healthy",
            lambda: not self.unfinished(),
            SETTLE_SECONDS,
            f"{self.unfinished()}\n{self.cluster.logs()}",
        )
        stored = {row["id"] for row in query(self.dsn, "SELECT id FROM tasks")}
        assert set(task_ids) <= stored, f"tasks lost: {set(task_ids) - stored}"
        ended_twice = query(
            self.dsn,
            "SELECT task_id, count(*) AS n FROM task_events WHERE kind = 'status-update' AND "
            "event -> 'status' ->> 'state' = ANY($1::text[]) GROUP BY tenant, task_id "
            "HAVING count(*) > 1",
            sorted(FINAL),
        )
        assert not ended_twice, f"tasks that ended twice: {[tuple(r) for r in ended_twice]}"
        jobs_twice = query(
            self.dsn,
            "SELECT request_key FROM ingest_jobs WHERE state = 'completed' "
            "GROUP BY tenant, request_key HAVING count(*) > 1",
        )
        assert not jobs_twice, f"{len(jobs_twice)} ingestion jobs completed twice"
        documents_twice = query(
            self.dsn,
            "SELECT uri FROM documents GROUP BY tenant, uri HAVING count(*) > 1",
        )
        assert not documents_twice, f"documents stored twice: {[r['uri'] for r in documents_twice]}"
        chunks_twice = query(
            self.dsn,
            "SELECT document_id FROM chunks GROUP BY tenant, document_id, position "
            "HAVING count(*) > 1",
        )
        assert not chunks_twice, f"{len(chunks_twice)} chunk positions stored twice"

    def documents(self, uri_prefix: str) -> int:
        rows = query(
            self.dsn, "SELECT count(*) AS n FROM documents WHERE uri LIKE $1", f"{uri_prefix}%"
        )
        return int(rows[0]["n"])


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
    """The worker id a task is recorded as run by."""
    (row,) = query(cluster.database_url, "SELECT worker FROM tasks WHERE id = $1", task_id)
    return int(row["worker"])

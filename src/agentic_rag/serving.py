"""Running the app under uvicorn: in this process, or as a supervisor of several workers.

Workers are processes that build the app from the environment (`app_factory`, an import
string): this process writes the settings the command line gave into the environment, starts
the embedded PostgreSQL once for all of them, and, for several workers, gives them a directory
where the Prometheus metrics of every worker add up (`PROMETHEUS_MULTIPROC_DIR`). Workers share
one database; tasks move between them as `agentic_rag.storage.cluster` says.

Each worker listens on a socket of its own bound with SO_REUSEPORT, so the kernel spreads new
connections evenly over the workers. (uvicorn's own supervisor shares one listening socket:
whichever worker wakes first accepts every connection then waiting, so a burst of keep-alive
connections can all land on one worker, which the benchmark showed.) SO_REUSEPORT also lets
any other process of the same user bind the port, so this process first claims the port
(`claim_port`): a second server on a port in use stops at start, in every mode.

What stops a start is said in one log line, and the exit status says which: 2 for settings
that may not be served (among them an embedded graph beside a shared database: a split brain,
config.split_graph_refusal), 3 (as uvicorn) for a port, a graph server or an app that cannot
start. The start-up log names each store, embedded or external (docs/operations.md, Replicas).
"""

import asyncio
import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any

import asyncpg
import uvicorn

from agentic_rag.bounded_http import BoundedHttpToolsProtocol
from agentic_rag.config import (
    Settings,
    environment,
    shared_limits_warning,
    split_graph_refusal,
    stores,
    without_credentials,
)
from agentic_rag.graph.embedded import EmbeddedFalkorDB, EmbeddedFalkorDBError
from agentic_rag.observability.logging import configure_logging
from agentic_rag.observability.metrics import METRICS_DIR_VARIABLE
from agentic_rag.running import advertise, local_url
from agentic_rag.storage.database import embedded_postgres
from agentic_rag.storage.embedded import EmbeddedPostgresError

log = logging.getLogger(__name__)

GRACEFUL_SECONDS = 10  # for open requests; the engine then gives skills its own grace period
REFUSED = 2  # the exit code when the settings may not be served (as for invalid settings)
STARTUP_FAILURE = 3  # the exit code of a server or worker that could not start (as uvicorn's)
GRAPH_CONNECT_SECONDS = 5.0


def serve(app_factory: str, overrides: dict[str, Any], *, graph: bool = True) -> None:
    """Serve `app_factory()` with the settings `overrides` on top of the environment's;
    `graph` False for an app without the knowledge graph (which then needs no FalkorDB)."""
    os.environ.update(environment(overrides))
    settings = Settings()  # invalid settings raise here, before anything starts
    workers = settings.workers
    log_config = configure_logging(settings.log_format, settings.log_level)
    uvicorn_config: dict[str, Any] = {
        "app": app_factory,
        "factory": True,
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "log_config": log_config,
        "timeout_graceful_shutdown": GRACEFUL_SECONDS,
        **http_options(settings),
    }
    with ExitStack() as stack:
        try:
            stack.enter_context(claim_port(settings.host, settings.port))
        except OSError as exc:
            log.error("cannot listen on %s:%s: %s", settings.host, settings.port, exc)
            raise SystemExit(STARTUP_FAILURE) from None
        dsn = settings.database_url
        if dsn is None:
            postgres = embedded_postgres(settings)
            stack.callback(postgres.stop)
            try:
                dsn = postgres.start()
            except EmbeddedPostgresError as exc:
                log.error("%s", exc)
                raise SystemExit(STARTUP_FAILURE) from None
            os.environ.update(environment({"database_url": dsn}))
            log.info("data in %s", settings.data_dir.resolve())
        log.info("%s", stores(settings, graph=graph))
        # `agentic-rag query` on this data directory and database asks this server (running.py).
        url = local_url(settings.host, settings.port)
        stack.enter_context(advertise(settings.data_dir, url, settings.database_url))
        refusal = (
            _exposure_refusal(settings, dsn)
            or _embedding_refusal(settings, dsn)
            or _local_llm_refusal(settings)
            or (split_graph_refusal(settings) if graph else None)
        )
        if refusal is not None:
            log.error("%s", refusal)
            raise SystemExit(REFUSED)
        if (limits := shared_limits_warning(settings)) is not None:
            log.warning("%s", limits)
        if graph and (unreachable := _graph_unreachable(settings)) is not None:
            log.error("%s", unreachable)
            raise SystemExit(STARTUP_FAILURE)
        if workers == 1:
            # uvicorn re-raises SIGTERM and SIGINT (Ctrl-C) after its graceful shutdown: exit
            # normally instead, so that the embedded PostgreSQL stops and no traceback shows.
            for stop in (signal.SIGTERM, signal.SIGINT):
                signal.signal(stop, lambda *_: sys.exit(0))
            server = _Server(uvicorn.Config(**uvicorn_config))
            server.run()
            if not server.started:
                raise SystemExit(STARTUP_FAILURE)
            return
        if graph and settings.graph_url is None:
            # The supervisor owns the embedded FalkorDB, as it owns the embedded PostgreSQL:
            # the workers use it (graph/embedded.py), and none of them takes it along when it
            # ends or is restarted.
            falkordb = EmbeddedFalkorDB(settings.data_dir)
            stack.callback(lambda: asyncio.run(falkordb.stop()))
            try:
                asyncio.run(falkordb.start())
            except EmbeddedFalkorDBError as exc:
                log.error("%s", exc)
                raise SystemExit(STARTUP_FAILURE) from None
        metrics = stack.enter_context(tempfile.TemporaryDirectory(prefix="agentic-rag-"))
        os.environ[METRICS_DIR_VARIABLE] = metrics
        if not _supervise(workers, uvicorn_config):
            raise SystemExit(STARTUP_FAILURE)


def http_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn options of the HTTP side: what one connection may hold (docs/security.md,
    Limits). The tests' servers (tests/support/live.py) run with them too."""
    return {
        "http": partial(
            BoundedHttpToolsProtocol,
            max_head_bytes=settings.http_max_head_bytes,
            head_seconds=settings.http_head_timeout_seconds,
        ),
        "timeout_keep_alive": settings.http_keep_alive_seconds,
    }


@contextmanager
def claim_port(host: str, port: int) -> Iterator[None]:
    """Hold `host:port` for this server while the block runs; OSError if it is taken.

    Two checks. A bind WITHOUT SO_REUSEPORT fails while any socket has the port, with
    SO_REUSEPORT or not; that socket is closed at once (it would keep our own workers out).
    And a lock only one process can hold, on the address: an abstract Unix socket named after
    it, which the kernel frees when the process ends, however it ends. It keeps a second
    server of ours from passing the first check before this one's workers listen.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(socket.AF_UNIX) as lock:
        lock.bind(f"\0agentic-rag:{address[0]}:{port}")
        with socket.socket(family, kind, proto) as probe:
            # As the workers bind: connections of an earlier server in TIME_WAIT do not count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
        yield


def _exposure_refusal(settings: Settings, dsn: str) -> str | None:
    """What the engine of every worker would refuse at start, said once and before any starts:
    a public address without credentials (whether API keys exist is in the database)."""
    from agentic_rag.engine import exposure_refusal  # the engine's rule (a large import: late)

    configured = settings.require_auth or settings.jwt_configured()
    if exposure_refusal(settings, enforced=configured) is None:
        return None
    return exposure_refusal(settings, enforced=asyncio.run(_active_api_keys(dsn)))


def _embedding_refusal(settings: Settings, dsn: str) -> str | None:
    """A store embedded with another model than the configured one (see `agentic-rag reembed`)."""
    from agentic_rag.knowledge.service import configured_model
    from agentic_rag.knowledge.store.spaces import active_space_of, model_mismatch

    model, dimension = configured_model(settings)
    return model_mismatch(asyncio.run(active_space_of(dsn)), model, dimension)


def _graph_unreachable(settings: Settings) -> str | None:
    """Why the FalkorDB server of AGENTIC_RAG_GRAPH_URL cannot be used, or None: said in one
    line before anything serves, instead of each worker's start-up traceback."""
    url = settings.graph_url
    if url is None:
        return None
    import redis
    from falkordb import FalkorDB

    graph = None
    try:
        graph = FalkorDB.from_url(url, socket_connect_timeout=GRAPH_CONNECT_SECONDS)
        graph.connection.ping()
    except (redis.RedisError, OSError) as exc:
        return (
            f"cannot reach the FalkorDB server of AGENTIC_RAG_GRAPH_URL "
            f"({without_credentials(url)}): {exc}"
        )
    finally:
        if graph is not None:
            graph.connection.close()
    return None


def _local_llm_refusal(settings: Settings) -> str | None:
    if not settings.llm_local:
        return None
    from agentic_rag.llm.local import unavailable

    return unavailable(settings)


async def _active_api_keys(dsn: str) -> bool:
    from agentic_rag.security.api_keys import ApiKeyStore

    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        return await ApiKeyStore(pool).any_active()
    except asyncpg.UndefinedTableError:  # a new database: the workers create the table
        return False
    finally:
        await pool.close()


class _Server(uvicorn.Server):
    """uvicorn's server, which says where each protocol is once its socket listens."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)  # exits when the app or the port cannot start
        host, port = self.config.host, self.config.port
        base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        log.info(
            "A2A JSON-RPC at %s/, Agent Card at %s/.well-known/agent.json, MCP at %s/mcp: "
            "listening (pid %d)",
            base,
            base,
            base,
            os.getpid(),
        )


def _supervise(workers: int, uvicorn_config: dict[str, Any]) -> bool:
    """Run `workers` processes until SIGTERM or SIGINT, starting again any that dies.

    Returns False when a worker could not start (the port, the app): the others are stopped,
    since every new one would fail the same way.
    """
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked event loop
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())

    def start() -> multiprocessing.process.BaseProcess:
        process = spawn.Process(
            target=_worker, args=(uvicorn_config, os.getpid()), name="agentic-rag-worker"
        )
        process.start()
        return process

    processes = [start() for _ in range(workers)]
    log.info("%d workers: pids %s", workers, ", ".join(str(p.pid) for p in processes))
    started = True
    while started and not stopping.wait(0.5):
        for index, process in enumerate(processes):
            if process.is_alive():
                continue
            if process.exitcode == STARTUP_FAILURE:
                log.error("worker %d could not start; stopping", process.pid)
                started = False
                break
            log.error("worker %d exited with %s; starting another", process.pid, process.exitcode)
            processes[index] = start()
    for process in processes:
        process.terminate()  # SIGTERM: a graceful shutdown
    for process in processes:
        process.join(GRACEFUL_SECONDS + 20)
        if process.is_alive():
            log.error("worker %d did not stop in time; killing it", process.pid)
            process.kill()
            process.join()
    return started


def _worker(uvicorn_config: dict[str, Any], supervisor: int) -> None:
    """One worker: uvicorn on a socket of its own, shared with its siblings by SO_REUSEPORT."""
    _stop_with(supervisor)
    config = uvicorn.Config(**uvicorn_config)
    host = uvicorn_config["host"]
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, uvicorn_config["port"]))
        sock.listen(config.backlog)
    except OSError as exc:
        log.error("worker %d cannot listen on %s:%s: %s", os.getpid(), host, config.port, exc)
        sys.exit(STARTUP_FAILURE)
    server = _Server(config)
    # uvicorn re-raises SIGTERM after its graceful shutdown: end quietly instead.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _stop_with(supervisor: int) -> None:
    """Have the kernel send this worker SIGTERM (a graceful shutdown) when the supervisor ends,
    however it ends: a worker left alone would keep the port, and serve it without the
    embedded PostgreSQL's lifetime being anyone's."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:  # it ended before that
        sys.exit(0)

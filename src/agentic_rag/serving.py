"""Running the app under uvicorn: in this process, or as a supervisor of several workers.

Workers are processes that build the app from the environment (`app_factory`, an import
string): this process writes the settings the command line gave into the environment, starts
the embedded PostgreSQL once for all of them, and, for several workers, gives them a directory
where the Prometheus metrics of every worker add up (`PROMETHEUS_MULTIPROC_DIR`). Workers share
one database; tasks move between them as `agentic_rag.a2a.cluster` says.

Each worker listens on a socket of its own bound with SO_REUSEPORT, so the kernel spreads new
connections evenly over the workers. (uvicorn's own supervisor shares one listening socket:
whichever worker wakes first accepts every connection then waiting, so a burst of keep-alive
connections can all land on one worker, which the benchmark showed.)
"""

import logging
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
from contextlib import ExitStack
from typing import Any

from agentic_rag.config import Settings, environment
from agentic_rag.observability.logging import configure_logging
from agentic_rag.observability.metrics import METRICS_DIR_VARIABLE
from agentic_rag.storage.embedded import open_embedded_postgres

log = logging.getLogger(__name__)


def serve(app_factory: str, overrides: dict[str, Any]) -> None:
    """Serve `app_factory()` with the settings `overrides` on top of the environment's."""
    os.environ.update(environment(overrides))
    settings = Settings()
    workers = settings.workers
    log_config = configure_logging(settings.log_format, settings.log_level)
    base = f"http://{settings.host}:{settings.port}"
    log.info(
        "A2A JSON-RPC at %s/, Agent Card at %s/.well-known/agent.json, MCP at %s/mcp",
        base,
        base,
        base,
    )
    uvicorn_config: dict[str, Any] = {
        "app": app_factory,
        "factory": True,
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "log_config": log_config,
        "timeout_graceful_shutdown": GRACEFUL_SECONDS,
    }
    with ExitStack() as stack:
        if settings.database_url is None:
            dsn, stop_postgres = open_embedded_postgres(settings.data_dir)
            stack.callback(stop_postgres)
            os.environ.update(environment({"database_url": dsn}))
            log.info("data in %s", settings.data_dir.resolve())
        else:
            log.info("database from DATABASE_URL")
        if workers == 1:
            # uvicorn re-raises SIGTERM after its graceful shutdown: exit normally instead,
            # so that the embedded PostgreSQL stops.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            import uvicorn

            uvicorn.run(**uvicorn_config)
            return
        metrics = stack.enter_context(tempfile.TemporaryDirectory(prefix="agentic-rag-"))
        os.environ[METRICS_DIR_VARIABLE] = metrics
        if settings.redis_url is None:
            log.warning(
                "rate limits are counted by each worker without REDIS_URL: a credential "
                "can make up to %d times its limit",
                workers,
            )
        if not _supervise(workers, uvicorn_config):
            raise SystemExit(STARTUP_FAILURE)


GRACEFUL_SECONDS = 10  # for open requests; the engine then gives skills its own grace period
STARTUP_FAILURE = 3  # the exit code of a worker that could not start (as uvicorn's)


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
        process = spawn.Process(target=_worker, args=(uvicorn_config,), name="agentic-rag-worker")
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


def _worker(uvicorn_config: dict[str, Any]) -> None:
    """One worker: uvicorn on a socket of its own, shared with its siblings by SO_REUSEPORT."""
    import uvicorn

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
    server = uvicorn.Server(config)
    # uvicorn re-raises SIGTERM after its graceful shutdown: end quietly instead.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)

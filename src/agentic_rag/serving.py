"""Running the app under uvicorn: in this process, or as a supervisor of several workers.

Workers are processes that uvicorn's supervisor starts, watches and restarts; each builds the
app from the environment (`app_factory`, an import string). So this process writes the
settings the command line gave into the environment, starts the embedded PostgreSQL once for
all of them, and, for several workers, gives them a directory where Prometheus metrics of
every worker add up (`PROMETHEUS_MULTIPROC_DIR`). Workers share one database, and tasks move
between them as `agentic_rag.a2a.cluster` says.
"""

import logging
import os
import signal
import sys
import tempfile
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
    with ExitStack() as stack:
        if settings.database_url is None:
            dsn, stop_postgres = open_embedded_postgres(settings.data_dir)
            stack.callback(stop_postgres)
            os.environ.update(environment({"database_url": dsn}))
            log.info("data in %s", settings.data_dir.resolve())
        else:
            log.info("database from DATABASE_URL")
        if workers > 1:
            metrics = stack.enter_context(tempfile.TemporaryDirectory(prefix="agentic-rag-"))
            os.environ[METRICS_DIR_VARIABLE] = metrics
            log.info("%d workers", workers)
            if settings.redis_url is None:
                log.warning(
                    "rate limits are counted by each worker without REDIS_URL: a credential "
                    "can make up to %d times its limit",
                    workers,
                )
        # uvicorn re-raises SIGTERM after its graceful shutdown: exit normally instead, so
        # that the embedded PostgreSQL stops (its supervisor of workers just returns).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        import uvicorn

        uvicorn.run(
            app_factory,
            factory=True,
            workers=workers,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            log_config=log_config,
            timeout_graceful_shutdown=10,
        )

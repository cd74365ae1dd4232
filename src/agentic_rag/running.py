"""Which server holds a data directory: `serve` says where it listens, and on which database,
in DATA_DIR/server.json while it runs, and holds DATA_DIR/server.lock meanwhile. The kernel
drops the lock when the server ends, however it ends, so a file a killed server left behind
is known to be stale.

`agentic-rag query` asks that server instead of loading the models a second time.
"""

import fcntl
import hashlib
import ipaddress
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVER_FILE = "server.json"
LOCK_FILE = "server.lock"


@dataclass(frozen=True)
class RunningServer:
    url: str
    pid: int


def local_url(host: str, port: int) -> str:
    """The URL a process on this machine reaches a server bound to `host:port` at."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}"
    if address.is_unspecified:  # bound to every address: loopback is one of them
        return f"http://{'[::1]' if address.version == 6 else '127.0.0.1'}:{port}"
    return f"http://[{host}]:{port}" if address.version == 6 else f"http://{host}:{port}"


def database_key(database_url: str | None) -> str:
    """Names the database a process uses without writing its URL (and password) to disk."""
    if database_url is None:
        return "embedded"
    return hashlib.sha256(database_url.encode()).hexdigest()


@contextmanager
def advertise(data_dir: Path, url: str, database_url: str | None) -> Iterator[None]:
    """Say that this process serves `data_dir` (and `database_url`, None: the embedded one)
    at `url` while the block runs. A second server on the same directory (another port)
    leaves the first one's file alone."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / LOCK_FILE).open("ab") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield
            return
        file = data_dir / SERVER_FILE
        described = {"url": url, "pid": os.getpid(), "database": database_key(database_url)}
        file.write_text(json.dumps(described))
        try:
            yield
        finally:
            file.unlink(missing_ok=True)


def running_server(data_dir: Path, database_url: str | None) -> RunningServer | None:
    """The server that holds `data_dir` and serves `database_url` now, if one does."""
    try:
        described = json.loads((data_dir / SERVER_FILE).read_text())
        server = RunningServer(str(described["url"]), int(described["pid"]))
        if described["database"] != database_key(database_url):
            return None
        with (data_dir / LOCK_FILE).open("rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:  # the lock is held: the server runs
        return server
    except (OSError, ValueError, KeyError, TypeError):  # no file, or not one of ours
        return None
    return None  # nobody holds the lock: a file left by a server that was killed

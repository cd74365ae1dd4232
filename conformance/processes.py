"""Servers under test as child processes: a free port, stopping one with all it started, and
the embedded PostgreSQL it may leave behind (shared by conftest.py and mcp_suite.py)."""

import os
import signal
import socket
import subprocess
import time
from contextlib import suppress
from pathlib import Path

STOP_TIMEOUT = 15.0


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

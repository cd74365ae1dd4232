"""Helpers of the embedded PostgreSQL tests: a server process on a data directory, and its
children."""

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent
# Until a server answers /readyz. Only a hang reaches it (a server that cannot start exits,
# and the wait ends there): the process imports the engine, then each worker does and loads
# the embedding model, which on 2 busy cores took over 3 minutes (60 s failed 1 run in 2).
START_SECONDS = 600


@contextmanager
def serving(data_dir: Path, port: int, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`agentic-rag serve` on `data_dir`, ready; stopped with SIGTERM unless the test ended it."""
    log_path = data_dir.parent / f"serve-{time.monotonic_ns()}.log"
    command = [str(BIN / "agentic-rag"), "serve", "--port", str(port), *args]
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [*command, "--data-dir", str(data_dir)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert server.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]

"""The command line as the tests run it: a console script, and its one-line errors; `serve` in
a process of its own, as a user starts it."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.live import free_port, until_ready

BIN = Path(sys.executable).parent


def clean_env(**env: str) -> dict[str, str]:
    """This environment without settings, with `env` on top."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTIC_RAG_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {**clean, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **env}


def run(program: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`program ARGS` in an environment without settings, with `env` on top."""
    return subprocess.run(
        [str(BIN / program), *args],
        env=clean_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line the program wrote (stdout and stderr together), without a traceback."""
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    lines = output.splitlines()
    assert len(lines) == 1, output
    return lines[0]


@dataclass(frozen=True)
class Serving:
    process: "subprocess.Popen[bytes]"
    url: str


@contextmanager
def serving(data_dir: Path, log: Path, **env: str) -> Iterator[Serving]:
    """`agentic-rag serve --data-dir DATA_DIR` on a free port, in an environment without
    settings but `env`, once it is ready; stopped as a user stops it (SIGTERM) at the end."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "agentic-rag"), "serve", "--port", str(port), "--data-dir", str(data_dir)],
            env=clean_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        until_ready(process, port, log)
        yield Serving(process, f"http://127.0.0.1:{port}")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)

"""The command line as the tests run it: a console script, and its one-line errors."""

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def run(program: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`program ARGS` in an environment without settings, with `env` on top."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTIC_RAG_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return subprocess.run(
        [str(BIN / program), *args],
        env={**clean, **env},
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

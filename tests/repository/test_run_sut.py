"""conformance/run-sut runs as the README says, whichever python3 comes first on PATH."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import ROOT, free_port

RUN_SUT = ROOT / "conformance" / "run-sut"
SYSTEM_PATH = "/usr/bin:/bin"


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's basetemp: the embedded PostgreSQL may run as another user, which
    # needs the parent folders traversable (see conformance/conftest.py).
    path = Path(tempfile.mkdtemp(prefix="agentic-rag-run-sut-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_run_sut_serves_its_agent_card_when_the_first_python3_is_not_the_projects(
    workdir: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = SYSTEM_PATH
    bare = subprocess.run(
        ["python3", "-c", "import agentic_rag"], env=env, capture_output=True, check=False
    )
    assert bare.returncode != 0, "the first python3 on PATH must not be the project's here"
    assert b"ModuleNotFoundError" in bare.stderr

    port = free_port()
    log_path = workdir / "run-sut.log"
    with log_path.open("wb") as log:
        # Exactly as the README says: the script itself, its shebang choosing the interpreter.
        process = subprocess.Popen(
            [str(RUN_SUT), "--port", str(port), "--data-dir", str(workdir / "data")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        card = None
        deadline = time.monotonic() + 90
        while card is None:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/.well-known/agent.json", timeout=2)
                card = response.json() if response.status_code == 200 else None
            except httpx.TransportError:
                time.sleep(0.2)
        assert card["url"] == f"http://127.0.0.1:{port}/"
        assert "script" in {skill["id"] for skill in card["skills"]}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            returncode = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert returncode == 0, log_path.read_text()
    assert "ModuleNotFoundError" not in log_path.read_text()

"""Running the official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned
in package.json) against `conformance/run-mcp-sut`: start the server, run the suite's server
scenarios of one revision, and read what each check said.

The suite writes one `checks.json` per scenario into `<output dir>/server-<scenario>-<time>/`.
Its bundle imports `fs.globSync` (Node.js 22); on Node.js 20 `node20/register.mjs` supplies it.
"""

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

from conformance.processes import free_port, kill_group, stop, stop_leftover_postgres, tail
from conformance.support import ROOT

RUN_MCP_SUT = ROOT / "conformance" / "run-mcp-sut"
SUITE_BIN = ROOT / "node_modules" / ".bin" / "conformance"
NODE20_REGISTER = ROOT / "conformance" / "node20" / "register.mjs"
STARTUP_TIMEOUT = 120.0  # the embedding model loads before the server answers
SUITE_TIMEOUT = 600.0

# `conformance list --requirements REV`: a header, then "Server scenarios ...:" and "  - name"
# lines up to the next blank line.
_SERVER_SECTION = re.compile(r"^Server scenarios[^\n]*:\n((?:  - [^\n]+\n)+)", re.MULTILINE)
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


class SuiteError(Exception):
    """The suite or the server under test could not be run: the message says why."""


@dataclass(frozen=True)
class Check:
    scenario: str
    id: str
    status: str  # SUCCESS, FAILURE, WARNING, SKIPPED or INFO
    message: str


@contextmanager
def started_sut(workdir: Path) -> Iterator[str]:
    """run-mcp-sut on a free port with its data in `workdir`; yields its MCP URL, then stops
    it and everything it started (its own process group)."""
    port = free_port()
    log_path = workdir / "run-mcp-sut.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(RUN_MCP_SUT),
                "--port",
                str(port),
                "--data-dir",
                str(workdir / "data"),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_ready(process, base, log_path)
            yield f"{base}/mcp"
        finally:
            stop(process)
            stop_leftover_postgres(workdir)


def _wait_until_ready(process: subprocess.Popen[bytes], base: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SuiteError(f"run-mcp-sut exited with {process.returncode}:\n{tail(log_path)}")
        with suppress(httpx.HTTPError):
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise SuiteError(f"run-mcp-sut did not answer within {STARTUP_TIMEOUT}s:\n{tail(log_path)}")


def run_suite(*arguments: str) -> tuple[int, str]:
    """`npx conformance ARGUMENTS` in the repository: its exit code and its output."""
    if not SUITE_BIN.exists():
        raise SuiteError(f"{SUITE_BIN} is missing: install the Node tools first (make install)")
    node_options = f"--import={NODE20_REGISTER.as_uri()} {os.environ.get('NODE_OPTIONS', '')}"
    process = subprocess.Popen(
        ["npx", "--no", "conformance", *arguments],
        cwd=ROOT,
        env={**os.environ, "NODE_OPTIONS": node_options.strip()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=SUITE_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(process)
        output, _ = process.communicate()
        raise SuiteError(
            f"npx conformance {' '.join(arguments)} ran over {SUITE_TIMEOUT}s:\n"
            f"{output.decode(errors='replace')[-4000:]}"
        ) from None
    return process.returncode, output.decode(errors="replace")


def required_server_scenarios(revision: str) -> list[str]:
    """The server scenarios the suite's frozen requirement set of `revision` names."""
    code, output = run_suite("list", "--requirements", revision)
    section = _SERVER_SECTION.search(output)
    if code != 0 or section is None:
        raise SuiteError(f"conformance list --requirements {revision} said:\n{output}")
    return [line.removeprefix("  - ").strip() for line in section[1].splitlines()]


def read_checks(output_dir: Path) -> dict[str, list[Check]]:
    """Each scenario's checks, as the suite wrote them under `output_dir`."""
    checks: dict[str, list[Check]] = {}
    for path in sorted(output_dir.glob("*/checks.json")):
        match = _RESULT_DIR.match(path.parent.name)
        if match is None:
            continue
        scenario = match["scenario"]
        checks[scenario] = [
            Check(scenario, c["id"], c["status"], c.get("errorMessage") or "")
            for c in json.loads(path.read_text())
        ]
    return checks

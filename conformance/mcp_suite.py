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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conformance.processes import (
    NotReady,
    kill_group,
    started_server,
    stop_leftover_postgres,
)
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
    try:
        with started_server(RUN_MCP_SUT, workdir, "/healthz", STARTUP_TIMEOUT) as base:
            yield f"{base}/mcp"
    except NotReady as exc:
        raise SuiteError(str(exc)) from None
    finally:
        stop_leftover_postgres(workdir)


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

"""The official MCP conformance suite's server scenarios against the product (issue 20, point 10).

Starts `conformance/run-mcp-sut` (the product's app and MCP adapter with the suite's fixtures)
and runs `npx conformance server --requirements REVISION` for 2025-11-25 and 2026-07-28: the
scenarios each revision requires, frozen at its release, at that revision's wire (the
initialize handshake, or stateless requests with `_meta`).

A required scenario passes when none of its checks fails (warnings are SHOULDs). The checks
that fail today are listed, with their cause, in conformance/mcp-expected-failures/REVISION.yml
(the suite's own `--expected-failures` format): any other failure fails this test, and so does
a listed check that passes, so the list can only shrink as the adapter grows.
"""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conformance.mcp_suite import (
    Check,
    SuiteError,
    read_checks,
    required_server_scenarios,
    run_suite,
    started_sut,
)
from conformance.support import ROOT

REVISIONS = ("2025-11-25", "2026-07-28")
EXPECTED_FAILURES = ROOT / "conformance" / "mcp-expected-failures"


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    # Not under pytest's basetemp: the embedded PostgreSQL needs its parents traversable.
    workdir = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    try:
        with started_sut(workdir) as url:
            yield url
    except SuiteError as exc:
        pytest.fail(str(exc))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def expected_failures(revision: str) -> set[str]:
    entries = yaml.safe_load((EXPECTED_FAILURES / f"{revision}.yml").read_text())["server"]
    return set(entries or [])


def _failing(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == "FAILURE"]


@pytest.mark.parametrize("revision", REVISIONS)
def test_required_server_scenarios_pass(mcp_url: str, revision: str, tmp_path: Path) -> None:
    try:
        required = required_server_scenarios(revision)
        _, output = run_suite(
            "server", "--url", mcp_url, "--requirements", revision, "--output-dir", str(tmp_path)
        )
    except SuiteError as exc:
        pytest.fail(str(exc))
    checks = read_checks(tmp_path)

    assert required, f"the suite lists no server scenario for {revision}"
    not_run = [s for s in required if not checks.get(s)]
    assert not not_run, f"required scenarios without results: {not_run}\n{output[-3000:]}"
    failing = {f"{c.scenario}:{c.id}": c for s in required for c in _failing(checks[s])}
    known = expected_failures(revision)
    unexpected = {key: check.message for key, check in failing.items() if key not in known}
    assert not unexpected, f"{revision}: required checks failing: {unexpected}"
    now_passing = sorted(known - failing.keys())
    assert not now_passing, (
        f"{revision}: these checks pass now; remove them from "
        f"conformance/mcp-expected-failures/{revision}.yml: {now_passing}"
    )

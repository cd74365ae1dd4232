"""Fixtures of the black-box conformance suite.

The server under test (SUT) is named by `--sut-url` or the environment variable
`A2A_SUT_URL` (its base URL; the Agent Card is fetched from `/.well-known/agent.json`).
With neither, the suite starts this project's server itself:

    python conformance/run-sut --port <free port> --data-dir <tmp>

waits until its Agent Card answers, and stops it at the end (SIGTERM, then SIGKILL).
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance.processes import NotReady, started_server, stop_leftover_postgres
from conformance.support import ROOT, Rpc

RUN_SUT = ROOT / "conformance" / "run-sut"
STARTUP_TIMEOUT = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--sut-url",
        default=None,
        help="base URL of the A2A server under test (default: env A2A_SUT_URL, "
        "else start conformance/run-sut)",
    )


@pytest.fixture(scope="session")
def sut_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The base URL of the server under test."""
    url = request.config.getoption("--sut-url") or os.environ.get("A2A_SUT_URL")
    if url:
        yield url.rstrip("/")
        return
    # Not under pytest's basetemp: the embedded PostgreSQL runs as another user and needs the
    # parent folders traversable, which every pytest session starting meanwhile undoes (it
    # resets /tmp/pytest-of-<user> to 0700).
    workdir = Path(tempfile.mkdtemp(prefix="a2a-conformance-"))
    try:
        with _started_sut(workdir) as started:
            yield started
    finally:
        stop_leftover_postgres(workdir)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _started_sut(workdir: Path) -> Iterator[str]:
    if not RUN_SUT.exists():
        pytest.fail(f"{RUN_SUT} does not exist; set A2A_SUT_URL or pass --sut-url")
    try:
        with started_server(RUN_SUT, workdir, "/.well-known/agent.json", STARTUP_TIMEOUT) as url:
            yield url
    except NotReady as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(30.0, read=20.0)) as client:
        yield client


@pytest.fixture(scope="session")
def card(http: httpx.Client, sut_url: str) -> dict[str, Any]:
    """The Agent Card at the 0.2.1 well-known path."""
    response = http.get(f"{sut_url}/.well-known/agent.json")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture(scope="session")
def rpc(http: httpx.Client, card: dict[str, Any]) -> Rpc:
    """JSON-RPC calls to the endpoint the card names (docs/a2a-notes.md §1: POST to its `url`)."""
    return Rpc(http, card["url"])

"""The MCP Inspector CLI (npm, pinned in package.json) against /mcp and `agentic-rag mcp`.

A client that is not ours: the reference tool people use to try an MCP server. Each case
runs the exact command line docs/clients.md shows.
"""

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentic_rag.mcp.listing import input_schema
from conformance.skills import ScriptInput
from tests.support.databases import new_database, own_data_dir
from tests.support.live import LiveServer, live_server
from tests.support.mcp import watched_registry
from tests.support.security import create_keys

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
INSPECTOR = ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli"]


@pytest.fixture(scope="module", autouse=True)
def inspector_installed() -> None:
    """`make install` runs `npm ci`; a bare pytest run does it here, once."""
    if (ROOT / "node_modules" / ".bin" / "mcp-inspector").exists():
        return
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed for the MCP Inspector tests (Node.js >= 20.19)"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True, timeout=600)


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


def inspect(*args: str) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIC_RAG_")}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [*INSPECTOR, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    return Run(done.returncode, done.stdout, done.stderr)


@dataclass
class Keyed:
    server: LiveServer
    key: str


@pytest.fixture(scope="module")
async def keyed(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Keyed]:
    database_url = await new_database(postgres_dsn)
    keys = await create_keys(database_url, "acme", both=["read", "write"])
    with live_server(
        watched_registry(lambda event: None),
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("inspected"),
    ) as server:
        yield Keyed(server, keys["both"])


# -- Streamable HTTP ----------------------------------------------------------------------


def test_http_tools_list(sut: LiveServer) -> None:
    run = inspect(f"{sut.url}/mcp", "--transport", "http", "--method", "tools/list")
    assert run.code == 0, run.err
    tools = {tool["name"]: tool for tool in run.json["tools"]}
    assert sorted(tools) == ["help", "script"]
    assert tools["script"]["inputSchema"] == input_schema(ScriptInput)  # as listed (compact)


def test_http_tools_call(sut: LiveServer) -> None:
    run = inspect(
        f"{sut.url}/mcp",
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "script",
        "--tool-arg",
        "text=hello",
    )
    assert run.code == 0, run.err
    assert run.json["structuredContent"] == {"text": "hello"}
    assert run.json["content"] == [{"type": "text", "text": "hello"}]
    assert not run.json.get("isError")


def test_http_tool_failure_is_an_error_result(sut: LiveServer) -> None:
    run = inspect(
        f"{sut.url}/mcp",
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "script",
        "--tool-arg",
        "text=fail",
    )
    assert run.code != 0  # the Inspector exits non-zero on isError
    assert run.json["isError"] is True
    assert run.json["content"][0]["text"] == (
        "tool 'script' failed: failed as asked: the message was 'fail'"
    )


def test_http_with_an_api_key_header(keyed: Keyed) -> None:
    url = f"{keyed.server.url}/mcp"
    call = ("--method", "tools/call", "--tool-name", "whoami")
    run = inspect(url, "--transport", "http", "--header", f"X-API-Key: {keyed.key}", *call)
    refused = inspect(url, "--transport", "http", *call)
    assert run.code == 0, run.err
    assert run.json["structuredContent"] == {"tenant": "acme"}
    # Without the header the server answers 401, and the Inspector stops at its OAuth step.
    assert refused.code != 0 and '"code":"auth_required"' in refused.err


# -- stdio --------------------------------------------------------------------------------


@pytest.fixture
def data() -> Iterator[Path]:
    with own_data_dir() as path:
        yield path


def test_stdio_in_process(data: Path) -> None:
    command = (str(BIN / "agentic-rag"), "mcp")
    listed = inspect(*command, "-e", f"AGENTIC_RAG_DATA_DIR={data}", "--method", "tools/list")
    assert listed.code == 0, listed.err
    # The product's skills, resumable ones marked as able to run as MCP tasks.
    tools = {tool["name"]: tool for tool in listed.json["tools"]}
    assert {"help", "hybrid_retrieve", "ingest_text"} <= set(tools)
    assert tools["ingest_text"]["execution"] == {"taskSupport": "optional"}
    prompts = inspect(*command, "-e", f"AGENTIC_RAG_DATA_DIR={data}", "--method", "prompts/list")
    assert prompts.code == 0, prompts.err
    assert [p["name"] for p in prompts.json["prompts"]] == ["answer_with_citations"]
    called = inspect(
        *command,
        "-e",
        f"AGENTIC_RAG_DATA_DIR={data}",
        "--method",
        "tools/call",
        "--tool-name",
        "help",
        "--tool-arg",
        "topic=help",
    )
    assert called.code == 0, called.err
    assert [s["name"] for s in called.json["structuredContent"]["skills"]] == ["help"]
    assert (data / "postgres").is_dir()


def test_stdio_bridge(keyed: Keyed) -> None:
    run = inspect(
        str(BIN / "agentic-rag-mcp"),
        "-e",
        f"AGENTIC_RAG_URL={keyed.server.url}",
        "-e",
        f"AGENTIC_RAG_API_KEY={keyed.key}",
        "--method",
        "tools/call",
        "--tool-name",
        "script",
        "--tool-arg",
        "text=bridged",
    )
    assert run.code == 0, run.err
    assert run.json["structuredContent"] == {"text": "bridged"}

"""MCP over stdio: `agentic-rag mcp` in-process on a data directory, and bridged to a server.

Every server here is a real process started the way desktop clients start it, driven by the
official SDK client over its stdin and stdout.
"""

import base64
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from agentic_rag.mcp.listing import input_schema, output_schema
from agentic_rag.security.auth import FORBIDDEN
from agentic_rag.skills.help import HelpInput, HelpOutput
from conformance.skills import ScriptInput, ScriptOutput
from tests.support.databases import new_database, own_data_dir
from tests.support.live import LiveServer, live_server
from tests.support.mcp import (
    BIN,
    ROOT,
    Elicitations,
    Progress,
    base_env,
    text_of,
    until,
    watched_registry,
)
from tests.support.pdf_samples import scanned_pdf
from tests.support.security import create_keys

# The watched skills (tests/support/mcp.py) served in-process over stdio; what they do is
# appended to the file MCP_TEST_EVENTS names, for the test to read.
WATCHED_CHILD = """
import os, sys
from pathlib import Path
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.mcp.stdio import run_local
from tests.support.mcp import watched_registry

events = Path(os.environ["MCP_TEST_EVENTS"])

def record(event):
    with events.open("a") as f:
        f.write(event + "\\n")

sys.exit(run_local(Engine(Settings(), watched_registry(record), transport="stdio")))
"""


# -- in-process -------------------------------------------------------------------------


@pytest.fixture
def data() -> Iterator[Path]:
    with own_data_dir() as path:
        yield path


async def test_agentic_rag_mcp_serves_the_product_from_a_data_dir(data: Path) -> None:
    server = StdioServerParameters(
        command=str(BIN / "agentic-rag"),
        args=["mcp", "--data-dir", str(data)],
        env=base_env(),
    )
    progress = Progress()
    async with Client(server, mode="legacy") as client:  # desktop clients do the handshake
        tools = {t.name: t for t in (await client.list_tools()).tools}
        helped = await client.call_tool("help", {"topic": "help"})
        ingested = await client.call_tool(
            "ingest_text",
            {"text": "Otters hold hands while they sleep.", "title": "Otters"},
            progress_callback=progress,
        )
        found = await client.call_tool("hybrid_retrieve", {"query": "sleeping otters"})
        (resource,) = (await client.list_resources()).resources
        (content,) = (await client.read_resource(resource.uri)).contents
        (prompt,) = (await client.list_prompts()).prompts
        assert ingested.structured_content is not None
        document_id = ingested.structured_content["documents"][0]["document_id"]
        got = await client.call_tool("get_document", {"document_id": document_id})
        scan = base64.b64encode(scanned_pdf(["Otter holt survey"])).decode()
        scanned = await client.call_tool("ingest_pdf", {"data": scan, "filename": "holt.pdf"})
    assert {"help", "hybrid_retrieve", "ingest_text", "ingest_url", "explain_answer"} <= set(tools)
    assert tools["help"].input_schema == input_schema(HelpInput)
    assert tools["help"].output_schema == output_schema(HelpOutput)
    assert not helped.is_error
    assert HelpOutput.model_validate(helped.structured_content).skills[0].name == "help"
    assert not ingested.is_error and ingested.structured_content is not None
    assert ingested.structured_content["ingested"] == 1
    assert found.structured_content is not None
    assert found.structured_content["hits"][0]["provenance"]["title"] == "Otters"
    # The ingestion ran as a task of the engine in this process, durable like an A2A one.
    assert (progress.messages[0] or "").startswith("ingest_text runs as task ")
    assert resource.title == "Otters"
    assert isinstance(content, types.TextResourceContents)
    assert content.text == "Otters hold hands while they sleep."
    # Results name their document as MCP content: a link, or the document itself.
    for result in (ingested, found):
        assert [c.uri for c in result.content[1:] if isinstance(c, types.ResourceLink)] == [
            resource.uri
        ]
    embedded = got.content[-1]
    assert isinstance(embedded, types.EmbeddedResource)
    assert embedded.resource == content.model_copy(update={"meta": None})
    assert prompt.name == "answer_with_citations"
    # A page read by OCR comes back as it was scanned, after its caption.
    caption, image = scanned.content[-2:]
    assert isinstance(caption, types.TextContent) and caption.text.startswith("Page 1 as scanned")
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    assert (data / "postgres").is_dir()  # the engine ran on the embedded database there


@dataclass
class InProcess:
    database_url: str
    data_dir: Path
    events_file: Path

    def client(self, **options: Any) -> Client:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-c", WATCHED_CHILD],
            env=base_env(
                DATABASE_URL=self.database_url,
                AGENTIC_RAG_DATA_DIR=str(self.data_dir),
                MCP_TEST_EVENTS=str(self.events_file),
                PYTHONPATH=str(ROOT),
            ),
            cwd=str(ROOT),
        )
        return Client(server, **options)

    @property
    def events(self) -> list[str]:
        return self.events_file.read_text().splitlines() if self.events_file.exists() else []


@pytest.fixture(scope="module")
async def in_process(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> InProcess:
    root = tmp_path_factory.mktemp("stdio")
    return InProcess(await new_database(postgres_dsn), root / "data", root / "events")


MODES = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])


@MODES
async def test_in_process_tools_and_calls(in_process: InProcess, mode: str) -> None:
    progress = Progress()
    async with in_process.client(mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        done = await client.call_tool("script", {"text": "task 3 10"}, progress_callback=progress)
        failed = await client.call_tool("script", {"text": "fail"})
        whoami = await client.call_tool("whoami", {})
    assert tools["script"].input_schema == input_schema(ScriptInput)
    assert tools["script"].output_schema == output_schema(ScriptOutput)
    assert done.structured_content == {"text": "done after 3 updates"}
    assert text_of(done) == "done after 3 updates"
    assert progress.messages == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert failed.is_error
    assert text_of(failed) == "tool 'script' failed: failed as asked: the message was 'fail'"
    assert whoami.structured_content == {"tenant": "local"}  # stdio in-process: the owner


@MODES
async def test_in_process_elicitation(in_process: InProcess, mode: str) -> None:
    # 2025-11-25: an elicitation/create request over the session; 2026-07-28: input_required.
    elicit = Elicitations({"answer": "yes"}, {"confirm": True})
    async with in_process.client(mode=mode, elicitation_callback=elicit) as client:
        asked = await client.call_tool("script", {"text": "ask"})
        deleted = await client.call_tool("delete", {"target": "drafts"})
    assert asked.structured_content == {"text": "you said: yes"}
    assert deleted.structured_content == {"text": "deleted drafts"}
    assert [q.message for q in elicit.asked] == [
        "What should I answer? Reply on this task.",
        "Really delete drafts?",
    ]


@MODES
async def test_in_process_choices_are_asked_as_enums(in_process: InProcess, mode: str) -> None:
    elicit = Elicitations({"colour": "red", "shades": ["dark"], "finish": "matte"})
    async with in_process.client(mode=mode, elicitation_callback=elicit) as client:
        result = await client.call_tool("paint", {})
    assert result.structured_content == {"text": "matte red in dark"}
    (asked,) = elicit.asked
    form = asked.requested_schema["properties"]
    assert form["colour"]["enum"] == ["red", "ochre"]
    assert form["shades"]["items"] == {"type": "string", "enum": ["light", "dark"]}
    assert form["finish"]["default"] == "matte"


async def test_in_process_without_elicitation_says_what_is_missing(
    in_process: InProcess,
) -> None:
    async with in_process.client(mode="legacy") as client:
        result = await client.call_tool("delete", {"target": "drafts"})
    assert result.is_error
    assert text_of(result) == (
        "tool 'delete' needs input: Really delete drafts? Missing arguments: confirm. It cannot "
        "ask for them because the client does not support elicitation (form mode); call it "
        "again with them."
    )


async def test_in_process_a_persons_answer_needs_elicitation_at_2026_07_28(
    in_process: InProcess,
) -> None:
    async with in_process.client() as client:  # 2026-07-28, no elicitation declared
        with pytest.raises(MCPError) as refused:
            await client.call_tool("script", {"text": "ask"})
    assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


async def test_in_process_round_trip_state_is_sealed(in_process: InProcess) -> None:
    # Driven by hand (allow_input_required), so the test sees each round's state.
    elicit = Elicitations()  # declares elicitation; never called: the test answers
    arguments = {"target": "drafts"}
    confirmed = {"input": types.ElicitResult(action="accept", content={"confirm": True})}
    async with in_process.client(elicitation_callback=elicit) as client:
        session = client.session
        first = await session.call_tool("delete", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        state = first.request_state
        with pytest.raises(MCPError) as tampered:
            await session.call_tool(
                "delete",
                arguments,
                input_responses=confirmed,  # type: ignore[arg-type]
                request_state=state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB"),
                allow_input_required=True,
            )
        again = await session.call_tool(
            "delete", arguments, request_state=state, allow_input_required=True
        )
        assert isinstance(again, types.InputRequiredResult) and again.request_state
        done = await session.call_tool(
            "delete",
            arguments,
            input_responses=confirmed,  # type: ignore[arg-type]
            request_state=again.request_state,
            allow_input_required=True,
        )
    assert tampered.value.code == types.INVALID_PARAMS
    assert tampered.value.message == "Invalid or expired requestState"
    assert again.input_requests == first.input_requests  # not answered: asked again
    assert isinstance(done, types.CallToolResult)
    assert done.structured_content == {"text": "deleted drafts"}


@MODES
async def test_in_process_cancellation_stops_the_skill(in_process: InProcess, mode: str) -> None:
    in_process.events_file.unlink(missing_ok=True)
    async with in_process.client(mode=mode) as client:
        with anyio.move_on_after(1.0) as scope:
            await client.call_tool("slow", {"steps": 100, "delay_ms": 100})
        assert scope.cancelled_caught
        await until(lambda: "cancelled" in in_process.events)
        seen = in_process.events
        await anyio.sleep(0.5)
        assert in_process.events == seen and "finished" not in seen
        assert 1 <= seen.count("cancelled") == 1 and len(seen) < 50


# -- bridged to a running server --------------------------------------------------------


@dataclass
class Bridged:
    server: LiveServer
    keys: dict[str, str]
    events: list[str] = field(default_factory=list)

    def client(self, key: str = "both", **options: Any) -> Client:
        # Exactly what a desktop client's config gives the process (docs/clients.md).
        server = StdioServerParameters(
            command=str(BIN / "agentic-rag-mcp"),
            env=base_env(AGENTIC_RAG_URL=self.server.url, AGENTIC_RAG_API_KEY=self.keys[key]),
        )
        return Client(server, **options)


@pytest.fixture(scope="module")
async def bridged(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Bridged]:
    """A server requiring credentials, with keys of tenant `acme`."""
    database_url = await new_database(postgres_dsn)
    keys = await create_keys(database_url, "acme", both=["read", "write"], read=["read"])
    events: list[str] = []
    with live_server(
        watched_registry(events.append),
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("bridged"),
    ) as server:
        yield Bridged(server, keys, events)


@MODES
async def test_the_bridge_forwards_tools_and_calls(bridged: Bridged, mode: str) -> None:
    progress = Progress()
    async with bridged.client(mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        done = await client.call_tool("script", {"text": "task 3 10"}, progress_callback=progress)
        failed = await client.call_tool("script", {"text": "fail"})
        whoami = await client.call_tool("whoami", {})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
    assert tools["script"].input_schema == input_schema(ScriptInput)
    assert done.structured_content == {"text": "done after 3 updates"}
    assert text_of(done) == "done after 3 updates"
    assert progress.messages == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert failed.is_error
    assert text_of(failed) == "tool 'script' failed: failed as asked: the message was 'fail'"
    assert whoami.structured_content == {"tenant": "acme"}  # the API key's tenant
    assert unknown.value.code == types.INVALID_PARAMS


async def test_the_bridge_passes_on_the_servers_cache_hints(bridged: Bridged) -> None:
    async with bridged.client() as client:  # 2026-07-28
        tools = await client.list_tools()
        templates = await client.list_resource_templates()
    assert (tools.ttl_ms, tools.cache_scope) == (300_000, "private")
    assert (templates.ttl_ms, templates.cache_scope) == (3_600_000, "public")


@MODES
async def test_the_bridge_passes_questions_to_the_client(bridged: Bridged, mode: str) -> None:
    elicit = Elicitations({"answer": "bridged"}, {"confirm": True})
    async with bridged.client(mode=mode, elicitation_callback=elicit) as client:
        asked = await client.call_tool("script", {"text": "ask"})
        deleted = await client.call_tool("delete", {"target": "drafts"})
    assert asked.structured_content == {"text": "you said: bridged"}
    assert deleted.structured_content == {"text": "deleted drafts"}
    assert [q.message for q in elicit.asked] == [
        "What should I answer? Reply on this task.",
        "Really delete drafts?",
    ]


async def test_the_bridge_without_elicitation_says_what_is_missing(bridged: Bridged) -> None:
    async with bridged.client(mode="legacy") as client:
        result = await client.call_tool("delete", {"target": "drafts"})
    assert result.is_error
    assert text_of(result) == (
        "tool 'delete' needs input: Really delete drafts? Missing arguments: confirm. It cannot "
        "ask for them because the client does not support elicitation (form mode); call it "
        "again with them."
    )


async def test_the_bridge_refuses_a_persons_question_without_elicitation_at_2026_07_28(
    bridged: Bridged,
) -> None:
    async with bridged.client() as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("script", {"text": "ask"})
    assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert "What should I answer?" in refused.value.message


@MODES
async def test_the_bridge_cancels_the_call_on_the_server(bridged: Bridged, mode: str) -> None:
    bridged.events.clear()
    async with bridged.client(mode=mode) as client:
        with anyio.move_on_after(1.0) as scope:
            await client.call_tool("slow", {"steps": 100, "delay_ms": 100})
        assert scope.cancelled_caught
        await until(lambda: "cancelled" in bridged.events)
        seen = list(bridged.events)
        await anyio.sleep(0.5)
    assert bridged.events == seen and "finished" not in seen and len(seen) < 50


async def test_the_bridge_forwards_resources_and_prompts(bridged: Bridged) -> None:
    # The watched skills have no knowledge engine: no documents, no prompt, and upstream's
    # refusals come back as they are.
    async with bridged.client(mode="legacy") as client:
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        prompts = await client.list_prompts()
        with pytest.raises(MCPError) as unread:
            await client.read_resource("agentic-rag://documents/nope")
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("answer_with_citations", {"question": "why?"})
    assert (resources.resources, templates.resource_templates, prompts.prompts) == ([], [], [])
    assert unread.value.code == unknown.value.code == types.INVALID_PARAMS
    assert unread.value.message == "unknown resource 'agentic-rag://documents/nope'"
    assert unknown.value.message == (
        "unknown prompt 'answer_with_citations'; this server has: none"
    )


async def test_the_bridge_passes_on_a_missing_scope(bridged: Bridged) -> None:
    async with bridged.client(key="read", mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("whoami", {})
    assert raised.value.code == FORBIDDEN
    assert raised.value.message == "this credential lacks the scope 'write' that tools/call needs"


async def test_the_bridge_outlives_its_server(database_url: str, tmp_path: Path) -> None:
    registry = watched_registry(lambda event: None)
    with ExitStack() as server:
        running = server.enter_context(
            live_server(registry, database_url=database_url, data_dir=tmp_path / "data")
        )
        bridge = StdioServerParameters(
            command=str(BIN / "agentic-rag-mcp"), env=base_env(AGENTIC_RAG_URL=running.url)
        )
        async with Client(bridge, mode="legacy") as client:
            assert (await client.call_tool("whoami", {})).structured_content == {"tenant": "local"}
            server.close()  # the server stops; the bridge goes on
            with anyio.fail_after(30), pytest.raises(MCPError) as gone:
                await client.call_tool("whoami", {})
            # Still there, and says so again rather than hanging.
            with anyio.fail_after(30), pytest.raises(MCPError):
                await client.list_tools()
    assert gone.value.code == types.INTERNAL_ERROR
    assert gone.value.message.startswith(f"agentic-rag at {running.url}/mcp did not answer: ")


def test_the_bridge_says_at_start_when_the_server_refuses_it(bridged: Bridged) -> None:
    env = base_env(AGENTIC_RAG_URL=bridged.server.url, AGENTIC_RAG_API_KEY="not-a-key")
    done = subprocess.run(
        [str(BIN / "agentic-rag-mcp")],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""  # stdout is the protocol: nothing but MCP goes there
    assert f"agentic-rag mcp: cannot serve with agentic-rag at {bridged.server.url}/mcp" in (
        done.stderr
    )

"""The knowledge engine over MCP: durable ingestion calls, MCP tasks, documents as resources and
the `answer_with_citations` prompt, each scoped by the caller's tenant.

The server is the product's (the real embedder, a real PostgreSQL) under uvicorn; clients are
the SDK's `mcp.Client` over HTTP, and raw JSON-RPC over HTTP for MCP tasks (protocol
2025-11-25), which the SDK's client cannot send. A site served by the test holds its pages
behind a gate, so a crawl is in the middle for as long as the test needs it there.
"""

import asyncio
import base64
import re
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import cv2
import httpx
import httpx2
import mcp.types as types
import numpy as np
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentic_rag.knowledge.sources.ocr import read_image
from agentic_rag.mcp.resources import PAGE_SIZE
from agentic_rag.security.auth import FORBIDDEN
from tests.support.databases import new_database
from tests.support.knowledge import GARDEN, KITCHEN, article_page
from tests.support.live import LiveServer, live_server, serve_in_thread
from tests.support.mcp import Elicitations, Progress, text_of
from tests.support.outcomes import output
from tests.support.pdf_samples import scanned_pdf
from tests.support.security import create_keys

TASKS_VERSION = "2025-11-25"
TASK_ID = re.compile(r"runs as task ([0-9a-f]{32})")


# -- the server, its tenants, and their clients -------------------------------------------


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    """The product's server; a key exists before it starts, so credentials are required."""
    database_url = await new_database(postgres_dsn)
    await create_keys(database_url, "nobody", any=["read"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("knowledge"),
        ingest_allow_private=["127.0.0.1"],
        ingest_host_interval_seconds=0,
    ) as live:
        yield live


@dataclass
class Tenant:
    """A tenant of its own for one test: its key, and clients that send it."""

    server: LiveServer
    key: str

    def mcp(self, **options: Any) -> Client:
        http = httpx2.AsyncClient(headers={"X-API-Key": self.key}, timeout=120)
        return Client(streamable_http_client(f"{self.server.url}/mcp", http_client=http), **options)

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.server.url, headers={"X-API-Key": self.key}, timeout=120
        )

    async def a2a(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with self.http() as http:
            answer: dict[str, Any] = (await http.post("/", json=body)).json()
        return answer

    async def a2a_task(self, task_id: str) -> dict[str, Any]:
        answer = await self.a2a("tasks/get", {"id": task_id})
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task

    async def ingest(self, text: str, title: str) -> dict[str, Any]:
        """Ingest over A2A (quicker to set up with than MCP); the summary."""
        message = {
            "role": "user",
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "parts": [
                {
                    "kind": "data",
                    "data": {"skill": "ingest_text", "arguments": {"text": text, "title": title}},
                }
            ],
        }
        task = (await self.a2a("message/send", {"message": message}))["result"]
        return output(task)

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Raw MCP JSON-RPC at protocol 2025-11-25: stateless, no handshake needed."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"MCP-Protocol-Version": TASKS_VERSION, "Accept": "application/json"}
        async with self.http() as http:
            response = await http.post("/mcp", json=body, headers=headers)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer


@pytest.fixture
async def tenants(server: LiveServer) -> tuple[Tenant, Tenant]:
    """Two new tenants: what one does, the other never sees."""
    names = [f"t{uuid.uuid4().hex[:10]}" for _ in range(2)]
    keys = [
        (await create_keys(server.settings.database_url or "", name, key=["read", "write"]))["key"]
        for name in names
    ]
    return Tenant(server, keys[0]), Tenant(server, keys[1])


def artifact_text(task: dict[str, Any]) -> str:
    (artifact,) = task["artifacts"]
    return str(next(p["text"] for p in artifact["parts"] if p["kind"] == "text"))


async def settled(tenant: Tenant, task_id: str) -> dict[str, Any]:
    """The A2A task once it is no longer submitted or working (the server runs it elsewhere)."""
    for _ in range(1500):
        task = await tenant.a2a_task(task_id)
        if task["status"]["state"] not in ("submitted", "working"):
            return task
        await anyio.sleep(0.02)
    raise AssertionError(f"task {task_id} did not settle within 30 s")


# -- a site whose pages wait behind a gate ------------------------------------------------


class GatedSite:
    """A start page linking to four pages that are served only once the gate opens."""

    PAGES = ("/harbour", "/lighthouse", "/tides", "/ferry")

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.requests: Counter[str] = Counter()
        self.url = ""

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            path = request.url.path
            self.requests[path] += 1
            if path == "/":
                links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in self.PAGES)
                return HTMLResponse(
                    article_page("Harbour index", "The pages of the harbour.", links)
                )
            if path in self.PAGES:
                await asyncio.to_thread(self.gate.wait, 60)
                return HTMLResponse(
                    article_page(path[1:], f"All about the {path[1:]} of the town.")
                )
            return PlainTextResponse("not found", status_code=404)

        return Starlette(routes=[Route("/{path:path}", serve)])


@pytest.fixture
def site() -> Iterator[GatedSite]:
    gated = GatedSite()
    with serve_in_thread(gated.app()) as url:
        gated.url = url
        try:
            yield gated
        finally:
            gated.gate.set()  # no request stays behind the gate when the site stops


# -- durable tool calls -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_an_ingestion_over_mcp_is_an_a2a_task_with_the_same_result(
    tenants: tuple[Tenant, Tenant], mode: str
) -> None:
    alpha, _ = tenants
    progress = Progress()
    async with alpha.mcp(mode=mode) as client:
        result = await client.call_tool(
            "ingest_text", {"text": GARDEN, "title": "Garden notes"}, progress_callback=progress
        )
    assert not result.is_error, text_of(result)
    first, *rest = progress.messages
    match = TASK_ID.search(first or "")
    assert match is not None, first
    assert result.structured_content is not None
    chunks = result.structured_content["chunks"]
    assert rest == ["indexing 'Garden notes'", f"'Garden notes': created, {chunks} chunks"]
    # The same task over A2A: completed, with the result the MCP call returned.
    task = await alpha.a2a_task(match[1])
    assert output(task) == result.structured_content
    assert artifact_text(task) == text_of(result)
    assert output(task)["job_id"] == match[1]  # the ingestion job is the task's


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_a_scanned_pdf_comes_back_with_the_image_of_the_page_read_by_ocr(
    tenants: tuple[Tenant, Tenant], mode: str
) -> None:
    alpha, _ = tenants
    scan = base64.b64encode(scanned_pdf(["Harbour dues", "Paid at the office"])).decode()
    progress = Progress()
    async with alpha.mcp(mode=mode) as client:
        result = await client.call_tool(
            "ingest_pdf", {"data": scan, "filename": "dues.pdf"}, progress_callback=progress
        )
    assert not result.is_error, text_of(result)
    # The summary, the link to the document, then the page as scanned with its caption.
    summary, link, caption, image = result.content
    assert isinstance(summary, types.TextContent) and isinstance(link, types.ResourceLink)
    assert isinstance(caption, types.TextContent) and isinstance(image, types.ImageContent)
    assert re.fullmatch(
        r"Page 1 as scanned: its text was read by OCR \(confidence 0\.\d\d\)", caption.text
    ), caption.text
    assert image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    page = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
    assert "harbour dues" in read_image(page).text.lower()
    # The task (over A2A) keeps the page as an artifact of its own: a caption and the file.
    match = TASK_ID.search(progress.messages[0] or "")
    assert match is not None
    task = await alpha.a2a_task(match[1])
    (attached,) = [a for a in task["artifacts"] if (a.get("metadata") or {}).get("attached")]
    assert attached["name"] == "page 1 (OCR)"
    text_part, file_part = attached["parts"]
    assert text_part == {"kind": "text", "text": caption.text}
    assert file_part["file"]["mimeType"] == "image/png"
    assert base64.b64decode(file_part["file"]["bytes"]) == png


async def test_a_failed_ingestion_is_an_error_result_with_the_tasks_reason(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    async with alpha.mcp() as client:
        result = await client.call_tool("ingest_text", {"text": "   ", "title": "Nothing"})
        invalid = await client.call_tool("ingest_text", {"text": 42, "title": "Number"})
    assert result.is_error
    assert text_of(result) == "tool 'ingest_text' failed: the text is empty"
    assert invalid.is_error  # checked before any task is created, as in-process calls are
    assert text_of(invalid).startswith("invalid arguments for tool 'ingest_text': text: ")


async def test_a_cancelled_call_leaves_the_ingestion_running_and_the_same_call_follows_it(
    tenants: tuple[Tenant, Tenant], site: GatedSite
) -> None:
    alpha, _ = tenants
    crawl = {"url": f"{site.url}/", "depth": 1}
    first = Progress()
    async with alpha.mcp() as client:
        with anyio.CancelScope() as scope:

            async def until_the_first_page(
                progress: float, total: float | None, message: str | None
            ) -> None:
                await first(progress, total, message)
                if message is not None and message.startswith("[1] "):
                    scope.cancel()  # the client gives up while the crawl waits at the gate

            await client.call_tool("ingest_url", crawl, progress_callback=until_the_first_page)
        assert scope.cancelled_caught
        match = TASK_ID.search(first.messages[0] or "")
        assert match is not None
        task_id = match[1]
        assert (await alpha.a2a_task(task_id))["status"]["state"] == "working"

        # The same call again: a task that follows the running job, not a second crawl.
        again = Progress()

        async def open_the_gate_once_following(
            progress: float, total: float | None, message: str | None
        ) -> None:
            await again(progress, total, message)
            if message is not None and "following it" in message:
                site.gate.set()

        retried = await client.call_tool(
            "ingest_url", crawl, progress_callback=open_the_gate_once_following
        )
    assert not retried.is_error, text_of(retried)
    assert f"the same ingestion is already running as job {task_id}: following it" in (
        again.messages
    )
    original = await settled(alpha, task_id)
    assert output(original) == retried.structured_content
    assert output(original)["ingested"] == 5
    assert all(count == 1 for count in site.requests.values()), site.requests  # crawled once


# -- MCP tasks (2025-11-25), answered with raw JSON-RPC -----------------------------------


def result_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" in answer, answer
    error: dict[str, Any] = answer["error"]
    return error


async def test_the_server_declares_tasks_and_which_tools_can_run_as_one(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    initialized = result_of(
        await alpha.rpc(
            "initialize",
            {
                "protocolVersion": TASKS_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
    )
    tools = {t["name"]: t for t in result_of(await alpha.rpc("tools/list", {}))["tools"]}
    assert initialized["protocolVersion"] == TASKS_VERSION
    assert initialized["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    for name in ("ingest_text", "ingest_url", "ingest_pdf", "ingest_youtube"):
        assert tools[name]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["hybrid_retrieve"]  # forbidden: runs in-process


async def test_a_task_augmented_call_is_the_a2a_task_and_its_result_the_calls(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    call = {"name": "ingest_text", "arguments": {"text": KITCHEN, "title": "Bread"}}
    created = result_of(await alpha.rpc("tools/call", {**call, "task": {"ttl": 60000}}))
    task = created["task"]
    assert task["status"] == "working"
    assert task["ttl"] is None  # tasks are kept
    assert {"createdAt", "lastUpdatedAt", "pollInterval"} <= set(task)
    task_id = task["taskId"]
    assert task_id in created["_meta"]["io.modelcontextprotocol/model-immediate-response"]

    payload = result_of(await alpha.rpc("tasks/result", {"taskId": task_id}))
    status = result_of(await alpha.rpc("tasks/get", {"taskId": task_id}))
    a2a = await alpha.a2a_task(task_id)

    assert payload["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert payload["structuredContent"] == output(a2a)
    text_block, link = payload["content"]
    assert text_block == {"type": "text", "text": artifact_text(a2a)}
    document_id = payload["structuredContent"]["documents"][0]["document_id"]
    assert (link["type"], link["uri"]) == (
        "resource_link",
        f"agentic-rag://documents/{document_id}",
    )
    assert payload["structuredContent"]["ingested"] == 1
    assert status["taskId"] == task_id and status["status"] == "completed"
    assert status["createdAt"] == task["createdAt"]
    assert status["lastUpdatedAt"] == a2a["status"]["timestamp"]


async def test_a_task_that_fails_ends_failed_with_its_reason(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    call = {"name": "ingest_text", "arguments": {"text": " ", "title": "Blank"}, "task": {}}
    task_id = result_of(await alpha.rpc("tools/call", call))["task"]["taskId"]
    payload = result_of(await alpha.rpc("tasks/result", {"taskId": task_id}))
    status = result_of(await alpha.rpc("tasks/get", {"taskId": task_id}))
    assert payload["isError"] is True
    assert payload["content"][0]["text"] == "tool 'ingest_text' failed: the text is empty"
    assert (status["status"], status["statusMessage"]) == ("failed", "the text is empty")


async def test_cancelling_an_mcp_task_cancels_the_a2a_task(
    tenants: tuple[Tenant, Tenant], site: GatedSite
) -> None:
    alpha, _ = tenants
    call = {"name": "ingest_url", "arguments": {"url": f"{site.url}/"}, "task": {}}
    task_id = result_of(await alpha.rpc("tools/call", call))["task"]["taskId"]
    for _ in range(1500):  # until the crawl waits at the gate, past its first page
        status = result_of(await alpha.rpc("tasks/get", {"taskId": task_id}))
        if (status.get("statusMessage") or "").startswith("[1] "):
            break
        await anyio.sleep(0.02)
    assert status["status"] == "working", status

    cancelled = result_of(await alpha.rpc("tasks/cancel", {"taskId": task_id}))
    again = error_of(await alpha.rpc("tasks/cancel", {"taskId": task_id}))
    payload = result_of(await alpha.rpc("tasks/result", {"taskId": task_id}))

    assert cancelled["status"] == "cancelled"
    assert (await alpha.a2a_task(task_id))["status"]["state"] == "canceled"
    assert again["code"] == types.INVALID_PARAMS
    assert again["message"] == f"cannot cancel: task {task_id} is already canceled"
    assert payload["isError"] is True
    assert payload["content"][0]["text"].startswith("tool 'ingest_url' was canceled: ")


async def test_tasks_are_the_tenants_own(tenants: tuple[Tenant, Tenant]) -> None:
    alpha, beta = tenants
    call = {"name": "ingest_text", "arguments": {"text": GARDEN, "title": "Mine"}, "task": {}}
    task_id = result_of(await alpha.rpc("tools/call", call))["task"]["taskId"]
    result_of(await alpha.rpc("tasks/result", {"taskId": task_id}))
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        foreign = error_of(await beta.rpc(method, {"taskId": task_id}))
        unknown = error_of(await beta.rpc(method, {"taskId": "nope"}))
        assert foreign["code"] == unknown["code"] == types.INVALID_PARAMS
        assert foreign["message"] == f"no task {task_id!r}"
        assert unknown["message"] == "no task 'nope'"
    assert error_of(await beta.a2a("tasks/get", {"id": task_id}))["code"] == -32001


async def test_what_cannot_run_as_a_task_is_refused_before_any_task(
    tenants: tuple[Tenant, Tenant], server: LiveServer
) -> None:
    alpha, _ = tenants
    forbidden = error_of(
        await alpha.rpc("tools/call", {"name": "hybrid_retrieve", "arguments": {}, "task": {}})
    )
    missing = error_of(
        await alpha.rpc("tools/call", {"name": "ingest_text", "arguments": {}, "task": {}})
    )
    reader = Tenant(
        server, (await create_keys(server.settings.database_url or "", "r", k=["read"]))["k"]
    )
    refused = error_of(
        await reader.rpc(
            "tools/call", {"name": "ingest_text", "arguments": {"text": "x"}, "task": {}}
        )
    )
    assert forbidden["code"] == types.METHOD_NOT_FOUND
    assert "does not run as a task" in forbidden["message"]
    assert missing["code"] == types.INVALID_PARAMS
    assert missing["message"] == "tool 'ingest_text' needs the arguments text"  # a title is derived
    assert refused["code"] == FORBIDDEN


# -- documents as resources ---------------------------------------------------------------


async def test_documents_are_resources_listed_read_and_templated(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, _ = tenants
    garden = await alpha.ingest(GARDEN, "Garden notes")
    await alpha.ingest("Plain words, no markup at all.", "Plain")
    document_id = garden["documents"][0]["document_id"]
    uri = f"agentic-rag://documents/{document_id}"
    async with alpha.mcp() as client:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        read = await client.read_resource(uri)
    by_title = {r.title: r for r in listed.resources}
    assert set(by_title) == {"Garden notes", "Plain"} and listed.next_cursor is None
    resource = by_title["Garden notes"]
    assert resource.uri == uri
    assert resource.mime_type == "text/markdown"
    assert resource.description == "Garden notes, from Garden notes"
    assert resource.meta is not None and resource.meta["sourceId"] == garden["source_id"]
    ((template),) = templates.resource_templates
    assert template.uri_template == "agentic-rag://documents/{document_id}"
    (content,) = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == uri and content.mime_type == "text/markdown"
    assert "six hours of direct sunlight" in content.text
    assert content.meta is not None and content.meta["title"] == "Garden notes"


async def test_resources_come_in_pages(tenants: tuple[Tenant, Tenant]) -> None:
    alpha, _ = tenants
    slots = asyncio.Semaphore(8)

    async def note(n: int) -> None:
        async with slots:
            await alpha.ingest(f"Note number {n} about the weather.", f"Note {n:03}")

    await asyncio.gather(*(note(n) for n in range(PAGE_SIZE + 1)))  # one more than a page
    async with alpha.mcp() as client:
        first = await client.list_resources()
        second = await client.list_resources(cursor=first.next_cursor)
        with pytest.raises(MCPError) as bad:
            await client.list_resources(cursor="not-a-cursor")
    assert len(first.resources) == PAGE_SIZE and first.next_cursor is not None
    assert len(second.resources) == 1 and second.next_cursor is None
    titles = [r.title or "" for r in first.resources + second.resources]
    assert sorted(titles) == [f"Note {n:03}" for n in range(PAGE_SIZE + 1)]  # each once
    assert bad.value.code == types.INVALID_PARAMS


async def test_another_tenants_document_reads_like_an_unknown_one(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    garden = await alpha.ingest(GARDEN, "Garden notes")
    uri = f"agentic-rag://documents/{garden['documents'][0]['document_id']}"
    async with beta.mcp() as client:
        listed = await client.list_resources()
        with pytest.raises(MCPError) as foreign:
            await client.read_resource(uri)
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("agentic-rag://documents/nope")
        with pytest.raises(MCPError) as elsewhere:
            await client.read_resource("file:///etc/passwd")
    assert listed.resources == []
    for error, asked in ((foreign, uri), (unknown, "agentic-rag://documents/nope")):
        assert error.value.code == types.INVALID_PARAMS
        assert error.value.message == f"unknown resource {asked!r}"
    assert elsewhere.value.message == "unknown resource 'file:///etc/passwd'"


async def test_a_durable_call_asks_for_its_missing_argument_before_its_task(
    tenants: tuple[Tenant, Tenant],
) -> None:
    # 2026-07-28: the form is an input_required result; the answer starts the ingestion.
    alpha, _ = tenants
    elicit = Elicitations({"text": "Herons stand still for hours."})
    async with alpha.mcp(elicitation_callback=elicit) as client:
        result = await client.call_tool("ingest_text", {"title": "Herons"})
    assert not result.is_error and result.structured_content is not None, result
    assert result.structured_content["ingested"] == 1
    (asked,) = elicit.asked
    assert list(asked.requested_schema["properties"]) == ["text"]
    assert asked.requested_schema["properties"]["text"]["description"] == "Markdown or plain text"


# -- content types of tool results ------------------------------------------------------


def links_of(result: types.CallToolResult) -> list[types.ResourceLink]:
    links = [c for c in result.content[1:] if isinstance(c, types.ResourceLink)]
    assert len(links) == len(result.content) - 1, result.content  # text first, then links
    return links


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_results_link_their_documents_and_get_document_embeds_one(
    tenants: tuple[Tenant, Tenant], mode: str
) -> None:
    alpha, _ = tenants
    async with alpha.mcp(mode=mode) as client:
        ingested = await client.call_tool("ingest_text", {"text": GARDEN, "title": "Garden notes"})
        await client.call_tool("ingest_text", {"text": KITCHEN, "title": "Kitchen notes"})
        assert ingested.structured_content is not None, ingested
        document_id = ingested.structured_content["documents"][0]["document_id"]
        uri = f"agentic-rag://documents/{document_id}"
        found = await client.call_tool(
            "hybrid_retrieve", {"query": "sunlight tomatoes", "top_k": 6}
        )
        whole = await client.call_tool("get_document", {"document_id": document_id})
        bare = await client.call_tool(
            "get_document", {"document_id": document_id, "include_text": False}
        )
        missing = await client.call_tool("get_document", {"document_id": "no-such-document"})
        read = await client.read_resource(uri)
    (ingested_link,) = links_of(ingested)
    assert (ingested_link.uri, ingested_link.title) == (uri, "Garden notes")
    # Each document a hit names, once, in the order of its first hit.
    assert found.structured_content is not None
    hit_documents = [h["provenance"]["document_id"] for h in found.structured_content["hits"]]
    expected = [f"agentic-rag://documents/{d}" for d in dict.fromkeys(hit_documents)]
    assert [link.uri for link in links_of(found)] == expected
    assert uri in expected and len(hit_documents) > len(expected)  # two documents, six hits
    # get_document: the document itself, the contents resources/read gives.
    text_block, embedded = whole.content
    assert isinstance(text_block, types.TextContent) and isinstance(
        embedded, types.EmbeddedResource
    )
    (contents,) = read.contents
    assert embedded.resource == contents.model_copy(update={"meta": None})
    (bare_link,) = links_of(bare)
    assert bare_link.uri == uri
    # An error a model can act on: what was not found, and where ids come from.
    assert missing.is_error and len(missing.content) == 1
    assert "no-such-document" in text_of(missing)
    if mode == "auto":  # 2026-07-28: a read is the caller's own, briefly cacheable
        assert (read.ttl_ms, read.cache_scope) == (10_000, "private")


# -- the prompt ---------------------------------------------------------------------------


async def test_the_prompt_answers_with_citations_from_the_callers_sources(
    tenants: tuple[Tenant, Tenant],
) -> None:
    alpha, beta = tenants
    await alpha.ingest(GARDEN, "Garden notes")
    await alpha.ingest(KITCHEN, "Kitchen notes")
    question = "How often should I water tomato plants?"
    async with alpha.mcp() as client:
        (prompt,) = (await client.list_prompts()).prompts
        got = await client.get_prompt(prompt.name, {"question": question, "top_k": "2"})
        with pytest.raises(MCPError) as no_question:
            await client.get_prompt(prompt.name, {})
        with pytest.raises(MCPError) as bad_top_k:
            await client.get_prompt(prompt.name, {"question": question, "top_k": "lots"})
    async with beta.mcp() as client:
        theirs = await client.get_prompt(prompt.name, {"question": question})

    assert prompt.name == "answer_with_citations"
    assert [(a.name, a.required) for a in prompt.arguments or []] == [
        ("question", True),
        ("top_k", False),
    ]
    (message,) = got.messages
    assert message.role == "user" and isinstance(message.content, types.TextContent)
    text = message.content.text
    assert "using only the numbered sources" in text and "[1] or [2][3]" in text
    assert f"Question: {question}" in text
    assert "[1] Garden notes (Garden notes)\n" in text and "twice a week" in text
    assert re.findall(r"^\[\d+\] ", text, re.MULTILINE) == ["[1] ", "[2] "]  # top_k 2
    assert no_question.value.code == bad_top_k.value.code == types.INVALID_PARAMS
    assert (
        no_question.value.message == "prompt 'answer_with_citations' needs the argument 'question'"
    )
    (others,) = theirs.messages
    assert isinstance(others.content, types.TextContent)
    assert "(none: nothing in the knowledge base matches)" in others.content.text
    assert "Garden" not in others.content.text

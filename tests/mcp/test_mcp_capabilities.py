"""MCP logging, completion, resource subscriptions and `tasks/list` (protocol 2025-11-25), with
the official SDK's client over Streamable HTTP and stdio against the product's own server.

The HTTP server is the product's under uvicorn with two tenants' keys; the stdio server is
`agentic-rag mcp` started as desktop clients start it, on the same database as an HTTP server
of its tenant, which plays another worker: the changes it makes reach the stdio client.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentic_rag.mcp.resources import TEMPLATE, document_uri
from agentic_rag.mcp.tasks import PAGE_SIZE as TASKS_PAGE
from tests.support.databases import new_database
from tests.support.knowledge import article_page
from tests.support.live import LiveServer, live_server, serve_in_thread
from tests.support.mcp import BIN, base_env, until
from tests.support.security import create_keys

LEGACY = "legacy"  # the SDK client's handshake mode: protocol 2025-11-25
MODERN = "auto"  # the SDK client's default: protocol 2026-07-28 against this server


class Logged:
    """A logging callback that keeps what the server logged."""

    def __init__(self) -> None:
        self.lines: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.lines.append(params)

    def at(self, level: str) -> list[str]:
        return [str(line.data) for line in self.lines if line.level == level]

    @property
    def levels(self) -> set[str]:
        return {line.level for line in self.lines}


class Notified:
    """A message handler that keeps the resource notifications the server sent."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.list_changed = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(message.params.uri)
        elif isinstance(message, types.ResourceListChangedNotification):
            self.list_changed += 1


@dataclass
class Site:
    """A page whose text the test changes, and a page linking to a missing one."""

    text: str = "Version one of the tide table: high water at noon."
    url: str = ""
    requests: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            path = request.url.path
            if path == "/tides":
                return HTMLResponse(article_page("Tide table", self.text))
            if path == "/broken":
                link = '<a href="/missing">the missing page</a>'
                return HTMLResponse(
                    article_page("Broken links", "A page that links nowhere.", link)
                )
            return PlainTextResponse("not found", status_code=404)

        return Starlette(routes=[Route("/{path:path}", serve)])


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    page = Site()
    with serve_in_thread(page.app()) as url:
        page.url = url
        yield page


@pytest.fixture(scope="module")
async def database_url(postgres_dsn: str) -> str:
    return await new_database(postgres_dsn)


@pytest.fixture(scope="module")
async def keys(database_url: str) -> dict[str, str]:
    """Keys made before the server starts, so it requires them: `local` is the tenant the
    stdio server's one caller is, `other` a tenant it must never hear of."""
    made = {}
    for tenant in ("local", "other", "third"):
        made[tenant] = (await create_keys(database_url, tenant, key=["read", "write"]))["key"]
    return made


@pytest.fixture(scope="module")
async def server(
    database_url: str, keys: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    with live_server(
        None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("capabilities"),
        ingest_allow_private=["127.0.0.1"],
        ingest_host_interval_seconds=0,
    ) as live:
        yield live


def http_client(server: LiveServer, key: str, mode: str = LEGACY, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=120)
    transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
    return Client(transport, mode=mode, **options)


def stdio_client(database_url: str, data_dir: Path, **options: Any) -> Client:
    server = StdioServerParameters(
        command=str(BIN / "agentic-rag"),
        args=["mcp", "--data-dir", str(data_dir)],
        env=base_env(DATABASE_URL=database_url),
    )
    return Client(server, mode=LEGACY, **options)


async def ingest_text(client: Client, text: str, title: str) -> str:
    result = await client.call_tool("ingest_text", {"text": text, "title": title})
    assert not result.is_error and result.structured_content is not None, result
    document_id: str = result.structured_content["documents"][0]["document_id"]
    return document_id


# -- logging ------------------------------------------------------------------------------


async def test_http_declares_logging_completions_and_subscriptions(
    server: LiveServer, keys: dict[str, str]
) -> None:
    async with http_client(server, keys["other"]) as client:
        capabilities = client.server_capabilities
    assert capabilities.logging is not None
    assert capabilities.completions is not None
    # A session (one worker) is a connection to notify between requests.
    assert capabilities.resources is not None
    assert capabilities.resources.subscribe and capabilities.resources.list_changed
    assert capabilities.tasks is not None and capabilities.tasks.list is not None


async def test_http_session_subscriptions_hear_a_reingested_document(
    server: LiveServer, keys: dict[str, str], site: Site
) -> None:
    tides = f"{site.url}/tides"
    site.text = "Version three of the tide table: high water at two."
    mine, theirs = Notified(), Notified()
    async with (
        http_client(server, keys["local"]) as worker,
        http_client(server, keys["local"], message_handler=mine) as subscriber,
        http_client(server, keys["other"], message_handler=theirs) as other,
    ):
        first = await worker.call_tool("ingest_url", {"url": tides, "depth": 0})
        assert first.structured_content is not None, first
        uri = document_uri(first.structured_content["documents"][0]["document_id"])
        await subscriber.subscribe_resource(uri)
        # Another tenant cannot subscribe to it: to that tenant it does not exist.
        with pytest.raises(MCPError) as foreign:
            await other.subscribe_resource(uri)
        site.text = "Version four of the tide table: high water at three."
        changed = await worker.call_tool("ingest_url", {"url": tides, "depth": 0})
        assert changed.structured_content is not None, changed
        await until(lambda: mine.updated == [uri])
        seen = mine.list_changed
        pier = await ingest_text(worker, "A flag on the pier marks high water.", "Pier")
        await until(lambda: mine.list_changed > seen)  # a document of its tenant added
        await subscriber.subscribe_resource(document_uri(pier))
        await subscriber.unsubscribe_resource(uri)
        site.text = "Version five of the tide table: high water at four."
        await worker.call_tool("ingest_url", {"url": tides, "depth": 0})
        # Told after the re-ingest above: had the unsubscribed one come, it would be first.
        await worker.call_tool("delete_document", {"document_id": pier})
        await until(lambda: len(mine.updated) == 2)
    assert mine.updated == [uri, document_uri(pier)]
    assert foreign.value.code == types.INVALID_PARAMS
    # The other tenant's session heard nothing of this tenant's documents.
    assert theirs.updated == [] and theirs.list_changed == 0


async def test_log_lines_come_at_the_level_the_client_set(
    server: LiveServer, keys: dict[str, str], site: Site
) -> None:
    at_debug, at_warning = Logged(), Logged()
    async with http_client(server, keys["third"], logging_callback=at_debug) as client:
        await client.set_logging_level("debug")
        await ingest_text(client, "Herons stand still for hours.", "Herons")
    async with http_client(server, keys["third"], logging_callback=at_warning) as client:
        await client.set_logging_level("warning")
        await ingest_text(client, "Egrets are smaller herons.", "Egrets")
        crawled = await client.call_tool(
            "ingest_url", {"url": f"{site.url}/broken", "depth": 1, "max_pages": 5}
        )
    # At debug: how the call runs (its task), and the ingestion's progress at info.
    (task_line,) = at_debug.at("debug")
    assert task_line.startswith("ingest_text runs as task ")
    assert at_debug.at("info")
    # At warning: neither, but the page that could not be read.
    assert not crawled.is_error and crawled.structured_content is not None
    (failed,) = crawled.structured_content["failed"]
    assert failed["url"] == f"{site.url}/missing"
    assert at_warning.levels == {"warning"}
    assert at_warning.at("warning") == [f"failed: {site.url}/missing: {failed['reason']}"]
    assert {line.logger for line in at_warning.lines} == {"ingest_url"}


async def test_a_level_is_the_callers_own(server: LiveServer, keys: dict[str, str]) -> None:
    # `third` asked for debug lines above; `other` did not: it gets warnings only (the default).
    logged = Logged()
    async with http_client(server, keys["other"], logging_callback=logged) as client:
        await ingest_text(client, "Cormorants dry their wings.", "Cormorants")
    assert logged.lines == []


# -- completion ---------------------------------------------------------------------------


async def test_completion_offers_the_callers_documents_only(
    server: LiveServer, keys: dict[str, str]
) -> None:
    async with http_client(server, keys["local"]) as local:
        mine = await ingest_text(local, "Otters hold hands while they sleep.", "Otters asleep")
    async with http_client(server, keys["other"]) as other:
        theirs = await ingest_text(other, "Otters eat crabs.", "Otters at lunch")
        template = types.ResourceTemplateReference(type="ref/resource", uri=TEMPLATE)
        prompt = types.PromptReference(type="ref/prompt", name="answer_with_citations")
        by_title = await other.complete(template, {"name": "document_id", "value": "otters"})
        by_id = await other.complete(template, {"name": "document_id", "value": theirs[:6]})
        questions = await other.complete(prompt, {"name": "question", "value": "Ott"})
        top_k = await other.complete(prompt, {"name": "top_k", "value": "1"})
        nothing = await other.complete(template, {"name": "document_id", "value": mine[:8]})
        with pytest.raises(MCPError) as unknown:
            await other.complete(
                types.PromptReference(type="ref/prompt", name="no_such_prompt"),
                {"name": "question", "value": ""},
            )
    assert by_title.completion.values == [theirs]
    assert by_id.completion.values == [theirs]
    assert questions.completion.values == ["Otters at lunch"]
    assert top_k.completion.values == ["1", *(str(n) for n in range(10, 20))]
    assert nothing.completion.values == []  # another tenant's id is no completion
    assert unknown.value.code == types.INVALID_PARAMS


# -- tasks/list ---------------------------------------------------------------------------


async def list_tasks(client: Client, cursor: str | None = None) -> types.ListTasksResult:
    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
    return await client.session.send_request(
        types.ListTasksRequest(params=params), types.ListTasksResult
    )


async def test_tasks_list_pages_through_the_callers_tasks(
    server: LiveServer, database_url: str
) -> None:
    tenant = f"t{uuid.uuid4().hex[:10]}"
    key = (await create_keys(database_url, tenant, key=["read", "write"]))["key"]
    async with http_client(server, key) as client:
        slots = asyncio.Semaphore(8)

        async def note(n: int) -> None:
            async with slots:
                await ingest_text(client, f"Tide note {n}.", f"Tide {n}")

        await asyncio.gather(*(note(n) for n in range(TASKS_PAGE + 1)))  # one more than a page
        first = await list_tasks(client)
        second = await list_tasks(client, first.next_cursor)
    assert len(first.tasks) == TASKS_PAGE and first.next_cursor is not None
    assert len(second.tasks) == 1 and second.next_cursor is None
    ids = [t.task_id for t in first.tasks + second.tasks]
    assert len(set(ids)) == TASKS_PAGE + 1
    assert {t.status for t in first.tasks + second.tasks} == {"completed"}


async def test_tasks_list_shows_no_other_tenants_task(
    server: LiveServer, keys: dict[str, str], database_url: str
) -> None:
    tenant = f"t{uuid.uuid4().hex[:10]}"
    key = (await create_keys(database_url, tenant, key=["read", "write"]))["key"]
    async with http_client(server, keys["other"]) as other:
        await ingest_text(other, "Puffins nest in burrows.", "Puffins")
        theirs = {t.task_id for t in (await list_tasks(other)).tasks}
    async with http_client(server, key) as newcomer:
        empty = await list_tasks(newcomer)
    assert theirs and empty.tasks == [] and empty.next_cursor is None


# -- stdio: logging, completion and subscriptions to changes another worker makes --------


async def test_stdio_subscriptions_hear_another_workers_changes(
    server: LiveServer,
    keys: dict[str, str],
    database_url: str,
    site: Site,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tides = f"{site.url}/tides"
    async with http_client(server, keys["local"]) as worker:
        first = await worker.call_tool("ingest_url", {"url": tides, "depth": 0})
        assert first.structured_content is not None, first
        (page,) = first.structured_content["documents"]
        uri = document_uri(page["document_id"])
        notified, logged = Notified(), Logged()
        data_dir = tmp_path_factory.mktemp("stdio-data")
        async with stdio_client(
            database_url, data_dir, message_handler=notified, logging_callback=logged
        ) as desktop:
            capabilities = desktop.server_capabilities
            listed = {r.uri for r in (await desktop.list_resources()).resources}
            await desktop.subscribe_resource(uri)
            with pytest.raises(MCPError) as unknown:
                await desktop.subscribe_resource(document_uri("no-such-document"))
            await desktop.set_logging_level("debug")
            await ingest_text(desktop, "Tides turn twice a day.", "Tide turns")
            completed = await desktop.complete(
                types.PromptReference(type="ref/prompt", name="answer_with_citations"),
                {"name": "question", "value": "tide"},
            )
            await until(lambda: notified.list_changed >= 1)  # its own new document

            # Another worker: a new document of the tenant, then the page re-ingested changed.
            seen = notified.list_changed
            await ingest_text(worker, "Spring tides come with the full moon.", "Spring")
            await until(lambda: notified.list_changed > seen)
            site.text = "Version two of the tide table: high water at one."
            changed = await worker.call_tool("ingest_url", {"url": tides, "depth": 0})
            assert changed.structured_content is not None
            assert changed.structured_content["documents"][0]["document_id"] == page["document_id"]
            await until(lambda: notified.updated == [uri])

            # Another tenant's new document is no change of this client's list.
            seen = notified.list_changed
            async with http_client(server, keys["other"]) as other:
                await ingest_text(other, "Neap tides are small.", "Neap")
            # ... and then this tenant's deletion is: updated, and the list changed.
            deleted = await worker.call_tool(
                "delete_document", {"document_id": page["document_id"]}
            )
            assert not deleted.is_error
            await until(lambda: notified.updated == [uri, uri])
            await until(lambda: notified.list_changed > seen)
            assert notified.list_changed == seen + 1  # the deletion only, not the other tenant
    assert capabilities.resources is not None
    assert capabilities.resources.subscribe and capabilities.resources.list_changed
    assert capabilities.logging is not None and capabilities.completions is not None
    assert uri in listed
    assert unknown.value.code == types.INVALID_PARAMS
    assert any(line.startswith("ingest_text runs as task ") for line in logged.at("debug"))
    assert completed.completion.values == ["Tide table", "Tide turns"]


# -- 2026-07-28 over HTTP: subscriptions/listen ------------------------------------------


async def first_events(subscription: Any, count: int) -> list[Any]:
    events = []
    with anyio.fail_after(60):
        async for event in subscription:
            events.append(event)
            if len(events) == count:
                return events
    raise AssertionError(f"the stream ended after {events}")


async def test_http_listen_streams_the_callers_document_changes_only(
    server: LiveServer, keys: dict[str, str]
) -> None:
    async with (
        http_client(server, keys["local"]) as local,
        http_client(server, keys["other"]) as other,
    ):
        mine = await ingest_text(local, "Terns fly from pole to pole.", "Terns")
        theirs = await ingest_text(other, "Skuas chase terns.", "Skuas")
        async with (
            http_client(server, keys["local"], mode=MODERN) as local_listener,
            http_client(server, keys["other"], mode=MODERN) as other_listener,
            local_listener.listen(
                resources_list_changed=True, resource_subscriptions=[document_uri(mine)]
            ) as heard_by_local,
            # The other tenant names this tenant's document too: it must hear nothing of it.
            other_listener.listen(
                resource_subscriptions=[document_uri(mine), document_uri(theirs)]
            ) as heard_by_other,
        ):
            for client, document_id in ((local, mine), (other, theirs)):
                deleted = await client.call_tool("delete_document", {"document_id": document_id})
                assert not deleted.is_error
            local_events = await first_events(heard_by_local, 2)
            other_events = await first_events(heard_by_other, 1)
    assert local_events == [ResourceUpdated(uri=document_uri(mine)), ResourcesListChanged()]
    # Deleted after the other tenant's document: had that leaked, it would have come first.
    assert other_events == [ResourceUpdated(uri=document_uri(theirs))]


# -- the stdio bridge: log messages and completions of the server it forwards to ----------


async def test_the_bridge_forwards_log_messages_and_completions(
    server: LiveServer, database_url: str
) -> None:
    tenant = f"t{uuid.uuid4().hex[:10]}"
    key = (await create_keys(database_url, tenant, key=["read", "write"]))["key"]
    bridge = StdioServerParameters(
        command=str(BIN / "agentic-rag-mcp"),
        env=base_env(AGENTIC_RAG_URL=server.url, AGENTIC_RAG_API_KEY=key),
    )
    at_debug, at_warning = Logged(), Logged()
    async with Client(bridge, mode=LEGACY, logging_callback=at_debug) as desktop:
        capabilities = desktop.server_capabilities
        await desktop.set_logging_level("debug")
        await ingest_text(desktop, "Gannets dive from thirty metres.", "Gannets diving")
        completed = await desktop.complete(
            types.PromptReference(type="ref/prompt", name="answer_with_citations"),
            {"name": "question", "value": "gann"},
        )
    async with Client(bridge, mode=LEGACY, logging_callback=at_warning) as desktop:
        await ingest_text(desktop, "Gannets nest in colonies.", "Gannet colonies")
    assert capabilities.logging is not None and capabilities.completions is not None
    (task_line,) = at_debug.at("debug")
    assert task_line.startswith("ingest_text runs as task ")
    assert completed.completion.values == ["Gannets diving"]
    assert at_warning.lines == []  # the bridge's level is `warning` until the client sets one

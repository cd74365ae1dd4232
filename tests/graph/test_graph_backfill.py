"""Documents stored before AGENTIC_RAG_GRAPH_INGEST_DOCUMENTS was on get their episodes when
ingestion finds them unchanged: by content hash (ingest_text) or by HTTP 304 on a re-crawl
(ingest_url, whose unchanged page is not read again: its stored text becomes the episode).
Once queued, an unchanged document queues nothing more.

The LLM is `RecordedChat` (tests/graph/test_graph_llm.py): the test double of a hosted
OpenAI-compatible chat API that replays recorded answers. Everything else is real: the
product's server (stopped with the setting off, started again with it on, on the same
database and data directory), the local embedder, PostgreSQL, the embedded FalkorDB and a
web site on 127.0.0.1.
"""

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tests.support.databases import new_database
from tests.support.graph import TEXT, RecordedChat, Tenant, episodes, new_tenant
from tests.support.knowledge import page
from tests.support.live import LiveServer, live_server, serve_in_thread

HARBOUR = page("Harbour", "The harbour master opens the lock at high tide every morning.")
ETAG = '"harbour-1"'


class Site:
    """One page with an ETag: a conditional request for it is answered 304 Not Modified."""

    def __init__(self) -> None:
        self.answers: Counter[int] = Counter()

    def app(self) -> Starlette:
        async def harbour(request: Request) -> Response:
            if request.headers.get("if-none-match") == ETAG:
                self.answers[304] += 1
                return Response(status_code=304, headers={"ETag": ETAG})
            self.answers[200] += 1
            return HTMLResponse(HARBOUR, headers={"ETag": ETAG})

        return Starlette(routes=[Route("/harbour", harbour)])


@pytest.fixture(scope="module")
def chat() -> Iterator[str]:
    with serve_in_thread(RecordedChat().app()) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[Site, str]]:
    harbour = Site()
    with serve_in_thread(harbour.app()) as url:
        yield harbour, f"{url}/harbour"


@contextmanager
def knowledge_server(
    database_url: str, data_dir: Path, chat: str, *, documents: bool
) -> Iterator[LiveServer]:
    with live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        llm_base_url=chat,
        llm_model="recorded-model",
        graph_ingest_documents=documents,
        ingest_allow_private=["127.0.0.1"],
        ingest_host_interval_seconds=0,
    ) as live:
        yield live


async def ingest_both(tenant: Tenant, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """ingest_text of TEXT and ingest_url of the page: their summaries."""
    text = await tenant.result("ingest_text", text=TEXT, title="Team news")
    crawled = await tenant.result("ingest_url", url=url, depth=0)
    return text, crawled


async def test_unchanged_documents_without_episodes_get_them_queued_once(
    postgres_dsn: str, tmp_path: Path, chat: str, site: tuple[Site, str]
) -> None:
    harbour, url = site
    database_url = await new_database(postgres_dsn)
    with knowledge_server(database_url, tmp_path, chat, documents=False) as off:
        acme = await new_tenant(off)
        text, crawled = await ingest_both(acme, url)
        assert crawled["ingested"] == 1 and harbour.answers[200] == 1
        assert await episodes(acme) == []
        text_document = text["documents"][0]["document_id"]
        page_document = crawled["documents"][0]["document_id"]

    with knowledge_server(database_url, tmp_path, chat, documents=True) as on:
        acme = replace(acme, server=on)
        text, crawled = await ingest_both(acme, url)
        assert [d["status"] for d in text["documents"]] == ["unchanged"]
        assert crawled["unchanged"] == 1 and harbour.answers[304] == 1  # not read again
        queued = await episodes(acme)
        sources = sorted(e["source_description"].split(",")[0] for e in queued)
        assert sources == sorted([f"document {text_document}", f"document {page_document}"])
        assert {e["name"] for e in queued} == {"Team news", "Harbour"}

        # Unchanged again: each has its episode (queued or extracted), none more is queued.
        await ingest_both(acme, url)
        assert harbour.answers[304] == 2
        assert {e["uuid"] for e in await episodes(acme)} == {e["uuid"] for e in queued}

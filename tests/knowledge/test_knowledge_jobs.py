"""A crawl's job interrupted mid-way and run again under the same id, as a worker that takes
its task over runs it (issue 19, point 13): the resumed run's summary counts the whole job,
the documents and chunks the interrupted run stored as well as its own.

Real parts: the knowledge service, PostgreSQL, the embedder, HTTP on loopback. The
subprocess test in test_knowledge_ingest.py does the same with `kill -9` and a restart.
"""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentic_rag.config import Settings
from agentic_rag.ids import new_id
from agentic_rag.knowledge.results import CrawlRequest, IngestSummary
from agentic_rag.knowledge.service import KnowledgeService
from tests.support.knowledge import page
from tests.support.live import serve_in_thread

PAGES = 16


def harbour_site() -> Starlette:
    """An index linking to PAGES - 1 pages, each a little slow: an interruption lands
    mid-crawl."""

    async def serve_page(request: Request) -> Response:
        path = request.url.path.strip("/")
        if path == "robots.txt":
            return PlainTextResponse("User-agent: *\nAllow: /\n")
        number = int(path or 0) if path.isdigit() or not path else PAGES
        if number >= PAGES:
            return PlainTextResponse("not found", status_code=404)
        await asyncio.sleep(0.1)
        links = [f"/{n}" for n in range(1, PAGES)] if number == 0 else []
        text = (
            f"Berth {number} of the harbour takes ships up to {number * 12 + 40} metres, and "
            f"its crane lifts {number * 3 + 10} tonnes; it opened in {1950 + number}."
        )
        return HTMLResponse(page(f"Berth {number}", text, *links))

    return Starlette(routes=[Route("/{path:path}", serve_page)])


@pytest.fixture
def site() -> Iterator[str]:
    with serve_in_thread(harbour_site()) as url:
        yield url


async def stored(pool: asyncpg.Pool) -> tuple[int, int]:
    row = await pool.fetchrow(
        "SELECT (SELECT count(*) FROM documents) AS documents, "
        "(SELECT count(*) FROM chunks) AS chunks"
    )
    assert row is not None
    return int(row["documents"]), int(row["chunks"])


async def test_a_resumed_crawl_counts_the_pages_its_interrupted_run_stored(
    pool: asyncpg.Pool, data_dir: Path, site: str
) -> None:
    settings = Settings(
        data_dir=data_dir, ingest_allow_private=["127.0.0.1"], ingest_host_interval_seconds=0
    )
    service = KnowledgeService(settings, pool)
    await service.start()
    request = CrawlRequest(url=f"{site}/0", depth=1, max_pages=PAGES + 4)
    job_id = new_id()

    async def crawl() -> IngestSummary:
        async def report(message: str) -> None:
            pass

        return await service.ingest_url("alpha", job_id, report, request)

    try:
        first = asyncio.create_task(crawl())
        async with asyncio.timeout(120):
            while (await stored(pool))[0] < 4:
                assert not first.done(), first
                await asyncio.sleep(0.05)
        first.cancel()  # as a shutdown or a lost worker leaves it: the job stays running
        with pytest.raises(asyncio.CancelledError):
            await first
        before = (await stored(pool))[0]
        assert 4 <= before < PAGES

        summary = await crawl()  # what the worker that takes the task over runs
    finally:
        await service.stop()
    documents, chunks = await stored(pool)
    assert documents == PAGES
    assert summary.ingested == len(summary.documents) == PAGES
    assert summary.chunks == chunks == sum(d.chunks for d in summary.documents)
    assert {d.status for d in summary.documents} == {"created"}
    assert len({d.document_id for d in summary.documents}) == PAGES
    assert all(d.uri.startswith(site) and d.title.startswith("Berth") for d in summary.documents)

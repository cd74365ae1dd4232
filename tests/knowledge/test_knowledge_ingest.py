"""Ingestion end to end: the product's server crawls a site served by the test, ingests PDFs
(text and scanned) and transcripts, then retrieves, reranks, explains and deletes; the
knowledge service streams a 600-page PDF page by page with progress; a crawl
killed with SIGKILL in the middle is completed by the next start, with no page stored twice.

Real parts throughout: the server, PostgreSQL, the embedder, the OCR model, HTTP on loopback.
"""

import asyncio
import base64
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from agentic_rag.config import Settings
from agentic_rag.ids import new_id
from agentic_rag.knowledge.results import IngestSummary
from agentic_rag.knowledge.service import KnowledgeService
from tests.support.knowledge import Caller, page
from tests.support.live import LiveServer, free_port, live_server, serve_in_thread, until_ready
from tests.support.outcomes import failure, output
from tests.support.pdf_samples import scanned_pdf, text_pdf
from tests.support.rpc import call, stream, text_message
from tests.support.security import create_key

ROOT = Path(__file__).resolve().parents[2]


LIGHTHOUSE = (
    "The lighthouse keeper climbs one hundred and twelve steps every evening to light the lamp, "
    "and records the weather in the logbook at midnight."
)
TIDES = (
    "Spring tides happen twice a month, near the new and the full moon, when the sun and the "
    "moon pull in the same direction and the tidal range is greatest."
)


class Site:
    """A small site: links, robots.txt, a sitemap, PDFs, a JavaScript-only page and a redirect
    to a private address."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.base = ""

    def app(self) -> Starlette:
        pages = {
            "/": page(
                "Harbour guide",
                "Everything about our harbour. Read about the lighthouse and the tides.",
                "/lighthouse",
                "/tides",
                "/private/keys",
                "/app",
                "/report.pdf",
                "/scan.pdf",
                "/elsewhere",
            ),
            "/lighthouse": page("The lighthouse", LIGHTHOUSE, "/"),
            "/tides": page("Tides", TIDES, "/"),
            "/private/keys": page("Keys", "The spare keys are under the mat."),
            "/from-sitemap": page(
                "Harbour fees", "Mooring costs twelve euros a night for boats under ten metres."
            ),
            "/app": (
                "<!doctype html><html><head><title>App</title></head><body><div id=root></div>"
                "<script>document.getElementById('root').textContent='hi'</script></body></html>"
            ),
        }
        report = text_pdf(
            [["Annual harbour report.", "The breakwater was repaired in March."]],
            title="Harbour report",
        )
        scan = scanned_pdf(["Ferry timetable", "The ferry leaves at seven"])

        async def serve_page(request: Request) -> Response:
            path = request.url.path
            self.requests[path] = self.requests[path] + 1
            if path == "/robots.txt":
                return PlainTextResponse(
                    f"User-agent: *\nDisallow: /private/\nSitemap: {self.base}/sitemap.xml\n"
                )
            if path == "/sitemap.xml":
                return Response(
                    '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                    f'sitemap/0.9"><url><loc>{self.base}/from-sitemap</loc></url></urlset>',
                    media_type="application/xml",
                )
            if path == "/report.pdf":
                return Response(report, media_type="application/pdf")
            if path == "/scan.pdf":
                return Response(scan, media_type="application/pdf")
            if path == "/elsewhere":
                return RedirectResponse("http://10.0.0.1/internal", status_code=302)
            if path not in pages:
                return PlainTextResponse("not found", status_code=404)
            etag = f'"{hash(pages[path]) & 0xFFFFFFFF:x}"'
            if request.headers.get("if-none-match") == etag:
                return Response(status_code=304, headers={"ETag": etag})
            return HTMLResponse(pages[path], headers={"ETag": etag})

        return Starlette(routes=[Route("/{path:path}", serve_page)])


@pytest.fixture
def site() -> Iterator[Site]:
    harbour = Site()
    with serve_in_thread(harbour.app()) as url:
        harbour.base = url
        yield harbour


@pytest.fixture
def server(database_url: str, data_dir: Path) -> Iterator[tuple[LiveServer, Caller, Caller]]:
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        ingest_allow_private=["127.0.0.1"],
        ingest_host_interval_seconds=0,
    ) as live:
        alpha, beta = Caller(live.url, alpha_key), Caller(live.url, beta_key)
        yield live, alpha, beta
        alpha.client.close()
        beta.client.close()


def test_a_site_is_crawled_then_searched_explained_and_deleted(
    site: Site, server: tuple[LiveServer, Caller, Caller]
) -> None:
    _, alpha, beta = server
    # A bare URL sent as text is an ingestion, not a question.
    task = alpha.ask(f"ingest {site.base}/")
    summary = output(task)
    assert task["artifacts"][0]["name"] == "ingest_url"
    titles = {d["title"] for d in summary["documents"]}
    assert {"Harbour guide", "The lighthouse", "Tides", "Harbour report"} <= titles
    skipped = {o["url"].removeprefix(site.base): o["reason"] for o in summary["skipped"]}
    failed = {o["url"].removeprefix(site.base): o["reason"] for o in summary["failed"]}
    assert skipped["/private/keys"].startswith("robots")
    assert skipped["/app"].startswith("no text after extraction")
    assert failed["/elsewhere"].startswith("refused")
    assert site.requests["/private/keys"] == 0
    # The scanned PDF was read by OCR and says so.
    scan = next(d for d in summary["documents"] if d["uri"].endswith("/scan.pdf"))
    assert any("OCR" in note for note in scan["notes"])
    assert summary["ingested"] == len(summary["documents"])
    # Progress was reported page by page while it ran: in the task's event log, not its history.
    replayed = stream(alpha.client, "tasks/resubscribe", {"id": task["id"]}, {"Last-Event-ID": "0"})
    statuses = [
        e.payload["result"]["status"] for e in replayed if e.payload["result"].get("status")
    ]
    progress = [
        s["message"]["parts"][0]["text"]
        for s in statuses
        if s["state"] == "working" and s.get("message")
    ]
    assert sum("created" in p for p in progress) >= 4
    assert [m["role"] for m in task["history"]] == ["user"]

    answer = output(alpha.ask("How many steps does the lighthouse keeper climb?"))
    best = answer["hits"][0]
    assert best["provenance"]["uri"] == f"{site.base}/lighthouse"
    assert "one hundred and twelve steps" in best["text"]
    pdf_hit = output(alpha.skill("hybrid_retrieve", query="breakwater repaired", top_k=3))
    assert pdf_hit["hits"][0]["provenance"]["page"] == 1
    assert pdf_hit["hits"][0]["provenance"]["title"] == "Harbour report"
    ocr_hit = output(alpha.skill("hybrid_retrieve", query="ferry timetable", top_k=3))
    assert ocr_hit["hits"][0]["provenance"]["uri"].endswith("/scan.pdf")

    reranked = output(
        alpha.skill("query_with_reranking", query="tidal range moon", reranker="mmr", top_k=3)
    )
    explained = output(alpha.skill("explain_answer", trajectory_id=reranked["trajectory_id"]))
    assert explained["rerank"]["reranker"] == "mmr"
    assert explained["hits"][0]["provenance"]["uri"] == f"{site.base}/tides"

    # An unchanged re-crawl rewrites nothing and fetches with conditional requests.
    before = dict(site.requests)
    again = output(alpha.skill("ingest_url", url=f"{site.base}/"))
    assert again["ingested"] == 0 and again["unchanged"] >= 4 and again["chunks"] == 0
    assert site.requests["/lighthouse"] == before["/lighthouse"] + 1

    # Another tenant sees none of it; deleting the source removes it from search.
    assert output(beta.ask("lighthouse keeper steps"))["hits"] == []
    deleted = output(alpha.skill("delete_source", source_id=summary["source_id"]))
    assert deleted["documents"] == len(summary["documents"])
    assert output(alpha.ask("lighthouse keeper steps"))["hits"] == []


def test_sitemaps_and_nothing_to_ingest(
    site: Site, server: tuple[LiveServer, Caller, Caller]
) -> None:
    _, alpha, _ = server
    with_sitemap = output(
        alpha.skill("ingest_url", url=f"{site.base}/tides", depth=0, sitemaps=True)
    )
    assert {d["title"] for d in with_sitemap["documents"]} == {"Tides", "Harbour fees"}
    # A crawl that stores nothing is a failure that says why, never a success.
    message = failure(alpha.skill("ingest_url", url=f"{site.base}/app", depth=0))
    assert "nothing was ingested" in message and "no text after extraction" in message


def test_pdfs_from_a_file_part_and_from_a_path(
    server: tuple[LiveServer, Caller, Caller], tmp_path: Path
) -> None:
    _, alpha, _ = server
    pdf = text_pdf(
        [["Chapter one.", "Gulls nest on the cliffs."], ["Chapter two.", "Terns dive for fish."]]
    )
    message = text_message("")
    message["parts"] = [
        {"kind": "data", "data": {"skill": "ingest_pdf", "arguments": {}}},
        {
            "kind": "file",
            "file": {
                "bytes": base64.b64encode(pdf).decode(),
                "name": "birds.pdf",
                "mimeType": "application/pdf",
            },
        },
    ]
    task = call(alpha.client, "message/send", {"message": message})["result"]
    summary = output(task)
    assert summary["documents"][0]["uri"] == "birds.pdf"
    # A PDF sent with no skill named is for the one skill that takes PDFs.
    message = text_message("")
    message["parts"] = [
        {
            "kind": "file",
            "file": {
                "bytes": base64.b64encode(text_pdf([["Puffins nest in burrows."]])).decode(),
                "name": "puffins.pdf",
                "mimeType": "application/pdf",
            },
        },
    ]
    task = call(alpha.client, "message/send", {"message": message})["result"]
    assert task["status"]["state"] == "completed", task["status"]
    assert output(task)["documents"][0]["uri"] == "puffins.pdf"
    hit = output(alpha.skill("vector_search", query="terns diving for fish", top_k=1))["hits"][0]
    assert hit["provenance"]["page"] == 2
    # A path is read only inside the configured ingestion directory.
    refused = failure(alpha.skill("ingest_pdf", path="/etc/passwd"))
    assert "AGENTIC_RAG_INGEST_DIRECTORY" in refused
    corrupt = failure(alpha.skill("ingest_pdf", data=base64.b64encode(b"%PDF-1.4 junk").decode()))
    assert "PDF" in corrupt
    assert "exactly one" in failure(alpha.skill("ingest_pdf"))


def test_a_transcript_sent_as_webvtt(server: tuple[LiveServer, Caller, Caller]) -> None:
    _, alpha, _ = server
    vtt = (
        "WEBVTT\n\n00:00:01.000 --> 00:00:05.000\nWelcome to the harbour tour.\n\n"
        "00:01:10.000 --> 00:01:15.000\nOn the left you can see the old customs house.\n"
    )
    summary = output(
        alpha.skill(
            "ingest_youtube",
            video_url="https://youtu.be/dQw4w9WgXcQ",
            transcript=vtt,
            title="Harbour tour",
        )
    )
    assert summary["documents"][0]["uri"] == "https://www.youtube.com/watch?v=dQw4w9WgXcQ"
    hit = output(alpha.skill("vector_search", query="customs house", top_k=1))["hits"][0]
    assert hit["provenance"]["start_seconds"] is not None
    assert hit["provenance"]["title"] == "Harbour tour"


# -- a 600-page PDF ---------------------------------------------------------------------


def logbook_entry(page: int) -> str:
    return f"Entry {page}: {page * 3} gulls."  # ten word pieces: 600 of them embed in ~2 s


async def test_a_600_page_pdf_streams_page_by_page_with_progress(
    pool: asyncpg.Pool, data_dir: Path
) -> None:
    """The service itself (real PostgreSQL, real embedder). One short line a page keeps it
    fast; bench/knowledge_ingest.py measures the speed and memory of realistic pages."""
    service = KnowledgeService(Settings(data_dir=data_dir), pool)
    await service.start()
    try:
        pdf = text_pdf([[logbook_entry(n)] for n in range(1, 601)])
        messages: list[str] = []

        async def report(message: str) -> None:
            messages.append(message)

        summary = await service.ingest_pdf(
            "alpha",
            new_id(),
            report,
            data=base64.b64encode(pdf).decode(),
            url=None,
            path=None,
            filename="logbook.pdf",
            metadata={},
        )
        document = await service.document(
            "alpha", summary.documents[0].document_id, with_text=False
        )
    finally:
        await service.stop()
    # A progress event for every page, in order, while the pages were read.
    pages = [m for m in messages if ": page " in m]
    assert pages == [f"logbook.pdf: page {n} of 600" for n in range(1, 601)]
    assert summary.documents[0].status == "created"
    assert document.metadata["pages"] == 600
    # Every chunk carries the page it came from, and every page is there.
    rows = await pool.fetch(
        "SELECT page, text FROM chunks WHERE tenant = 'alpha' AND document_id = $1",
        document.document_id,
    )
    assert len(rows) == summary.chunks == document.chunks
    assert all(row["text"] == logbook_entry(row["page"]) for row in rows)
    assert sorted(row["page"] for row in rows) == list(range(1, 601))


async def test_a_resumed_job_counts_what_its_killed_run_stored_before_recording_it(
    pool: asyncpg.Pool, data_dir: Path
) -> None:
    """A run killed after a document's write committed and before the job recorded it: the
    resumed run finds the text unchanged, and still reports the document as the job's own."""
    service = KnowledgeService(Settings(data_dir=data_dir), pool)
    await service.start()

    async def ingest(job_id: str) -> IngestSummary:
        async def report(message: str) -> None:
            pass

        return await service.ingest_text(
            "alpha",
            job_id,
            report,
            text="# Gulls\n\nHerring gulls nest on roofs.",
            title="gulls",
            metadata={},
        )

    try:
        job_id = new_id()
        first = await ingest(job_id)
        # What the kill leaves: the document stored, the job still running with no summary.
        await pool.execute(
            "UPDATE ingest_jobs SET state = 'running', summary = NULL WHERE id = $1", job_id
        )
        resumed = await ingest(job_id)
        another = await ingest(new_id())
    finally:
        await service.stop()
    assert first.documents[0].status == "created" and first.chunks > 0
    assert (resumed.ingested, resumed.unchanged, resumed.chunks) == (1, 0, first.chunks)
    assert resumed.documents[0].status == "created"
    # Another job finds the same text unchanged: nothing of it is that job's work.
    assert (another.ingested, another.unchanged, another.chunks) == (0, 1, 0)


# -- a crawl killed in the middle -------------------------------------------------------

PAGES = 50


def slow_site(requests: Counter[str]) -> Starlette:
    """An index page linking to PAGES - 1 pages, each a little slow, so that a kill lands
    in the middle of the crawl."""

    async def serve_page(request: Request) -> Response:
        path = request.url.path
        requests[path] += 1
        if path == "/robots.txt":
            return PlainTextResponse("User-agent: *\nAllow: /\n")
        number = int(path.strip("/") or 0)
        if number >= PAGES:
            return PlainTextResponse("not found", status_code=404)
        await asyncio.sleep(0.05)
        links = [f"/{n}" for n in range(1, PAGES)] if number == 0 else []
        return HTMLResponse(
            page(
                f"Page {number}",
                f"Page {number} tells of ship number {number}, which sailed in year "
                f"{1900 + number} and carried {number * 7} barrels of herring.",
                *links,
            )
        )

    return Starlette(routes=[Route("/{path:path}", serve_page)])


def start_server(
    port: int, data_dir: Path, database_url: str, log: Path
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "AGENTIC_RAG_INGEST_ALLOW_PRIVATE": '["127.0.0.1"]',
        "AGENTIC_RAG_INGEST_HOST_INTERVAL_SECONDS": "0",
        "AGENTIC_RAG_WORKER_SWEEP_SECONDS": "1",
        "AGENTIC_RAG_GRAPH_EMBEDDED": "true",  # the only server on this database
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentic_rag.cli",
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return until_ready(process, port, log)


async def stored_pages(database_url: str) -> tuple[int, int, int]:
    """(documents, chunks, duplicate chunk positions) in the server's database."""
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM documents) AS documents, "
            "(SELECT count(*) FROM chunks) AS chunks, (SELECT count(*) FROM (SELECT 1 FROM "
            "chunks GROUP BY tenant, document_id, position HAVING count(*) > 1) d) AS twice"
        )
        assert row is not None
        return int(row["documents"]), int(row["chunks"]), int(row["twice"])
    finally:
        await conn.close()


def test_a_crawl_killed_mid_way_is_completed_by_the_next_start(
    database_url: str, tmp_path: Path
) -> None:
    requests: Counter[str] = Counter()
    port, log = free_port(), tmp_path / "server.log"
    with serve_in_thread(slow_site(requests)) as site_url:
        process = start_server(port, tmp_path / "data", database_url, log)
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        try:
            message = text_message("")
            arguments: dict[str, Any] = {"url": f"{site_url}/0", "depth": 1, "max_pages": 60}
            message["parts"] = [
                {"kind": "data", "data": {"skill": "ingest_url", "arguments": arguments}}
            ]
            started = call(
                client, "message/send", {"message": message, "configuration": {"blocking": False}}
            )["result"]
            deadline = time.monotonic() + 120
            while asyncio.run(stored_pages(database_url))[0] < 10:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            done_before = asyncio.run(stored_pages(database_url))[0]
            assert 10 <= done_before < PAGES

            process = start_server(port, tmp_path / "data", database_url, log)
            deadline = time.monotonic() + 300
            while True:
                task = call(client, "tasks/get", {"id": started["id"]})["result"]
                if task["status"]["state"] not in ("submitted", "working"):
                    break
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
            summary = output(task)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            client.close()
    documents, chunks, twice = asyncio.run(stored_pages(database_url))
    assert (documents, twice) == (PAGES, 0)
    # The summary counts the job's work across the kill: the pages the killed run stored too.
    assert summary["ingested"] == len(summary["documents"]) == PAGES
    assert summary["chunks"] == chunks
    assert {d["status"] for d in summary["documents"]} == {"created"}
    # Pages stored before the kill were not fetched again: at most the page in flight was.
    pages = {path: n for path, n in requests.items() if path != "/robots.txt"}
    assert len(pages) == PAGES
    assert sum(n - 1 for n in pages.values()) <= 1, pages

"""Boilerplate: blocks repeated across the pages of one site are kept out of its documents.

The rule on real pages (git's manual pages from Debian, tests/data/html/README.md), then a
crawl by the knowledge service (real PostgreSQL, real embedder, HTTP on loopback): the suite
line that every git page ends with is in no chunk, the first page stored before the crawl knew
it is stored again without it, and each page's own text stays.
"""

from pathlib import Path

import asyncpg
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentic_rag.config import Settings
from agentic_rag.ids import new_id
from agentic_rag.knowledge.documents import Section
from agentic_rag.knowledge.results import CrawlRequest, IngestSummary
from agentic_rag.knowledge.service import KnowledgeService
from agentic_rag.knowledge.sources.boilerplate import (
    SiteCounts,
    block_key,
    page_keys,
    without_boilerplate,
)
from agentic_rag.knowledge.sources.html_page import read_html
from tests.support.live import serve_in_thread

PAGES = Path(__file__).resolve().parents[2] / "data" / "html"
GIT_PAGES = ["git-add.html", "git-mv.html", "git-rm.html"]
SUITE = "Part of the git(1) suite"


def read(name: str) -> list[Section]:
    return read_html((PAGES / name).read_bytes(), "https://git.example/" + name).document.sections


def counts_of(pages: list[list[Section]]) -> SiteCounts:
    holders: dict[bytes, int] = {}
    for sections in pages:
        for key in page_keys(sections):
            holders[key] = holders.get(key, 0) + 1
    return SiteCounts(holders, len(pages))


def test_a_block_on_every_page_of_a_site_is_left_out_and_its_heading_with_it() -> None:
    pages = [read(name) for name in GIT_PAGES]
    assert all(any(s.text == SUITE for s in sections) for sections in pages)
    repeated = counts_of(pages).repeated()
    for sections in pages:
        kept, dropped = without_boilerplate(sections, repeated)
        texts = [s.text for s in kept]
        assert SUITE not in texts
        assert "GIT" not in texts  # the heading the suite line sat under, now empty
        assert dropped == len(sections) - len(kept) - 1
        assert "NAME" in texts and "SYNOPSIS" in texts  # headings found on every page stay
    # A block found on one page only stays; so do the descriptions of each page.
    mv, _ = without_boilerplate(pages[1], repeated)
    assert any(s.text.startswith("git-mv - Move or rename a file") for s in mv)


def test_a_block_on_too_few_pages_stays() -> None:
    pages = [read(name) for name in GIT_PAGES]
    assert counts_of(pages[:2]).repeated() == frozenset()  # 2 pages: under MIN_PAGES
    # On 3 pages of 5 (60%, under MIN_SHARE), a shared block is not boilerplate either.
    shared = Section("A sentence three pages of five happen to share, word for word.")
    others = [[Section(f"Page {n} is about its own subject entirely.")] for n in range(2)]
    counts = counts_of([[*pages[0], shared], [*pages[1], shared], [*pages[2], shared], *others])
    assert block_key(shared) not in counts.repeated()


def test_dates_do_not_make_a_footer_a_new_block_but_other_numbers_do() -> None:
    footers = [
        Section("This page last modified on 2018-11-26 12:01:01 UTC"),
        Section("This page last modified on  2022-01-20 21:38:08 UTC"),
    ]
    assert block_key(footers[0]) == block_key(footers[1]) is not None
    ships = [Section(f"Ship {n} sailed in {1900 + n} with {7 * n} barrels.") for n in (3, 4)]
    assert block_key(ships[0]) != block_key(ships[1])
    assert block_key(Section("2. How WAL Works", kind="heading")) is None


def test_a_page_made_only_of_repeated_blocks_keeps_them() -> None:
    template = [Section("Title", kind="heading", heading_path=("Title",))]
    template.append(Section("The same notice on every page of this site.", heading_path=("Title",)))
    repeated = counts_of([template] * 4).repeated()
    assert len(repeated) == 1
    assert without_boilerplate(template, repeated) == (template, 0)


def git_site() -> Starlette:
    bodies = {"/" + name: (PAGES / name).read_text() for name in GIT_PAGES}

    async def serve(request: Request) -> Response:
        path = request.url.path
        if path == "/robots.txt":
            return PlainTextResponse("User-agent: *\nAllow: /\n")
        if path == "/sitemap.xml":
            urls = "".join(
                f"<url><loc>{request.base_url}{name}</loc></url>" for name in GIT_PAGES[1:]
            )
            return Response(
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                f'sitemap/0.9">{urls}</urlset>',
                media_type="application/xml",
            )
        if path == "/index.html":  # a page without the manual's template
            links = "".join(f'<li><a href="{name}">{name}</a></li>' for name in GIT_PAGES)
            return HTMLResponse(f"<html><body><h1>Manual pages</h1><ul>{links}</ul></body></html>")
        if path in bodies:
            return HTMLResponse(bodies[path])
        return PlainTextResponse("not found", status_code=404)

    return Starlette(routes=[Route("/{path:path}", serve)])


async def crawls(
    pool: asyncpg.Pool, data_dir: Path, *starts: tuple[str, int, bool]
) -> list[IngestSummary]:
    """Tenant alpha's crawls of the git site, one after the other, from (path, depth,
    sitemaps) each."""
    settings = Settings(
        data_dir=data_dir, ingest_allow_private=["127.0.0.1"], ingest_host_interval_seconds=0
    )
    service = KnowledgeService(settings, pool)
    await service.start()

    async def report(message: str) -> None:
        pass

    try:
        with serve_in_thread(git_site()) as base:
            return [
                await service.ingest_url(
                    "alpha",
                    new_id(),
                    report,
                    CrawlRequest(url=f"{base}{path}", depth=depth, sitemaps=sitemaps),
                )
                for path, depth, sitemaps in starts
            ]
    finally:
        await service.stop()


async def test_a_crawl_keeps_the_site_boilerplate_out_of_every_chunk(
    pool: asyncpg.Pool, data_dir: Path
) -> None:
    # The start page and the sitemap's two pages, nothing else (depth 0), twice.
    manual = ("/git-add.html", 0, True)
    summary, again = await crawls(pool, data_dir, manual, manual)

    assert summary.ingested == 3 and len(summary.documents) == 3
    assert summary.chunks == sum(d.chunks for d in summary.documents)
    for document in summary.documents:
        assert document.extraction == "main content" and document.coverage == 1.0
        assert document.notes[0].startswith("main content read (100.0% of its ")
        # The first page was stored before the crawl knew; it was stored again without it.
        assert document.notes[1:] == ["1 block repeated across the site left out"]
    rows = await pool.fetch("SELECT text FROM chunks WHERE tenant = 'alpha'")
    assert len(rows) == summary.chunks
    assert not any(SUITE in row["text"] for row in rows)
    texts = await pool.fetch("SELECT uri, text FROM documents WHERE tenant = 'alpha'")
    assert len(texts) == 3 and not any(SUITE in row["text"] for row in texts)
    mv = next(row["text"] for row in texts if row["uri"].endswith("/git-mv.html"))
    assert "git-mv - Move or rename a file, a directory, or a symlink" in mv
    # The site's blocks are known now: a re-crawl finds every page as it stored it.
    assert again.ingested == 0 and again.unchanged == 3 and again.chunks == 0


async def test_pages_without_the_template_do_not_bring_the_boilerplate_back(
    pool: asyncpg.Pool, data_dir: Path
) -> None:
    """Once the suite line is known as the site's boilerplate, a crawl from another start page
    (an index without the template: the line is then on 3 of 4 pages, under MIN_SHARE) still
    leaves it out: the pages are found unchanged, under the second source too."""
    first, second = await crawls(
        pool, data_dir, ("/git-add.html", 0, True), ("/index.html", 1, False)
    )

    assert first.ingested == 3
    assert second.ingested == 1 and second.unchanged == 3, second
    texts = await pool.fetch("SELECT uri, text FROM documents WHERE tenant = 'alpha'")
    assert len(texts) == 4 and not any(SUITE in row["text"] for row in texts)
    rows = await pool.fetch("SELECT text FROM chunks WHERE tenant = 'alpha'")
    assert not any(SUITE in row["text"] for row in rows)

"""The crawler and the bounded fetch (sources/web.py, security/fetch.py, robots.py,
sitemaps.py), against a small site served on 127.0.0.1 by the test."""

import asyncio
import gzip
import hashlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from agentic_rag.knowledge.sources.sitemaps import SitemapEntry, SitemapError, parse_sitemap
from agentic_rag.knowledge.sources.web import (
    CrawlOptions,
    CrawlOutcome,
    Failed,
    Fetched,
    KnownPage,
    MemoryFrontier,
    Skipped,
    Unchanged,
    crawl,
)
from agentic_rag.security.fetch import (
    Fetcher,
    FetchError,
    FetchLimits,
    NotModified,
    Resource,
    Validators,
)
from agentic_rag.security.ssrf import SSRFGuard, UnsafeURLError
from tests.support.live import free_port, serve
from tests.support.pdf_samples import scanned_pdf, text_pdf

GUARD = SSRFGuard(allow=["127.0.0.1"])  # the site; every other private address stays refused
LIMITS = FetchLimits(max_bytes=64 * 1024, timeout_seconds=5, total_seconds=10)
CRAWL_DELAY = 2.0


def article(title: str, *paragraphs: str, links: tuple[str, ...] = ()) -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f"<nav><ul>{anchors}</ul></nav><main><article><h1>{title}</h1>{body}</article></main>"
        "<footer>Example site footer</footer></body></html>"
    )


INTRO = (
    "Pelicans are large water birds with a long beak and a big throat pouch used for catching "
    "prey and draining water from the scooped-up contents before swallowing."
)
GUIDE = (
    "Herons stand still in shallow water for a long time, then strike quickly with their sharp "
    "beak; the grey heron is the most common species in Europe and breeds in colonies."
)
MORE = "Both birds are common along the coast, and birdwatchers count them every winter."


@dataclass
class VirtualClock:
    """Time for the crawler's pacing: sleeping advances it at once, so delays cost nothing.
    While `paused`, a sleep never ends: the crawler waits there until it is cancelled."""

    time: float = 0.0
    paused: bool = False

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        if self.paused:
            await asyncio.get_running_loop().create_future()
        self.time += seconds
        await asyncio.sleep(0)


@dataclass
class Site:
    """The test site: what it serves, and each request it got, with the crawler's time."""

    clock: VirtualClock = field(default_factory=VirtualClock)
    requests: list[tuple[str, float]] = field(default_factory=list)
    """(path, time) of each request; "//host/path" when it named another host than 127.0.0.1."""
    base: str = ""

    def hits(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def url(self, path: str) -> str:
        return self.base + path

    def app(self) -> Starlette:
        pages = {
            "/": article(
                "Coastal birds",
                "This site is about the birds of the coast. " + MORE,
                "Start with the introduction and then read the guide. " + MORE,
                links=(
                    "/docs/intro",
                    "/docs/intro#habitat",
                    "docs/guide",
                    "/private/secret",
                    "/js-app",
                    "/big",
                    "/bomb",
                    "/photo.png",
                    "/report.pdf",
                    "/scan.pdf",
                    "/notes.md",
                    "/moved",
                    "/away",
                    "/latin1",
                    "/gone",
                    "/copy",
                    "https://example.org/elsewhere",
                    "mailto:someone@example.org",
                ),
            ),
            "/docs/intro": article(
                "Introduction", INTRO, MORE, links=("/docs/guide", "/docs/deep/1", "/blog/post")
            ),
            "/copy": article("Introduction", INTRO, MORE, links=("/docs/guide",)),
            "/docs/guide": article("Guide to herons", GUIDE, MORE, links=("/",)),
            "/blog/post": article("A blog post", "Blog posts are not documentation. " + MORE),
            "/from-sitemap": article("Only in the sitemap", "Nothing links here. " + INTRO),
            "/private/secret": article("Secret", "Robots may not read this. " + MORE),
        }
        for n in range(1, 6):
            pages[f"/docs/deep/{n}"] = article(
                f"Deep page {n}", f"Page {n} of a chain. {MORE}", links=(f"/docs/deep/{n + 1}",)
            )

        async def page(request: Request) -> Response:
            self._record(request)
            html = pages[request.url.path]
            etag = '"' + hashlib.sha256(html.encode()).hexdigest()[:16] + '"'
            if request.headers.get("if-none-match") == etag:
                return Response(status_code=304, headers={"ETag": etag})
            return Response(html, media_type="text/html", headers={"ETag": etag})

        async def other(request: Request) -> Response:
            self._record(request)
            base = str(request.base_url).rstrip("/")
            match request.url.path:
                case "/robots.txt":
                    return PlainTextResponse(
                        f"User-agent: *\nDisallow: /private/\nCrawl-delay: {CRAWL_DELAY}\n"
                        f"Sitemap: {base}/sitemap.xml\n"
                    )
                case "/sitemap.xml":
                    return Response(
                        '<?xml version="1.0" encoding="UTF-8"?>'
                        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                        f"<url><loc>{base}/docs/intro</loc></url>"
                        f"<url><loc>{base}/from-sitemap</loc><lastmod>2024-03-01</lastmod></url>"
                        "<url><loc>https://example.org/not-ours</loc></url>"
                        "</urlset>",
                        media_type="application/xml",
                    )
                case "/js-app":
                    return Response(
                        "<html><head><title>App</title><script src='/app.js'></script></head>"
                        "<body><div id='root'></div><noscript>You need to enable JavaScript to "
                        "run this app.</noscript></body></html>",
                        media_type="text/html",
                    )
                case "/big":
                    return Response(article("Big", "word " * 40_000), media_type="text/html")
                case "/bomb":  # 10 MB of spaces in a gzip body of about 10 kB
                    return Response(
                        gzip.compress(b"<html>" + b" " * 10_000_000),
                        media_type="text/html",
                        headers={"Content-Encoding": "gzip"},
                    )
                case "/photo.png":
                    return Response(b"\x89PNG\r\n\x1a\n" + bytes(64), media_type="image/png")
                case "/report.pdf":
                    body = text_pdf([["Annual report", "Pelican numbers rose by a third."]])
                    return Response(body, media_type="application/pdf")
                case "/scan.pdf":  # served as an anonymous download: recognized by its bytes
                    body = scanned_pdf(["Scanned survey sheet", "Heron colony count 212"])
                    return Response(body, media_type="application/octet-stream")
                case "/notes.md":
                    return Response(
                        "# Field notes\n\n## Tuesday\n\nSaw two pelicans near the pier.\n",
                        media_type="text/markdown; charset=utf-8",
                    )
                case "/moved":
                    return RedirectResponse("http://10.0.0.1/internal", status_code=302)
                case "/away":  # another host name for the same server: another site
                    return RedirectResponse(f"http://localhost:{request.url.port}/docs/guide")
                case "/latin1":  # the header's charset, not a guess, decodes the page
                    html = article("Caf\xe9 des p\xeacheurs", "Le caf\xe9 est au port. " + MORE)
                    return Response(
                        html.encode("latin-1"), media_type="text/html; charset=iso-8859-1"
                    )
                case "/loop":
                    return RedirectResponse("/loop", status_code=302)
                case "/slow-body":

                    async def trickle() -> AsyncIterator[bytes]:
                        for _ in range(100):
                            yield b"<p>slow</p>"
                            await asyncio.sleep(0.1)

                    return StreamingResponse(trickle(), media_type="text/html")
            return PlainTextResponse("no such page", status_code=404)

        return Starlette(
            routes=[
                *(Route(path, page) for path in pages),
                Route("/{path:path}", other),
            ]
        )

    def _record(self, request: Request) -> None:
        host = request.url.hostname
        path = request.url.path if host == "127.0.0.1" else f"//{host}{request.url.path}"
        self.requests.append((path, self.clock.now()))


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    site = Site()
    async with serve(site.app()) as port:
        site.base = f"http://127.0.0.1:{port}"
        yield site


async def run(
    site: Site, start: str, options: CrawlOptions, **kwargs: object
) -> dict[str, CrawlOutcome]:
    """Crawl the site from the path `start` in the site's virtual time; each outcome by URL."""
    outcomes: dict[str, CrawlOutcome] = {}
    crawler = crawl(site.url(start), GUARD, options, clock=site.clock, **kwargs)  # type: ignore[arg-type]
    async for outcome in crawler:
        assert outcome.url not in outcomes  # each URL is reported once
        outcomes[outcome.url] = outcome
    return outcomes


def summary(site: Site, outcomes: dict[str, CrawlOutcome]) -> dict[str, str]:
    """Path (or foreign URL) -> "fetched", "unchanged", or "skipped: reason"/"failed: reason"."""

    def name(outcome: CrawlOutcome) -> str:
        match outcome:
            case Fetched():
                return "fetched"
            case Unchanged():
                return "unchanged"
            case Skipped(reason=reason) | Failed(reason=reason):
                return f"{type(outcome).__name__.lower()}: {reason}"

    return {url.removeprefix(site.base): name(o) for url, o in outcomes.items()}


def fetched(outcomes: dict[str, CrawlOutcome], url: str) -> Fetched:
    outcome = outcomes[url]
    assert isinstance(outcome, Fetched), outcome
    return outcome


def detail(outcomes: dict[str, CrawlOutcome], url: str) -> str:
    outcome = outcomes[url]
    assert not isinstance(outcome, Fetched), outcome
    return outcome.detail


async def test_crawl_of_a_whole_site(site: Site) -> None:
    options = CrawlOptions(depth=1, sitemaps=True, min_interval=0.5, limits=LIMITS)
    outcomes = await run(site, "/", options)

    assert summary(site, outcomes) == {
        "/": "fetched",
        # Sitemap URLs are start URLs (depth 0), so the links of /docs/intro are followed too;
        # its "#habitat" link from the home page is the same page.
        "/docs/intro": "fetched",
        "/from-sitemap": "fetched",  # linked from nowhere: seeded by the sitemap
        "/docs/deep/1": "fetched",
        "/blog/post": "fetched",
        "/docs/guide": "fetched",
        "/private/secret": "skipped: robots",
        "/js-app": "skipped: no text after extraction",
        "/big": "skipped: too large",
        "/bomb": "skipped: too large",
        "/photo.png": "skipped: not text",
        "/report.pdf": "fetched",
        "/scan.pdf": "fetched",
        "/notes.md": "fetched",
        "/moved": "failed: refused",
        "/away": "skipped: off-site",
        "/latin1": "fetched",
        "/gone": "failed: http status",
        "/copy": "skipped: duplicate",
        "https://example.org/elsewhere": "skipped: off-site",
        # Depth 1: the links of the pages found at depth 1 (/docs/deep/2) are not followed.
    }
    assert site.hits("/private/secret") == 0  # robots.txt is obeyed before any request
    assert site.hits("/robots.txt") == 1
    assert "https://example.org/not-ours" not in outcomes  # off-site sitemap entries are dropped

    home = fetched(outcomes, site.url("/"))
    assert home.document.title == "Coastal birds"
    assert home.document.sections[0].text == "Coastal birds"
    assert home.document.sections[1].heading_path == ("Coastal birds",)
    assert site.url("/docs/guide") in home.links  # relative links resolved
    assert home.validators.etag is not None
    assert home.content_hash == hashlib.sha256(home.document.text.encode()).hexdigest()

    intro = fetched(outcomes, site.url("/docs/intro"))
    assert INTRO in intro.document.text
    assert "footer" not in intro.document.text  # boilerplate is left out

    assert fetched(outcomes, site.url("/report.pdf")).document.sections[0].page == 1
    scan = fetched(outcomes, site.url("/scan.pdf")).document
    assert "212" in scan.text and "heron" in scan.text.lower()
    assert scan.notes == ["page 1 of 1 was read by OCR (no text layer)"]
    notes = fetched(outcomes, site.url("/notes.md")).document
    assert notes.title == "Field notes"
    assert notes.sections[-1].heading_path == ("Field notes", "Tuesday")

    assert detail(outcomes, site.url("/moved")) == (
        "refused by the SSRF guard: URL refused (address 10.0.0.1): private address; an "
        "intranet's addresses can be allowed with the setting AGENTIC_RAG_INGEST_ALLOW_PRIVATE"
    )
    assert detail(outcomes, site.url("/away")) == (
        f"redirected to {site.url('/docs/guide').replace('127.0.0.1', 'localhost')}: "
        "localhost is not 127.0.0.1"
    )
    assert fetched(outcomes, site.url("/latin1")).document.title == "Caf\xe9 des p\xeacheurs"
    assert detail(outcomes, site.url("/gone")) == "HTTP 404 Not Found"
    assert "may need JavaScript" in detail(outcomes, site.url("/js-app"))
    assert detail(outcomes, site.url("/copy")) == f"same text as {site.url('/docs/intro')}"

    # Politeness: after robots.txt, requests were spaced by the site's Crawl-delay (longer than
    # min_interval), in the crawler's own time. ("localhost" is another host, paced apart.)
    assert site.hits("//localhost/docs/guide") == 1
    ours = [(path, t) for path, t in site.requests if not path.startswith("//")]
    times = [t for path, t in ours if path != "/robots.txt"]
    assert len(times) > 10
    assert all(later - earlier >= CRAWL_DELAY for earlier, later in itertools.pairwise(times))


async def test_an_unchanged_recrawl_sends_conditional_requests(site: Site) -> None:
    options = CrawlOptions(
        depth=1, sitemaps=True, min_interval=0, include=("/", "/docs/*", "/from-sitemap")
    )
    first = await run(site, "/", options)
    stored = {
        url: KnownPage(o.validators, o.fetched_at, o.links)
        for url, o in first.items()
        if isinstance(o, Fetched)
    }
    pages = ("/", "/docs/intro", "/docs/guide", "/from-sitemap", "/docs/deep/1")
    assert set(stored) == {site.url(p) for p in pages}

    async def known(url: str) -> KnownPage | None:
        return stored.get(url)

    site.requests.clear()
    again = await run(site, "/", options, known=known)
    assert {url: type(o) for url, o in again.items() if url in stored} == dict.fromkeys(
        stored, Unchanged
    )
    assert detail(again, site.url("/")) == "304 Not Modified"
    # The sitemap's lastmod (2024) is older than the last fetch: not even a request.
    assert detail(again, site.url("/from-sitemap")).startswith("sitemap lastmod 2024-03-01")
    assert site.hits("/from-sitemap") == 0
    assert site.hits("/docs/guide") == 1  # found through the stored links of the unchanged home


async def test_include_and_exclude_patterns(site: Site) -> None:
    options = CrawlOptions(depth=1, min_interval=0, include=("/docs/*",), exclude=("*/guide",))
    outcomes = await run(site, "/docs/intro", options)
    assert summary(site, outcomes) == {
        "/docs/intro": "fetched",
        "/docs/guide": "skipped: excluded",
        "/docs/deep/1": "fetched",
        "/blog/post": "skipped: excluded",
    }
    assert detail(outcomes, site.url("/docs/guide")) == "matches the exclude pattern '*/guide'"
    assert detail(outcomes, site.url("/blog/post")) == "matches no include pattern"
    assert site.hits("/blog/post") == site.hits("/docs/guide") == 0

    regex = CrawlOptions(depth=5, min_interval=0, exclude=("re:/deep/[3-9]$",))
    chain = await run(site, "/docs/deep/1", regex)
    assert summary(site, chain) == {
        "/docs/deep/1": "fetched",
        "/docs/deep/2": "fetched",
        "/docs/deep/3": "skipped: excluded",
    }


async def test_depth_and_max_pages(site: Site) -> None:
    deep = await run(site, "/docs/deep/1", CrawlOptions(depth=2, min_interval=0))
    assert list(summary(site, deep)) == ["/docs/deep/1", "/docs/deep/2", "/docs/deep/3"]

    only_start = await run(site, "/docs/deep/1", CrawlOptions(depth=0, min_interval=0))
    assert list(summary(site, only_start)) == ["/docs/deep/1"]

    site.requests.clear()
    two = await run(site, "/", CrawlOptions(depth=3, max_pages=2, min_interval=0))
    assert [o for o in two.values() if not isinstance(o, Skipped)] == [
        o for o in two.values() if isinstance(o, Fetched)
    ]
    assert len([o for o in two.values() if isinstance(o, Fetched)]) == 2
    assert [p for p, _ in site.requests if p != "/robots.txt"] == ["/", "/docs/intro"]


async def test_a_crawl_resumes_from_its_frontier(site: Site) -> None:
    frontier = MemoryFrontier()
    options = CrawlOptions(depth=5, max_pages=2, min_interval=0)
    first = await run(site, "/docs/deep/1", options, frontier=frontier)
    assert list(summary(site, first)) == ["/docs/deep/1", "/docs/deep/2"]
    assert frontier.finished == set(first)

    site.requests.clear()
    second = await run(site, "/docs/deep/1", options, frontier=frontier)
    assert list(summary(site, second)) == ["/docs/deep/3", "/docs/deep/4"]
    assert site.hits("/docs/deep/1") == site.hits("/docs/deep/2") == 0


async def test_cancelling_the_consumer_stops_the_crawl(site: Site) -> None:
    frontier = MemoryFrontier()
    first = asyncio.Event()
    seen: list[str] = []

    async def consume() -> None:
        async for outcome in crawl(site.url("/"), GUARD, frontier=frontier, clock=site.clock):
            seen.append(outcome.url)
            site.clock.paused = True  # the crawler will wait before its next request
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [site.url("/")]
    assert frontier.finished == {site.url("/")}  # handled, so a resumed crawl skips it
    assert frontier.pending  # what is left for a resumed crawl
    assert [p for p, _ in site.requests] == ["/robots.txt", "/"]


async def test_bad_start_urls_and_options_are_refused_before_any_request() -> None:
    with pytest.raises(UnsafeURLError, match="private address"):
        await anext(crawl("http://10.1.2.3/", GUARD))
    with pytest.raises(ValueError, match="not an http"):
        await anext(crawl("file:///etc/passwd", GUARD))
    with pytest.raises(ValueError, match="max_pages must be at least 1"):
        CrawlOptions(max_pages=0)
    with pytest.raises(ValueError, match=r"invalid regular expression in 're:\('"):
        CrawlOptions(exclude=("re:(",))


@pytest.fixture
async def fetcher(site: Site) -> AsyncIterator[Fetcher]:
    async with Fetcher(GUARD, LIMITS) as fetcher:
        yield fetcher


async def test_fetch_is_bounded(site: Site, fetcher: Fetcher) -> None:
    with pytest.raises(FetchError, match="larger than 65536 bytes") as too_large:
        await fetcher.fetch(site.url("/bomb"))  # refused while inflating, not after
    assert too_large.value.kind == "too large"

    with pytest.raises(FetchError, match="more than 2 redirects") as redirects:
        async with Fetcher(GUARD, FetchLimits(max_redirects=2)) as strict:
            await strict.fetch(site.url("/loop"))
    assert redirects.value.kind == "redirects"

    with pytest.raises(FetchError, match=r"no complete answer within 0\.5 s") as slow:
        async with Fetcher(GUARD, FetchLimits(total_seconds=0.5)) as hurried:
            await hurried.fetch(site.url("/slow-body"))
    assert slow.value.kind == "timeout"

    with pytest.raises(FetchError, match="content type 'image/png' is not wanted"):
        await fetcher.fetch(site.url("/photo.png"), accept={"text/html"})


async def test_fetch_refusals_and_connection_errors(site: Site, fetcher: Fetcher) -> None:
    with pytest.raises(
        FetchError, match=r"refused by the SSRF guard.*169\.254\.169\.254.*link-local"
    ):
        async with Fetcher(SSRFGuard(allow=["127.0.0.1"])) as f:
            await f.fetch("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(FetchError, match="loopback") as loopback:
        async with Fetcher(SSRFGuard()) as f:
            await f.fetch(site.url("/"))
    assert loopback.value.kind == "refused"

    with pytest.raises(FetchError) as refused:
        await fetcher.fetch(f"http://127.0.0.1:{free_port()}/")  # nothing listens there
    assert refused.value.kind == "connection"


async def test_conditional_fetch(site: Site, fetcher: Fetcher) -> None:
    page = await fetcher.fetch(site.url("/docs/guide"))
    assert isinstance(page, Resource)
    assert (page.media_type, page.status) == ("text/html", 200)
    assert page.validators.etag is not None
    again = await fetcher.fetch(site.url("/docs/guide"), validators=page.validators)
    assert isinstance(again, NotModified)
    stale = await fetcher.fetch(site.url("/docs/guide"), validators=Validators(etag='"old"'))
    assert isinstance(stale, Resource)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, "", {"/": "fetched", "/other": "fetched"}),  # no robots.txt: all allowed
        (503, "", {"/": "skipped: robots"}),  # the site cannot say: nothing is fetched
        (
            200,
            "User-agent: agentic-rag\nDisallow: /other\n",
            {"/": "fetched", "/other": "skipped: robots"},
        ),
    ],
)
async def test_robots_txt_answers(status: int, body: str, expected: dict[str, str]) -> None:
    async def robots(request: Request) -> Response:
        return PlainTextResponse(body, status_code=status)

    async def page(request: Request) -> Response:
        return Response(
            article("Page " + request.url.path, INTRO, links=("/other",)), media_type="text/html"
        )

    app = Starlette(routes=[Route("/robots.txt", robots), Route("/{path:path}", page)])
    async with serve(app) as port:
        site = Site(base=f"http://127.0.0.1:{port}")
        outcomes = await run(site, "/", CrawlOptions(min_interval=0))
    assert summary(site, outcomes) == expected
    if status == 503:
        assert detail(outcomes, site.url("/")) == (
            "robots.txt could not be read (HTTP 503 Service Unavailable)"
        )


async def test_a_long_crawl_delay_is_capped() -> None:
    async def robots(request: Request) -> Response:
        return PlainTextResponse("User-agent: *\nCrawl-delay: 3600\n")

    times: list[float] = []
    clock = VirtualClock()

    async def page(request: Request) -> Response:
        times.append(clock.now())
        return Response(article("Page", INTRO, links=("/a", "/b")), media_type="text/html")

    app = Starlette(routes=[Route("/robots.txt", robots), Route("/{path:path}", page)])
    async with serve(app) as port:
        options = CrawlOptions(min_interval=1, max_crawl_delay=5)
        async for _ in crawl(f"http://127.0.0.1:{port}/", GUARD, options, clock=clock):
            pass
    assert [b - a for a, b in itertools.pairwise(times)] == [5, 5]


def test_sitemaps_xml_index_text_and_gzip() -> None:
    index = parse_sitemap(
        b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://site.example/a.xml.gz</loc></sitemap></sitemapindex>",
        1000,
    )
    assert (index.entries, index.sitemaps) == ([], ["https://site.example/a.xml.gz"])

    urlset = gzip.compress(
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc> https://site.example/p#top </loc>"
        b"<lastmod>2024-05-01T12:00:00+02:00</lastmod></url>"
        b"<url><loc>https://site.example/q</loc><lastmod>yesterday</lastmod></url>"
        b"<url><loc>ftp://site.example/r</loc></url></urlset>"
    )
    assert parse_sitemap(urlset, 10_000).entries == [
        SitemapEntry("https://site.example/p", datetime(2024, 5, 1, 10, tzinfo=UTC)),
        SitemapEntry("https://site.example/q", None),  # an unreadable date only loses the shortcut
    ]

    text = parse_sitemap(b"https://site.example/x\n\nnot a url\nhttps://site.example/y\n", 1000)
    assert [e.url for e in text.entries] == ["https://site.example/x", "https://site.example/y"]

    with pytest.raises(SitemapError, match="inflates to more than 1000 bytes"):
        parse_sitemap(gzip.compress(b"<urlset>" + b" " * 5000 + b"</urlset>"), 1000)
    with pytest.raises(SitemapError, match="malformed sitemap XML"):
        parse_sitemap(b"<urlset><url>", 1000)
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + b"".join(
            b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i else b"&lol;") * 10)
            for i in range(9)
        )
        + b"]><urlset><url><loc>&lol8;</loc></url></urlset>"
    )
    with pytest.raises(SitemapError):  # expat refuses the entity expansion
        parse_sitemap(bomb, 10_000)

"""The crawler: from a start URL, the pages of one site, politely and within bounds.

`crawl` is an async generator: the caller gets each page's outcome as it happens (that is the
progress) and stops the crawl by cancelling the task that consumes it, or by closing the
generator (`contextlib.aclosing`); the HTTP client is closed either way.

- **Scope.** Links are followed up to `depth` hops from the start URL (sitemap URLs count as
  start URLs) and at most `max_pages` pages are requested. With `same_site`, only URLs on the
  start URL's host are visited, "www." aside: `example.com` and `www.example.com` are one site,
  `docs.example.com` is another (telling a subdomain of one site from a site of its own needs
  the public-suffix list, which is not shipped). `include` / `exclude` patterns: see
  `UrlPatterns`.
- **Politeness.** robots.txt per site for the user agent "agentic-rag" (`robots.py`);
  requests to one host are spaced by `min_interval` or the site's `Crawl-delay` (capped at
  `max_crawl_delay`), whichever is longer.
- **Re-crawls.** `known(url)` returns what was stored of a page; the request is then
  conditional (304 -> `Unchanged`), and a sitemap `lastmod` not after the last fetch skips the
  request entirely. An unchanged page's stored links are followed.
- **Resumability.** The URLs to visit live behind `Frontier`. A URL is marked done only when
  the consumer asks for the next outcome, i.e. after it has handled this one; a persistent
  frontier that hands out again the URLs taken but not done makes a restarted crawl continue
  where it stopped, each page handled at least once. `max_pages` counts this run's requests.
- **Outcomes.** `Fetched` (a document with text), `Unchanged`, `Skipped` (a reason from
  `SkipReason`) or `Failed` (a reason from `FailReason`); each with a precise `detail`.
"""

import asyncio
import fnmatch
import hashlib
import logging
import re
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

import httpx

from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.sources.html_page import HTML_TYPES, normalize_url, read_html
from agentic_rag.knowledge.sources.markdown import markdown_sections
from agentic_rag.knowledge.sources.pdf import EmptyPdfError, PdfError, aextract_pdf
from agentic_rag.knowledge.sources.robots import Clock, HostPacer, MonotonicClock, Robots
from agentic_rag.knowledge.sources.sitemaps import SitemapEntry, SitemapError, parse_sitemap
from agentic_rag.security.fetch import (
    PDF,
    Fetcher,
    FetchError,
    FetchLimits,
    NotModified,
    Resource,
    Validators,
)
from agentic_rag.security.ssrf import SSRFGuard

log = logging.getLogger(__name__)

TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
ACCEPTED_TYPES = HTML_TYPES | TEXT_TYPES | {PDF}
MAX_SITEMAPS = 20  # sitemap files read per crawl, nested indexes included

SkipReason = Literal[
    "robots",
    "off-site",
    "excluded",
    "too large",
    "not text",
    "no text after extraction",
    "duplicate",
]
FailReason = Literal[
    "http status",
    "timeout",
    "refused",
    "connection",
    "redirects",
    "invalid response",
    "unreadable",
]


@dataclass(frozen=True)
class Fetched:
    url: str
    final_url: str
    document: ExtractedDocument
    validators: Validators
    fetched_at: datetime
    content_hash: str
    """sha256 of the document's text: equal hashes, equal chunks."""
    links: tuple[str, ...]


@dataclass(frozen=True)
class Unchanged:
    url: str
    detail: str


@dataclass(frozen=True)
class Skipped:
    url: str
    reason: SkipReason
    detail: str


@dataclass(frozen=True)
class Failed:
    url: str
    reason: FailReason
    detail: str


type CrawlOutcome = Fetched | Unchanged | Skipped | Failed


@dataclass(frozen=True)
class KnownPage:
    """What the caller stored of a page at its last fetch (from its `Fetched`)."""

    validators: Validators
    fetched_at: datetime
    """Timezone-aware (it is compared with sitemap dates, in UTC)."""
    links: tuple[str, ...] = ()
    """Followed when the page is unchanged, as its body is not fetched again."""


type Known = Callable[[str], Awaitable[KnownPage | None]]


class Frontier(Protocol):
    """The URLs of one crawl, with the depth each was found at.

    `add` keeps only URLs never added before. `next` hands out a pending URL, oldest first
    (breadth first), or None when none is pending; within one run it never hands out a URL
    twice. `done` records that the URL's outcome was handled. A persistent frontier hands out
    again, after a restart, the URLs it handed out that are not done.
    """

    async def add(self, entries: Sequence[tuple[str, int]]) -> None: ...

    async def next(self) -> tuple[str, int] | None: ...

    async def done(self, url: str) -> None: ...


@dataclass
class MemoryFrontier:
    """A frontier that lives as long as the crawl."""

    pending: deque[tuple[str, int]] = field(default_factory=deque)
    added: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)

    async def add(self, entries: Sequence[tuple[str, int]]) -> None:
        for url, depth in entries:
            if url not in self.added:
                self.added.add(url)
                self.pending.append((url, depth))

    async def next(self) -> tuple[str, int] | None:
        return self.pending.popleft() if self.pending else None

    async def done(self, url: str) -> None:
        self.finished.add(url)


@dataclass(frozen=True)
class UrlPattern:
    """One include or exclude pattern (see `UrlPatterns`)."""

    text: str
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.text.startswith("re:"):
            try:
                regex = re.compile(self.text.removeprefix("re:"))
            except re.error as exc:
                raise ValueError(f"invalid regular expression in {self.text!r}: {exc}") from None
        else:
            regex = re.compile(fnmatch.translate(self.text))
        object.__setattr__(self, "regex", regex)

    def matches(self, url: str) -> bool:
        if self.text.startswith("re:"):
            return self.regex.search(url) is not None
        if self.text.startswith("/"):
            return self.regex.match(httpx.URL(url).raw_path.decode("ascii")) is not None
        return self.regex.match(url) is not None


@dataclass(frozen=True)
class UrlPatterns:
    """Which URLs a crawl may visit: one of the `include` patterns must match (if there are
    any) and none of the `exclude` patterns may.

    A pattern is a glob (`*` matches any characters, "/" included) matched against the whole
    URL, or against its path and query when the pattern starts with "/" ("/docs/*"); a pattern
    starting with "re:" is a regular expression searched in the whole URL ("re:/v[0-9]+/").
    Raises ValueError for an invalid regular expression.
    """

    include: tuple[UrlPattern, ...] = ()
    exclude: tuple[UrlPattern, ...] = ()

    @classmethod
    def parse(cls, include: Sequence[str], exclude: Sequence[str]) -> "UrlPatterns":
        return cls(tuple(map(UrlPattern, include)), tuple(map(UrlPattern, exclude)))

    def refuses(self, url: str) -> str | None:
        """Why `url` is out of the crawl, or None."""
        if self.include and not any(p.matches(url) for p in self.include):
            return "matches no include pattern"
        for pattern in self.exclude:
            if pattern.matches(url):
                return f"matches the exclude pattern {pattern.text!r}"
        return None


@dataclass(frozen=True)
class CrawlOptions:
    depth: int = 1
    """Hops from the start URL: 0 fetches the start URL (and sitemap URLs) only."""
    max_pages: int = 50
    """Pages requested (or found unchanged) at most; skipped URLs do not count."""
    same_site: bool = True
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    sitemaps: bool = False
    """Also start from the URLs of the site's sitemaps (robots.txt `Sitemap:` lines and
    /sitemap.xml)."""
    min_interval: float = 1.0
    """Seconds between two requests to one host, at least."""
    max_crawl_delay: float = 30.0
    """A robots.txt `Crawl-delay` longer than this is shortened to it."""
    limits: FetchLimits = field(default_factory=FetchLimits)

    def __post_init__(self) -> None:
        if self.depth < 0:
            raise ValueError(f"depth must be 0 or more, not {self.depth}")
        if self.max_pages < 1:
            raise ValueError(f"max_pages must be at least 1, not {self.max_pages}")
        if self.min_interval < 0 or self.max_crawl_delay < 0:
            raise ValueError("min_interval and max_crawl_delay cannot be negative")
        UrlPatterns.parse(self.include, self.exclude)  # raises ValueError for a bad pattern


async def crawl(
    start_url: str,
    guard: SSRFGuard,
    options: CrawlOptions | None = None,
    *,
    frontier: Frontier | None = None,
    known: Known | None = None,
    clock: Clock | None = None,
) -> AsyncGenerator[CrawlOutcome]:
    """Crawl from `start_url`, yielding one outcome per URL visited (see the module doc).

    Raises ValueError for a start URL that is not http(s) and UnsafeURLError (a ValueError)
    for one the guard refuses by its shape, before any request.
    """
    start = normalize_url(start_url)
    if start is None:
        raise ValueError(f"not an http(s) URL: {start_url!r}")
    guard.check_shape(start)
    options = options or CrawlOptions()
    frontier = frontier if frontier is not None else MemoryFrontier()
    async with Fetcher(guard, options.limits) as fetcher:
        pacer = HostPacer(options.min_interval, clock or MonotonicClock())
        run = _Crawl(start, options, fetcher, known, pacer)
        await frontier.add([(start, 0)])
        if options.sitemaps:
            await frontier.add([(entry.url, 0) for entry in await run.sitemap_entries()])
        requested = 0
        while requested < options.max_pages and (item := await frontier.next()) is not None:
            url, depth = item
            outcome, links, counted = await run.visit(url)
            requested += counted
            if links and depth < options.depth:
                await frontier.add([(link, depth + 1) for link in links])
            yield outcome
            await frontier.done(url)


@dataclass
class _Crawl:
    """The state of one crawl: robots rules, pacing, sitemap dates, texts seen."""

    start: str
    options: CrawlOptions
    fetcher: Fetcher
    known: Known | None
    pacer: HostPacer
    robots: Robots = field(init=False)
    patterns: UrlPatterns = field(init=False)
    lastmod: dict[str, datetime] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    """content hash -> the URL first fetched with that text."""

    def __post_init__(self) -> None:
        self.robots = Robots(self.fetcher, self.pacer)
        self.patterns = UrlPatterns.parse(self.options.include, self.options.exclude)

    async def visit(self, url: str) -> tuple[CrawlOutcome, Sequence[str], bool]:
        """The outcome for `url`, the links to follow from it, and whether it was requested."""
        refusal = await self._refusal(url)
        if refusal is not None:
            return refusal, (), False
        known = await self.known(url) if self.known is not None else None
        lastmod = self.lastmod.get(url)
        if known is not None and lastmod is not None and lastmod <= known.fetched_at:
            detail = f"sitemap lastmod {lastmod.isoformat()} is not after the last fetch"
            return Unchanged(url, detail), known.links, True
        await self._pace(url)
        fetched_at = datetime.now(UTC)
        try:
            result = await self.fetcher.fetch(
                url, validators=known.validators if known else None, accept=ACCEPTED_TYPES
            )
        except FetchError as exc:
            return _fetch_outcome(url, exc), (), True
        if isinstance(result, NotModified):
            return Unchanged(url, "304 Not Modified"), known.links if known else (), True
        if result.final_url != url and (refusal := await self._refusal(result.final_url)):
            detail = f"redirected to {result.final_url}: {refusal.detail}"
            return Skipped(url, refusal.reason, detail), (), True
        try:
            document, links = await self._extract(result)
        except EmptyPdfError as exc:
            return Skipped(url, "no text after extraction", str(exc)), (), True
        except PdfError as exc:
            return Failed(url, "unreadable", str(exc)), (), True
        if not document.text.strip():
            detail = "no readable text in the page"
            if result.media_type in HTML_TYPES:
                detail += " (it may need JavaScript)"
            return Skipped(url, "no text after extraction", detail), links, True
        content_hash = hashlib.sha256(document.text.encode()).hexdigest()
        if (first := self.texts.setdefault(content_hash, url)) != url:
            return Skipped(url, "duplicate", f"same text as {first}"), links, True
        outcome = Fetched(
            url=url,
            final_url=result.final_url,
            document=document,
            validators=result.validators,
            fetched_at=fetched_at,
            content_hash=content_hash,
            links=tuple(links),
        )
        return outcome, links, True

    async def _refusal(self, url: str) -> Skipped | None:
        """Why `url` may not be visited (off-site, excluded, robots), or None."""
        if self.options.same_site and _site(url) != _site(self.start):
            return Skipped(url, "off-site", f"{httpx.URL(url).host} is not {_site(self.start)}")
        if (why := self.patterns.refuses(url)) is not None:
            return Skipped(url, "excluded", why)
        if (why := (await self.robots.rules_for(url)).refuses(url)) is not None:
            return Skipped(url, "robots", why)
        return None

    async def _pace(self, url: str) -> None:
        """Wait as long as the host asks (robots.txt `Crawl-delay`, capped) or we want."""
        delay = (await self.robots.rules_for(url)).crawl_delay or 0.0
        await self.pacer.wait(url, min(delay, self.options.max_crawl_delay))

    async def _extract(self, resource: Resource) -> tuple[ExtractedDocument, list[str]]:
        uri = resource.final_url
        if resource.media_type in HTML_TYPES:
            # A charset in the Content-Type header overrides what the page declares or looks like.
            html = _decode(resource.body, resource.charset) if resource.charset else resource.body
            page = await asyncio.to_thread(read_html, html, uri)
            return page.document, page.links
        if resource.media_type == PDF:
            return await aextract_pdf(resource.body, uri=uri), []
        text = _decode(resource.body, resource.charset)
        sections = markdown_sections(text)
        title = next((s.text for s in sections if s.kind == "heading"), _last_segment(uri))
        return ExtractedDocument(uri, title, resource.media_type, sections), []

    async def sitemap_entries(self) -> list[SitemapEntry]:
        """The site's sitemap URLs that the crawl may visit, at most `max_pages` of them."""
        rules = await self.robots.rules_for(self.start)
        root = str(httpx.URL(self.start).copy_with(path="/sitemap.xml", query=None))
        queue = deque(dict.fromkeys([*rules.sitemaps, root]))
        read: set[str] = set()
        entries: dict[str, SitemapEntry] = {}
        while queue and len(read) < MAX_SITEMAPS and len(entries) < self.options.max_pages:
            sitemap_url = queue.popleft()
            if sitemap_url in read:
                continue
            read.add(sitemap_url)
            await self._pace(sitemap_url)
            try:
                resource = await self.fetcher.fetch(sitemap_url)
                if isinstance(resource, NotModified):
                    continue
                sitemap = parse_sitemap(resource.body, self.options.limits.max_bytes)
            except (FetchError, SitemapError) as exc:
                log.info("sitemap %s not read: %s", sitemap_url, exc)
                continue
            queue.extend(sitemap.sitemaps)
            for entry in sitemap.entries:
                off_site = self.options.same_site and _site(entry.url) != _site(self.start)
                if off_site or self.patterns.refuses(entry.url) is not None:
                    continue
                entries.setdefault(entry.url, entry)
                if entry.lastmod is not None:
                    self.lastmod[entry.url] = entry.lastmod
        return list(entries.values())[: self.options.max_pages]


def _fetch_outcome(url: str, exc: FetchError) -> Skipped | Failed:
    if exc.kind == "too large":
        return Skipped(url, "too large", str(exc))
    if exc.kind == "content type":
        return Skipped(url, "not text", str(exc))
    return Failed(url, exc.kind, str(exc))


def _site(url: str) -> str:
    return httpx.URL(url).host.removeprefix("www.")


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", "replace")


def _last_segment(url: str) -> str:
    return httpx.URL(url).path.rstrip("/").rsplit("/", 1)[-1] or url

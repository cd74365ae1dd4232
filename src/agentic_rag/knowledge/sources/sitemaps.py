"""Sitemaps (sitemaps.org): the URLs a site lists, with their `lastmod`, and nested sitemaps.

trafilatura's sitemap reader fetches on its own (past the SSRF guard) and drops `lastmod`, so
the XML is read here; the crawler fetches it. The parser is the standard library's: expat 2.4
and later refuses entity expansion bombs and nothing external is ever loaded. A gzip sitemap
is inflated up to the same size limit as any body.
"""

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from xml.etree import ElementTree

from agentic_rag.knowledge.sources.html_page import normalize_url

_GZIP_MAGIC = b"\x1f\x8b"


class SitemapError(ValueError):
    """A sitemap that cannot be read."""


@dataclass(frozen=True)
class SitemapEntry:
    url: str
    lastmod: datetime | None = None


@dataclass(frozen=True)
class Sitemap:
    entries: list[SitemapEntry]
    """The pages a `<urlset>` (or a text sitemap) lists."""
    sitemaps: list[str]
    """The sitemaps a `<sitemapindex>` lists."""


def parse_sitemap(body: bytes, max_bytes: int) -> Sitemap:
    """Read an XML (or plain-text, one URL a line) sitemap, gzipped or not."""
    if body.startswith(_GZIP_MAGIC):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, max_bytes + 1)
        except zlib.error as exc:
            raise SitemapError(f"corrupt gzip sitemap: {exc}") from None
        if len(body) > max_bytes:
            raise SitemapError(f"the sitemap inflates to more than {max_bytes} bytes")
    if not body.lstrip().startswith(b"<"):
        lines = body.decode("utf-8", "replace").splitlines()
        return Sitemap([SitemapEntry(u) for u in map(normalize_url, lines) if u], [])
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise SitemapError(f"malformed sitemap XML: {exc}") from None
    entries: list[SitemapEntry] = []
    sitemaps: list[str] = []
    for item in root:
        loc = normalize_url(_child_text(item, "loc"))
        if loc is None:
            continue
        if _local(item.tag) == "sitemap":
            sitemaps.append(loc)
        elif _local(item.tag) == "url":
            entries.append(SitemapEntry(loc, _w3c_datetime(_child_text(item, "lastmod"))))
    return Sitemap(entries, sitemaps)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child_text(element: ElementTree.Element, name: str) -> str:
    for child in element:
        if _local(child.tag) == name:
            return (child.text or "").strip()
    return ""


def _w3c_datetime(value: str) -> datetime | None:
    """A sitemap date ("2024-05-01", "2024-05-01T10:00:00+02:00", "...Z"), in UTC."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None  # an unreadable lastmod only loses the shortcut, not the page
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)

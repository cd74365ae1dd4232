"""An HTML page -> its readable text, its structure kept, and its links.

The page's main content (`<main>`, else `<body>`, without menus, tables of contents, headers and
footers) is converted structurally (html_structure.py): headings, lists, definition lists,
tables and code blocks come out as such, text as written. Every page's coverage is checked:
the share of the page's text blocks (its paragraphs, list items, terms, descriptions, cells,
code blocks and headings of at least 25 characters, `html_structure.content_blocks`, counted on
the whole page without only what its tags and roles mark as navigation) that the text keeps.
When it is below `COVERAGE_GUARD`, the main-content region or the names that looked like menus
were wrong for this page: the whole page is read instead, and a note says so.

Chosen on bench/fidelity (docs/knowledge.md, How pages are read): this keeps 100% of the
content blocks on pages of ten documentation generators, where trafilatura, the extractor
before, kept 62-99% (it drops lists, headings and paragraphs) and wrote markdown escapes.

Text inside `<noscript>` is left out: on a page that needs JavaScript it is the "enable
JavaScript" notice, not content, and such a page must come out empty.
"""

from dataclasses import dataclass

import httpx
from lxml import etree  # type: ignore[import-untyped]  # lxml ships no stubs
from lxml.html import HtmlElement, document_fromstring  # type: ignore[import-untyped]
from lxml.html.html5parser import HTMLParser  # type: ignore[import-untyped]
from trafilatura.metadata import extract_metadata
from trafilatura.utils import decode_file

from agentic_rag.knowledge.documents import SECTION_SEPARATOR, ExtractedDocument, Section
from agentic_rag.knowledge.sources.html_structure import (
    content_blocks,
    content_region,
    html_sections,
    unnamed,
)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PERMALINK_GLYPHS = " \t¶§#🔗"
"""What generators append to a heading as its link (Sphinx's "¶"), and spaces."""
COVERAGE_GUARD = 0.8
"""Below this share of the page's text blocks kept, the whole page is read."""
_HTML5 = HTMLParser(namespaceHTMLElements=False)


@dataclass(frozen=True)
class HtmlPage:
    document: ExtractedDocument
    """Its sections are empty when the page has no readable text."""
    links: list[str]
    """Absolute http(s) URLs of the page's links, without fragments, in order, once each."""


@dataclass(frozen=True)
class Reading:
    """How a page's text was read."""

    method: str
    """"main content", or "whole page" when the guard chose it."""
    coverage: float
    """The share of the page's text blocks found in the text (1.0 when it has none)."""
    blocks: int
    """How many text blocks the page holds."""
    fallback: str | None = None
    """Why the whole page was read, when it was."""

    def as_metadata(self) -> dict[str, object]:
        return {"method": self.method, "coverage": round(self.coverage, 4), "blocks": self.blocks}

    def note(self) -> str:
        kept = f"{self.coverage:.1%} of its {self.blocks} text blocks kept"
        if self.fallback:
            return f"read as a whole page ({kept}): {self.fallback}"
        return f"main content read ({kept})"


def read_html(body: bytes | str, url: str) -> HtmlPage:
    """Extract the main text and links of the page at `url` (its final URL, after redirects).

    The page is parsed as browsers parse it (`parse_html`); the encoding of bytes is detected by
    trafilatura (UTF-8 when the bytes are, else the declared charset, then a guess).
    The document's metadata "extraction" and its notes say how it was read (`Reading`).
    Blocking: about 0.1 s a page, so async callers run it in a thread.
    """
    tree = parse_html(body)
    base = url
    for href in tree.xpath("//base/@href")[:1]:
        base = absolute_url(url, str(href)) or url
    links = [absolute_url(base, str(href)) for href in tree.xpath("//a/@href | //area/@href")]
    metadata = extract_metadata(tree, default_url=url)
    sections, reading = _read(tree)
    heading = next((s.text for s in sections if s.kind == "heading"), None)
    # trafilatura may take the title from the first heading, permalink glyph included
    title = (metadata.title or "").rstrip(PERMALINK_GLYPHS) or heading or url
    details: dict[str, object] = {
        key: value
        for key, value in (
            ("description", metadata.description),
            ("author", metadata.author),
            ("date", metadata.date),
            ("sitename", metadata.sitename),
        )
        if value
    }
    details["extraction"] = reading.as_metadata()
    for href in tree.xpath("//link[@rel='canonical']/@href")[:1]:  # one copy per page (store.py)
        details["canonical"] = absolute_url(base, str(href)) or url
    document = ExtractedDocument(
        uri=url,
        title=title,
        mime_type="text/html",
        sections=sections,
        metadata=details,
        notes=[reading.note()] if sections else [],
    )
    return HtmlPage(document, list(dict.fromkeys(link for link in links if link is not None)))


def parse_html(body: bytes | str) -> HtmlElement:
    """The page's document tree, built by the HTML5 parsing rules (html5lib), as browsers build it.

    lxml's own parser (libxml2) is not HTML5: on a page with text before its doctype (a CGI
    header left in a man2html page) it built no html or body element, so the page read as empty.
    html5lib builds plain lxml elements; its tree, serialized, is read back as lxml.html ones.
    """
    text = decode_file(body).removeprefix("\ufeff")  # a byte order mark is not text
    built = _HTML5.parse(text).getroot()
    serialized = etree.tostring(built, method="html", encoding="unicode")
    tree: HtmlElement = document_fromstring(serialized)
    return tree


def _read(tree: HtmlElement) -> tuple[list[Section], Reading]:
    body = tree.find("body")
    region = content_region(tree)
    if body is None or region is None:
        return [], Reading("main content", 1.0, 0)
    page = unnamed(body)
    blocks = content_blocks(page)
    sections = html_sections(region)
    coverage = coverage_of(blocks, _text(sections))
    if coverage >= COVERAGE_GUARD:
        return sections, Reading("main content", coverage, len(blocks))
    whole = html_sections(page)
    whole_coverage = coverage_of(blocks, _text(whole))
    if whole_coverage <= coverage:
        return sections, Reading("main content", coverage, len(blocks))
    why = f"its main content alone kept {coverage:.1%}"
    return whole, Reading("whole page", whole_coverage, len(blocks), why)


def _text(sections: list[Section]) -> str:
    return SECTION_SEPARATOR.join(s.text for s in sections)


def coverage_of(blocks: list[str], text: str) -> float:
    """The share of `blocks` (whitespace collapsed) found in `text`; 1.0 when there are none.

    Blocks come in document order, so each is looked for after the one found before it first.
    """
    if not blocks:
        return 1.0
    haystack = " ".join(text.split())
    found, position = 0, 0
    for block in blocks:
        at = haystack.find(block, position)
        if at < 0:
            at = haystack.find(block)
        if at >= 0:
            found += 1
            position = at
    return found / len(blocks)


def absolute_url(base: str, href: str) -> str | None:
    """`href` resolved against `base`, without its fragment; None unless it is http(s)."""
    try:
        url = httpx.URL(base).join(href.strip())
    except httpx.InvalidURL:
        return None
    if url.scheme not in ("http", "https") or not url.host:
        return None
    # One spelling per page: no fragment, "/" for an empty path (httpx already lowercases the
    # scheme and host, drops default ports and resolves dot segments).
    return str(url.copy_with(fragment=None, path=url.path or "/"))


def normalize_url(url: str) -> str | None:
    """`url` in the spelling `absolute_url` gives links; None unless it is an http(s) URL."""
    return absolute_url(url, url)

"""An HTML page -> its readable text, its structure kept, and its links.

The main content is converted structurally (html_structure.py): headings, lists, definition
lists, tables and code blocks come out as such. Its coverage (how many of the content region's
blocks of at least 25 characters are in the text, `html_structure.content_blocks`) is checked
on every page: when the conversion keeps less than `COVERAGE_GUARD` of them and trafilatura,
tuned for recall, keeps more, trafilatura's text is used instead, and a note says so. Measured on
bench/fidelity (docs/knowledge.md, How pages are read), the structural conversion keeps at least
99% on every generator, where trafilatura alone loses lists, headings and paragraphs.

Text inside `<noscript>` is left out: on a page that needs JavaScript it is the "enable
JavaScript" notice, not content, and such a page must come out empty.
"""

from dataclasses import dataclass

import httpx
from trafilatura import extract
from trafilatura.metadata import extract_metadata
from trafilatura.utils import load_html

from agentic_rag.knowledge.documents import SECTION_SEPARATOR, ExtractedDocument, Section
from agentic_rag.knowledge.sources.html_structure import (
    content_blocks,
    content_region,
    html_sections,
)
from agentic_rag.knowledge.sources.markdown import markdown_sections

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
COVERAGE_GUARD = 0.99
"""Below this share of the content's blocks kept, trafilatura is tried as well."""


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
    """"structural", or "trafilatura" when the guard chose it."""
    coverage: float
    """The share of the content region's blocks found in the text (1.0 when it has none)."""
    blocks: int
    """How many blocks the content region holds."""
    fallback: str | None = None
    """Why trafilatura was used, when it was."""

    def as_metadata(self) -> dict[str, object]:
        return {"method": self.method, "coverage": round(self.coverage, 4), "blocks": self.blocks}

    def note(self) -> str:
        kept = f"{self.coverage:.1%} of {self.blocks} content blocks kept"
        if self.fallback:
            return f"read by trafilatura ({kept}): {self.fallback}"
        return f"read by structural conversion ({kept})"


def read_html(body: bytes | str, url: str) -> HtmlPage:
    """Extract the main text and links of the page at `url` (its final URL, after redirects).

    The encoding of bytes is detected by trafilatura (declared charset, then a guess).
    The document's metadata "extraction" and its notes say how it was read (`Reading`).
    Blocking: about 0.1 s a page, so async callers run it in a thread.
    """
    tree = load_html(body)
    if tree is None:  # not HTML at all (or empty)
        return HtmlPage(ExtractedDocument(url, url, "text/html", []), [])
    base = url
    for href in tree.xpath("//base/@href")[:1]:
        base = absolute_url(url, str(href)) or url
    links = [absolute_url(base, str(href)) for href in tree.xpath("//a/@href | //area/@href")]
    metadata = extract_metadata(tree, default_url=url)
    sections, reading = _read(tree, url)
    title = metadata.title or next((s.text for s in sections if s.kind == "heading"), url)
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


def _read(tree: object, url: str) -> tuple[list[Section], Reading]:
    region = content_region(tree)
    blocks = content_blocks(region) if region is not None else []
    sections = html_sections(region) if region is not None else []
    coverage = coverage_of(blocks, _text(sections))
    if coverage >= COVERAGE_GUARD:
        return sections, Reading("structural", coverage, len(blocks))
    markdown = extract(
        tree,
        url=url,
        output_format="markdown",
        favor_recall=True,
        include_formatting=False,
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
        prune_xpath="//noscript",
    )
    other = markdown_sections(markdown or "")
    other_coverage = coverage_of(blocks, _text(other))
    if other_coverage <= coverage:
        return sections, Reading("structural", coverage, len(blocks))
    why = f"the structural conversion kept {coverage:.1%}"
    return other, Reading("trafilatura", other_coverage, len(blocks), why)


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

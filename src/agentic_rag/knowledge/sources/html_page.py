"""An HTML page -> its readable text (trafilatura, as markdown so headings survive) and its links.

Text inside `<noscript>` is left out: on a page that needs JavaScript it is the "enable
JavaScript" notice, not content, and such a page must come out empty.
"""

from dataclasses import dataclass

import httpx
from trafilatura import extract
from trafilatura.metadata import extract_metadata
from trafilatura.utils import load_html

from agentic_rag.knowledge.documents import ExtractedDocument
from agentic_rag.knowledge.sources.markdown import markdown_sections

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True)
class HtmlPage:
    document: ExtractedDocument
    """Its sections are empty when the page has no readable text."""
    links: list[str]
    """Absolute http(s) URLs of the page's links, without fragments, in order, once each."""


def read_html(body: bytes | str, url: str) -> HtmlPage:
    """Extract the main text and links of the page at `url` (its final URL, after redirects).

    The encoding of bytes is detected by trafilatura (declared charset, then a guess).
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
    markdown = extract(
        tree,
        url=url,
        output_format="markdown",
        include_formatting=True,
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
        prune_xpath="//noscript",
    )
    sections = markdown_sections(markdown or "")
    title = metadata.title or next((s.text for s in sections if s.kind == "heading"), url)
    details = {
        key: value
        for key, value in (
            ("description", metadata.description),
            ("author", metadata.author),
            ("date", metadata.date),
            ("sitename", metadata.sitename),
        )
        if value
    }
    document = ExtractedDocument(
        uri=url, title=title, mime_type="text/html", sections=sections, metadata=details
    )
    return HtmlPage(document, list(dict.fromkeys(link for link in links if link is not None)))


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

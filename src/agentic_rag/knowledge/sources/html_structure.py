"""An HTML page's main content -> sections, its structure kept (a structural conversion).

The content region is the page's `<main>` (or `role="main"`), else its `<body>`, without what
only navigates or frames it ("chrome"): `<nav>`, `<footer>`, `<script>`, form controls and the
like, hidden elements, elements whose role is navigation, banner, search, contentinfo or dialog,
headings' permalink anchors, and elements with a class or id that names navigation, sidebars,
tables of contents, headers or footers (`CHROME_CLASSES`, `CHROME_PARTS`, `CHROME_IDS`).

A paragraph that only navigates ("See Calming bees with smoke and Preparing hives for winter.",
"[ Archive | About ]", a SEE ALSO line of page names) is left out too: it names other pages,
so it would rank for their subjects (`navigates`). Lists of links stay: measured on
bench/fidelity, such lists in a page's main content are content (a class's default methods,
the themes a tool ships).

What the region holds becomes sections as markdown would give them, without inline markup:
headings become heading sections (the title alone) and the heading path of what follows; lists
and definition lists become list sections (`- item`, `1. item`, a term with its descriptions
indented under it); data tables become pipe tables; `<pre>` becomes a fenced code block. A table
whose cells hold blocks (paragraphs, lists, tables) lays the page out and is read cell by cell.
Text is taken as written: no backslash escapes, no emphasis or inline-code markers.
"""

import re
from collections.abc import Iterable, Iterator
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Literal

from lxml.html import HtmlElement  # type: ignore[import-untyped]  # lxml ships no stubs

from agentic_rag.knowledge.documents import Section, SectionKind

SKIPPED_TAGS = frozenset(
    {
        "script", "style", "noscript", "template", "nav", "button", "select",
        "textarea", "iframe", "svg", "canvas", "object", "embed", "map", "head", "title", "footer",
        "meta", "link", "input", "label", "dialog",
    }
)  # fmt: skip
CHROME_ROLES = frozenset({"navigation", "banner", "search", "contentinfo", "dialog"})
PERMALINKS = frozenset({"headerlink", "anchorjs-link", "permalink"})
"""Classes of a heading's permanent-link anchor: a glyph ("¶", an icon font's), not text."""
CHROME_CLASSES = frozenset(
    {
        "nav", "navbar", "navigation", "nav-panel", "navheader", "navfooter", "breadcrumb",
        "breadcrumbs", "sidebar", "sphinxsidebar", "related", "menu", "toc", "header",
        "footer", "skip", "skiplink", "wy-nav-side", "rst-versions",
    }
)  # fmt: skip
CHROME_PARTS = frozenset({"toc", "nav", "navbar", "sidebar", "breadcrumb", "breadcrumbs", "footer"})
"""A class made of words joined by "-" or "_" is chrome when one of them is one of these."""
CHROME_IDS = frozenset(
    {"nav", "navbar", "navigation", "sidebar", "menu", "toc", "footer", "nav-path", "side-nav"}
)
HEADINGS = {f"h{n}": n for n in range(1, 7)}
LISTS = frozenset({"ul", "ol", "menu", "dir"})
BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "center", "dd", "details", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "header", "hr", "li", "main",
        "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead",
        "tr", "ul", "caption", "listing", "xmp", "plaintext", "menu", "dir", *HEADINGS,
    }
)  # fmt: skip
BREAK = "\x00"
"""Stands for `<br>` in inline text until whitespace is collapsed (it is not whitespace)."""
PREFORMATTED = frozenset({"pre", "listing", "xmp", "plaintext"})


def content_region(tree: HtmlElement) -> HtmlElement | None:
    """The element that holds the page's main content, or None when it has no body."""
    for xpath in ("//main", "//*[@role='main']", "//body"):
        found = tree.xpath(xpath)
        if found:
            region: HtmlElement = found[0]
            return region
    return None


def is_chrome(element: HtmlElement) -> bool:
    """Whether `element` only navigates or frames the page (see the module's docstring)."""
    return _marked_chrome(element) or _named_chrome(element)


def _marked_chrome(element: HtmlElement) -> bool:
    """Chrome by its tag, role or `hidden` attribute."""
    tag = element.tag
    if not isinstance(tag, str) or tag in SKIPPED_TAGS:
        return True
    if element.get("hidden") is not None or element.get("aria-hidden") == "true":
        return True
    classes = (element.get("class") or "").split()
    return element.get("role") in CHROME_ROLES or not PERMALINKS.isdisjoint(classes)


def _named_chrome(element: HtmlElement) -> bool:
    """Chrome by its class or id."""
    classes = (element.get("class") or "").lower().split()
    if not CHROME_CLASSES.isdisjoint(classes) or any(
        not CHROME_PARTS.isdisjoint(re.split(r"[-_]", name)) for name in classes
    ):
        return True
    identifier = element.get("id")
    return identifier is not None and identifier.lower() in CHROME_IDS


def unnamed(region: HtmlElement) -> HtmlElement:
    """A copy of `region` in which no element is chrome by its class or id (only by its tag,
    role or `hidden` attribute): the whole page as a reader sees it, without its menus."""
    copy: HtmlElement = deepcopy(region)
    for element in copy.iter():
        if isinstance(element.tag, str) and _named_chrome(element):
            element.attrib.pop("class", None)
            element.attrib.pop("id", None)
    return copy


def html_sections(region: HtmlElement) -> list[Section]:
    """The sections of `region`, in document order."""
    converter = _Converter()
    converter.container(region)
    converter.flush()
    return converter.sections


def _texts(element: HtmlElement, *, keep_tail: bool = True) -> Iterator[str]:
    if not is_chrome(element):
        if element.tag == "br":
            yield BREAK
        if element.text:
            yield element.text
        for child in element:
            yield from _texts(child)
    if keep_tail and element.tail:
        yield element.tail


def _inline(element: HtmlElement) -> str:
    """Inline text on one line (a `<br>` is a space), whitespace collapsed."""
    return " ".join("".join(_texts(element, keep_tail=False)).replace(BREAK, " ").split())


def _inline_lines(element: HtmlElement) -> str:
    """Inline text with `<br>` kept as line breaks."""
    return _lines("".join(_texts(element, keep_tail=False)))


def _lines(text: str) -> str:
    """Inline text with whitespace collapsed, each `<br>` (BREAK) a line break."""
    lines = (" ".join(line.split()) for line in text.split(BREAK))
    return "\n".join(line for line in lines if line)


def _has_blocks(element: HtmlElement) -> bool:
    return any(
        isinstance(d.tag, str) and d.tag in BLOCK_TAGS and not is_chrome(d)
        for d in element.iterdescendants()
    )


def _fence(code: str) -> str:
    """`code` as a fenced block, its fence longer than any fence-like line inside it."""
    inner = re.findall(r"^ *(`{3,})", code, flags=re.MULTILINE)
    fence = "`" * max([3, *(len(run) + 1 for run in inner)])
    return f"{fence}\n{code}\n{fence}"


def _preformatted(element: HtmlElement) -> str:
    text = "".join(_texts(element, keep_tail=False)).replace("\r\n", "\n").replace(BREAK, "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


@dataclass
class _Converter:
    sections: list[Section] = field(default_factory=list)
    path: list[tuple[int, str]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    """Inline text met between blocks, waiting to become a paragraph."""

    def emit(self, kind: SectionKind, text: str) -> None:
        if text.strip():
            heading_path = tuple(title for _, title in self.path)
            self.sections.append(Section(text=text, kind=kind, heading_path=heading_path))

    def flush(self) -> None:
        text = _lines("".join(self.pending))
        self.pending.clear()
        self.emit("paragraph", text)

    def inline_text(self, text: str | None) -> None:
        if text:
            self.pending.append(text)

    def container(self, element: HtmlElement) -> None:
        """A block that holds blocks and inline content: each inline run is a paragraph."""
        self.inline_text(element.text)
        for child in element:
            self.node(child)
            self.inline_text(child.tail)

    def node(self, element: HtmlElement) -> None:
        tag = element.tag
        if is_chrome(element):
            return
        if tag == "br":
            self.pending.append(BREAK)
        elif tag not in BLOCK_TAGS and not _is_code_fragment(element):
            if _has_blocks(element):  # an inline element wrapped around blocks (<a><div>)
                self.container(element)
            else:
                self.pending.append("".join(_texts(element, keep_tail=False)))
        else:
            self.flush()
            self.block(element)

    def block(self, element: HtmlElement) -> None:
        tag = element.tag
        if tag in HEADINGS:
            self.heading(HEADINGS[tag], _inline(element))
        elif tag in PREFORMATTED:
            self.emit("code", _fence(_preformatted(element)))
        elif _is_code_fragment(element):
            lines = [_preformatted(line) for line in element.iterfind(".//div[@class='line']")]
            self.emit("code", _fence("\n".join(lines) if lines else _preformatted(element)))
        elif tag in LISTS:
            self.list_block(element)
        elif tag == "dl":
            self.definitions(element)
        elif tag == "table":
            self.table(element)
        elif tag == "hr" or (not _has_blocks(element) and navigates(element)):
            return
        else:
            self.container(element)
            self.flush()

    def heading(self, level: int, title: str) -> None:
        title = title.rstrip("¶").strip()
        if not title:
            return
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title))
        self.emit("heading", title)

    def list_block(self, element: HtmlElement) -> None:
        lines: list[str] = []
        number = _start(element)
        ordered = element.tag == "ol"
        for item in element:
            if not isinstance(item.tag, str) or is_chrome(item):
                continue
            self.item(item, f"{number}." if ordered else "-", lines)
            number += 1
        self.emit("list", "\n".join(lines))

    def definitions(self, element: HtmlElement) -> None:
        """Each term is an item; its descriptions are indented lines under it."""
        lines: list[str] = []
        for child in element:
            if not isinstance(child.tag, str) or is_chrome(child):
                continue
            if child.tag in ("dt", "dd"):
                self.item(child, "-" if child.tag == "dt" else "", lines)
            else:  # <div> groups (HTML 5) or stray blocks
                self.emit("list", "\n".join(lines))
                lines.clear()
                self.node(child)
        self.emit("list", "\n".join(lines))

    def item(self, item: HtmlElement, marker: str, lines: list[str]) -> None:
        """Adds one list item to `lines` (an empty `marker` indents it under the item before).
        A block that a list item cannot hold in markdown (code, a table) ends the list so far,
        which is emitted, and stands as its own section."""
        first = bool(marker)
        for kind, text in _item_parts(item):
            if kind == "code" or kind == "table":
                self.emit("list", "\n".join(lines))
                lines.clear()
                self.emit(kind, text)
                continue
            for line in text.split("\n"):
                if kind == "text":
                    lines.append(f"{marker} {line}" if first else f"  {line}")
                    first = False
                else:  # a nested list, already indented
                    if first:
                        lines.append(marker)
                        first = False
                    lines.append(line)
        if first:
            lines.append(marker)

    def table(self, element: HtmlElement) -> None:
        rows = [row for row in element.iter("tr") if _table_of(row) is element]
        cells = [[c for c in row if c.tag in ("td", "th")] for row in rows]
        if not rows or any(_has_blocks(c) for row in cells for c in row):
            for row in cells:  # a layout table: its cells are read as containers
                for cell in row:
                    self.container(cell)
                    self.flush()
            return
        texts = [[_inline(c) for c in row] for row in cells]
        texts = [row for row in texts if any(row)]
        if not texts:
            return
        width = max(len(row) for row in texts)
        if width == 1:  # one column: a list of lines, not a table
            self.emit("paragraph", "\n".join(row[0] for row in texts if row[0]))
            return
        lines = [_row(row, width) for row in texts]
        lines.insert(1, _row(["---"] * width, width))
        caption = element.find("caption")
        if caption is not None and (title := _inline(caption)):
            self.emit("paragraph", title)
        self.emit("table", "\n".join(lines))


def _row(cells: list[str], width: int) -> str:
    return "| " + " | ".join(cells + [""] * (width - len(cells))) + " |"


def _table_of(row: HtmlElement) -> HtmlElement | None:
    for ancestor in row.iterancestors("table"):
        return ancestor
    return None


def _start(element: HtmlElement) -> int:
    try:
        return int(element.get("start", "1"))
    except ValueError:
        return 1


def _is_code_fragment(element: HtmlElement) -> bool:
    """Doxygen's code listings: `<div class="fragment">` of `<div class="line">`s."""
    return element.tag == "div" and "fragment" in (element.get("class") or "").split()


_PartKind = Literal["text", "list", "code", "table"]


def _item_parts(item: HtmlElement) -> Iterator[tuple[_PartKind, str]]:
    """An item's content as ("text", lines), ("list", nested list lines), ("code", fenced
    block) and ("table", pipe table), in order."""
    pending: list[str] = [item.text or ""]
    for child in item:
        if not isinstance(child.tag, str) or is_chrome(child):
            pending.append(child.tail or "")
            continue
        tag = child.tag
        if tag in BLOCK_TAGS or _is_code_fragment(child):
            if text := _joined(pending):
                yield "text", text
            pending = []
            yield from _block_part(child)
        elif tag == "br":
            pending.append(BREAK)
        else:
            pending.append("".join(_texts(child, keep_tail=False)))
        pending.append(child.tail or "")
    if text := _joined(pending):
        yield "text", text


def _block_part(child: HtmlElement) -> Iterable[tuple[_PartKind, str]]:
    tag = child.tag
    if tag in PREFORMATTED or _is_code_fragment(child):
        nested = _Converter()
        nested.block(child)
        return [("code", s.text) for s in nested.sections]
    if tag in LISTS or tag == "dl" or tag == "table":
        nested = _Converter()
        nested.block(child)
        parts: list[tuple[_PartKind, str]] = []
        for section in nested.sections:
            if section.kind == "list":
                parts.append(("list", _indented(section.text)))
            elif section.kind == "code" or section.kind == "table":
                parts.append((section.kind, section.text))
            else:
                parts.append(("text", section.text))
        return parts
    if tag in HEADINGS:
        return [("text", _inline(child))] if _inline(child) else []
    if _has_blocks(child):  # a <div> or <p> that holds blocks: its parts, in order
        return list(_item_parts(child))
    text = _inline_lines(child)
    return [("text", text)] if text else []


def _indented(lines: str) -> str:
    return "\n".join("  " + line for line in lines.split("\n"))


def _joined(pieces: list[str]) -> str:
    return _lines("".join(pieces))


COUNTED_BLOCKS = frozenset({"p", "li", "dt", "dd", "td", "th", "pre", *HEADINGS})
MIN_BLOCK_CHARS = 25
"""Shorter blocks (menu entries, labels, "Note") are not counted by `content_blocks`."""


def content_blocks(region: HtmlElement) -> list[str]:
    """The texts of the region's paragraphs, list items, definition terms and descriptions,
    table cells, code blocks and headings, whitespace collapsed, in document order; each
    without the text of the blocks nested in it (a block's text interrupted by a nested block
    counts as its runs before and after it), those of at least MIN_BLOCK_CHARS characters.
    A block whose text is mostly link text (a menu entry, a table of contents' line, "Next:
    ..., Previous: ...") navigates: it is not counted."""
    blocks = []
    for element in region.iter(*COUNTED_BLOCKS):
        if any(is_chrome(e) for e in (element, *element.iterancestors())) or _mostly_links(element):
            continue
        for run in _own_runs(element):
            text = " ".join(run.replace(BREAK, " ").split())
            if len(text) >= MIN_BLOCK_CHARS:
                blocks.append(text)
    return blocks


def _own_runs(element: HtmlElement) -> list[str]:
    runs = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and not is_chrome(child):
            if child.tag in BLOCK_TAGS or _is_code_fragment(child):
                runs.append("")
            else:
                runs[-1] += "".join(_texts(child, keep_tail=False))
        runs[-1] += child.tail or ""
    return runs


NAVIGATION_WORDS = frozenset(
    {
        "see", "also", "and", "or", "the", "in", "to", "go", "back", "top", "up", "home",
        "next", "previous", "prev", "more", "related", "index", "contents",
    }
)  # fmt: skip
"""The only words a navigating paragraph holds outside its links."""
_LINK_SEPARATOR = re.compile(r"[\s,;|·•/»«]")


def navigates(element: HtmlElement) -> bool:
    """Whether a paragraph only points to other pages: mostly link text (`_mostly_links`),
    nothing outside its links but punctuation and NAVIGATION_WORDS, and either two links or
    more, each apart from the next (a space or a separator between them: "Optional[Token]" is
    one expression, not two links), or one link after such a word ("See X.").

    Measured on bench/fidelity's 88 pages, this leaves out SEE ALSO lines of page names, "See
    Section 6.5, ..." lines and bars of links, and no sentence, term or signature."""
    if not _mostly_links(element):
        return False
    runs: list[tuple[bool, str]] = []  # the text in order, (is it link text, the text)
    for linked, text in _link_runs(element, linked=False):
        if runs and runs[-1][0] == linked:
            runs[-1] = (linked, runs[-1][1] + text)
        else:
            runs.append((linked, text))
    links = sum(linked and bool(text.strip()) for linked, text in runs)
    words = [w.lower() for linked, text in runs if not linked for w in re.findall(r"\w+", text)]
    if not NAVIGATION_WORDS.issuperset(words):
        return False
    between = [text for i, (linked, text) in enumerate(runs[1:-1], 1) if not linked]
    if not all(_LINK_SEPARATOR.search(text) for text in between):
        return False
    return links >= 2 or (links == 1 and bool(words))


def _link_runs(element: HtmlElement, *, linked: bool) -> Iterator[tuple[bool, str]]:
    """The element's text (without its tail) in runs, each with whether it is link text."""
    linked = linked or (element.tag == "a" and element.get("href") is not None)
    if is_chrome(element):
        return
    if element.text:
        yield linked, element.text
    for child in element:
        yield from _link_runs(child, linked=linked)
        if child.tail:
            yield linked, child.tail


def _mostly_links(element: HtmlElement) -> bool:
    """Whether at least half of the element's text is link text."""
    text = len(_inline(element))
    linked = sum(len(_inline(link)) for link in element.iter("a"))
    return text > 0 and linked >= text / 2

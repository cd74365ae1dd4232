"""Fidelity benchmark: how much of a documentation page's main content the stored text keeps.

For real documentation HTML from several generators, shipped by Debian packages (installed by
this script, see PACKAGES), each page's main-content blocks are counted: paragraphs, list
items, definition terms and descriptions, table cells, code blocks and headings of at least 25
characters, each without the text of the blocks nested in it. The main-content region and what
may go (navigation, headers, footers, tables of contents) are chosen per generator below,
independently of the extractor. A block is kept when its text is in the stored text, both
with whitespace collapsed and markdown's backslash escapes, `*` and backticks removed (so that
markup is not counted as loss here; escapes are counted apart).

Extractors, run on the same pages in the same run:
- before: the extraction before issue 17 (trafilatura, markdown, formatting kept);
- trafilatura_recall: trafilatura tuned for recall (favor_recall);
- after: `read_html` as it is now (structural conversion, guarded);
- after_boilerplate: `read_html`, then blocks repeated across the generator's pages (taken as
  one site, in order, as a crawl reads them, re-decided at the end) left out.

Malformed shapes (issue 28, point 3): real pages sent as servers send them malformed (a CGI
header before the doctype, no html/head/body tags, unclosed tags, a byte order mark, a wrongly
declared charset, uppercase tags, XHTML as text/html); their blocks are counted on the page as
generated, the extractors read the malformed bytes (`SHAPES`).

Run: .venv/bin/python bench/fidelity/run.py   (writes results.json and results.md here)
"""

import gzip
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from lxml import html as lxml_html
from trafilatura import extract
from trafilatura.utils import load_html

from agentic_rag.knowledge.documents import SECTION_SEPARATOR, Section
from agentic_rag.knowledge.sources.boilerplate import (
    SiteCounts,
    block_key,
    page_keys,
    without_boilerplate,
)
from agentic_rag.knowledge.sources.html_page import parse_html, read_html
from agentic_rag.knowledge.sources.markdown import markdown_sections

HERE = Path(__file__).parent
PACKAGES = [
    "sqlite3-doc", "git-doc", "lynx-common", "debian-reference-en", "diffutils-doc",
    "man2html-base", "coreutils", "python-jinja2-doc", "libjsoncpp-doc",
    "libjsoup-java-doc", "mkdocs-doc",
]  # fmt: skip
MIN_CHARS = 25
BLOCKS = ["p", "li", "dt", "dd", "td", "th", "pre", "h1", "h2", "h3", "h4", "h5", "h6"]
NESTED = {"ul", "ol", "dl", "table", "div", "tr", "tbody", "thead", "blockquote", "section",
          *BLOCKS}  # fmt: skip


@dataclass(frozen=True)
class Generator:
    name: str
    package: str
    pages: list[str]
    region: str
    """XPath of the main-content region."""
    may_go: str = ""
    """XPath (relative to the region) of what may be left out: navigation, headers, footers."""
    man_pages: bool = False
    """`pages` are man pages, converted by man2html."""
    shape: Callable[[bytes], bytes] | None = None
    """Makes a page malformed: blocks are counted on the page, extractors read it shaped."""


SQLITE = "/usr/share/doc/sqlite3/"
GIT = "/usr/share/doc/git-doc/"
LYNX = "/usr/share/doc/lynx-common/lynx_help/"
DEBREF = "/usr/share/debian-reference/"
DIFF = "/usr/share/doc/diffutils/"
JINJA = "/usr/share/doc/python-jinja2-doc/html/"
JSONCPP = "/usr/share/doc/libjsoncpp-doc/"
JSOUP = "/usr/share/doc/libjsoup-java/api/org/jsoup/"
MKDOCS = "/usr/share/doc/mkdocs/html/"
MAN1 = "/usr/share/man/man1/"
GENERATORS = [
    Generator(
        "SQLite (its own generator)", "sqlite3-doc",
        [SQLITE + p + ".html" for p in ("wal", "foreignkeys", "lang_transaction", "quirks",
         "limits", "datatype3", "lang_createtable", "atomiccommit", "isolation", "lang_upsert")],
        "//body",
        ".//div[contains(@class,'nosearch')] | .//div[contains(@class,'fancy_toc')]"
        " | .//p[contains(., 'This page last modified')]",
    ),
    Generator(
        "git (AsciiDoc)", "git-doc",
        [GIT + p + ".html" for p in ("git-add", "git-commit", "git-stash", "git-branch",
         "git-remote", "gitignore", "gittutorial", "git-tag", "git-reset", "git-clone")],
        "//body", ".//div[@id='footer'] | .//div[@id='toc']",
    ),
    Generator(
        "Lynx help (hand-written HTML 4)", "lynx-common",
        [LYNX + p + ".html.gz" for p in ("about_lynx", "lynx_url_support", "lynx-dev",
         "keystrokes/edit_help", "keystrokes/option_help", "keystrokes/cookie_help",
         "keystrokes/keystroke_help", "keystrokes/movement_help", "keystrokes/follow_help",
         "keystrokes/environments", "keystrokes/bookmark_help", "keystrokes/print_help")],
        "//body", ".//div[@class='nav']",
    ),
    Generator(
        "Debian Reference (DocBook XSL)", "debian-reference-en",
        [DEBREF + p + ".en.html" for p in ("ch01", "ch05", "ch10")],
        "//body",
        ".//div[@class='navheader'] | .//div[@class='navfooter'] | .//div[@class='toc']",
    ),
    Generator(
        "diffutils (Texinfo makeinfo)", "diffutils-doc",
        [DIFF + p + ".html" for p in ("Comparing-Directories", "Hunks", "Unified-Format",
         "diff-Options", "Incomplete-Lines", "Binary", "Blank-Lines", "Overview",
         "patch-Options", "Merging-with-patch", "sdiff-Option-Summary", "Tabs")],
        "//body",
        ".//div[contains(@class,'nav-panel')] | .//div[contains(@class,'header')]"
        " | .//div[contains(@class,'contents')]",
    ),
    Generator(
        "man pages (man2html)", "man2html-base",
        [MAN1 + p + ".1.gz" for p in ("ls", "cp", "sort", "date", "find", "tar", "cut",
         "stat")],
        "//body", ".//a[@href='#index']/.. | .//h2[.='Index']/following-sibling::*",
        man_pages=True,
    ),
    Generator(
        "Jinja (Sphinx)", "python-jinja2-doc",
        [JINJA + p + ".html" for p in ("intro", "faq", "extensions", "sandbox",
         "nativetypes", "switching", "tricks", "integration", "api")],
        "//div[@role='main']",
    ),
    Generator(
        "JsonCpp (Doxygen)", "libjsoncpp-doc",
        [JSONCPP + p + ".html" for p in ("class_json_1_1_value", "class_json_1_1_reader",
         "class_json_1_1_char_reader_builder", "class_json_1_1_stream_writer_builder",
         "class_json_1_1_path", "class_json_1_1_fast_writer", "namespace_json",
         "class_json_1_1_features")],
        "//div[@class='contents']",
    ),
    Generator(
        "jsoup (javadoc)", "libjsoup-java-doc",
        [JSOUP + p + ".html" for p in ("Jsoup", "Connection", "nodes/Document",
         "nodes/Node", "select/Elements", "safety/Safelist", "parser/Parser")],
        "//main",
    ),
    Generator(
        "MkDocs (Markdown site)", "mkdocs-doc",
        [MKDOCS + p + ".html" for p in ("index", "user-guide/writing-your-docs",
         "user-guide/configuration", "user-guide/deploying-your-docs",
         "user-guide/choosing-your-theme", "user-guide/localizing-your-theme",
         "dev-guide/themes", "dev-guide/plugins", "about/contributing")],
        "//div[@role='main']",
    ),
]  # fmt: skip


_TAG = re.compile(rb"<(/?)([a-zA-Z][a-zA-Z0-9]*)")
_DOCUMENT_TAGS = re.compile(rb"</?(?:html|head|body)\b[^>]*>", re.I)
_OPTIONAL_END_TAGS = re.compile(rb"</(?:p|li|dt|dd|td|th|tr|option)\s*>", re.I)
_CHARSET = re.compile(rb"<meta[^>]*charset[^>]*>", re.I)
_VOID = re.compile(rb"<(br|hr|img|meta|link|input)\b([^>]*?)/?>", re.I)


def _xhtml(page: bytes) -> bytes:
    page = _VOID.sub(rb"<\1\2 />", page)
    page = re.sub(rb"<html\b", b'<html xmlns="http://www.w3.org/1999/xhtml"', page, count=1)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + page


SHAPES: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "CGI header before the doctype": ("man pages (man2html)",
                                      lambda page: b"Content-type: text/html\n\n" + page),
    "no html, head or body tags": ("SQLite (its own generator)",
                                   lambda page: _DOCUMENT_TAGS.sub(b"", page)),
    "end tags left out": ("git (AsciiDoc)", lambda page: _OPTIONAL_END_TAGS.sub(b"", page)),
    "byte order mark": ("Jinja (Sphinx)", lambda page: b"\xef\xbb\xbf" + page),
    "UTF-8 declared ISO-8859-1": ("Debian Reference (DocBook XSL)", lambda page: _CHARSET.sub(
        b'<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">', page)),
    "uppercase tags": ("diffutils (Texinfo makeinfo)",
                       lambda page: _TAG.sub(lambda m: b"<" + m[1] + m[2].upper(), page)),
    "XHTML as text/html": ("Lynx help (hand-written HTML 4)", _xhtml),
}  # fmt: skip
"""Each malformed shape, the generator whose pages it is applied to, and how."""


def malformed() -> list[Generator]:
    bases = {generator.name: generator for generator in GENERATORS}
    return [replace(bases[base], name=f"malformed: {label}", shape=shape)
            for label, (base, shape) in SHAPES.items()]  # fmt: skip


def ensure_packages() -> None:
    missing = [p for p in PACKAGES if subprocess.run(
        ["dpkg", "-s", p], capture_output=True).returncode != 0]  # fmt: skip
    if missing:
        print("installing", " ".join(missing), file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def page_html(generator: Generator, path: str) -> bytes:
    raw = (
        gzip.decompress(Path(path).read_bytes())
        if path.endswith(".gz")
        else Path(path).read_bytes()
    )
    if generator.man_pages:
        converted = subprocess.run(["man2html", "-r"], input=raw, capture_output=True,
                                   check=True).stdout  # fmt: skip
        return converted.split(b"\n\n", 1)[1]  # after its CGI header
    return raw


def content_blocks(generator: Generator, body: bytes) -> list[tuple[str, ...]]:
    tree = parse_html(body)  # the blocks a browser builds (HTML5 rules)
    regions = tree.xpath(generator.region)
    if not regions:
        raise ValueError(f"no {generator.region} in the page")
    region = regions[0]
    for element in region.xpath(generator.may_go) if generator.may_go else []:
        element.drop_tree()
    # Not page text: scripts, styles, headings' permalink glyphs (Sphinx's "¶", Doxygen's "◆"),
    # form controls.
    not_text = (
        ".//script | .//style | .//a[@class='headerlink'] | .//span[@class='permalink']"
        " | .//textarea | .//button"
    )
    for element in region.xpath(not_text):
        element.drop_tree()
    for line_break in region.iter("br"):  # text_content() would glue the lines together
        line_break.tail = " " + (line_break.tail or "")
    blocks = []
    for element in region.iter(*BLOCKS):
        runs = tuple(r for r in (normalise(run) for run in own_text(element)) if r)
        if len(" ".join(runs)) >= MIN_CHARS:
            blocks.append(runs)
    return blocks


def own_text(element: lxml_html.HtmlElement) -> list[str]:
    """The element's text without that of the blocks nested in it, as the runs between them."""
    runs = [element.text or ""]
    for child in element:
        if not isinstance(child.tag, str):
            pass
        elif child.tag in NESTED:
            runs.append("")
        else:
            runs[-1] += child.text_content() if child.tag != "br" else " "
        runs[-1] += child.tail or ""
    return runs


_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def normalise(text: str) -> str:
    text = _ESCAPE.sub(r"\1", text).replace("*", "").replace("`", "")
    return " ".join(text.split())


def before(body: bytes, url: str) -> list[Section]:
    markdown = extract(load_html(body), url=url, output_format="markdown",
                       include_formatting=True, include_tables=True, include_comments=False,
                       include_links=False, include_images=False,
                       prune_xpath="//noscript")  # fmt: skip
    # What was stored then: markdown_sections did not read escapes before issue 17.
    prose = re.sub(r"^```.*?^```", "", markdown or "", flags=re.M | re.S)
    RAW_ESCAPES.append(len(_ESCAPES_IN_TEXT.findall(prose)))
    return markdown_sections(markdown or "")


RAW_ESCAPES: list[int] = []
"""The backslash escapes in the text `before` gave each page, in order."""


def trafilatura_recall(body: bytes, url: str) -> list[Section]:
    markdown = extract(load_html(body), url=url, output_format="markdown", favor_recall=True,
                       include_formatting=False, include_tables=True, include_comments=False,
                       include_links=False, include_images=False,
                       prune_xpath="//noscript")  # fmt: skip
    return markdown_sections(markdown or "")


def after(body: bytes, url: str) -> list[Section]:
    document = read_html(body, url).document
    READINGS.append(document.metadata["extraction"])
    return document.sections


READINGS: list[dict[str, object]] = []
"""How `read_html` read each page (its coverage estimate and method), in order."""


EXTRACTORS: dict[str, Callable[[bytes, str], list[Section]]] = {
    "before": before,
    "trafilatura_recall": trafilatura_recall,
    "after": after,
}
_ESCAPES_IN_TEXT = re.compile(r"\\[!-/:-@\[-`{-~]")


@dataclass
class Tally:
    blocks: int = 0
    kept: int = 0
    escapes: int = 0
    headings: int = 0
    seconds: float = 0.0
    missing: list[str] = field(default_factory=list)

    def add(self, blocks: list[tuple[str, ...]], sections: list[Section], seconds: float) -> None:
        text = SECTION_SEPARATOR.join(s.text for s in sections)
        haystack = normalise(text)
        self.blocks += len(blocks)
        for runs in blocks:
            if all(run in haystack for run in runs):
                self.kept += 1
            elif len(self.missing) < 10:
                self.missing.append(" / ".join(runs)[:160])
        prose = "\n".join(s.text for s in sections if s.kind != "code")
        self.escapes += len(_ESCAPES_IN_TEXT.findall(prose))
        self.headings += sum(s.kind == "heading" for s in sections)
        self.seconds += seconds

    def summary(self) -> dict[str, object]:
        return {
            "blocks": self.blocks,
            "kept": self.kept,
            "share": round(self.kept / self.blocks, 4) if self.blocks else 1.0,
            "backslash_escapes": self.escapes,
            "heading_sections": self.headings,
            "seconds": round(self.seconds, 2),
            "missing_examples": self.missing,
        }


def without_site_boilerplate(pages: list[list[Section]]) -> tuple[list[list[Section]], list[str]]:
    """The pages as a crawl of one site stores them, after its final re-decision."""
    holders: dict[bytes, set[int]] = {}
    for index, sections in enumerate(pages):
        for key in page_keys(sections):
            holders.setdefault(key, set()).add(index)
    counts = SiteCounts({key: len(h) for key, h in holders.items()}, len(pages))
    repeated = counts.repeated()
    examples = {key: " ".join(s.text.split())[:80] for p in reversed(pages) for s in p
                if (key := block_key(s)) in repeated}  # fmt: skip
    return [without_boilerplate(p, repeated)[0] for p in pages], sorted(examples.values())


def main() -> None:
    ensure_packages()
    started = time.perf_counter()
    results: dict[str, object] = {}
    for generator in [*GENERATORS, *malformed()]:
        tallies = {name: Tally() for name in [*EXTRACTORS, "after_boilerplate"]}
        READINGS.clear()
        RAW_ESCAPES.clear()
        read: list[tuple[list[tuple[str, ...]], list[Section]]] = []
        for path in generator.pages:
            page = page_html(generator, path)
            body = generator.shape(page) if generator.shape else page
            url = "https://docs.example/" + Path(path).name.removesuffix(".gz")
            blocks = content_blocks(generator, page)
            for name, extractor in EXTRACTORS.items():
                start = time.perf_counter()
                sections = extractor(body, url)
                tallies[name].add(blocks, sections, time.perf_counter() - start)
                if name == "after":
                    read.append((blocks, sections))
        pages, repeated = without_site_boilerplate([sections for _, sections in read])
        for (blocks, _), sections in zip(read, pages, strict=True):
            tallies["after_boilerplate"].add(blocks, sections, 0.0)
        results[generator.name] = {
            "package": generator.package,
            "pages": [Path(p).name for p in generator.pages],
            "region": generator.region,
            "may_go": generator.may_go,
            "boilerplate_blocks": repeated,
            "readings": list(READINGS),
            "before_escapes_as_stored": sum(RAW_ESCAPES),
            **{name: tally.summary() for name, tally in tallies.items()},
        }
        shares = {n: t.summary()["share"] for n, t in tallies.items()}
        print(generator.name, shares, file=sys.stderr)
    seconds = round(time.perf_counter() - started, 1)
    (HERE / "results.json").write_text(
        json.dumps({"seconds": seconds, "generators": results}, indent=2, ensure_ascii=False) + "\n"
    )
    (HERE / "results.md").write_text(report(results, seconds))


def report(results: dict[str, object], seconds: float) -> str:
    names = [*EXTRACTORS, "after_boilerplate"]
    lines = [
        "# Fidelity benchmark results",
        "",
        "Share of main-content blocks (>= 25 characters) found in the stored text, per "
        f"generator; one run of bench/fidelity/run.py ({seconds} s). Target: >= 99% on every "
        "generator. `escapes`: backslash-punctuation pairs in the stored text outside code "
        "blocks (after: as written in the page). `coverage estimate`: what `read_html` reports "
        "for a page (its text blocks, counted on the whole page, found in its text); below "
        "80% the whole page is read instead (a fallback).",
        "",
        "| generator | pages | blocks | " + " | ".join(names) + " | escapes before / after "
        "| lowest coverage estimate | whole-page fallbacks |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in names) + " | ---: | ---: | ---: |",
    ]
    for name, result in results.items():
        assert isinstance(result, dict)
        cells = [f"{result[n]['share']:.1%}" for n in names]
        lines.append(
            f"| {name} | {len(result['pages'])} | {result['after']['blocks']} | "
            + " | ".join(cells)
            + f" | {result['before_escapes_as_stored']} / "
            f"{result['after']['backslash_escapes']}"
            f" | {min(r['coverage'] for r in result['readings']):.1%}"
            f" | {sum(r['method'] != 'main content' for r in result['readings'])} |"
        )
    lines += ["", "Blocks found repeated across a generator's pages (left out as boilerplate):", ""]
    for name, result in results.items():
        assert isinstance(result, dict)
        for text in result["boilerplate_blocks"]:
            lines.append(f"- {name}: {text}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

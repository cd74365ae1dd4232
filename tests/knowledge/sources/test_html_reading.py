"""How a web page is read: structure kept, text clean, coverage reported.

The pages are real documentation from Debian packages (tests/data/html/README.md says which
and under what licence); bench/fidelity measures the same on many more pages.
"""

import re
from pathlib import Path

from lxml import html as lxml_html

from agentic_rag.knowledge.documents import Section
from agentic_rag.knowledge.sources.html_page import read_html
from agentic_rag.knowledge.sources.markdown import markdown_sections

PAGES = Path(__file__).resolve().parents[2] / "data" / "html"
ESCAPE = re.compile(r"\\[!-/:-@\[-`{-~]")


def read(name: str, url: str = "https://docs.example/") -> list[Section]:
    return read_html((PAGES / name).read_bytes(), url + name).document.sections


def kinds(sections: list[Section], kind: str) -> list[Section]:
    return [s for s in sections if s.kind == kind]


def test_headings_become_headings_and_paths() -> None:
    sections = read("sqlite-wal.html")
    page = (PAGES / "sqlite-wal.html").read_text()
    headings = [s.text for s in kinds(sections, "heading")]
    assert len(headings) == len(re.findall(r"<h[1-6][ >]", page)) == 16
    assert headings[:3] == ["1. Overview", "2. How WAL Works", "2.1. Checkpointing"]
    under = next(s for s in sections if s.text.startswith("Of course, one wants to eventually"))
    assert under.heading_path == ("2. How WAL Works", "2.1. Checkpointing")
    # Everything after the first heading sits under one.
    first = sections.index(kinds(sections, "heading")[0])
    assert all(s.heading_path for s in sections[first:])


def test_lists_keep_their_items_and_markers() -> None:
    sections = read("sqlite-wal.html")
    advantages = next(s for s in kinds(sections, "list") if "significantly faster" in s.text)
    lines = advantages.text.split("\n")
    assert lines[0] == "1. WAL is significantly faster in most scenarios."
    assert [line.split(" ", 1)[0] for line in lines if not line.startswith(" ")] == [
        f"{n}." for n in range(1, 5)
    ]
    assert advantages.heading_path == ("1. Overview",)
    # The sentence that introduces the list is followed by it, not by the next sentence.
    texts = [s.text for s in sections]
    assert texts[texts.index(advantages.text) - 1].endswith("Advantages include:")


def test_definition_lists_keep_terms_with_their_descriptions() -> None:
    sections = read("git-add.html")
    options = [s for s in kinds(sections, "list") if s.heading_path[-1:] == ("OPTIONS",)]
    text = "\n".join(s.text for s in options)
    assert "- -n\n- --dry-run\n  Don\u2019t actually add the file(s)" in text
    assert "- --all\n- --no-ignore-removal\n  Update the index" in text


def test_tables_become_pipe_tables() -> None:
    table = kinds(read("sqlite-datatype3.html"), "table")[0].text.split("\n")
    assert table[0].startswith("| Example Typenames From The CREATE TABLE Statement")
    assert table[1] == "| --- | --- | --- |"
    assert "| BLOB no datatype specified | BLOB | 3 |" in table


def test_preformatted_text_stays_code_and_never_becomes_a_heading() -> None:
    sections = read("sqlite-foreignkeys.html")
    code = kinds(sections, "code")
    session = next(s for s in code if "sqlite> SELECT * FROM artist;" in s.text)
    assert session.text.startswith("```\n") and session.text.endswith("\n```")
    # The headings are the page's <h1>-<h6>, and only those.
    page = lxml_html.fromstring((PAGES / "sqlite-foreignkeys.html").read_bytes())
    titles = [" ".join(h.text_content().split()) for h in page.iter("h1", "h2", "h3", "h4")]
    assert [s.text for s in kinds(sections, "heading")] == titles
    # No code line ended up in prose either.
    prose = [s.text for s in sections if s.kind != "code"]
    assert not any("sqlite> SELECT * FROM artist;" in text for text in prose)


def test_stored_text_has_no_backslash_escapes_and_no_inline_markup() -> None:
    for name in ("sqlite-foreignkeys.html", "sqlite-wal.html", "git-add.html"):
        sections = read(name)
        prose = "\n".join(s.text for s in sections if s.kind != "code")
        assert ESCAPE.findall(prose) == [], name
        assert "**" not in prose and "`" not in prose, name
    foreign = "\n".join(s.text for s in read("sqlite-foreignkeys.html"))
    assert "PRAGMA foreign_keys = ON;" in foreign
    synopsis = kinds(read("git-add.html"), "code")[0].text
    assert "[--[no-]all | --[no-]ignore-removal | [--update | -u]]" in synopsis


def test_markdown_escapes_are_read_outside_code() -> None:
    sections = markdown_sections(
        "# PRAGMA foreign\\_keys\n\n"
        "Call sqlite3\\_limit(db,SQLITE\\_LIMIT\\_ATTACHED,size); see `a\\_b`.\n\n"
        "```\nprintf '\\_'\n```"
    )
    assert [s.text for s in sections] == [
        "PRAGMA foreign_keys",
        "Call sqlite3_limit(db,SQLITE_LIMIT_ATTACHED,size); see `a\\_b`.",
        "```\nprintf '\\_'\n```",
    ]


def test_the_first_paragraph_under_the_title_is_kept() -> None:
    sections = read("lynx-url_support.html")
    title = kinds(sections, "heading")[0]
    assert title.text == "URL Schemes Supported in Lynx"
    first = sections[sections.index(title) + 1]
    assert first.text.startswith("Lynx handles a number of URL types, that are enumerated below.")
    assert first.heading_path == ("URL Schemes Supported in Lynx",)


def test_every_page_reports_its_coverage() -> None:
    for name in sorted(p.name for p in PAGES.glob("*.html")):
        document = read_html((PAGES / name).read_bytes(), "https://docs.example/" + name).document
        extraction = document.metadata["extraction"]
        assert extraction["method"] == "main content", name
        assert extraction["coverage"] == 1.0 and extraction["blocks"] > 10, name
        assert document.notes == [
            f"main content read (100.0% of its {extraction['blocks']} text blocks kept)"
        ]


def test_a_main_region_that_misses_most_of_the_page_falls_back_to_the_whole_page() -> None:
    paragraphs = [
        f"Paragraph {n} of the article explains one more thing in detail." for n in range(6)
    ]
    page = (
        "<html><head><title>Odd page</title></head><body>"
        "<nav><a href='/'>Home of the site with a long link text</a></nav>"
        "<main><p>Only a teaser paragraph sits inside the main element here.</p></main>"
        f"<div class='content'>{''.join(f'<p>{p}</p>' for p in paragraphs)}</div>"
        "</body></html>"
    )
    document = read_html(page, "https://docs.example/odd").document
    assert all(p in document.text for p in paragraphs)
    assert "Home of the site" not in document.text  # <nav> still goes
    assert document.metadata["extraction"] == {
        "method": "whole page",
        "coverage": 1.0,
        "blocks": 7,
    }
    assert document.notes == [
        "read as a whole page (100.0% of its 7 text blocks kept): its main content alone kept 14.3%"
    ]


def test_nested_lists_and_code_inside_items_keep_their_shape() -> None:
    page = (
        "<html><body><main><h1>Install</h1><ol>"
        "<li>Download the archive from the release page.<ul>"
        "<li>Check its signature first.</li></ul></li>"
        "<li>Unpack it:<pre>tar xf release.tar.gz\n```not a fence```\n```</pre></li>"
        "<li>Run the installer.</li></ol></main></body></html>"
    )
    sections = read_html(page, "https://docs.example/install").document.sections
    assert [(s.kind, s.text) for s in sections] == [
        ("heading", "Install"),
        (
            "list",
            "1. Download the archive from the release page.\n"
            "  - Check its signature first.\n"
            "2. Unpack it:",
        ),
        ("code", "````\ntar xf release.tar.gz\n```not a fence```\n```\n````"),
        ("list", "3. Run the installer."),
    ]
    assert all(s.heading_path == ("Install",) for s in sections)


def test_the_title_carries_no_permalink_glyph() -> None:
    """Sphinx ends every heading with a "¶" link; trafilatura takes the page's title from the
    first heading, glyph included, and a title is shown beside every hit."""
    page = (
        "<html><head><title>functools \u2014 Python 3.11 documentation</title></head><body>"
        '<div class="body" role="main"><section id="functools">'
        '<h1>functools \u2014 Higher-order functions<a class="headerlink" href="#functools">'
        "\u00b6</a></h1><p>The functools module is for higher-order functions: functions that "
        "act on or return other functions.</p></section></div></body></html>"
    )
    document = read_html(page, "https://docs.example/functools.html").document
    assert document.title == "functools \u2014 Higher-order functions"
    assert [s.text for s in document.sections if s.kind == "heading"] == [document.title]


def test_a_paragraph_that_only_links_to_other_pages_is_left_out() -> None:
    """Issue 33, point 3: "See Calming bees with smoke and Preparing hives for winter." names
    other pages, so as a passage it ranked for their subjects and was quoted as a source.
    A paragraph of links and navigation words goes; sentences, terms and type expressions made
    of links, and lists of links, stay."""
    page = (
        "<html><head><title>Harvesting honey</title></head><body><main>"
        "<h1>Harvesting honey</h1><p>Spin the capped frames in an extractor.</p>"
        "<p>See <a href='/smoke'>Calming bees with smoke</a> and "
        "<a href='/winter'>Preparing hives for winter</a>.</p>"
        "<p>[ <a href='/archive'>Archive</a> | <a href='/about'>About</a> ]</p>"
        "<p>Next: <a href='/swarms'>Catching swarms</a></p>"
        "<p><a href='/api#f'>pass_environment()</a> passes the "
        "<a href='/api#e'>Environment</a>.</p>"
        "<p><a href='/typing#o'>Optional</a>[<a href='/api#t'>Token</a>]</p>"
        "<p><a href='/glossary#comb'>Drawn comb</a></p>"
        "<p>The <a href='/faq'>FAQ</a> says when to harvest.</p>"
        "<ul><li><a href='/smoke'>Calming bees with smoke</a></li>"
        "<li><a href='/winter'>Preparing hives for winter</a></li></ul>"
        "</main></body></html>"
    )
    sections = read_html(page, "https://bees.example/").document.sections
    assert [s.text for s in sections] == [
        "Harvesting honey",
        "Spin the capped frames in an extractor.",
        "pass_environment() passes the Environment.",
        "Optional[Token]",
        "Drawn comb",
        "The FAQ says when to harvest.",
        "- Calming bees with smoke\n- Preparing hives for winter",
    ]
    # Real pages: git's SEE ALSO line of page names and Lynx's bar of links go, the rest stays.
    git = "\n".join(s.text for s in read("git-add.html"))
    assert "git-status(1) git-rm(1)" not in git and "Don\u2019t actually add the file(s)" in git
    lynx = "\n".join(s.text for s in read("lynx-url_support.html"))
    assert "telnet, tn3270, rlogin" not in lynx and "Lynx handles a number of URL types" in lynx

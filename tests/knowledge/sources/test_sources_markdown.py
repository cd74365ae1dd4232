"""Markdown and plain text -> sections with heading paths (sources/markdown.py)."""

import pytest

from agentic_rag.knowledge.documents import Section
from agentic_rag.knowledge.sources.markdown import (
    code_spans,
    is_delimiter_row,
    markdown_sections,
    unescaped,
)

GUIDE = """\
# Guide

Intro paragraph,
on two lines.

## Install

- one
- two
  continued

1. first
2. second

```python
# not a heading
print("hi")
```

### Options

| name | default |
|------|--------:|
| depth | 1 |
| pages | 50 |

Text after the table.

## Use

Final words. #not-a-heading
"""


def test_headings_paragraphs_lists_code_and_tables() -> None:
    sections = markdown_sections(GUIDE)
    assert [(s.kind, s.heading_path, s.text) for s in sections] == [
        ("heading", ("Guide",), "Guide"),
        ("paragraph", ("Guide",), "Intro paragraph,\non two lines."),
        ("heading", ("Guide", "Install"), "Install"),
        ("list", ("Guide", "Install"), "- one\n- two\n  continued\n\n1. first\n2. second"),
        ("code", ("Guide", "Install"), '```python\n# not a heading\nprint("hi")\n```'),
        ("heading", ("Guide", "Install", "Options"), "Options"),
        (
            "table",
            ("Guide", "Install", "Options"),
            "| name | default |\n|------|--------:|\n| depth | 1 |\n| pages | 50 |",
        ),
        ("paragraph", ("Guide", "Install", "Options"), "Text after the table."),
        ("heading", ("Guide", "Use"), "Use"),
        ("paragraph", ("Guide", "Use"), "Final words. #not-a-heading"),
    ]


def test_setext_headings_and_closing_hashes() -> None:
    text = "Title\n=====\n\nBody.\n\nPart two\n--------\n\n### Deep ###\n\nMore."
    sections = markdown_sections(text)
    assert [(s.kind, s.heading_path) for s in sections] == [
        ("heading", ("Title",)),
        ("paragraph", ("Title",)),
        ("heading", ("Title", "Part two")),
        ("heading", ("Title", "Part two", "Deep")),
        ("paragraph", ("Title", "Part two", "Deep")),
    ]
    assert sections[3].text == "Deep"


def test_a_heading_closes_deeper_headings() -> None:
    text = "# A\n## B\n### C\ntext c\n## D\ntext d\n# E\ntext e"
    paths = [s.heading_path for s in markdown_sections(text) if s.kind == "paragraph"]
    assert paths == [("A", "B", "C"), ("A", "D"), ("E",)]


def test_plain_text_is_paragraphs_and_crlf_is_normalized() -> None:
    text = "First paragraph.\r\nStill first.\r\n\r\n\r\nSecond one.\r\n"
    assert markdown_sections(text) == [
        Section("First paragraph.\nStill first."),
        Section("Second one."),
    ]


def test_an_unclosed_fence_runs_to_the_end() -> None:
    sections = markdown_sections("Before.\n\n~~~\ncode\n\n# still code")
    assert [s.kind for s in sections] == ["paragraph", "code"]
    assert sections[1].text == "~~~\ncode\n\n# still code"
    assert sections[1].heading_path == ()


def test_a_table_header_ends_a_paragraph_and_rules_are_dropped() -> None:
    text = "Some text\n| a | b |\n| - | - |\n| 1 | 2 |\n\n***\n\nAfter."
    sections = markdown_sections(text)
    assert [(s.kind, s.text) for s in sections] == [
        ("paragraph", "Some text"),
        ("table", "| a | b |\n| - | - |\n| 1 | 2 |"),
        ("paragraph", "After."),
    ]


def test_nothing_in_nothing_out() -> None:
    assert markdown_sections("") == []
    assert markdown_sections("\n \n# \n---\n") == []


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("a `b` c", ["`b`"]),
        ("`a``b`", ["`a``b`"]),  # a closer is a run of exactly the opener's length
        ("``a`b`` and `c`", ["``a`b``", "`c`"]),
        ("x ``` y", []),
        ("\\`not code`", []),  # an escaped backtick opens nothing
        ("\\``code`", ["`code`"]),  # ...and the rest of its run opens
        ("\\\\`code`", ["`code`"]),  # an escaped backslash escapes nothing
        ("`a\\`", ["`a\\`"]),  # a backslash in code is text
    ],
)
def test_code_spans_pair_runs_of_backticks_as_commonmark_does(text: str, spans: list[str]) -> None:
    assert [text[start:end] for start, end in code_spans(text)] == spans


def test_escapes_are_read_outside_code_spans_only() -> None:
    assert (
        unescaped(r"sqlite3\_limit and `sqlite3\_limit`") == r"sqlite3_limit and `sqlite3\_limit`"
    )
    assert unescaped(r"\`not\_code\`") == "`not_code`"


def test_an_unclosed_run_of_backticks_is_text() -> None:
    """The input that froze the server (issue 34): a run of backticks and no closer."""
    text = "x " + "`" * 5000 + "\\_" * 5000
    assert markdown_sections(text) == [Section("x " + "`" * 5000 + "_" * 5000)]


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("# Title", ("Title",)),
        ("## Title ##", ("Title",)),
        ("### C#", ("C#",)),
        ("#\tTabbed  #  ", ("Tabbed",)),
        ("#5 bolts", ()),
        ("    # indented code", ()),
    ],
)
def test_atx_headings(line: str, heading: tuple[str, ...]) -> None:
    sections = markdown_sections(line + "\n\nbody")
    assert sections[-1].heading_path == heading


def test_delimiter_rows_and_rules() -> None:
    assert is_delimiter_row("| --- | :---: |")
    assert is_delimiter_row("---|---:")
    assert not is_delimiter_row("| --- | x |")
    assert not is_delimiter_row("    |---|")
    assert not is_delimiter_row("-" + " " * 1000 + "x")
    assert markdown_sections("a\n\n - - -\n\n*\t*\t*\n\nb") == [Section("a"), Section("b")]
    assert markdown_sections("_ _ x") == [Section("_ _ x")]

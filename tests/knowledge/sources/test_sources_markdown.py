"""Markdown and plain text -> sections with heading paths (sources/markdown.py)."""

from agentic_rag.knowledge.documents import Section
from agentic_rag.knowledge.sources.markdown import markdown_sections

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

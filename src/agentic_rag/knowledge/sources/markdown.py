"""Markdown (or plain text) -> sections, each under the path of headings it sits in.

Used for text sent by a caller and for the markdown trafilatura makes of a web page. It is a
line scanner for the block structure that matters to retrieval, not a full CommonMark parser:
ATX (`# Title`) and setext (`Title` over `===` or `---`) headings, fenced code blocks, pipe
tables (a header row, then a delimiter row), lists and paragraphs. Blocks keep their markdown
source (a table keeps its header row, a list its markers), except headings, whose sections hold
the title alone, and backslash escapes (`sqlite3\\_limit`), which are read as the characters they
escape outside code: what is stored is what a reader copies. A heading's own section carries a
path that ends with itself, so a heading and the text under it share one path.

Every step is linear in the length of the text, whatever the text (a caller's text and any
web page reach it): no pattern here can backtrack over a line, and code spans are paired by
one pass over the runs of backticks (bench/markdown_parse.py measures it).
"""

import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from agentic_rag.knowledge.documents import Section, SectionKind

_ATX_OPENING = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_LIST_ITEM = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_BACKTICKS = re.compile(r"`+")
_DELIMITER_CELL = re.compile(r":?-+:?")


def markdown_sections(text: str) -> list[Section]:
    """The sections of a markdown or plain-text document, in order; blank blocks are dropped."""
    return _Scanner(text).scan()


@dataclass
class _Scanner:
    text: str
    lines: list[str] = field(init=False)
    index: int = 0
    path: list[tuple[int, str]] = field(default_factory=list)  # (level, title), outermost first
    sections: list[Section] = field(default_factory=list)

    def __post_init__(self) -> None:
        normalized = self.text.replace("\r\n", "\n").replace("\r", "\n")
        self.lines = [line.rstrip() for line in normalized.split("\n")]

    def scan(self) -> list[Section]:
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if not line.strip() or _thematic_break(line):
                self.index += 1
            elif heading := _atx_heading(line):
                self.index += 1
                self._heading(*heading)
            elif fence := _FENCE.fullmatch(line):
                self._fenced_code(fence.group(1))
            elif self._starts_table(self.index):
                self._table()
            elif _LIST_ITEM.match(line):
                self._list()
            else:
                self._paragraph()
        return self.sections

    def _heading(self, level: int, title: str) -> None:
        title = unescaped(" ".join(title.split()))
        if not title:
            return
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title))
        self._emit("heading", title)

    def _fenced_code(self, fence: str) -> None:
        start = self.index
        self.index += 1
        closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
        while self.index < len(self.lines) and not closing.fullmatch(self.lines[self.index]):
            self.index += 1
        self.index = min(self.index + 1, len(self.lines))  # past the closing fence, if any
        self._emit("code", "\n".join(self.lines[start : self.index]))

    def _list(self) -> None:
        start = self.index
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if not line.strip():
                # A blank line ends the list unless an item or an indented line follows.
                following = self.index + 1
                if following < len(self.lines) and (
                    _LIST_ITEM.match(self.lines[following])
                    or self.lines[following].startswith(("  ", "\t"))
                ):
                    self.index += 1
                    continue
                break
            if self.index > start and self._interrupts(self.index) and not _LIST_ITEM.match(line):
                break
            self.index += 1
        self._emit("list", "\n".join(self.lines[start : self.index]))

    def _paragraph(self) -> None:
        start = self.index
        self.index += 1
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if not line.strip():
                break
            if underline := _SETEXT.fullmatch(line):
                title = " ".join(self.lines[start : self.index])
                self.index += 1
                self._heading(1 if underline.group(1).startswith("=") else 2, title)
                return
            if self._interrupts(self.index) or _LIST_ITEM.match(line):
                break
            self.index += 1
        self._emit("paragraph", "\n".join(self.lines[start : self.index]))

    def _interrupts(self, index: int) -> bool:
        """Whether the line at `index` starts a block that ends the current one."""
        line = self.lines[index]
        return bool(
            _atx_heading(line)
            or _FENCE.fullmatch(line)
            or _thematic_break(line)
            or self._starts_table(index)
        )

    def _starts_table(self, index: int) -> bool:
        return (
            "|" in self.lines[index]
            and index + 1 < len(self.lines)
            and "-" in self.lines[index + 1]
            and is_delimiter_row(self.lines[index + 1])
        )

    def _table(self) -> None:
        start = self.index
        self.index += 2  # the header row and the delimiter row
        while self.index < len(self.lines) and "|" in self.lines[self.index]:
            self.index += 1
        self._emit("table", "\n".join(self.lines[start : self.index]))

    def _emit(self, kind: SectionKind, text: str) -> None:
        text = text.strip("\n")
        if kind != "code":
            text = unescaped(text)
        if text.strip():
            heading_path = tuple(title for _, title in self.path)
            self.sections.append(Section(text=text, kind=kind, heading_path=heading_path))


def unescaped(text: str) -> str:
    """`text` with markdown's backslash escapes read, except inside code spans."""
    pieces, last = [], 0
    for start, end in code_spans(text):
        pieces += [_ESCAPE.sub(r"\1", text[last:start]), text[start:end]]
        last = end
    pieces.append(_ESCAPE.sub(r"\1", text[last:]))
    return "".join(pieces)


def code_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each code span in `text`, in order: a run of backticks up to the next
    run of exactly as many (CommonMark); a backtick escaped by a backslash opens none.

    One pass over the runs: each run's closer is found by bisection in the runs of its
    length, where a pattern would rescan the rest of the text from every backtick."""
    runs = [(run.start(), run.end()) for run in _BACKTICKS.finditer(text)]
    by_length: defaultdict[int, list[int]] = defaultdict(list)  # run indexes, ascending
    for index, (start, end) in enumerate(runs):
        by_length[end - start].append(index)
    index, after = 0, 0  # the next run to try as an opener; the end of the last span
    while index < len(runs):
        start, end = runs[index]
        backslashes = 0  # before this run, back to the last run at most: linear in all
        while start - backslashes > after and text[start - backslashes - 1] == "\\":
            backslashes += 1
        start += backslashes % 2  # an escaped backtick is text
        closers = by_length.get(end - start, [])
        found = bisect_right(closers, index)
        if start == end or found == len(closers):
            index += 1
            continue
        closer = closers[found]
        yield start, runs[closer][1]
        index, after = closer + 1, runs[closer][1]


def is_delimiter_row(line: str) -> bool:
    """Whether `line` is a pipe table's delimiter row (`| --- | :---: |`)."""
    body = line.lstrip(" ")
    if len(line) - len(body) > 3:
        return False
    body = body.removeprefix("|").rstrip(" \t").removesuffix("|")
    return all(_DELIMITER_CELL.fullmatch(cell.strip(" \t")) for cell in body.split("|"))


def _atx_heading(line: str) -> tuple[int, str] | None:
    """(level, title) of an ATX heading line (`## Title ##`), or None."""
    opening = _ATX_OPENING.match(line)
    if opening is None:
        return None
    title = line[opening.end() :].strip(" \t")
    unclosed = title.rstrip("#")
    if not unclosed or unclosed[-1] in " \t":  # a closing sequence, after a space
        title = unclosed.rstrip(" \t")
    return len(opening.group(1)), title


def _thematic_break(line: str) -> bool:
    """Whether `line` is a rule: three or more `*`, `-` or `_` alone, spaces between."""
    body = line.lstrip(" ")
    if len(line) - len(body) > 3 or body[:1] not in ("*", "-", "_"):
        return False
    marks = body.replace(" ", "").replace("\t", "")
    return len(marks) >= 3 and marks.count(body[0]) == len(marks)

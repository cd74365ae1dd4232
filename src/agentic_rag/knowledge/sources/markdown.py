"""Markdown (or plain text) -> sections, each under the path of headings it sits in.

Used for text sent by a caller and for the markdown trafilatura makes of a web page. It is a
line scanner for the block structure that matters to retrieval, not a full CommonMark parser:
ATX (`# Title`) and setext (`Title` over `===` or `---`) headings, fenced code blocks, pipe
tables (a header row, then a delimiter row), lists and paragraphs. Blocks keep their markdown
source (a table keeps its header row, a list its markers), except headings, whose sections hold
the title alone, and backslash escapes (`sqlite3\\_limit`), which are read as the characters they
escape outside code: what is stored is what a reader copies. A heading's own section carries a
path that ends with itself, so a heading and the text under it share one path.
"""

import re
from dataclasses import dataclass, field

from agentic_rag.knowledge.documents import Section, SectionKind

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_THEMATIC_BREAK = re.compile(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})")
_LIST_ITEM = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
_TABLE_DELIMITER = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")


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
            if not line.strip() or _THEMATIC_BREAK.fullmatch(line):
                self.index += 1
            elif heading := _ATX.fullmatch(line):
                self.index += 1
                self._heading(len(heading.group(1)), heading.group(2) or "")
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
            _ATX.fullmatch(line)
            or _FENCE.fullmatch(line)
            or _THEMATIC_BREAK.fullmatch(line)
            or self._starts_table(index)
        )

    def _starts_table(self, index: int) -> bool:
        return (
            "|" in self.lines[index]
            and index + 1 < len(self.lines)
            and "-" in self.lines[index + 1]
            and bool(_TABLE_DELIMITER.fullmatch(self.lines[index + 1]))
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
    for span in _CODE_SPAN.finditer(text):
        pieces += [_ESCAPE.sub(r"\1", text[last : span.start()]), span.group()]
        last = span.end()
    pieces.append(_ESCAPE.sub(r"\1", text[last:]))
    return "".join(pieces)

"""What every source produces and every later stage reads: extracted documents and chunks.

A source (web page, PDF, transcript, text sent by a caller) is turned into a sequence of
`Section`s: the structural units of the document, in order, each with where it came from.
A document's text is its sections' texts joined by `SECTION_SEPARATOR`, and every character
span (`Chunk.start`, `Chunk.end`) points into that text, so a hit can be shown in its place.
"""

from dataclasses import dataclass, field
from typing import Any, Literal

SECTION_SEPARATOR = "\n\n"

SectionKind = Literal["heading", "paragraph", "list", "table", "code", "page", "segment"]


@dataclass(frozen=True)
class Section:
    """One structural unit of a document: a paragraph under its headings, a PDF page, a
    transcript segment."""

    text: str
    kind: SectionKind = "paragraph"
    heading_path: tuple[str, ...] = ()
    """The headings this section sits under, outermost first."""
    page: int | None = None
    """1-based page number, for paged sources (PDF)."""
    start_seconds: float | None = None
    """Start and end of a transcript segment."""
    end_seconds: float | None = None


@dataclass
class ExtractedDocument:
    """A document as a source extracted it, before chunking."""

    uri: str
    """Where it came from: the URL after redirects, or the file name the caller gave."""
    title: str
    mime_type: str
    sections: list[Section]
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """What the caller should know about the extraction, e.g. "pages 3, 7 read by OCR"."""

    @property
    def text(self) -> str:
        return SECTION_SEPARATOR.join(s.text for s in self.sections)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document small enough for the embedder, with its provenance."""

    position: int
    """0-based order of the chunk in its document."""
    text: str
    start: int
    """Character span of the chunk in the document's text: text == document.text[start:end]."""
    end: int
    token_count: int
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    start_seconds: float | None = None
    end_seconds: float | None = None
    embedding_prefix: str = ""
    """What the embedder reads before `text` but is not part of the span: the heading path,
    and a split table's header row (see `chunking.embedding_text`)."""

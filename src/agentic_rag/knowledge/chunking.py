"""Chunking: a document's sections cut into chunks that follow its structure and that the
embedder reads whole.

A chunk holds one section, or several small consecutive ones under the same headings on the
same page (transcript segments too), packed up to the embedder's limit. It never crosses a
page or a change of headings; a heading opens a new chunk and stays with what follows it. A
section longer than the limit is cut by `semchunk` (at paragraph, line, sentence, clause and
word boundaries, in that order of preference), and consecutive pieces share about
`overlap_tokens`.

`Chunk.text` is exactly the document's text over the chunk's span. What the embedder reads is
`embedding_text(chunk)`: the document's title, the heading path ("Install > Linux") and, for the
later pieces of a split table, its header row, before the text. The limit counts that prefix too.
The title is left out when the heading path starts with it: a passage whose headings do not
name its subject (a page without heading structure, a PDF) is read knowing what it is a passage
of (docs/knowledge.md, Retrieval > Dense).

Each document also gets a vector of its own, made from `document_embedding_text`: its title and
its opening words. The dense leg adds a share of its similarity to its chunks' (store.dense):
measured on bench/quality, it ranks documents better than the chunks alone, and better than the
model used plainly over windows of the documents.

Stores record which of these recipes their vectors were made with (`EMBEDDING_RECIPE`): vectors
of another recipe are not mixed with these; `agentic-rag reembed` re-embeds them.
"""

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from semchunk.semchunk import chunk as semchunk

from agentic_rag.knowledge.documents import SECTION_SEPARATOR, Chunk, Section
from agentic_rag.knowledge.sources.markdown import is_delimiter_row

TokenCounter = Callable[[str], int]

EMBEDDING_RECIPE = "title+headings+document"
"""What is embedded: each chunk after its title and headings (`embedding_text`), and each
document's opening (`document_embedding_text`). "headings" was the recipe before both."""
TITLE_WORDS = 16
"""A title longer than this is cut: a title line is a hint of the topic, not content."""
DOCUMENT_WORDS = 150
"""The opening words of a document that make its own vector, after its title: the window of
the model used plainly that bench/quality measured (the embedder reads up to its limit)."""


def embedding_text(chunk: Chunk) -> str:
    """What the embedder reads for `chunk`."""
    return chunk.embedding_prefix + chunk.text


def document_embedding_text(title: str, text: str) -> str:
    """What the embedder reads for a document's own vector: its title, then its first
    DOCUMENT_WORDS words."""
    line = " ".join(title.split()[:TITLE_WORDS])
    opening = " ".join(text.split()[:DOCUMENT_WORDS])
    return f"{line}\n{opening}" if line else opening


def title_line(title: str, heading_path: Sequence[str]) -> str:
    """The first line of a chunk's embedding prefix: the document's title (its first
    TITLE_WORDS words), or nothing when the title is empty or is the outermost heading."""
    words = title.split()
    if not words or (heading_path and heading_path[0].split() == words):
        return ""
    return " ".join(words[:TITLE_WORDS]) + "\n"


def titled_prefix(
    title: str,
    heading_path: Sequence[str],
    prefix: str,
    text: str,
    count_tokens: TokenCounter,
    max_tokens: int,
) -> str:
    """The prefix under EMBEDDING_RECIPE of a chunk stored with `prefix` by an older recipe
    (headings only): the title line first when the whole still fits in `max_tokens` (the
    chunk was cut without it), else `prefix` as it is. Idempotent: a prefix that already
    starts with the title line is returned unchanged."""
    line = title_line(title, heading_path)
    if not line or prefix.startswith(line):
        return prefix
    return line + prefix if count_tokens(line + prefix + text) <= max_tokens else prefix


def offset_after(sections: Sequence[Section], start_offset: int = 0) -> int:
    """The offset in the document's text of the section that follows `sections`: the
    `start_offset` of the next batch when a long document is chunked batch by batch."""
    return start_offset + sum(len(s.text) + len(SECTION_SEPARATOR) for s in sections)


@dataclass(frozen=True)
class _Placed:
    """A section with its span in the batch's text."""

    section: Section
    start: int
    end: int


class Chunker:
    """Cuts sections into chunks of at most `max_tokens`, as `count_tokens` counts them (the
    embedder's own tokenizer, special tokens included: `count_tokens("")` is their number).

    Chunking is CPU work (each count is a tokenizer call): run it off the event loop.
    """

    def __init__(self, count_tokens: TokenCounter, max_tokens: int, overlap_tokens: int = 32):
        self._count = count_tokens
        self._overhead = count_tokens("")
        budget = max_tokens - self._overhead
        if budget < 16:
            raise ValueError(f"max_tokens {max_tokens} leaves fewer than 16 tokens for text")
        if not 0 <= overlap_tokens <= budget // 4:
            raise ValueError(f"overlap_tokens must be 0 to {budget // 4} for {max_tokens} tokens")
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        # Headings and a table's header row, repeated before a piece, take at most a quarter
        # of the limit each, so that at least half of it is left for the text itself.
        self._prefix_budget = budget // 4

    def chunk(
        self,
        sections: Sequence[Section],
        *,
        title: str = "",
        start_offset: int = 0,
        first_position: int = 0,
    ) -> list[Chunk]:
        """The chunks of `sections` of the document titled `title`, whose first section
        starts at `start_offset` in the document's text; positions count from
        `first_position`.

        A long document can be chunked batch by batch (`offset_after` gives the next batch's
        offset) with the same result as at once, when batches end where a chunk ends anyway:
        at a page, a heading, or the end of a transcript segment that fills a chunk.
        """
        text = SECTION_SEPARATOR.join(s.text for s in sections)
        placed: list[_Placed] = []
        offset = 0
        for section in sections:
            if section.text.strip():  # blank sections hold nothing to find
                placed.append(_Placed(section, offset, offset + len(section.text)))
            offset += len(section.text) + len(SECTION_SEPARATOR)
        chunks: list[Chunk] = []
        for group in _groups(placed):
            for piece in self._pack(text, group, title):
                chunks.append(piece.at(start_offset, first_position + len(chunks), self._count))
        return chunks

    def _pack(self, text: str, group: list[_Placed], title: str) -> list["_Piece"]:
        """Consecutive sections of one group together up to the limit; a section too long
        for a chunk is split (with the headings just before it, so they do not stand alone)."""
        path = group[-1].section.heading_path
        prefix = self._heading_prefix(title_line(title, path), path)
        pieces: list[_Piece] = []
        pack: list[_Placed] = []
        for placed in group:
            first = pack[0] if pack else placed
            if self._fits(prefix + text[first.start : placed.end]):
                pack.append(placed)
                continue
            if self._fits(prefix + placed.section.text):
                pieces.append(_Piece.over(text, pack, prefix, path))
                pack = [placed]
            elif pack and all(p.section.kind == "heading" for p in pack):
                pieces.extend(self._split(text, [*pack, placed], prefix, path))
                pack = []
            else:
                if pack:
                    pieces.append(_Piece.over(text, pack, prefix, path))
                pieces.extend(self._split(text, [placed], prefix, path))
                pack = []
        if pack:
            pieces.append(_Piece.over(text, pack, prefix, path))
        return pieces

    def _split(
        self, text: str, run: list[_Placed], prefix: str, path: tuple[str, ...]
    ) -> list["_Piece"]:
        """Pieces of a section too long for one chunk (`run[-1]`), each within the limit;
        the headings just before it (`run[:-1]`) go with the first piece when they fit."""
        long = run[-1]
        header = self._table_header(long.section)

        def prefix_at(offset: int) -> str:  # a piece that starts after the header repeats it
            return prefix + header if header and offset >= long.start + len(header) else prefix

        limit = self.max_tokens - self._count(prefix + header)
        spans = self._fitting(text, long.start, long.end, prefix_at, limit, self.overlap_tokens)
        pieces = [_Piece(text, a, b, prefix_at(a), path, [long]) for a, b in spans]
        if len(run) > 1:
            first = pieces[0]
            if self._fits(prefix + text[run[0].start : first.end]):
                pieces[0] = _Piece(text, run[0].start, first.end, prefix, path, [long])
            else:
                pieces.insert(0, _Piece.over(text, run[:-1], prefix, path))
        return pieces

    def _fitting(
        self,
        text: str,
        start: int,
        end: int,
        prefix_at: Callable[[int], str],
        limit: int,
        overlap: int,
    ) -> list[tuple[int, int]]:
        """Spans that cut `text[start:end]` into pieces that fit with their prefixes. A piece
        that counts over (sub-pieces joined may tokenize a little longer than their sum) is
        cut again, smaller and without overlap."""
        spans: list[tuple[int, int]] = []
        for a, b in self._cut(text[start:end], limit, overlap):
            a, b = start + a, start + b
            excess = self._count(prefix_at(a) + text[a:b]) - self.max_tokens
            if excess <= 0:
                spans.append((a, b))
            else:
                spans.extend(self._fitting(text, a, b, prefix_at, limit - excess, 0))
        return spans

    def _cut(self, span: str, limit: int, overlap: int) -> list[tuple[int, int]]:
        """Pieces of `span` of at most `limit` tokens; each piece after the first starts
        about `overlap` tokens back in the previous one, at a sentence or clause boundary.

        (semchunk's own overlap merges pieces of `overlap` tokens, which leaves chunks
        about a third short of the limit; this keeps them full.)"""

        # semchunk counts many overlapping candidates: memoise per call (its own cache is
        # global and unbounded).
        @functools.lru_cache(maxsize=8192)
        def count(piece: str) -> int:
            return self._count(piece) - self._overhead

        def cut(text: str, size: int) -> list[tuple[int, int]]:
            result = semchunk(
                text, chunk_size=size, token_counter=count, memoize=False, offsets=True
            )
            assert isinstance(result, tuple)  # offsets=True
            return result[1]

        pieces = cut(span, limit - overlap)
        if not overlap:
            return pieces
        overlapped = pieces[:1]
        for (before_start, before_end), (_, end) in itertools.pairwise(pieces):
            start = before_end
            for tail, _ in reversed(cut(span[before_start:before_end], overlap)):
                if count(span[before_start + tail : before_end]) > overlap:
                    break
                start = before_start + tail
            overlapped.append((start, end))
        return overlapped

    def _fits(self, text: str) -> bool:
        return self._count(text) <= self.max_tokens

    def _tokens(self, text: str) -> int:
        return self._count(text) - self._overhead

    def _heading_prefix(self, title: str, path: tuple[str, ...]) -> str:
        """ "Guide\nInstall > Linux\n" (`title` and the path), without the outermost headings
        if it is too long, and without the title if even that is too long."""
        for i in range(len(path) + 1):
            prefix = title + (" > ".join(path[i:]) + "\n" if path[i:] else "")
            if self._tokens(prefix) <= self._prefix_budget:
                return prefix
        return self._heading_prefix("", path) if title else ""

    def _table_header(self, section: Section) -> str:
        """A table's header row (and markdown delimiter row), with its newline, when there
        are rows after it and it is short enough to repeat."""
        if section.kind != "table":
            return ""
        lines = section.text.split("\n")
        size = 2 if len(lines) > 1 and is_delimiter_row(lines[1].strip()) else 1
        if len(lines) <= size or not "".join(lines[:size]).strip():
            return ""
        header = "\n".join(lines[:size]) + "\n"
        return header if self._tokens(header) <= self._prefix_budget else ""


@dataclass(frozen=True)
class _Piece:
    """A chunk before it knows its place in the whole document."""

    text: str
    start: int
    end: int
    prefix: str
    heading_path: tuple[str, ...]
    sections: list[_Placed]

    @classmethod
    def over(cls, text: str, run: list[_Placed], prefix: str, path: tuple[str, ...]) -> "_Piece":
        """The piece that holds the consecutive sections of `run`."""
        return cls(text, run[0].start, run[-1].end, prefix, path, run)

    def at(self, start_offset: int, position: int, count: TokenCounter) -> Chunk:
        body = self.text[self.start : self.end]
        start = self.start + len(body) - len(body.lstrip())
        end = self.start + len(body.rstrip())
        first = self.sections[0].section
        starts = [p.section.start_seconds for p in self.sections]
        ends = [p.section.end_seconds for p in self.sections]
        return Chunk(
            position=position,
            text=self.text[start:end],
            start=start_offset + start,
            end=start_offset + end,
            token_count=count(self.prefix + self.text[start:end]),
            heading_path=self.heading_path,
            page=first.page,  # a chunk never crosses a page
            start_seconds=next((s for s in starts if s is not None), None),
            end_seconds=next((e for e in reversed(ends) if e is not None), None),
            embedding_prefix=self.prefix,
        )


def _groups(placed: list[_Placed]) -> list[list[_Placed]]:
    """Runs of sections that may share a chunk: same page, same heading path; a heading
    opens a run, and leading headings take the path of what follows them."""
    groups: list[list[_Placed]] = []
    for p in placed:
        group = groups[-1] if groups else None
        if group is not None and p.section.page == group[0].section.page:
            only_headings = all(q.section.kind == "heading" for q in group)
            if only_headings or (
                p.section.kind != "heading"
                and p.section.heading_path == group[-1].section.heading_path
            ):
                group.append(p)
                continue
        groups.append([p])
    return groups

"""Chunking with the real all-MiniLM-L6-v2 tokenizer: structure kept, spans exact, every chunk
read whole by the embedder."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rag.embedding.embedders import TokenCounter
from agentic_rag.knowledge.chunking import (
    DOCUMENT_WORDS,
    TITLE_WORDS,
    Chunker,
    document_embedding_text,
    embedding_text,
    offset_after,
    titled_prefix,
)
from agentic_rag.knowledge.documents import SECTION_SEPARATOR, Chunk, Section

count = TokenCounter()
chunker = Chunker(count, max_tokens=256, overlap_tokens=32)

SAMPLE = (
    "the index stores every chunk with its span and page so that a hit can be shown in place "
    "while retrieval fuses dense and lexical results ranked by BM25 over PostgreSQL rows; "
    "embedding models read word pieces up to a limit beyond which text is silently lost"
)
VOCABULARY = SAMPLE.split()


def prose(rng: random.Random, sentences: int) -> str:
    def sentence() -> str:
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(6, 16))]
        return " ".join(words).capitalize() + rng.choice([".", ".", "?", ";"])

    return " ".join(sentence() for _ in range(sentences))


def table(rng: random.Random, rows: int) -> str:
    lines = ["| name | size | note |", "| --- | ---: | --- |"]
    lines += [f"| item {i} | {rng.randint(1, 999)} | {prose(rng, 1)} |" for i in range(rows)]
    return "\n".join(lines)


def guide() -> list[Section]:
    """A markdown-like document: headings, paragraphs, a list, a long section, a table."""
    rng = random.Random(1)
    return [
        Section("Guide", "heading", ("Guide",)),
        Section(prose(rng, 2), "paragraph", ("Guide",)),
        Section("Install", "heading", ("Guide", "Install")),
        Section(prose(rng, 1), "paragraph", ("Guide", "Install")),
        Section("- download it\n- unpack it\n- run it", "list", ("Guide", "Install")),
        Section("Linux", "heading", ("Guide", "Install", "Linux")),
        Section(prose(rng, 60), "paragraph", ("Guide", "Install", "Linux")),
        Section("Reference", "heading", ("Guide", "Reference")),
        Section(table(rng, 40), "table", ("Guide", "Reference")),
        Section(" \n ", "paragraph", ("Guide", "Reference")),
        Section(prose(rng, 1), "paragraph", ("Guide", "Reference")),
    ]


def spans(sections: list[Section], start: int = 0) -> list[tuple[int, int]]:
    result = []
    for s in sections:
        result.append((start, start + len(s.text)))
        start += len(s.text) + len(SECTION_SEPARATOR)
    return result


def assert_sound(sections: list[Section], chunks: list[Chunk], limit: int = 256) -> None:
    """Spans exact, nothing blank, nothing over the limit, nothing of the text left out."""
    text = SECTION_SEPARATOR.join(s.text for s in sections)
    covered = [False] * len(text)
    for position, chunk in enumerate(chunks):
        assert chunk.position == position
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text.strip() == chunk.text != ""
        assert chunk.token_count == count(embedding_text(chunk)) <= limit
        covered[chunk.start : chunk.end] = [True] * (chunk.end - chunk.start)
    assert all(c or t.isspace() for c, t in zip(covered, text, strict=True))


def within(chunk: Chunk, span: tuple[int, int]) -> bool:
    return span[0] <= chunk.start and chunk.end <= span[1]


def test_every_chunk_is_exact_and_fits() -> None:
    sections = guide()
    chunks = chunker.chunk(sections)
    assert_sound(sections, chunks)
    assert max(c.token_count for c in chunks) > 200  # chunks are filled, not minced


def test_small_sections_under_one_heading_share_a_chunk_that_its_heading_opens() -> None:
    sections = guide()
    chunks = chunker.chunk(sections)
    assert chunks[0].text == SECTION_SEPARATOR.join(s.text for s in sections[0:2])
    assert chunks[0].heading_path == ("Guide",)
    assert chunks[1].text == SECTION_SEPARATOR.join(s.text for s in sections[2:5])
    assert chunks[1].heading_path == ("Guide", "Install")
    assert embedding_text(chunks[1]) == "Guide > Install\n" + chunks[1].text
    # No chunk mixes content of two heading paths.
    for chunk in chunks:
        for section, (start, end) in zip(sections, spans(sections), strict=True):
            overlaps = start < chunk.end and chunk.start < end and section.text.strip()
            if overlaps and section.kind != "heading":
                assert section.heading_path == chunk.heading_path, (chunk, section)
    assert chunks[-1].heading_path == ("Guide", "Reference")
    assert chunks[-1].text == sections[-1].text  # not packed into the split table before it


def test_a_long_section_is_split_into_overlapping_pieces() -> None:
    sections = guide()
    chunks = chunker.chunk(sections)
    linux_heading, linux = spans(sections)[5], spans(sections)[6]
    pieces = [c for c in chunks if within(c, (linux_heading[0], linux[1]))]
    assert len(pieces) >= 3
    assert pieces[0].text.startswith("Linux\n\n")  # the heading leads its first piece
    assert all(p.heading_path == ("Guide", "Install", "Linux") for p in pieces)
    text = SECTION_SEPARATOR.join(s.text for s in sections)
    for before, after in itertools.pairwise(pieces):
        assert after.start < before.end
        shared = count(text[after.start : before.end]) - count("")
        assert 5 <= shared <= 32


def test_a_split_table_repeats_its_header_row_for_the_embedder() -> None:
    sections = guide()
    chunks = chunker.chunk(sections)
    pieces = [c for c in chunks if within(c, spans(sections)[8])]
    header = "| name | size | note |\n| --- | ---: | --- |\n"
    assert len(pieces) >= 2
    assert chunks[chunks.index(pieces[0]) - 1].text.startswith("Reference\n\n" + header)
    for piece in pieces:
        assert piece.text.startswith("| item ")
        assert piece.embedding_prefix == "Guide > Reference\n" + header
        assert header not in piece.text  # spans stay exact: the header is not copied into text


def test_a_chunk_never_crosses_a_page() -> None:
    rng = random.Random(2)
    pages = [Section(prose(rng, 2), "page", page=n) for n in range(1, 7)]
    pages.insert(3, Section(prose(rng, 40), "page", page=10))
    chunks = chunker.chunk(pages)
    assert_sound(pages, chunks)
    for chunk in chunks:
        (span,) = [s for s, p in zip(spans(pages), pages, strict=True) if p.page == chunk.page]
        assert within(chunk, span)
    assert [c.page for c in chunks if c.page != 10] == [1, 2, 3, 4, 5, 6]  # small, yet alone
    assert len([c for c in chunks if c.page == 10]) >= 2


def transcript(rng: random.Random, count_: int) -> list[Section]:
    return [
        Section(prose(rng, 1), "segment", start_seconds=5.0 * i, end_seconds=5.0 * i + 4.5)
        for i in range(count_)
    ]


def test_transcript_segments_are_packed_and_keep_their_times() -> None:
    segments = transcript(random.Random(3), 60)
    chunks = chunker.chunk(segments)
    assert_sound(segments, chunks)
    assert len(chunks) <= 60 / 5  # several segments per chunk
    starts = {span[0]: s for span, s in zip(spans(segments), segments, strict=True)}
    ends = {span[1]: s for span, s in zip(spans(segments), segments, strict=True)}
    for chunk in chunks:  # whole segments, with the first one's start and the last one's end
        assert chunk.start_seconds == starts[chunk.start].start_seconds
        assert chunk.end_seconds == ends[chunk.end].end_seconds
    assert chunks[0].start_seconds == 0.0 and chunks[-1].end_seconds == 299.5


def test_a_segment_too_long_for_a_chunk_is_split_with_its_times() -> None:
    rng = random.Random(4)
    segments = [
        Section(prose(rng, 1), "segment", start_seconds=0.0, end_seconds=4.0),
        Section(prose(rng, 40), "segment", start_seconds=4.0, end_seconds=90.0),
        Section(prose(rng, 1), "segment", start_seconds=90.0, end_seconds=93.0),
    ]
    chunks = chunker.chunk(segments)
    assert_sound(segments, chunks)
    long = [c for c in chunks if within(c, spans(segments)[1])]
    assert len(long) >= 2
    assert all((c.start_seconds, c.end_seconds) == (4.0, 90.0) for c in long)


def test_a_long_document_chunked_batch_by_batch_is_chunked_as_a_whole() -> None:
    rng = random.Random(5)
    pages = [Section(prose(rng, rng.randint(1, 30)), "page", page=n) for n in range(1, 9)]
    for sections, batches in [(pages, [pages[i : i + 1] for i in range(8)]), (guide(), None)]:
        batches = batches or [sections[:7], sections[7:]]  # the guide: cut at a heading
        offset, together = 0, list[Chunk]()
        for batch in batches:
            together += chunker.chunk(batch, start_offset=offset, first_position=len(together))
            offset = offset_after(batch, offset)
        assert together == chunker.chunk(sections)
        assert_sound(sections, together)


def test_every_chunk_is_embedded_after_its_documents_title() -> None:
    sections = guide()
    title = "Write-Ahead Logging"
    plain, titled = chunker.chunk(sections), chunker.chunk(sections, title=title)
    assert_sound(sections, titled)
    assert titled[1].embedding_prefix == "Write-Ahead Logging\nGuide > Install\n"
    for chunk in titled:
        assert embedding_text(chunk) == chunk.embedding_prefix + chunk.text
        assert chunk.embedding_prefix.startswith(title + "\n")
    # The title changes what the embedder reads, never the spans' text.
    assert [c.text for c in titled][:2] == [c.text for c in plain][:2]
    # Without headings, the title alone comes first.
    rng = random.Random(6)
    pages = [Section(prose(rng, 3), "page", page=n) for n in (1, 2)]
    assert [embedding_text(c) for c in chunker.chunk(pages, title=title)] == [
        f"{title}\n{p.text}" for p in pages
    ]


def test_a_title_that_is_the_outermost_heading_is_not_repeated() -> None:
    chunks = chunker.chunk(guide(), title=" Guide ")
    assert chunks[1].embedding_prefix == "Guide > Install\n"


def test_a_long_title_is_cut_to_its_first_words() -> None:
    title = " ".join(f"word{i}" for i in range(40))
    (chunk,) = chunker.chunk([Section("some text", "paragraph")], title=title)
    assert chunk.embedding_prefix == " ".join(title.split()[:TITLE_WORDS]) + "\n"
    assert chunk.token_count == count(embedding_text(chunk))


def test_a_chunk_stored_without_its_title_gets_it_when_it_still_fits() -> None:
    short = "a short passage"
    assert titled_prefix("WAL", ("Intro",), "Intro\n", short, count, 256) == "WAL\nIntro\n"
    # Idempotent, and never the outermost heading twice.
    assert titled_prefix("WAL", ("Intro",), "WAL\nIntro\n", short, count, 256) == "WAL\nIntro\n"
    assert titled_prefix("Intro", ("Intro",), "Intro\n", short, count, 256) == "Intro\n"
    # A chunk cut to the limit without a title keeps its prefix: nothing of its text is lost.
    full = "word " * 253
    assert count("Intro\n" + full) <= 256 < count("WAL\nIntro\n" + full)
    assert titled_prefix("WAL", ("Intro",), "Intro\n", full, count, 256) == "Intro\n"


def test_a_documents_own_vector_reads_its_title_and_opening_words() -> None:
    words = [f"w{i}" for i in range(400)]
    text = "# Heading\n\n" + " ".join(words[:10]) + "\n\n" + " ".join(words[10:])
    opening = " ".join(["#", "Heading", *words[: DOCUMENT_WORDS - 2]])
    assert document_embedding_text(" Write-Ahead  Logging ", text) == (
        f"Write-Ahead Logging\n{opening}"
    )
    assert document_embedding_text("", text) == opening
    long = " ".join(f"t{i}" for i in range(30))
    assert document_embedding_text(long, "x").split("\n")[0].split() == long.split()[:TITLE_WORDS]


def test_limits_that_leave_no_room_for_text_are_refused() -> None:
    with pytest.raises(ValueError, match="fewer than 16 tokens"):
        Chunker(count, max_tokens=10)
    with pytest.raises(ValueError, match="overlap_tokens must be 0 to 63"):
        Chunker(count, max_tokens=256, overlap_tokens=100)


WORDS = st.sampled_from(
    [
        *["river", "Mountain", "city.", "music,", "(note)", "über", "東京", "🙂", "x" * 40],
        *["-", "\n", "\n\n", "  ", "\t", "| a | b |", "a" * 300],
    ]
)
TEXTS = st.one_of(st.lists(WORDS, max_size=150).map(" ".join), st.text(max_size=300))
SECTIONS = st.builds(
    Section,
    text=TEXTS,
    kind=st.sampled_from(["heading", "paragraph", "list", "table", "code", "page", "segment"]),
    heading_path=st.sampled_from([(), ("A",), ("A", "B"), ("A", "B " * 40), ("C",)]),
    page=st.none() | st.integers(1, 3),
)


@settings(max_examples=60, deadline=None)
@given(
    sections=st.lists(SECTIONS, max_size=12),
    limits=st.sampled_from([(24, 0), (48, 8), (256, 32)]),
    title=st.sampled_from(["", "A", "Title", "long title " * 20]),
)
def test_any_sections_give_exact_chunks_within_the_limit(
    sections: list[Section], limits: tuple[int, int], title: str
) -> None:
    max_tokens, overlap = limits
    chunks = Chunker(count, max_tokens, overlap).chunk(sections, title=title)
    assert_sound(sections, chunks, limit=max_tokens)

"""OCR of scanned pages through the product's PDF reader (real pypdfium2, real rapidocr): small
and normal print read within 2% of their characters, with every line and the spaces between
words; a page read with low confidence is named."""

import base64
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from agentic_rag.knowledge.sources.pdf import OCR_LOW_CONFIDENCE, extract_pdf
from tests.support.knowledge import Caller
from tests.support.live import live_server
from tests.support.ocr_pages import (
    ScannedPage,
    character_error_rate,
    image_pdf,
    lost_lines,
    scanned_page,
)
from tests.support.outcomes import output
from tests.support.security import create_key


def glued_words(page: ScannedPage, read: str) -> list[str]:
    """Read words that are two neighbouring words of the page without their space."""
    words = page.text.split()
    pairs = {a + b for a, b in pairwise(words)}
    return [word for word in read.split() if word in pairs]


def test_small_and_normal_print_are_read_within_two_percent_with_lines_and_spaces() -> None:
    small, normal = scanned_page(6.5), scanned_page(11.0)
    document = extract_pdf(image_pdf([small, normal]), uri="scan.pdf")
    read = {section.page: section.text for section in document.sections}
    for number, page in ((1, small), (2, normal)):
        assert character_error_rate(page.text, read[number]) <= 0.02, read[number]
        assert lost_lines(page.lines, read[number]) == []
        assert glued_words(page, read[number]) == []
        assert len(read[number].splitlines()) == len(page.lines)
    assert "reduce disk space and increase performance" in " ".join(read[1].split())
    assert document.metadata["ocr_pages"] == [1, 2]
    assert document.notes == ["pages 1, 2 of 2 were read by OCR (no text layer)"]


def poor_scan() -> ScannedPage:
    """Measured (bench/ocr/): read with a confidence of 0.917 and 29% of its characters wrong."""
    return scanned_page(7.0, blur=3.5)


@pytest.fixture
def alpha(database_url: str, data_dir: Path) -> Iterator[Caller]:
    key = create_key(database_url, "alpha", ["read", "write"])
    with live_server(None, database_url=database_url, data_dir=data_dir) as live:
        caller = Caller(live.url, key)
        yield caller
        caller.client.close()


def test_a_page_read_with_low_confidence_is_named(tmp_path: Path) -> None:
    clean, blurred = scanned_page(11.0), poor_scan()
    path = tmp_path / "poor scan.pdf"
    path.write_bytes(image_pdf([clean, blurred]))
    document = extract_pdf(path, uri="poor scan.pdf")
    assert document.metadata["ocr_pages"] == [1, 2]
    ocr_note, low_note = document.notes
    assert ocr_note == "pages 1, 2 of 2 were read by OCR (no text layer)"
    assert low_note.startswith("page 2 (confidence 0.")
    assert low_note.endswith(" of 2 was read by OCR with low confidence: may be misread")
    assert float(low_note.split("confidence ")[1].split(")")[0]) < OCR_LOW_CONFIDENCE


def test_the_ingest_result_names_a_page_read_with_low_confidence(alpha: Caller) -> None:
    data = base64.b64encode(image_pdf([poor_scan()])).decode()
    summary = output(alpha.skill("ingest_pdf", data=data, filename="poor scan.pdf"))
    (document,) = summary["documents"]
    assert document["notes"][0] == "page 1 of 1 was read by OCR (no text layer)"
    assert document["notes"][1].startswith("page 1 (confidence 0.")
    assert document["notes"][1].endswith("of 1 was read by OCR with low confidence: may be misread")

"""PDF text per page, OCR of scanned pages, clear errors, streaming (sources/pdf.py)."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from agentic_rag.knowledge.sources.ocr import read_image
from agentic_rag.knowledge.sources.pdf import (
    PAGE_IMAGE_SIDE,
    CorruptPdfError,
    EmptyPdfError,
    EncryptedPdfError,
    PdfError,
    PdfReader,
    aextract_pdf,
    extract_pdf,
)
from tests.support.pdf_samples import blank_pdf, mixed_pdf, no_pages_pdf, scanned_pdf, text_pdf


def test_text_per_page_with_page_numbers_and_title(tmp_path: Path) -> None:
    data = text_pdf(
        [["Chapter one", "Pelicans fish in groups."], [], ["Chapter three", "Herons wait alone."]],
        title="Birds of the coast",
    )
    path = tmp_path / "birds.pdf"
    path.write_bytes(data)
    for source in (data, path):
        document = extract_pdf(source, uri="birds.pdf")
        assert document.title == "Birds of the coast"
        assert document.mime_type == "application/pdf"
        # The blank page 2 has no section; page numbers are those of the PDF.
        assert [(s.kind, s.page, s.text) for s in document.sections] == [
            ("page", 1, "Chapter one\nPelicans fish in groups."),
            ("page", 3, "Chapter three\nHerons wait alone."),
        ]
        assert document.metadata == {"page_count": 3, "ocr_pages": []}
        assert document.notes == []


def test_a_scanned_page_is_read_by_ocr_and_the_result_says_so() -> None:
    data = mixed_pdf(
        ["Quarterly revenue grew by eleven percent."],
        ["Scanned invoice number 4711", "Pelican migration data"],
    )
    document = extract_pdf(data, uri="report.pdf")
    assert document.title == "report.pdf"
    first, second = document.sections
    assert (first.page, first.text) == (1, "Quarterly revenue grew by eleven percent.")
    assert second.page == 2
    words = second.text.lower()
    for word in ("invoice", "4711", "pelican", "migration"):
        assert word in words
    assert document.metadata["ocr_pages"] == [2]
    assert document.notes == ["page 2 of 2 was read by OCR (no text layer)"]


def test_the_least_confidently_read_pages_are_kept_as_images_of_the_page() -> None:
    pages = [["Harbour dues", "Paid at the office"], ["Ferry timetable"], ["Tide tables", "May"]]
    with PdfReader(scanned_pdf(*pages), page_images=2) as reader:
        confidence = {page.number: page.confidence for page in reader.pages()}
        images = reader.page_images
    least = sorted(confidence, key=lambda number: (confidence[number], number))[:2]
    assert [image.number for image in images] == sorted(least)
    for image in images:
        assert image.confidence == confidence[image.number]
        # A grey PNG of the page: read again, it shows that page's words.
        decoded = cv2.imdecode(np.frombuffer(image.png, np.uint8), cv2.IMREAD_UNCHANGED)
        assert decoded.ndim == 2 and max(decoded.shape) <= PAGE_IMAGE_SIDE
        assert pages[image.number - 1][0].lower() in read_image(decoded).text.lower()


def test_only_pages_read_by_ocr_are_imaged_and_none_unless_asked() -> None:
    data = mixed_pdf(["Quarterly revenue grew."], ["Scanned invoice number 4711"])
    with PdfReader(data, page_images=5) as reader:
        list(reader.pages())
        assert [image.number for image in reader.page_images] == [2]
    with PdfReader(data) as reader:
        list(reader.pages())
        assert reader.ocr_pages == [2] and reader.page_images == []


async def test_pages_stream_one_at_a_time_off_the_event_loop() -> None:
    data = text_pdf([[f"Page {n} talks about topic {n}."] for n in range(1, 601)])
    reader = await PdfReader.aopen(data, name="long.pdf")
    assert reader.page_count == 600
    seen = []
    async for page in reader.apages():
        seen.append((page.number, page.count, page.ocr))
        if page.number == 3:
            break  # nothing past page 3 is read
    reader.close()
    assert seen == [(1, 600, False), (2, 600, False), (3, 600, False)]


def test_ocr_off_leaves_a_scan_empty() -> None:
    with pytest.raises(
        EmptyPdfError, match=r"scan\.pdf has no text on any of its 1 pages and OCR is off"
    ):
        extract_pdf(scanned_pdf(["Some words"]), uri="scan.pdf", ocr=False)


def test_encrypted_pdf() -> None:
    data = text_pdf([["secret plans"]], password="hunter2")
    with pytest.raises(EncryptedPdfError, match=r"plans\.pdf is encrypted: it needs a password"):
        extract_pdf(data, uri="plans.pdf")


@pytest.mark.parametrize(
    "data",
    [b"", b"<html>not a pdf</html>", text_pdf([["cut short"]])[:400], no_pages_pdf()],
    ids=["empty bytes", "not a pdf", "truncated", "no pages"],
)
def test_corrupt_pdf(data: bytes) -> None:
    with pytest.raises(CorruptPdfError, match=r"x\.pdf is not a readable PDF"):
        extract_pdf(data, uri="x.pdf")


def test_a_pdf_without_any_text_even_after_ocr_is_an_error() -> None:
    with pytest.raises(EmptyPdfError, match=r"has no text on any of its 2 pages even after OCR"):
        extract_pdf(blank_pdf(2), uri="blank.pdf")


async def test_streaming_reports_an_empty_pdf_after_its_last_page() -> None:
    reader = await PdfReader.aopen(blank_pdf(2), name="blank.pdf")
    numbers = []
    with pytest.raises(EmptyPdfError):
        async for page in reader.apages():
            numbers.append((page.number, page.text, page.section))
    reader.close()
    assert numbers == [(1, "", None), (2, "", None)]


async def test_missing_file_and_async_extraction(tmp_path: Path) -> None:
    with pytest.raises(PdfError, match="no such file"):
        await aextract_pdf(tmp_path / "missing.pdf", uri="missing.pdf")
    document = await aextract_pdf(text_pdf([["async works"]]), uri="a.pdf")
    assert document.text == "async works"

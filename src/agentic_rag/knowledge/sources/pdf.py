"""PDF -> text per page (pypdfium2), with offline OCR (rapidocr) for pages without a text layer.

A PDF is read one page at a time: each page is loaded, read and closed before the next, and a
page is rendered only when it needs OCR, so a 600-page PDF streams with the memory of one page
(plus the PDF itself when it was given as bytes; a path is read from disk as needed).

A page needs OCR when its text layer has fewer than `OCR_BELOW_CHARS` visible characters and it
holds an image (a scan); it is rendered at `OCR_DPI` and read by `ocr.read_image` (rapidocr's
models, which ship in its wheel, loaded once, on first use). A page read with a confidence below
`OCR_LOW_CONFIDENCE` is named in the document's notes. OCR takes seconds a page: async callers
use `PdfReader.aopen`, `apages` and `aextract_pdf`, which run the work in a thread.

A reader asked for `page_images` keeps a PNG of that many OCR'd pages, those read with the lowest
confidence (`PageImage`): a caller can show the page beside the text read from it, so a person or
a model can check the OCR where it is most likely wrong.

PDFium is not thread-safe, so every call into it holds one process-wide lock; OCR runs outside
it, on a copy of the rendered page.
"""

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import cv2
import numpy as np
import pypdfium2 as pdfium  # type: ignore[import-untyped]
import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped]

from agentic_rag.knowledge.documents import ExtractedDocument, Section
from agentic_rag.knowledge.sources.ocr import MAX_SIDE, read_image

OCR_BELOW_CHARS = 16
OCR_DPI = 300
"""Measured (bench/ocr/results.md, 6-11 pt scans): the finest of 150-300 dpi reads best, 0.19-0.38%
of characters wrong (0.28-0.95% at 150 dpi) and a blurred scan 1.23% (1.71%), for about 1.35
times the time of 150 dpi: lines are found on a copy of at most 2000 pixels either way."""
OCR_LOW_CONFIDENCE = 0.93
"""A page read with a lower mean character confidence is named as possibly misread. Measured:
clean pages read at 0.976-0.986, a blurred scan misread by 1.2% at 0.947, one misread by 29% at
0.917 (bench/ocr/results.md)."""

PAGE_IMAGE_SIDE = 1400
"""Pixels: the longest side of a page image kept for the caller (grey PNG): 9 pt print on an A4
page stays legible. Measured: 85 KB for 14 lines of 9 pt prose, 17 KB for two lines."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")
_BLANK_LINES = re.compile(r"\n{3,}")

_pdfium_lock = threading.Lock()


class PdfError(ValueError):
    """A PDF that cannot be read; the subclass says why."""


class EncryptedPdfError(PdfError):
    pass


class CorruptPdfError(PdfError):
    pass


class EmptyPdfError(PdfError):
    pass


@dataclass(frozen=True)
class PdfPage:
    number: int
    """1-based."""
    count: int
    """Pages in the document: `number` of `count` is the progress."""
    text: str
    """Empty for a page with no text (a blank page)."""
    ocr: bool
    """Whether the text was read by OCR."""
    confidence: float | None = None
    """The OCR's mean character confidence, for a page read by OCR."""

    @property
    def section(self) -> Section | None:
        return Section(text=self.text, kind="page", page=self.number) if self.text else None


@dataclass(frozen=True)
class PageImage:
    """A page read by OCR, as it looked: what a reader checks the OCR's text against."""

    number: int
    """1-based."""
    confidence: float
    """The OCR's mean character confidence on this page."""
    png: bytes
    """The page rendered, grey, at most PAGE_IMAGE_SIDE pixels on its longest side."""


class PdfReader:
    """An open PDF, read page by page. Opening raises EncryptedPdfError or CorruptPdfError (PDFium
    also refuses a PDF with no pages as malformed); iterating raises EmptyPdfError at the end if
    no page had any text."""

    def __init__(
        self,
        source: bytes | Path,
        *,
        name: str | None = None,
        ocr: bool = True,
        ocr_dpi: int = OCR_DPI,
        page_images: int = 0,
    ) -> None:
        self.name = name or (source.name if isinstance(source, Path) else "the PDF")
        self.ocr, self.ocr_dpi = ocr, ocr_dpi
        self._images_wanted = page_images
        self._images: list[PageImage] = []
        self.ocr_pages: list[int] = []
        """Numbers of the pages read by OCR so far."""
        self.low_confidence_pages: dict[int, float] = {}
        """Of those, the ones read with a confidence below OCR_LOW_CONFIDENCE, and it."""
        self._had_text = False
        with _pdfium_lock:
            try:
                self._pdf = pdfium.PdfDocument(source)
            except pdfium.PdfiumError as exc:
                raise _open_error(self.name, exc) from None
            except FileNotFoundError:
                raise PdfError(f"{self.name}: no such file") from None
            self.page_count = len(self._pdf)
            title = self._pdf.get_metadata_dict(skip_empty=True).get("Title", "")
        # "untitled" is what reportlab (and others) write when the author gave no title.
        self.title: str | None = None if title.strip().lower() in ("", "untitled") else title
        """The title in the PDF's metadata, if any."""

    @classmethod
    async def aopen(
        cls,
        source: bytes | Path,
        *,
        name: str | None = None,
        ocr: bool = True,
        page_images: int = 0,
    ) -> Self:
        return await asyncio.to_thread(cls, source, name=name, ocr=ocr, page_images=page_images)

    @property
    def page_images(self) -> list[PageImage]:
        """Images of the OCR'd pages read so far with the lowest confidence (at most the
        `page_images` asked for), in page order."""
        return sorted(self._images, key=lambda image: image.number)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with _pdfium_lock:
            self._pdf.close()

    def pages(self) -> Iterator[PdfPage]:
        for index in range(self.page_count):
            yield self.read_page(index)
        self._check_not_empty()

    async def apages(self) -> AsyncIterator[PdfPage]:
        """`pages`, each page read in a thread. A cancelled read finishes its page in the
        background; closing the reader after that is safe (it waits for PDFium)."""
        for index in range(self.page_count):
            yield await asyncio.to_thread(self.read_page, index)
        self._check_not_empty()

    def read_page(self, index: int) -> PdfPage:
        """The page at 0-based `index`, OCR'd if it needs it."""
        with _pdfium_lock:
            page = self._pdf[index]
            try:
                text = _page_text(page)
                scan = self._render_for_ocr(page) if self._needs_ocr(page, text) else None
            finally:
                page.close()
        ocr, confidence = False, None
        if scan is not None:
            recognized = read_image(scan)
            if len(recognized.text) > len(text):
                text, ocr, confidence = recognized.text, True, recognized.confidence
                self.ocr_pages.append(index + 1)
                if confidence < OCR_LOW_CONFIDENCE:
                    self.low_confidence_pages[index + 1] = confidence
                self._keep_image(index + 1, confidence, scan)
        self._had_text = self._had_text or bool(text)
        return PdfPage(
            number=index + 1, count=self.page_count, text=text, ocr=ocr, confidence=confidence
        )

    def notes(self) -> list[str]:
        """What the caller should know about the pages read so far: which were read by OCR,
        and which of those may be misread."""
        notes = [ocr_note(self.ocr_pages, self.page_count)] if self.ocr_pages else []
        if self.low_confidence_pages:
            notes.append(low_confidence_note(self.low_confidence_pages, self.page_count))
        return notes

    def _needs_ocr(self, page: pdfium.PdfPage, text: str) -> bool:
        if not self.ocr or len("".join(text.split())) >= OCR_BELOW_CHARS:
            return False
        images = page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=2)
        return next(images, None) is not None

    def _render_for_ocr(self, page: pdfium.PdfPage) -> np.ndarray[Any, Any]:
        width, height = page.get_size()
        scale = min(self.ocr_dpi / 72, MAX_SIDE / max(width, height, 1.0))
        bitmap = page.render(scale=scale)
        try:
            return np.array(bitmap.to_numpy())  # a copy: the bitmap is freed under the lock
        finally:
            bitmap.close()

    def _keep_image(self, number: int, confidence: float, scan: np.ndarray[Any, Any]) -> None:
        """Keep this page's image if it is among the `page_images` least confident so far
        (the earlier page on a tie); only a kept page is encoded."""
        if self._images_wanted <= 0:
            return
        full = len(self._images) >= self._images_wanted
        if full and confidence >= max(image.confidence for image in self._images):
            return
        self._images.append(PageImage(number, confidence, _page_png(scan)))
        if full:
            worst = max(self._images, key=lambda image: (image.confidence, image.number))
            self._images.remove(worst)

    def _check_not_empty(self) -> None:
        if not self._had_text:
            how = "even after OCR" if self.ocr else "and OCR is off"
            raise EmptyPdfError(
                f"{self.name} has no text on any of its {self.page_count} pages {how}"
            )


def extract_pdf(
    source: bytes | Path, *, uri: str, title: str | None = None, ocr: bool = True
) -> ExtractedDocument:
    """The whole PDF as one document: a "page" section per page with text. Blocking."""
    with PdfReader(source, name=uri, ocr=ocr) as reader:
        sections = [page.section for page in reader.pages() if page.section is not None]
        return ExtractedDocument(
            uri=uri,
            title=title or reader.title or uri.rstrip("/").rsplit("/", 1)[-1] or uri,
            mime_type="application/pdf",
            sections=sections,
            metadata={"page_count": reader.page_count, "ocr_pages": list(reader.ocr_pages)},
            notes=reader.notes(),
        )


async def aextract_pdf(
    source: bytes | Path, *, uri: str, title: str | None = None, ocr: bool = True
) -> ExtractedDocument:
    return await asyncio.to_thread(extract_pdf, source, uri=uri, title=title, ocr=ocr)


def ocr_note(pages: list[int], count: int) -> str:
    """What to tell the caller: "pages 3, 7 of 12 were read by OCR"."""
    noun, verb = ("page", "was") if len(pages) == 1 else ("pages", "were")
    return f"{noun} {', '.join(map(str, pages))} of {count} {verb} read by OCR (no text layer)"


def low_confidence_note(pages: dict[int, float], count: int) -> str:
    """What to tell the caller: "page 3 (confidence 0.71) of 12 was read by OCR with low
    confidence: may be misread"."""
    noun, verb = ("page", "was") if len(pages) == 1 else ("pages", "were")
    named = ", ".join(f"{page} (confidence {score:.2f})" for page, score in pages.items())
    return f"{noun} {named} of {count} {verb} read by OCR with low confidence: may be misread"


def _page_png(scan: np.ndarray[Any, Any]) -> bytes:
    grey = cv2.cvtColor(scan[..., :3], cv2.COLOR_BGR2GRAY) if scan.ndim == 3 else scan
    scale = PAGE_IMAGE_SIDE / max(grey.shape)
    if scale < 1:
        size = (round(grey.shape[1] * scale), round(grey.shape[0] * scale))
        grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
    ok, png = cv2.imencode(".png", grey, [cv2.IMWRITE_PNG_COMPRESSION, 9])
    if not ok:
        raise PdfError("a page image could not be encoded as PNG")
    return png.tobytes()


def _open_error(name: str, exc: pdfium.PdfiumError) -> PdfError:
    if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
        return EncryptedPdfError(f"{name} is encrypted: it needs a password to be read")
    if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
        return EncryptedPdfError(f"{name} uses an unsupported security handler")
    if exc.err_code in (pdfium_c.FPDF_ERR_FORMAT, pdfium_c.FPDF_ERR_FILE):
        return CorruptPdfError(f"{name} is not a readable PDF (corrupt, truncated or not a PDF)")
    return CorruptPdfError(f"{name} cannot be read: {exc}")


def _page_text(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        raw = textpage.get_text_range()
    finally:
        textpage.close()
    text = _CONTROL.sub("", raw.replace("\r\n", "\n").replace("\r", "\n"))
    lines = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", lines).strip()

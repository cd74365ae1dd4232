"""PDFs made by the tests: text pages (reportlab), scans (a Pillow image with no text layer),
encrypted, corrupt and empty ones."""

import io
from collections.abc import Sequence
from pathlib import Path

import pypdfium2 as pdfium  # type: ignore[import-untyped]
import reportlab  # type: ignore[import-untyped]
from PIL import Image, ImageDraw, ImageFont
from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped]
from reportlab.pdfgen import canvas  # type: ignore[import-untyped]

# Shipped with reportlab, so present wherever the tests run.
FONT = Path(reportlab.__file__).parent / "fonts" / "Vera.ttf"


def text_pdf(
    pages: Sequence[Sequence[str]], *, title: str | None = None, password: str = ""
) -> bytes:
    """A PDF with a text layer: one page per item, one line per string."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4, encrypt=password or None)
    if title:
        pdf.setTitle(title)
    for lines in pages:
        for row, line in enumerate(lines):
            pdf.drawString(72, 770 - 18 * row, line)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def scan_image(lines: Sequence[str]) -> Image.Image:
    """An A4 page at 150 dpi with `lines` drawn in black, as a scanner would see it."""
    image = Image.new("RGB", (1240, 1754), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(FONT), 40)
    for row, line in enumerate(lines):
        draw.text((100, 150 + 80 * row), line, font=font, fill="black")
    return image


def scanned_pdf(*pages: Sequence[str]) -> bytes:
    """A PDF of page images only: no text layer at all."""
    buffer = io.BytesIO()
    first, *rest = [scan_image(lines) for lines in pages]
    first.save(buffer, format="PDF", resolution=150, save_all=True, append_images=rest)
    return buffer.getvalue()


def mixed_pdf(text_page: Sequence[str], scanned_page: Sequence[str]) -> bytes:
    """Page 1 has a text layer, page 2 is a scan."""
    document = pdfium.PdfDocument(text_pdf([text_page]))
    scan = pdfium.PdfDocument(scanned_pdf(scanned_page))
    document.import_pages(scan)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def blank_pdf(pages: int) -> bytes:
    """A PDF whose pages have neither text nor images."""
    return text_pdf([[] for _ in range(pages)])


def no_pages_pdf() -> bytes:
    buffer = io.BytesIO()
    pdfium.PdfDocument.new().save(buffer)
    return buffer.getvalue()

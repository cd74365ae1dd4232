"""Scanned pages with known text, and how far an OCR reading of them is from that text.

A page is drawn as a scanner would deliver it: a 300 dpi grayscale image of an A4 page with
the text set in Bitstream Vera (shipped with reportlab, so present wherever the tests run; its
licence is reportlab's fonts/bitstream-vera-license.txt) at a size in points, wrapped to the
page's measure, and saved as a PDF holding only that image (no text layer).
"""

import io
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFilter, ImageFont

from tests.support.pdf_samples import FONT

SCAN_DPI = 300
A4_POINTS = (595, 842)
MARGIN_POINTS = 54

# Plain technical prose with digits and punctuation, written for these tests.
PROSE = (
    "The write-ahead log keeps changes in a separate file, so readers do not block writers "
    "and a writer does not block readers. A checkpoint moves the changes back into the "
    "database file; by default it runs when the log reaches 1000 pages. Compressing old "
    "segments can reduce disk space and increase performance on slow storage. Version 3.7.0 "
    "introduced the feature in 2010, and most programs need no change to use it. Each "
    "connection must see the same shared memory, so the log does not work over a network "
    "filesystem. Transactions larger than 100 megabytes may be slower than with the rollback "
    "journal. To turn it on, run the pragma journal_mode=WAL once; the setting is persistent. "
    "Foreign key constraints are disabled by default and must be enabled for each connection "
    "separately. A backup taken while the database is in use copies a consistent snapshot of "
    "all 42 tables, indexes and triggers. Page sizes range from 512 to 65536 bytes and must be "
    "a power of two. The maximum number of attached databases is 10, and it can be raised to "
    "125 at compile time."
)


@dataclass(frozen=True)
class ScannedPage:
    lines: list[str]
    """The text drawn, one string per printed line."""
    image: Image.Image

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def scanned_page(points: float, *, text: str = PROSE, blur: float = 0.0) -> ScannedPage:
    """`text` set at `points` on an A4 page scanned at SCAN_DPI; `blur` (a Gaussian radius in
    pixels) makes a poor scan."""
    px = SCAN_DPI / 72
    width, height = round(A4_POINTS[0] * px), round(A4_POINTS[1] * px)
    margin = round(MARGIN_POINTS * px)
    font = ImageFont.truetype(str(FONT), round(points * px))
    average = font.getlength("abcdefghijklmnopqrstuvwxyz ") / 27
    lines = textwrap.wrap(text, width=int((width - 2 * margin) / average))
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    leading = round(points * 1.3 * px)
    for row, line in enumerate(lines):
        draw.text((margin, margin + row * leading), line, font=font, fill=0)
    if blur:
        image = image.filter(ImageFilter.GaussianBlur(blur))
    return ScannedPage(lines=lines, image=image)


def image_pdf(pages: Sequence[ScannedPage]) -> bytes:
    """A PDF of the pages' images only, at SCAN_DPI."""
    buffer = io.BytesIO()
    first, *rest = [page.image for page in pages]
    first.save(buffer, format="PDF", resolution=SCAN_DPI, save_all=True, append_images=rest)
    return buffer.getvalue()


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of characters."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


def character_error_rate(expected: str, read: str) -> float:
    """Edits to turn `read` into `expected`, per character of `expected`; line breaks count as
    spaces (a line is a line either way; lost lines are counted by `lost_lines`)."""
    want, got = " ".join(expected.split()), " ".join(read.split())
    return edit_distance(want, got) / len(want)


def lost_lines(expected: Sequence[str], read: str, *, tolerance: float = 0.1) -> list[str]:
    """The expected lines that no read line matches within `tolerance` (a character error rate
    of the line)."""
    read_lines = [" ".join(line.split()) for line in read.splitlines() if line.strip()]
    return [
        line
        for line in expected
        if not any(character_error_rate(line, got) <= tolerance for got in read_lines)
    ]

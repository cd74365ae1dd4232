"""Offline OCR of a rendered page (rapidocr's PP-OCRv4 models, which ship in its wheel), with
the word spaces its recogniser drops put back from the page itself.

The recogniser reads a line as one sequence and often leaves out the spaces of small or tightly
set print ("reducediskspaceandincreaseperformance"), with high confidence. Where each character
sits is known (rapidocr's `return_word_box`), so a space is put back between two characters when
the page shows a blank gap between them as wide as a word space (`WORD_GAP`). Boxes that
rapidocr found on one printed line are joined into one line of text.
"""

import threading
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

MAX_SIDE = 4000
"""Pixels: the longest side of a page image read as it is (rapidocr shrinks longer ones)."""
DETECT_SIDE = 2000
"""Pixels: the longest side of the copy on which text lines are found."""
WORD_GAP = 0.45
"""A blank run at least this fraction of the line's character pitch (its width over its
characters) is a word space: letters of one word, even digits such as "11", stand closer.
Measured in bench/ocr/word_gap.md against fractions of the pitch and of the line's height."""

_engine_lock = threading.Lock()
_engine: Any = None


@dataclass(frozen=True)
class OcrText:
    text: str
    """The lines read, top to bottom, each line's pieces left to right."""
    confidence: float
    """The recogniser's mean character confidence over the page (0 when nothing was read)."""


@dataclass(frozen=True)
class _Piece:
    text: str
    confidence: float
    left: float
    top: float
    bottom: float


def read_image(image: np.ndarray[Any, Any]) -> OcrText:
    """The text rapidocr reads in `image` (a rendered page, BGR or BGRA). One page at a time per
    process: the engine is shared, and ONNX Runtime already uses every core for one page."""
    with _engine_lock:
        result, _ = _ocr_engine()(image, return_word_box=True)
    return _read(_ink(image), result or [])


def _read(ink: np.ndarray[Any, Any], result: list[Any], word_gap: float = WORD_GAP) -> OcrText:
    """The text of rapidocr's `result` (with word boxes), spaced as `ink` shows."""
    pieces = [_piece(ink, line, word_gap) for line in result]
    pieces = [p for p in pieces if p.text]
    characters = sum(len(p.text) for p in pieces)
    confidence = sum(p.confidence * len(p.text) for p in pieces) / characters if pieces else 0.0
    return OcrText(text="\n".join(_lines(pieces)), confidence=confidence)


def _ocr_engine() -> Any:
    global _engine
    if _engine is None:
        from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]

        # The rendering is read at the resolution chosen for it (sources/pdf.py), while the
        # text lines are found on a copy of at most DETECT_SIDE pixels, as the detector was
        # trained. No angle classifier: it turned upright lines of small print upside down,
        # and those lines were lost (bench/ocr/).
        _engine = RapidOCR(
            max_side_len=MAX_SIDE,
            det_limit_type="max",
            det_limit_side_len=DETECT_SIDE,
            use_cls=False,
        )
    return _engine


def _ink(image: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Where the page has ink: dark on light, split by Otsu's threshold."""
    gray = image if image.ndim == 2 else cv2.cvtColor(image[..., :3], cv2.COLOR_BGR2GRAY)
    _, mask = cv2.threshold(gray, 0, 1, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    return mask


def _piece(ink: np.ndarray[Any, Any], line: list[Any], word_gap: float) -> _Piece:
    """One detected box: its text with the word spaces the page shows."""
    box, text, confidence, char_boxes = line[0], str(line[1]), float(line[2]), line[3]
    xs, ys = [point[0] for point in box], [point[1] for point in box]
    top, bottom = min(ys), max(ys)
    # A vertical line (taller than wide) is read turned: its gaps are not along the columns.
    if len(char_boxes) == len(text) >= 2 and max(xs) - min(xs) > bottom - top:
        band = ink[max(int(top), 0) : max(int(bottom), int(top) + 1)]
        text = _spaced(band.any(axis=0), text, char_boxes, word_gap)
    return _Piece(text.strip(), confidence, min(xs), top, bottom)


def _spaced(
    columns: np.ndarray[Any, Any], text: str, char_boxes: list[Any], word_gap: float
) -> str:
    """`text` with a space put where the line's ink `columns` show a word gap that the text
    has no space for: at the boundary between two characters nearest the gap's middle."""
    centers = [sum(p[0] for p in b) / len(b) for b in char_boxes]
    pitch = (centers[-1] - centers[0]) / (len(text) - 1)
    spaces = [centers[i] for i, char in enumerate(text) if char.isspace()]
    breaks: set[int] = set()
    for start, end in _blank_runs(columns, word_gap * pitch):
        middle = (start + end) / 2
        if not centers[0] < middle < centers[-1]:
            continue  # margins, not a gap between words
        if any(abs(middle - x) <= max(pitch, (end - start) / 2) for x in spaces):
            continue  # the recogniser saw this one
        boundary = min(
            (i for i in range(1, len(text)) if not (text[i - 1].isspace() or text[i].isspace())),
            key=lambda i: abs((centers[i - 1] + centers[i]) / 2 - middle),
            default=None,
        )
        if boundary is not None:
            breaks.add(boundary)
    return "".join((" " if i in breaks else "") + char for i, char in enumerate(text))


def _blank_runs(columns: np.ndarray[Any, Any], least: float) -> list[tuple[int, int]]:
    """(start, end) of each run of ink-free columns at least `least` wide."""
    padded = np.concatenate(([True], columns.astype(bool), [True]))
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    runs = zip(edges[::2], edges[1::2], strict=True)
    return [(int(start), int(end)) for start, end in runs if end - start >= least]


def _lines(pieces: list[_Piece]) -> list[str]:
    """Pieces grouped into printed lines (a piece whose vertical middle falls within the line's
    extent joins it), top to bottom, each line's pieces left to right."""
    lines: list[list[_Piece]] = []
    for piece in sorted(pieces, key=lambda p: (p.top + p.bottom) / 2):
        middle = (piece.top + piece.bottom) / 2
        if lines and lines[-1][0].top <= middle <= lines[-1][0].bottom:
            lines[-1].append(piece)
        else:
            lines.append([piece])
    return [" ".join(p.text for p in sorted(line, key=lambda p: p.left)) for line in lines]

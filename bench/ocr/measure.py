"""OCR of scanned pages: character error rate, lost lines and time per page, by render resolution
and print size, through the product's PDF reader; the reading before issue 17 (rapidocr's
defaults on a 150 dpi rendering, its lines joined as it returns them) measured in the same run as
the reference. Seconds are wall time on a machine shared with other work: compare them within a
run, as the ratio to the reference's on the same page.

    .venv/bin/python bench/ocr/measure.py            # writes bench/ocr/results.{json,md}

The pages (tests/support/ocr_pages.py) are 300 dpi scans of A4 pages of known prose in
Bitstream Vera;
the blurred ones are poor scans of 7 pt print (Gaussian blur of 2.5, 3.5 and 4.5 px at 300 dpi),
to set the confidence below which a page is named as possibly misread.
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pypdfium2 as pdfium  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentic_rag.knowledge.sources.pdf import PdfReader
from tests.support.ocr_pages import (
    ScannedPage,
    character_error_rate,
    image_pdf,
    lost_lines,
    scanned_page,
)

HERE = Path(__file__).parent
SCALES = (150, 200, 250, 300)
SIZES = (6.0, 7.0, 9.0, 11.0)
BLURS = (2.5, 3.5, 4.5)


def measure(
    name: str, page: ScannedPage, text: str, seconds: float, reference: float, **extra: Any
) -> dict[str, Any]:
    lost = lost_lines(page.lines, text)
    row = {
        "reading": name,
        "cer": round(character_error_rate(page.text, text), 4),
        "lines": len(page.lines),
        "lost_lines": len(lost),
        "seconds": round(seconds, 2),
        "time_vs_before": round(seconds / reference, 2),
        **extra,
    }
    print(json.dumps(row), flush=True)
    return row


def product(page: ScannedPage, dpi: int) -> tuple[str, float, float | None]:
    with PdfReader(image_pdf([page]), name="scan.pdf", ocr_dpi=dpi) as reader:
        started = time.perf_counter()
        read = reader.read_page(0)
        return read.text, time.perf_counter() - started, read.confidence


def before(page: ScannedPage) -> tuple[str, float]:
    """rapidocr's defaults on a 150 dpi rendering, as sources/pdf.py read pages before."""
    from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]

    engine = RapidOCR()
    pdf = pdfium.PdfDocument(image_pdf([page]))
    image = np.array(pdf[0].render(scale=150 / 72).to_numpy())
    started = time.perf_counter()
    result, _ = engine(image)
    return "\n".join(str(line[1]) for line in result or ()), time.perf_counter() - started


def main() -> None:
    product(scanned_page(11.0), 150)  # load the models before anything is timed
    rows = []
    for points in SIZES:
        page = scanned_page(points)
        text, reference = before(page)
        reading = "before (rapidocr defaults)"
        rows.append(measure(reading, page, text, reference, reference, points=points, dpi=150))
        for dpi in SCALES:
            text, seconds, confidence = product(page, dpi)
            extra = {"points": points, "dpi": dpi, "confidence": confidence}
            rows.append(measure("product", page, text, seconds, reference, **extra))
    for blur in BLURS:
        page = scanned_page(7.0, blur=blur)
        _, reference = before(page)
        for dpi in SCALES:
            text, seconds, confidence = product(page, dpi)
            extra = {"points": 7.0, "dpi": dpi, "confidence": confidence}
            reading = f"product, blur {blur} px"
            rows.append(measure(reading, page, text, seconds, reference, **extra))
    (HERE / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "| reading | print (pt) | render dpi | CER | lost lines | seconds | time vs before | "
        "confidence |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        confidence = f"{r['confidence']:.3f}" if r.get("confidence") is not None else "-"
        lines.append(
            f"| {r['reading']} | {r['points']:g} | {r['dpi']} | {r['cer']:.2%} | "
            f"{r['lost_lines']}/{r['lines']} | {r['seconds']:.1f} | {r['time_vs_before']:.2f} | "
            f"{confidence} |"
        )
    (HERE / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

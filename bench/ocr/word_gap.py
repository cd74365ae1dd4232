"""The word gap: how wide a blank run between two characters must be, as a fraction of the line's
character pitch, to be a word space (sources/ocr.py WORD_GAP). Each page is read by rapidocr
once (300 dpi rendering, the product's engine settings); the spacing is then redone at each
fraction and the character error rate measured.

    .venv/bin/python bench/ocr/word_gap.py           # writes bench/ocr/word_gap.{json,md}

Pages: the scans of tests/support/ocr_pages.py at 6-16 pt, a blurred 7 pt one, and the
large-print scans of tests/support/pdf_samples.py (19 pt, with "4711": the gap inside "11" is
nearly a word space).
"""

import json
import sys
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentic_rag.knowledge.sources import ocr
from agentic_rag.knowledge.sources.pdf import OCR_DPI
from tests.support.ocr_pages import character_error_rate, image_pdf, scanned_page
from tests.support.pdf_samples import scanned_pdf

HERE = Path(__file__).parent
FRACTIONS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6)


def pages() -> list[tuple[str, str, bytes]]:
    found = []
    for points, blur in ((6.0, 0.0), (7.0, 0.0), (9.0, 0.0), (11.0, 0.0), (16.0, 0.0), (7.0, 2.5)):
        page = scanned_page(points, blur=blur)
        name = f"{points:g} pt" + (f", blur {blur} px" if blur else "")
        found.append((name, page.text, image_pdf([page])))
    for lines in (
        ["Scanned invoice number 4711", "Pelican migration data"],
        ["Ferry timetable", "The ferry leaves at seven"],
    ):
        found.append((f"19 pt: {lines[0]}", "\n".join(lines), scanned_pdf(lines)))
    return found


def main() -> None:
    rows = []
    for name, text, data in pages():
        image = np.array(pdfium.PdfDocument(data)[0].render(scale=OCR_DPI / 72).to_numpy())
        result, _ = ocr._ocr_engine()(image, return_word_box=True)
        ink = ocr._ink(image)
        cer = {
            f"{fraction:g}": round(
                character_error_rate(text, ocr._read(ink, result or [], fraction).text), 4
            )
            for fraction in FRACTIONS
        }
        rows.append({"page": name, "cer": cer})
        print(json.dumps(rows[-1]), flush=True)
    (HERE / "word_gap.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "| page | " + " | ".join(f"{f:g} of the pitch" for f in FRACTIONS) + " |",
        "| --- |" + " --- |" * len(FRACTIONS),
    ]
    for row in rows:
        cells = " | ".join(f"{v:.2%}" for v in row["cer"].values())
        lines.append(f"| {row['page']} | {cells} |")
    (HERE / "word_gap.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

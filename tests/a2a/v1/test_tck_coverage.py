"""docs/a2a-notes.md §13.9 accounts for every MUST requirement of the A2A 1.0 kit
(tests/data/a2a-1.0-tck-must.txt), and every test it names exists in tests/a2a/v1/."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).resolve().parent


def must_ids() -> list[str]:
    lines = (ROOT / "tests/data/a2a-1.0-tck-must.txt").read_text().splitlines()
    return [line.split("\t")[0] for line in lines if line.strip() and not line.startswith("#")]


def coverage_rows() -> list[tuple[list[str], list[str], str]]:
    doc = (ROOT / "docs/a2a-notes.md").read_text()
    section = doc.split("### 13.9", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.match(r"[A-Z]+[A-Z_]*-", cells[0]):
            continue
        ids = [i.strip() for i in cells[0].split(",")]
        tests = re.findall(r"`([\w/.]+\.py::\w+)`", cells[1])
        rows.append((ids, tests, cells[2]))
    return rows


def test_every_must_requirement_is_accounted_for_once() -> None:
    listed = [i for ids, _, _ in coverage_rows() for i in ids]
    assert len(must_ids()) > 100  # the list was read, not an empty file
    assert sorted(listed) == sorted(must_ids())


def test_every_requirement_is_shown_by_a_test_or_says_why_not() -> None:
    for ids, tests, note in coverage_rows():
        assert tests or note.startswith("not applicable"), ids


def test_every_test_named_exists() -> None:
    for _, tests, _ in coverage_rows():
        for name in tests:
            module, function = name.split("::")
            source = (TESTS / module).read_text()
            assert re.search(rf"^(async )?def {function}\(", source, re.M), name

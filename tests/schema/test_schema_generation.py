"""Generated files (the A2A wire types, the OpenAPI document) never drift from their sources."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "generator",
    ["generate_schema.py", "generate_openapi.py"],
    ids=["a2a wire types from the v0.2.1 schema", "spec/openapi.json from the A2A schemas"],
)
def test_generated_files_match_their_sources(generator: str) -> None:
    result = subprocess.run(
        [sys.executable, f"scripts/{generator}", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_spec_folder_holds_the_official_schemas() -> None:
    for name in ("a2a-v0.2.1.schema.json", "a2a-v0.3.0.schema.json"):
        assert (ROOT / "spec" / name).stat().st_size > 10_000

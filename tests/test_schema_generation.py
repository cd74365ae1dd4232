"""The wire types are generated from the official v0.2.1 schema and never drift from it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_module_matches_the_schema() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/generate_schema.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_spec_folder_holds_the_official_schemas() -> None:
    for name in ("a2a-v0.2.1.schema.json", "a2a-v0.3.0.schema.json"):
        assert (ROOT / "spec" / name).stat().st_size > 10_000

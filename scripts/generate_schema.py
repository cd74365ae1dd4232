"""Generate `agentic_rag.schema.a2a` from the official A2A v0.2.1 JSON schema.

    .venv/bin/python scripts/generate_schema.py           # write the module
    .venv/bin/python scripts/generate_schema.py --check   # exit 1 if it drifted

The test suite runs `--check`, so the module can never differ from what the schema says.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "spec" / "a2a-v0.2.1.schema.json"
MODULE = ROOT / "src" / "agentic_rag" / "schema" / "a2a.py"

HEADER = '''"""A2A v0.2.1 wire types, generated from spec/a2a-v0.2.1.schema.json.

Do not edit: run `python scripts/generate_schema.py`. Extensions that peers send beyond 0.2.1
live in `agentic_rag.schema.compat`.
"""
'''

CODEGEN_ARGS = [
    "--input-file-type",
    "jsonschema",
    "--output-model-type",
    "pydantic_v2.BaseModel",
    "--target-python-version",
    "3.12",
    "--disable-timestamp",
    "--use-union-operator",
    "--use-standard-collections",
    "--use-field-description",
    "--snake-case-field",
    "--use-subclass-enum",
    "--enum-field-as-literal",
    "one",
    "--base-class",
    "agentic_rag.schema.base.A2AModel",
    "--formatters",
    "ruff-format",
]


def generate() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "schema.py"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "datamodel_code_generator",
                "--input",
                str(SCHEMA),
                "--output",
                str(out),
                *CODEGEN_ARGS,
            ],
            check=True,
        )
        body = out.read_text()
    # Drop the generator's own banner; ours says where the module comes from.
    lines = body.splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return HEADER + "\n" + "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the module is out of date")
    args = parser.parse_args()
    code = generate()
    if args.check:
        if not MODULE.exists() or MODULE.read_text() != code:
            print(f"{MODULE.relative_to(ROOT)} is out of date: run scripts/generate_schema.py")
            return 1
        return 0
    MODULE.write_text(code)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the build and deployment files promise, checked without Docker or a fresh install.

No Docker engine runs here, and `make run` would install: so the Makefile is asked what it
would do (`make -n`, in a copy), and the container files are read.
"""

import json
import os
import re
import shutil
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


# -- make run / make test ----------------------------------------------------------------------


def planned(target: str, tmp_path: Path) -> list[str]:
    """The commands `make TARGET` would run in a fresh checkout: nothing installed yet."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    for name in ("pyproject.toml", "uv.lock", "package.json", "package-lock.json"):
        (tmp_path / name).touch()
    # As a user runs it, also when the suite itself runs under `make test` (whose MAKEFLAGS and
    # MAKELEVEL would make this make print "Entering directory" lines).
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    env = {name: value for name, value in os.environ.items() if name not in outer}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target, "PYTHON=python3.12"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_make_run_installs_only_what_running_needs(tmp_path: Path) -> None:
    commands = planned("run", tmp_path)
    assert not [c for c in commands if "npm" in c or "node_modules" in c]
    (sync,) = [c for c in commands if " sync " in c]
    assert "--no-dev" in sync.split()
    assert commands[-1].startswith(".venv/bin/agentic-rag serve")


def test_make_test_installs_the_dev_group_and_the_node_tools(tmp_path: Path) -> None:
    commands = planned("test", tmp_path)
    (sync,) = [c for c in commands if " sync " in c]
    assert "--no-dev" not in sync.split()
    assert "npm ci --no-audit --no-fund" in commands
    assert ".venv/bin/python -m pytest tests" in commands


def test_the_readme_names_the_node_version_the_tests_need() -> None:
    """What the Inspector's CLI runs on (tests/mcp/test_mcp_inspector.py passes on Node.js 20.20),
    not the 22.19 its package declares: package.json, its lock and the README say the same,
    and the node on this machine satisfies it."""
    lock = json.loads((ROOT / "package-lock.json").read_text())
    ours = json.loads((ROOT / "package.json").read_text())["engines"]["node"]
    assert ours == lock["packages"][""]["engines"]["node"] == ">=20.19.0"
    assert "Node.js 20.19 or later" in (ROOT / "README.md").read_text()
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for the MCP Inspector tests"
    running = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major, minor, _ = (int(part) for part in running.stdout.strip().lstrip("v").split("."))
    assert (major, minor) >= (20, 19)


# -- the container -----------------------------------------------------------------------------


def docker_sends(path: str) -> bool:
    """Whether `docker build .` puts `path` in the build context, by .dockerignore's rules.

    The last rule matching the path or one of its parent directories decides; `!` lets in.
    (fnmatch's `*` also crosses `/`, which excludes nothing Docker's would not: a directory
    excluded at the top excludes what is inside.)
    """
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    sent = True
    for rule in rules:
        pattern = rule.removeprefix("!").strip("/")
        if any(fnmatch(prefix, pattern) for prefix in prefixes):
            sent = rule.startswith("!")
    return sent


def dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        "node_modules/@modelcontextprotocol/inspector/package.json",
        "data/postgres/PG_VERSION",
        ".tools/bin/uv",
        ".git/HEAD",
        "tests/security/test_auth.py",
        "src/agentic_rag/__pycache__/app.cpython-312.pyc",
    ],
)
def test_the_build_context_leaves_out(path: str) -> None:
    assert not docker_sends(path)


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    copied = [
        source for line in dockerfile() if line.startswith("COPY ") for source in line.split()[1:-1]
    ]
    assert copied == ["pyproject.toml", "uv.lock", "README.md", "src"]
    for source in copied:
        path = ROOT / source
        files = [path] if path.is_file() else [p for p in path.rglob("*.py") if p.is_file()]
        assert files and all(docker_sends(str(f.relative_to(ROOT))) for f in files), source


def test_the_image_user_owns_data_so_the_embedded_postgresql_can_start() -> None:
    lines = dockerfile()
    (user,) = [line.split()[1] for line in lines if line.startswith("USER ")]
    (prepare,) = [i for i, line in enumerate(lines) if re.search(r"\bmkdir\b.*\s/data\b", line)]
    assert re.search(rf"\bchown -R {user}\b[^&]*\s/data\b", lines[prepare])
    # Made before the volume is declared: later changes to a volume path are discarded.
    volume = lines.index("VOLUME /data")
    assert prepare < volume and lines.index(f"USER {user}") < volume
    assert lines[-1].startswith("CMD ") and '"--data-dir", "/data"' in lines[-1]


def test_compose_checks_that_the_service_is_ready() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    check = compose["services"]["agent"]["healthcheck"]
    assert check["test"][0] == "CMD"
    assert "http://127.0.0.1:8000/readyz" in check["test"][-1]
    assert "EXPOSE 8000" in dockerfile()


def test_the_first_key_for_a_container_is_documented() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "keys create --tenant acme --scopes read,write --data-dir /data" in operations
    assert "docker compose run --rm agent /app/.venv/bin/agentic-rag keys create" in operations

"""The knowledge commands of the CLI, run as a user runs them: `agentic-rag ingest | query |
sources` on a local data directory and against a running server, and `agentic-rag reembed`
when the embedding model changes (the new model served by the test double of a hosted
embeddings API, tests/support/embeddings_double.py)."""

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_rag.embedding.embedders import LocalEmbedder
from tests.support.embeddings_double import EmbeddingsDouble
from tests.support.live import free_port, live_server, serve_in_thread
from tests.support.pdf_samples import scanned_pdf, text_pdf
from tests.support.security import create_key

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"

NOTES = """# Beekeeping

A hive needs a queen, and the queen lays up to two thousand eggs a day in spring.
Smoke calms the bees before the keeper opens the hive.
"""


def agentic_rag(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agentic-rag"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "bees.md"
    path.write_text(NOTES)
    return path


def test_ingest_query_and_sources_on_a_local_data_directory(
    database_url: str, notes: Path, tmp_path: Path
) -> None:
    env = {"DATABASE_URL": database_url}
    pdf = tmp_path / "hives.pdf"
    pdf.write_bytes(text_pdf([["Varroa mites are the worst pest of honey bees."]]))
    ingested = agentic_rag("ingest", str(notes), str(pdf), env=env)
    assert ingested.returncode == 0, ingested.stderr
    assert "ingested 1" in ingested.stdout and "bees.md" in ingested.stdout
    assert "hives.pdf" in ingested.stdout

    asked = agentic_rag("query", "How many eggs does the queen lay?", env=env)
    assert asked.returncode == 0, asked.stderr
    assert "No LLM is configured" in asked.stdout
    assert "[1] bees.md" in asked.stdout and "two thousand eggs" in asked.stdout

    listed = agentic_rag("sources", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "bees.md" in listed.stdout and "hives.pdf" in listed.stdout

    # Another tenant of the same data sees nothing.
    other = agentic_rag("sources", "--tenant", "other", env=env)
    assert "no sources yet" in other.stdout

    missing = agentic_rag("ingest", str(tmp_path / "nope.md"), env=env)
    assert missing.returncode == 1
    assert "no such file, and not an http(s) URL" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_the_same_commands_against_a_running_server(
    database_url: str, notes: Path, data_dir: Path, tmp_path: Path
) -> None:
    key = create_key(database_url, "acme", ["read", "write"])
    scan = tmp_path / "frames.pdf"
    scan.write_bytes(scanned_pdf(["Frames hang in the brood box"]))
    with live_server(None, database_url=database_url, data_dir=data_dir) as server:
        remote = ("--url", server.url, "--api-key", key)
        ingested = agentic_rag("ingest", str(notes), *remote)
        assert ingested.returncode == 0, ingested.stderr
        # The page images come with the result: the terminal names them and their task.
        scanned = agentic_rag("ingest", str(scan), *remote)
        assert scanned.returncode == 0, scanned.stderr
        assert re.search(r"attached: page-1\.png \(the artifacts of task \w+", scanned.stdout)
        asked = agentic_rag("query", "What calms the bees?", *remote)
        assert asked.returncode == 0, asked.stderr
        assert "Smoke calms the bees" in asked.stdout
        refused = agentic_rag("query", "What calms the bees?", "--url", server.url)
    assert refused.returncode == 1 and "401" in refused.stderr
    # The local data of another tenant is untouched: the server stored acme's.
    assert "no sources yet" in agentic_rag("sources", env={"DATABASE_URL": database_url}).stdout


@pytest.fixture
def other_model() -> Iterator[dict[str, str]]:
    """Settings for an embeddings endpoint that serves another model (the test double)."""
    double = EmbeddingsDouble(LocalEmbedder(threads=1), model="other-model", dimension=128)
    with serve_in_thread(double.app()) as url:
        yield {
            "AGENTIC_RAG_EMBEDDING_PROVIDER": "openai",
            "AGENTIC_RAG_EMBEDDING_URL": f"{url}/v1",
            "AGENTIC_RAG_EMBEDDING_MODEL": "other-model",
            "AGENTIC_RAG_EMBEDDING_API_KEY": double.api_key,
            "AGENTIC_RAG_EMBEDDING_DIMENSION": "128",
        }


def test_another_model_is_refused_until_reembed_switches_to_it(
    database_url: str, notes: Path, tmp_path: Path, other_model: dict[str, str]
) -> None:
    env = {"DATABASE_URL": database_url}
    assert agentic_rag("ingest", str(notes), env=env).returncode == 0
    changed = {**env, **other_model}

    refused = agentic_rag("serve", "--port", str(free_port()), env=changed)
    said = refused.stdout + refused.stderr  # serve logs (JSON lines when not on a terminal)
    assert refused.returncode == 2
    assert "agentic-rag reembed" in said and "Traceback" not in said
    # The old model still answers meanwhile.
    assert "two thousand" in agentic_rag("query", "queen eggs", env=env).stdout

    switched = agentic_rag("reembed", env=changed)
    assert switched.returncode == 0, switched.stderr
    assert "searches now use other-model (128 dimensions)" in switched.stdout
    assert "100%" in switched.stderr  # the progress bar reached the end

    asked = agentic_rag("query", "How many eggs does the queen lay?", env=changed)
    assert asked.returncode == 0, asked.stderr
    assert "two thousand eggs" in asked.stdout
    stale = agentic_rag("query", "queen eggs", env=env)
    assert stale.returncode != 0 and "agentic-rag reembed" in stale.stderr

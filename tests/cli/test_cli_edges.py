"""Edges a new user hit on the command line: list settings typed as comma-separated lists, a bad
setting in one line for every command, `call help topic=SKILL` with the input schema,
`sources SOURCE_ID`, and `query` on a data directory a running server holds.

The CLI runs in a subprocess, on a real PostgreSQL (and a real server for `query`)."""

import json
from pathlib import Path

import pytest

from agentic_rag.config import Settings
from tests.support.cli import one_line, run, serving

LIST_SETTINGS = (
    "AGENTIC_RAG_INGEST_ALLOW_PRIVATE",
    "AGENTIC_RAG_PEERS_ALLOW_PRIVATE",
    "AGENTIC_RAG_PUSH_ALLOW_PRIVATE",
)
NOTES = "# Beekeeping\n\nSmoke calms the bees before the hive is opened.\n"


@pytest.mark.parametrize("variable", LIST_SETTINGS)
@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("127.0.0.1", ["127.0.0.1"]),
        ("10.0.0.0/8, intranet.example", ["10.0.0.0/8", "intranet.example"]),
        ('["127.0.0.1", "::1"]', ["127.0.0.1", "::1"]),
        ("", []),
    ],
)
def test_list_settings_take_a_comma_separated_list_or_json(
    monkeypatch: pytest.MonkeyPatch, variable: str, typed: str, read: list[str]
) -> None:
    monkeypatch.setenv(variable, typed)
    field = variable.removeprefix("AGENTIC_RAG_").lower()
    assert getattr(Settings(), field) == read


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("knowledge", ["knowledge"]),
        ("knowledge, graphiti-compat", ["knowledge", "graphiti-compat"]),
        ('["graph", "admin"]', ["graph", "admin"]),
        ("", []),
    ],
)
def test_the_tool_groups_take_a_comma_separated_list_or_json(
    monkeypatch: pytest.MonkeyPatch, typed: str, read: list[str]
) -> None:
    monkeypatch.setenv("AGENTIC_RAG_MCP_TOOL_GROUPS", typed)
    assert Settings().mcp_tool_groups == read


BAD_SETTINGS = [
    ("AGENTIC_RAG_INGEST_ALLOW_PRIVATE", '["127.0.0.1"', "comma-separated list"),
    ("AGENTIC_RAG_PEERS_ALLOW_PRIVATE", "not a host!", "comma-separated list"),
    ("AGENTIC_RAG_UPSTREAM_MCP", "graphiti", "a JSON list"),
    ("AGENTIC_RAG_PEER_CREDENTIALS", "Bearer secret-token", "a JSON object"),
    # The form before credentials had tenants: every tenant would send them.
    (
        "AGENTIC_RAG_PEER_CREDENTIALS",
        '{"https://a.example:443": {"X-Key": "secret-token"}}',
        "is keyed by tenant now",
    ),
    ("AGENTIC_RAG_MCP_TOOL_GROUPS", "knowledge,search", "'graphiti-compat' or 'upstream'"),
    ("AGENTIC_RAG_ALLOWED_HOSTS", "rag.example.com:8443", "without scheme or port"),
]
# Each command with the first bad setting, and serve with each of them.
CASES = [
    *((command, BAD_SETTINGS[0]) for command in (["ingest", "notes.md"], ["query", "what?"],
                                                 ["sources"], ["mcp"])),
    *((["serve"], bad) for bad in BAD_SETTINGS),
]  # fmt: skip


@pytest.mark.parametrize(("command", "bad"), CASES, ids=lambda c: c[0])
def test_a_bad_setting_is_one_line_naming_the_format(
    tmp_path: Path, command: list[str], bad: tuple[str, str, str]
) -> None:
    variable, value, expected = bad
    done = run("agentic-rag", *command, "--data-dir", str(tmp_path / "data"), **{variable: value})
    assert done.returncode == 2
    line = one_line(done)
    assert line.startswith("agentic-rag: setting ") and variable in line
    assert expected in line
    assert "secret-token" not in line  # a value that may hold secrets is not repeated
    assert not (tmp_path / "data").exists()  # refused before anything started


def test_doctor_names_a_bad_setting_and_accepts_a_plain_address(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    bad = run("agentic-rag", "doctor", "--json", "--data-dir", data,
              AGENTIC_RAG_INGEST_ALLOW_PRIVATE="[")  # fmt: skip
    assert "Traceback" not in bad.stderr
    config = next(c for c in json.loads(bad.stdout)["checks"] if c["check"] == "config")
    assert config["status"] == "fail" and "comma-separated list" in config["detail"]
    good = run("agentic-rag", "doctor", "--json", "--data-dir", data,
               AGENTIC_RAG_INGEST_ALLOW_PRIVATE="127.0.0.1")  # fmt: skip
    config = next(c for c in json.loads(good.stdout)["checks"] if c["check"] == "config")
    assert config["status"] == "ok"


def test_help_on_a_skill_shows_its_input_schema(database_url: str, data_dir: Path) -> None:
    env = {"DATABASE_URL": database_url, "AGENTIC_RAG_DATA_DIR": str(data_dir)}
    done = run("agentic-rag", "call", "help", "topic=hybrid_retrieve", **env)
    assert done.returncode == 0, done.stderr
    assert "- hybrid_retrieve:" in done.stdout
    schema = done.stdout.split("input schema:", 1)[1]
    assert json.loads(schema)["properties"]["top_k"]["maximum"] == 100


def test_sources_lists_the_documents_of_one_source(
    database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    env = {"DATABASE_URL": database_url, "AGENTIC_RAG_DATA_DIR": str(data_dir)}
    notes = tmp_path / "bees.md"
    notes.write_text(NOTES)
    assert run("agentic-rag", "ingest", str(notes), **env).returncode == 0
    listed = run("agentic-rag", "sources", **env)
    assert listed.returncode == 0, listed.stderr
    source_id = listed.stdout.split()[0]
    documents = run("agentic-rag", "sources", source_id, **env)
    assert documents.returncode == 0, documents.stderr
    (line,) = documents.stdout.splitlines()
    document_id, count, _, title, uri = line.split()
    assert (int(count), title, uri) == (1, "bees.md", "bees.md")
    shown = run(
        "agentic-rag", "call", "get_document", f"document_id={document_id}", "--json", **env
    )
    assert json.loads(shown.stdout)["source_id"] == source_id
    unknown = run("agentic-rag", "sources", "nope", **env)
    assert unknown.returncode == 1
    assert one_line(unknown).startswith("agentic-rag sources: no source 'nope'")


def test_query_asks_the_server_that_holds_the_data_directory(
    database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    env = {"DATABASE_URL": database_url, "AGENTIC_RAG_GRAPH_EMBEDDED": "true"}
    notes = tmp_path / "bees.md"
    notes.write_text(NOTES)
    assert (
        run("agentic-rag", "ingest", str(notes), "--data-dir", str(data_dir), **env).returncode == 0
    )
    with serving(data_dir, tmp_path / "server.log", **env) as server:
        asked = run(
            "agentic-rag", "query", "What calms the bees?", "--data-dir", str(data_dir), **env
        )
        assert asked.returncode == 0, asked.stderr
        pid = server.process.pid
        assert f"asking the server at {server.url} (pid {pid})" in asked.stderr
        assert "Smoke calms the bees" in asked.stdout
    # The server gone: the models are loaded here, and the user is told so.
    alone = run("agentic-rag", "query", "What calms the bees?", "--data-dir", str(data_dir), **env)
    assert alone.returncode == 0, alone.stderr
    assert "loading the models in this process" in alone.stderr
    assert "Smoke calms the bees" in alone.stdout

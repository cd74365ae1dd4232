"""The command line as a user meets it: help, version, and bad input refused in one line, before
anything starts."""

import argparse
import subprocess
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

import pytest

from agentic_rag.cli.main import build_mcp_parser, build_parser
from agentic_rag.storage.embedded import postgres_processes
from tests.support.cli import one_line, run
from tests.support.live import free_port


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """argparse's error: the last line after the usage."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr.splitlines()[-1]


# -- help and version ---------------------------------------------------------------------------


def test_version() -> None:
    done = run("agentic-rag", "--version")
    assert done.returncode == 0
    assert done.stdout == f"agentic-rag {version('agentic-rag')}\n"


def test_the_help_says_what_the_program_is() -> None:
    done = run("agentic-rag", "--help")
    assert done.returncode == 0
    assert "agentic-rag: a knowledge agent" in done.stdout
    assert "A2A (v0.2.1)" in done.stdout and "MCP" in done.stdout


def test_agentic_rag_mcp_names_itself() -> None:
    done = run("agentic-rag-mcp", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: agentic-rag-mcp ")
    assert "agentic-rag-mcp: the agentic-rag skills as an MCP server over stdio" in done.stdout


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_parsers(sub))
    return found


@pytest.mark.parametrize("parser", [build_parser(), build_mcp_parser()], ids=["main", "mcp"])
def test_every_option_has_help(parser: argparse.ArgumentParser) -> None:
    undocumented = [
        f"{sub.prog} {action.dest}"
        for sub in _parsers(parser)
        for action in sub._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert undocumented == []


# -- values refused before anything starts ------------------------------------------------------


def test_serve_refuses_a_port_out_of_range(tmp_path: Path) -> None:
    data = tmp_path / "data"
    refused = run("agentic-rag", "serve", "--port", "99999", "--data-dir", str(data))
    assert error_line(refused) == (
        "agentic-rag serve: error: argument --port: Input should be less than or equal to 65535"
    )
    from_environment = run("agentic-rag", "serve", "--data-dir", str(data), AGENTIC_RAG_PORT="0")
    assert from_environment.returncode == 2
    assert one_line(from_environment) == (
        "agentic-rag: setting port (AGENTIC_RAG_PORT): Input should be greater than or equal to 1"
    )
    assert not data.exists()  # nothing started


def test_serve_refuses_a_local_llm_it_cannot_load_with_one_line(tmp_path: Path) -> None:
    refused = run(
        "agentic-rag",
        "serve",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path / "data"),
        AGENTIC_RAG_LLM_LOCAL="true",
        AGENTIC_RAG_LLM_LOCAL_MODEL=str(tmp_path / "missing.gguf"),
    )
    assert refused.returncode == 2
    output = refused.stdout + refused.stderr
    assert "Traceback" not in output
    assert f"AGENTIC_RAG_LLM_LOCAL_MODEL: no file at {tmp_path / 'missing.gguf'}" in output
    assert tmp_path / "data" / "postgres" not in postgres_processes().values()


@pytest.mark.parametrize("days", ["0", "-1", "99999999", "1.5", "soon"])
def test_keys_create_refuses_expiry_days_out_of_bounds(tmp_path: Path, days: str) -> None:
    data = tmp_path / "data"
    refused = run(
        "agentic-rag", "keys", "create", "--tenant", "acme", "--expires-in-days", days,
        "--data-dir", str(data),
    )  # fmt: skip
    assert error_line(refused) == (
        "agentic-rag keys create: error: argument --expires-in-days: "
        f"{days!r} is not a whole number of days from 1 to 3650"
    )
    assert not data.exists()


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--tenant", "a b", "argument --tenant: 'a b': a tenant is letters, digits, '-' and '_'"),
        ("--scopes", "read,root", "argument --scopes: unknown scopes ['root']; use ['admin',"),
        (
            "--groups",
            "knowledge,search",
            "argument --groups: unknown tool groups ['search']; use ['admin', 'graph',",
        ),
        ("--groups", ",", "argument --groups: name at least one tool group"),
    ],
)
def test_keys_create_refuses_a_bad_tenant_or_scope_before_starting_the_database(
    tmp_path: Path, option: str, value: str, reason: str
) -> None:
    data = tmp_path / "data"
    args = {"--tenant": "acme", "--scopes": "read", option: value}
    command = ["keys", "create", *(part for item in args.items() for part in item)]
    refused = run("agentic-rag", *command, "--data-dir", str(data))
    assert error_line(refused).startswith(f"agentic-rag keys create: error: {reason}")
    assert not data.exists()


def test_keys_create_with_an_expiry_says_when_and_prints_no_database_logs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run(
        "agentic-rag", "keys", "create", "--tenant", "acme", "--expires-in-days", "3650",
        "--data-dir", str(data),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ar_")
    expires = (datetime.now(UTC) + timedelta(days=3650)).strftime("%Y-%m-%d")
    info, note = done.stderr.splitlines()  # nothing else: no INFO lines of the database
    assert info.startswith("id ") and f"expires {expires}" in info
    assert note == "Store the key now: only its hash is kept."
    assert (data / "postgres").resolve() not in postgres_processes().values()  # stopped after


def test_keys_create_with_groups_says_them_and_keys_list_shows_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run(
        "agentic-rag", "keys", "create", "--tenant", "acme", "--groups", "network,knowledge",
        "--data-dir", str(data),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    info = done.stderr.splitlines()[0]
    assert info.endswith("scopes read,write, tool groups knowledge,network"), info
    everything = run("agentic-rag", "keys", "create", "--tenant", "acme", "--data-dir", str(data))
    assert "tool groups" not in everything.stderr
    listed = run("agentic-rag", "keys", "list", "--data-dir", str(data)).stdout.splitlines()
    assert [line.split("groups ")[1].split()[0] for line in listed] == ["knowledge,network", "all"]


# -- refusals at start --------------------------------------------------------------------------


def test_serve_refuses_a_public_address_without_credentials_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    refused = run(
        "agentic-rag", "serve", "--host", "0.0.0.0", "--port", str(free_port()),
        "--data-dir", str(data),
        "--log-level", "warning", AGENTIC_RAG_LOG_FORMAT="text",
    )  # fmt: skip
    assert refused.returncode == 2
    line = one_line(refused)
    assert "refusing to serve 0.0.0.0 without credentials" in line
    assert f"(agentic-rag keys create --tenant NAME --data-dir {data})" in line
    assert (data / "postgres").resolve() not in postgres_processes().values()


def test_jwt_without_an_issuer_is_refused_before_postgres_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    refused = run("agentic-rag", "serve", "--data-dir", str(data), AGENTIC_RAG_JWT_SECRET="s" * 40)
    assert refused.returncode == 2
    assert one_line(refused) == (
        "agentic-rag: settings: JWT needs AGENTIC_RAG_JWT_ISSUER and AGENTIC_RAG_JWT_AUDIENCE: "
        "every token's iss and aud are checked"
    )  # without pydantic's "Value error, "
    assert not data.exists()


def test_mcp_over_stdio_does_not_warn_about_other_callers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run("agentic-rag", "mcp", "--data-dir", str(data), "--log-level", "info")
    assert done.returncode == 0, done.stderr  # stdin is empty: the client left at once
    assert "joined" in done.stderr  # the engine started (its exposure is checked before this)
    assert "open local mode" not in done.stderr
    assert "every caller on this machine" not in done.stderr

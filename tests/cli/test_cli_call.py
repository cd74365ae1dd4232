"""Every skill from the command line, as a user runs it: `agentic-rag skills` lists them,
`agentic-rag call SKILL ARGUMENTS` runs one (on the local data, or on a running server), and
`agentic-rag peers add | list | remove` keeps the agent network's peers."""

import json
from pathlib import Path

from agentic_rag.cli.skill_commands import first_sentence
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.skills.help import default_registry
from tests.support.cli import one_line, run
from tests.support.live import live_server
from tests.support.network import network_server
from tests.support.security import create_key

NOTES = "# Beekeeping\n\nSmoke calms the bees before the keeper opens the hive.\n"
ALLOW_LOOPBACK_PEERS = {"AGENTIC_RAG_PEERS_ALLOW_PRIVATE": '["127.0.0.1"]'}


def test_skills_lists_every_skill_of_the_product_with_its_description() -> None:
    done = run("agentic-rag", "skills")
    assert done.returncode == 0, done.stderr
    listed = dict(line.split(None, 1) for line in done.stdout.splitlines())
    product = Engine(Settings()).registry
    assert set(listed) == {s.name for s in product}
    assert {"hybrid_retrieve", "ingest_text", "list_agents", "delegate_task"} <= set(listed)
    assert listed["list_agents"] == first_sentence(product.get("list_agents").description)  # type: ignore[union-attr]


def test_call_runs_knowledge_skills_on_the_local_data(database_url: str, data_dir: Path) -> None:
    env = {"DATABASE_URL": database_url, "AGENTIC_RAG_DATA_DIR": str(data_dir)}
    arguments = json.dumps({"text": NOTES, "title": "bees.md"})
    ingested = run("agentic-rag", "call", "ingest_text", arguments, **env)
    assert ingested.returncode == 0, ingested.stderr
    assert "bees.md" in ingested.stdout
    assert "ingest_text: indexing 'bees.md'" in ingested.stderr  # progress, as it happens

    # key=value is read as the field's type (top_k an integer); --json prints the data.
    asked = run(
        "agentic-rag", "call", "hybrid_retrieve", "query=What calms the bees?", "top_k=2", "--json",
        **env,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    assert "Smoke calms the bees" in result["hits"][0]["text"]

    # A skill that fails: its reason in one line, exit 1.
    failed = run("agentic-rag", "call", "delete_document", "document_id=nope", **env)
    assert failed.returncode == 1
    assert one_line(failed).startswith("agentic-rag call: delete_document: no document 'nope'")


def test_bad_arguments_are_refused_in_one_line_before_anything_starts() -> None:
    # A database that does not exist: a call that started anything would fail differently.
    nowhere = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nothing"}
    for arguments, reason in [
        (["top_k=many", "query=bees"], "top_k: Input should be a valid integer"),
        (["top_k=3"], "query: Field required"),
        (["{not json"], "the argument is not JSON"),
        (["query"], "'query' is not key=value or key:=JSON"),
        (["reranker:=[1"], "the value after := is not JSON"),
    ]:
        refused = run("agentic-rag", "call", "hybrid_retrieve", *arguments, **nowhere)
        assert refused.returncode == 2
        line = one_line(refused)
        assert line.startswith("agentic-rag call: ") and reason in line, line
    unknown = run("agentic-rag", "call", "summon", **nowhere)
    assert unknown.returncode == 2
    assert "unknown skill 'summon'; the skills are: " in one_line(unknown)


def test_peers_on_the_local_data(database_url: str, data_dir: Path) -> None:
    env = {"DATABASE_URL": database_url, "AGENTIC_RAG_DATA_DIR": str(data_dir / "cli")}
    with live_server(default_registry(), database_url=database_url, data_dir=data_dir) as peer:
        # Loopback peers are refused unless the setting allows them (the SSRF guard).
        refused = run("agentic-rag", "peers", "add", peer.url, **env)
        assert refused.returncode == 1
        assert "AGENTIC_RAG_PEERS_ALLOW_PRIVATE" in one_line(refused)

        added = run("agentic-rag", "peers", "add", peer.url, **env, **ALLOW_LOOPBACK_PEERS)
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith("registered ") and f"at {peer.url}/: help" in added.stdout
        agent_id = added.stdout.split()[1]

        listed = run("agentic-rag", "peers", "list", **env)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith(f"{agent_id}  healthy ")

    # Another tenant of the same data has no peers.
    other = run("agentic-rag", "peers", "list", "--tenant", "other", **env)
    assert other.stdout == "no peers yet: agentic-rag peers add CARD_URL registers one\n"

    removed = run("agentic-rag", "peers", "remove", agent_id, **env)
    assert removed.returncode == 0 and removed.stdout == f"removed {agent_id}\n"
    assert "no peers yet" in run("agentic-rag", "peers", "list", **env).stdout
    again = run("agentic-rag", "peers", "remove", agent_id, **env)
    assert again.returncode == 1
    assert one_line(again) == (
        f"agentic-rag peers remove: no peer {agent_id!r} is registered for this tenant"
    )


def test_peers_and_call_against_a_running_server(database_url: str, data_dir: Path) -> None:
    key = create_key(database_url, "acme", ["read", "write"])
    with (
        network_server(database_url, data_dir / "peer") as peer,
        network_server(database_url, data_dir / "us", peers_allow_private=["127.0.0.1"]) as us,
    ):
        remote = {"AGENTIC_RAG_URL": us.url, "AGENTIC_RAG_API_KEY": key}
        added = run("agentic-rag", "peers", "add", peer.url, **remote)
        assert added.returncode == 0, added.stderr
        agent_id = added.stdout.split()[1]
        assert agent_id in run("agentic-rag", "peers", "list", **remote).stdout

        # The discovery skill on the server sees the peer the CLI registered, for acme.
        agents = run("agentic-rag", "call", "list_agents", "--json", **remote)
        assert agents.returncode == 0, agents.stderr
        listed = json.loads(agents.stdout)["agents"]
        assert [(a["agent_id"], a["endpoint_url"]) for a in listed] == [(agent_id, f"{peer.url}/")]
        text = run("agentic-rag", "call", "list_agents", "capability=find_capability", **remote)
        # The peer is this server: its card declares A2A 1.0 (supportedInterfaces) beside 0.3.
        assert f"({agent_id}, healthy, A2A 1.0) at {peer.url}/" in text.stdout

        removed = run("agentic-rag", "peers", "remove", agent_id, **remote)
        assert removed.returncode == 0, removed.stderr
        assert "no peers yet" in run("agentic-rag", "peers", "list", **remote).stdout
        gone = run("agentic-rag", "peers", "remove", agent_id, **remote)
        assert gone.returncode == 1
        assert "HTTP 404: no agent" in one_line(gone)

        # Without the key the server refuses, in one line.
        refused = run("agentic-rag", "call", "list_agents", AGENTIC_RAG_URL=us.url)
        assert refused.returncode == 1
        assert "HTTP 401" in one_line(refused)

        # A key whose groups leave the skill out is refused before any task, in its words.
        searcher = create_key(database_url, "acme", ["read", "write"], groups=["knowledge"])
        outside = run(
            "agentic-rag", "call", "list_agents", AGENTIC_RAG_URL=us.url,
            AGENTIC_RAG_API_KEY=searcher,
        )  # fmt: skip
        assert outside.returncode == 1
        assert "'list_agents' is in the group 'network', which this credential does not select" in (
            one_line(outside)
        )

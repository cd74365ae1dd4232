"""Every command on a data directory that a running server holds goes to that server, as a
second client of it, and says so: the server's settings decide (here its SSRF allow-list), and a
refusal names the process whose setting decided it.

The CLI and `serve` run in processes of their own, as a user runs them, on a real PostgreSQL,
with a site of three pages on loopback.
"""

import json
from pathlib import Path

from tests.support.cli import run, serving
from tests.support.knowledge import bee_site
from tests.support.live import free_port, serve_in_thread

ALLOW_PRIVATE = "AGENTIC_RAG_INGEST_ALLOW_PRIVATE"


def test_commands_on_a_data_directory_go_to_the_server_that_holds_it(
    database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    # The CLI's environment does not allow loopback addresses; the server's does.
    env = {"DATABASE_URL": database_url, "AGENTIC_RAG_GRAPH_EMBEDDED": "true"}
    here = ("--data-dir", str(data_dir))
    server_env = {
        **env,
        ALLOW_PRIVATE: "127.0.0.1",
        "AGENTIC_RAG_INGEST_HOST_INTERVAL_SECONDS": "0",
    }
    with (
        serve_in_thread(bee_site()) as site,
        serving(data_dir, tmp_path / "server.log", **server_env) as server,
    ):
        asking = f"asking the server at {server.url} (pid {server.process.pid})"
        ingested = run("agentic-rag", "ingest", f"{site}/", *here, **env)
        assert ingested.returncode == 0, ingested.stderr
        assert f"agentic-rag ingest: {asking}, which holds {data_dir}" in ingested.stderr
        assert "ingested 3, unchanged 0" in ingested.stdout

        # Refused by the server's allow-list, which the message names with the server.
        other = f"http://127.0.0.2:{free_port()}/"
        refused = run("agentic-rag", "ingest", other, *here, **env)
        assert refused.returncode == 1
        assert f"agentic-rag ingest: the server at {server.url}: URL refused" in refused.stderr
        assert ALLOW_PRIVATE in refused.stderr and "Traceback" not in refused.stderr

        # A page of the site again: the site's source, refreshed.
        again = run("agentic-rag", "ingest", f"{site}/winter", *here, **env)
        assert again.returncode == 0, again.stderr
        assert f"is a page of {site}/, ingested before" in again.stdout

        listed = run("agentic-rag", "sources", *here, **env)
        assert listed.returncode == 0, listed.stderr
        assert asking in listed.stderr
        (line,) = listed.stdout.splitlines()
        assert " 3 docs " in line and line.endswith(f"Beekeeping notes  {site}/")

        called = run("agentic-rag", "call", "list_sources", "--json", *here, **env)
        assert called.returncode == 0, called.stderr
        assert f"agentic-rag call: {asking}" in called.stderr
        (source,) = json.loads(called.stdout)["sources"]
        assert (source["title"], source["documents"]) == ("Beekeeping notes", 3)

        peers = run("agentic-rag", "peers", "list", *here, **env)
        assert peers.returncode == 0, peers.stderr
        assert f"agentic-rag peers list: {asking}" in peers.stderr

        # The server gone, this process decides with its own settings, and says so.
        server.process.terminate()
        server.process.wait(timeout=60)
        alone = run("agentic-rag", "ingest", f"{site}/smoke", *here, **env)
    assert alone.returncode == 1
    assert "asking the server" not in alone.stderr
    assert ALLOW_PRIVATE in alone.stderr and "failed in this process)" in alone.stderr

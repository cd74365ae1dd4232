"""`GET /`: the page that says where things are, for a browser or a client that asks for JSON."""

from pathlib import Path

import httpx
import pytest

from agentic_rag.home import DOCS, quality
from conformance.skills import conformance_registry
from tests.support.live import LiveServer, live_server
from tests.support.security import create_key

ROOT = Path(__file__).resolve().parents[2]
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_a_browser_gets_a_page_naming_the_card_the_endpoints_and_the_docs(
    sut: LiveServer,
) -> None:
    response = httpx.get(sut.url + "/", headers={"Accept": BROWSER})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert '<a href="/.well-known/agent.json">' in page
    assert "<code>/mcp</code>" in page and "<code>POST /</code>" in page
    assert all(f"<code>{path}</code>" in page for path in DOCS.values())


def test_a_client_asking_for_json_gets_the_links(sut: LiveServer) -> None:
    response = httpx.get(sut.url + "/", headers={"Accept": "application/json"})
    assert response.headers["content-type"].startswith("application/json")
    links = response.json()
    assert links["agentCard"] == f"{sut.url}/.well-known/agent.json"
    assert links["agentCardV030"] == f"{sut.url}/.well-known/agent-card.json"
    assert (links["a2a"], links["mcp"]) == (f"{sut.url}/", f"{sut.url}/mcp")
    assert links["docs"] == DOCS
    card = httpx.get(links["agentCard"]).json()
    assert card["url"].rstrip("/") == links["a2a"].rstrip("/")
    assert links["name"] == card["name"]


def test_head_answers_without_a_body(sut: LiveServer) -> None:
    response = httpx.head(sut.url + "/")
    assert response.status_code == 200 and response.content == b""


def test_the_documents_it_names_are_in_the_repository() -> None:
    missing = [path for path in DOCS.values() if not (ROOT / path).is_file()]
    assert not missing


def test_the_page_is_public_while_json_rpc_needs_a_credential(
    database_url: str, data_dir: Path
) -> None:
    create_key(database_url, "acme", ["read", "write"])
    with live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s:
        page = httpx.get(s.url + "/", headers={"Accept": "application/json"})
        call = httpx.post(
            s.url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}
        )
    assert page.status_code == 200 and page.json()["mcp"] == f"{s.url}/mcp"
    assert call.status_code == 401
    assert call.json()["error"]["code"] == -32010


@pytest.mark.parametrize(
    ("accept", "wants_json"),
    [
        ("", False),
        ("*/*", False),
        (BROWSER, False),
        ("application/json", True),
        ("application/*", True),
        ("application/json, text/html;q=0.5", True),
        ("text/html;q=0.5, application/json;q=0.4", False),
        ("application/json;q=0, */*", False),
        ("application/json;q=nan, text/html;q=0.1", False),
        ("*/*;q=0.1, application/json", True),
    ],
)
def test_json_only_when_the_accept_header_prefers_it(accept: str, wants_json: bool) -> None:
    assert (quality(accept, "application/json") > quality(accept, "text/html")) is wants_json

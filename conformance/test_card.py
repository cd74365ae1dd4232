"""The Agent Card at its two well-known paths (docs/a2a-notes.md §1, §7, §10)."""

from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from conformance.support import SCHEMA_0_3_0, Rpc, assert_valid, new_id


@pytest.fixture(scope="module")
def card_0_3(http: httpx.Client, sut_url: str) -> dict[str, Any]:
    response = http.get(f"{sut_url}/.well-known/agent-card.json")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("path", ["/.well-known/agent.json", "/.well-known/agent-card.json"])
def test_card_is_served_as_json(http: httpx.Client, sut_url: str, path: str) -> None:
    """§1, §10: both well-known paths answer 200 with a JSON Agent Card."""
    response = http.get(f"{sut_url}{path}")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    assert isinstance(response.json(), dict)


def test_agent_json_is_a_valid_0_2_1_agent_card(card: dict[str, Any]) -> None:
    """§7: `/.well-known/agent.json` is an `AgentCard` of the 0.2.1 schema."""
    assert_valid(card, "AgentCard")


def test_agent_json_is_labelled_0_2_1_if_it_names_a_protocol(card: dict[str, Any]) -> None:
    """§10: the card at `agent.json` speaks for 0.2.1 (`protocolVersion` is 0.2.5+ only)."""
    assert card.get("protocolVersion", "0.2.1") == "0.2.1"


def test_agent_card_json_is_labelled_0_3_0_over_jsonrpc(card_0_3: dict[str, Any]) -> None:
    """§10: `agent-card.json` says 0.3.0 and JSONRPC, so the a2a-sdk 1.x client uses its
    v0.3 compat layer (a "0.2.x" label gets "no compatible transports found")."""
    assert card_0_3["protocolVersion"] == "0.3.0"
    assert card_0_3["preferredTransport"] == "JSONRPC"


def test_agent_card_json_is_a_valid_0_3_0_agent_card(card_0_3: dict[str, Any]) -> None:
    """§9, §10: a card that says 0.3.0 must be an `AgentCard` of the 0.3.0 schema."""
    assert_valid(card_0_3, "AgentCard", SCHEMA_0_3_0)


def test_agent_card_json_is_also_a_valid_0_2_1_agent_card(card_0_3: dict[str, Any]) -> None:
    """§7, §9: the 0.3.0 additions are extra fields; the card stays a 0.2.1 `AgentCard`."""
    assert_valid(card_0_3, "AgentCard")


def test_both_cards_name_the_same_endpoint(card: dict[str, Any], card_0_3: dict[str, Any]) -> None:
    """§10: one server, one JSON-RPC endpoint, whichever card a client reads."""
    assert card_0_3["url"] == card["url"]


def test_card_url_is_absolute(card: dict[str, Any]) -> None:
    """§7: `url` is an absolute URL (the JSON-RPC endpoint)."""
    url = urlparse(card["url"])
    assert url.scheme in ("http", "https")
    assert url.netloc


def test_card_url_is_the_json_rpc_endpoint(rpc: Rpc) -> None:
    """§1: every RPC is an HTTP POST to `AgentCard.url`."""
    rpc.error("tasks/get", {"id": new_id("no-such-task-")}, code=-32001)


def test_card_declares_streaming_and_push_notifications(card: dict[str, Any]) -> None:
    """§2, §7: message/stream, tasks/resubscribe and push configs need these capabilities."""
    assert card["capabilities"].get("streaming") is True
    assert card["capabilities"].get("pushNotifications") is True


def test_card_lists_skills(card: dict[str, Any]) -> None:
    """§7: `skills` is required; this agent has at least one."""
    assert len(card["skills"]) >= 1

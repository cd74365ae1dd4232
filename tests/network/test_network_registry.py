"""The registry of peers: Agent Cards of every supported version (and the seed's declaration)
become one record; peers are fetched through the SSRF guard; each tenant sees only its own.
"""

from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import types as v03
from a2a.types import a2a_pb2 as v10
from google.protobuf.json_format import MessageToDict

from agentic_rag.a2a.card import agent_card, card_documents
from agentic_rag.config import Settings
from agentic_rag.network.cards import CardError, describe_card
from agentic_rag.skills.help import default_registry
from tests.support.network import conforms, declaration, network_server, problem
from tests.support.security import create_key


def official_v10_card() -> dict[str, Any]:
    """A 1.0 card as an a2a-sdk 1.x server serves it (protobuf JSON)."""
    card = v10.AgentCard(
        name="translator",
        description="Translates text",
        version="2.1.0",
        supported_interfaces=[
            v10.AgentInterface(
                url="https://translate.example/rpc",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            ),
            v10.AgentInterface(url="https://translate.example/grpc", protocol_binding="GRPC"),
        ],
        capabilities=v10.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[v10.AgentSkill(id="translate", name="Translate", description="x", tags=["lang"])],
        security_requirements=[
            v10.SecurityRequirement(schemes={"oauth": v10.StringList(list=["t"])})
        ],
    )
    return MessageToDict(card)


def official_v03_card() -> dict[str, Any]:
    card = v03.AgentCard(
        name="summarizer",
        description="Summarises",
        url="https://summary.example/",
        version="1.0.0",
        protocol_version="0.3.0",
        capabilities=v03.AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json"],
        skills=[v03.AgentSkill(id="summarize", name="Summarize", description="y", tags=["text"])],
        security=[{"apiKey": []}],
    )
    return card.model_dump(mode="json", by_alias=True, exclude_none=True)


def own_card(version: str) -> dict[str, Any]:
    settings = Settings(public_url="https://rag.example")
    v021, v030 = card_documents(agent_card(settings, default_registry()))
    import orjson

    document: dict[str, Any] = orjson.loads(v021 if version == "0.2.1" else v030)
    return document


@pytest.mark.parametrize(
    ("card", "version", "endpoint", "skill", "security"),
    [
        (own_card("0.2.1"), "0.2.1", "https://rag.example/", "help", ()),
        (own_card("0.3.0"), "1.0", "https://rag.example/", "help", ()),
        (official_v03_card(), "0.3.0", "https://summary.example/", "summarize", ({"apiKey": []},)),
        (
            official_v10_card(),
            "1.0",
            "https://translate.example/rpc",
            "translate",
            ({"oauth": ["t"]},),
        ),
    ],
    ids=[
        "0.2.1 (this server)",
        "agent-card.json (this server: 1.0 beside 0.3)",
        "0.3.0 (a2a-sdk)",
        "1.0 (a2a-sdk)",
    ],
)
def test_cards_of_every_supported_version_become_one_record(
    card: dict[str, Any], version: str, endpoint: str, skill: str, security: tuple[Any, ...]
) -> None:
    described = describe_card(card, "https://cards.example/card.json")
    assert described.protocol_version == version
    assert described.endpoint == endpoint  # the JSON-RPC interface, whatever else is offered
    assert skill in {s.id for s in described.skills}
    assert described.security == security
    assert described.card == card and described.card_url == "https://cards.example/card.json"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda c: c.pop("skills"), "skills: Field required"),
        (lambda c: c.update(url=7), "url: Input should be a valid string"),
        (lambda c: c.update(protocolVersion="2.0"), "protocolVersion '2.0' is not supported"),
        (lambda c: c.update(preferredTransport="GRPC"), "offers no JSON-RPC interface"),
    ],
    ids=["no skills", "url not a string", "unknown version", "no JSON-RPC"],
)
def test_invalid_cards_are_refused_with_the_reason(change: Any, reason: str) -> None:
    card = official_v03_card()
    change(card)
    with pytest.raises(CardError, match=reason):
        describe_card(card)


def test_a_v10_card_without_a_jsonrpc_interface_is_refused() -> None:
    card = official_v10_card()
    card["supportedInterfaces"] = card["supportedInterfaces"][1:]
    with pytest.raises(CardError, match="no JSON-RPC interface"):
        describe_card(card)


def test_a_peer_is_registered_by_its_card_url_and_updated_when_registered_again(
    database_url: str, data_dir: Path
) -> None:
    with (
        network_server(database_url, data_dir / "peer") as peer,
        network_server(database_url, data_dir / "us", peers_allow_private=["127.0.0.1"]) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        # The agent's base URL: its card is found at the well-known path (0.3 first).
        first = conforms(
            client.post("/a2a/agents/register", json={"card_url": peer.url}), "Registered", 201
        )
        agent = first["agent"]
        assert agent["protocol_version"] == "1.0"  # the card's newest interface
        assert agent["endpoint_url"] == f"{peer.url}/"
        assert agent["card_url"] == f"{peer.url}/.well-known/agent-card.json"
        assert {"help", "list_agents", "find_capability"} <= {
            c["name"] for c in agent["capabilities"]
        }
        assert agent["health_status"] == "healthy"  # its card was just fetched

        # The same agent by its 0.2.1 card: the same record, updated.
        again = conforms(
            client.post(
                "/a2a/agents/register", json={"card_url": f"{peer.url}/.well-known/agent.json"}
            ),
            "Registered",
            201,
        )
        assert again["agent_id"] == first["agent_id"]
        assert again["registered_at"] == first["registered_at"]
        assert again["agent"]["protocol_version"] == "0.2.1"
        listed = conforms(client.get("/a2a/agents"), "AgentList")["agents"]
        assert [a["agent_id"] for a in listed] == [first["agent_id"]]

        assert client.delete(f"/a2a/agents/{first['agent_id']}").status_code == 204
        problem(client.get(f"/a2a/agents/{first['agent_id']}"), 404, "not-found")
        assert conforms(client.get("/a2a/agents"), "AgentList")["agents"] == []

        # A URL that serves no card.
        missing = problem(
            client.post("/a2a/agents/register", json={"card_url": f"{peer.url}/nothing.json"}),
            502,
            "card-unreachable",
        )
        assert "HTTP 404" in missing["detail"]


def test_peers_on_private_addresses_need_the_setting(database_url: str, data_dir: Path) -> None:
    with (
        network_server(database_url, data_dir) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        for body in (
            {"card_url": us.url},
            declaration("http://10.1.2.3:9000/", "summarize"),
            declaration("http://localhost:9000/", "summarize"),
            {"card": {**official_v03_card(), "url": "http://192.168.1.20/"}},
        ):
            refused = problem(client.post("/a2a/agents/register", json=body), 422, "unsafe-url")
            assert "AGENTIC_RAG_PEERS_ALLOW_PRIVATE" in refused["detail"]
        assert conforms(client.get("/a2a/agents"), "AgentList")["agents"] == []


def test_tenants_cannot_see_each_others_peers(database_url: str, data_dir: Path) -> None:
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    reader_key = create_key(database_url, "alpha", ["read"])
    with (
        network_server(database_url, data_dir, peers_allow_private=["127.0.0.1"]) as us,
        httpx.Client(base_url=us.url, headers={"X-API-Key": alpha_key}) as alpha,
        httpx.Client(base_url=us.url, headers={"X-API-Key": beta_key}) as beta,
        httpx.Client(base_url=us.url, headers={"X-API-Key": reader_key}) as reader,
    ):
        body = declaration("http://127.0.0.1:9/", "summarize")
        agent_id = conforms(alpha.post("/a2a/agents/register", json=body), "Registered", 201)[
            "agent_id"
        ]

        assert conforms(beta.get("/a2a/agents"), "AgentList")["agents"] == []
        offered = conforms(beta.get("/a2a/capabilities?capability=summarize"), "CapabilityList")
        assert offered["capabilities"] == []
        for foreign in (
            beta.get(f"/a2a/agents/{agent_id}"),
            beta.post(f"/a2a/agents/{agent_id}/heartbeat"),
            beta.delete(f"/a2a/agents/{agent_id}"),
        ):
            problem(foreign, 404, "not-found")
        # The same endpoint registered by another tenant is another tenant's record.
        own = conforms(beta.post("/a2a/agents/register", json=body), "Registered", 201)
        assert own["agent_id"] != agent_id

        # Reading needs `read`, registering `write`.
        assert [
            a["agent_id"] for a in conforms(reader.get("/a2a/agents"), "AgentList")["agents"]
        ] == [agent_id]
        forbidden = problem(reader.post("/a2a/agents/register", json=body), 403, "forbidden")
        assert "'write'" in forbidden["detail"]
        assert conforms(alpha.get(f"/a2a/agents/{agent_id}"), "AgentRecord")["agent_id"] == agent_id

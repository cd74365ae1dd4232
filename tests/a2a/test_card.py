"""The Agent Card: derived from the registry, its URL from the configured public base URL."""

from pathlib import Path

import httpx
import jsonschema
import orjson

from conformance.skills import conformance_registry
from tests.support.live import live_server

SPEC = Path(__file__).resolve().parents[2] / "spec"


def test_the_card_url_is_the_configured_public_url(database_url: str, data_dir: Path) -> None:
    public = "https://agents.example.com/rag"
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        public_url=public + "/",
    ) as server:
        v021 = httpx.get(server.url + "/.well-known/agent.json").json()
        v030 = httpx.get(server.url + "/.well-known/agent-card.json").json()
    assert v021["url"] == v030["url"] == public + "/"
    schema = orjson.loads((SPEC / "a2a-v0.2.1.schema.json").read_bytes())
    jsonschema.validate(v021, {**schema, "$ref": "#/definitions/AgentCard"})
    assert [s["id"] for s in v021["skills"]] == [s.name for s in conformance_registry()]

"""The Agent Card: derived from the registry, its URL from the configured public base URL."""

from pathlib import Path

import httpx
import jsonschema
import orjson

from agentic_rag.a2a.card import agent_card
from agentic_rag.a2a.invocation import reads_media_type
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
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


def test_each_skill_lists_the_files_it_reads_among_its_input_modes() -> None:
    """ingest_pdf takes a PDF in a FilePart, so its input modes say so; a skill that takes
    no file reads text and JSON only."""
    registry = Engine(Settings()).registry  # built, not started: no skill runs here
    card = agent_card(Settings(), registry)
    modes = {skill.id: skill.input_modes for skill in card.skills}
    assert modes["ingest_pdf"] == ["text/plain", "application/json", "application/pdf"]
    assert modes["hybrid_retrieve"] == ["text/plain", "application/json"]
    assert card.default_input_modes == ["text/plain", "application/json"]
    assert reads_media_type(registry, "Application/PDF; name=x.pdf")
    assert not reads_media_type(registry, "application/x-unsupported-tck-type")

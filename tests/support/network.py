"""What the agent network's tests share: a real server with the discovery skills, answers checked
against spec/network-openapi.json, and peers' cards and declarations."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.network.delegation_skills import add_delegation_skills
from agentic_rag.network.skills import add_network_skills
from agentic_rag.skills.help import default_registry
from tests.support.live import LiveServer, free_port, serve_in_thread

SPEC = Path(__file__).resolve().parents[2] / "spec" / "network-openapi.json"
_COMPONENTS = json.loads(SPEC.read_text())["components"]
PROBLEM_JSON = "application/problem+json"


@contextmanager
def network_server(database_url: str, data_dir: Path, **settings: Any) -> Iterator[LiveServer]:
    """This server with `help` and the network's skills (no knowledge engine: it starts fast)."""
    config = Settings(
        host="127.0.0.1",
        port=free_port(),
        data_dir=data_dir,
        database_url=database_url,
        **settings,
    )
    app = build_app(config, default_registry())
    engine: Engine = app.state.engine
    add_network_skills(engine.registry, engine.network, config.agent_name)
    add_delegation_skills(engine.registry, engine.delegation, engine.orchestrator)
    with serve_in_thread(app, lifespan="on", port=config.port) as url:
        yield LiveServer(url, config)


def conforms(response: httpx.Response, schema: str, status: int = 200) -> Any:
    """The answer's JSON, after checking its status and that it is what the document says."""
    assert response.status_code == status, response.text
    body = response.json()
    validator = Draft202012Validator(
        {"$ref": f"#/components/schemas/{schema}", "components": _COMPONENTS}
    )
    errors = [e.message for e in validator.iter_errors(body)]
    assert not errors, errors
    return body


def problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    """An RFC 7807 problem of this status and kind."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body: dict[str, Any] = conforms(response, "Problem", status)
    assert body["type"] == f"urn:agentic-rag:problem:{kind}"
    assert body["status"] == status
    return body


def declaration(
    endpoint: str, *capabilities: str, agent_type: str = "summarizer"
) -> dict[str, Any]:
    """The seed's registration of an agent at `endpoint` offering `capabilities`."""
    return {
        "agent_type": agent_type,
        "endpoint_url": endpoint,
        "capabilities": [
            {
                "name": name,
                "description": f"does {name}",
                "parameters_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
                "returns_schema": {"type": "object", "properties": {"summary": {"type": "string"}}},
            }
            for name in capabilities
        ],
    }

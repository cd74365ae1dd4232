"""Generate `spec/network-openapi.json`, the OpenAPI 3.1 document of the agent network's REST
routes (`/a2a/...`, src/agentic_rag/network/rest.py), from the models those routes exchange.

    .venv/bin/python scripts/generate_network_openapi.py           # write the document
    .venv/bin/python scripts/generate_network_openapi.py --check   # exit 1 if it drifted

The paths are written here; every schema comes from the pydantic models of
`agentic_rag.network.records` (and the delegation request of `agentic_rag.network.delegation`),
so the document and the routes cannot disagree. tests/network/test_network_rest.py checks that the
committed file equals this script's output, and validates the routes' answers against it.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from agentic_rag.network import records
from agentic_rag.network.delegation import DelegationRequest
from agentic_rag.network.rest import PREFIX, SKILLS

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "spec" / "network-openapi.json"

MODELS: list[type[BaseModel]] = [
    records.RegisterRequest,
    records.Registered,
    records.AgentRecord,
    records.AgentList,
    records.Heartbeat,
    records.CapabilityList,
    DelegationRequest,
    records.DelegationAccepted,
    records.DelegatedTask,
    records.SessionList,
    records.SessionRecord,
]

PROBLEM = {
    "type": "object",
    "description": "RFC 7807 problem details. `type` is urn:agentic-rag:problem:<kind> "
    "(docs/network.md lists the kinds); validation problems add `errors`.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri-reference"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "problem"],
                "properties": {"field": {"type": "string"}, "problem": {"type": "string"}},
            },
        },
    },
}


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}


def _answer(description: str, schema: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description}
    if schema is not None:
        answer["content"] = _json(schema)
    return answer


def _problems(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "The body is not JSON.",
        401: "No valid credential.",
        403: "The credential lacks the scope, or the group of tools of the skill the route is.",
        404: "No such agent, task or session for this tenant.",
        408: "The task did not finish within wait_seconds.",
        409: "The task is final already.",
        413: "The body is too large.",
        415: "The body is not application/json.",
        422: "Invalid fields, a refused URL, or an invalid card.",
        429: "Rate limited (Retry-After says when to retry).",
        502: "The Agent Card could not be fetched.",
    }
    content = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    return {str(s): {"description": reasons[s], "content": content} for s in (401, 429, *statuses)}


def _operation(
    operation_id: str,
    summary: str,
    scope: str,
    answers: dict[str, Any],
    *,
    body: str | None = None,
    parameters: list[dict[str, Any]] | None = None,
    problems: tuple[int, ...] = (),
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "description": f"Needs the scope `{scope}`.",
        "security": [{"apiKey": []}, {"bearer": []}],
    }
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {"required": True, "content": _json(body)}
        problems = (400, 413, 415, 422, *problems)
    operation["responses"] = {**answers, **_problems(403, *problems)}
    return operation


def _path_id(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


CAPABILITY = _query("capability", {"type": "string"}, "A skill's id, name or tag.")


def paths() -> dict[str, Any]:
    return {
        "/a2a/agents/register": {
            "post": _operation(
                "registerAgent",
                "Register a peer (the seed's declaration, a card URL, or a card); again: update",
                "write",
                {"201": _answer("Registered.", "Registered")},
                body="RegisterRequest",
                problems=(502,),
            )
        },
        "/a2a/agents": {
            "get": _operation(
                "listAgents",
                "The tenant's peers, healthy first",
                "read",
                {"200": _answer("The peers.", "AgentList")},
                parameters=[
                    CAPABILITY,
                    _query(
                        "healthy_only",
                        {"type": "boolean", "default": False},
                        "Only healthy peers.",
                    ),
                ],
                problems=(422,),
            )
        },
        "/a2a/agents/{agent_id}": {
            "get": _operation(
                "getAgent",
                "One peer",
                "read",
                {"200": _answer("The peer.", "AgentRecord")},
                parameters=[_path_id("agent_id")],
                problems=(404,),
            ),
            "delete": _operation(
                "removeAgent",
                "Remove a peer",
                "write",
                {"204": _answer("Removed.")},
                parameters=[_path_id("agent_id")],
                problems=(404,),
            ),
        },
        "/a2a/agents/{agent_id}/heartbeat": {
            "post": _operation(
                "heartbeat",
                "A peer's heartbeat: it is healthy until the timeout passes without another",
                "write",
                {"200": _answer("Recorded.", "Heartbeat")},
                parameters=[_path_id("agent_id")],
                problems=(404,),
            )
        },
        "/a2a/capabilities": {
            "get": _operation(
                "listCapabilities",
                "The capabilities of this agent (agent_id `self`) and of every healthy peer",
                "read",
                {"200": _answer("The capabilities.", "CapabilityList")},
                parameters=[CAPABILITY],
            )
        },
        "/a2a/tasks/delegate": {
            "post": _operation(
                "delegateTask",
                "Delegate a task to a peer (or the best one); a local task follows it",
                "write",
                {"202": _answer("Accepted.", "DelegationAccepted")},
                body="DelegationRequest",
            )
        },
        "/a2a/tasks/{task_id}/result": {
            "get": _operation(
                "delegationResult",
                "A delegation's task once final, waiting up to wait_seconds",
                "read",
                {"200": _answer("The final task.", "DelegatedTask")},
                parameters=[
                    _path_id("task_id"),
                    _query(
                        "wait_seconds",
                        {"type": "number", "minimum": 0, "maximum": 300, "default": 0},
                        "How long to wait for the task to finish.",
                    ),
                ],
                problems=(404, 408, 422),
            )
        },
        "/a2a/tasks/{task_id}": {
            "delete": _operation(
                "cancelDelegation",
                "Cancel a delegation (and its remote task)",
                "write",
                {"200": _answer("The canceled task.", "DelegatedTask")},
                parameters=[_path_id("task_id")],
                problems=(404, 409),
            )
        },
        "/a2a/sessions": {
            "get": _operation(
                "listSessions",
                "The tenant's active sessions (A2A contexts)",
                "read",
                {"200": _answer("The sessions.", "SessionList")},
            )
        },
        "/a2a/sessions/{context_id}": {
            "get": _operation(
                "getSession",
                "A session: its participants, tasks and delegations",
                "read",
                {"200": _answer("The session.", "SessionRecord")},
                parameters=[_path_id("context_id")],
                problems=(404,),
            )
        },
    }


def _with_skills(routes: dict[str, Any]) -> dict[str, Any]:
    """`routes`, each operation that is a skill (`rest.SKILLS`) saying so and what it needs."""
    for path, operations in routes.items():
        for method, operation in operations.items():
            skill = SKILLS.get((method.upper(), path.removeprefix(PREFIX)))
            if skill is not None:
                operation["description"] += (
                    f" It is the skill `{skill}`: a credential that selects groups of tools "
                    "needs that skill's group."
                )
    return routes


def document() -> dict[str, Any]:
    _, definitions = models_json_schema(
        [(m, "serialization" if m.__name__ not in _REQUESTS else "validation") for m in MODELS],
        ref_template="#/components/schemas/{model}",
    )
    schemas = dict(sorted(definitions["$defs"].items()))
    schemas["Problem"] = PROBLEM
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agentic-rag agent network",
            "version": "0.1.0",
            "description": "The operators' REST routes of the agent network (docs/network.md). "
            "Generated by scripts/generate_network_openapi.py: do not edit.",
        },
        "paths": _with_skills(paths()),
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
    }


_REQUESTS = {"RegisterRequest", "DelegationRequest"}


def render() -> str:
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file drifted")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run {Path(__file__).name}")
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

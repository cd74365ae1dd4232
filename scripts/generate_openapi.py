"""Generate `spec/openapi.json`, the OpenAPI 3.1 document of the HTTP surface, from the A2A schemas.

    .venv/bin/python scripts/generate_openapi.py           # write spec/openapi.json
    .venv/bin/python scripts/generate_openapi.py --check   # exit 1 if it drifted

The paths, the security schemes and a few small schemas (JWKS, SSE event, error bodies) are
written here by hand; every A2A type is copied from the official JSON schemas in `spec/`:

- all definitions of `a2a-v0.2.1.schema.json`, under their own names;
- the 0.2.5/0.3.0 extras the server also accepts (docs/a2a-notes.md §9, §12.9, §12.10) and the
  0.3.0 Agent Card served at `/.well-known/agent-card.json`, with everything they reference, from
  `a2a-v0.3.0.schema.json`, under names prefixed `v030_`.

Two errata are applied to the 0.2.1 definitions, where its schema is looser or stricter than the
specification's own text:

- a response's `id` may be `null`. JSON-RPC 2.0 §5 requires `null` when the request's id cannot be
  read (a parse error or an invalid request), and A2A 0.3.0 types every response id
  `string | integer | null`; 0.2.1 left `null` out.
- `Message.parts` and `Artifact.parts` have at least one item, as the 0.2.1 text says ("must
  contain at least one"); the schema omits `minItems`. The server answers -32602 to a message
  without parts (docs/a2a-notes.md §12.1).

`RPCRequest` also requires `id`: this server supports no notifications (A2A 0.2.2 made `id`
required), and answers a request without one with -32600.

The test suite checks that the committed file equals this script's output.
"""

import argparse
import copy
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
V021 = ROOT / "spec" / "a2a-v0.2.1.schema.json"
V030 = ROOT / "spec" / "a2a-v0.3.0.schema.json"
OUTPUT = ROOT / "spec" / "openapi.json"

V030_PREFIX = "v030_"
# What the server serves beyond 0.2.1, as the 0.3.0 schema defines it.
V030_EXTRA_REQUESTS = [
    "ListTaskPushNotificationConfigRequest",
    "DeleteTaskPushNotificationConfigRequest",
    "GetAuthenticatedExtendedCardRequest",
]
V030_EXTRA_RESPONSES = [
    "ListTaskPushNotificationConfigSuccessResponse",
    "DeleteTaskPushNotificationConfigSuccessResponse",
]
V030_ROOTS = [
    *V030_EXTRA_REQUESTS,
    *V030_EXTRA_RESPONSES,
    "AuthenticatedExtendedCardNotConfiguredError",
    "AgentCard",
]
NULL_ID_NOTE = (
    "\n\n(agentic-rag: null when the request's id cannot be read, as JSON-RPC 2.0 §5 requires "
    "and A2A 0.3.0 allows; the 0.2.1 schema omits null.)"
)

PARTS_NOTE = (
    "\n\n(agentic-rag: at least one, as the 0.2.1 text says; the 0.2.1 schema omits minItems.)"
)


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _rewrite_refs(node: Any, prefix: str) -> Any:
    """`#/definitions/X` becomes `#/components/schemas/{prefix}X`, everywhere in `node`."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
                out[key] = f"#/components/schemas/{prefix}{value.removeprefix('#/definitions/')}"
            else:
                out[key] = _rewrite_refs(value, prefix)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(item, prefix) for item in node]
    return node


def _referenced(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = set()
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
                found.add(value.removeprefix("#/definitions/"))
            else:
                found |= _referenced(value)
        return found
    if isinstance(node, list):
        return set().union(*(_referenced(item) for item in node)) if node else set()
    return set()


def _closure(definitions: dict[str, Any], roots: list[str]) -> list[str]:
    """`roots` and every definition they reference, transitively, in the schema's order."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_referenced(definitions[name]) - seen)
    return [name for name in definitions if name in seen]


def _allow_null_response_ids(definitions: dict[str, Any]) -> None:
    for name, definition in definitions.items():
        if not name.endswith("Response"):
            continue
        id_schema = definition.get("properties", {}).get("id")
        if id_schema is None:
            continue
        assert id_schema.get("type") == ["string", "integer"], (name, id_schema)
        id_schema["type"] = ["string", "integer", "null"]
        id_schema["description"] = id_schema.get("description", "") + NULL_ID_NOTE


def _require_parts(definitions: dict[str, Any]) -> None:
    for name in ("Message", "Artifact"):
        parts = definitions[name]["properties"]["parts"]
        assert parts.get("type") == "array" and "minItems" not in parts, (name, parts)
        parts["minItems"] = 1
        parts["description"] = parts.get("description", "") + PARTS_NOTE


def _load(path: Path) -> dict[str, Any]:
    definitions: dict[str, Any] = json.loads(path.read_text())["definitions"]
    return definitions


def _json_rpc_error_body(code: int, description: str) -> dict[str, Any]:
    """A JSON-RPC error response with this code and a null id (answered before the id is read)."""
    return {
        "description": description,
        "allOf": [
            ref("JSONRPCErrorResponse"),
            {
                "type": "object",
                "required": ["id"],
                "properties": {
                    "id": {"type": "null"},
                    "error": {"type": "object", "properties": {"code": {"const": code}}},
                },
            },
        ],
    }


def _own_schemas() -> dict[str, Any]:
    """The schemas of this server's HTTP surface that no A2A schema defines."""
    return {
        "RPCRequest": {
            "description": (
                "One JSON-RPC 2.0 request: the 0.2.1 `A2ARequest` union, or one of the methods of "
                "A2A 0.2.5/0.3.0 this server also serves. `id` is required: notifications are not "
                "supported. Batches (arrays) are refused with -32600."
            ),
            "type": "object",
            "required": ["id"],
            "anyOf": [ref("A2ARequest"), *(ref(V030_PREFIX + n) for n in V030_EXTRA_REQUESTS)],
        },
        "RPCResponse": {
            "description": (
                "One JSON-RPC 2.0 response: the 0.2.1 `JSONRPCResponse` union, or the result of "
                "`tasks/pushNotificationConfig/list` or `/delete`. Errors are answered with HTTP "
                "200 and the request's id (null if it cannot be read)."
            ),
            "anyOf": [
                ref("JSONRPCResponse"),
                *(ref(V030_PREFIX + n) for n in V030_EXTRA_RESPONSES),
            ],
        },
        "StreamEvent": {
            "description": (
                "One server-sent event of `message/stream` or `tasks/resubscribe`: `data` is one "
                "JSON-RPC response whose id is the request's; `id` is the task's event number, "
                "to send back as `Last-Event-ID` to `tasks/resubscribe`. A stream that fails "
                "after it has started sends one error response and closes."
            ),
            "type": "object",
            "required": ["data"],
            "properties": {
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": ref("SendStreamingMessageResponse"),
                },
                "event": {"type": "string"},
                "id": {"type": "string", "pattern": "^[0-9]+$"},
                "retry": {"type": "integer"},
            },
        },
        "RequestTooLarge": _json_rpc_error_body(
            -32600, "The body exceeds the server's `max_body_bytes`."
        ),
        "UnsupportedContentType": _json_rpc_error_body(
            -32600, "The request's Content-Type is not application/json."
        ),
        "AuthenticationRequired": _json_rpc_error_body(
            -32010, "A credential is required, and none or an invalid one was sent."
        ),
        "RateLimited": _json_rpc_error_body(-32012, "Too many requests; see Retry-After."),
        "Forbidden": {
            "description": "The credential is valid but lacks the scope the method needs.",
            "allOf": [
                ref("JSONRPCErrorResponse"),
                {
                    "type": "object",
                    "required": ["id"],
                    "properties": {
                        "error": {"type": "object", "properties": {"code": {"const": -32011}}}
                    },
                },
            ],
        },
        "HTTPError": {
            "description": "The body of an HTTP error outside JSON-RPC: a JSON-RPC error object.",
            "type": "object",
            "required": ["error"],
            "properties": {"error": ref("JSONRPCError")},
        },
        "JWK": {
            "description": "A public key that signs push notifications (RFC 7517, RFC 7518).",
            "type": "object",
            "required": ["kty", "kid", "alg", "use"],
            "properties": {
                "kty": {"type": "string"},
                "kid": {"type": "string"},
                "alg": {"type": "string"},
                "use": {"const": "sig"},
                "crv": {"type": "string"},
                "x": {"type": "string"},
                "y": {"type": "string"},
                "n": {"type": "string"},
                "e": {"type": "string"},
            },
        },
        "HomePage": {
            "description": (
                "Where things are: the Agent Card, the A2A and MCP endpoints (absolute, from the "
                "public URL), and the documents of the repository by topic."
            ),
            "type": "object",
            "required": [
                "name",
                "description",
                "agentCard",
                "agentCardV030",
                "a2a",
                "mcp",
                "docs",
            ],
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "agentCard": {"type": "string", "format": "uri"},
                "agentCardV030": {"type": "string", "format": "uri"},
                "a2a": {"type": "string", "format": "uri"},
                "mcp": {"type": "string", "format": "uri"},
                "docs": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "JWKSet": {
            "description": "The JWK Set of the push notification signing keys (RFC 7517 §5).",
            "type": "object",
            "required": ["keys"],
            "properties": {"keys": {"type": "array", "items": ref("JWK")}},
        },
    }


# Credentials (docs/security.md): none are needed in open local mode, before the first API key
# exists and with JWT off; after that every route but the public documents needs one.
SECURITY: list[dict[str, list[str]]] = [{}, {"apiKey": []}, {"bearer": []}]
SECURITY_SCHEMES = {
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT or API key"},
}


def _refusal(
    name: str, description: str, header: str | None = None, header_description: str = ""
) -> dict[str, Any]:
    response = _json(name, description)
    if header is not None:
        response["headers"] = {
            header: {"description": header_description, "schema": {"type": "string"}}
        }
    return response


def _auth_responses(*, rpc: bool) -> dict[str, Any]:
    responses = {
        "401": _refusal(
            "AuthenticationRequired",
            "No credential, or an invalid one (error -32010).",
            "WWW-Authenticate",
            "A Bearer challenge naming the protected-resource metadata.",
        ),
        "429": _refusal(
            "RateLimited",
            "Too many failed attempts from this address, or calls with this credential "
            "(error -32012).",
            "Retry-After",
            "Seconds to wait.",
        ),
    }
    if rpc:
        responses["403"] = _json(
            "Forbidden", "The credential lacks the scope the method needs (error -32011)."
        )
    return responses


def _json(schema_name: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": ref(schema_name)}},
    }


def _paths() -> dict[str, Any]:
    return {
        "/": {
            "get": {
                "operationId": "home",
                "summary": "Where things are: a page for browsers, JSON for clients that ask",
                "description": (
                    "Public. HTML, unless the Accept header prefers application/json to "
                    "text/html. A2A calls are POSTs to this path."
                ),
                "responses": {
                    "200": {
                        "description": "The page.",
                        "content": {
                            "text/html": {"schema": {"type": "string"}},
                            "application/json": {"schema": ref("HomePage")},
                        },
                    }
                },
            },
            "post": {
                "operationId": "jsonrpc",
                "summary": "A2A JSON-RPC 2.0 endpoint (AgentCard.url)",
                "description": (
                    "Every A2A method is a POST of one JSON-RPC request. `message/stream` and "
                    "`tasks/resubscribe` answer with an event stream once the request is valid; "
                    "every other answer, errors included, is one JSON-RPC response with HTTP 200."
                ),
                "parameters": [
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "description": (
                            "`tasks/resubscribe` only: replay the task's events after this event "
                            "number (an SSE `id`) before the live ones. Anything but a number "
                            "below 2^63 is answered with -32602."
                        ),
                        "schema": {"type": "string", "pattern": "^[0-9]+$"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref("RPCRequest")}},
                },
                "responses": {
                    "200": {
                        "description": (
                            "A JSON-RPC response (application/json), or for the streaming "
                            "methods an event stream of JSON-RPC responses (text/event-stream)."
                        ),
                        "content": {
                            "application/json": {"schema": ref("RPCResponse")},
                            "text/event-stream": {"schema": ref("StreamEvent")},
                        },
                    },
                    "413": _json("RequestTooLarge", "The body is larger than the server accepts."),
                    "415": _json("UnsupportedContentType", "The body is not application/json."),
                    **_auth_responses(rpc=True),
                },
                "security": SECURITY,
            },
        },
        "/.well-known/agent.json": {
            "get": {
                "operationId": "agentCardV021",
                "summary": "The Agent Card, labelled protocolVersion 0.2.1 (A2A 0.2.1 location)",
                "responses": {"200": _json("AgentCard", "The Agent Card.")},
            }
        },
        "/.well-known/agent-card.json": {
            "get": {
                "operationId": "agentCardV030",
                "summary": "The Agent Card, labelled protocolVersion 0.3.0 (A2A 0.3.0 location)",
                "responses": {"200": _json(V030_PREFIX + "AgentCard", "The Agent Card.")},
            }
        },
        "/.well-known/jwks.json": {
            "get": {
                "operationId": "jwks",
                "summary": "The public keys that sign push notifications",
                "responses": {"200": _json("JWKSet", "A JWK Set.")},
            }
        },
        "/agent/authenticatedExtendedCard": {
            "get": {
                "operationId": "authenticatedExtendedCard",
                "summary": "The authenticated extended Agent Card (A2A 0.2.1)",
                "description": (
                    "Served to authenticated callers only. While no authentication is "
                    "configured there is no extended card: 404 with error -32007."
                ),
                "responses": {
                    "200": _json("AgentCard", "The extended Agent Card."),
                    "404": _json("HTTPError", "No extended card is configured (error -32007)."),
                    **_auth_responses(rpc=False),
                },
                "security": SECURITY,
            }
        },
    }


def generate() -> str:
    v021 = copy.deepcopy(_load(V021))
    _allow_null_response_ids(v021)
    _require_parts(v021)
    v030 = _load(V030)
    schemas: dict[str, Any] = {name: _rewrite_refs(d, "") for name, d in v021.items()}
    for name in _closure(v030, V030_ROOTS):
        schemas[V030_PREFIX + name] = _rewrite_refs(v030[name], V030_PREFIX)
    own = _own_schemas()
    assert not set(own) & set(schemas), set(own) & set(schemas)
    schemas.update(own)
    paths = _paths()
    for operations in paths.values():
        for operation in operations.values():
            operation["responses"] = dict(sorted(operation["responses"].items()))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "agentic-rag A2A server",
            "version": project["version"],
            "description": (
                "The HTTP surface of an A2A v0.2.1 agent that also accepts the JSON-RPC methods "
                "of A2A 0.2.5/0.3.0. Generated by scripts/generate_openapi.py from "
                "spec/a2a-v0.2.1.schema.json and spec/a2a-v0.3.0.schema.json: do not edit."
            ),
        },
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run scripts/generate_openapi.py")
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

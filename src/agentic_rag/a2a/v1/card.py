"""The Agent Card of A2A 1.0 (spec §8), derived from the 0.3 card (a2a/card.py) by a2a-sdk's
conversion, with the interfaces this server serves.

`/.well-known/agent-card.json` is read by 0.3 clients and 1.0 clients alike, so it stays the
0.3 document with the two 1.0 fields a 1.0 client needs added: `supportedInterfaces` (1.0
JSON-RPC, 1.0 HTTP+JSON, 0.3 JSON-RPC, in order of preference) and
`capabilities.extendedAgentCard`. 0.3 readers ignore both (0.3 has no closed objects); 1.0
readers ignore the 0.3-only fields (url, preferredTransport, protocolVersion,
supportsAuthenticatedExtendedCard). docs/a2a-notes.md §13.
"""

import hashlib
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as v03
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import Response

# Where the HTTP+JSON binding lives, under the server's base URL (spec §5.3: each interface
# has its own URL). Not `/a2a/`: that prefix is the operators' REST API (docs/network.md).
HTTP_JSON_PREFIX = "/json"


def interfaces(rpc_url: str) -> list[pb.AgentInterface]:
    """The interfaces at `rpc_url` (the JSON-RPC endpoint, `{base}/`), most preferred first."""
    base = rpc_url.rstrip("/")
    return [
        pb.AgentInterface(url=rpc_url, protocol_binding="JSONRPC", protocol_version="1.0"),
        pb.AgentInterface(
            url=base + HTTP_JSON_PREFIX, protocol_binding="HTTP+JSON", protocol_version="1.0"
        ),
        pb.AgentInterface(url=rpc_url, protocol_binding="JSONRPC", protocol_version="0.3"),
    ]


def card(v030: dict[str, Any]) -> pb.AgentCard:
    """The 1.0 card of a 0.3 card document (what GetExtendedAgentCard answers)."""
    converted = conversions.to_core_agent_card(v03.AgentCard.model_validate(v030))
    del converted.supported_interfaces[:]
    converted.supported_interfaces.extend(interfaces(v030["url"]))
    return converted


def shared_document(v030: dict[str, Any]) -> dict[str, Any]:
    """The agent-card.json both generations read: the 0.3 card plus 1.0's fields."""
    v1 = MessageToDict(card(v030))
    capabilities = {
        **v030.get("capabilities", {}),
        "extendedAgentCard": bool(v030.get("supportsAuthenticatedExtendedCard")),
    }
    shared = {
        **v030,
        "supportedInterfaces": v1["supportedInterfaces"],
        "capabilities": capabilities,
    }
    if "securityRequirements" in v1:
        shared["securityRequirements"] = v1["securityRequirements"]
    return shared


# A card changes when keys are created or an upstream MCP server's skills join: a minute.
CARD_MAX_AGE = 60


def served(request: Request, document: bytes) -> Response:
    """A public card with `Cache-Control` and a strong `ETag` (spec §8.6: clients cache it);
    304 when the client's `If-None-Match` names this version."""
    etag = '"' + hashlib.sha256(document).hexdigest()[:32] + '"'
    headers = {"Cache-Control": f"public, max-age={CARD_MAX_AGE}", "ETag": etag}
    wanted = {tag.strip() for tag in request.headers.get("if-none-match", "").split(",")}
    if etag in wanted or "*" in wanted:
        return Response(status_code=304, headers=headers)
    return Response(document, media_type="application/json", headers=headers)

"""What a peer says about itself, read into one shape: Agent Cards (0.2.x, 0.3, 1.0) and the
operators' REST capability declaration.

Cards are validated against their own version's schema: 0.2.x against this server's generated
0.2.1 models, 0.3 against the official a2a-sdk's 0.3 models, 1.0 by the a2a-sdk's own card parser
(which also reads older cards into 1.0). Cards are fetched through the SSRF guard, bounded in
size and time (`CardFetcher`).
"""

from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.types import AgentCard as CardV03
from pydantic import BaseModel, ValidationError

from agentic_rag.network.credentials import PeerCredentials
from agentic_rag.network.peers import PeerSkill
from agentic_rag.schema.a2a import AgentCard as CardV02
from agentic_rag.security.fetch import (
    Fetcher,
    FetchError,
    FetchLimits,
    NotModified,
)
from agentic_rag.security.ssrf import SSRFGuard

# Where a card is looked for when a bare base URL is registered: the 0.3+ path first.
WELL_KNOWN_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
CARD_LIMITS = FetchLimits(max_bytes=1024 * 1024, timeout_seconds=10.0, total_seconds=20.0)
USER_AGENT = "agentic-rag/0.1 (agent network)"
JSONRPC = "JSONRPC"


class CardError(ValueError):
    """A card or declaration that cannot be registered; the message says exactly why."""


@dataclass(frozen=True, slots=True)
class PeerDescription:
    """What registration stores of a peer, before it has an id and a health."""

    name: str
    endpoint: str
    protocol_version: str
    card: dict[str, Any] | None
    card_url: str | None
    skills: tuple[PeerSkill, ...]
    security: tuple[dict[str, Any], ...]


class Capability(BaseModel):
    """One capability of the seed's REST declaration."""

    name: str
    description: str = ""
    parameters_schema: dict[str, Any] | None = None
    returns_schema: dict[str, Any] | None = None


def describe_declaration(
    agent_type: str, endpoint_url: str, capabilities: list[Capability]
) -> PeerDescription:
    """The seed's declaration: an agent of `agent_type` at `endpoint_url` (A2A 0.2.x JSON-RPC,
    like this server) offering `capabilities`."""
    if not capabilities:
        raise CardError("capabilities: an agent must declare at least one capability")
    names = [c.name for c in capabilities]
    if len(set(names)) != len(names):
        raise CardError(f"capabilities: names must be unique, got {names}")
    return PeerDescription(
        name=agent_type,
        endpoint=endpoint_url,
        protocol_version="0.2.1",
        card=None,
        card_url=None,
        skills=tuple(
            PeerSkill(
                id=c.name,
                name=c.name,
                description=c.description,
                tags=(agent_type,),
                input_schema=c.parameters_schema,
                output_schema=c.returns_schema,
            )
            for c in capabilities
        ),
        security=(),
    )


def describe_card(card: Any, card_url: str | None = None) -> PeerDescription:
    """A card of any supported version, validated; raises CardError naming what is wrong."""
    if not isinstance(card, dict):
        raise CardError("an Agent Card must be a JSON object")
    if "supportedInterfaces" in card:
        return _describe_v10(card, card_url)
    version = card.get("protocolVersion", "0.2.1")  # cards before 0.2.5 carry none
    if not isinstance(version, str):
        raise CardError("protocolVersion must be a string")
    if version.startswith("0.2."):
        model: type[BaseModel] = CardV02
    elif version.startswith("0.3."):
        model = CardV03
    elif version.split(".")[0] == "1":
        return _describe_v10(card, card_url)
    else:
        raise CardError(
            f"protocolVersion {version!r} is not supported: 0.2.x, 0.3.x and 1.x cards are"
        )
    try:
        model.model_validate(card)
    except ValidationError as exc:
        raise CardError(f"invalid {version} Agent Card: {_problems(exc)}") from None
    transport = card.get("preferredTransport", JSONRPC)
    endpoint = card["url"]
    if transport != JSONRPC:
        jsonrpc = [
            i.get("url")
            for i in card.get("additionalInterfaces") or []
            if isinstance(i, dict) and i.get("transport") == JSONRPC
        ]
        if not jsonrpc:
            raise CardError(
                f"the card offers no JSON-RPC interface (preferredTransport {transport!r}); "
                "peers are reached over JSON-RPC"
            )
        endpoint = jsonrpc[0]
    return PeerDescription(
        name=card["name"],
        endpoint=endpoint,
        protocol_version=version,
        card=card,
        card_url=card_url,
        skills=tuple(_skill(s) for s in card["skills"]),
        security=tuple(card.get("security") or ()),
    )


def _describe_v10(card: dict[str, Any], card_url: str | None) -> PeerDescription:
    try:
        # The parser rewrites its argument in place (legacy fields into 1.0 ones): give it a copy.
        parsed = parse_agent_card(orjson.loads(orjson.dumps(card)))
    except Exception as exc:  # protobuf's ParseError (its module is untyped), TypeError, ...
        raise CardError(f"invalid 1.0 Agent Card: {exc}") from None
    missing = [f for f in ("name", "description", "version") if not getattr(parsed, f)]
    if missing:
        raise CardError(f"invalid 1.0 Agent Card: {', '.join(missing)} required")
    interfaces = [i for i in parsed.supported_interfaces if i.protocol_binding == JSONRPC]
    if not interfaces or not interfaces[0].url:
        raise CardError(
            "the card offers no JSON-RPC interface in supportedInterfaces; "
            "peers are reached over JSON-RPC"
        )
    for skill in parsed.skills:
        if not (skill.id and skill.name):
            raise CardError("invalid 1.0 Agent Card: every skill needs an id and a name")
    security = [
        {name: list(scopes.list) for name, scopes in requirement.schemes.items()}
        for requirement in parsed.security_requirements
    ]
    by_id = {s.get("id"): s for s in card.get("skills") or [] if isinstance(s, dict)}
    return PeerDescription(
        name=parsed.name,
        endpoint=interfaces[0].url,
        protocol_version=interfaces[0].protocol_version or "1.0",
        card=card,
        card_url=card_url,
        skills=tuple(
            _skill(
                {
                    **by_id.get(s.id, {}),
                    "id": s.id,
                    "name": s.name,
                    "description": s.description,
                    "tags": list(s.tags),
                }
            )
            for s in parsed.skills
        ),
        security=tuple(security),
    )


def _skill(skill: dict[str, Any]) -> PeerSkill:
    """A card's skill; `inputSchema` / `outputSchema`, which some agents add, are kept."""
    schemas = [skill.get(k) for k in ("inputSchema", "outputSchema")]
    return PeerSkill(
        id=skill["id"],
        name=skill["name"],
        description=skill.get("description", ""),
        tags=tuple(skill.get("tags") or ()),
        input_schema=schemas[0] if isinstance(schemas[0], dict) else None,
        output_schema=schemas[1] if isinstance(schemas[1], dict) else None,
    )


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'card'}: {e['msg']}"
        for e in exc.errors(include_url=False)[:5]
    )


class CardFetcher:
    """Fetches Agent Cards through the SSRF guard, for a tenant, with that tenant's peer
    credentials (close it with `aclose`)."""

    def __init__(self, guard: SSRFGuard, credentials: PeerCredentials) -> None:
        self._fetcher = Fetcher(guard, CARD_LIMITS, user_agent=USER_AGENT)
        self._credentials = credentials

    async def aclose(self) -> None:
        await self._fetcher.aclose()

    async def fetch(self, tenant: str, url: str) -> tuple[dict[str, Any], str]:
        """The card at `url` (at its well-known paths when `url` is a bare base URL) and the
        URL it came from, as `tenant` asks for it. Raises CardError, or FetchError when
        nothing could be fetched."""
        parsed = httpx.URL(url)
        if parsed.path in ("", "/"):
            failures = []
            for path in WELL_KNOWN_PATHS:
                candidate = str(parsed.copy_with(path=path, query=None))
                try:
                    return await self._fetch_one(tenant, candidate), candidate
                except FetchError as exc:
                    if exc.kind != "http status":
                        raise
                    failures.append(f"{path}: {exc}")
            raise CardError(f"no Agent Card at {url}: {'; '.join(failures)}")
        return await self._fetch_one(tenant, url), url

    async def _fetch_one(self, tenant: str, url: str) -> dict[str, Any]:
        resource = await self._fetcher.fetch(
            url,
            accept=("application/json", "application/a2a+json"),
            auth=self._credentials.of(tenant),
        )
        assert not isinstance(resource, NotModified)  # no validators were sent
        try:
            card = orjson.loads(resource.body)
        except orjson.JSONDecodeError as exc:
            raise CardError(f"the Agent Card at {url} is not JSON: {exc}") from None
        if not isinstance(card, dict):
            raise CardError(f"the Agent Card at {url} is not a JSON object")
        return card

    async def alive(self, tenant: str, url: str) -> str | None:
        """Probe `url` with a GET of `tenant`'s: None if the peer answered (any status below
        500; a JSON-RPC endpoint may well answer a GET with 405), else why not."""
        try:
            await self._fetcher.fetch(url, auth=self._credentials.of(tenant))
        except FetchError as exc:
            if exc.kind == "http status" and exc.status is not None and exc.status < 500:
                return None
            return str(exc)
        return None

"""Authentication, scopes and the Agent Card's security declaration, with real credentials."""

import asyncio
import http.client
import json
import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from agentic_rag.config import Settings
from agentic_rag.engine import Engine, InsecureBindError
from agentic_rag.observability.logging import redact
from agentic_rag.skills import SkillContext
from conformance.skills import conformance_registry
from tests.support.live import live_server
from tests.support.rpc import text_message
from tests.support.security import (
    AUDIENCE,
    ISSUER,
    SECRET,
    ECIssuer,
    RSAIssuer,
    claims,
    create_key,
    hs256,
    revoke_key,
)


class Nothing(BaseModel):
    pass


def registry_with_private_skill():  # type: ignore[no-untyped-def]
    registry = conformance_registry()

    @registry.skill(description="Only for authenticated callers.", public=False)
    async def private_tool(ctx: SkillContext, args: Nothing) -> Nothing:
        return Nothing()

    return registry


def rpc(url: str, method: str, params: object, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers=headers, timeout=30)


def send(url: str, text: str = "hi", **headers: str) -> httpx.Response:
    return rpc(url, "message/send", {"message": text_message(text)}, **headers)


def test_open_local_mode_until_the_first_key_then_credentials_are_required(
    database_url: str, data_dir: Path
) -> None:
    with live_server(
        registry_with_private_skill(), database_url=database_url, data_dir=data_dir
    ) as server:
        card = httpx.get(server.url + "/.well-known/agent.json").json()
        assert "securitySchemes" not in card and card["supportsAuthenticatedExtendedCard"] is False
        assert "private_tool" in [s["id"] for s in card["skills"]]  # everyone is local
        assert send(server.url).json()["result"]["status"]["state"] == "completed"
        assert httpx.get(server.url + "/agent/authenticatedExtendedCard").status_code == 404

        key = create_key(database_url, "acme", ["read", "write"])
        deadline = time.monotonic() + 10
        while (refused := send(server.url)).status_code != 401:
            assert time.monotonic() < deadline, "the server stayed open after a key was created"
            time.sleep(0.2)
        assert refused.json()["error"]["code"] == -32010
        assert refused.headers["www-authenticate"].startswith('Bearer realm="agentic-rag"')
        assert "resource_metadata=" in refused.headers["www-authenticate"]

        assert send(server.url, **{"X-API-Key": key}).status_code == 200
        assert send(server.url, Authorization=f"Bearer {key}").status_code == 200

        card = httpx.get(server.url + "/.well-known/agent.json").json()
        assert card["securitySchemes"] == {
            "apiKey": {
                "type": "apiKey",
                "in": "header",
                "name": "X-API-Key",
                "description": "An API key from `agentic-rag keys create`.",
            },
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "API key",
                "description": "Authorization: Bearer <API key>.",
            },
        }
        assert card["security"] == [{"apiKey": []}, {"bearer": []}]
        assert card["supportsAuthenticatedExtendedCard"] is True
        assert "private_tool" not in [s["id"] for s in card["skills"]]

        assert httpx.get(server.url + "/agent/authenticatedExtendedCard").status_code == 401
        extended = httpx.get(
            server.url + "/agent/authenticatedExtendedCard", headers={"X-API-Key": key}
        ).json()
        assert "private_tool" in [s["id"] for s in extended["skills"]]
        via_rpc = rpc(server.url, "agent/getAuthenticatedExtendedCard", {}, **{"X-API-Key": key})
        assert "private_tool" in [s["id"] for s in via_rpc.json()["result"]["skills"]]
        assert via_rpc.json()["result"]["protocolVersion"] == "0.3.0"


def test_leaving_open_local_mode_is_logged_once(
    database_url: str, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO),
        live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s,
    ):
        assert send(s.url).status_code == 200  # open local mode
        create_key(database_url, "acme", ["read", "write"])  # `keys create` while it runs
        deadline = time.monotonic() + 10
        while send(s.url).status_code != 401:
            assert time.monotonic() < deadline, "the server stayed open after a key was created"
            time.sleep(0.2)
        assert send(s.url).status_code == 401
    switched = [r for r in caplog.records if "open local mode has ended" in r.getMessage()]
    assert [(r.name, r.levelno) for r in switched] == [
        ("agentic_rag.security.auth", logging.WARNING)
    ]
    message = switched[0].getMessage()
    assert redact(message) == message  # written as is: nothing in it looks like a credential


def test_a_missing_scope_is_403_and_names_the_scope(database_url: str, data_dir: Path) -> None:
    reader = create_key(database_url, "acme", ["read"])
    writer = create_key(database_url, "acme", ["write"])
    with live_server(
        conformance_registry(), database_url=database_url, data_dir=data_dir
    ) as server:
        forbidden = send(server.url, **{"X-API-Key": reader})
        assert forbidden.status_code == 403
        assert forbidden.json()["id"] == 7
        assert forbidden.json()["error"] == {
            "code": -32011,
            "message": "this credential lacks the scope 'write' that message/send needs",
        }
        task = send(server.url, **{"X-API-Key": writer}).json()["result"]
        assert (
            rpc(server.url, "tasks/get", {"id": task["id"]}, **{"X-API-Key": writer}).status_code
            == 403
        )
        got = rpc(server.url, "tasks/get", {"id": task["id"]}, **{"X-API-Key": reader})
        assert got.json()["result"]["id"] == task["id"]


def test_expired_and_revoked_keys_are_refused(database_url: str, data_dir: Path) -> None:
    expired = create_key(
        database_url, "acme", ["read", "write"], expires_at=datetime.now(UTC) - timedelta(seconds=1)
    )
    revoked = create_key(database_url, "acme", ["read", "write"])
    with live_server(
        conformance_registry(), database_url=database_url, data_dir=data_dir
    ) as server:
        assert send(server.url, **{"X-API-Key": revoked}).status_code == 200
        revoke_key(database_url, revoked)
        deadline = time.monotonic() + 10  # a verified key is trusted for 5 s
        while send(server.url, **{"X-API-Key": revoked}).status_code != 401:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        answer = send(server.url, **{"X-API-Key": expired})
        assert answer.status_code == 401
        assert "unknown, expired or revoked API key" in answer.json()["error"]["message"]


JWT_SETTINGS = {"jwt_secret": SECRET, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}


def test_hs256_tokens_give_the_tenant_and_scopes_of_their_claims(
    database_url: str, data_dir: Path
) -> None:
    with live_server(
        conformance_registry(), database_url=database_url, data_dir=data_dir, **JWT_SETTINGS
    ) as server:
        token = hs256(claims(tenant="acme"))
        task = send(server.url, Authorization=f"Bearer {token}").json()["result"]
        other = hs256(claims(tenant="globex"))
        unknown = rpc(server.url, "tasks/get", {"id": task["id"]}, Authorization=f"Bearer {other}")
        assert unknown.json()["error"]["code"] == -32001  # another tenant sees nothing
        read_only = hs256(claims(scope="read"))
        assert send(server.url, Authorization=f"Bearer {read_only}").status_code == 403
        card = httpx.get(server.url + "/.well-known/agent.json").json()
        assert card["securitySchemes"]["bearer"]["bearerFormat"] == "JWT or API key"
        metadata = httpx.get(server.url + "/.well-known/oauth-protected-resource").json()
        assert metadata["authorization_servers"] == [ISSUER]
        assert metadata["resource"] == server.url + "/mcp"


# The discovery documents served: Agent Cards, JWKS, RFC 9728's protected resource (its root
# form and the one for /mcp).
SERVED_DISCOVERY = [
    "/.well-known/agent.json",
    "/.well-known/agent-card.json",
    "/.well-known/jwks.json",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
]
# What an OAuth client (the MCP SDK's, for one) tries to find an authorization server, which
# this server is not: RFC 8414 and OIDC discovery at the root, path-inserted for /mcp, and
# OIDC's path-appended form; and a well-known path nothing here serves.
UNSERVED_DISCOVERY = [
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/mcp/.well-known/openid-configuration",
    "/.well-known/security.txt",
]


def raw_status(url: str, method: str, path: str, body: bytes = b"") -> int:
    """The status of a request for `path` sent as is (httpx would resolve dot segments)."""
    parsed = httpx.URL(url)
    connection = http.client.HTTPConnection(parsed.host, parsed.port, timeout=30)
    try:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        connection.request(method, path, body=body, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_with_keys_discovery_documents_are_public_and_an_unserved_one_is_404(
    database_url: str, data_dir: Path
) -> None:
    key = create_key(database_url, "acme", ["read", "write"])
    with live_server(
        conformance_registry(), database_url=database_url, data_dir=data_dir
    ) as server:
        for path in SERVED_DISCOVERY:
            assert httpx.get(server.url + path).status_code == 200, path
        for path in UNSERVED_DISCOVERY:
            answer = httpx.get(server.url + path)
            assert answer.status_code == 404, (path, answer.status_code)
            assert "www-authenticate" not in answer.headers, path

        # Everything else still needs a credential, a path through the well-known prefix too.
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert httpx.get(server.url + "/nowhere").status_code == 401
        assert httpx.post(server.url + "/mcp", json=listing).status_code == 401
        assert send(server.url).status_code == 401
        body = json.dumps(listing).encode()
        assert raw_status(server.url, "POST", "/.well-known/../mcp", body) == 404
        assert raw_status(server.url, "POST", "/.well-known/%2e%2e/mcp", body) == 404
        assert send(server.url, **{"X-API-Key": key}).status_code == 200


ATTACKS = {
    "alg none": lambda issuer: _unsigned(claims()),
    "expired": lambda issuer: hs256(claims(exp=int(time.time()) - 120)),
    "not yet valid": lambda issuer: hs256(claims(nbf=int(time.time()) + 600)),
    "wrong audience": lambda issuer: hs256(claims(aud="someone-else")),
    "wrong issuer": lambda issuer: hs256(claims(iss="https://evil.test")),
    "no expiry": lambda issuer: hs256(claims(exp=None)),
    "no tenant": lambda issuer: hs256(claims(tenant=None)),
    "tampered payload": lambda issuer: _tampered(hs256(claims(tenant="acme"))),
    "other secret": lambda issuer: hs256(claims(), secret="not-the-secret-not-the-secret-xx"),
    "HS256 signed with the RS256 public key": lambda issuer: _hmac_with(
        issuer.public_pem, issuer.kid
    ),
    "unknown kid": lambda issuer: issuer.sign(claims(), kid="no-such-key"),
    "RS256 by another key": lambda issuer: RSAIssuer().sign(claims(), kid=issuer.kid),
}


def _unsigned(body: dict[str, object]) -> str:
    import base64
    import json

    def b64(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(body)}."


def _hmac_with(key: bytes, kid: str) -> str:
    """The key-confusion attack: an HS256 token whose secret is the issuer's public key.

    PyJWT refuses to make one, so it is forged by hand."""
    import base64
    import hashlib
    import hmac
    import json

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    payload = b64(json.dumps(claims()).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def _tampered(token: str) -> str:
    import base64
    import json

    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=="))
    body["tenant"] = "globex"
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def test_every_forged_or_invalid_token_is_refused_without_leaking_it(
    database_url: str, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    issuer = RSAIssuer()
    caplog.set_level(logging.DEBUG)
    with (
        issuer.serve() as jwks_url,
        live_server(
            conformance_registry(),
            database_url=database_url,
            data_dir=data_dir,
            jwt_jwks_url=jwks_url,
            auth_failures_per_minute=1000,
            **JWT_SETTINGS,
        ) as server,
    ):
        good = issuer.sign(claims())
        assert send(server.url, Authorization=f"Bearer {good}").status_code == 200
        for name, forge in ATTACKS.items():
            token = forge(issuer)
            answer = send(server.url, Authorization=f"Bearer {token}")
            assert answer.status_code == 401, name
            assert answer.json()["error"]["code"] == -32010, name
            assert 'error="invalid_token"' in answer.headers["www-authenticate"], name
            assert token not in caplog.text, f"{name}: the token was logged"
    assert SECRET not in caplog.text


def test_es256_tokens_from_a_jwks_and_nothing_else(database_url: str, data_dir: Path) -> None:
    issuer = ECIssuer()
    settings = {"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE, "jwt_algorithm": "ES256"}
    with (
        issuer.serve() as jwks_url,
        live_server(
            conformance_registry(),
            database_url=database_url,
            data_dir=data_dir,
            jwt_jwks_url=jwks_url,
            **settings,
        ) as server,
    ):
        good = send(server.url, Authorization=f"Bearer {issuer.sign(claims(tenant='acme'))}")
        assert good.status_code == 200
        rs256 = RSAIssuer().sign(claims())  # a valid RS256 token: not the pinned algorithm
        refused = send(server.url, Authorization=f"Bearer {rs256}")
        assert refused.status_code == 401
        assert "algorithm 'RS256' is not accepted" in refused.json()["error"]["message"]
        hs = send(server.url, Authorization=f"Bearer {hs256(claims())}")
        assert hs.status_code == 401  # no secret is configured, so HS256 is not accepted


def test_guessing_api_keys_is_rate_limited(database_url: str, data_dir: Path) -> None:
    key = create_key(database_url, "acme", ["read", "write"])
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        auth_failures_per_minute=5,
    ) as server:
        guesses = [
            send(server.url, **{"X-API-Key": f"ar_{i:012x}_{'x' * 43}"}).status_code
            for i in range(7)
        ]
        assert guesses[:5] == [401] * 5
        assert guesses[5:] == [429, 429]
        blocked = send(server.url, **{"X-API-Key": key})  # even the right key, from this address
        assert blocked.status_code == 429
        assert int(blocked.headers["retry-after"]) >= 1
        assert blocked.json()["error"]["code"] == -32012


def test_a_push_token_with_crlf_is_refused(database_url: str, data_dir: Path) -> None:
    with live_server(
        conformance_registry(), database_url=database_url, data_dir=data_dir
    ) as server:
        config = {"url": "https://hooks.example.com/a2a", "token": "abc\r\nX-Injected: 1"}
        params = {
            "message": text_message("hi"),
            "configuration": {"pushNotificationConfig": config},
        }
        answer = rpc(server.url, "message/send", params).json()
        assert answer["error"]["code"] == -32602
        assert (
            "CR or LF" in answer["error"]["message"] or "line break" in answer["error"]["message"]
        )


async def test_a_public_address_without_credentials_refuses_to_start(
    database_url: str, data_dir: Path
) -> None:
    settings = Settings(host="0.0.0.0", data_dir=data_dir, database_url=database_url)
    with pytest.raises(
        InsecureBindError, match=r"refusing to serve 0\.0\.0\.0 without credentials"
    ):
        await Engine(settings, conformance_registry()).start()
    insecure = Engine(settings.model_copy(update={"insecure": True}), conformance_registry())
    await insecure.start()
    assert insecure.auth.enforced is False
    await insecure.stop()
    await asyncio.to_thread(create_key, database_url, "acme", ["read"])
    guarded = Engine(settings, conformance_registry())
    await guarded.start()
    assert guarded.auth.enforced is True
    await guarded.stop()

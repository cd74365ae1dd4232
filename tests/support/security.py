"""Real credentials for the security tests: API keys in the database, signed JWTs, a JWKS."""

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.storage.postgres import connect
from tests.support.live import serve_in_thread

ISSUER = "https://issuer.test"
AUDIENCE = "agentic-rag-tests"
SECRET = "a-test-secret-that-is-long-enough-for-hs256"


def create_key(database_url: str, tenant: str, scopes: list[str], **options: Any) -> str:
    """Create an API key in the server's database, as `agentic-rag keys create` does."""

    async def create() -> str:
        pool: asyncpg.Pool = await connect(database_url, size=1)
        try:
            key, _ = await ApiKeyStore(pool).create(tenant, scopes, **options)
            return key
        finally:
            await pool.close()

    return asyncio.run(create())


def revoke_key(database_url: str, key: str) -> None:
    async def revoke() -> None:
        pool: asyncpg.Pool = await connect(database_url, size=1)
        try:
            await ApiKeyStore(pool).revoke(key.split("_")[1])
        finally:
            await pool.close()

    asyncio.run(revoke())


def hs256(claims: dict[str, Any], secret: str = SECRET, **header: Any) -> str:
    return jwt.encode(claims, secret, algorithm="HS256", headers=header or None)


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 300,
        "sub": "alice",
        "tenant": "acme",
        "scope": "read write",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


class RSAIssuer:
    """An identity provider: an RSA key whose public half is served as a JWKS."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        self.public_pem = self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def sign(self, body: dict[str, Any], kid: str | None = None) -> str:
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve the JWKS on 127.0.0.1; yield its URL."""

        async def jwks(_: Any) -> JSONResponse:
            return JSONResponse(self.jwks())

        with serve_in_thread(Starlette(routes=[Route("/jwks.json", jwks)])) as url:
            yield f"{url}/jwks.json"


class ECIssuer(RSAIssuer):
    """The same identity provider with an ES256 (P-256) key."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.key = ec.generate_private_key(ec.SECP256R1())  # type: ignore[assignment]
        self.kid = "test-ec-key-1"
        self.public_pem = self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "ES256", "use": "sig"}]}

    def sign(self, body: dict[str, Any], kid: str | None = None) -> str:
        return jwt.encode(body, self.key, algorithm="ES256", headers={"kid": kid or self.kid})


async def create_keys(database_url: str, tenant: str, **scopes: list[str]) -> dict[str, str]:
    """API keys of `tenant` in the server's database, by name, as `agentic-rag keys create`."""
    pool: asyncpg.Pool = await connect(database_url, size=1)
    try:
        store = ApiKeyStore(pool)
        return {name: (await store.create(tenant, s, name=name))[0] for name, s in scopes.items()}
    finally:
        await pool.close()

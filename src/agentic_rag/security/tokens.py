"""JWT bearer tokens: HS256 with a shared secret, or RS256/ES256 with keys from a JWKS URL.

The algorithm is pinned by configuration, never taken from the token: a token is verified
with the secret only if it says HS256 and a secret is configured, and with the JWKS only if
it says the configured asymmetric algorithm. `exp`, `iss` and `aud` are required.
"""

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Literal

import httpx
import jwt

from agentic_rag.security.api_keys import checked_groups
from agentic_rag.security.principal import Principal

JWKS_REFRESH_SECONDS = 30.0  # an unknown kid refetches the JWKS at most this often
LEEWAY_SECONDS = 30


class InvalidToken(Exception):
    """Why a token was refused; safe to show the caller (it never contains the token)."""


class JWTVerifier:
    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        secret: str | None = None,
        jwks_url: str | None = None,
        algorithm: Literal["RS256", "ES256"] = "RS256",
        tenant_claim: str = "tenant",
        scopes_claim: str = "scope",
        groups_claim: str = "tool_groups",
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if secret is None and jwks_url is None:
            raise ValueError("JWT needs AGENTIC_RAG_JWT_SECRET or AGENTIC_RAG_JWT_JWKS_URL")
        self._issuer, self._audience = issuer, audience
        self._secret, self._jwks_url, self._algorithm = secret, jwks_url, algorithm
        self._tenant_claim, self._scopes_claim = tenant_claim, scopes_claim
        self._groups_claim = groups_claim
        self._client = client or httpx.AsyncClient(timeout=5.0, trust_env=False)
        self._jwks: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._fetch_lock = asyncio.Lock()

    @property
    def algorithms(self) -> list[str]:
        return (["HS256"] if self._secret else []) + ([self._algorithm] if self._jwks_url else [])

    async def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise InvalidToken("the bearer token is not a JWT") from None
        algorithm = header.get("alg")
        key: Any
        if algorithm == "HS256" and self._secret:
            key = self._secret
        elif algorithm == self._algorithm and self._jwks_url:
            key = await self._key(header.get("kid"))
        else:
            raise InvalidToken(f"algorithm {algorithm!r} is not accepted; use {self.algorithms}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(f"the token's audience is not {self._audience!r}") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken(f"the token's issuer is not {self._issuer!r}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the token has no {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.InvalidTokenError as exc:
            raise InvalidToken(f"the token is invalid: {type(exc).__name__}") from None
        tenant = claims.get(self._tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise InvalidToken(f"the token has no {self._tenant_claim!r} claim naming a tenant")
        subject = claims.get("sub")
        return Principal(
            tenant=tenant,
            subject=subject if isinstance(subject, str) else "jwt",
            scopes=frozenset(_names(claims.get(self._scopes_claim))),
            method="jwt",
            groups=self._groups(claims.get(self._groups_claim)),
        )

    def _groups(self, value: object) -> frozenset[str] | None:
        """The groups of tools the token selects, as an API key's (None: no selection)."""
        if value is None:
            return None
        try:
            groups = checked_groups(_names(value))
        except ValueError as exc:
            raise InvalidToken(f"the token's {self._groups_claim!r} claim: {exc}") from None
        return None if groups is None else frozenset(groups)

    async def _key(self, kid: object) -> jwt.PyJWK:
        if not isinstance(kid, str):
            raise InvalidToken("the token's header has no 'kid'")
        if kid not in self._jwks:
            await self._refresh()
        key = self._jwks.get(kid)
        if key is None:
            raise InvalidToken(f"no key {kid!r} in the issuer's JWKS")
        return key

    async def _refresh(self) -> None:
        async with self._fetch_lock:
            if time.monotonic() - self._fetched_at < JWKS_REFRESH_SECONDS:
                return
            self._fetched_at = time.monotonic()
            assert self._jwks_url is not None
            try:
                response = await self._client.get(self._jwks_url)
                response.raise_for_status()
                keys = response.json()["keys"]
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                raise InvalidToken(
                    f"the issuer's JWKS could not be read ({type(exc).__name__})"
                ) from None
            self._jwks = {
                k["kid"]: jwt.PyJWK(k, algorithm=self._algorithm)
                for k in keys
                if isinstance(k, dict)
                and "kid" in k
                and k.get("alg", self._algorithm) == self._algorithm
            }

    async def aclose(self) -> None:
        await self._client.aclose()


def _names(value: object) -> Sequence[str]:
    """A claim's names: space-separated, or a list of strings."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []

"""Authentication: which credential a request carries, whose it is, and whether it may pass.

Credentials: an API key (`X-API-Key: <key>` or `Authorization: Bearer <key>`) or a JWT
(`Authorization: Bearer <jwt>`). With none configured the server is in open local mode and
every caller is the `local` principal; it leaves that mode for good once an API key exists.
"""

import ipaddress
import logging
import time
from typing import Any

import orjson
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Scope

from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.observability.metrics import record_rate_limited
from agentic_rag.security.api_keys import ApiKeyStore, parse_key
from agentic_rag.security.principal import LOCAL, Principal
from agentic_rag.security.ratelimit import RateLimiter
from agentic_rag.security.tokens import InvalidToken, JWTVerifier
from agentic_rag.storage.outage import database_unreachable

# JSON-RPC error codes for the HTTP-level refusals (documented in docs/security.md).
AUTHENTICATION_REQUIRED = -32010
FORBIDDEN = -32011
RATE_LIMITED = -32012
# JSON-RPC's internal error, for a check that could not run: the database it reads is
# unreachable (an outage); the client may retry. (Redis failing only stops the rate limits'
# counting: ratelimit.py.)
UNAVAILABLE = -32603
UNAVAILABLE_RETRY_SECONDS = 1

KEYS_RECHECK_SECONDS = 2.0

log = logging.getLogger(__name__)


class AuthFailure(Exception):
    def __init__(self, status: int, code: int, message: str, *, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers

    def response(self) -> Response:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": self.code, "message": self.message}}
        return Response(
            orjson.dumps(body), self.status, self.headers, media_type="application/json"
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Authenticator:
    def __init__(
        self,
        api_keys: ApiKeyStore,
        tokens: JWTVerifier | None,
        limiter: RateLimiter,
        *,
        base_url: str,
        require: bool = False,
    ) -> None:
        self._api_keys, self._tokens, self._limiter = api_keys, tokens, limiter
        self._base_url = base_url
        self._require = require
        self.enforced = False
        self._checked_keys_at = float("-inf")
        # The database the checks read gone: said once per outage (rate limits go on without
        # Redis: ratelimit.py). Many requests at once see it, some succeeding on a connection
        # still open: hence settling.
        self._unreachable = RepeatedFailure(
            log,
            "checking credentials",
            traceback=False,
            meanwhile="requests are answered 503 with Retry-After until it works again",
            settle_seconds=1.0,
        )

    @property
    def jwt_enabled(self) -> bool:
        return self._tokens is not None

    async def start(self) -> None:
        self.enforced = (
            self._require or self._tokens is not None or await self._api_keys.any_active()
        )

    async def _leave_open_mode_if_keys_exist(self) -> None:
        if time.monotonic() - self._checked_keys_at < KEYS_RECHECK_SECONDS:
            return
        self._checked_keys_at = time.monotonic()
        try:
            created = await self._api_keys.any_active()
        except Exception as exc:
            if not database_unreachable(exc):
                raise
            # No key can be created while the database is away, and every call that reads or
            # changes stored state fails without it: the request goes on in open mode and is
            # refused in its own protocol's terms by the adapter, which logs the outage.
            return
        # Another request may have ended open mode while this one awaited: log it once.
        if created and not self.enforced:
            self.enforced = True
            log.warning(
                "authentication required from now on: an API key was created, so open local "
                "mode has ended; every call must carry an API key or a bearer token"
            )

    def security_schemes(self) -> dict[str, dict[str, Any]]:
        """The Agent Card's `securitySchemes`: exactly what `authenticate` accepts."""
        if not self.enforced:
            return {}
        bearer = "JWT or API key" if self.jwt_enabled else "API key"
        return {
            "apiKey": {
                "type": "apiKey",
                "in": "header",
                "name": "X-API-Key",
                "description": "An API key from `agentic-rag keys create`.",
            },
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": bearer,
                "description": f"Authorization: Bearer <{bearer}>.",
            },
        }

    def challenge(self, error: str | None = None) -> dict[str, str]:
        value = (
            f'Bearer realm="agentic-rag", resource_metadata='
            f'"{self._base_url}/.well-known/oauth-protected-resource"'
        )
        if error:
            value += f', error="invalid_token", error_description="{error.replace(chr(34), "")}"'
        return {"WWW-Authenticate": value}

    async def authenticate(self, scope: Scope) -> Principal:
        """The caller's principal; AuthFailure to refuse it, or when the database the checks
        read cannot be reached: 503, never an unanswered exception."""
        try:
            principal = await self._authenticate(scope)
        except AuthFailure:
            raise
        except Exception as exc:
            self._unreachable.failed()
            raise AuthFailure(
                503,
                UNAVAILABLE,
                f"credentials cannot be checked now ({type(exc).__name__}: {exc}); retry shortly",
                headers={"Retry-After": str(UNAVAILABLE_RETRY_SECONDS)},
            ) from None
        self._unreachable.succeeded()
        return principal

    async def _authenticate(self, scope: Scope) -> Principal:
        if not self.enforced:
            await self._leave_open_mode_if_keys_exist()
            if not self.enforced:
                return LOCAL
        client = (scope.get("client") or ("unknown", 0))[0]
        if (wait := await self._limiter.failure_blocked(client)) is not None:
            record_rate_limited("address")
            raise self._too_many(wait, "too many failed authentication attempts from this address")
        headers = Headers(scope=scope)
        presented = headers.get("x-api-key")
        authorization = headers.get("authorization", "")
        scheme, _, bearer = authorization.partition(" ")
        if presented is None and scheme.lower() == "bearer" and bearer.strip():
            presented = bearer.strip()
        if presented is None:
            raise AuthFailure(
                401,
                AUTHENTICATION_REQUIRED,
                "authentication required: send X-API-Key or Authorization: Bearer",
                headers=self.challenge(),
            )
        try:
            principal = await self._verify(presented)
        except InvalidToken as exc:
            await self._limiter.record_failure(client)
            raise AuthFailure(
                401,
                AUTHENTICATION_REQUIRED,
                f"invalid credential: {exc}",
                headers=self.challenge(str(exc)),
            ) from None
        if (wait := await self._limiter.hit(principal)) is not None:
            record_rate_limited(principal.method)
            raise self._too_many(wait, "rate limit exceeded for this credential")
        return principal

    async def _verify(self, presented: str) -> Principal:
        if parse_key(presented) is not None:
            principal = await self._api_keys.verify(presented)
            if principal is None:
                raise InvalidToken("unknown, expired or revoked API key")
            return principal
        if self._tokens is None:
            raise InvalidToken("not an API key, and JWT bearer tokens are not enabled")
        return await self._tokens.verify(presented)

    @staticmethod
    def _too_many(wait: float, message: str) -> AuthFailure:
        return AuthFailure(
            429,
            RATE_LIMITED,
            f"{message}; retry in {wait:.0f} s",
            headers={"Retry-After": str(int(wait + 0.999))},
        )

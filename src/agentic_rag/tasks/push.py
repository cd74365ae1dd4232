"""Push notifications (docs/a2a-notes.md §8): the server POSTs the Task to each of the
task's webhooks.

Each notification carries `Authorization: Bearer <JWT>`, an ES256 token signed with a key from
table `signing_keys` whose public half the server publishes as a JWKS, and the client's own token
in `X-A2A-Notification-Token`. A config set over A2A 1.0 (`PushConfig.body`) gets the body the
adapter renders (a StreamResponse) and, when the client configured authentication, its scheme
and credentials as the `Authorization` header instead of the JWT (1.0 spec §4.3.3, §13.2).
Webhook URLs pass the SSRF guard when they are set (shape) and again when each notification is
sent (resolved addresses, docs/a2a-notes.md §12.9).
"""

import asyncio
import base64
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from agentic_rag.ids import new_id
from agentic_rag.schema.a2a import Task
from agentic_rag.schema.compat import PushConfig
from agentic_rag.security.ssrf import SSRFGuard, UnsafeURLError
from agentic_rag.storage.pool import Pool

log = logging.getLogger(__name__)

ALGORITHM = "ES256"  # the only one we sign with, so receivers can pin it
TOKEN_HEADER = "X-A2A-Notification-Token"
JWT_LIFETIME = 300  # seconds; long enough for clock skew, short enough to limit replay

_MAX_BACKOFF = 60.0  # seconds, also the most a Retry-After header can make us wait

# Serialises key creation when several workers start at once, so they all share one key.
_KEYS_LOCK = 0x6B657973  # "keys"
_SELECT_KEYS = "SELECT kid, private_pem FROM signing_keys ORDER BY created_at DESC, kid DESC"
_INSERT_KEY = (
    "INSERT INTO signing_keys (kid, private_pem) VALUES ($1, $2) ON CONFLICT (kid) DO NOTHING"
)


@dataclass(frozen=True, slots=True)
class _Key:
    kid: str
    private_key: ec.EllipticCurvePrivateKey
    public_jwk: dict[str, str]  # kty, crv, x, y


class SigningKeys:
    """The keys that sign push notifications, newest first; the newest signs. Built on the
    database before it starts; `load` reads them (the engine's start)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._keys: tuple[_Key, ...] = ()

    async def load(self) -> Self:
        """Load every key from `signing_keys`, creating the first one if the table is empty."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _KEYS_LOCK)
            rows = await conn.fetch(_SELECT_KEYS)
            if not rows:
                private_key = ec.generate_private_key(ec.SECP256R1())
                kid = _thumbprint(_public_jwk(private_key.public_key()))
                await conn.execute(_INSERT_KEY, kid, _to_pem(private_key))
                rows = await conn.fetch(_SELECT_KEYS)
                log.info("created push notification signing key %s", kid)
        self._keys = tuple(_from_row(row["kid"], row["private_pem"]) for row in rows)
        return self

    @property
    def _signing(self) -> _Key:
        if not self._keys:
            raise RuntimeError("the push signing keys are not loaded (the engine's start does)")
        return self._keys[0]

    @property
    def kid(self) -> str:
        """The id of the key that signs."""
        return self._signing.kid

    def sign(self, claims: dict[str, Any]) -> str:
        """A compact JWS of `claims`, ES256, with the signing key's `kid` in the header."""
        key = self._signing
        return jwt.encode(claims, key.private_key, algorithm=ALGORITHM, headers={"kid": key.kid})

    def derived_secrets(self, purpose: str) -> list[bytes]:
        """A secret for `purpose` from each key, newest first: HKDF-SHA256 over the key's private
        scalar, `purpose` as its info, so no two uses share key material. Every worker derives
        the same ones (MCP's requestState, mcp/request_state.py)."""
        if not self._keys:
            raise RuntimeError("the signing keys are not loaded (the engine's start does)")
        return [
            HKDF(algorithm=SHA256(), length=32, salt=None, info=purpose.encode()).derive(
                key.private_key.private_numbers().private_value.to_bytes(32, "big")
            )
            for key in self._keys
        ]

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """The public keys as a JWK Set, for `/.well-known/jwks.json`."""
        return {
            "keys": [
                {**key.public_jwk, "kid": key.kid, "alg": ALGORITHM, "use": "sig"}
                for key in self._keys
            ]
        }


def validate_config(config: PushConfig, guard: SSRFGuard) -> None:
    """Check a push config when a client sets it; raise ValueError (UnsafeURLError) if refused.

    Only the URL's shape and literal addresses are checked here; its host is resolved and checked
    when a notification is sent, and reachability is never tested synchronously (§12.9).
    """
    guard.check_shape(config.url)
    _check_header_value("push notification token", config.token)
    if config.authentication is not None:
        _check_header_value("push notification credentials", config.authentication.credentials)
        if config.body == "stream-response":  # 1.0 sends the scheme in the header too
            for scheme in config.authentication.schemes[:1]:
                _check_header_value("push notification scheme", scheme)


class PushNotifier:
    """Delivers Tasks to webhooks in the background, with retries.

    The task runner calls `notify` on final and paused states. Deliveries run concurrently and may
    arrive out of order; receivers are expected to call `tasks/get` for the current state.
    """

    def __init__(
        self,
        keys: SigningKeys,
        guard: SSRFGuard,
        *,
        issuer: str,
        max_attempts: int = 5,
        timeout: float = 10.0,
        backoff_base: float = 0.5,
        client: httpx.AsyncClient | None = None,
        stream_response: Callable[[Task], bytes] | None = None,
    ) -> None:
        """`stream_response` renders the body of configs set over 1.0 (a StreamResponse);
        without it they get the Task, as 0.x configs do."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._keys = keys
        self._guard = guard
        self._issuer = issuer
        self._max_attempts = max_attempts
        self._timeout = timeout
        self._wait = wait_exponential(multiplier=backoff_base, max=_MAX_BACKOFF) + wait_random(
            0, backoff_base
        )  # the jitter spreads retries of many deliveries that failed together
        # Our own client ignores proxy settings from the environment: egress is the guard's call.
        self._client = (
            client if client is not None else httpx.AsyncClient(timeout=timeout, trust_env=False)
        )
        self._owns_client = client is None
        self._stream_response = stream_response
        self._pending: set[asyncio.Task[None]] = set()
        self._closed = False

    def notify(self, task: Task, configs: Sequence[PushConfig]) -> None:
        """Schedule one delivery of `task` per config and return at once."""
        if self._closed:
            log.warning("push for task %s dropped: the notifier is closed", task.id)
            return
        # Serialised now: the task object may change before the deliveries run.
        bodies: dict[str, bytes] = {}
        for config in configs:
            body = bodies.get(config.body)
            if body is None:
                body = bodies[config.body] = self._body(task, config)
            delivery = asyncio.create_task(
                self._deliver(body, task.id, config), name=f"push task {task.id}"
            )
            self._pending.add(delivery)
            delivery.add_done_callback(self._pending.discard)

    def _body(self, task: Task, config: PushConfig) -> bytes:
        if config.body == "stream-response" and self._stream_response is not None:
            return self._stream_response(task)
        return task.model_dump_json(by_alias=True, exclude_none=True).encode()

    async def drain(self) -> None:
        """Wait until every delivery scheduled so far (and any they lead to) has finished."""
        while pending := {t for t in self._pending if not t.done()}:
            await asyncio.wait(pending)

    async def aclose(self, grace: float = 5.0) -> None:
        """Stop accepting work, wait up to `grace` seconds for deliveries, cancel the rest."""
        self._closed = True
        pending = {t for t in self._pending if not t.done()}
        if pending:
            _, unfinished = await asyncio.wait(pending, timeout=grace)
            if unfinished:
                log.warning("cancelling %d unfinished push deliveries", len(unfinished))
                for delivery in unfinished:
                    delivery.cancel()
                await asyncio.wait(unfinished)
        if self._owns_client:
            await self._client.aclose()

    async def _deliver(self, body: bytes, task_id: str, config: PushConfig) -> None:
        # Logs name the webhook's origin only: paths and queries of webhook URLs often hold secrets.
        where = _origin(config.url)
        try:
            _check_header_value("push notification token", config.token)
        except ValueError as exc:
            log.warning("push for task %s to %s not sent: %s", task_id, where, exc)
            return
        try:
            retrying = AsyncRetrying(
                stop=stop_after_attempt(self._max_attempts),
                wait=self._wait_for,
                retry=retry_if_exception_type(_Retryable),
                before_sleep=lambda state: _log_retry(state, task_id, where),
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    await self._attempt(body, task_id, config)
        except UnsafeURLError as exc:
            log.warning("push for task %s to %s refused: %s", task_id, where, exc)
        except _Retryable as exc:
            log.warning(
                "push for task %s to %s failed after %d attempts: %s",
                task_id,
                where,
                self._max_attempts,
                exc,
            )
        except _Rejected as exc:
            log.warning("push for task %s to %s rejected, not retried: %s", task_id, where, exc)
        except Exception as exc:
            # No traceback: its text could quote header values; the type and scrubbed text suffice.
            log.error(
                "push for task %s to %s failed unexpectedly: %s: %s",
                task_id,
                where,
                type(exc).__name__,
                _scrub(str(exc), *_secrets(config)),
            )

    async def _attempt(self, body: bytes, task_id: str, config: PushConfig) -> None:
        issued = int(time.time())
        token = self._keys.sign(
            {
                "iss": self._issuer,
                "aud": config.url,
                "iat": issued,
                "exp": issued + JWT_LIFETIME,
                "jti": new_id(),  # new per attempt: receivers may reject replayed ids
                "taskId": task_id,
            }
        )
        headers = {
            "Content-Type": "application/json",
            "Authorization": _authorization(config, token),
        }
        if config.token:
            headers[TOKEN_HEADER] = config.token
        try:
            async with asyncio.timeout(self._timeout):  # covers DNS, which httpx's timeout does not
                response = await self._guard.request(
                    self._client,
                    "POST",
                    config.url,
                    content=body,
                    headers=headers,
                    # The JWT's audience is this URL; a redirect would take it somewhere else.
                    follow_redirects=False,
                )
        except (
            TimeoutError,
            httpx.TimeoutException,
            httpx.NetworkError,
            httpx.RemoteProtocolError,
        ) as exc:
            reason = _scrub(str(exc), *_secrets(config), token) or "timed out"
            raise _Retryable(f"{type(exc).__name__}: {reason}") from None
        except httpx.HTTPError as exc:
            raise _Rejected(
                f"{type(exc).__name__}: {_scrub(str(exc), *_secrets(config), token)}"
            ) from None
        status = response.status_code
        if 200 <= status < 300:
            return
        if status == 429 or status >= 500:
            raise _Retryable(f"HTTP {status}", retry_after=_retry_after(response))
        if 300 <= status < 400:
            raise _Rejected(f"HTTP {status} (redirects are not followed for push notifications)")
        raise _Rejected(f"HTTP {status}")

    def _wait_for(self, state: RetryCallState) -> float:
        """Exponential backoff with jitter, or longer if the webhook asked with Retry-After."""
        backoff = self._wait(state)
        outcome = state.outcome.exception() if state.outcome is not None else None
        if isinstance(outcome, _Retryable) and outcome.retry_after is not None:
            return max(backoff, min(outcome.retry_after, _MAX_BACKOFF))
        return backoff


class _Retryable(Exception):
    """A delivery attempt that may succeed later: network failure, timeout, 429 or 5xx."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class _Rejected(Exception):
    """A delivery the webhook refused for good (4xx other than 429, 3xx)."""


def _log_retry(state: RetryCallState, task_id: str, where: str) -> None:
    outcome = state.outcome.exception() if state.outcome is not None else None
    delay = state.next_action.sleep if state.next_action is not None else 0.0
    log.warning(
        "push for task %s to %s failed (attempt %d): %s; retrying in %.2fs",
        task_id,
        where,
        state.attempt_number,
        outcome,
        delay,
    )


def _authorization(config: PushConfig, jwt_token: str) -> str:
    """The `Authorization` header: the scheme and credentials a 1.0 client configured, else
    our signed JWT (0.x configs always: their `authentication` names what the webhook takes,
    and the JWT is what we give it)."""
    auth = config.authentication
    if config.body == "stream-response" and auth is not None and auth.credentials:
        scheme = auth.schemes[0] if auth.schemes else "Bearer"
        return f"{scheme} {auth.credentials}"
    return f"Bearer {jwt_token}"


def _check_header_value(what: str, value: str | None) -> None:
    # The value goes into an HTTP header: CR or LF would let it inject headers of its own.
    if value is None:
        return
    if "\r" in value or "\n" in value:
        raise ValueError(f"{what} must not contain CR or LF (it is sent as an HTTP header)")
    if not (value.isascii() and value.isprintable()):
        raise ValueError(f"{what} must be printable ASCII (it is sent as an HTTP header)")


def _secrets(config: PushConfig) -> tuple[str | None, ...]:
    auth = config.authentication
    return (config.token, auth.credentials if auth is not None else None)


def _scrub(text: str, *secrets: str | None) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def _origin(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "(malformed URL)"
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"


def _retry_after(response: httpx.Response) -> float | None:
    # Only the delay-seconds form; an HTTP date is rare for webhooks and the backoff covers it.
    value = response.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _public_jwk(public_key: ec.EllipticCurvePublicKey) -> dict[str, str]:
    numbers = public_key.public_numbers()
    return {
        "kty": "EC",
        "crv": "P-256",
        "x": _b64url(numbers.x.to_bytes(32, "big")),
        "y": _b64url(numbers.y.to_bytes(32, "big")),
    }


def _thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638: SHA-256 of the required members, sorted, without whitespace."""
    required = {name: jwk[name] for name in ("crv", "kty", "x", "y")}
    canonical = json.dumps(required, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode("ascii")).digest())


def _to_pem(private_key: ec.EllipticCurvePrivateKey) -> str:
    return private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def _from_row(kid: str, pem: str) -> _Key:
    private_key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
    if not (
        isinstance(private_key, ec.EllipticCurvePrivateKey)
        and isinstance(private_key.curve, ec.SECP256R1)
    ):
        raise ValueError(f"signing key {kid!r} in signing_keys is not an EC P-256 key (ES256)")
    return _Key(kid=kid, private_key=private_key, public_jwk=_public_jwk(private_key.public_key()))

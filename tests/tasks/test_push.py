"""Push notifications: signing keys in PostgreSQL, the JWKS, and delivery to real webhooks."""

import asyncio
import base64
import hashlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentic_rag.schema.a2a import (
    PushNotificationAuthenticationInfo,
    Task,
    TaskState,
    TaskStatus,
)
from agentic_rag.schema.compat import PushConfig
from agentic_rag.security.ssrf import SSRFGuard, UnsafeURLError
from agentic_rag.tasks.push import TOKEN_HEADER, PushNotifier, SigningKeys, validate_config
from tests.support.live import serve

ISSUER = "https://agent.example"
LOCAL = SSRFGuard(allow=["127.0.0.1"])
SECRET = "client-token-9f3e"


class Receiver:
    """A webhook: records every request; `/status/{code}` answers with the codes in `script`."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.script: dict[str, list[int]] = {}
        self.release = asyncio.Event()
        self.slow_arrived = asyncio.Event()
        self.app = Starlette(
            routes=[
                Route("/hook/{name}", self.hook, methods=["POST"]),
                Route("/slow", self.slow, methods=["POST"]),
            ]
        )

    async def hook(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.requests.append((name, dict(request.headers), await request.body()))
        codes = self.script.get(name, [])
        status = codes.pop(0) if codes else 200
        headers = {"Retry-After": "0"} if status == 429 else None
        return Response(status_code=status, headers=headers)

    async def slow(self, request: Request) -> Response:
        self.requests.append(("slow", dict(request.headers), await request.body()))
        self.slow_arrived.set()
        await self.release.wait()
        return Response()

    def count(self, name: str) -> int:
        return sum(1 for seen, _, _ in self.requests if seen == name)


@pytest.fixture
async def keys(pool: asyncpg.Pool) -> SigningKeys:
    return await SigningKeys(pool).load()


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    webhook = Receiver()
    async with serve(webhook.app) as port:
        yield webhook, f"http://127.0.0.1:{port}"
        webhook.release.set()


def make_task(task_id: str = "task-1") -> Task:
    return Task(
        id=task_id,
        context_id="ctx-1",
        kind="task",
        status=TaskStatus(state=TaskState.completed, timestamp="2025-06-01T12:00:00Z"),
        metadata={"n": 1},
    )


def verify(token: str, keys: SigningKeys, audience: str) -> dict[str, Any]:
    """Verify as a receiver would: pick the key by `kid` from the published JWKS, pin ES256."""
    kid = jwt.get_unverified_header(token)["kid"]
    jwk = next(k for k in keys.jwks()["keys"] if k["kid"] == kid)
    claims: dict[str, Any] = jwt.decode(
        token, jwt.PyJWK(jwk).key, algorithms=["ES256"], audience=audience, issuer=ISSUER
    )
    return claims


def notifier(keys: SigningKeys, guard: SSRFGuard = LOCAL, **options: Any) -> PushNotifier:
    return PushNotifier(keys, guard, issuer=ISSUER, backoff_base=0.01, **options)


async def test_keys_persist_and_concurrent_loads_share_one(pool: asyncpg.Pool) -> None:
    first, second = await asyncio.gather(SigningKeys(pool).load(), SigningKeys(pool).load())
    again = await SigningKeys(pool).load()
    assert first.kid == second.kid == again.kid
    assert first.jwks() == again.jwks()
    assert await pool.fetchval("SELECT count(*) FROM signing_keys") == 1


async def test_kid_is_the_rfc7638_thumbprint(keys: SigningKeys) -> None:
    (jwk,) = keys.jwks()["keys"]
    canonical = f'{{"crv":"P-256","kty":"EC","x":"{jwk["x"]}","y":"{jwk["y"]}"}}'
    digest = hashlib.sha256(canonical.encode()).digest()
    assert jwk["kid"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert (jwk["alg"], jwk["use"], jwk["kty"], jwk["crv"]) == ("ES256", "sig", "EC", "P-256")
    assert "d" not in jwk  # public halves only


async def test_jwks_verifies_a_signed_token(keys: SigningKeys) -> None:
    token = keys.sign({"iss": ISSUER, "aud": "https://hook.example/x", "taskId": "t"})
    header = jwt.get_unverified_header(token)
    assert (header["alg"], header["kid"]) == ("ES256", keys.kid)
    assert verify(token, keys, "https://hook.example/x")["taskId"] == "t"
    with pytest.raises(jwt.InvalidAudienceError):
        verify(token, keys, "https://other.example/")


async def test_newest_key_signs_and_all_are_published(pool: asyncpg.Pool) -> None:
    old = await SigningKeys(pool).load()
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    await pool.execute(
        "INSERT INTO signing_keys (kid, private_pem, created_at) VALUES ($1, $2, now() + '1s')",
        "rotated",
        pem,
    )
    keys = await SigningKeys(pool).load()
    assert keys.kid == "rotated"
    assert [k["kid"] for k in keys.jwks()["keys"]] == ["rotated", old.kid]
    assert verify(keys.sign({"iss": ISSUER, "aud": "a"}), keys, "a")["aud"] == "a"


async def test_delivers_task_with_both_headers(
    keys: SigningKeys, receiver: tuple[Receiver, str]
) -> None:
    webhook, base = receiver
    url = f"{base}/hook/ok?path-secret=1"
    task = make_task()
    push = notifier(keys)
    push.notify(task, [PushConfig(url=url, token=SECRET), PushConfig(url=f"{base}/hook/plain")])
    await push.drain()
    await push.aclose()

    (ok,) = [r for r in webhook.requests if r[0] == "ok"]
    _, headers, body = ok
    assert Task.model_validate_json(body) == task
    assert json.loads(body)["contextId"] == "ctx-1"  # by alias, on the wire
    assert headers["content-type"] == "application/json"
    assert headers[TOKEN_HEADER.lower()] == SECRET
    scheme, _, token = headers["authorization"].partition(" ")
    assert scheme == "Bearer"
    claims = verify(token, keys, url)
    assert claims["taskId"] == "task-1"
    assert claims["exp"] - claims["iat"] == 300
    assert len(claims["jti"]) == 32

    (plain,) = [r for r in webhook.requests if r[0] == "plain"]
    assert TOKEN_HEADER.lower() not in plain[1]  # no token configured, none sent


async def test_retries_503_until_success(keys: SigningKeys, receiver: tuple[Receiver, str]) -> None:
    webhook, base = receiver
    webhook.script["flaky"] = [503, 503, 200]
    webhook.script["limited"] = [429, 200]
    push = notifier(keys)
    push.notify(
        make_task(),
        [PushConfig(url=f"{base}/hook/flaky"), PushConfig(url=f"{base}/hook/limited")],
    )
    await push.drain()
    await push.aclose()
    assert webhook.count("flaky") == 3
    assert webhook.count("limited") == 2
    flaky = [
        verify(h["authorization"][7:], keys, f"{base}/hook/flaky")
        for n, h, _ in webhook.requests
        if n == "flaky"
    ]
    assert len({c["jti"] for c in flaky}) == 3  # a fresh token per attempt


async def test_no_retry_on_400(
    keys: SigningKeys, receiver: tuple[Receiver, str], caplog: pytest.LogCaptureFixture
) -> None:
    webhook, base = receiver
    webhook.script["bad"] = [400, 200]
    push = notifier(keys)
    with caplog.at_level(logging.WARNING, logger="agentic_rag.tasks.push"):
        push.notify(make_task(), [PushConfig(url=f"{base}/hook/bad", token=SECRET)])
        await push.drain()
    await push.aclose()
    assert webhook.count("bad") == 1
    assert "rejected, not retried: HTTP 400" in caplog.text


async def test_gives_up_and_never_logs_secrets(
    keys: SigningKeys, receiver: tuple[Receiver, str], caplog: pytest.LogCaptureFixture
) -> None:
    webhook, base = receiver
    webhook.script["down"] = [500, 502, 503]
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    push = notifier(keys, max_attempts=3)
    with caplog.at_level(logging.WARNING, logger="agentic_rag.tasks.push"):
        push.notify(
            make_task(),
            [
                PushConfig(url=f"{base}/hook/down?key={SECRET}", token=SECRET),
                PushConfig(url=f"http://127.0.0.1:{closed_port}/hook", token=SECRET),
            ],
        )
        await push.drain()
    await push.aclose()
    assert webhook.count("down") == 3
    assert "failed after 3 attempts: HTTP 503" in caplog.text
    assert "failed after 3 attempts: ConnectError" in caplog.text
    assert caplog.text.count("retrying in") == 4
    assert SECRET not in caplog.text
    assert "eyJ" not in caplog.text  # no JWT (their base64 header starts so)


async def test_refused_url_is_never_contacted(
    keys: SigningKeys, receiver: tuple[Receiver, str], caplog: pytest.LogCaptureFixture
) -> None:
    webhook, base = receiver
    push = notifier(keys, guard=SSRFGuard())
    with caplog.at_level(logging.WARNING, logger="agentic_rag.tasks.push"):
        push.notify(make_task(), [PushConfig(url=f"{base}/hook/private")])
        await push.drain()
    await push.aclose()
    assert webhook.requests == []
    assert "refused" in caplog.text
    assert "loopback address" in caplog.text


async def test_token_with_crlf_is_never_sent(
    keys: SigningKeys, receiver: tuple[Receiver, str], caplog: pytest.LogCaptureFixture
) -> None:
    webhook, base = receiver
    push = notifier(keys)
    with caplog.at_level(logging.WARNING, logger="agentic_rag.tasks.push"):
        push.notify(make_task(), [PushConfig(url=f"{base}/hook/x", token="a\r\nX-Evil: 1")])
        await push.drain()
    await push.aclose()
    assert webhook.requests == []
    assert "must not contain CR or LF" in caplog.text


def test_validate_config() -> None:
    guard = SSRFGuard()
    validate_config(PushConfig(url="https://hooks.example/a2a", token="t0k-en"), guard)
    for token in ("a\rb", "a\nb", "a\r\nX-Injected: 1"):
        with pytest.raises(ValueError, match="token must not contain CR or LF"):
            validate_config(PushConfig(url="https://hooks.example/", token=token), guard)
    with pytest.raises(ValueError, match="token must be printable ASCII"):
        validate_config(PushConfig(url="https://hooks.example/", token="tök\x00"), guard)
    auth = PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials="x\ny")
    with pytest.raises(ValueError, match="credentials must not contain CR or LF"):
        validate_config(PushConfig(url="https://hooks.example/", authentication=auth), guard)
    with pytest.raises(UnsafeURLError, match="scheme 'ftp'"):
        validate_config(PushConfig(url="ftp://hooks.example/"), guard)
    with pytest.raises(UnsafeURLError, match="link-local"):
        validate_config(PushConfig(url="http://169.254.169.254/"), guard)


async def test_notify_does_not_wait_and_aclose_is_bounded(
    keys: SigningKeys, receiver: tuple[Receiver, str], caplog: pytest.LogCaptureFixture
) -> None:
    webhook, base = receiver
    push = notifier(keys)
    started = time.monotonic()
    push.notify(make_task(), [PushConfig(url=f"{base}/slow")])
    assert time.monotonic() - started < 0.05
    await webhook.slow_arrived.wait()  # the delivery runs in the background
    with caplog.at_level(logging.WARNING, logger="agentic_rag.tasks.push"):
        await push.aclose(grace=0.2)
        push.notify(make_task("late"), [PushConfig(url=f"{base}/hook/late")])
    assert time.monotonic() - started < 2
    assert "cancelling 1 unfinished push deliveries" in caplog.text
    assert "push for task late dropped: the notifier is closed" in caplog.text
    assert webhook.count("late") == 0


async def test_uses_the_given_client(keys: SigningKeys, receiver: tuple[Receiver, str]) -> None:
    webhook, base = receiver
    async with httpx.AsyncClient(headers={"User-Agent": "agentic-rag-test"}) as client:
        push = notifier(keys, client=client)
        push.notify(make_task(), [PushConfig(url=f"{base}/hook/ua")])
        await push.aclose()
        assert not client.is_closed  # not ours to close
    (_, headers, _) = webhook.requests[0]
    assert headers["user-agent"] == "agentic-rag-test"

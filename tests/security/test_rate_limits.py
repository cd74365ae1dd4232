"""Rate limits per credential: a per-minute rate and a one-second burst, per-tenant overrides,
shared by every worker through Redis."""

from pathlib import Path

import httpx

from conformance.skills import conformance_registry
from tests.support.live import live_server
from tests.support.rpc import text_message
from tests.support.security import create_key


def get(url: str, key: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "none"}}
    return httpx.post(url + "/", json=body, headers={"X-API-Key": key}, timeout=30)


def test_a_credential_over_its_limit_gets_429_with_retry_after(
    database_url: str, data_dir: Path
) -> None:
    first = create_key(database_url, "acme", ["read"])
    second = create_key(database_url, "acme", ["read"])
    operator = create_key(database_url, "ops", ["admin"])
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        rate_limit_per_minute=5,
        rate_limit_burst=100,
    ) as server:
        statuses = [get(server.url, first).status_code for _ in range(6)]
        assert statuses == [200] * 5 + [429]
        limited = get(server.url, first)
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert limited.json()["error"]["code"] == -32012
        assert "rate limit exceeded" in limited.json()["error"]["message"]
        assert get(server.url, second).status_code == 200  # limits are per credential
        metrics = httpx.get(server.url + "/metrics", headers={"X-API-Key": operator}).text
        assert 'agentic_rag_rate_limited_total{credential_kind="api-key"} 2.0' in metrics


def test_the_burst_limits_one_second(database_url: str, data_dir: Path) -> None:
    key = create_key(database_url, "acme", ["read"])
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        rate_limit_per_minute=1000,
        rate_limit_burst=3,
    ) as server:
        statuses = [get(server.url, key).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


def test_a_tenant_override_replaces_the_default(database_url: str, data_dir: Path) -> None:
    big = create_key(database_url, "big", ["read"])
    small = create_key(database_url, "small", ["read"])
    with live_server(
        conformance_registry(),
        database_url=database_url,
        data_dir=data_dir,
        rate_limit_per_minute=2,
        rate_limit_burst=100,
        rate_limit_tenants={"big": {"per_minute": 50, "burst": 100}},
    ) as server:
        assert [get(server.url, small).status_code for _ in range(3)] == [200, 200, 429]
        assert {get(server.url, big).status_code for _ in range(10)} == {200}


def test_workers_share_the_limit_through_redis(
    database_url: str, data_dir: Path, redis_url: str
) -> None:
    key = create_key(database_url, "shared", ["read", "write"])
    options = {"rate_limit_per_minute": 4, "rate_limit_burst": 100, "redis_url": redis_url}
    with (
        live_server(
            conformance_registry(), database_url=database_url, data_dir=data_dir / "a", **options
        ) as one,
        live_server(
            conformance_registry(), database_url=database_url, data_dir=data_dir / "b", **options
        ) as two,
    ):
        statuses = [get(server.url, key).status_code for server in (one, two, one, two, one)]
        assert statuses == [200, 200, 200, 200, 429]
        body = {"message": text_message("hi")}
        refused = httpx.post(
            two.url + "/",
            headers={"X-API-Key": key},
            timeout=30,
            json={"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": body},
        )
        assert refused.status_code == 429

"""Rate limits while their Redis fails: they fail open, and say so once (security/ratelimit.py).
The cluster test (tests/cluster/test_faults_stores.py) stops a real Redis and starts it again;
here nothing listens at REDIS_URL at all."""

import logging

import pytest

from agentic_rag.observability.metrics import Metrics, bind, unbind
from agentic_rag.security.principal import Principal
from agentic_rag.security.ratelimit import Limit, RateLimiter
from tests.support.live import free_port


async def test_without_redis_requests_are_served_uncounted_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    limiter = RateLimiter(Limit(per_minute=1, burst=1), redis_url=url)
    caller = Principal("acme", "key-1", frozenset(), "api-key")
    metrics = Metrics()
    token = bind(metrics)
    try:
        with caplog.at_level(logging.WARNING, logger="agentic_rag.security.ratelimit"):
            waits = [await limiter.hit(caller) for _ in range(5)]  # five times its limit
            blocked = await limiter.failure_blocked("203.0.113.7")
            await limiter.record_failure("203.0.113.7")
    finally:
        unbind(token)

    assert waits == [None] * 5 and blocked is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"rate limits: Redis (REDIS_URL {url}) failed (ConnectionError")
    assert warnings[0].endswith("requests are served without rate limits until it answers")
    served = metrics.registry.get_sample_value(
        "agentic_rag_rate_limits_uncounted_total", {"check": "credential"}
    )
    assert served == 5

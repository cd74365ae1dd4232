"""Rate limits per credential, with the `limits` library: in memory, or shared through Redis.

Each credential may make `per_minute` requests in any minute and at most `burst` in any
second (a moving window for both). Failed authentications are limited per client address,
so guessing API keys is slow.

While Redis fails (down, unreachable, refusing), the limits fail open: requests are served
without being counted, with one warning when that starts and one when Redis counts again,
and `agentic_rag_rate_limits_uncounted_total` counts the skipped checks. Rate limits protect
the service's availability; refusing every request because their counter is away would be
the outage they exist to prevent. Authentication does not depend on Redis (keys live in
PostgreSQL). Meanwhile Redis is tried at most once per `RETRY_SECONDS`, so that an unreachable
host costs requests no connection timeout.
"""

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from agentic_rag.config import without_credentials
from agentic_rag.observability.failures import RepeatedFailure
from agentic_rag.observability.metrics import record_rate_limits_uncounted
from agentic_rag.security.principal import Principal

log = logging.getLogger(__name__)

REDIS_TIMEOUT_SECONDS = 2.0  # connecting to Redis, and each command: a count is one round trip
RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class Limit:
    per_minute: int
    burst: int


class RateLimiter:
    def __init__(
        self,
        default: Limit,
        *,
        per_tenant: dict[str, Limit] | None = None,
        failures_per_minute: int = 20,
        redis_url: str | None = None,
    ) -> None:
        storage: Storage
        if redis_url:
            storage = RedisStorage(
                f"async+{redis_url}",
                implementation="redispy",
                key_prefix="agentic_rag_limits",
                socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
            )
            where = f"Redis (REDIS_URL {without_credentials(redis_url)})"
        else:
            storage = MemoryStorage()
            where = "memory"
        self._storage = storage
        # What the store raises when it fails (redis-py's RedisError); memory cannot fail.
        self._store_errors = storage.base_exceptions if redis_url else ()
        self._outage = RepeatedFailure(
            log,
            f"rate limits: {where}",
            traceback=False,
            meanwhile="requests are served without rate limits until it answers",
        )
        self._retry_at = 0.0  # while Redis fails: when to try it again
        self._limiter = MovingWindowRateLimiter(storage)
        self._default = default
        self._per_tenant = per_tenant or {}
        self._failures = RateLimitItemPerMinute(failures_per_minute)

    def _items(self, tenant: str) -> tuple[RateLimitItem, RateLimitItem]:
        limit = self._per_tenant.get(tenant, self._default)
        return RateLimitItemPerMinute(limit.per_minute), RateLimitItemPerSecond(limit.burst)

    async def hit(self, principal: Principal) -> float | None:
        """Count a request; None if allowed (or not counted: Redis fails), else the seconds to
        wait before retrying."""
        key = f"{principal.method}:{principal.tenant}:{principal.subject}"
        for item in self._items(principal.tenant):
            counted = await self._counted("credential", self._limiter.hit, item, key)
            if counted is None:  # Redis fails: served uncounted
                return None
            if not counted:
                return await self._retry_after(item, "credential", key)
        return None

    async def failure_blocked(self, client: str) -> float | None:
        """Seconds a client must wait because of its failed attempts, or None."""
        allowed = await self._counted("auth-failures", self._limiter.test, self._failures, client)
        if allowed is not False:  # under the limit, or not counted
            return None
        return await self._retry_after(self._failures, "auth-failures", client)

    async def record_failure(self, client: str) -> None:
        await self._counted("auth-failures", self._limiter.hit, self._failures, client)

    async def _counted(
        self,
        name: str,
        check: Callable[[RateLimitItem, str, str], Awaitable[bool]],
        item: RateLimitItem,
        identifier: str,
    ) -> bool | None:
        """`check(item, name, identifier)`'s answer (the limiter's hit or test), or None when
        the store fails, or failed less than RETRY_SECONDS ago: the request goes uncounted."""
        if self._outage.failures and time.monotonic() < self._retry_at:
            self._outage.failed()  # counted, not logged: the warning said it at the first
            record_rate_limits_uncounted(name)
            return None
        try:
            answer = await check(item, name, identifier)
        except self._store_errors:
            self._outage.failed()
            self._retry_at = time.monotonic() + RETRY_SECONDS
            record_rate_limits_uncounted(name)
            return None
        self._outage.succeeded()
        return answer

    async def _retry_after(self, item: RateLimitItem, *identifiers: str) -> float:
        try:
            stats = await self._limiter.get_window_stats(item, *identifiers)
        except self._store_errors:  # failed between the count and this: its window's length
            return float(item.get_expiry())
        return max(1.0, stats.reset_time - time.time())

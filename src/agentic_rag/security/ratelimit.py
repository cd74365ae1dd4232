"""Rate limits per credential, with the `limits` library: in memory, or shared through Redis.

Each credential may make `per_minute` requests in any minute and at most `burst` in any
second (a moving window for both). Failed authentications are limited per client address,
so guessing API keys is slow.
"""

import time
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from agentic_rag.security.principal import Principal


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
                f"async+{redis_url}", implementation="redispy", key_prefix="agentic_rag_limits"
            )
        else:
            storage = MemoryStorage()
        self._storage = storage
        self._limiter = MovingWindowRateLimiter(storage)
        self._default = default
        self._per_tenant = per_tenant or {}
        self._failures = RateLimitItemPerMinute(failures_per_minute)

    def _items(self, tenant: str) -> tuple[RateLimitItem, RateLimitItem]:
        limit = self._per_tenant.get(tenant, self._default)
        return RateLimitItemPerMinute(limit.per_minute), RateLimitItemPerSecond(limit.burst)

    async def hit(self, principal: Principal) -> float | None:
        """Count a request; None if allowed, else the seconds to wait before retrying."""
        key = f"{principal.method}:{principal.tenant}:{principal.subject}"
        for item in self._items(principal.tenant):
            if not await self._limiter.hit(item, "credential", key):
                return await self._retry_after(item, "credential", key)
        return None

    async def failure_blocked(self, client: str) -> float | None:
        """Seconds a client must wait because of its failed attempts, or None."""
        if await self._limiter.test(self._failures, "auth-failures", client):
            return None
        return await self._retry_after(self._failures, "auth-failures", client)

    async def record_failure(self, client: str) -> None:
        await self._limiter.hit(self._failures, "auth-failures", client)

    async def _retry_after(self, item: RateLimitItem, *identifiers: str) -> float:
        stats = await self._limiter.get_window_stats(item, *identifiers)
        return max(1.0, stats.reset_time - time.time())

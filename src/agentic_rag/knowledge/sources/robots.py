"""Politeness: robots.txt per site (protego) and a minimum interval between requests to a host.

robots.txt is read as RFC 9309 says: a 4xx answer (no robots.txt) allows everything; a 5xx
answer, or none at all, means the site cannot say what it allows, so nothing on it is fetched.
A robots.txt the SSRF guard refuses allows everything here: the page's own fetch is then refused
with the guard's reason, which says more than "robots".
"""

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

import httpx
from protego import Protego

from agentic_rag.security.fetch import Fetcher, FetchError, NotModified

ROBOTS_USER_AGENT = "agentic-rag"
ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 asks crawlers to read at least 500 KiB


class Clock(Protocol):
    """Time as the pacer sees it (tests give a virtual one, so delays cost no real time)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def host_key(url: str) -> str:
    """The host and port requests are paced by."""
    parsed = httpx.URL(url)
    return f"{parsed.host}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"


@dataclass
class HostPacer:
    """Spaces requests to one host by at least `min_interval` seconds (or the site's delay)."""

    min_interval: float
    clock: Clock = field(default_factory=MonotonicClock)
    _last: dict[str, float] = field(default_factory=dict)

    async def wait(self, url: str, interval: float | None = None) -> None:
        """Return when a request to `url`'s host may be sent; counts it as sent."""
        key = host_key(url)
        gap = max(self.min_interval, interval or 0.0)
        last = self._last.get(key)
        if last is not None and (delay := last + gap - self.clock.now()) > 0:
            await self.clock.sleep(delay)
        self._last[key] = self.clock.now()


@dataclass(frozen=True)
class RobotsRules:
    """What one site's robots.txt allows `ROBOTS_USER_AGENT`."""

    parser: Protego | None = None
    """None when the site has no robots.txt (everything is allowed) or `refusal` is set."""
    refusal: str | None = None
    """Why nothing on the site may be fetched, when robots.txt could not be read."""

    def refuses(self, url: str) -> str | None:
        """Why `url` may not be fetched, or None if it may."""
        if self.refusal is not None:
            return self.refusal
        if self.parser is not None and not self.parser.can_fetch(url, ROBOTS_USER_AGENT):
            return f"robots.txt disallows {httpx.URL(url).raw_path.decode('ascii')!r}"
        return None

    @property
    def crawl_delay(self) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(ROBOTS_USER_AGENT)
        return float(delay) if delay is not None else None

    @property
    def sitemaps(self) -> list[str]:
        return list(self.parser.sitemaps) if self.parser is not None else []


class Robots:
    """robots.txt of each site, fetched once per crawl (paced like any other request)."""

    def __init__(self, fetcher: Fetcher, pacer: HostPacer) -> None:
        self._fetcher = fetcher
        self._pacer = pacer
        self._rules: dict[str, RobotsRules] = {}

    async def rules_for(self, url: str) -> RobotsRules:
        parsed = httpx.URL(url)
        robots_url = str(parsed.copy_with(path="/robots.txt", query=None, fragment=None))
        if robots_url not in self._rules:
            self._rules[robots_url] = await self._read(robots_url)
        return self._rules[robots_url]

    async def _read(self, robots_url: str) -> RobotsRules:
        await self._pacer.wait(robots_url)
        try:
            resource = await self._fetcher.fetch(robots_url, max_bytes=ROBOTS_MAX_BYTES)
        except FetchError as exc:
            if exc.kind == "refused" or (exc.status is not None and 400 <= exc.status < 500):
                return RobotsRules()
            return RobotsRules(refusal=f"robots.txt could not be read ({exc})")
        if isinstance(resource, NotModified):  # not asked for; nothing to parse
            return RobotsRules()
        return RobotsRules(parser=Protego.parse(resource.body.decode("utf-8", "replace")))

"""Fetching one resource for a caller: through the SSRF guard, bounded in size, time and redirects.

Every request and every redirect goes through `SSRFGuard` (so private addresses are refused
unless the guard's allow-list names them). The body is streamed and decoded here, not by httpx,
so that a compressed body is inflated at most `max_bytes` (plus one) at a time: a small gzip
bomb stops at the limit instead of filling memory. A fetch with stored validators is a
conditional request; 304 comes back as `NotModified`.
"""

import asyncio
import re
import zlib
from collections.abc import Collection
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Self

import httpx

from agentic_rag.security.ssrf import MAX_REDIRECTS, SSRFGuard, UnsafeURLError

USER_AGENT = "agentic-rag/0.1 (knowledge ingestion; robots.txt user agent: agentic-rag)"
PDF = "application/pdf"
_OCTET_STREAMS = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_CHARSET = re.compile(r"""charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)

FetchFailure = Literal[
    "http status",
    "timeout",
    "refused",
    "connection",
    "redirects",
    "invalid response",
    "too large",
    "content type",
]


class FetchError(Exception):
    """A fetch that produced no resource. `kind` classifies it; the message says exactly why;
    `status` is the HTTP status of an "http status" failure."""

    def __init__(self, kind: FetchFailure, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: FetchFailure = kind
        self.status = status


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int = 20 * 1024 * 1024
    """Largest body accepted, counted after decompression."""
    timeout_seconds: float = 20.0
    """Each step of one request: connecting, and each read or write."""
    total_seconds: float = 60.0
    """One whole fetch: every redirect and the whole body."""
    max_redirects: int = MAX_REDIRECTS


@dataclass(frozen=True)
class Validators:
    """What a server said that lets a later request ask "has it changed since?"."""

    etag: str | None = None
    last_modified: str | None = None

    def conditional_headers(self) -> dict[str, str]:
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


@dataclass(frozen=True)
class Resource:
    url: str
    """The URL asked for."""
    final_url: str
    """The URL after redirects: relative links resolve against it."""
    status: int
    media_type: str
    """The content type without parameters, lower case ("text/html")."""
    charset: str | None
    body: bytes
    validators: Validators


@dataclass(frozen=True)
class NotModified:
    url: str
    final_url: str


class Fetcher:
    """Fetches resources through `guard` within `limits`; owns an HTTP client (close it)."""

    def __init__(
        self,
        guard: SSRFGuard,
        limits: FetchLimits | None = None,
        *,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.guard = guard
        self.limits = limits or FetchLimits()
        # trust_env=False: a proxy from the environment would connect on our behalf and undo
        # the guard's pinning. Bodies are read raw and inflated here (see the module doc).
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.limits.timeout_seconds),
            trust_env=False,
            headers={"User-Agent": user_agent, "Accept-Encoding": "gzip, deflate"},
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(
        self,
        url: str,
        *,
        validators: Validators | None = None,
        accept: Collection[str] | None = None,
        max_bytes: int | None = None,
        auth: httpx.Auth | None = None,
    ) -> Resource | NotModified:
        """GET `url`. `accept` lists the media types wanted (None: any); others are refused
        before their body is read. `auth` authenticates the request and each redirect, by the
        URL each goes to. Raises FetchError."""
        total = self.limits.total_seconds
        try:
            async with asyncio.timeout(total):
                return await self._fetch(
                    url, validators, accept, max_bytes or self.limits.max_bytes, auth
                )
        except TimeoutError:
            raise FetchError("timeout", f"no complete answer within {total:g} s") from None
        except UnsafeURLError as exc:
            hint = exc.hint("AGENTIC_RAG_INGEST_ALLOW_PRIVATE")
            raise FetchError("refused", f"refused by the SSRF guard: {exc}{hint}") from None
        except httpx.TooManyRedirects as exc:
            raise FetchError("redirects", str(exc)) from None
        except httpx.TimeoutException as exc:
            step = type(exc).__name__.removesuffix("Timeout").lower() or "request"
            raise FetchError(
                "timeout", f"{step} timed out after {self.limits.timeout_seconds:g} s"
            ) from None
        except httpx.TransportError as exc:
            raise FetchError("connection", str(exc) or type(exc).__name__) from None

    async def _fetch(
        self,
        url: str,
        validators: Validators | None,
        accept: Collection[str] | None,
        max_bytes: int,
        auth: httpx.Auth | None,
    ) -> Resource | NotModified:
        headers = validators.conditional_headers() if validators else {}
        response = await self.guard.request(
            self._client,
            "GET",
            url,
            headers=headers,
            max_redirects=self.limits.max_redirects,
            stream=True,
            auth=auth,
        )
        try:
            final_url = str(response.url)
            if response.status_code == 304:
                return NotModified(url=url, final_url=final_url)
            if not 200 <= response.status_code < 300:
                reason = response.reason_phrase
                raise FetchError(
                    "http status",
                    f"HTTP {response.status_code} {reason}".strip(),
                    status=response.status_code,
                )
            content_type = response.headers.get("Content-Type", "")
            media_type = content_type.split(";", 1)[0].strip().lower()
            if accept is not None and media_type not in accept and media_type not in _OCTET_STREAMS:
                raise FetchError("content type", f"content type {media_type!r} is not wanted")
            body = await _read_body(response, max_bytes)
            if media_type in _OCTET_STREAMS and body.startswith(b"%PDF-"):
                media_type = PDF  # PDFs are often served as downloads of unknown type
            if accept is not None and media_type not in accept:
                shown = media_type or "none"
                raise FetchError("content type", f"content type {shown!r} is not wanted")
            charset = _CHARSET.search(content_type)
            return Resource(
                url=url,
                final_url=final_url,
                status=response.status_code,
                media_type=media_type,
                charset=charset.group(1).lower() if charset else None,
                body=body,
                validators=Validators(
                    etag=response.headers.get("ETag"),
                    last_modified=response.headers.get("Last-Modified"),
                ),
            )
        finally:
            await response.aclose()


async def _read_body(response: httpx.Response, max_bytes: int) -> bytes:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    declared = response.headers.get("Content-Length", "")
    if encoding == "identity" and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    inflater = _inflater(encoding)
    parts: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        if inflater is None:
            data = raw
        else:
            try:
                # At most one byte past the limit: enough to know the limit is crossed.
                data = inflater.decompress(raw, max_bytes - size + 1)
            except zlib.error as exc:
                raise FetchError("invalid response", f"corrupt {encoding} body: {exc}") from None
        size += len(data)
        if size > max_bytes:
            raise _too_large(max_bytes)
        parts.append(data)
    return b"".join(parts)


def _too_large(max_bytes: int) -> FetchError:
    return FetchError("too large", f"the body is larger than {max_bytes} bytes")


def _inflater(encoding: str) -> "zlib._Decompress | None":
    if encoding == "identity":
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib or gzip header, detected
    raise FetchError("invalid response", f"unsupported content encoding {encoding!r}")

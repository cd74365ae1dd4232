"""Against DNS rebinding and cross-site requests: every request's `Host` must name this server,
and its `Origin`, when it has one, must be this server's, checked before authentication and
routing see the request (docs/security.md, "Host and Origin").

A web page whose owner rebinds its name to 127.0.0.1 (or to any address of this server) makes
the browser send requests here that are same-origin for the page, without a preflight; they
carry the page's name in `Host`. So a `Host` must be

- an IP address: a browser sends one only for a URL that names the address itself, which no
  name's owner can rebind (health probes and port mappings use them too);
- `localhost`, the bind address when it is a name, the host of the public URL, or a name of
  AGENTIC_RAG_ALLOWED_HOSTS (a reverse proxy's).

Ports are not compared: the page's owner chooses its URL's port, so it tells nothing, and
tunnels and port mappings change it. A request without `Host` (HTTP/1.0) comes from no browser.

An `Origin` (browsers send one with every POST and every cross-origin request) must be a page of
this server: the same host and port as the request's `Host`, or a page under the public URL's
host or a name of AGENTIC_RAG_ALLOWED_HOSTS. So another web application of this machine (another
port of localhost) cannot post here either; `null` (sandboxed frames, local files) is refused.
"""

import ipaddress
import logging
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from agentic_rag.config import Settings
from agentic_rag.hosts import is_host_name
from agentic_rag.schema.problems import problem_response

log = logging.getLogger(__name__)

_HOST: Final = b"host"
_ORIGIN: Final = b"origin"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
# host, or [IPv6 address], then an optional :port (RFC 9110 §7.2, RFC 3986 §3.2.2)
_AUTHORITY: Final = re.compile(
    r"(?:\[(?P<ipv6>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>\d{1,5}))?"
)
_ORIGIN_FORM: Final = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]+)")
_ECHOED: Final = 200  # characters of a refused value repeated in the answer and the log


def _name(host: str) -> str:
    return host.lower().removesuffix(".")


@dataclass(frozen=True)
class Authority:
    """A `Host` value or an origin's host and port: the host lowercase, without brackets or a
    final dot; `port` None when not written."""

    host: str
    port: int | None
    is_address: bool

    @classmethod
    def parse(cls, text: str) -> "Authority | None":
        """The authority `text` writes, or None if it is not one (of a name or an address)."""
        match = _AUTHORITY.fullmatch(text)
        if match is None:
            return None
        port = None if match["port"] is None else int(match["port"])
        if port is not None and port > 65535:
            return None
        if match["ipv6"] is not None:
            try:
                address = ipaddress.IPv6Address(match["ipv6"])
            except ValueError:
                return None
            return cls(str(address), port, is_address=True)
        host = _name(match["host"])
        try:
            return cls(str(ipaddress.IPv4Address(host)), port, is_address=True)
        except ValueError:
            return cls(host, port, is_address=False) if is_host_name(host) else None


@dataclass(frozen=True)
class ServedNames:
    """The one allow-list: the names a request's `Host` may give (besides IP addresses), and the
    hosts whose pages may call this server (besides its own pages)."""

    names: frozenset[str]
    page_hosts: frozenset[str]

    @classmethod
    def of(cls, settings: Settings) -> "ServedNames":
        configured = {_name(host) for host in settings.allowed_hosts}
        if settings.public_url and (public := urlsplit(settings.public_url).hostname):
            configured.add(_name(public))
        names = {"localhost", *configured}
        bound = Authority.parse(settings.host)
        if bound is not None and not bound.is_address:  # bound to a name
            names.add(bound.host)
        return cls(frozenset(names), frozenset(configured))

    def allows_host(self, host: Authority) -> bool:
        return host.is_address or host.host in self.names

    def allows_origin(self, origin: str, host: Authority | None) -> bool:
        """Whether a page of `origin` may call this server at `host` (None: no Host sent)."""
        form = _ORIGIN_FORM.fullmatch(origin.lower())
        page = None if form is None else Authority.parse(form["authority"])
        if form is None or page is None:
            return False  # `null`, or not an http(s) origin
        if page.host in self.page_hosts:
            return True
        if host is None or page.host != host.host:
            return False
        default = _DEFAULT_PORTS[form["scheme"]]  # what a port left out means, for both
        return (default if page.port is None else page.port) == (
            default if host.port is None else host.port
        )


class HostGuard:
    """The outermost check of the app: a request whose `Host` names another server is answered
    421, one from a page of another site 403, before any other middleware or route runs
    (observability aside, which counts them)."""

    def __init__(self, app: ASGIApp, names: ServedNames) -> None:
        self.app, self._names = app, names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host: Authority | None = None
        for name, value in scope["headers"]:
            if name == _HOST:
                text = value.decode("latin-1")
                host = Authority.parse(text)
                if host is None or not self._names.allows_host(host):
                    await self._refuse(scope, receive, send, 421, "misdirected", text)
                    return
        for name, value in scope["headers"]:
            if name == _ORIGIN:
                text = value.decode("latin-1")
                if not self._names.allows_origin(text, host):
                    await self._refuse(scope, receive, send, 403, "foreign-origin", text)
                    return
        await self.app(scope, receive, send)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, kind: str, given: str
    ) -> None:
        shown = given[:_ECHOED]
        if status == 421:
            detail = (
                f"this server does not answer to the host {shown!r} (a protection against "
                "DNS rebinding); its operator adds names with AGENTIC_RAG_ALLOWED_HOSTS"
            )
        else:
            detail = (
                f"requests from pages of {shown!r} are refused: that origin is not this "
                "server's (a protection against cross-site requests); its operator allows a "
                "site with AGENTIC_RAG_ALLOWED_HOSTS"
            )
        log.warning("refused %s %s: %s", scope["method"], scope["path"], detail)
        response = problem_response(status, kind, detail, instance=scope["path"])
        await response(scope, receive, send)

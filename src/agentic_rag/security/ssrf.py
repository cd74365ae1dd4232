"""The SSRF guard: every URL fetched on a caller's behalf passes through it (docs/security.md).

A URL is checked twice. `check_shape` runs when the URL is accepted (scheme, no credentials, a
host, literal addresses). `resolve` runs when it is fetched: the host is resolved, every address is
checked, and the request is then sent to the checked address (`PinnedURL`), so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect it.
"""

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from agentic_rag.hosts import IPNetwork, allow_list_entry, is_host_name

type IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_REDIRECTS = 5

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Not sent to another origin after a redirect, like httpx and browsers do.
_CREDENTIAL_HEADERS = ("Authorization", "Proxy-Authorization", "Cookie")
_BODY_ARGUMENTS = ("content", "data", "files", "json")

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")

_DIGITS = {10: re.compile(r"[0-9]+"), 16: re.compile(r"[0-9a-f]*"), 8: re.compile(r"[0-7]+")}


class UnsafeURLError(ValueError):
    """A URL the guard refuses. `rule` names the rule; `address` the offending address, if any.

    Messages name the host, never the whole URL: paths and queries of webhooks often hold secrets.
    """

    def __init__(self, rule: str, *, host: str | None = None, address: str | None = None) -> None:
        self.rule = rule
        self.host = host
        self.address = address
        subject = []
        if host is not None and host != address:
            subject.append(f"host {host!r}")
        if address is not None:
            subject.append(f"address {address}")
        where = f" ({', '.join(subject)})" if subject else ""
        super().__init__(f"URL refused{where}: {rule}")

    def hint(self, setting: str) -> str:
        """What to add to the message: `setting` (an allow-list of hosts and networks) when it
        can help, that is when the URL was refused for its address; nothing otherwise (a
        scheme, credentials, a malformed URL)."""
        if self.address is None:
            return ""
        return f"; an intranet's addresses can be allowed with the setting {setting}"


@dataclass(frozen=True, slots=True)
class PinnedURL:
    """A URL whose host was resolved and checked; connect to `ip`, but speak to `host`."""

    url: str
    host: str  # lowercase, IDNA-encoded, no brackets; what Host and TLS SNI name
    port: int
    ip: IPAddress

    @property
    def scheme(self) -> str:
        return httpx.URL(self.url).scheme

    @property
    def host_is_ip(self) -> bool:
        return _literal_ip(self.host) is not None

    @property
    def host_header(self) -> str:
        # The authority as the caller wrote it: port only when not the default, IPv6 in brackets.
        return httpx.URL(self.url).netloc.decode("ascii")

    def connect_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address."""
        return httpx.URL(self.url).copy_with(host=str(self.ip))


class SSRFGuard:
    """Refuses URLs that lead to private, local or otherwise non-public addresses.

    `allow` lists host names ("hooks.internal") and addresses or networks ("127.0.0.1",
    "10.0.0.0/8") exempt from the address rules; the scheme and credential rules still apply.
    """

    def __init__(self, allow: Sequence[str] = ()) -> None:
        self._allowed_hosts: set[str] = set()
        self._allowed_networks: list[IPNetwork] = []
        for entry in allow:
            allowed = allow_list_entry(entry)
            if isinstance(allowed, str):
                self._allowed_hosts.add(allowed)
            else:
                self._allowed_networks.append(allowed)

    def check_shape(self, url: str) -> None:
        """Check what can be checked without DNS; raise UnsafeURLError if the URL is refused."""
        self._parse(url)

    async def resolve(self, url: str) -> PinnedURL:
        """Check the URL, resolve its host and check every address; pin the first one.

        Raises UnsafeURLError if refused, OSError (socket.gaierror) if the host does not resolve.
        """
        host, port, literal = self._parse(url)
        if literal is not None:
            return PinnedURL(url=url, host=host, port=port, ip=literal)
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG
        )
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} has no addresses")
        # Every address is checked, not only the pinned one: one bad answer makes the name suspect.
        for address in addresses:
            self._check_address(address, host)
        return PinnedURL(url=url, host=host, port=port, ip=addresses[0])

    async def request(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        *,
        follow_redirects: bool = True,
        max_redirects: int = MAX_REDIRECTS,
        stream: bool = False,
        auth: httpx.Auth | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send a request through the guard; other arguments are those of `client.build_request`.

        The connection goes to the checked address, with the original Host header and, for https,
        the host name as TLS SNI, so the certificate is still verified against the name. Up to
        `max_redirects` redirects are followed, each checked again; `response.url` is the URL
        asked for (or redirected to), not the address. `client` must speak HTTP/1.1 (see `_send`).
        With `stream=True` the body is not read: the caller reads it (`aiter_raw`, `aiter_bytes`)
        and must close the response (`aclose`), as with `client.send(..., stream=True)`.
        `auth` authenticates each request, the redirected ones too (by the URL each goes to).
        """
        headers = httpx.Headers(kwargs.pop("headers", None))
        history: list[httpx.Response] = []
        while True:
            response = await self._send(client, method, url, headers, kwargs, stream, auth)
            location = response.headers.get("Location")
            if (
                not follow_redirects
                or response.status_code not in _REDIRECT_STATUSES
                or location is None
            ):
                response.history = history
                return response
            await response.aclose()
            if len(history) == max_redirects:
                raise httpx.TooManyRedirects(
                    f"more than {max_redirects} redirects", request=response.request
                )
            history.append(response)
            try:
                target = httpx.URL(url).join(location)
            except httpx.InvalidURL as exc:
                raise UnsafeURLError(f"malformed redirect location ({exc})") from None
            method = _redirect_method(method, response.status_code)
            if method == "GET":
                for name in _BODY_ARGUMENTS:
                    kwargs.pop(name, None)
                for name in ("Content-Type", "Content-Length", "Transfer-Encoding"):
                    headers.pop(name, None)
            if not _same_origin(httpx.URL(url), target):
                for name in _CREDENTIAL_HEADERS:
                    headers.pop(name, None)
            kwargs.pop("params", None)  # the Location carries its own query
            url = str(target)

    async def _send(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        headers: httpx.Headers,
        kwargs: dict[str, Any],
        stream: bool,
        auth: httpx.Auth | None,
    ) -> httpx.Response:
        try:
            pinned = await self.resolve(url)
        except socket.gaierror as exc:
            host = httpx.URL(url).host
            raise httpx.ConnectError(f"cannot resolve {host!r}: {exc.strerror}") from exc
        sent_headers = httpx.Headers(headers)
        sent_headers["Host"] = pinned.host_header
        extensions: dict[str, Any] = dict(kwargs.get("extensions") or {})
        if pinned.scheme == "https" and not pinned.host_is_ip:
            extensions["sni_hostname"] = pinned.host
            # The client pools connections by (scheme, address, port). A pooled TLS connection
            # verified for one name must not carry a request for another name on the same address,
            # so connections opened under a name are never returned to the pool.
            sent_headers["Connection"] = "close"
        request = client.build_request(
            method,
            pinned.connect_url(),
            headers=sent_headers,
            **{**kwargs, "extensions": extensions},
        )
        response = await client.send(request, follow_redirects=False, stream=stream, auth=auth)
        # Report the URL asked for, not the address: callers resolve relative links against it.
        response.request = httpx.Request(method, url, headers=request.headers)
        return response

    def _parse(self, url: str) -> tuple[str, int, IPAddress | None]:
        """Parse and check the URL's shape; return its host, port and literal address if any."""
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise UnsafeURLError(f"malformed URL ({exc})") from None
        if parsed.scheme not in _SCHEMES:
            raise UnsafeURLError(
                f"scheme {parsed.scheme or '(none)'!r} is not allowed, only http and https"
            )
        host = parsed.raw_host.decode("ascii").lower()
        if parsed.userinfo:
            raise UnsafeURLError(
                "credentials in the URL (user:password@) are not allowed", host=host
            )
        if not host:
            raise UnsafeURLError("the URL has no host")
        port = parsed.port if parsed.port is not None else _DEFAULT_PORTS[parsed.scheme]
        if not 0 < port < 65536:
            raise UnsafeURLError(f"port {port} is out of range", host=host)
        literal = _literal_ip(host)
        if literal is not None:
            self._check_address(literal, host)
        elif not is_host_name(host.removesuffix(".")):
            raise UnsafeURLError("malformed host name", host=host)
        return host, port, literal

    def _check_address(self, address: IPAddress, host: str) -> None:
        if self._is_allowed(address, host):
            return
        reason = _unsafe_reason(address)
        if reason is not None:
            raise UnsafeURLError(f"{reason} address", host=host, address=str(address))

    def _is_allowed(self, address: IPAddress, host: str) -> bool:
        if host.removesuffix(".") in self._allowed_hosts:
            return True
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        return any(c in net for c in candidates for net in self._allowed_networks)


def _unsafe_reason(address: IPAddress) -> str | None:
    """Why an address is not a public destination, or None if it is one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = _unsafe_reason(embedded)
            if reason is not None:
                return f"{reason} (IPv4 {embedded} embedded in IPv6)"
            if address.ipv4_mapped is not None or address in _NAT64:
                return None  # these reach the embedded IPv4 address, which is public
    # Ordered from the most to the least specific, so the message names the real reason.
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "shared (CGNAT 100.64.0.0/10)"
    if isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL:
        return "unique local (fc00::/7)"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "non-global"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _literal_ip(host: str) -> IPAddress | None:
    """The address a host is, if it is a literal; UnsafeURLError for malformed literals."""
    if ":" in host:
        if "%" in host:
            raise UnsafeURLError("IPv6 zone identifiers are not allowed", host=host)
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise UnsafeURLError("malformed IPv6 address", host=host) from None
    return _parse_ipv4(host)


def _parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """IPv4 parsing as in the WHATWG URL standard, which resolvers (inet_aton) agree with.

    Accepts the forms browsers and `getaddrinfo` accept: 1 to 4 parts, each decimal, octal
    (leading 0) or hex (0x), the last part filling the remaining bytes: "2130706433", "0x7f.1",
    "0177.0.0.1" are all 127.0.0.1. None when the host is a name (its last label is not a number).
    """
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()  # one trailing dot, as in "127.0.0.1."
    if _ipv4_number(parts[-1]) is None:
        return None
    numbers = [_ipv4_number(part) for part in parts]
    if len(numbers) > 4 or any(n is None for n in numbers):
        raise UnsafeURLError("malformed IPv4 address", host=host)
    values = [n for n in numbers if n is not None]
    *head, last = values
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(values)):
        raise UnsafeURLError("malformed IPv4 address (a part is out of range)", host=host)
    value = last
    for index, n in enumerate(head):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _ipv4_number(part: str) -> int | None:
    radix = 10
    if part[:2] in ("0x", "0X"):
        radix, part = 16, part[2:]
    elif len(part) > 1 and part.startswith("0"):
        radix, part = 8, part[1:]
    # int() alone would also accept "1_0", " 1" and "+1".
    if not _DIGITS[radix].fullmatch(part.lower()):
        return None
    return int(part, radix) if part else 0


def _redirect_method(method: str, status: int) -> str:
    # What httpx and browsers do: 303 and 302 (except after HEAD), and 301 after POST, become GET.
    if status in (302, 303) and method != "HEAD":
        return "GET"
    if status == 301 and method == "POST":
        return "GET"
    return method


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (
        a.scheme == b.scheme
        and a.host == b.host
        and (a.port or _DEFAULT_PORTS.get(a.scheme)) == (b.port or _DEFAULT_PORTS.get(b.scheme))
    )

"""Credentials for peers that require them: headers sent with the requests to a peer's origin
that one tenant's delegations, card fetches and probes make, and no other tenant's.

They come from the setting `AGENTIC_RAG_PEER_CREDENTIALS` (tenant -> origin -> headers), never
from the database: a registered peer carries no secret. A tenant with no entry sends none, so a
tenant that registers another's peer cannot act on the peer as that other tenant (a confused
deputy). `PeerCredentials.of(tenant)` is the tenant's `httpx.Auth`: every request to one of its
origins carries that origin's headers, and no request to another origin does (a redirect
elsewhere included).
"""

from collections.abc import Generator, Mapping

import httpx
from pydantic import SecretStr

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str | httpx.URL) -> str:
    """`scheme://host:port` of `url`, lower case, with the port even when it is the default."""
    parsed = httpx.URL(url)
    port = parsed.port or _DEFAULT_PORTS.get(parsed.scheme)
    return f"{parsed.scheme}://{parsed.host}:{port}"


class OriginHeaders(httpx.Auth):
    """Headers by origin: each request gets those of the origin it goes to, if any."""

    def __init__(self, by_origin: Mapping[str, Mapping[str, SecretStr]]) -> None:
        self._by_origin = {
            origin(url): {name: value.get_secret_value() for name, value in headers.items()}
            for url, headers in by_origin.items()
        }

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        # The Host header names the origin even when the SSRF guard already put the checked
        # address into the URL (`SSRFGuard.request` does so before sending).
        host = request.headers.get("Host", request.url.netloc.decode("ascii"))
        headers = self._by_origin.get(origin(f"{request.url.scheme}://{host}/"))
        if headers:
            request.headers.update(headers)
        yield request


class PeerCredentials:
    """Every tenant's peer credentials (`AGENTIC_RAG_PEER_CREDENTIALS`)."""

    def __init__(self, by_tenant: Mapping[str, Mapping[str, Mapping[str, SecretStr]]]) -> None:
        self._by_tenant = {
            tenant: OriginHeaders(origins) for tenant, origins in by_tenant.items() if origins
        }

    @property
    def tenants(self) -> list[str]:
        """The tenants that have credentials for some peer."""
        return list(self._by_tenant)

    def of(self, tenant: str) -> OriginHeaders | None:
        """What `tenant`'s requests to peers carry; None: nothing."""
        return self._by_tenant.get(tenant)

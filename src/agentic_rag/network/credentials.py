"""Credentials for peers that require them: headers sent with every request to a peer's origin.

They come from the setting `AGENTIC_RAG_PEER_CREDENTIALS` (origin -> headers), never from the
database: a registered peer carries no secret. `PeerCredentials` is an `httpx.Auth` on the
clients that talk to peers (delegation, card fetches and probes), so every request to that
origin carries them, and no request to another origin does (a redirect elsewhere included).
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


class PeerCredentials(httpx.Auth):
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

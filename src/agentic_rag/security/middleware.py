"""The authentication middleware: every request gets a principal before any adapter sees it."""

from starlette.types import ASGIApp, Receive, Scope, Send

from agentic_rag.schema.problems import problem_response
from agentic_rag.security.auth import Authenticator, AuthFailure
from agentic_rag.security.principal import SCOPE_KEY

# Routes anyone may read: discovery documents and probes (metrics guard themselves).
PUBLIC_PATHS = frozenset(
    {
        "/.well-known/agent.json",
        "/.well-known/agent-card.json",
        "/.well-known/jwks.json",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/healthz",
        "/readyz",
        "/metrics",
    }
)
# The operators' REST routes of the agent network (agentic_rag/network/rest.py).
PROBLEM_PATHS = "/a2a/"
# `GET /` is the home page (home.py); `POST /` is JSON-RPC and needs a credential.
PUBLIC_PAGES = frozenset({("GET", "/"), ("HEAD", "/")})
# The problem kind (docs/network.md) of each status a refusal has.
PROBLEM_KINDS = {401: "unauthenticated", 429: "rate-limited", 503: "unavailable"}


class AuthenticationMiddleware:
    """Puts the caller's principal on the ASGI scope, or answers 401 / 429 itself."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self._authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] not in ("http", "websocket")
            or scope["path"] in PUBLIC_PATHS
            or (scope.get("method"), scope["path"]) in PUBLIC_PAGES
        ):
            await self.app(scope, receive, send)
            return
        try:
            scope[SCOPE_KEY] = await self._authenticator.authenticate(scope)
        except AuthFailure as failure:
            if scope["path"].startswith(PROBLEM_PATHS):  # REST routes answer RFC 7807 problems
                response = problem_response(
                    failure.status,
                    PROBLEM_KINDS[failure.status],
                    failure.message,
                    instance=scope["path"],
                    headers=failure.headers,
                    code=failure.code,
                )
            else:
                response = failure.response()
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

"""The authentication middleware: every request gets a principal before any adapter sees it."""

from starlette.types import ASGIApp, Receive, Scope, Send

from agentic_rag.schema.problems import problem_response
from agentic_rag.security.auth import Authenticator, AuthFailure
from agentic_rag.security.principal import SCOPE_KEY

# Discovery documents (RFC 8615's well-known URIs: Agent Cards, JWKS, RFC 9728's protected
# resource, RFC 8414's and OIDC's authorization server metadata, root or path-inserted) are
# public: a client reads them before it has a credential, so one not served answers 404, never
# 401. No route takes a path parameter that could reach past this prefix.
WELL_KNOWN = "/.well-known/"
# Routes anyone may read: probes (metrics guard themselves), and OIDC's path-appended
# discovery form for the one resource OAuth clients are sent to (/mcp).
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/metrics", "/mcp/.well-known/openid-configuration"}
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
            or scope["path"].startswith(WELL_KNOWN)
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

"""The authentication middleware: every request gets a principal before any adapter sees it."""

from starlette.types import ASGIApp, Receive, Scope, Send

from agentic_rag.security.principal import LOCAL, SCOPE_KEY


class AuthenticationMiddleware:
    """Puts the caller's principal on the ASGI scope.

    With no credentials configured the server runs in open local mode: every caller is the
    single `local` tenant (the CLI refuses that mode on a non-loopback address).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope[SCOPE_KEY] = LOCAL
        await self.app(scope, receive, send)

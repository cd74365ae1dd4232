"""Who calls an MCP request, and whether their credential's scopes allow it."""

from collections.abc import Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from agentic_rag.security.auth import FORBIDDEN
from agentic_rag.security.principal import Principal, Scope, principal_of

Context = ServerRequestContext[Any, Any]
PrincipalFor = Callable[[Context], Principal]


def principal_from_http(ctx: Context) -> Principal:
    """The principal the authentication middleware put on the HTTP request of this call."""
    request = ctx.request
    if not isinstance(request, Request):
        raise RuntimeError("an MCP request over HTTP came without its HTTP request")
    return principal_of(request.scope)


def fixed_principal(principal: Principal) -> PrincipalFor:
    """Every call is `principal`'s: stdio, where the process owner is the caller."""
    return lambda ctx: principal


def require(principal: Principal, scope: Scope, method: str) -> Principal:
    """`principal`, if its scopes allow `method`; else the MCP error A2A's refusal matches."""
    if not principal.allows(scope):
        # The same code and words as A2A's refusal (security/auth.py, docs/security.md).
        raise MCPError(
            FORBIDDEN,
            f"this credential lacks the scope {scope!r} that {method} needs",
            data={"required_scope": scope, "granted_scopes": sorted(principal.scopes)},
        )
    return principal

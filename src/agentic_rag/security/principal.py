"""Who is calling: the principal that authentication puts on every request.

Adapters (A2A, MCP, REST) read the tenant from here and nowhere else; a request that reached
an adapter without a principal is a wiring bug, so `principal_of` fails loudly instead of
falling back to some default tenant.
"""

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

SCOPE_KEY = "agentic_rag.principal"

# read: tasks/get, resubscribe, push config get/list, tools/list. write: send, stream, cancel,
# push config set/delete, tools/call. admin: metrics and key management over HTTP.
Scope = Literal["read", "write", "admin"]
ALL_SCOPES: frozenset[str] = frozenset({"read", "write", "admin"})


@dataclass(frozen=True)
class Principal:
    tenant: str
    subject: str  # the API key id, the JWT `sub`, or "local"
    scopes: frozenset[str]
    method: Literal["local", "api-key", "jwt"]
    groups: frozenset[str] | None = None
    """The groups of tools the credential selects (an API key's --groups); None: no selection,
    every group the deployment offers (skills/groups.py)."""

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


LOCAL = Principal(tenant="local", subject="local", scopes=ALL_SCOPES, method="local")


def principal_of(scope: MutableMapping[str, Any]) -> Principal:
    principal = scope.get(SCOPE_KEY)
    if not isinstance(principal, Principal):
        raise RuntimeError("no principal on this request: is the authentication middleware on?")
    return principal

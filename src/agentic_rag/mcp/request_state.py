"""The `requestState` of 2026-07-28 round trips, sealed so that a client cannot alter it.

A tool call that asks a question answers `input_required` with the arguments gathered so far
in `requestState` (elicitation.py); the client sends it back with its answer. The spec treats
it as attacker-controlled input: a client that could edit it could, say, add `confirm: true`
to a `clear_graph` whose question it never answered. So the SDK's `RequestStateBoundary`
seals every state this server hands out (AES-256-GCM) inside an envelope that binds it to
the method, the tool and its arguments, the caller (tenant and subject), this server and a
ten-minute expiry; a state that fails any check is refused with -32602 "Invalid or expired
requestState" before the tool runs.

Over HTTP the key is derived from the server's signing keys (table `signing_keys`, as push
notifications use), so every worker opens what any other sealed; over stdio, where one
process serves one client, a key made at start does.
"""

import os
from collections.abc import Callable

from mcp.server.request_state import (
    AESGCMRequestStateCodec,
    RequestStateBoundary,
    RequestStateSecurity,
)

from agentic_rag.mcp.access import Context, PrincipalFor
from agentic_rag.tasks.push import SigningKeys

# The SDK's default is ten minutes too: time for a person to answer a form.
TTL_SECONDS = 600.0

# Seals' audience: state minted by another service under the same keys is refused.
AUDIENCE = "agentic-rag"

_PURPOSE = "agentic-rag/mcp/request-state"


class SigningKeyCodec:
    """The SDK's AES-GCM codec under keys derived from the signing keys, built on first use
    (the keys are loaded when the server starts, after this is constructed)."""

    def __init__(self, keys: SigningKeys) -> None:
        self._keys = keys
        self._codec: AESGCMRequestStateCodec | None = None

    def _built(self) -> AESGCMRequestStateCodec:
        if self._codec is None:
            self._codec = AESGCMRequestStateCodec(self._keys.derived_secrets(_PURPOSE))
        return self._codec

    def seal(self, payload: bytes) -> str:
        return self._built().seal(payload)

    def unseal(self, token: str) -> bytes:
        return self._built().unseal(token)


def caller_binding(principal_for: PrincipalFor) -> Callable[[Context], str | None]:
    """Binds a state to the caller: presented by another credential's subject, it is refused."""

    def bind(ctx: Context) -> str:
        principal = principal_for(ctx)
        return f"{principal.tenant}\x00{principal.subject}"

    return bind


def sealed_by_signing_keys(keys: SigningKeys, principal_for: PrincipalFor) -> RequestStateBoundary:
    """The boundary of an HTTP server: any worker opens what another sealed."""
    security = RequestStateSecurity(
        codec=SigningKeyCodec(keys), ttl=TTL_SECONDS, bind_principal=caller_binding(principal_for)
    )
    return RequestStateBoundary(security, default_audience=AUDIENCE)


def sealed_in_process(principal_for: PrincipalFor) -> RequestStateBoundary:
    """The boundary of a one-process server (stdio): a key of this process's own."""
    security = RequestStateSecurity(
        keys=[os.urandom(32)], ttl=TTL_SECONDS, bind_principal=caller_binding(principal_for)
    )
    return RequestStateBoundary(security, default_audience=AUDIENCE)

"""Resource subscriptions: a client hears when its documents change, whichever worker changed them.

Each commit that creates, changes or deletes a document notifies PostgreSQL's channel
`store.DOCUMENTS_CHANNEL` (knowledge/store.py); `DocumentChanges` listens to it, so a change
made by any process on the database (an HTTP worker, an A2A task, another stdio server)
reaches the clients of this one, of the change's tenant only:

- `resources/updated` for a subscribed document changed (re-ingested with other text) or
  deleted;
- `resources/list_changed` when a document of the client's tenant is added or deleted.

2025-11-25 (`DocumentSubscriptions`): `resources/subscribe` and the notifications outside any
request need a connection that lasts: stdio's, which the server serves alone, or an HTTP
session's (sessions.py; a request without one cannot subscribe). 2026-07-28 (`TenantListen`):
`subscriptions/listen`, whose response is the stream of notifications, over stdio and over
HTTP alike.
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp.types as types
import orjson
from mcp.server.context import CallNext, HandlerResult
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError

from agentic_rag.knowledge.errors import NotFound
from agentic_rag.knowledge.store.documents import DOCUMENTS_CHANNEL
from agentic_rag.mcp.access import Context, PrincipalFor, require
from agentic_rag.mcp.resources import document_id_of, document_uri
from agentic_rag.storage.pool import Pool

if TYPE_CHECKING:
    from agentic_rag.knowledge.service import KnowledgeService

log = logging.getLogger(__name__)

# Changes the listener holds before the sender takes them: a burst (a source of thousands of
# documents deleted) waits here rather than in PostgreSQL's queue.
BACKLOG = 10_000

# (tenant, document id, "created" | "updated" | "deleted")
OnChange = Callable[[str, str, str], Awaitable[None]]

ClientOf = Callable[[Context], str | None]
"""The lasting connection a request came on (its key), or None when it came on none."""


def one_connection(ctx: Context) -> str:
    """stdio's: every request comes on the one connection."""
    return "stdio"


class DocumentChanges:
    """The database's document changes, passed on to each of `consumers` in turn."""

    def __init__(self, *consumers: OnChange) -> None:
        self._consumers = consumers

    @asynccontextmanager
    async def listening(self, pool: Pool) -> AsyncIterator[None]:
        """Listen on a connection of `pool` until the block ends."""
        changes, taken = anyio.create_memory_object_stream[dict[str, Any]](BACKLOG)

        def heard(_conn: object, _pid: int, _channel: str, payload: object) -> None:
            try:
                changes.send_nowait(orjson.loads(str(payload)))
            except anyio.WouldBlock:
                log.warning("too many document changes at once: some were not notified")

        async with pool.acquire() as conn, anyio.create_task_group() as group:
            await conn.add_listener(DOCUMENTS_CHANNEL, heard)
            group.start_soon(self._pass_on, taken)
            try:
                yield
            finally:
                await conn.remove_listener(DOCUMENTS_CHANNEL, heard)
                group.cancel_scope.cancel()

    async def _pass_on(self, taken: anyio.abc.ObjectReceiveStream[dict[str, Any]]) -> None:
        async with taken:
            async for change in taken:
                for consumer in self._consumers:
                    try:
                        await consumer(change["tenant"], change["id"], change["change"])
                    except Exception:  # a client went away: the next change may find it back
                        log.debug("could not notify a document change", exc_info=True)


@dataclass
class _Client:
    """A lasting connection's client: its tenant, the latest request's session (whose
    standalone channel is the connection's, which outlives the request), its subscriptions."""

    tenant: str
    session: ServerSession
    subscribed: set[str] = field(default_factory=set)  # document ids


class DocumentSubscriptions:
    """The `resources/subscribe` and `resources/unsubscribe` handlers of the clients of lasting
    connections (2025-11-25), and the notifications of their tenant's document changes.

    `client_of` names the connection a request came on (stdio: `one_connection`; HTTP: its
    session); `list_changed`: whether the server declared `resources.listChanged`.
    """

    def __init__(
        self,
        knowledge: "KnowledgeService",
        principal_for: PrincipalFor,
        client_of: ClientOf = one_connection,
        *,
        list_changed: bool = True,
    ) -> None:
        self._knowledge, self._principal_for = knowledge, principal_for
        self._client_of, self._list_changed = client_of, list_changed
        self._clients: dict[str, _Client] = {}

    async def seen(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """Middleware: remember the client's connection, to notify it between requests."""
        key = self._client_of(ctx)
        if key is not None:
            tenant = self._principal_for(ctx).tenant
            client = self._clients.get(key)
            if client is None or client.tenant != tenant:
                self._clients[key] = _Client(tenant, ctx.session)
            else:
                client.session = ctx.session
        return await call_next(ctx)

    def forget(self, key: str) -> None:
        """The connection `key` is gone (an HTTP session ended): drop its subscriptions."""
        self._clients.pop(key, None)

    async def subscribe(
        self, ctx: Context, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        principal = require(self._principal_for(ctx), "read", "resources/subscribe")
        client = self._client(ctx)
        document_id = document_id_of(params.uri)
        try:
            await self._knowledge.document(principal.tenant, document_id or "", with_text=False)
        except NotFound:  # no such document (of this tenant)
            raise MCPError(
                types.INVALID_PARAMS, f"unknown resource {params.uri!r}", data={"uri": params.uri}
            ) from None
        assert document_id is not None  # found, so it was a document's URI
        client.subscribed.add(document_id)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Context, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        require(self._principal_for(ctx), "read", "resources/unsubscribe")
        document_id = document_id_of(params.uri)
        if document_id is not None:
            self._client(ctx).subscribed.discard(document_id)
        return types.EmptyResult()

    def _client(self, ctx: Context) -> _Client:
        key = self._client_of(ctx)
        client = self._clients.get(key) if key is not None else None
        if client is None:  # `seen` registers every request that came on a connection
            raise MCPError(
                types.INVALID_REQUEST,
                f"{ctx.method} needs a session, to send the notifications on: initialize one "
                "first, and send its Mcp-Session-Id with this request",
            )
        return client

    async def changed(self, tenant: str, document_id: str, change: str) -> None:
        for client in [c for c in self._clients.values() if c.tenant == tenant]:
            subscribed = document_id in client.subscribed
            if change == "deleted":
                client.subscribed.discard(document_id)
            try:
                if change in ("updated", "deleted") and subscribed:
                    await client.session.send_resource_updated(document_uri(document_id))
                if change in ("created", "deleted") and self._list_changed:
                    await client.session.send_resource_list_changed()
            except Exception:  # this client went away: the others are still told
                log.debug("could not notify a document change", exc_info=True)


class TenantListen:
    """The `subscriptions/listen` handler (2026-07-28): the SDK's, over one event bus per
    tenant, so that a stream carries its caller's tenant's changes only."""

    def __init__(self, principal_for: PrincipalFor) -> None:
        self._principal_for = principal_for
        self._buses: dict[str, InMemorySubscriptionBus] = {}
        self._handlers: dict[str, ListenHandler] = {}

    async def __call__(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        tenant = require(self._principal_for(ctx), "read", "subscriptions/listen").tenant
        if tenant not in self._handlers:
            self._buses[tenant] = InMemorySubscriptionBus()
            self._handlers[tenant] = ListenHandler(self._buses[tenant])
        return await self._handlers[tenant](ctx, params)

    async def changed(self, tenant: str, document_id: str, change: str) -> None:
        bus = self._buses.get(tenant)
        if bus is None:  # nobody of this tenant ever listened here
            return
        if change in ("updated", "deleted"):
            await bus.publish(ResourceUpdated(uri=document_uri(document_id)))
        if change in ("created", "deleted"):
            await bus.publish(ResourcesListChanged())

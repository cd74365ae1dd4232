"""Talking A2A to a peer, in the protocol version its card names.

    0.2.x       JSON-RPC over httpx, as this server speaks it (`message/send`, `message/stream`,
                `tasks/get`, `tasks/cancel`, `tasks/resubscribe`)
    0.3, 1.0    the official a2a-sdk client (its v0.3 compat layer for 0.3 peers)

Both answer in this server's own wire types (`schema.a2a`), so the delegation that follows a
remote task reads one shape whatever the peer speaks. Every connection goes through the SSRF
guard (`GuardedTransport`): the peer's host is resolved, checked and pinned per request.

Failures are classified for the caller's retries: `PeerUnavailable` (refused or dropped
connections, timeouts, 5xx, 429 with its `Retry-After`) may pass if tried again later;
`PeerRefusal` (a JSON-RPC error, another 4xx, an answer that is not A2A, a refused URL) will not.
"""

import copy
import email.utils
import random
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson
from pydantic import ValidationError

from agentic_rag.ids import new_id
from agentic_rag.network.credentials import PeerCredentials
from agentic_rag.network.peers import Peer
from agentic_rag.schema.a2a import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)
from agentic_rag.security.ssrf import SSRFGuard, UnsafeURLError

type RemoteEvent = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent

# What a delegation accepts back: text and JSON (both protocols' MIME types).
ACCEPTED_OUTPUT_MODES = ["text/plain", "application/json"]


class PeerCallError(Exception):
    """A call to a peer that failed."""


class PeerUnavailable(PeerCallError):
    """The peer could not answer now: another try, later, may succeed."""

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class PeerRefusal(PeerCallError):
    """The peer answered, and the answer is no (or not A2A): trying again will not help."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter, capped; a peer's `Retry-After` wins when longer."""

    base: float
    cap: float

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        wait = random.uniform(0, min(self.cap, self.base * 2**attempt))
        return max(wait, min(retry_after, self.cap)) if retry_after is not None else wait


async def retrying[T](
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[None]],
    on_retry: Callable[[PeerUnavailable, float], Awaitable[None]] | None = None,
) -> T:
    """`call()`, tried again up to `retries` times while the peer is unavailable."""
    attempt = 0
    while True:
        try:
            return await call()
        except PeerUnavailable as exc:
            if attempt >= retries:
                raise
            delay = backoff.delay(attempt, exc.retry_after)
            if on_retry is not None:
                await on_retry(exc, delay)
            await sleep(delay)
            attempt += 1


class PeerClient(Protocol):
    """One peer's A2A methods, in this server's wire types."""

    @property
    def streams(self) -> bool:
        """Whether the peer's card says it streams (`capabilities.streaming`)."""
        ...

    def send(self, message: Message) -> AsyncIterator[RemoteEvent]:
        """Send `message`: streamed events until the task is final or paused when the peer
        streams, else the task as accepted (the caller polls it)."""
        ...

    def resubscribe(self, task_id: str) -> AsyncIterator[RemoteEvent]: ...

    async def get(self, task_id: str) -> Task: ...

    async def cancel(self, task_id: str) -> Task: ...

    async def aclose(self) -> None: ...


class PeerHttp:
    """The HTTP clients of the calls to peers, through `guard`: one for each tenant that has
    peer credentials, which carries them (`network/credentials.py`), and one without any for
    every other tenant. Made once (a client costs its TLS context, tens of milliseconds) and
    closed by their owner (`aclose`)."""

    def __init__(self, guard: SSRFGuard, *, timeout: float, credentials: PeerCredentials) -> None:
        def client(auth: httpx.Auth | None) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                transport=GuardedTransport(guard, httpx.AsyncHTTPTransport()),
                timeout=httpx.Timeout(timeout),
                auth=auth,
            )

        self._anonymous = client(None)
        self._by_tenant = {tenant: client(credentials.of(tenant)) for tenant in credentials.tenants}

    def of(self, tenant: str) -> httpx.AsyncClient:
        """The client of `tenant`'s calls to its peers."""
        return self._by_tenant.get(tenant, self._anonymous)

    async def aclose(self) -> None:
        for client in (self._anonymous, *self._by_tenant.values()):
            await client.aclose()


def connect(peer: Peer, http: httpx.AsyncClient) -> PeerClient:
    """A client for `peer` in its protocol version, over `http` (`PeerHttp.of` its tenant)."""
    if peer.protocol_version.startswith("0.2"):
        return JsonRpcPeer(peer, http)
    return SdkPeer(peer, http)


class GuardedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address the SSRF guard resolved and checked for its host.

    The request keeps its Host header (and, for https, the host name as TLS SNI), so the peer
    sees the name it was asked by, as `SSRFGuard.request` does for single requests."""

    def __init__(self, guard: SSRFGuard, inner: httpx.AsyncBaseTransport) -> None:
        self._guard, self._inner = guard, inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            pinned = await self._guard.resolve(str(request.url))
        except socket.gaierror as exc:
            raise httpx.ConnectError(
                f"cannot resolve {request.url.host!r}: {exc.strerror}", request=request
            ) from exc
        request.url = pinned.connect_url()
        if pinned.scheme == "https" and not pinned.host_is_ip:
            request.extensions = {**request.extensions, "sni_hostname": pinned.host}
            request.headers["Connection"] = "close"  # see SSRFGuard._send: no pooled reuse
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def retry_after(response: httpx.Response) -> float | None:
    """The response's `Retry-After` in seconds (delta or HTTP date), if it has one."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def http_failure(response: httpx.Response, what: str) -> PeerCallError:
    """The error for a response to `what` that is not a 200."""
    status = response.status_code
    if status >= 500 or status in (408, 429):
        return PeerUnavailable(f"{what}: HTTP {status}", retry_after=retry_after(response))
    return PeerRefusal(f"{what}: HTTP {status}")


def transport_failure(exc: httpx.TransportError, what: str) -> PeerUnavailable:
    return PeerUnavailable(f"{what}: {type(exc).__name__}: {exc or 'no details'}")


_RESULT_MODELS: dict[str, type[RemoteEvent]] = {
    "task": Task,
    "message": Message,
    "status-update": TaskStatusUpdateEvent,
    "artifact-update": TaskArtifactUpdateEvent,
}


def remote_event(data: Any) -> RemoteEvent:
    """A result of a peer's in this server's wire types; PeerRefusal when it is none."""
    kind = data.get("kind") if isinstance(data, dict) else None
    model = _RESULT_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise PeerRefusal(f"the peer answered with something that is not an A2A result: {kind!r}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise PeerRefusal(f"the peer's {kind} is not valid A2A: {exc.errors()[0]['msg']}") from None


class JsonRpcPeer:
    """A 0.2.x peer (this server, and others of its version): JSON-RPC with httpx."""

    def __init__(self, peer: Peer, http: httpx.AsyncClient) -> None:
        self._peer, self._http = peer, http
        capabilities = (peer.card or {}).get("capabilities") or {}
        self._streams = bool(capabilities.get("streaming"))

    @property
    def streams(self) -> bool:
        return self._streams

    async def send(self, message: Message) -> AsyncIterator[RemoteEvent]:
        params: dict[str, Any] = {
            "message": message.model_dump(mode="json", by_alias=True, exclude_none=True),
            "configuration": {"acceptedOutputModes": ACCEPTED_OUTPUT_MODES},
        }
        if self._streams:
            async for event in self._stream("message/stream", params):
                yield event
            return
        params["configuration"]["blocking"] = False  # accepted now; followed by polling
        yield remote_event(await self._call("message/send", params))

    def resubscribe(self, task_id: str) -> AsyncIterator[RemoteEvent]:
        return self._stream("tasks/resubscribe", {"id": task_id})

    async def get(self, task_id: str) -> Task:
        return _task(remote_event(await self._call("tasks/get", {"id": task_id})))

    async def cancel(self, task_id: str) -> Task:
        return _task(remote_event(await self._call("tasks/cancel", {"id": task_id})))

    async def aclose(self) -> None:
        pass  # nothing of its own: the HTTP client is shared

    def _body(self, method: str, params: dict[str, Any]) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "id": new_id(), "method": method, "params": params})

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        what = f"{method} to peer {self._peer.id}"
        try:
            response = await self._http.post(
                self._peer.endpoint,
                content=self._body(method, params),
                headers={"Content-Type": "application/json"},
            )
        except httpx.TransportError as exc:
            raise transport_failure(exc, what) from exc
        except UnsafeURLError as exc:
            raise PeerRefusal(f"{what}: {exc}") from None
        if response.status_code != 200:
            raise http_failure(response, what)
        return _result(response.content, what)

    async def _stream(self, method: str, params: dict[str, Any]) -> AsyncIterator[RemoteEvent]:
        what = f"{method} to peer {self._peer.id}"
        request = self._http.build_request(
            "POST",
            self._peer.endpoint,
            content=self._body(method, params),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise transport_failure(exc, what) from exc
        except UnsafeURLError as exc:
            raise PeerRefusal(f"{what}: {exc}") from None
        try:
            if response.status_code != 200:
                raise http_failure(response, what)
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                # An error before the stream started is one JSON-RPC response (A2A-NOTES §12.2).
                yield remote_event(_result(await response.aread(), what))
                return
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    yield remote_event(_result(line[5:].strip().encode(), what))
        except httpx.TransportError as exc:
            raise transport_failure(exc, what) from exc
        finally:
            await response.aclose()


def _result(body: bytes, what: str) -> Any:
    """The `result` of a JSON-RPC response; PeerRefusal for an error or a non-response."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PeerRefusal(f"{what}: the answer is not JSON") from None
    if not isinstance(payload, dict):
        raise PeerRefusal(f"{what}: the answer is not a JSON-RPC response")
    error = payload.get("error")
    if isinstance(error, dict):
        raise PeerRefusal(f"{what}: error {error.get('code')}: {error.get('message')}")
    if "result" not in payload:
        raise PeerRefusal(f"{what}: the answer is not a JSON-RPC response")
    return payload["result"]


def _task(event: RemoteEvent) -> Task:
    if not isinstance(event, Task):
        raise PeerRefusal(f"the peer answered with a {event.kind} where a task was expected")
    return event


class SdkPeer:
    """A 0.3 or 1.0 peer, through the official a2a-sdk client (1.x)."""

    def __init__(self, peer: Peer, http: httpx.AsyncClient) -> None:
        # Imported here: the SDK (protobuf, its compat layer) is needed only for such peers.
        from a2a.client import ClientConfig, ClientFactory
        from a2a.client.card_resolver import parse_agent_card

        self._peer, self._http = peer, http
        card = parse_agent_card(copy.deepcopy(peer.card)) if peer.card else _minimal_card(peer)
        self._streams = card.capabilities.streaming
        config = ClientConfig(
            streaming=self._streams,
            polling=not self._streams,  # `return_immediately`: the task as accepted, then polled
            httpx_client=http,
            accepted_output_modes=ACCEPTED_OUTPUT_MODES,
        )
        try:
            self._client = ClientFactory(config).create(card)
        except ValueError as exc:  # "no compatible transports found"
            raise PeerRefusal(f"peer {peer.id}: {exc}") from None

    @property
    def streams(self) -> bool:
        return self._streams

    async def send(self, message: Message) -> AsyncIterator[RemoteEvent]:
        from a2a.compat.v0_3 import conversions, types
        from a2a.types.a2a_pb2 import SendMessageRequest

        compat = types.Message.model_validate(
            message.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        request = SendMessageRequest(message=conversions.to_core_message(compat))
        with self._errors("message/send"):
            async for response in self._client.send_message(request):
                yield _from_sdk(response)

    async def resubscribe(self, task_id: str) -> AsyncIterator[RemoteEvent]:
        from a2a.types.a2a_pb2 import SubscribeToTaskRequest

        with self._errors("tasks/resubscribe"):
            async for response in self._client.subscribe(SubscribeToTaskRequest(id=task_id)):
                yield _from_sdk(response)

    async def get(self, task_id: str) -> Task:
        from a2a.compat.v0_3 import conversions
        from a2a.types.a2a_pb2 import GetTaskRequest

        with self._errors("tasks/get"):
            task = await self._client.get_task(GetTaskRequest(id=task_id, history_length=0))
        return _task(remote_event(_dump(conversions.to_compat_task(task))))

    async def cancel(self, task_id: str) -> Task:
        from a2a.compat.v0_3 import conversions
        from a2a.types.a2a_pb2 import CancelTaskRequest

        with self._errors("tasks/cancel"):
            task = await self._client.cancel_task(CancelTaskRequest(id=task_id))
        return _task(remote_event(_dump(conversions.to_compat_task(task))))

    async def aclose(self) -> None:
        await self._client.close()  # leaves the shared HTTP client open (ClientConfig)

    def _errors(self, method: str) -> AbstractContextManager[None]:
        return _sdk_errors(f"{method} to peer {self._peer.id}")


@contextmanager
def _sdk_errors(what: str) -> Iterator[None]:
    """Turns what the SDK raises into PeerUnavailable or PeerRefusal, by the cause it wraps."""
    from a2a.client.errors import A2AClientTimeoutError
    from a2a.utils.errors import A2AError

    try:
        yield
    except PeerCallError:
        raise
    except UnsafeURLError as exc:
        raise PeerRefusal(f"{what}: {exc}") from None
    except httpx.TransportError as exc:
        raise transport_failure(exc, what) from exc
    except (A2AError, ValueError) as exc:
        cause = exc.__cause__
        if isinstance(cause, httpx.HTTPStatusError):
            raise http_failure(cause.response, what) from exc
        if isinstance(cause, httpx.TransportError) or isinstance(exc, A2AClientTimeoutError):
            raise PeerUnavailable(f"{what}: {exc}") from exc
        raise PeerRefusal(f"{what}: {type(exc).__name__}: {exc}") from exc


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _from_sdk(response: Any) -> RemoteEvent:
    from a2a.compat.v0_3 import conversions

    return remote_event(_dump(conversions.to_compat_stream_response(response).result))


def _minimal_card(peer: Peer) -> Any:
    """A card for a peer registered without one: its endpoint, in its version, polled."""
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface

    interface = AgentInterface(
        url=peer.endpoint, protocol_binding="JSONRPC", protocol_version=peer.protocol_version
    )
    return AgentCard(
        name=peer.name,
        supported_interfaces=[interface],
        capabilities=AgentCapabilities(streaming=False),
    )

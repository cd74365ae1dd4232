"""JSON-RPC 2.0 framing: reading a request body and writing responses (docs/a2a-notes.md §12.1).

Parsing classifies every problem the way §12.1 says: not JSON (-32700), not a JSON-RPC request
(-32600); the method and its params are checked by the dispatcher (-32601, -32602). A request
without an `id` (a notification, which no A2A method can be) is refused with -32600 only after
those checks, so it is told the first thing wrong with it, as a request with an id would be.
"""

from dataclasses import dataclass
from typing import Any

import orjson

from agentic_rag.a2a.errors import A2AError, InvalidRequestError, JSONParseError

RequestId = str | int | None


@dataclass(frozen=True)
class RPCRequest:
    id: RequestId
    method: str
    params: Any
    has_id: bool  # False for a notification: refused once the method and params are checked


class RPCError(Exception):
    """An error to answer with, and the id of the request it answers (None if unreadable)."""

    def __init__(self, request_id: RequestId, error: A2AError, status: int = 200) -> None:
        super().__init__(error.message)
        self.request_id, self.error, self.status = request_id, error, status


def parse(body: bytes, *, max_depth: int) -> RPCRequest:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RPCError(None, JSONParseError(f"the body is not UTF-8 (byte {exc.start})")) from None
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RPCError(None, JSONParseError(f"Invalid JSON payload: {exc}")) from None
    if isinstance(payload, list):
        raise RPCError(None, InvalidRequestError("batch requests are not supported"))
    if not isinstance(payload, dict):
        raise RPCError(None, InvalidRequestError("the request must be a JSON object"))
    request_id = payload.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        raise RPCError(None, InvalidRequestError("id must be a string or an integer"))
    if payload.get("jsonrpc") != "2.0":
        raise RPCError(request_id, InvalidRequestError('jsonrpc must be exactly "2.0"'))
    method = payload.get("method")
    if not isinstance(method, str):
        raise RPCError(request_id, InvalidRequestError("method must be a string"))
    if _brackets(body) > max_depth and _depth(payload) > max_depth:
        raise RPCError(
            request_id, InvalidRequestError(f"the request nests deeper than {max_depth}")
        )
    return RPCRequest(request_id, method, payload.get("params"), "id" in payload)


def _brackets(body: bytes) -> int:
    """An upper bound of the nesting depth, counted at C speed: each level opens a bracket.

    It spares walking the parsed value for nearly every request."""
    return body.count(b"{") + body.count(b"[")


def may_contain_nul(body: bytes) -> bool:
    """Whether a JSON text can hold U+0000: JSON must escape it, so a text without the escape
    has none, and `contains_nul` need not walk the parsed value."""
    return b"\\u0000" in body


def _depth(value: Any) -> int:
    """The nesting depth of a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return deepest


def contains_nul(value: Any) -> bool:
    """Whether a parsed JSON value has U+0000 in a string or a key, without recursion."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def success(request_id: RequestId, result_json: str | bytes) -> bytes:
    """A success response around an already serialised result."""
    if isinstance(result_json, str):
        result_json = result_json.encode()
    return b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (orjson.dumps(request_id), result_json)


def failure(request_id: RequestId, error: A2AError) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()})

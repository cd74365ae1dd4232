"""RFC 7807 problem details: how the operators' REST routes (`/a2a/...`) answer errors, and
the authentication middleware in front of them (a wire format of its own, below both).

A problem is `application/problem+json` with `type` (a URN naming the kind of problem, listed
in docs/network.md), `title` (the HTTP status phrase), `status`, `detail` (what exactly went
wrong) and `instance` (the request's path); validation problems add `errors`, one per field.
"""

from http import HTTPStatus
from typing import Any

import orjson
from starlette.responses import Response

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:agentic-rag:problem:"


class Problem(Exception):
    """An error a REST route answers with; its type is `urn:agentic-rag:problem:<kind>`."""

    def __init__(
        self,
        status: int,
        kind: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status, self.kind, self.detail = status, kind, detail
        self.headers = headers or {}
        self.extensions = extensions

    def response(self, instance: str) -> Response:
        return problem_response(
            self.status,
            self.kind,
            self.detail,
            instance=instance,
            headers=self.headers,
            **self.extensions,
        )


def problem_response(
    status: int,
    kind: str,
    detail: str,
    *,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> Response:
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + kind,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if instance is not None:
        body["instance"] = instance
    body.update(extensions)
    return Response(orjson.dumps(body), status, headers, media_type=PROBLEM_JSON)

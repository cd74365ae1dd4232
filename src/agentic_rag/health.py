"""`/healthz` (the process answers), `/readyz` (it can serve: database and schema), `/metrics`.

The three paths are exempt from the authentication middleware. `/metrics` guards itself:
- `AGENTIC_RAG_METRICS_ENABLED=false`: the route does not exist (404);
- `AGENTIC_RAG_METRICS_TOKEN` set: `Authorization: Bearer <token>` is required (401 otherwise);
- otherwise it asks the authenticator: open in open local mode (every caller is the local
  principal), else a credential with the `admin` scope is required.

Routes, like home.py: above the platform they read (the metrics, the authenticator, the
database), so that none of those packages imports another through them.
"""

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import asyncpg
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from agentic_rag.config import Settings
from agentic_rag.observability.metrics import CONTENT_TYPE, Metrics
from agentic_rag.security.auth import AuthFailure
from agentic_rag.security.principal import Principal
from agentic_rag.storage.database import Database
from agentic_rag.storage.postgres import pending_migrations

log = logging.getLogger(__name__)

READY_TIMEOUT_SECONDS = 3.0
_DETAIL_LIMIT = 300


async def readiness(pool: Database) -> tuple[bool, dict[str, Any]]:
    """Whether the database answers and has every migration; the body of `/readyz`."""
    database: dict[str, Any]
    migrations: dict[str, Any]
    if not pool.started:
        database = {"ok": False, "detail": "the engine is not started (starting or stopped)"}
        migrations = {"ok": False, "detail": "not checked: no database"}
    else:
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                async with pool.acquire() as conn:
                    # A pooled connection proxies a Connection; the stubs do not say so.
                    pending = await pending_migrations(cast(asyncpg.Connection, conn))
        except Exception as exc:  # any failure to reach the database makes us unready
            detail = f"unreachable: {type(exc).__name__}: {exc}"[:_DETAIL_LIMIT]
            if isinstance(exc, TimeoutError):
                detail = f"unreachable: no answer within {READY_TIMEOUT_SECONDS:g} s"
            log.warning("not ready: database %s", detail)
            database = {"ok": False, "detail": detail}
            migrations = {"ok": False, "detail": "not checked: the database is unreachable"}
        else:
            database = {"ok": True, "detail": "reachable"}
            if pending:
                migrations = {
                    "ok": False,
                    "detail": f"{len(pending)} pending; restart the server to apply them",
                    "pending": pending,
                }
                log.warning("not ready: migrations pending: %s", ", ".join(pending))
            else:
                migrations = {"ok": True, "detail": "all applied"}
    ready = database["ok"] and migrations["ok"]
    body = {
        "status": "ready" if ready else "unavailable",
        "checks": {"database": database, "migrations": migrations},
    }
    return ready, body


class HealthEndpoints:
    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        *,
        database: Database,
        authenticate: Callable[[Scope], Awaitable[Principal]],
    ) -> None:
        """`database`: the one `/readyz` checks; `authenticate`: the authenticator's, for
        `/metrics` when no metrics token is configured."""
        self._settings, self._metrics = settings, metrics
        self._database, self._authenticate = database, authenticate

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/readyz", self.readyz, methods=["GET"]),
        ]
        if self._settings.metrics_enabled:
            routes.append(Route("/metrics", self.metrics, methods=["GET"]))
        return routes

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        ready, body = await readiness(self._database)
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(self, request: Request) -> Response:
        refusal = await self._refuse(request)
        if refusal is not None:
            return refusal
        return Response(self._metrics.render(), media_type=CONTENT_TYPE)

    async def _refuse(self, request: Request) -> Response | None:
        token = self._settings.metrics_token
        if token is not None:
            scheme, _, presented = request.headers.get("authorization", "").partition(" ")
            expected = token.get_secret_value().encode()
            if scheme.lower() == "bearer" and hmac.compare_digest(
                presented.strip().encode(), expected
            ):
                return None
            return JSONResponse(
                {"error": "metrics need Authorization: Bearer <AGENTIC_RAG_METRICS_TOKEN>"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        try:
            principal = await self._authenticate(request.scope)
        except AuthFailure as failure:
            return failure.response()
        if not principal.allows("admin"):
            return JSONResponse(
                {
                    "error": "metrics need a credential with the admin scope, "
                    "or the configured AGENTIC_RAG_METRICS_TOKEN"
                },
                status_code=403,
            )
        return None

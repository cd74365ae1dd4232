"""The HTTP application built from an Engine: routes, middleware, and the lifespan that
starts and stops the engine."""

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount

from agentic_rag.a2a.routes import METHOD_SCOPES, A2AEndpoints
from agentic_rag.a2a.v1.jsonrpc import METHODS as V1_METHODS
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.health import HealthEndpoints
from agentic_rag.home import HomePage
from agentic_rag.mcp.http import McpHttp
from agentic_rag.network.rest import NetworkRoutes
from agentic_rag.observability import metrics as observed
from agentic_rag.observability.loop_lag import watch_loop_lag
from agentic_rag.observability.middleware import ObservabilityMiddleware
from agentic_rag.security.host_guard import HostGuard, ServedNames
from agentic_rag.security.middleware import AuthenticationMiddleware
from agentic_rag.skills import SkillRegistry


def build_app(settings: Settings | None = None, registry: SkillRegistry | None = None) -> Starlette:
    """The app serving `registry`'s skills, or the product's (None), on a new Engine."""
    settings = settings or Settings()
    engine = Engine(settings, registry)
    a2a = A2AEndpoints(
        engine.tasks,
        engine.network.sessions,
        engine.auth,
        engine.keys,
        engine.registry,
        settings,
    )
    mcp = McpHttp(
        engine.registry,
        settings,
        tasks=engine.tasks,
        knowledge=engine.knowledge,
        database=engine.database,
    )
    network = NetworkRoutes(engine.network, engine.delegation, engine.registry, settings)
    metrics = observed.Metrics()
    health = HealthEndpoints(
        settings, metrics, database=engine.database, authenticate=engine.auth.authenticate
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        observed.bind(metrics)  # for the background tasks started below, which inherit it
        lag = asyncio.create_task(watch_loop_lag())
        try:
            await engine.start()
            # What start-up made lives as long as the process: out of the collector's sight,
            # full collections stay short (measured: p99 82 -> 20 ms at 16 concurrent requests).
            gc.freeze()
            try:
                async with mcp.run():
                    yield
            finally:
                await engine.stop()
        finally:
            lag.cancel()
            with suppress(asyncio.CancelledError):
                await lag

    app = Starlette(
        # MCP last: its app answers /mcp, and Mount("/mcp") would redirect POST /mcp to /mcp/.
        routes=[
            *health.routes(),
            *a2a.routes(),
            *network.routes(),
            HomePage(settings).route(),
            Mount("/", app=mcp.app),
        ],
        middleware=[
            Middleware(
                ObservabilityMiddleware, metrics=metrics, rpc_methods=[*METHOD_SCOPES, *V1_METHODS]
            ),
            # Before authentication and every route, /mcp included: DNS rebinding.
            Middleware(HostGuard, names=ServedNames.of(settings)),
            Middleware(AuthenticationMiddleware, authenticator=engine.auth),
        ],
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.metrics = metrics
    return app


def create_app() -> Starlette:
    """The app with settings from the environment: what each worker of `serve` runs."""
    return build_app(Settings())

"""Build the Starlette application from settings: routes, and the lifespan that runs the engine."""

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Literal

import asyncpg
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount

from agentic_rag.a2a.invocation import call_reader
from agentic_rag.a2a.routes import METHOD_SCOPES, A2AEndpoints
from agentic_rag.config import Settings, keys_create_command
from agentic_rag.graph.skills import add_graph_skills
from agentic_rag.home import HomePage
from agentic_rag.llm.configured import open_chat
from agentic_rag.mcp.http import McpHttp
from agentic_rag.mcp.upstream import Upstreams
from agentic_rag.network.delegating import open_delegation
from agentic_rag.network.delegation import DelegationService
from agentic_rag.network.delegation_skills import add_delegation_skills
from agentic_rag.network.orchestration import Orchestrator
from agentic_rag.network.rest import NetworkRoutes
from agentic_rag.network.service import Network, open_network
from agentic_rag.network.skills import add_network_skills
from agentic_rag.observability import metrics as observed
from agentic_rag.observability.health import HealthEndpoints
from agentic_rag.observability.middleware import ObservabilityMiddleware
from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.security.auth import Authenticator, is_loopback
from agentic_rag.security.middleware import AuthenticationMiddleware
from agentic_rag.security.ratelimit import Limit, RateLimiter
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.security.tokens import JWTVerifier
from agentic_rag.skills import SkillRegistry
from agentic_rag.skills.help import default_registry
from agentic_rag.storage.cluster import Cluster
from agentic_rag.storage.database import embedded_postgres
from agentic_rag.storage.postgres import connect
from agentic_rag.tasks.active import ActiveTasks, LocalWorkQueue
from agentic_rag.tasks.journal import Journal, LocalEventBus
from agentic_rag.tasks.push import PushNotifier, SigningKeys
from agentic_rag.tasks.runner import Runner
from agentic_rag.tasks.service import TaskService
from agentic_rag.tasks.store import TaskStore

if TYPE_CHECKING:
    from agentic_rag.graph.service import GraphService
    from agentic_rag.knowledge.service import KnowledgeService

log = logging.getLogger(__name__)


class InsecureBindError(RuntimeError):
    pass


type Transport = Literal["http", "stdio"]


class Engine:
    """Everything that runs behind the protocols, started and stopped with the app.

    Its parts exist between `start` and `stop`; adapters reach them through it.
    """

    pool: asyncpg.Pool
    service: TaskService
    keys: SigningKeys
    api_keys: ApiKeyStore
    auth: Authenticator
    network: Network
    delegation: DelegationService
    orchestrator: Orchestrator

    def __init__(
        self,
        settings: Settings,
        registry: SkillRegistry,
        *,
        knowledge: bool = False,
        transport: Transport = "http",
    ) -> None:
        self.settings, self.registry = settings, registry
        self.transport = transport  # who can call: anyone who reaches the port, or one process
        self._serves_knowledge = knowledge
        self._knowledge: KnowledgeService | None = None
        self._graph: GraphService | None = None
        self._stack = AsyncExitStack()  # undoes `start` in reverse, also when it fails halfway

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        settings = self.settings
        tokens = _jwt_verifier(settings)
        dsn = settings.database_url
        if dsn is None:
            postgres = embedded_postgres(settings)
            self._stack.push_async_callback(asyncio.to_thread, postgres.stop)
            dsn = await asyncio.to_thread(postgres.start)
        self.pool = await connect(dsn, settings.database_pool_size)
        self._stack.push_async_callback(self.pool.close)

        chat = await open_chat(settings, self._stack)
        if self._serves_knowledge:
            # Imported here: the models' libraries take a second to import, which processes
            # without knowledge skills (tests, tools) need not pay.
            from agentic_rag.knowledge.service import KnowledgeService

            knowledge = KnowledgeService(settings, self.pool, chat)
            self._stack.push_async_callback(knowledge.stop)
            await knowledge.start()
            self._knowledge = knowledge
            from agentic_rag.graph.service import GraphService

            graph = GraphService(settings, knowledge.embedder, self.pool, chat)
            self._stack.push_async_callback(graph.stop)
            await graph.start()
            self._graph = graph
            from agentic_rag.graph.documents import DocumentGraph

            knowledge.attach_graph(
                DocumentGraph(graph, ingest_documents=settings.graph_ingest_documents)
            )
        # Upstream MCP servers' tools join the registry before anything serves it.
        await self._stack.enter_async_context(Upstreams(settings, self.registry).run())

        self.api_keys = ApiKeyStore(self.pool)
        limiter = RateLimiter(
            Limit(settings.rate_limit_per_minute, settings.rate_limit_burst),
            per_tenant={
                t: Limit(v.per_minute, v.burst) for t, v in settings.rate_limit_tenants.items()
            },
            failures_per_minute=settings.auth_failures_per_minute,
            redis_url=settings.redis_url,
        )
        self.auth = Authenticator(
            self.api_keys,
            tokens,
            limiter,
            base_url=settings.base_url(),
            require=settings.require_auth,
        )
        await self.auth.start()
        if tokens is not None:
            self._stack.push_async_callback(tokens.aclose)
        self._check_exposure()
        self.network = await open_network(settings, self.pool, self._stack)

        cluster = await Cluster.join(dsn)
        self._stack.push_async_callback(cluster.leave)
        store = TaskStore(self.pool, cluster.worker)
        bus = LocalEventBus()
        journal = Journal(store, bus)
        self.keys = await SigningKeys.load(self.pool)
        guard = SSRFGuard(settings.push_allow_private)
        notifier = PushNotifier(
            self.keys,
            guard,
            issuer=settings.base_url(),
            max_attempts=settings.push_max_attempts,
            timeout=settings.push_timeout_seconds,
        )
        # Stopping runs in reverse: the sweep, the runner (its last events), the journal
        # (flushes them), the notifier (delivers what they triggered), the lease (once this
        # worker's tasks are settled), then the database.
        self._stack.push_async_callback(notifier.aclose)
        journal.start()
        self._stack.push_async_callback(journal.stop)
        work = ActiveTasks(LocalWorkQueue())
        self.service = TaskService(
            store,
            journal,
            bus,
            self.registry,
            work,
            notifier,
            guard,
            cluster,
            read_call=call_reader(self.registry),
        )
        self.delegation, self.orchestrator = open_delegation(
            settings,
            self.pool,
            self.network,
            self.registry,
            lambda: self.service,
            self._stack,
            chat,
        )
        runner = Runner(self.service, work, max_running=settings.max_running_tasks)
        await self.service.recover()
        runner.start()
        self._stack.push_async_callback(runner.stop)
        cluster.run(
            on_cancel=self.service.cancel_requested,
            sweep=self.service.recover,
            sweep_seconds=settings.worker_sweep_seconds,
        )
        self._stack.push_async_callback(cluster.stop)
        if self._graph is not None:  # its episode queue, worked under this worker's lease
            self._graph.start_ingestion(cluster.worker)
            self._stack.push_async_callback(self._graph.stop_ingestion)

    def _check_exposure(self) -> None:
        """Secure by default: open local mode only on a loopback address.

        Over stdio there is nothing to check: the one caller started this process.
        """
        if self.transport == "stdio":
            return
        settings = self.settings
        refusal = exposure_refusal(settings, enforced=self.auth.enforced)
        if refusal is not None:
            log.error("%s", refusal)
            raise InsecureBindError(refusal)
        if self.auth.enforced:
            log.info(
                "authentication required (%s)",
                "API keys and JWT" if self.auth.jwt_enabled else "API keys",
            )
        elif is_loopback(settings.host):
            log.warning(
                "open local mode: no credentials are configured, so every caller on "
                "this machine is the single 'local' tenant"
            )
        else:
            log.warning(
                "INSECURE: serving %s without credentials; anyone who can reach it can use it",
                settings.host,
            )

    @property
    def knowledge(self) -> "KnowledgeService":
        if self._knowledge is None:
            raise RuntimeError("the knowledge engine is not running in this process")
        return self._knowledge

    @property
    def graph(self) -> "GraphService":
        if self._graph is None:
            raise RuntimeError("the knowledge graph is not running in this process")
        return self._graph

    async def stop(self) -> None:
        await self._stack.aclose()


def exposure_refusal(settings: Settings, *, enforced: bool) -> str | None:
    """Why serving `settings` over HTTP is refused, or None: a non-loopback address without
    credentials (`enforced`: API keys exist, JWT is configured, or auth is required), unless
    --insecure says so."""
    if enforced or is_loopback(settings.host) or settings.insecure:
        return None
    return (
        f"refusing to serve {settings.host} without credentials: create an API key "
        f"({keys_create_command(settings)}), configure JWT "
        "(AGENTIC_RAG_JWT_SECRET or AGENTIC_RAG_JWT_JWKS_URL), bind 127.0.0.1, "
        "or pass --insecure"
    )


def _jwt_verifier(settings: Settings) -> JWTVerifier | None:
    if not settings.jwt_configured():
        return None
    # Settings refuses JWT without both (before anything starts): a copy that skipped that
    # validation is a bug.
    assert settings.jwt_issuer and settings.jwt_audience
    return JWTVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        secret=settings.jwt_secret.get_secret_value() if settings.jwt_secret else None,
        jwks_url=settings.jwt_jwks_url,
        algorithm=settings.jwt_algorithm,
        tenant_claim=settings.jwt_tenant_claim,
        scopes_claim=settings.jwt_scopes_claim,
    )


def build_engine(
    settings: Settings, registry: SkillRegistry | None = None, *, transport: Transport = "http"
) -> Engine:
    """The engine serving `registry`, or the product's own skills (the knowledge engine
    with them) when `registry` is None."""
    if registry is not None:
        return Engine(settings, registry, transport=transport)
    engine: Engine  # the product's skills reach the engine's knowledge service once it runs
    product = default_registry(lambda: engine.knowledge)
    add_network_skills(product, lambda: engine.network, settings.agent_name)
    add_delegation_skills(product, lambda: engine.delegation, lambda: engine.orchestrator)
    add_graph_skills(product, lambda: engine.graph)
    engine = Engine(settings, product, knowledge=True, transport=transport)
    return engine


def build_app(settings: Settings | None = None, registry: SkillRegistry | None = None) -> Starlette:
    settings = settings or Settings()
    engine = build_engine(settings, registry)
    a2a = A2AEndpoints(settings, engine)
    mcp = McpHttp(
        engine.registry,
        settings,
        tasks=lambda: engine.service,
        # The product's skills (registry None) come with the knowledge engine.
        knowledge=(lambda: engine.knowledge) if registry is None else None,
        pool=lambda: engine.pool,
    )
    metrics = observed.Metrics()
    health = HealthEndpoints(
        settings,
        metrics,
        pool=lambda: getattr(engine, "pool", None),
        authenticate=lambda scope: engine.auth.authenticate(scope),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        observed.bind(metrics)  # for the background tasks started below, which inherit it
        await engine.start()
        # What start-up made lives as long as the process: out of the collector's sight, full
        # collections stay short (measured: p99 82 -> 20 ms at 16 concurrent requests).
        gc.freeze()
        try:
            async with mcp.run():
                yield
        finally:
            await engine.stop()

    app = Starlette(
        # MCP last: its app answers /mcp, and Mount("/mcp") would redirect POST /mcp to /mcp/.
        routes=[
            *health.routes(),
            *a2a.routes(),
            *NetworkRoutes(engine).routes(),
            HomePage(settings).route(),
            Mount("/", app=mcp.app),
        ],
        middleware=[
            Middleware(ObservabilityMiddleware, metrics=metrics, rpc_methods=METHOD_SCOPES),
            Middleware(AuthenticationMiddleware, authenticator=lambda: engine.auth),
        ],
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.metrics = metrics
    return app


def create_app() -> Starlette:
    """The app with settings from the environment: what each worker of `serve` runs."""
    return build_app(Settings())

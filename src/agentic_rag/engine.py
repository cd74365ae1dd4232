"""The composition root: every part of the service built once, here, from the settings.

Construction builds everything, and the engine is complete after it: the stores on the
`Database` (a pool whose connections open when the engine starts), the services on the
stores, the product's skills on the services. `start` only starts: the database (migrations
first), the models, the lease, the loops; `stop` undoes it in reverse. The adapters (A2A,
MCP, the REST routes, health) are given the services they use by the entry points, never the
engine.

One late binding: the skill registry and the task service need each other. The task service
runs the registry's skills; the delegation skills call the delegation service and the
orchestrator, which run tasks through the task service. So the registry is built first, the
task service on it, and the product's skills join it once the services they call exist
(`add_product_skills`).
"""

import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Literal

from agentic_rag.a2a.invocation import call_reader
from agentic_rag.a2a.v1 import wire as v1_wire
from agentic_rag.config import Settings, keys_create_command
from agentic_rag.graph.skills import add_graph_skills
from agentic_rag.llm.configured import ConfiguredChat
from agentic_rag.mcp.upstream import Upstreams
from agentic_rag.network.delegating import Delegating
from agentic_rag.network.delegation import DelegationService
from agentic_rag.network.delegation_skills import add_delegation_skills
from agentic_rag.network.orchestration import Orchestrator
from agentic_rag.network.service import Network
from agentic_rag.network.skills import add_network_skills
from agentic_rag.security.api_keys import ApiKeyStore
from agentic_rag.security.auth import Authenticator, is_loopback
from agentic_rag.security.ratelimit import Limit, RateLimiter
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.security.tokens import JWTVerifier
from agentic_rag.skills import SkillRegistry
from agentic_rag.skills.help import add_help
from agentic_rag.storage.cluster import Cluster
from agentic_rag.storage.database import Database
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
    """Everything that runs behind the protocols: built complete, started and stopped.

    With `registry` None it serves the product's skills (help, the knowledge engine, the
    graph, the network, delegation); else exactly `registry`'s, without the knowledge engine
    and the graph (`knowledge` and `graph` are None).
    """

    def __init__(
        self,
        settings: Settings,
        registry: SkillRegistry | None = None,
        *,
        transport: Transport = "http",
    ) -> None:
        self.settings = settings
        self.transport = transport  # who can call: anyone who reaches the port, or one process
        self.database = Database(settings, size=settings.database_pool_size)
        self.registry = registry if registry is not None else SkillRegistry()
        self.chat = ConfiguredChat(settings)

        self.api_keys = ApiKeyStore(self.database)
        self._tokens = _jwt_verifier(settings)
        self.auth = Authenticator(
            self.api_keys,
            self._tokens,
            _rate_limiter(settings),
            base_url=settings.base_url(),
            require=settings.require_auth,
        )
        self.network = Network(settings, self.database)

        self.cluster = Cluster(self.database, lease_seconds=settings.worker_lease_seconds)
        store = TaskStore(self.database, self.cluster.worker)
        bus = LocalEventBus()
        self._journal = Journal(store, bus)
        self.keys = SigningKeys(self.database)
        guard = SSRFGuard(settings.push_allow_private)
        self._notifier = PushNotifier(
            self.keys,
            guard,
            issuer=settings.base_url(),
            max_attempts=settings.push_max_attempts,
            timeout=settings.push_timeout_seconds,
            stream_response=v1_wire.push_body,
        )
        work = ActiveTasks(LocalWorkQueue())
        self.tasks = TaskService(
            store,
            self._journal,
            bus,
            self.registry,
            work,
            self._notifier,
            guard,
            self.cluster,
            read_call=call_reader(self.registry),
        )
        self._runner = Runner(self.tasks, work, max_running=settings.max_running_tasks)
        self._delegating = Delegating(
            settings, self.database, self.network, self.registry, self.tasks, self.chat.endpoint
        )
        self.delegation: DelegationService = self._delegating.service
        self.orchestrator: Orchestrator = self._delegating.orchestrator

        self.knowledge: KnowledgeService | None = None
        self.graph: GraphService | None = None
        if registry is None:
            self.knowledge, self.graph = _knowledge_and_graph(
                settings, self.database, self.chat, self.cluster.worker
            )
            add_product_skills(self)
        # Upstream MCP servers' tools join the registry as they first answer (from start on).
        self._upstreams = Upstreams(settings, self.registry)
        self._stack = AsyncExitStack()  # undoes `start` in reverse, also when it fails halfway

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        stack = self._stack
        await self.database.start()
        stack.push_async_callback(self.database.stop)
        await self.chat.start()
        stack.push_async_callback(self.chat.stop)
        if self.knowledge is not None:
            await self.knowledge.start()
            stack.push_async_callback(self.knowledge.stop)
        if self.graph is not None:
            await self.graph.start()
            stack.push_async_callback(self.graph.stop)
        await stack.enter_async_context(self._upstreams.run())

        await self.auth.start()
        if self._tokens is not None:
            stack.push_async_callback(self._tokens.aclose)
        self._check_exposure()
        self.network.start()
        stack.push_async_callback(self.network.stop)

        # Stopping runs in reverse: the sweep, the runner (its last events), the delegation's
        # clients, the journal (flushes the events), the notifier (delivers what they
        # triggered), the lease (once this worker's tasks are settled), then the database.
        await self.cluster.start()
        stack.push_async_callback(self.cluster.leave)
        await self.keys.load()
        stack.push_async_callback(self._notifier.aclose)
        self._journal.start()
        stack.push_async_callback(self._journal.stop)
        stack.push_async_callback(self._delegating.aclose)
        await self.tasks.recover()
        self._runner.start()
        stack.push_async_callback(self._runner.stop)
        self.cluster.run(
            on_cancel=self.tasks.cancel_requested,
            sweep=self.tasks.recover,
            sweep_seconds=self.settings.worker_sweep_seconds,
            on_renewed=self._runner.drop_taken_over,
        )
        stack.push_async_callback(self.cluster.stop)
        if self.graph is not None:  # its episode queue, worked under this worker's lease
            self.graph.start_ingestion(self.cluster.spared)
            stack.push_async_callback(self.graph.stop_ingestion)

    async def stop(self) -> None:
        await self._stack.aclose()

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


def add_product_skills(engine: Engine) -> None:
    """The product's skills on the engine's services: `help`, the knowledge skills (plain
    text is a question for `hybrid_retrieve`, a bare URL an ingestion), the graph's, the
    network's, delegation and orchestration."""
    from agentic_rag.knowledge.skills import add_knowledge_skills

    assert engine.knowledge is not None and engine.graph is not None
    registry = engine.registry
    add_help(registry, default=False)
    add_knowledge_skills(registry, engine.knowledge)
    registry.default_skill = "hybrid_retrieve"
    add_network_skills(registry, engine.network, engine.settings.agent_name)
    add_delegation_skills(registry, engine.delegation, engine.orchestrator)
    add_graph_skills(registry, engine.graph)


def _knowledge_and_graph(
    settings: Settings, database: Database, chat: ConfiguredChat, worker: int
) -> tuple["KnowledgeService", "GraphService"]:
    # Imported here: the models' and the graph's libraries take seconds to import, which
    # processes without them (tests, tools) need not pay.
    from agentic_rag.graph.documents import DocumentGraph
    from agentic_rag.graph.service import GraphService
    from agentic_rag.knowledge.service import KnowledgeService, embedder_from

    embedder = embedder_from(settings)  # one model for both; the knowledge engine starts it
    graph = GraphService(settings, embedder, database, chat.endpoint, worker=worker)
    # The documents' episodes follow them into the graph, and retrieval may ask it.
    documents = DocumentGraph(graph, ingest_documents=settings.graph_ingest_documents)
    knowledge = KnowledgeService(
        settings, database, chat.endpoint, embedder=embedder, graph=documents
    )
    return knowledge, graph


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


def _rate_limiter(settings: Settings) -> RateLimiter:
    return RateLimiter(
        Limit(settings.rate_limit_per_minute, settings.rate_limit_burst),
        per_tenant={
            t: Limit(v.per_minute, v.burst) for t, v in settings.rate_limit_tenants.items()
        },
        failures_per_minute=settings.auth_failures_per_minute,
        redis_url=settings.redis_url,
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
        groups_claim=settings.jwt_groups_claim,
    )

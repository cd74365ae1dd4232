"""Build the Starlette application from settings: routes, and the lifespan that runs the engine."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from starlette.applications import Starlette
from starlette.middleware import Middleware

from agentic_rag.a2a.card import agent_card, card_documents
from agentic_rag.a2a.journal import Journal, LocalEventBus
from agentic_rag.a2a.push import PushNotifier, SigningKeys
from agentic_rag.a2a.routes import A2AEndpoints
from agentic_rag.a2a.runner import Runner
from agentic_rag.a2a.store import TaskStore
from agentic_rag.a2a.tasks import TaskService, WorkQueue
from agentic_rag.config import Settings
from agentic_rag.security.middleware import AuthenticationMiddleware
from agentic_rag.security.ssrf import SSRFGuard
from agentic_rag.skills import SkillRegistry
from agentic_rag.skills.help import default_registry
from agentic_rag.storage.embedded import start_embedded_postgres
from agentic_rag.storage.postgres import connect

log = logging.getLogger(__name__)


class Engine:
    """Everything that runs behind the protocols, started and stopped with the app."""

    def __init__(self, settings: Settings, registry: SkillRegistry) -> None:
        self.settings, self.registry = settings, registry
        self._pool: asyncpg.Pool | None = None
        self._service: TaskService | None = None
        self._keys: SigningKeys | None = None
        self._journal: Journal | None = None
        self._runner: Runner | None = None
        self._notifier: PushNotifier | None = None

    @property
    def service(self) -> TaskService:
        assert self._service is not None, "the engine is not started"
        return self._service

    @property
    def keys(self) -> SigningKeys:
        assert self._keys is not None, "the engine is not started"
        return self._keys

    async def start(self) -> None:
        settings = self.settings
        dsn = settings.database_url or start_embedded_postgres(settings.data_dir)
        self._pool = await connect(dsn, settings.database_pool_size)
        store = TaskStore(self._pool)
        bus = LocalEventBus()
        self._journal = Journal(store, bus)
        self._journal.start()
        self._keys = await SigningKeys.load(self._pool)
        guard = SSRFGuard(settings.push_allow_private)
        self._notifier = PushNotifier(
            self._keys,
            guard,
            issuer=settings.base_url(),
            max_attempts=settings.push_max_attempts,
            timeout=settings.push_timeout_seconds,
        )
        queue = WorkQueue()
        self._service = TaskService(
            store, self._journal, bus, self.registry, queue, self._notifier, guard
        )
        self._runner = Runner(self._service, queue, max_running=settings.max_running_tasks)
        await self._service.recover()
        self._runner.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.stop()
        if self._journal is not None:
            await self._journal.stop()
        if self._notifier is not None:
            await self._notifier.aclose()
        if self._pool is not None:
            await self._pool.close()


def build_app(settings: Settings | None = None, registry: SkillRegistry | None = None) -> Starlette:
    settings = settings or Settings()
    registry = registry if registry is not None else default_registry()
    engine = Engine(settings, registry)
    a2a = A2AEndpoints(settings, engine, card_documents(agent_card(settings, registry)))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await engine.stop()

    app = Starlette(
        routes=a2a.routes(),
        middleware=[Middleware(AuthenticationMiddleware)],
        lifespan=lifespan,
    )
    app.state.engine = engine
    return app

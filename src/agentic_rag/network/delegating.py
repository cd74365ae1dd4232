"""The delegation side of the agent network, built from settings by the engine."""

from agentic_rag.config import Settings
from agentic_rag.llm.chat import OpenAIChat
from agentic_rag.llm.endpoint import ChatEndpoint
from agentic_rag.network.delegation import DelegationService, DelegationSettings
from agentic_rag.network.delegation_store import DelegationStore
from agentic_rag.network.orchestration import Orchestrator
from agentic_rag.network.peer_client import Backoff, PeerHttp
from agentic_rag.network.plan_store import PlanStore
from agentic_rag.network.service import Network
from agentic_rag.skills import SkillRegistry
from agentic_rag.storage.pool import Pool
from agentic_rag.tasks.service import TaskService


class Delegating:
    """The delegation service and the orchestrator (with the LLM, when one is configured),
    and the clients they hold open until `aclose`."""

    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        network: Network,
        registry: SkillRegistry,
        tasks: TaskService,
        chat: ChatEndpoint | None,
    ) -> None:
        self._http = PeerHttp(
            network.guard,
            timeout=settings.delegation_request_timeout_seconds,
            credentials=network.credentials,
        )
        self.service = DelegationService(
            DelegationStore(pool),
            network.peers,
            network.sessions,
            tasks,
            network.guard,
            self._http,
            DelegationSettings(
                poll_seconds=settings.delegation_poll_seconds,
                backoff=Backoff(
                    settings.delegation_backoff_seconds, settings.delegation_backoff_max_seconds
                ),
            ),
        )
        self._llm = OpenAIChat(chat) if chat is not None else None
        self.orchestrator = Orchestrator(PlanStore(pool), registry, network.peers, tasks, self._llm)

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._llm is not None:
            await self._llm.aclose()

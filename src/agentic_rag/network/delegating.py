"""The delegation side of the agent network, built from settings with the engine."""

from collections.abc import Callable
from contextlib import AsyncExitStack

import asyncpg

from agentic_rag.config import Settings
from agentic_rag.llm.chat import OpenAIChat
from agentic_rag.llm.endpoint import ChatEndpoint
from agentic_rag.network.delegation import DelegationService, DelegationSettings
from agentic_rag.network.delegation_store import DelegationStore
from agentic_rag.network.orchestration import Orchestrator
from agentic_rag.network.peer_client import Backoff, peer_http
from agentic_rag.network.plan_store import PlanStore
from agentic_rag.network.service import Network
from agentic_rag.skills import SkillRegistry
from agentic_rag.tasks.service import TaskService


def open_delegation(
    settings: Settings,
    pool: asyncpg.Pool,
    network: Network,
    registry: SkillRegistry,
    tasks: Callable[[], TaskService],
    stack: AsyncExitStack,
    chat: ChatEndpoint | None,
) -> tuple[DelegationService, Orchestrator]:
    """The delegation service and the orchestrator (with the LLM, when one is configured)."""
    http = peer_http(
        network.guard,
        timeout=settings.delegation_request_timeout_seconds,
        credentials=network.credentials,
    )
    stack.push_async_callback(http.aclose)
    delegation = DelegationService(
        DelegationStore(pool),
        network.peers,
        network.sessions,
        tasks,
        network.guard,
        http,
        DelegationSettings(
            poll_seconds=settings.delegation_poll_seconds,
            backoff=Backoff(
                settings.delegation_backoff_seconds, settings.delegation_backoff_max_seconds
            ),
        ),
    )
    llm = None
    if chat is not None:
        llm = OpenAIChat(chat)
        stack.push_async_callback(llm.aclose)
    orchestrator = Orchestrator(PlanStore(pool), registry, network.peers, tasks, llm)
    return delegation, orchestrator

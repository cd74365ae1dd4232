"""`agentic-rag mcp` (and `agentic-rag-mcp`): MCP over stdio, for clients that start servers.

With `AGENTIC_RAG_URL` set it bridges to that running server (bridge.py), sending
`AGENTIC_RAG_API_KEY` as `X-API-Key`, so a desktop client shares the server's data. Without
it, the engine the entry point built runs in this process on the local data directory and
every call is the `local` principal's: whoever can start this process owns that directory.
"""

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server

from agentic_rag.config import Settings
from agentic_rag.mcp.access import fixed_principal
from agentic_rag.mcp.bridge import bridge_server, describe, endpoint
from agentic_rag.mcp.request_state import sealed_in_process
from agentic_rag.mcp.server import build_server
from agentic_rag.mcp.subscriptions import DocumentChanges, DocumentSubscriptions, TenantListen
from agentic_rag.security.principal import LOCAL
from agentic_rag.skills import SkillRegistry
from agentic_rag.skills.groups import ToolGroups
from agentic_rag.storage.pool import Pool
from agentic_rag.tasks.service import TaskService

if TYPE_CHECKING:
    from agentic_rag.knowledge.service import KnowledgeService

URL_ENV = "AGENTIC_RAG_URL"
API_KEY_ENV = "AGENTIC_RAG_API_KEY"

log = logging.getLogger(__name__)


class LocalEngine(Protocol):
    """What serving in this process needs of the engine its entry point built."""

    @property
    def settings(self) -> Settings: ...
    @property
    def registry(self) -> SkillRegistry: ...
    @property
    def tasks(self) -> TaskService: ...
    @property
    def knowledge(self) -> "KnowledgeService | None": ...
    @property
    def database(self) -> Pool: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


async def serve_local(engine: LocalEngine) -> None:
    """Serve the engine's skills with the engine in this process, as the `local` principal."""
    # The SDK points fd 1 at stderr while it serves, so whatever starts inside (the embedded
    # PostgreSQL too) writes its output there, never into the protocol on stdout.
    async with stdio_server() as (read, write):
        await engine.start()
        try:
            principal_for = fixed_principal(LOCAL)
            # With the knowledge engine, its documents are resources this one client may
            # subscribe to.
            knowledge = engine.knowledge
            subscriptions = listen = None
            if knowledge is not None:
                subscriptions = DocumentSubscriptions(knowledge, principal_for)
                listen = TenantListen(principal_for)
            server = build_server(
                engine.registry,
                principal_for,
                tasks=engine.tasks,
                knowledge=knowledge,
                subscriptions=subscriptions,
                listen=listen,
                request_state=sealed_in_process(principal_for),
                instructions=engine.settings.agent_description,
                tool_groups=ToolGroups.of(engine.settings.mcp_tool_groups),
            )
            if subscriptions is None or listen is None:
                await server.run(read, write, server.create_initialization_options())
                return
            options = server.create_initialization_options(
                NotificationOptions(resources_changed=True)
            )
            changes = DocumentChanges(subscriptions.changed, listen.changed)
            async with changes.listening(engine.database):
                await server.run(read, write, options)
        finally:
            await engine.stop()


async def serve_bridge(url: str, api_key: str | None) -> None:
    async with bridge_server(url, api_key) as server, stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def bridge_url() -> str | None:
    """The running server to bridge to (AGENTIC_RAG_URL), or None: serve in this process."""
    return os.environ.get(URL_ENV, "").strip() or None


def run_bridge(url: str) -> int:
    """Bridge stdin/stdout to the server at `url` until the client closes it; the exit status."""
    where = f"agentic-rag at {endpoint(url)}"
    return _run(where, serve_bridge, url, os.environ.get(API_KEY_ENV) or None)


def run_local(engine: LocalEngine) -> int:
    """Serve MCP on stdin/stdout with `engine` until the client closes it; the exit status."""
    return _run("the local engine", serve_local, engine)


def _run[*A](where: str, serve: Callable[[*A], Awaitable[None]], *args: *A) -> int:
    try:
        anyio.run(serve, *args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # Desktop clients show stderr as the server's log: say what failed, in one line.
        log.debug("MCP over stdio stopped", exc_info=True)
        print(f"agentic-rag mcp: cannot serve with {where}: {describe(exc)}", file=sys.stderr)
        return 1
    return 0

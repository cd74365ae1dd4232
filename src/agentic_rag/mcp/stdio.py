"""`agentic-rag mcp` (and `agentic-rag-mcp`): MCP over stdio, for clients that start servers.

With `AGENTIC_RAG_URL` set it bridges to that running server (bridge.py), sending
`AGENTIC_RAG_API_KEY` as `X-API-Key`, so a desktop client shares the server's data. Without
it, the engine runs in this process on the local data directory and every call is the
`local` principal's: whoever can start this process owns that directory anyway.
"""

import logging
import os
import sys

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server

from agentic_rag.config import Settings
from agentic_rag.mcp.access import fixed_principal
from agentic_rag.mcp.bridge import bridge_server, describe, endpoint
from agentic_rag.mcp.server import build_server
from agentic_rag.mcp.subscriptions import DocumentChanges, DocumentSubscriptions, TenantListen
from agentic_rag.security.principal import LOCAL
from agentic_rag.skills import SkillRegistry

URL_ENV = "AGENTIC_RAG_URL"
API_KEY_ENV = "AGENTIC_RAG_API_KEY"

log = logging.getLogger(__name__)


async def serve_local(settings: Settings, registry: SkillRegistry | None) -> None:
    """Serve `registry`'s skills, or the product's (None), with the engine in this process."""
    from agentic_rag.app import build_engine  # app imports the MCP package: import here

    # The SDK points fd 1 at stderr while it serves, so whatever starts inside (the embedded
    # PostgreSQL too) writes its output there, never into the protocol on stdout.
    async with stdio_server() as (read, write):
        engine = build_engine(settings, registry, transport="stdio")
        await engine.start()
        try:
            principal_for = fixed_principal(LOCAL)
            # The product's skills (registry None) come with the knowledge engine, whose
            # documents this one client may subscribe to.
            knowledge = (lambda: engine.knowledge) if registry is None else None
            subscriptions = listen = None
            if knowledge is not None:
                subscriptions = DocumentSubscriptions(knowledge, principal_for)
                listen = TenantListen(principal_for)
            server = build_server(
                engine.registry,
                principal_for,
                tasks=lambda: engine.service,
                knowledge=knowledge,
                subscriptions=subscriptions,
                listen=listen,
                instructions=settings.agent_description,
            )
            if subscriptions is None or listen is None:
                await server.run(read, write, server.create_initialization_options())
                return
            options = server.create_initialization_options(
                NotificationOptions(resources_changed=True)
            )
            changes = DocumentChanges(subscriptions.changed, listen.changed)
            async with changes.listening(engine.pool):
                await server.run(read, write, options)
        finally:
            await engine.stop()


async def serve_bridge(url: str, api_key: str | None) -> None:
    async with bridge_server(url, api_key) as server, stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_stdio(settings: Settings | None = None, registry: SkillRegistry | None = None) -> int:
    """Serve MCP on stdin/stdout until the client closes it; the process's exit status."""
    url = os.environ.get(URL_ENV, "").strip()
    try:
        if url:
            anyio.run(serve_bridge, url, os.environ.get(API_KEY_ENV) or None)
        else:
            anyio.run(serve_local, settings or Settings(), registry)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # Desktop clients show stderr as the server's log: say what failed, in one line.
        log.debug("MCP over stdio stopped", exc_info=True)
        where = f"agentic-rag at {endpoint(url)}" if url else "the local engine"
        print(f"agentic-rag mcp: cannot serve with {where}: {describe(exc)}", file=sys.stderr)
        return 1
    return 0

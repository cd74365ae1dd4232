"""Reference server for the A2A 1.0 benchmark: the official a2a-sdk 1.x, as a 1.0 user builds it.

`create_jsonrpc_routes` + `DefaultRequestHandler` + `InMemoryTaskStore` in a Starlette app,
served by uvicorn with one worker, uvloop and httptools (the same server stack as ours). The
agent does what bench/reference/server.py does for 0.2.16: it echoes the text it gets as one
text artifact and completes the task, through `TaskUpdater`.

It runs in the project's own environment: a2a-sdk 1.x is a dependency there, pinned by uv.lock
(1.3.0 when this was written; the result files name the version measured).
    .venv/bin/python bench/reference/server_v1.py --port 8001
"""

from __future__ import annotations

import argparse
import importlib.metadata

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette

SDK_VERSION = importlib.metadata.version("a2a-sdk")


class EchoExecutor(AgentExecutor):
    """Completes every task with one text artifact that echoes the input text."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([Part(text=context.get_user_input())], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build_app(port: int) -> Starlette:
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name=f"a2a-sdk {SDK_VERSION} echo (benchmark reference)",
        description="Echoes the input text as one artifact.",
        version=SDK_VERSION,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="echo", description="Echoes the input text.", tags=["echo"])
        ],
    )
    handler = DefaultRequestHandler(EchoExecutor(), InMemoryTaskStore(), card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.port),
        host=args.host,
        port=args.port,
        workers=1,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()

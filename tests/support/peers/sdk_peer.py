"""A peer built on the official a2a-sdk 1.x server (protocol 1.0), run as a process by tests.

    python -m tests.support.peers.sdk_peer --port PORT

It speaks A2A 1.0 JSON-RPC (and the v0.3 compat method names) at `/`, serves its card at
`/.well-known/agent-card.json`, streams, and follows the same plain-text script as the
conformance skills: `task N D` sends N `working` updates D milliseconds apart, then a text
artifact, then completes; `fail` fails; anything else is echoed back. A cancel stops a task.
"""

import argparse
import asyncio

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
)
from starlette.applications import Starlette

from conformance.skills import TASK


class ScriptExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input().strip()
        if match := TASK.match(text):
            updates, delay = int(match[1] or 0), int(match[2] or 0)
            for i in range(updates):
                await updater.start_work(self._say(updater, f"step {i + 1} of {updates}"))
                await asyncio.sleep(delay / 1000)
            answer = f"done after {updates} updates"
        elif text.lower() == "fail":
            await updater.failed(self._say(updater, "failed as asked: the message was 'fail'"))
            return
        else:
            answer = text
        await updater.add_artifact([Part(text=answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel(self._say(updater, "canceled at the client's request"))

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Message:
        return new_text_message(text, context_id=updater.context_id, task_id=updater.task_id)


def card(url: str) -> AgentCard:
    return AgentCard(
        name="sdk-peer",
        description="A test peer on the official a2a-sdk server.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="script",
                name="script",
                description="task N D | fail | echo",
                tags=["conformance"],
            )
        ],
    )


def app(url: str) -> Starlette:
    agent_card = card(url)
    handler = DefaultRequestHandler(ScriptExecutor(), InMemoryTaskStore(), agent_card)
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    uvicorn.run(app(url), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

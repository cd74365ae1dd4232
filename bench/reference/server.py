"""Reference server for the benchmark: the official a2a-sdk 0.2.16, as a v0.2 user would build it.

`A2AStarletteApplication` + `DefaultRequestHandler` + `InMemoryTaskStore`, served by uvicorn with
one worker, uvloop and httptools (the same server stack as ours and the floor).

The agent echoes the text it gets back as one text artifact and completes the task, through
`TaskUpdater` (add_artifact, then complete). A text of the form `task N D` instead publishes N
`working` status updates D ms apart before the artifact, like ours' run-sut, so that the streaming
benchmark can hold streams open for the same time on every server.

Runs in its own virtual environment (bench/.venv-reference, from requirements.txt beside this file):
    bench/.venv-reference/bin/python bench/reference/server.py --port 8001
"""

from __future__ import annotations

import argparse
import asyncio
import re

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, TaskState, TextPart
from a2a.utils import get_message_text, new_task

TASK_COMMAND = re.compile(r"^\s*task\s+(\d+)\s+(\d+)\s*$")


class EchoExecutor(AgentExecutor):
    """Completes every task with one text artifact that echoes the input text."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(message)
        command = TASK_COMMAND.match(text)
        if command is not None:
            steps, delay_ms = int(command.group(1)), int(command.group(2))
            for _ in range(steps):
                await asyncio.sleep(delay_ms / 1000)
                await updater.update_status(TaskState.working)
        await updater.add_artifact([Part(root=TextPart(text=text))], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def build_app(port: int) -> object:
    card = AgentCard(
        name="a2a-sdk 0.2.16 echo (benchmark reference)",
        description="Echoes the input text as one artifact.",
        url=f"http://127.0.0.1:{port}/",
        version="0.2.16",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="echo", description="Echoes the input text.", tags=["echo"])
        ],
    )
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore())
    return A2AStarletteApplication(agent_card=card, http_handler=handler).build()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.port),  # type: ignore[arg-type]
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

"""A real server for tests: uvicorn on 127.0.0.1 in a background thread, on its own database."""

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.skills import SkillRegistry


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LiveServer:
    url: str
    settings: Settings


@contextmanager
def live_server(
    registry: SkillRegistry, *, database_url: str, data_dir: Path, **settings: object
) -> Iterator[LiveServer]:
    """Run the app until the block ends; a clean shutdown, like SIGTERM, at the end."""
    port = free_port()
    config = Settings(
        host="127.0.0.1", port=port, data_dir=data_dir, database_url=database_url, **settings
    )
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(config, registry),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
        )
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", config)
    finally:
        server.should_exit = True
        thread.join(timeout=30)

"""Real servers for tests: uvicorn on a free port of 127.0.0.1.

- `live_server`: the whole app, on its own database, in a background thread;
- `serve_in_thread`: any ASGI app (webhooks, identity providers) in a background thread;
- `serve`: any ASGI app in the test's own event loop;
- `run_sut`: conformance/run-sut in a process of its own (that a test may kill).
"""

import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.serving import http_options
from agentic_rag.skills import SkillRegistry


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_in_thread(
    app: ASGIApp, *, lifespan: str = "auto", port: int | None = None, **options: Any
) -> Iterator[str]:
    """Run `app` until the block ends; yield its base URL. `options`: uvicorn's."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan, **options
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
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@asynccontextmanager
async def serve(app: ASGIApp, host: str = "127.0.0.1", **config: Any) -> AsyncIterator[int]:
    """Run `app` with uvicorn in this event loop on a free port of `host`; yield the port."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", **config))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # startup failed: raise its error here
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class LiveServer:
    url: str
    settings: Settings


@contextmanager
def live_server(
    registry: SkillRegistry | None, *, database_url: str, data_dir: Path, **settings: object
) -> Iterator[LiveServer]:
    """Run the app until the block ends, with `serve`'s HTTP options; a clean shutdown, like
    SIGTERM, at the end.

    `registry` None serves the product's skills (the knowledge engine included)."""
    config = Settings(
        host="127.0.0.1",
        port=free_port(),
        data_dir=data_dir,
        database_url=database_url,
        **settings,
    )
    app = build_app(config, registry)
    with serve_in_thread(app, lifespan="on", port=config.port, **http_options(config)) as url:
        yield LiveServer(url, config)


ROOT = Path(__file__).resolve().parents[2]


def run_sut(port: int, data_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start `conformance/run-sut --port PORT --data-dir DIR ARGS`; return it once ready."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / f"run-sut-{time.monotonic_ns()}.log"
    command = [sys.executable, str(ROOT / "conformance" / "run-sut"), "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*command, "--data-dir", str(data_dir), *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return until_ready(process, port, log_path)


def until_ready(
    process: subprocess.Popen[bytes], port: int, log_path: Path
) -> subprocess.Popen[bytes]:
    """`process` once its server on `port` answers /readyz; its log if it dies or hangs."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        assert process.poll() is None, log_path.read_text()
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the server did not start:\n{log_path.read_text()}")

"""Helpers of the tests of several workers on one database."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from conformance.skills import conformance_registry
from tests.support.live import live_server
from tests.support.rpc import call, text_message


@contextmanager
def two_workers(
    database_url: str, data_dir: Path, **settings: object
) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two workers (each a whole app) on one database, and a client of each."""
    registry = conformance_registry()
    with (
        live_server(registry, database_url=database_url, data_dir=data_dir, **settings) as a,
        live_server(registry, database_url=database_url, data_dir=data_dir, **settings) as b,
        httpx.Client(base_url=a.url, timeout=30) as client_a,
        httpx.Client(base_url=b.url, timeout=30) as client_b,
    ):
        yield client_a, client_b


def start(client: httpx.Client, text: str) -> dict[str, Any]:
    """Send `text` without waiting for the task to end; return the task once it works."""
    send = {"message": text_message(text), "configuration": {"blocking": False}}
    task: dict[str, Any] = call(client, "message/send", send)["result"]
    deadline = time.monotonic() + 20
    while call(client, "tasks/get", {"id": task["id"]})["result"]["status"]["state"] != "working":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return task

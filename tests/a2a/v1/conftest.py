"""The a2a-sdk 1.x client over each 1.0 binding the card offers, against the conformance
server (`sut`): `client` sends blocking, `streaming` streams."""

from collections.abc import AsyncIterator

import pytest
from a2a.client import Client, ClientConfig, create_client

from tests.support.live import LiveServer

BINDINGS = ["JSONRPC", "HTTP+JSON"]


@pytest.fixture(params=BINDINGS)
def binding(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def client(sut: LiveServer, binding: str) -> AsyncIterator[Client]:
    config = ClientConfig(streaming=False, supported_protocol_bindings=[binding])
    async with await create_client(sut.url, client_config=config) as c:
        yield c


@pytest.fixture
async def streaming(sut: LiveServer, binding: str) -> AsyncIterator[Client]:
    config = ClientConfig(streaming=True, supported_protocol_bindings=[binding])
    async with await create_client(sut.url, client_config=config) as c:
        yield c

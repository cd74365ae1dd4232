"""MCP 2026-07-28 multi round-trip requests beyond one question a round (issue 20, point 4): a
skill that needs the client's model, a question that names its answer, the client's roots, and
several requests in one `InputRequiredResult`.

The server is the product's app over a real PostgreSQL with the test's skills
(tests/support/rounds.py); the clients are the official SDK's at 2026-07-28 over Streamable
HTTP, and at 2025-11-25 over stdio (the requests go to the client over the connection), whose
callbacks play the client's model, its user and its roots.
"""

import sys
from collections.abc import AsyncIterator
from typing import Any

import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.support.databases import new_database
from tests.support.live import LiveServer, live_server
from tests.support.mcp import ROOT as REPOSITORY
from tests.support.mcp import Elicitations, base_env, mcp_url
from tests.support.rounds import rounds_registry

ROOT = types.Root(uri="file:///work/notes", name="notes")
MODEL = "test-client-model"


async def model(
    context: ClientRequestContext | None, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="Good day"), model=MODEL
    )


async def client_roots(context: ClientRequestContext | None) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[ROOT])


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    with live_server(
        rounds_registry(),
        database_url=await new_database(postgres_dsn),
        data_dir=tmp_path_factory.mktemp("rounds"),
    ) as live:
        yield live


async def test_a_skill_that_needs_the_clients_model_refuses_a_client_without_sampling(
    server: LiveServer,
) -> None:
    async with Client(mcp_url(server)) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("greet", {})
    assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    data = refused.value.error.data
    assert isinstance(data, dict) and "sampling" in data["requiredCapabilities"]


async def test_a_skill_that_needs_the_clients_model_runs_with_it(server: LiveServer) -> None:
    async with Client(mcp_url(server), sampling_callback=model) as client:
        result = await client.call_tool("greet", {})
    assert result.structured_content == {"text": "Good day"}


async def test_a_question_is_asked_under_the_name_the_skill_gave_it(server: LiveServer) -> None:
    users = Elicitations({"name": "Alice"})
    async with Client(mcp_url(server), elicitation_callback=users) as client:
        first = await client.session.call_tool("named", {}, allow_input_required=True)
        answered = await client.call_tool("named", {})
    assert isinstance(first, types.InputRequiredResult)
    assert list(first.input_requests or {}) == ["user_name"]
    assert answered.structured_content == {"text": "Hello, Alice!"}


async def test_the_clients_roots_come_in_a_round_of_their_own(server: LiveServer) -> None:
    async with Client(mcp_url(server), list_roots_callback=client_roots) as client:
        first = await client.session.call_tool("roots", {}, allow_input_required=True)
        answered = await client.call_tool("roots", {})
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None
    assert [r.method for r in first.input_requests.values()] == ["roots/list"]
    assert answered.structured_content == {"text": "notes=file:///work/notes"}


async def test_a_client_without_roots_offers_none(server: LiveServer) -> None:
    async with Client(mcp_url(server)) as client:
        result = await client.call_tool("roots", {})
    assert result.structured_content == {"text": "no roots"}


async def test_requests_made_at_once_share_one_round(server: LiveServer) -> None:
    users = Elicitations({"name": "Alice"})
    options: dict[str, Any] = {
        "sampling_callback": model,
        "list_roots_callback": client_roots,
        "elicitation_callback": users,
    }
    async with Client(mcp_url(server), **options) as client:
        first = await client.session.call_tool("everything", {}, allow_input_required=True)
        answered = await client.call_tool("everything", {})
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None
    methods = {key: request.method for key, request in first.input_requests.items()}
    assert methods == {
        "user_name": "elicitation/create",
        "sample-1": "sampling/createMessage",
        "roots": "roots/list",
    }
    assert answered.structured_content == {"text": "Good day Alice (notes=file:///work/notes)"}
    assert len(users.asked) == 1  # the question was asked once, in the one round


# -- 2025-11-25 over stdio: requests to the client over the connection -----------------------

ROUNDS_CHILD = """
import sys
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.mcp.stdio import run_local
from tests.support.rounds import rounds_registry

sys.exit(run_local(Engine(Settings(), rounds_registry(), transport="stdio")))
"""


@pytest.fixture(scope="module")
async def stdio_server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> StdioServerParameters:
    env = base_env(
        DATABASE_URL=await new_database(postgres_dsn),
        AGENTIC_RAG_DATA_DIR=str(tmp_path_factory.mktemp("rounds-stdio")),
        PYTHONPATH=str(REPOSITORY),
    )
    return StdioServerParameters(
        command=sys.executable, args=["-c", ROUNDS_CHILD], env=env, cwd=str(REPOSITORY)
    )


async def test_over_stdio_a_skill_that_needs_the_clients_model_says_so_without_it(
    stdio_server: StdioServerParameters,
) -> None:
    async with Client(stdio_server, mode="legacy") as client:
        result = await client.call_tool("greet", {})
    assert result.is_error
    assert "needs the client's model" in str(result.content)


async def test_over_stdio_the_client_is_asked_over_the_connection(
    stdio_server: StdioServerParameters,
) -> None:
    users = Elicitations({"name": "Alice"})
    options: dict[str, Any] = {
        "sampling_callback": model,
        "list_roots_callback": client_roots,
        "elicitation_callback": users,
    }
    async with Client(stdio_server, mode="legacy", **options) as client:
        greeted = await client.call_tool("greet", {})
        rooted = await client.call_tool("roots", {})
        everything = await client.call_tool("everything", {})
    assert greeted.structured_content == {"text": "Good day"}
    assert rooted.structured_content == {"text": "notes=file:///work/notes"}
    assert everything.structured_content == {"text": "Good day Alice (notes=file:///work/notes)"}

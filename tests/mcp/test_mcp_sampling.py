"""The client's model through MCP sampling (issue 20, point 6): without a server LLM, the answers
of `hybrid_retrieve` and `query_with_reranking` (and the `llm` reranker's grades) come from the
MCP client's own model when the call asks for it, checked against the passages as a server
LLM's answer is.

The server is the product's (a real PostgreSQL, the real embedder, no LLM configured); the
clients are the official SDK's at 2026-07-28 (multi round-trip requests: the sampling request
comes back in an `InputRequiredResult`) and 2025-11-25 (a `sampling/createMessage` request over
stdio's connection). Each client's sampling callback is the test's: it plays the client's
model, the peer of the server, and records what it was sent.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from pydantic import BaseModel

from agentic_rag.knowledge import answers, grounding
from agentic_rag.skills import SkillContext, SkillRegistry
from tests.support.databases import new_database
from tests.support.graph import FACT, RECORDED, TEXT
from tests.support.knowledge import GARDEN
from tests.support.live import LiveServer, live_server
from tests.support.mcp import BIN, ROOT, base_env, mcp_url

QUESTION = "How many hours of direct sunlight do tomatoes need?"
GROUNDED = "Tomatoes need at least six hours of direct sunlight a day [1]."
CONTRADICTING = "Tomatoes do not need direct sunlight at all [1]."
MODEL = "test-client-model"


class ClientModel:
    """The sampling callback of a test client: replies with `reply`, grades with `grades`
    (the `llm` reranker's requests), and keeps every request it was sent."""

    def __init__(self, reply: str, grades: dict[str, float] | None = None) -> None:
        self.reply, self.grades = reply, grades
        self.asked: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext | None, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append(params)
        grading = "Grade how well" in (params.system_prompt or "")
        text = json.dumps({"grades": self.grades}) if grading else self.reply
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=MODEL,
            stop_reason="endTurn",
        )

    def sent(self) -> str:
        """Everything the server sent the model: system prompts and messages."""
        parts: list[str] = []
        for params in self.asked:
            parts.append(params.system_prompt or "")
            for message in params.messages:
                assert isinstance(message.content, types.TextContent)
                parts.append(message.content.text)
        return "\n".join(parts)


class Declining:
    """A sampling callback whose user declines every request."""

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.ErrorData:
        return types.ErrorData(code=-1, message="the user declined the sampling request")


class ExtractingModel:
    """The sampling callback of a test client that extracts as a model would for Graphiti:
    each request names its reply's schema (Graphiti puts the JSON schema in the prompt), and
    the answer is the recorded one for that schema (tests/data/graph/llm-responses.json)."""

    def __init__(self) -> None:
        self.recorded: dict[str, Any] = json.loads(RECORDED.read_text())
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        prompt = " ".join(
            m.content.text for m in params.messages if isinstance(m.content, types.TextContent)
        )
        (schema,) = [name for name in self.recorded if f'"title": "{name}"' in prompt]
        self.asked.append(schema)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=json.dumps(self.recorded[schema])),
            model=MODEL,
        )


def answer_of(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    answer: dict[str, Any] = result.structured_content["answer"]
    return answer


def passages_of(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None
    return [hit["text"] for hit in result.structured_content["hits"]]


async def ingest_garden(client: Client) -> None:
    ingested = await client.call_tool("ingest_text", {"text": GARDEN, "title": "Garden"})
    assert not ingested.is_error, ingested.content


# -- Streamable HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    """The product's server without an LLM, holding the garden notes."""
    with live_server(
        None,
        database_url=await new_database(postgres_dsn),
        data_dir=tmp_path_factory.mktemp("sampling"),
    ) as live:
        async with Client(mcp_url(live)) as client:
            await ingest_garden(client)
        yield live


async def test_the_clients_model_answers_when_asked(server: LiveServer) -> None:
    model = ClientModel(GROUNDED)
    async with Client(mcp_url(server), sampling_callback=model) as client:
        result = await client.call_tool(
            "hybrid_retrieve", {"query": QUESTION, "use_client_model": True}
        )
    answer = answer_of(result)
    assert answer["mode"] == "client-model"
    assert answer["text"] == GROUNDED
    assert answer["note"] is None and answer["rejected"] is None
    assert answer["citations"][0]["title"] == "Garden"
    # One request, with the answer's instructions and the passages: they went to the model.
    (asked,) = model.asked
    assert asked.system_prompt == answers.ANSWER_INSTRUCTIONS
    assert "at least six hours of direct sunlight" in model.sent()
    assert QUESTION in model.sent()


async def test_an_answer_contradicting_the_passages_is_withheld(server: LiveServer) -> None:
    model = ClientModel(CONTRADICTING)
    async with Client(mcp_url(server), sampling_callback=model) as client:
        result = await client.call_tool(
            "hybrid_retrieve", {"query": QUESTION, "use_client_model": True}
        )
    answer = answer_of(result)
    # The grounding check a server LLM's answer passes, with the same verdict.
    verdict = grounding.check(QUESTION, CONTRADICTING, passages_of(result))
    assert verdict.problem is not None
    assert answer["mode"] == "extractive"
    assert answer["rejected"] == CONTRADICTING
    assert answer["note"] == f"The client's model's answer was withheld because {verdict.problem}"
    assert answer["text"].startswith(answer["note"])
    assert "six hours of direct sunlight" in answer["text"]  # the quotes answer instead


async def test_the_llm_reranker_grades_with_the_clients_model(server: LiveServer) -> None:
    async with Client(mcp_url(server)) as client:
        plain = await client.call_tool("hybrid_retrieve", {"query": QUESTION, "answer": False})
    order = passages_of(plain)
    assert len(order) >= 2
    # The model grades the second hit of the fused order best: it comes first once reranked.
    model = ClientModel(GROUNDED, grades={"1": 1, "2": 10})
    async with Client(mcp_url(server), sampling_callback=model) as client:
        result = await client.call_tool(
            "query_with_reranking",
            {"query": QUESTION, "reranker": "llm", "use_client_model": True},
        )
    assert passages_of(result)[0] == order[1]
    grade, reply = model.asked  # two rounds: the grades, then the answer
    assert "Grade how well" in (grade.system_prompt or "")
    assert reply.system_prompt == answers.ANSWER_INSTRUCTIONS
    assert answer_of(result)["mode"] in ("client-model", "extractive")


async def test_it_is_off_unless_asked(server: LiveServer) -> None:
    model = ClientModel(GROUNDED)
    async with Client(mcp_url(server), sampling_callback=model) as client:
        unasked = await client.call_tool("hybrid_retrieve", {"query": QUESTION})
        refused = await client.call_tool(
            "hybrid_retrieve", {"query": QUESTION, "use_client_model": False}
        )
        no_llm = await client.call_tool(
            "query_with_reranking", {"query": QUESTION, "reranker": "llm"}
        )
    assert model.asked == []  # nothing left for the client's model
    for result in (unasked, refused):
        answer = answer_of(result)
        assert answer["mode"] == "extractive"
        assert answer["text"].startswith(answers.NO_LLM)
    # Not asked for, the client's model is no `llm` reranker either.
    assert no_llm.is_error
    assert "reranker 'llm' is not available here" in str(no_llm.content)


async def test_a_client_without_sampling_gets_the_extractive_answer(server: LiveServer) -> None:
    async with Client(mcp_url(server)) as client:
        result = await client.call_tool(
            "hybrid_retrieve", {"query": QUESTION, "use_client_model": True}
        )
    answer = answer_of(result)
    assert answer["mode"] == "extractive"
    assert answer["text"].startswith(
        "No LLM is configured and the client's model was asked for, but this call's client "
        "offers no model"
    )
    assert "six hours of direct sunlight" in answer["text"]


async def test_a_stateless_handshake_era_request_cannot_sample(server: LiveServer) -> None:
    # 2025-11-25 sampling is a request to the client, which a request without a session (no
    # initialize, no Mcp-Session-Id) has no way to send: the quotes answer, saying why.
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "hybrid_retrieve",
            "arguments": {"query": QUESTION, "use_client_model": True},
        },
    }
    headers = {"MCP-Protocol-Version": "2025-11-25", "Accept": "application/json"}
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.post(mcp_url(server), json=body, headers=headers)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert not result.get("isError"), result
    answer = result["structuredContent"]["answer"]
    assert answer["mode"] == "extractive"
    assert "offers no model" in answer["text"]


async def extracted_with_the_clients_model(client: Client, group: str) -> list[str]:
    """add_memory with the client's model, then the facts the graph holds for the group."""
    added = await client.call_tool(
        "add_memory",
        {"name": "Team news", "episode_body": TEXT, "group_id": group, "use_client_model": True},
    )
    assert not added.is_error, added.content
    assert added.structured_content is not None
    message = added.structured_content["result"]["message"]
    assert message.startswith("Episode 'Team news' extracted with the client's model in group")
    found = await client.call_tool(
        "search_memory_facts", {"query": "Who works at Acme?", "group_ids": [group]}
    )
    assert found.structured_content is not None
    return [fact["fact"] for fact in found.structured_content["result"]["facts"]]


async def test_graph_extraction_runs_with_the_clients_model(server: LiveServer) -> None:
    # Without an LLM, add_memory asked to use the client's model extracts within the call:
    # each of Graphiti's prompts is a round trip of the 2026-07-28 call.
    model = ExtractingModel()
    async with Client(mcp_url(server), sampling_callback=model) as client:
        facts = await extracted_with_the_clients_model(client, "local:team")
    assert any(FACT in fact for fact in facts)
    assert {"ExtractedEntities", "ExtractedEdges"} <= set(model.asked)


async def test_each_round_is_an_input_required_result_with_its_requests(
    server: LiveServer,
) -> None:
    # The client drives the 2026-07-28 rounds itself (the SDK's allow_input_required), so the
    # test sees each InputRequiredResult: its sampling requests, and the state to send back.
    model = ClientModel(GROUNDED, grades={"1": 10, "2": 1})
    arguments = {"query": QUESTION, "reranker": "llm", "use_client_model": True}
    rounds: list[dict[str, types.InputRequest]] = []
    responses: dict[str, Any] | None = None
    state: str | None = None
    async with Client(mcp_url(server), sampling_callback=model) as client:
        while True:
            result = await client.session.call_tool(
                "query_with_reranking",
                arguments,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
            if not isinstance(result, types.InputRequiredResult):
                break
            assert result.input_requests and result.request_state
            rounds.append(result.input_requests)
            responses = {}
            for key, request in result.input_requests.items():
                assert isinstance(request, types.CreateMessageRequest)
                responses[key] = await model(None, request.params)
            state = result.request_state
    # The grades, then the answer: one round each, then the result.
    assert [sorted(r) for r in rounds] == [["sample-1"], ["sample-1"]]
    grading, answering = (r["sample-1"] for r in rounds)
    assert isinstance(grading, types.CreateMessageRequest)
    assert isinstance(answering, types.CreateMessageRequest)
    assert "Grade how well" in (grading.params.system_prompt or "")
    assert answering.params.system_prompt == answers.ANSWER_INSTRUCTIONS
    assert answer_of(result)["text"] == GROUNDED


class Question(BaseModel):
    first: str
    second: str


class Answers(BaseModel):
    answers: list[str]


def asking_registry() -> SkillRegistry:
    """A skill that asks the caller's model two questions at once."""
    registry = SkillRegistry()

    @registry.skill(description="Asks the client's model two questions at once.")
    async def two_questions(ctx: SkillContext, args: Question) -> Answers:
        assert ctx.client_model is not None
        replies = await asyncio.gather(
            *(
                ctx.client_model.complete([{"role": "user", "content": q}])
                for q in (args.first, args.second)
            )
        )
        return Answers(answers=list(replies))

    return registry


class Echo:
    """A test client's model that answers each question with the question, reversed."""

    async def __call__(
        self, context: ClientRequestContext | None, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        (message,) = params.messages
        assert isinstance(message.content, types.TextContent)
        text = message.content.text[::-1]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=text), model=MODEL
        )


async def test_requests_made_at_once_are_asked_in_one_round(
    database_url: str, data_dir: Path
) -> None:
    with live_server(asking_registry(), database_url=database_url, data_dir=data_dir) as live:
        async with Client(mcp_url(live), sampling_callback=Echo()) as client:
            arguments = {"first": "ab", "second": "cd"}
            first = await client.session.call_tool(
                "two_questions", arguments, allow_input_required=True
            )
            answered = await client.call_tool("two_questions", arguments)
        async with httpx.AsyncClient() as http:
            metrics = (await http.get(f"{live.url}/metrics")).text
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None
    assert sorted(first.input_requests) == ["sample-1", "sample-2"]
    assert answered.structured_content == {"answers": ["ba", "dc"]}
    # A round that asks the client's model counts as a call that needed input, not a failure.
    calls = {
        outcome: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("agentic_rag_skill_calls_total{") and 'skill="two_questions"' in line
        for outcome in ("ok", "input_required", "exception", "error")
        if f'outcome="{outcome}"' in line
    }
    assert calls == {"input_required": 2, "ok": 1}


async def test_a_round_without_the_reply_asks_again(server: LiveServer) -> None:
    model = ClientModel(GROUNDED)
    arguments = {"query": QUESTION, "use_client_model": True}
    async with Client(mcp_url(server), sampling_callback=model) as client:
        first = await client.session.call_tool(
            "hybrid_retrieve", arguments, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        again = await client.session.call_tool(
            "hybrid_retrieve",
            arguments,
            input_responses={},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(again, types.InputRequiredResult)
    assert again.input_requests == first.input_requests
    assert model.asked == []


async def test_graph_extraction_without_the_clients_model_needs_an_llm(
    server: LiveServer,
) -> None:
    model = ExtractingModel()
    async with Client(mcp_url(server), sampling_callback=model) as client:
        unasked = await client.call_tool(
            "add_memory", {"name": "Team news", "episode_body": TEXT, "group_id": "local:other"}
        )
    assert model.asked == []
    assert unasked.is_error
    assert "add_memory needs an LLM to extract entities and facts" in str(unasked.content)


# -- stdio -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def stdio_env(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`agentic-rag mcp` in-process, with the setting that offers the client's model by default."""
    return base_env(
        DATABASE_URL=await new_database(postgres_dsn),
        AGENTIC_RAG_DATA_DIR=str(tmp_path_factory.mktemp("sampling-stdio") / "data"),
        AGENTIC_RAG_USE_CLIENT_MODEL="true",
    )


def stdio_client(env: dict[str, str], **options: Any) -> Client:
    server = StdioServerParameters(
        command=str(BIN / "agentic-rag"), args=["mcp"], env=env, cwd=str(ROOT)
    )
    return Client(server, **options)


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_over_stdio_the_setting_asks_for_the_clients_model(
    stdio_env: dict[str, str], mode: str
) -> None:
    model = ClientModel(GROUNDED)
    async with stdio_client(stdio_env, mode=mode, sampling_callback=model) as client:
        await ingest_garden(client)  # the same title again: replaced, not duplicated
        by_setting = await client.call_tool("hybrid_retrieve", {"query": QUESTION})
        refused = await client.call_tool(
            "hybrid_retrieve", {"query": QUESTION, "use_client_model": False}
        )
    assert answer_of(by_setting)["mode"] == "client-model"
    assert answer_of(by_setting)["text"] == GROUNDED
    assert len(model.asked) == 1  # the call that refused it sent nothing
    assert answer_of(refused)["mode"] == "extractive"


async def test_over_stdio_graph_extraction_asks_the_clients_model(
    stdio_env: dict[str, str],
) -> None:
    # 2025-11-25: each of Graphiti's prompts is a sampling/createMessage request over stdio.
    model = ExtractingModel()
    async with stdio_client(stdio_env, mode="legacy", sampling_callback=model) as client:
        facts = await extracted_with_the_clients_model(client, "local:team")
    assert any(FACT in fact for fact in facts)
    assert {"ExtractedEntities", "ExtractedEdges"} <= set(model.asked)


async def test_over_stdio_a_declined_request_leaves_the_quotes(stdio_env: dict[str, str]) -> None:
    async with stdio_client(stdio_env, mode="legacy", sampling_callback=Declining()) as client:
        await ingest_garden(client)
        result = await client.call_tool("hybrid_retrieve", {"query": QUESTION})
    answer = answer_of(result)
    assert answer["mode"] == "extractive"
    assert answer["note"] == (
        "The client's model did not answer (the client did not sample: "
        "the user declined the sampling request)"
    )
    assert "six hours of direct sunlight" in answer["text"]

"""The graph's durable ingestion: add_memory queues an episode in PostgreSQL and answers at once;
a worker extracts the namespace's episodes in order, records what each cost (LLM calls, tokens,
time), and a restart while episodes are queued processes them.

The LLM is `GatedChat`: the test double of a hosted OpenAI-compatible chat API of
tests/graph/test_graph_llm.py (`RecordedChat`, recorded answers by response schema), whose answers
wait while its gate is closed, so that a test can see an episode queued or being processed.
Everything else is real: the product's server, the embedder, PostgreSQL and the embedded
FalkorDB.
"""

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from agentic_rag.graph.results import EpisodeResult, GetEpisodesOutput
from agentic_rag.mcp.listing import output_schema
from tests.support.databases import new_database
from tests.support.graph import (
    POISON,
    GatedChat,
    Tenant,
    add,
    graph_server,
    new_tenant,
    queued_uuid,
    statuses,
    until_asked,
    until_processed,
    until_status,
)
from tests.support.live import LiveServer, serve_in_thread
from tests.support.security import create_keys


@pytest.fixture(scope="module")
def chat() -> Iterator[tuple[GatedChat, str]]:
    double = GatedChat()
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"
        double.gate.set()


@pytest.fixture(scope="module")
async def database_url(postgres_dsn: str) -> str:
    url = await new_database(postgres_dsn)
    await create_keys(url, "nobody", key=["read"])
    return url


@pytest.fixture(scope="module")
async def server(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, chat: tuple[GatedChat, str]
) -> AsyncIterator[LiveServer]:
    with graph_server(database_url, tmp_path_factory.mktemp("graph-queue"), chat[1]) as live:
        yield live


async def test_add_memory_answers_before_extraction_and_the_episode_becomes_searchable(
    server: LiveServer, chat: tuple[GatedChat, str]
) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:news"
    chat[0].gate.clear()  # the LLM answers nothing until the gate opens
    try:
        episode = await add(acme, "Team news", "Alice joined Acme as a rocket engineer.", group)
        assert (await statuses(acme, group))[episode] in ("queued", "processing")
        assert (await acme.result("search_memory_facts", query="rocket", group_ids=group))[
            "facts"
        ] == []
    finally:
        chat[0].gate.set()

    processed = await until_processed(acme, episode, group)
    assert processed["status"] == "done" and processed["name"] == "Team news"
    assert processed["llm_calls"] > 0
    assert processed["prompt_tokens"] == processed["completion_tokens"] == processed["llm_calls"]
    (fact,) = (await acme.result("search_memory_facts", query="rocket", group_ids=group))["facts"]
    assert fact["fact"] == "Alice works at Acme as a rocket engineer"
    assert fact["episodes"] == [episode]  # provenance: the episode it came from


async def test_episodes_of_a_namespace_run_in_order_and_get_status_counts_them(
    server: LiveServer, chat: tuple[GatedChat, str]
) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:log"
    first_body, second_body = "First: Alice visited Acme.", "Second: Alice left Acme."
    chat[0].gate.clear()
    try:
        first = await add(acme, "first", first_body, group)
        second = await add(acme, "second", second_body, group)
        await until_status(acme, group, first, "processing")
        # The second waits for the first: one episode of a namespace at a time, in order.
        assert (await statuses(acme, group))[second] == "queued"
        status = await acme.result("get_status")
        assert f"episodes of {group}: 1 queued, 1 processing, 0 done, 0 failed" in status["message"]
    finally:
        chat[0].gate.set()

    done = [await until_processed(acme, uuid, group) for uuid in (first, second)]
    assert [e["status"] for e in done] == ["done", "done"]
    asked_second = [i for i, text in enumerate(chat[0].bodies) if second_body in text]
    asked_first = [
        i for i, text in enumerate(chat[0].bodies) if first_body in text and second_body not in text
    ]
    assert asked_first and asked_second and max(asked_first) < min(asked_second)

    status = (await acme.result("get_status"))["message"]
    calls = sum(e["llm_calls"] for e in done)
    assert (
        f"episodes of {group}: 0 queued, 0 processing, 2 done, 0 failed; {calls} LLM calls, "
        f"{2 * calls} tokens ({calls} prompt, {calls} completion)" in status
    )


async def test_a_failing_episode_is_retried_then_failed_and_the_next_one_goes(
    server: LiveServer,
) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:mixed"
    bad = await add(acme, "bad", f"{POISON}: Alice and Acme.", group)
    good = await add(acme, "good", "Alice joined Acme as a rocket engineer.", group)

    failed = await until_processed(acme, bad, group)
    assert failed["status"] == "failed" and failed["attempts"] == 2
    assert failed["error"].startswith("attempt 2: ") and "the prompt was refused" in failed["error"]
    assert (await until_processed(acme, good, group))["status"] == "done"
    status = (await acme.result("get_status"))["message"]
    assert f"episodes of {group}: 0 queued, 0 processing, 1 done, 1 failed;" in status
    assert f"last error: {failed['error']}" in status


async def listed(tenant: Tenant, group: str) -> dict[str, dict[str, Any]]:
    """get_episodes of `group` by uuid, its whole answer checked against the output model."""
    found = await tenant.result("get_episodes", group_ids=group, max_episodes=50)
    GetEpisodesOutput.model_validate({"result": found})
    return {episode["uuid"]: episode for episode in found["episodes"]}


async def test_an_episode_is_listed_in_one_shape_queued_processing_done_and_failed(
    server: LiveServer, chat: tuple[GatedChat, str]
) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:shapes"
    first_body = "Alice joined Acme as a rocket engineer."
    chat[0].gate.clear()  # the LLM answers nothing until the gate opens
    try:
        first = await add(acme, "first", first_body, group)
        await until_asked(chat[0], first_body)  # in the graph, being extracted
        added = await acme.result(
            "add_memory",
            name="second",
            episode_body="Bob joined Acme as a welder.",
            group_id=group,
            source="Text",
            source_description="the staff newsletter",
        )
        second = queued_uuid(added)
        poison = await add(acme, "poison", f"{POISON}: Alice and Acme.", group)
        held = await listed(acme, group)
    finally:
        chat[0].gate.set()
    # One episode of a namespace at a time: the second waits, queued, behind the first.
    assert held[first]["status"] == "processing" and held[second]["status"] == "queued"
    assert {key: held[second][key] for key in ("content", "source", "source_description")} == {
        "content": "Bob joined Acme as a welder.",
        "source": "text",
        "source_description": "the staff newsletter",
    }

    assert (await until_processed(acme, poison, group))["status"] == "failed"
    finished = await listed(acme, group)
    assert finished[second]["status"] == "done" and finished[poison]["status"] == "failed"
    assert held[second]["content"] == finished[second]["content"]
    assert held[second]["source"] == finished[second]["source"]
    answers = [held[first], held[second], finished[second], finished[poison]]
    for episode in answers:
        assert list(episode) == list(EpisodeResult.model_fields)

    # Over MCP: tools/list's output schema is the model's, `help` gives it in full, and every
    # answer above is valid by both.
    async with acme.mcp() as client:
        (tool,) = [t for t in (await client.list_tools()).tools if t.name == "get_episodes"]
        helped = await client.call_tool("help", {"topic": "get_episodes"})
    assert tool.output_schema == output_schema(GetEpisodesOutput)
    assert helped.structured_content is not None
    (described,) = helped.structured_content["skills"]
    full = described["output_schema"]
    assert full["$defs"]["EpisodeResult"]["required"] == list(EpisodeResult.model_fields)
    for episode in answers:
        answer = {"result": {"message": "Episodes retrieved successfully", "episodes": [episode]}}
        jsonschema.validate(answer, full)
        jsonschema.validate(answer, tool.output_schema)


async def test_episodes_queued_at_a_restart_are_processed_by_the_next_server(
    postgres_dsn: str, tmp_path: Path, chat: tuple[GatedChat, str]
) -> None:
    database_url = await new_database(postgres_dsn)  # no other server works this queue
    await create_keys(database_url, "nobody", key=["read"])
    chat[0].gate.clear()
    try:
        with graph_server(database_url, tmp_path, chat[1]) as first_server:
            acme = await new_tenant(first_server)
            group = f"{acme.name}:restart"
            queued = [await add(acme, f"e{i}", f"Alice met Bob, part {i}.", group) for i in (1, 2)]
            await until_status(acme, group, queued[0], "processing")
        # The server stopped mid-extraction: its episode went back to the queue.
    finally:
        chat[0].gate.set()

    with graph_server(database_url, tmp_path, chat[1]) as second_server:
        acme = Tenant(acme.name, second_server, acme.key)
        done = [await until_processed(acme, uuid, group) for uuid in queued]
        assert [e["status"] for e in done] == ["done", "done"]
        assert [e["attempts"] for e in done] == [1, 1]  # the interrupted one is not counted
        facts = await acme.result("search_memory_facts", query="Alice", group_ids=group)
        assert {episode for fact in facts["facts"] for episode in fact["episodes"]} & set(queued)


async def test_the_metrics_count_graph_llm_calls_tokens_and_episode_seconds(
    server: LiveServer,
) -> None:
    keys = await create_keys(server.settings.database_url or "", "ops", key=["admin"])
    pattern = re.compile(r"^agentic_rag_graph_llm_calls_total\{outcome=\"ok\"\} (\d+)", re.M)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        text = (await http.get("/metrics", headers={"X-API-Key": keys["key"]})).text
    match = pattern.search(text)
    assert match and int(match.group(1)) > 0, text[:2000]
    assert 'agentic_rag_graph_llm_tokens_total{kind="prompt"}' in text
    assert 'agentic_rag_graph_episode_duration_seconds_count{outcome="done"}' in text

"""The graph's LLM path: add_memory extracts an episode's entities and facts with the LLM,
then search_memory_facts, get_episodes, get_episode_entities and delete_episode see them.

The LLM is `RecordedChat`, a test double of a hosted OpenAI-compatible chat API (no LLM runs on
these machines): it answers each of Graphiti's structured prompts with the response recorded
for that prompt's schema (tests/data/graph/llm-responses.json). Everything else is real: the
product's server, the embedder, PostgreSQL and the embedded FalkorDB.
"""

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.support.databases import new_database
from tests.support.graph import RecordedChat, Tenant, queued_uuid, until_processed
from tests.support.live import LiveServer, live_server, serve_in_thread
from tests.support.outcomes import failure
from tests.support.security import create_keys


@pytest.fixture(scope="module")
def chat() -> Iterator[tuple[RecordedChat, str]]:
    double = RecordedChat()
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, chat: tuple[RecordedChat, str]
) -> AsyncIterator[LiveServer]:
    database_url = await new_database(postgres_dsn)
    await create_keys(database_url, "nobody", key=["read"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("graph-llm"),
        llm_base_url=chat[1],
        llm_model="recorded-model",
    ) as live:
        yield live


async def test_an_episode_becomes_facts_that_search_finds_and_delete_removes(
    server: LiveServer, chat: tuple[RecordedChat, str]
) -> None:
    keys = await create_keys(server.settings.database_url or "", "acme", key=["read", "write"])
    acme = Tenant("acme", server, keys["key"])
    added = await acme.result(
        "add_memory",
        name="Team news",
        episode_body="Alice joined Acme last spring as a rocket engineer.",
        source_description="newsletter",
        group_id="acme:news",
    )
    assert added["message"].startswith("Episode 'Team news' queued for processing in group")
    await until_processed(acme, queued_uuid(added), "acme:news")
    assert {"ExtractedEntities", "ExtractedEdges"} <= set(chat[0].asked)

    facts = await acme.result("search_memory_facts", query="rocket engineer", group_ids="acme:news")
    (fact,) = facts["facts"]
    assert fact["fact"] == "Alice works at Acme as a rocket engineer"
    assert fact["name"] == "WORKS_AT" and fact["group_id"] == "acme:news"

    (episode,) = (await acme.result("get_episodes", group_ids="acme:news"))["episodes"]
    assert episode["name"] == "Team news" and episode["source_description"] == "newsletter"
    assert fact["episodes"] == [episode["uuid"]]  # provenance: the episode it came from
    produced = await acme.result("get_episode_entities", episode_uuids=[episode["uuid"]])
    assert sorted(n["name"] for n in produced["nodes"]) == ["Acme", "Alice"]
    assert [e["uuid"] for e in produced["edges"]] == [fact["uuid"]]

    status = await acme.result("get_status")
    assert "LLM recorded-model" in status["message"]

    deleted = await acme.result("delete_episode", uuid=episode["uuid"])
    assert deleted["message"] == f"Episode with UUID {episode['uuid']} deleted successfully"
    assert "no fact" in failure(await acme.skill("get_entity_edge", uuid=fact["uuid"]))
    assert (await acme.result("get_episodes", group_ids="acme:news"))["episodes"] == []

"""delete_episode for an episode not (yet) in the graph: a queued one leaves the queue and is
never extracted; one being extracted is removed by its worker when the extraction ends, so it
never stays in the graph; another tenant's uuid answers as an unknown one does.

The LLM is `GatedChat` (tests/graph/test_graph_queue.py): the test double of a hosted
OpenAI-compatible chat API that replays recorded answers by response schema, held while its
gate is closed. Everything else is real: the product's server, the local embedder, PostgreSQL
and the embedded FalkorDB.
"""

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from tests.support.databases import new_database
from tests.support.graph import (
    GatedChat,
    Tenant,
    add,
    graph_server,
    new_tenant,
    statuses,
    until_asked,
    until_processed,
    until_status,
)
from tests.support.live import LiveServer, serve_in_thread
from tests.support.outcomes import failure
from tests.support.security import create_keys


@pytest.fixture(scope="module")
def gated() -> Iterator[tuple[GatedChat, str]]:
    double = GatedChat()
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"
        double.gate.set()


@pytest.fixture(scope="module")
def chat(gated: tuple[GatedChat, str]) -> GatedChat:
    return gated[0]


@pytest.fixture(scope="module")
async def server(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory, gated: tuple[GatedChat, str]
) -> AsyncIterator[LiveServer]:
    database_url = await new_database(postgres_dsn)
    await create_keys(database_url, "nobody", key=["read"])
    data_dir: Path = tmp_path_factory.mktemp("graph-delete")
    with graph_server(database_url, data_dir, gated[1]) as live:
        yield live


async def deleted(tenant: Tenant, uuid: str) -> None:
    answer = await tenant.result("delete_episode", uuid=uuid)
    assert answer["message"] == f"Episode with UUID {uuid} deleted successfully"


async def test_a_queued_episode_deleted_is_never_extracted(
    server: LiveServer, chat: GatedChat
) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:news"
    never = f"Bob from {acme.name} joined Acme."
    chat.gate.clear()  # the LLM answers nothing until the gate opens
    try:
        first = await add(acme, "first", "Alice joined Acme as a rocket engineer.", group)
        await until_status(acme, group, first, "processing")
        queued = await add(acme, "second", never, group)  # waits behind the first
        assert (await statuses(acme, group))[queued] == "queued"
        await deleted(acme, queued)
        assert queued not in await statuses(acme, group)
    finally:
        chat.gate.set()

    # Had it stayed in the queue, it would go before an episode added after it.
    later = await add(acme, "third", "Alice still builds rockets at Acme.", group)
    for uuid in (first, later):
        assert (await until_processed(acme, uuid, group))["status"] == "done"
    assert not any(never in body for body in chat.bodies)
    assert set(await statuses(acme, group)) == {first, later}
    status = (await acme.result("get_status"))["message"]
    assert f"episodes of {group}: 0 queued, 0 processing, 2 done, 0 failed" in status
    assert failure(await acme.skill("delete_episode", uuid=queued)) == (
        f"no episode {queued!r} in your graph"
    )


async def test_an_episode_deleted_while_it_is_extracted_does_not_stay_in_the_graph(
    server: LiveServer, chat: GatedChat
) -> None:
    acme = await new_tenant(server)
    group = f"{acme.name}:news"
    body = f"Alice from {acme.name} joined Acme as a rocket engineer."
    chat.gate.clear()
    try:
        episode = await add(acme, "news", body, group)
        await until_asked(chat, body)  # its worker is extracting it
        await deleted(acme, episode)
        # Until the extraction ends, the episode's node (saved first) is still listed, with no
        # queue state: it is no longer queued or processing.
        (listed,) = (await acme.result("get_episodes", group_ids=group))["episodes"]
        assert listed["uuid"] == episode and listed["status"] is None
        assert (listed["attempts"], listed["llm_calls"], listed["seconds"]) == (0, 0, 0)
    finally:
        chat.gate.set()

    for _ in range(1200):  # its worker ends the extraction, finds it deleted, removes it
        if not (await acme.result("get_episodes", group_ids=group))["episodes"]:
            break
        await asyncio.sleep(0.05)
    assert (await acme.result("get_episodes", group_ids=group))["episodes"] == []
    assert (await acme.result("search_memory_facts", query="rocket", group_ids=group))[
        "facts"
    ] == []
    assert (await acme.result("search_nodes", query="Alice", group_ids=group))["nodes"] == []
    assert "episodes of" not in (await acme.result("get_status"))["message"]


async def test_another_tenants_queued_episode_answers_as_an_unknown_one(
    server: LiveServer, chat: GatedChat
) -> None:
    acme, other = await new_tenant(server), await new_tenant(server)
    group = f"{acme.name}:news"
    chat.gate.clear()
    try:
        first = await add(acme, "first", "Alice joined Acme as a rocket engineer.", group)
        await until_status(acme, group, first, "processing")
        queued = await add(acme, "second", "Alice still builds rockets at Acme.", group)

        unknown = str(uuid4())
        assert failure(await other.skill("delete_episode", uuid=unknown)) == (
            f"no episode {unknown!r} in your graph"
        )
        assert failure(await other.skill("delete_episode", uuid=queued)) == (
            f"no episode {queued!r} in your graph"
        )
        assert (await statuses(acme, group))[queued] == "queued"
    finally:
        chat.gate.set()
    for uuid in (first, queued):
        assert (await until_processed(acme, uuid, group))["status"] == "done"

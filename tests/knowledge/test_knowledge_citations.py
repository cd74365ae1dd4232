"""Answers cite their sources, not filler (issue 33, point 3).

A three-page beekeeping site, crawled from its start page: each page says one thing and ends
with a line of links to the two others ("See Calming bees with smoke and Preparing hives for
winter."). A question about one page is answered from that page alone: the other pages'
passages score far below it and are not cited, and the lines of links are not passages at all.

Real parts throughout: the server, PostgreSQL, the embedder, HTTP on loopback.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentic_rag.knowledge import answers
from tests.support.knowledge import Caller
from tests.support.live import live_server, serve_in_thread
from tests.support.outcomes import output
from tests.support.security import create_key

PAGES = {
    "/": (
        "Harvesting honey",
        "Honey is ready to harvest when the bees have capped most of the cells in a frame "
        "with wax. Lift the capped frames out, slice the wax cappings off with a warm knife "
        "and spin the frames in an extractor; strain the honey through a fine mesh before "
        "bottling it.",
    ),
    "/smoke": (
        "Calming bees with smoke",
        "A few puffs of cool smoke at the hive entrance calm the colony before the hive is "
        "opened. The smoke masks the alarm pheromone the guard bees release, and the bees "
        "gorge on honey as if the hive were on fire, which leaves them docile. Burn pine "
        "needles or burlap in the smoker and keep it lit during the whole inspection.",
    ),
    "/winter": (
        "Preparing hives for winter",
        "Before the first frost, reduce the hive entrance with a mouse guard and tilt the hive "
        "slightly forward so condensation runs out. Leave the colony at least twenty kilograms "
        "of stored honey, and wrap the hive in tar paper where winters are long.",
    ),
}


def page(path: str) -> str:
    title, text = PAGES[path]
    others = [(p, t) for p, (t, _) in PAGES.items() if p != path]
    (first, first_title), (second, second_title) = others
    see = f'See <a href="{first}">{first_title}</a> and <a href="{second}">{second_title}</a>.'
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body><main><article>"
        f"<h1>{title}</h1><p>{text}</p><p>{see}</p></article></main></body></html>"
    )


def bee_site() -> Starlette:
    async def serve_page(request: Request) -> Response:
        if request.url.path not in PAGES:
            return PlainTextResponse("not found", status_code=404)
        return HTMLResponse(page(request.url.path))

    return Starlette(routes=[Route("/{path:path}", serve_page)])


@pytest.fixture
def bees(database_url: str, data_dir: Path) -> Iterator[tuple[Caller, str]]:
    key = create_key(database_url, "alpha", ["read", "write"])
    with (
        serve_in_thread(bee_site()) as site,
        live_server(
            None,
            database_url=database_url,
            data_dir=data_dir,
            ingest_allow_private="127.0.0.1",
            ingest_host_interval_seconds=0,
        ) as live,
    ):
        caller = Caller(live.url, key)
        summary = output(caller.skill("ingest_url", url=f"{site}/", depth=1))
        assert summary["ingested"] == 3, summary
        yield caller, site
        caller.client.close()


QUESTIONS = {
    "Why do beekeepers use smoke?": "/smoke",
    "How do I prepare a hive for winter?": "/winter",
    "When is honey ready to harvest?": "/",
}


def test_an_answer_cites_only_the_page_that_answers(bees: tuple[Caller, str]) -> None:
    caller, site = bees
    for question, path in QUESTIONS.items():
        result = output(caller.skill("hybrid_retrieve", query=question))
        # The retrieval still ranks every page: the cut is the answer's.
        assert {h["provenance"]["uri"] for h in result["hits"]} == {site + p for p in PAGES}
        assert result["hits"][0]["provenance"]["uri"] == site + path
        answer = result["answer"]
        assert [c["uri"] for c in answer["citations"]] == [site + path], question
        assert answer["text"].startswith(answers.NO_LLM), answer["text"]
        assert "[2]" not in answer["text"] and "[1]" in answer["text"], answer["text"]
        assert PAGES[path][1].split(". ")[0] in answer["text"]


def test_a_line_of_links_is_not_a_passage(bees: tuple[Caller, str]) -> None:
    caller, site = bees
    stored = output(caller.skill("list_documents"))["documents"]
    assert len(stored) == 3
    for document in stored:
        text = output(caller.skill("get_document", document_id=document["document_id"]))["text"]
        title, body = PAGES[document["uri"].removeprefix(site)]
        assert text.startswith(title) and body in text
        assert "See " not in text, text
    # Asked with the line's own words, no passage holds them.
    result = output(
        caller.skill("hybrid_retrieve", query="See Calming bees with smoke and Preparing hives")
    )
    assert result["hits"] and not any("See " in h["text"] for h in result["hits"])

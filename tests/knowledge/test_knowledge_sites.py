"""A crawled site is one source: a page of it ingested again refreshes that source instead of
making a second one over the same documents, and the source is named by its start page's title,
or by its host when that page has none. Pages started elsewhere stay sources of their own.

Real parts throughout: the product's server, PostgreSQL, the embedder, HTTP on loopback.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.knowledge import Caller, bee_site, crawling_caller
from tests.support.live import serve_in_thread
from tests.support.outcomes import output

UNTITLED = (
    "<!doctype html><html><body><main><p>Wax moths lay their eggs in stored combs; freezing "
    "the frames for two days kills every stage of them.</p></main></body></html>"
)


@pytest.fixture
def site() -> Iterator[str]:
    with serve_in_thread(bee_site()) as url:
        yield url


@pytest.fixture
def caller(database_url: str, data_dir: Path) -> Iterator[Caller]:
    with crawling_caller(database_url, data_dir, "apiary") as caller:
        yield caller


def sources(caller: Caller) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = output(caller.skill("list_sources"))["sources"]
    return listed


def test_a_page_of_an_ingested_site_refreshes_its_source(site: str, caller: Caller) -> None:
    first = output(caller.skill("ingest_url", url=f"{site}/", depth=1))
    assert first["ingested"] == 3

    again = output(caller.skill("ingest_url", url=f"{site}/smoke", depth=1))
    assert again["source_id"] == first["source_id"]
    assert (again["ingested"], again["unchanged"]) == (0, 3)
    assert any(f"is a page of {site}/" in note for note in again["notes"])

    (source,) = sources(caller)
    assert source["source_id"] == first["source_id"] and source["uri"] == f"{site}/"
    assert source["documents"] == 3
    # Named by its start page, not by the page the refresh started from.
    assert source["title"] == "Beekeeping notes"


def test_pages_started_elsewhere_stay_sources_of_their_own(site: str, caller: Caller) -> None:
    # Two articles of one directory, neither crawl reaching the other: two sources.
    smoke = output(caller.skill("ingest_url", url=f"{site}/smoke", depth=0))
    winter = output(caller.skill("ingest_url", url=f"{site}/winter", depth=0))
    assert smoke["source_id"] != winter["source_id"]
    titles = {s["uri"].removeprefix(site): s["title"] for s in sources(caller)}
    assert titles == {"/smoke": "Calming bees with smoke", "/winter": "Preparing hives for winter"}
    # A page the first crawl reached refreshes its source.
    crawled = output(caller.skill("ingest_url", url=f"{site}/smoke", depth=1))
    assert crawled["source_id"] == smoke["source_id"]
    assert output(caller.skill("ingest_url", url=f"{site}/"))["source_id"] == smoke["source_id"]
    assert len(sources(caller)) == 2


def test_a_site_whose_start_page_has_no_title_is_named_by_its_host(caller: Caller) -> None:
    with serve_in_thread(bee_site({"/": UNTITLED})) as untitled:
        output(caller.skill("ingest_url", url=untitled, depth=0))
    (source,) = sources(caller)
    assert source["uri"] == f"{untitled}/"  # the start URL as the crawl spells it
    assert source["title"] == httpx.URL(untitled).host == "127.0.0.1"

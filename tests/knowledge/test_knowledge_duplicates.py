"""One copy of each thing, end to end on the product's server: two crawls of one local site from
two start pages reach the same pages by a redirect, at another URL with the same text, and by a
print version naming its canonical URL; each page is stored once and belongs to both sources,
answers list each passage once, and deleting a source deletes only what no other source holds.
A failed ingestion leaves no empty source behind; refusals name a setting only when it helps.

Real parts throughout: the server, PostgreSQL, the embedder, HTTP on loopback.
"""

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.knowledge import Caller, crawling_caller
from tests.support.live import serve_in_thread
from tests.support.outcomes import failure, output

LOCKS = (
    "The canal lock at Saint Vincent lifts boats four metres in eleven minutes. The keeper "
    "opens the upstream gates only after the lower chamber is full."
)
LOCKS_PRINTED = LOCKS + " Printed from the canal guide."
BRIDGES = (
    "The swing bridge over the canal turns on a single pivot and opens for barges every hour "
    "on the half hour between April and October."
)


def page(title: str, text: str, *links: str, canonical: str | None = None) -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    head = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body><nav><ul>"
        f"{anchors}</ul></nav><main><article><h1>{title}</h1><p>{text}</p></article></main>"
        "</body></html>"
    )


def canal_site() -> Starlette:
    pages = {
        "/a/": page("Canal guide A", "The first guide to the canal.", "/locks", "/bridges"),
        "/b/": page(
            "Canal guide B",
            "The second guide to the canal.",
            "/old/locks",
            "/bridges-copy",
            "/print/locks",
        ),
        "/locks": page("Canal locks", LOCKS),
        "/bridges": page("Canal bridges", BRIDGES),
        "/bridges-copy": page("Canal bridges", BRIDGES),  # the same page at another URL
        "/print/locks": page("Canal locks", LOCKS_PRINTED, canonical="/locks"),
    }

    async def serve_page(request: Request) -> Response:
        path = request.url.path
        if path == "/old/locks":
            return RedirectResponse("/locks", status_code=301)
        if path not in pages:
            return PlainTextResponse("not found", status_code=404)
        return HTMLResponse(pages[path])

    return Starlette(routes=[Route("/{path:path}", serve_page)])


@pytest.fixture
def site() -> Iterator[str]:
    with serve_in_thread(canal_site()) as url:
        yield url


@pytest.fixture
def alpha(database_url: str, data_dir: Path) -> Iterator[Caller]:
    with crawling_caller(database_url, data_dir, "alpha") as caller:
        yield caller


def by_uri(summary: dict[str, Any], base: str) -> dict[str, dict[str, Any]]:
    return {d["uri"].removeprefix(base): d for d in summary["documents"]}


def sources(alpha: Caller) -> dict[str, dict[str, Any]]:
    return {s["uri"]: s for s in output(alpha.skill("list_sources"))["sources"]}


def documents(alpha: Caller, **arguments: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = output(alpha.skill("list_documents", **arguments))["documents"]
    return found


def test_two_overlapping_crawls_store_each_page_once(site: str, alpha: Caller) -> None:
    first = output(alpha.skill("ingest_url", url=f"{site}/a/", depth=1))
    a = by_uri(first, site)
    assert set(a) == {"/a/", "/locks", "/bridges"}
    assert {d["status"] for d in a.values()} == {"created"}

    second = output(alpha.skill("ingest_url", url=f"{site}/b/", depth=1))
    # A redirect to a stored page, a print version naming it canonical, and the same text at
    # another URL: linked to what is stored, nothing chunked or embedded again.
    locks = [d for d in second["documents"] if d["uri"] == f"{site}/locks"]
    (copy,) = [d for d in second["documents"] if d["uri"] == f"{site}/bridges-copy"]
    assert len(locks) == 2  # reached from /old/locks and /print/locks
    for linked, stored in zip(
        (*locks, copy), (a["/locks"], a["/locks"], a["/bridges"]), strict=True
    ):
        assert linked["document_id"] == stored["document_id"]
        assert (linked["status"], linked["chunks"]) == ("unchanged", 0)
        assert any(f"stored once, as {stored['uri']}" in note for note in linked["notes"])
    assert second["ingested"] == 1  # B's start page

    # Four documents in all (two start pages, locks, bridges), each held by the sources that
    # reached it.
    assert len(documents(alpha)) == 4
    held = sources(alpha)
    assert held[f"{site}/a/"]["documents"] == 3
    assert held[f"{site}/b/"]["documents"] == 3
    in_b = {
        d["uri"].removeprefix(site)
        for d in documents(alpha, source_id=held[f"{site}/b/"]["source_id"])
    }
    assert in_b == {"/b/", "/locks", "/bridges"}

    # Each passage once in a result list, and in the answer's citations.
    result = output(
        alpha.skill(
            "hybrid_retrieve", query="How does the swing bridge open?", top_k=5, answer=True
        )
    )
    texts = [" ".join(h["text"].split()) for h in result["hits"]]
    assert len(texts) == len(set(texts))
    assert sum(BRIDGES in t for t in texts) == 1

    # Crawled again: nothing new.
    again = output(alpha.skill("ingest_url", url=f"{site}/b/", depth=1))
    assert again["ingested"] == 0 and again["unchanged"] > 0

    # Deleting A deletes only its start page: the others are B's too.
    deleted = output(alpha.skill("delete_source", source_id=held[f"{site}/a/"]["source_id"]))
    assert deleted["documents"] == 1
    assert len(documents(alpha)) == 3
    assert output(alpha.skill("hybrid_retrieve", query="swing bridge pivot", top_k=3))["hits"]
    deleted = output(alpha.skill("delete_source", source_id=held[f"{site}/b/"]["source_id"]))
    assert deleted["documents"] == 3
    assert documents(alpha) == [] and sources(alpha) == {}


def test_failed_ingestions_leave_no_empty_source(site: str, alpha: Caller) -> None:
    missing = failure(alpha.skill("ingest_url", url=f"{site}/nowhere", depth=0))
    assert "404" in missing or "not found" in missing.lower()
    unknown = failure(alpha.skill("ingest_url", url="http://no-such-host.invalid/", depth=0))
    assert "no-such-host.invalid" in unknown
    html = failure(alpha.skill("ingest_pdf", url=f"{site}/a/"))
    assert "text/html" in html
    not_pdf = base64.b64encode(b"plain text, not a PDF").decode()
    assert failure(alpha.skill("ingest_pdf", data=not_pdf, filename="notes.pdf"))
    assert sources(alpha) == {}
    assert documents(alpha) == []

    # A text without a title: titled by its first line.
    titled = output(alpha.skill("ingest_text", text="# Canal tolls\n\nBarges pay by the tonne."))
    assert titled["documents"][0]["title"] == "Canal tolls"
    assert [s["title"] for s in sources(alpha).values()] == ["Canal tolls"]


def test_a_refusal_names_the_setting_only_when_it_helps(alpha: Caller) -> None:
    scheme = failure(alpha.skill("ingest_url", url="ftp://files.example/notes.txt"))
    assert "scheme 'ftp'" in scheme
    assert "ALLOW_PRIVATE" not in scheme
    private = failure(alpha.skill("ingest_url", url="http://10.1.2.3/"))
    assert "private address" in private
    assert "AGENTIC_RAG_INGEST_ALLOW_PRIVATE" in private
    assert sources(alpha) == {}

"""Helpers of the knowledge tests: a caller of the knowledge skills over A2A and MCP, the pages of
the sites they crawl (and a small site of three pages), and the hosted chat double the rerankers
and answers use."""

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support.hosted_chat import HostedChatDouble
from tests.support.live import live_server
from tests.support.rpc import call, text_message
from tests.support.security import create_key


def article_page(title: str, text: str, links: str = "") -> str:
    """A long enough HTML article titled `title`, its navigation holding the `links` (<li>s)."""
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body><nav><ul>{links}</ul>"
        f"</nav><main><article><h1>{title}</h1><p>{text} It is a long and detailed page about "
        f"{title}, written for visitors who want to know everything.</p></article></main>"
        "</body></html>"
    )


GARDEN = """# Growing tomatoes

Tomatoes need at least six hours of direct sunlight a day. Water them deeply twice a week,
at the base of the plant, and never on the leaves: wet leaves invite blight.

## Pruning

Remove the suckers that grow between the main stem and the branches, so the plant puts its
energy into fruit.
"""

KITCHEN = """# Baking bread

Sourdough rises with a starter of wild yeast and lactobacilli instead of commercial yeast.
Bake at 250 degrees Celsius with steam for the first twenty minutes to get a crisp crust.
"""


class Caller:
    def __init__(self, url: str, key: str) -> None:
        self.client = httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120)

    def skill(self, name: str, **arguments: Any) -> dict[str, Any]:
        """Call a skill with a DataPart; the final Task."""
        message = text_message("")
        message["parts"] = [{"kind": "data", "data": {"skill": name, "arguments": arguments}}]
        answer = call(self.client, "message/send", {"message": message})
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task

    def ask(self, text: str) -> dict[str, Any]:
        answer = call(self.client, "message/send", {"message": text_message(text)})
        task: dict[str, Any] = answer["result"]
        return task


@contextmanager
def crawling_caller(database_url: str, data_dir: Path, tenant: str) -> Iterator[Caller]:
    """A caller of `tenant` on the product's server, which crawls loopback sites (the allow-list
    as a user types it: a comma-separated list) without pausing between requests."""
    key = create_key(database_url, tenant, ["read", "write"])
    with live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        ingest_allow_private="127.0.0.1,::1",
        ingest_host_interval_seconds=0,
    ) as live:
        caller = Caller(live.url, key)
        try:
            yield caller
        finally:
            caller.client.close()


def page(title: str, text: str, *links: str) -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body><nav><ul>{anchors}"
        f"</ul></nav><main><article><h1>{title}</h1><p>{text}</p></article></main></body></html>"
    )


BEE_PAGES = {
    "/": page(
        "Beekeeping notes",
        "Notes of a beekeeper on keeping three hives through the year, from spring to winter.",
        "/smoke",
        "/winter",
    ),
    "/smoke": page(
        "Calming bees with smoke",
        "Smoke calms the bees before the keeper opens the hive: they gorge on honey.",
        "/",
        "/winter",
    ),
    "/winter": page(
        "Preparing hives for winter",
        "Before winter the keeper narrows the entrance and leaves enough honey for the cluster.",
        "/",
        "/smoke",
    ),
}


def bee_site(pages: dict[str, str] = BEE_PAGES) -> Starlette:
    """A site of three pages linking to each other, its start page `/`."""

    async def serve_page(request: Request) -> Response:
        if request.url.path not in pages:
            return PlainTextResponse("not found", status_code=404)
        return HTMLResponse(pages[request.url.path])

    return Starlette(routes=[Route("/{path:path}", serve_page)])


class KnowledgeChatDouble(HostedChatDouble):
    """The hosted chat double as the knowledge engine asks it: it grades passages by the words
    they share with the question (the LLM reranker), and answers a question with what `answer`
    writes from its prompt (the sources and the question); by default "According to the
    sources, steam makes the crust crisp [1]."."""

    def __init__(self, answer: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self._write = answer or (
            lambda _: "According to the sources, steam makes the crust crisp [1]."
        )

    async def answer(self, body: dict[str, Any]) -> str:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith("Grade how well"):
            question = user.split("\n", 1)[0].removeprefix("Question: ")
            words = set(re.findall(r"\w+", question.lower()))
            numbered = re.split(r"(?m)^\[(\d+)\] ", user.split("Passages:\n", 1)[1])[1:]
            passages = zip(numbered[::2], numbered[1::2], strict=True)
            grades = {n: len(words & set(re.findall(r"\w+", text.lower()))) for n, text in passages}
            return '{"grades": ' + str(grades).replace("'", '"') + "}"
        return self._write(user)

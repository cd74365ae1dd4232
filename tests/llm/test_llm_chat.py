"""The LLM's chat client (llm/chat.py) against a recording test double of a hosted
OpenAI-compatible chat API: how a reply's JSON schema is sent, per backend."""

from collections.abc import Iterator
from typing import Any

import pytest

from agentic_rag.config import StructuredOutput
from agentic_rag.llm.chat import LLMError, OpenAIChat
from agentic_rag.llm.endpoint import ChatEndpoint
from tests.support.hosted_chat import HostedChatDouble
from tests.support.live import serve_in_thread

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "Named", "schema": SCHEMA}}


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[HostedChatDouble, str]]:
    double = HostedChatDouble(lambda body: '{"name": "x"}')
    with serve_in_thread(double.app()) as url:
        yield double, f"{url}/v1"


@pytest.mark.parametrize(
    ("mode", "sent"),
    [
        ("json_schema", JSON_SCHEMA),
        ("json_object", {"type": "json_object", "schema": SCHEMA}),
    ],
)
async def test_the_schema_is_sent_the_way_the_backend_honours_it(
    api: tuple[HostedChatDouble, str], mode: StructuredOutput, sent: dict[str, Any]
) -> None:
    double, url = api
    chat = OpenAIChat(ChatEndpoint(url, "m", "m", structured_output=mode))
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        completion = await chat.create({**body, "response_format": JSON_SCHEMA})
        plain = await chat.create({**body, "response_format": {"type": "json_object"}})
    finally:
        await chat.aclose()
    assert completion["choices"][0]["message"]["content"] == '{"name": "x"}'
    assert plain["choices"][0]["message"]["content"] == '{"name": "x"}'
    assert double.requests[-2]["response_format"] == sent
    assert double.requests[-1]["response_format"] == {"type": "json_object"}


async def test_an_endpoint_that_is_not_there_is_a_clear_error() -> None:
    chat = OpenAIChat(ChatEndpoint("http://127.0.0.1:9/v1", "m", "m"), attempts=1)
    try:
        with pytest.raises(LLMError, match="the LLM endpoint cannot be reached"):
            await chat.complete([{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()

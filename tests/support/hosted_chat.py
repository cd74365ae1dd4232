"""The test double of a hosted LLM's chat API, the one service these machines cannot reach.

`HostedChatDouble` answers `POST /v1/chat/completions` as an OpenAI-compatible server does. It
keeps every request's body and answers with the text `reply(body)` gives; the doubles of the
test packages answer in a subclass instead (tests/support/graph.py: recorded answers;
tests/support/knowledge.py: grades and cited answers), and may refuse a request as a hosted API
refuses a bad one.
"""

from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class Refused(Exception):
    """A request the double refuses, as a hosted API refuses a bad one: HTTP 400 with the reason."""


class HostedChatDouble:
    """The test double of a hosted LLM's OpenAI-compatible chat API."""

    def __init__(self, reply: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self._reply = reply

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    async def answer(self, body: dict[str, Any]) -> str:
        """The assistant's text for a request's body; raises `Refused` to refuse the request."""
        if self._reply is None:
            raise NotImplementedError("the double needs a reply, or a subclass that answers")
        return self._reply(body)

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        try:
            content = await self.answer(body)
        except Refused as refusal:
            return JSONResponse({"error": {"message": str(refusal)}}, 400)
        return JSONResponse(
            {
                "id": "double",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                # One token each way a call: the graph's cost records count them.
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

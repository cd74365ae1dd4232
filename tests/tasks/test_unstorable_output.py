"""A skill whose result cannot be stored ends `failed` with a reason, never stuck `working`."""

from pathlib import Path

import httpx
from pydantic import BaseModel

from agentic_rag.skills import SkillContext, SkillRegistry
from tests.support.live import live_server
from tests.support.rpc import call, text_message


class Text(BaseModel):
    text: str


def test_a_result_postgresql_cannot_store_fails_the_task_with_a_reason(
    database_url: str, data_dir: Path
) -> None:
    registry = SkillRegistry()

    @registry.skill(description="Answers with a NUL character.", text_argument="text", default=True)
    async def nul(ctx: SkillContext, args: Text) -> Text:
        return Text(text="before\x00after")  # PostgreSQL text and jsonb cannot hold U+0000

    with (
        live_server(registry, database_url=database_url, data_dir=data_dir) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        answer = call(client, "message/send", {"message": text_message("go")})["result"]
        stored = call(client, "tasks/get", {"id": answer["id"]})["result"]
        healthy = call(client, "message/send", {"message": text_message("again")})
    assert answer["status"]["state"] == "failed"
    assert "could not be stored" in answer["status"]["message"]["parts"][0]["text"]
    assert stored["status"]["state"] == "failed"
    assert "artifacts" not in stored
    assert healthy["result"]["status"]["state"] == "failed"  # the server goes on answering

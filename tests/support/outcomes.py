"""What a task ended with, as the A2A JSON-RPC API returns it: its data output, or the reason it
failed."""

from typing import Any


def output(task: dict[str, Any]) -> dict[str, Any]:
    assert task["status"]["state"] == "completed", task["status"]
    # One result; the skill's attachments (ctx.attach: a PDF's page images) beside it.
    (artifact,) = [a for a in task["artifacts"] if not (a.get("metadata") or {}).get("attached")]
    data: dict[str, Any] = next(p["data"] for p in artifact["parts"] if p["kind"] == "data")
    return data


def failure(task: dict[str, Any]) -> str:
    assert task["status"]["state"] == "failed", task["status"]
    return str(task["status"]["message"]["parts"][0]["text"])

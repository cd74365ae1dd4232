"""Tenant isolation below the adapters: one tenant can neither read, change, cancel, stream nor
even detect another's tasks. For every method, a foreign id answers exactly like an unknown id.
"""

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance.skills import conformance_registry
from tests.support.live import LiveServer, live_server
from tests.support.rpc import call, stream, text_message
from tests.support.security import create_key


class Tenant:
    def __init__(self, url: str, key: str) -> None:
        self.client = httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=30)

    def call(self, method: str, params: Any) -> dict[str, Any]:
        return call(self.client, method, params)

    def stream(self, method: str, params: Any) -> list[dict[str, Any]]:
        return [e.payload for e in stream(self.client, method, params)]


@pytest.fixture
def tenants(database_url: str, data_dir: Path) -> Iterator[tuple[Tenant, Tenant, LiveServer]]:
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    with live_server(
        conformance_registry(), database_url=database_url, data_dir=data_dir
    ) as server:
        alpha, beta = Tenant(server.url, alpha_key), Tenant(server.url, beta_key)
        yield alpha, beta, server
        alpha.client.close()
        beta.client.close()


def normalized(answer: Any, *ids: str) -> Any:
    """The answer with the probed ids blanked out, so answers about two ids compare."""
    text = str(answer)
    for task_id in ids:
        text = text.replace(task_id, "<id>")
    return text


def alpha_tasks(alpha: Tenant) -> dict[str, dict[str, Any]]:
    done = alpha.call("message/send", {"message": text_message("secret report")})["result"]
    hook = {"url": "https://hooks.example.com/alpha", "id": "alpha-hook"}
    asking = alpha.call(
        "message/send",
        {"message": text_message("ask"), "configuration": {"pushNotificationConfig": hook}},
    )
    running = alpha.call(
        "message/send",
        {"message": text_message("task 200 100"), "configuration": {"blocking": False}},
    )
    return {"completed": done, "input-required": asking["result"], "working": running["result"]}


PROBES: dict[str, Any] = {
    "tasks/get": lambda task_id: {"id": task_id},
    "tasks/get with history": lambda task_id: {"id": task_id, "historyLength": 5},
    "tasks/cancel": lambda task_id: {"id": task_id},
    "tasks/pushNotificationConfig/get": lambda task_id: {"id": task_id},
    "tasks/pushNotificationConfig/list": lambda task_id: {"id": task_id},
    "tasks/pushNotificationConfig/delete": lambda task_id: {
        "id": task_id,
        "pushNotificationConfigId": "alpha-hook",
    },
    "tasks/pushNotificationConfig/set": lambda task_id: {
        "taskId": task_id,
        "pushNotificationConfig": {"url": "https://hooks.example.com/beta"},
    },
}


def test_a_foreign_task_answers_like_an_unknown_one_for_every_method(
    tenants: tuple[Tenant, Tenant, LiveServer],
) -> None:
    alpha, beta, _ = tenants
    tasks = alpha_tasks(alpha)
    before = {
        state: alpha.call("tasks/get", {"id": t["id"]})["result"] for state, t in tasks.items()
    }

    for state, task in tasks.items():
        foreign, unknown = task["id"], uuid.uuid4().hex
        for name, params in PROBES.items():
            method = name.split(" ")[0]
            on_foreign = beta.call(method, params(foreign))
            on_unknown = beta.call(method, params(unknown))
            assert on_foreign["error"]["code"] == -32001, (state, name, on_foreign)
            assert normalized(on_foreign, foreign) == normalized(on_unknown, unknown), (state, name)
        resubscribed = beta.stream("tasks/resubscribe", {"id": foreign})
        assert normalized(resubscribed, foreign) == normalized(
            beta.stream("tasks/resubscribe", {"id": unknown}), unknown
        )
        assert resubscribed[0]["error"]["code"] == -32001

    after = {
        state: alpha.call("tasks/get", {"id": t["id"]})["result"] for state, t in tasks.items()
    }
    assert after["completed"] == before["completed"]
    assert after["input-required"] == before["input-required"]
    assert after["working"]["status"]["state"] == "working"  # beta's cancel did not reach it
    hooks = alpha.call("tasks/pushNotificationConfig/list", {"id": tasks["input-required"]["id"]})
    assert [h["pushNotificationConfig"]["id"] for h in hooks["result"]] == ["alpha-hook"]
    assert (
        alpha.call("tasks/cancel", {"id": tasks["working"]["id"]})["result"]["status"]["state"]
        == "canceled"
    )


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
def test_a_message_naming_a_foreign_task_creates_the_callers_own(
    tenants: tuple[Tenant, Tenant, LiveServer], method: str
) -> None:
    alpha, beta, _ = tenants
    asking = alpha.call("message/send", {"message": text_message("ask")})["result"]

    def send_as_beta(task_id: str) -> dict[str, Any]:
        message = text_message("hello from beta", taskId=task_id)
        if method == "message/send":
            return beta.call(method, {"message": message})["result"]
        events = beta.stream(method, {"message": message})
        return beta.call("tasks/get", {"id": events[0]["result"]["id"]})["result"]

    foreign, unknown = send_as_beta(asking["id"]), send_as_beta(uuid.uuid4().hex)
    for beta_task in (foreign, unknown):
        assert beta_task["status"]["state"] == "completed"
        assert beta_task["artifacts"][0]["parts"][0]["text"] == "hello from beta"
        assert [m["parts"][0]["text"] for m in beta_task["history"]] == ["hello from beta"]
    assert foreign["id"] == asking["id"]  # the same id, in beta's own namespace
    assert alpha.call("tasks/get", {"id": asking["id"]})["result"] == asking


def test_the_extended_card_is_the_same_for_every_tenant(
    tenants: tuple[Tenant, Tenant, LiveServer],
) -> None:
    alpha, beta, _ = tenants
    card = alpha.call("agent/getAuthenticatedExtendedCard", {})
    assert card == beta.call("agent/getAuthenticatedExtendedCard", {})
    assert card["result"]["name"] == "agentic-rag"


async def test_mcp_tools_run_as_the_credentials_tenant_whatever_the_arguments(
    database_url: str, data_dir: Path
) -> None:
    from tests.support.mcp import keyed_client, mcp_url, watched_registry

    alpha_key = await asyncio.to_thread(create_key, database_url, "alpha", ["read", "write"])
    beta_key = await asyncio.to_thread(create_key, database_url, "beta", ["read", "write"])
    with live_server(
        watched_registry(lambda event: None), database_url=database_url, data_dir=data_dir
    ) as server:
        seen = {}
        for name, key in (("alpha", alpha_key), ("beta", beta_key)):
            async with keyed_client(mcp_url(server), key) as client:
                # An argument naming another tenant is no way into it.
                result = await client.call_tool("whoami", {"tenant": "alpha", "group_id": "alpha"})
                seen[name] = result.structured_content
    assert seen == {"alpha": {"tenant": "alpha"}, "beta": {"tenant": "beta"}}

"""A credential's groups of tools at every door of the agent network (docs/skills.md, "Groups
of tools"): `orchestrate` runs a plan only of skills its caller may call, and each step runs
with the caller's groups; each REST route under /a2a/ is the skill it stands for, with that
skill's group.

The product's server over A2A, with keys of one tenant: one that selects no group, one limited
to `network` (which may orchestrate), one limited to `knowledge`. A skill `whoami` (group
`network`) added to the product's registry says which groups the task it runs has.
"""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from agentic_rag.app import build_app
from agentic_rag.config import Settings
from agentic_rag.engine import Engine
from agentic_rag.skills import SkillContext
from tests.support.databases import create_database
from tests.support.live import free_port, serve_in_thread
from tests.support.network import declaration, problem
from tests.support.outcomes import failure, output
from tests.support.rpc import call, text_message
from tests.support.security import create_key

FORBIDDEN = -32011


class Nothing(BaseModel):
    pass


class Groups(BaseModel):
    groups: list[str] | None


@dataclass
class Product:
    url: str
    keys: dict[str, str]

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-API-Key": self.keys[key]}, timeout=60)

    def send(self, key: str, message: dict[str, Any]) -> dict[str, Any]:
        with self.client(key) as client:
            return call(client, "message/send", {"message": message})

    def skill(self, key: str, skill: str, **arguments: Any) -> dict[str, Any]:
        answer = self.send(key, skill_message(skill, **arguments))
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task


def skill_message(skill: str, **arguments: Any) -> dict[str, Any]:
    return text_message(
        "", parts=[{"kind": "data", "data": {"skill": skill, "arguments": arguments}}]
    )


@pytest.fixture(scope="module")
def product(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Product]:
    database_url = create_database(postgres_dsn)
    keys = {
        "all": create_key(database_url, "acme", ["read", "write"]),
        "network": create_key(database_url, "acme", ["read", "write"], groups=["network"]),
        "knowledge": create_key(database_url, "acme", ["read", "write"], groups=["knowledge"]),
    }
    config = Settings(
        host="127.0.0.1",
        port=free_port(),
        data_dir=tmp_path_factory.mktemp("groups"),
        database_url=database_url,
        peers_allow_private=["127.0.0.1"],
    )
    app = build_app(config, None)
    engine: Engine = app.state.engine

    @engine.registry.skill(description="The groups of the task it runs.", group="network")
    async def whoami(ctx: SkillContext, args: Nothing) -> Groups:
        return Groups(groups=None if ctx.groups is None else sorted(ctx.groups))

    with serve_in_thread(app, lifespan="on", port=config.port) as url:
        yield Product(url, keys)


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"goal": "probe", "plan": list(steps)}


def test_a_plan_cannot_run_a_skill_its_callers_groups_do_not_select(product: Product) -> None:
    ingested = output(product.skill("all", "ingest_text", text="The vault code is 4471."))
    document_id = ingested["documents"][0]["document_id"]
    # Each step alone, as the network key's own call, is refused: -32011.
    for skill, arguments in (
        ("delete_document", {"document_id": document_id}),
        ("hybrid_retrieve", {"query": "vault code"}),
        ("ingest_text", {"text": "planted"}),
    ):
        direct = product.send("network", skill_message(skill, **arguments))
        assert direct["error"]["code"] == FORBIDDEN, direct
        # Through a plan: refused whole, before any step runs.
        refused = failure(
            product.skill(
                "network",
                "orchestrate",
                **plan(
                    {"id": "first", "skill": "help"},
                    {"id": "probe", "skill": skill, "input": arguments},
                ),
            )
        )
        group = {"delete_document": "admin", "hybrid_retrieve": "knowledge"}.get(skill, "ingest")
        assert refused == (
            f"step 'probe': skill {skill!r} is in the group {group!r}, which this credential "
            "does not select (its groups: network)"
        )
    # Nothing was deleted, read or ingested.
    kept = output(product.skill("all", "get_document", document_id=document_id))
    assert kept["document_id"] == document_id
    listed = output(product.skill("all", "list_documents"))
    assert [d["document_id"] for d in listed["documents"]] == [document_id]
    # A plan of what the key may call runs, each step with the key's groups.
    allowed = output(
        product.skill(
            "network",
            "orchestrate",
            **plan({"id": "me", "skill": "whoami"}, {"id": "list", "skill": "list_agents"}),
        )
    )
    assert allowed["state"] == "completed"
    assert allowed["outputs"]["me"] == {"groups": ["network"]}


def test_a_task_runs_with_the_groups_of_the_credential_that_created_it(product: Product) -> None:
    forged = {"agentic-rag/toolGroups": ["admin"], "note": "kept"}
    restricted = product.send("network", {**skill_message("whoami"), "metadata": forged})
    assert output(restricted["result"]) == {"groups": ["network"]}
    unrestricted = product.send("all", {**skill_message("whoami"), "metadata": forged})
    assert output(unrestricted["result"]) == {"groups": None}
    # The record says so: the engine's entry in the first message, the client's others kept.
    with product.client("all") as client:
        task = call(client, "tasks/get", {"id": restricted["result"]["id"]})["result"]
        first = task["history"][0]["metadata"]
        assert first == {"agentic-rag/toolGroups": ["network"], "note": "kept"}
        task = call(client, "tasks/get", {"id": unrestricted["result"]["id"]})["result"]
        assert task["history"][0]["metadata"] == {"note": "kept"}
    # A plan's step is a task of its own, with the plan's caller's groups.
    planned = output(
        product.skill("network", "orchestrate", **plan({"id": "me", "skill": "whoami"}))
    )
    (step,) = planned["steps"]
    with product.client("all") as client:
        task = call(client, "tasks/get", {"id": step["task_id"]})["result"]
    assert task["history"][0]["metadata"]["agentic-rag/toolGroups"] == ["network"]


def test_a_follow_up_and_an_a2a_1_0_message_are_checked_too(product: Product) -> None:
    # Over A2A 1.0 as well: the same rule, with HTTP 403.
    with product.client("knowledge") as client:
        response = client.post(
            "/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "role": "ROLE_USER",
                        "messageId": uuid.uuid4().hex,
                        "parts": [{"data": {"skill": "whoami", "arguments": {}}}],
                    }
                },
            },
            headers={"A2A-Version": "1.0"},
        )
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == FORBIDDEN
    done = product.skill("network", "whoami")
    follow_up = {**skill_message("whoami"), "taskId": done["id"], "contextId": done["contextId"]}
    refused = product.send("knowledge", follow_up)
    assert refused["error"]["code"] == FORBIDDEN
    assert refused["error"]["message"].startswith("skill 'whoami' is in the group 'network'")


def tasks_of_the_tenant(product: Product) -> int:
    with product.client("all") as client:
        listed = client.get("/json/tasks", headers={"A2A-Version": "1.0"}).json()
    total: int = listed["totalSize"]
    return total


def test_every_rest_route_is_the_skill_it_stands_for_with_its_group(product: Product) -> None:
    body = declaration("http://127.0.0.1:9/", "summarize")
    with product.client("all") as client:
        agent_id = client.post("/a2a/agents/register", json=body).json()["agent_id"]
        before = client.get(f"/a2a/agents/{agent_id}").json()
    delegation = {"target_agent": agent_id, "capability_name": "summarize", "message": "hi"}
    doors = [
        ("POST", "/a2a/agents/register", body, "register_agent", "admin"),
        ("POST", f"/a2a/agents/{agent_id}/heartbeat", None, "register_agent", "admin"),
        ("DELETE", f"/a2a/agents/{agent_id}", None, "remove_agent", "admin"),
        ("GET", "/a2a/agents", None, "list_agents", "network"),
        ("GET", f"/a2a/agents/{agent_id}", None, "list_agents", "network"),
        ("GET", "/a2a/capabilities", None, "find_capability", "network"),
        ("POST", "/a2a/tasks/delegate", delegation, "delegate_task", "network"),
    ]
    tasks = tasks_of_the_tenant(product)
    with product.client("knowledge") as client:
        for method, path, json_body, skill, group in doors:
            # The same skill over A2A is refused to this key too.
            assert product.send("knowledge", skill_message(skill))["error"]["code"] == FORBIDDEN
            refused = problem(client.request(method, path, json=json_body), 403, "forbidden")
            assert refused["detail"] == (
                f"skill {skill!r} is in the group {group!r}, which this credential does not "
                f"select (its groups: knowledge); {method} {path} is that skill"
            )
            assert (refused["skill_group"], refused["granted_groups"]) == (group, ["knowledge"])
        # A delegation's result and the sessions read the tenant's tasks: no group limits them.
        assert client.get("/a2a/sessions").status_code == 200
    # A network key reads the peers and their capabilities, and may not register or remove.
    with product.client("network") as client:
        assert [a["agent_id"] for a in client.get("/a2a/agents").json()["agents"]] == [agent_id]
        assert client.get("/a2a/capabilities?capability=summarize").status_code == 200
        problem(client.post("/a2a/agents/register", json=body), 403, "forbidden")
        problem(client.delete(f"/a2a/agents/{agent_id}"), 403, "forbidden")
    # Nothing was registered, renewed, removed or delegated.
    with product.client("all") as client:
        assert [a["agent_id"] for a in client.get("/a2a/agents").json()["agents"]] == [agent_id]
        assert client.get(f"/a2a/agents/{agent_id}").json() == before
    assert tasks_of_the_tenant(product) == tasks

"""The operators' REST routes (`/a2a/...`): the seed's fields, answers that match
spec/network-openapi.json, RFC 7807 problems for every error, the discovery skills over A2A,
sessions and their cap, and a delegation through the routes to a second server.
"""

import importlib.util
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import httpx

from tests.support.live import ROOT
from tests.support.network import conforms, declaration, network_server, problem
from tests.support.rpc import call, text_message
from tests.support.security import create_key


def skill_message(skill: str, **arguments: Any) -> dict[str, Any]:
    return text_message(
        "", parts=[{"kind": "data", "data": {"skill": skill, "arguments": arguments}}]
    )


def test_the_document_is_generated_from_the_routes_models() -> None:
    script = ROOT / "scripts" / "generate_network_openapi.py"
    spec = importlib.util.spec_from_file_location("generate_network_openapi", script)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.OUTPUT.read_text() == generator.render(), f"run {script.name}"


def test_a_declared_agent_is_listed_with_its_capabilities_and_heartbeats(
    database_url: str, data_dir: Path
) -> None:
    with (
        network_server(database_url, data_dir, peers_allow_private=["127.0.0.1"]) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        body = declaration("http://127.0.0.1:9/", "summarize", "translate")
        registered = conforms(client.post("/a2a/agents/register", json=body), "Registered", 201)
        agent_id = registered["agent_id"]
        assert registered["agent"]["health_status"] == "healthy"  # registering is a heartbeat
        assert registered["heartbeat_interval_seconds"] == 30

        listed = conforms(
            client.get("/a2a/agents?capability=translate&healthy_only=true"), "AgentList"
        )
        (agent,) = listed["agents"]
        assert (
            agent["agent_type"] == "summarizer" and agent["endpoint_url"] == "http://127.0.0.1:9/"
        )
        assert agent["last_heartbeat"] is not None
        summarize = next(c for c in agent["capabilities"] if c["name"] == "summarize")
        assert summarize["parameters_schema"]["properties"] == {"text": {"type": "string"}}
        assert summarize["returns_schema"]["properties"] == {"summary": {"type": "string"}}
        assert conforms(client.get("/a2a/agents?capability=nothing"), "AgentList")["agents"] == []

        beat = conforms(client.post(f"/a2a/agents/{agent_id}/heartbeat"), "Heartbeat")
        assert beat["health_status"] == "healthy" and beat["heartbeat_timeout_seconds"] == 60
        assert beat["last_heartbeat"] >= agent["last_heartbeat"]

        # Capabilities: this agent's own (with schemas) and the healthy peers'.
        everything = conforms(client.get("/a2a/capabilities"), "CapabilityList")["capabilities"]
        own = {c["name"]: c for c in everything if c["agent_id"] == "self"}
        assert {"help", "list_agents", "find_capability"} <= set(own)
        assert "topic" in own["help"]["parameters_schema"]["properties"]
        offered = conforms(client.get("/a2a/capabilities?capability=translate"), "CapabilityList")
        assert [(c["agent_id"], c["name"]) for c in offered["capabilities"]] == [
            (agent_id, "translate")
        ]
        by_tag = conforms(client.get("/a2a/capabilities?capability=network"), "CapabilityList")
        tagged = {c["name"] for c in by_tag["capabilities"]}
        assert {"list_agents", "find_capability"} <= tagged and "help" not in tagged


def test_the_discovery_skills_answer_a2a_callers(database_url: str, data_dir: Path) -> None:
    with (
        network_server(database_url, data_dir, peers_allow_private=["127.0.0.1"]) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        body = declaration("http://127.0.0.1:9/", "summarize")
        agent_id = client.post("/a2a/agents/register", json=body).json()["agent_id"]

        def output(skill: str, **arguments: Any) -> Any:
            task = call(client, "message/send", {"message": skill_message(skill, **arguments)})
            assert task["result"]["status"]["state"] == "completed", task
            return task["result"]["artifacts"][0]["parts"][1]["data"]

        agents = output("list_agents", capability="summarize")["agents"]
        assert [a["agent_id"] for a in agents] == [agent_id]
        found = output("find_capability", capability="summarize")["capabilities"]
        assert [(c["agent_id"], c["name"]) for c in found] == [(agent_id, "summarize")]
        assert output("find_capability", capability="help")["capabilities"][0]["agent_id"] == "self"


def test_every_error_is_a_problem_document(database_url: str, data_dir: Path) -> None:
    key = create_key(database_url, "acme", ["read", "write"])
    with (
        network_server(database_url, data_dir) as us,
        httpx.Client(base_url=us.url, headers={"X-API-Key": key}, timeout=30) as client,
    ):
        unauthenticated = problem(httpx.get(f"{us.url}/a2a/agents"), 401, "unauthenticated")
        assert "X-API-Key" in unauthenticated["detail"]
        problem(
            client.post(
                "/a2a/agents/register", content=b"{", headers={"Content-Type": "application/json"}
            ),
            400,
            "invalid-json",
        )
        problem(client.post("/a2a/agents/register", content=b"{}"), 415, "unsupported-media-type")
        invalid = problem(
            client.post("/a2a/agents/register", json={"agent_type": "x", "card_url": "https://a/"}),
            422,
            "validation",
        )
        assert "exactly one of" in invalid["detail"]
        fields = problem(
            client.post(
                "/a2a/agents/register",
                json={
                    "agent_type": "x",
                    "endpoint_url": "https://a.example/",
                    "capabilities": [{}],
                },
            ),
            422,
            "validation",
        )
        assert {"field": "capabilities.0.name", "problem": "Field required"} in fields["errors"]
        problem(
            client.post("/a2a/agents/register", json={"card": {"name": "x"}}), 422, "invalid-card"
        )
        problem(client.get("/a2a/agents?healthy_only=maybe"), 422, "validation")
        problem(client.get("/a2a/tasks/abc/result?wait_seconds=-1"), 422, "validation")
        problem(client.get("/a2a/nowhere"), 404, "not-found")
        wrong = problem(client.put("/a2a/agents"), 405, "method-not-allowed")
        assert client.put("/a2a/agents").headers["allow"] == "GET"
        assert "PUT" in wrong["detail"]
        problem(client.get("/a2a/sessions/unknown"), 404, "not-found")


def test_delegation_through_the_routes(database_url: str, data_dir: Path) -> None:
    with (
        network_server(database_url, data_dir / "peer") as peer,
        network_server(database_url, data_dir / "us", peers_allow_private=["127.0.0.1"]) as us,
        httpx.Client(base_url=us.url, timeout=60) as client,
    ):
        registered = client.post("/a2a/agents/register", json={"card_url": peer.url}).json()
        accepted = conforms(
            client.post(
                "/a2a/tasks/delegate",
                json={
                    "target_agent": registered["agent_id"],
                    "capability_name": "help",
                    "parameters": {"topic": "help"},
                    "priority": 7,
                    "timeout_seconds": 30,
                },
            ),
            "DelegationAccepted",
            202,
        )
        done = conforms(
            client.get(f"/a2a/tasks/{accepted['task_id']}/result?wait_seconds=30"), "DelegatedTask"
        )
        assert done["status"] == "completed", done
        assert done["task"]["id"] == accepted["task_id"]

        problem(client.delete(f"/a2a/tasks/{accepted['task_id']}"), 409, "not-cancelable")
        problem(client.get("/a2a/tasks/unknown/result"), 404, "not-found")
        refused = problem(
            client.post(
                "/a2a/tasks/delegate", json={"target_agent": "nobody", "capability_name": "x"}
            ),
            422,
            "delegation-refused",
        )
        assert "nobody" in refused["detail"]
        problem(
            client.post("/a2a/tasks/delegate", json={"capability_name": "x", "priority": 11}),
            422,
            "validation",
        )


def test_a_session_records_its_participants_and_tasks(database_url: str, data_dir: Path) -> None:
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    with (
        network_server(database_url, data_dir) as us,
        httpx.Client(base_url=us.url, headers={"X-API-Key": alpha_key}, timeout=30) as alpha,
        httpx.Client(base_url=us.url, headers={"X-API-Key": beta_key}, timeout=30) as beta,
    ):
        first = call(alpha, "message/send", {"message": text_message("what can you do?")})["result"]
        context_id = first["contextId"]
        second = call(
            alpha, "message/send", {"message": text_message("help", contextId=context_id)}
        )["result"]
        # A message to a task names no context: the task's context is the session.
        call(alpha, "message/send", {"message": text_message("more", taskId=second["id"])})

        session = conforms(alpha.get(f"/a2a/sessions/{context_id}"), "SessionRecord")
        assert [p["kind"] for p in session["participants"]] == ["caller"]
        assert session["participants"][0]["id"].startswith("api-key:")
        assert {t["id"] for t in session["tasks"]} >= {first["id"], second["id"]}
        assert session["expires_at"] > session["last_activity"]
        listed = conforms(alpha.get("/a2a/sessions"), "SessionList")["sessions"]
        assert [s["context_id"] for s in listed] == [context_id]

        problem(beta.get(f"/a2a/sessions/{context_id}"), 404, "not-found")
        assert conforms(beta.get("/a2a/sessions"), "SessionList")["sessions"] == []


def test_messages_sent_at_once_each_enter_their_session(database_url: str, data_dir: Path) -> None:
    """Without a cap, the entries of messages that arrive together are written together
    (network/sessions.py): each one is in its session by the time it is answered, and a
    session that expired opens again as a new one."""
    with (
        network_server(database_url, data_dir, session_idle_seconds=2.0) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
        ThreadPoolExecutor(max_workers=12) as pool,
    ):

        def send(text: str, **fields: str) -> dict[str, Any]:
            answer = call(client, "message/send", {"message": text_message(text, **fields)})
            return cast(dict[str, Any], answer["result"])

        def session(context_id: str) -> dict[str, Any]:
            return conforms(client.get(f"/a2a/sessions/{context_id}"), "SessionRecord")

        first = list(pool.map(send, [f"hello {n}" for n in range(12)]))
        contexts = [task["contextId"] for task in first]
        assert len(set(contexts)) == 12
        for task in first:
            record = session(task["contextId"])
            assert [p["id"] for p in record["participants"]] == ["local:local"]
            assert [t["id"] for t in record["tasks"]] == [task["id"]]
        # Several messages in one context at once: one session, one participant, every task.
        same = list(pool.map(lambda n: send(f"again {n}", contextId=contexts[0]), range(6)))
        record = session(contexts[0])
        assert len(record["participants"]) == 1
        assert {t["id"] for t in record["tasks"]} == {first[0]["id"]} | {t["id"] for t in same}
        listed = conforms(client.get("/a2a/sessions"), "SessionList")["sessions"]
        assert sorted(s["context_id"] for s in listed) == sorted(contexts)

        time.sleep(2.2)  # every session expires
        assert conforms(client.get("/a2a/sessions"), "SessionList")["sessions"] == []
        send("back", contextId=contexts[1])
        reopened = session(contexts[1])
        opened, before = (
            datetime.fromisoformat(reopened["created_at"]),
            datetime.fromisoformat(record["last_activity"]),
        )
        assert opened > before
        listed = conforms(client.get("/a2a/sessions"), "SessionList")["sessions"]
        assert [s["context_id"] for s in listed] == [contexts[1]]


def test_the_session_cap_refuses_one_session_too_many(database_url: str, data_dir: Path) -> None:
    with (
        network_server(
            database_url,
            data_dir,
            session_limit_enabled=True,
            session_limit=2,
            session_idle_seconds=1.0,
        ) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):
        contexts = [
            call(client, "message/send", {"message": text_message("hi")})["result"]["contextId"]
            for _ in range(2)
        ]
        refused = call(client, "message/send", {"message": text_message("one more")})
        assert refused["error"]["code"] == -32013
        assert "2 active sessions" in refused["error"]["message"]
        assert "AGENTIC_RAG_SESSION_LIMIT" in refused["error"]["message"]
        # An active session may go on.
        continued = call(
            client, "message/send", {"message": text_message("again", contextId=contexts[0])}
        )
        assert continued["result"]["status"]["state"] == "completed"

        # Once idle past the expiry, sessions end and make room.
        time.sleep(1.2)
        assert conforms(client.get("/a2a/sessions"), "SessionList")["sessions"] == []
        assert "result" in call(client, "message/send", {"message": text_message("later")})


def test_a2a_callers_register_and_remove_peers(database_url: str, data_dir: Path) -> None:
    with (
        network_server(database_url, data_dir, peers_allow_private=["127.0.0.1"]) as us,
        httpx.Client(base_url=us.url, timeout=30) as client,
    ):

        def send(skill: str, **arguments: Any) -> dict[str, Any]:
            answer = call(client, "message/send", {"message": skill_message(skill, **arguments)})
            return cast(dict[str, Any], answer)

        # Registered by its card's URL (this server's own card serves as the peer's here).
        task = send("register_agent", card_url=us.url)["result"]
        assert task["status"]["state"] == "completed", task
        record = task["artifacts"][0]["parts"][1]["data"]
        listed = send("list_agents", healthy_only=False)["result"]["artifacts"][0]["parts"][1]
        assert [a["agent_id"] for a in listed["data"]["agents"]] == [record["agent_id"]]
        assert conforms(client.get(f"/a2a/agents/{record['agent_id']}"), "AgentRecord")

        # One source, not none or both: refused before a task exists.
        for arguments in ({}, {"card_url": us.url, "card": {"name": "x"}}):
            refused = send("register_agent", **arguments)
            assert refused["error"]["code"] == -32602, refused

        removed = send("remove_agent", agent_id=record["agent_id"])["result"]
        assert removed["status"]["state"] == "completed", removed
        again = send("remove_agent", agent_id=record["agent_id"])["result"]
        assert again["status"]["state"] == "failed"
        assert "no peer agent" in again["status"]["message"]["parts"][0]["text"]

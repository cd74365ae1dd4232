"""Delegation: a local task handed to a peer over A2A and followed to its end.

The peers are real processes: two instances of this server (one registered by its 0.2.1 card,
the other by its 0.3.0 card) and a peer on the official a2a-sdk 1.x server (protocol 1.0).
`delegate_task` is a durable local task whose id is the correlation id; it mirrors the remote
task's progress and artifacts, pauses when the peer asks for input and forwards the answer,
tells its callbacks of its changes, is referenced by the caller's session, sends the
credentials configured for the peer under its tenant (and no other tenant's), times out with
a reason, retries a peer that is unavailable, fails over to another peer, cancels the remote
task when it is canceled, and continues after its worker dies.
"""

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.databases import create_database
from tests.support.live import free_port, serve_in_thread
from tests.support.peers.network import (
    Delegator,
    Peers,
    delegator,
    delegator_process,
    remote_task,
    result_data,
    status_text,
)
from tests.support.rpc import call
from tests.support.security import create_key


def card_of(url: str, path: str = "/.well-known/agent-card.json") -> dict[str, Any]:
    card: dict[str, Any] = httpx.get(url + path, timeout=10).json()
    return card


def card_of_0_3(url: str) -> dict[str, Any]:
    """Our card as a 0.3 peer shows it: without the 1.0 interfaces (a peer that speaks 0.3
    only), registered inline."""
    card = card_of(url)
    card.pop("supportedInterfaces")
    card["capabilities"].pop("extendedAgentCard", None)
    return card


@pytest.mark.parametrize(
    ("peer", "card_path", "version"),
    [
        ("ours_a", "/.well-known/agent.json", "0.2.1"),
        ("ours_b", None, "0.3.0"),
        ("ours_b", "/.well-known/agent-card.json", "1.0"),
        ("sdk", "/.well-known/agent-card.json", "1.0"),
    ],
)
def test_a_task_is_delegated_to_a_peer_in_its_protocol_version(
    network: Peers, local: Delegator, peer: str, card_path: str | None, version: str
) -> None:
    url = getattr(network, peer)
    if card_path is None:
        peer_id = local.register(card=card_of_0_3(url))
    else:
        peer_id = local.register(card_url=url + card_path)
    agents = local.client.get("/a2a/agents").json()["agents"]
    assert [a["protocol_version"] for a in agents] == [version]

    task = local.delegate(target_agent=peer_id, capability_name="conformance", message="task 3 20")

    result = result_data(task)
    assert result["delegation_id"] == task["id"]  # the local task's id is the correlation id
    assert result["peer_id"] == peer_id
    assert result["text"] == "done after 3 updates"
    assert result["state"] == "completed"
    # The remote task's progress became the local task's, and its artifact a partial one.
    name = agents[0]["agent_type"]
    messages = local.messages(task["id"])
    assert messages[0] == f"delegated to peer {name} as task {result['remote_task_id']}"
    assert [m for m in messages if "step" in m] == [f"{name}: step {n} of 3" for n in (1, 2, 3)]
    assert task["artifacts"][0]["parts"][0]["text"] == "done after 3 updates"


def test_a_delegation_over_the_rest_routes_is_awaited_with_its_result(
    network: Peers, local: Delegator
) -> None:
    peer_id = local.register(card_url=network.ours_a)
    body = {
        "target_agent": "best",
        "capability_name": "script",
        "parameters": {"text": "task 2 20"},
        "priority": 7,
        "timeout_seconds": 30,
    }
    accepted = local.client.post("/a2a/tasks/delegate", json=body)
    assert accepted.status_code == 202, accepted.text
    task_id = accepted.json()["task_id"]

    done = local.client.get(f"/a2a/tasks/{task_id}/result", params={"wait_seconds": 30})

    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    result = result_data(done.json()["task"])
    assert (result["peer_id"], result["text"]) == (peer_id, "done after 2 updates")
    # The peer received the arguments as a DataPart naming its skill, with the priority.
    first = remote_task(network.ours_a, result["remote_task_id"])["history"][0]
    assert first["parts"][0]["data"] == {"skill": "script", "arguments": {"text": "task 2 20"}}
    assert first["metadata"] == {"priority": 7, "correlationId": task_id}


def test_a_delegation_that_outlives_its_timeout_fails_with_a_reason_and_cancels_the_remote_task(
    network: Peers, local: Delegator
) -> None:
    peer_id = local.register(card_url=network.ours_a)

    task = local.delegate(
        target_agent=peer_id,
        capability_name="conformance",
        message="task 100 100",
        timeout_seconds=1,
    )

    assert task["status"]["state"] == "failed"
    reason = status_text(task)
    assert reason.startswith("timed out after 1 s: task ")
    remote_id = reason.split("task ", 1)[1].split()[0]
    assert remote_task(network.ours_a, remote_id)["status"]["state"] == "canceled"


class FlakyProxy:
    """A real HTTP proxy in front of a peer that answers its first JSON-RPC call 503."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.refused = 0
        self.forwarded: list[str] = []
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self._rpc, methods=["POST"])])

    async def _rpc(self, request: Request) -> Response:
        body = await request.body()
        with self._lock:
            if self.refused == 0:
                self.refused += 1
                return Response("busy", status_code=503, headers={"Retry-After": "0"})
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(
                self.upstream + "/", content=body, headers={"Content-Type": "application/json"}
            )
        self.forwarded.append(answer.json().get("result", {}).get("kind", "error"))
        return Response(answer.content, answer.status_code, media_type="application/json")


def test_a_peer_that_answers_503_is_tried_again(network: Peers, local: Delegator) -> None:
    proxy = FlakyProxy(network.ours_a)
    with serve_in_thread(proxy.app()) as proxy_url:
        # The peer's own card, but reached through the proxy (which does not stream).
        card = card_of(network.ours_a, "/.well-known/agent.json")
        card.update(url=proxy_url + "/", capabilities={"streaming": False})
        peer_id = local.register(card=card)

        task = local.delegate(
            target_agent=peer_id, capability_name="conformance", message="task 2 20"
        )

    assert result_data(task)["text"] == "done after 2 updates"
    assert proxy.refused == 1
    assert proxy.forwarded[0] == "task"  # the retried message/send, then tasks/get polls
    retried = [m for m in local.messages(task["id"]) if "trying again" in m]
    assert retried and "HTTP 503" in retried[0]


def test_a_canceled_delegation_cancels_the_remote_task(network: Peers, local: Delegator) -> None:
    peer_id = local.register(card_url=network.sdk)
    task = local.delegate(
        blocking=False, target_agent=peer_id, capability_name="conformance", message="task 100 100"
    )
    remote_id = local.wait_for_message(task["id"], r"as task (\S+)")[1]
    local.wait_for_message(task["id"], r"step 2 of 100")

    canceled = local.cancel(task["id"])

    assert canceled["status"]["state"] == "canceled"
    peer_tasks = httpx.Client(base_url=network.sdk, timeout=10)
    answer = peer_tasks.post(
        "/",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": remote_id}},
        headers={"A2A-Version": "1.0"},
    ).json()
    assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_a_peer_that_never_accepts_is_passed_over_for_another(
    network: Peers, local: Delegator
) -> None:
    healthy = local.register(card_url=network.ours_b)
    dead_card = card_of(network.ours_a, "/.well-known/agent.json")
    dead_card.update(url=f"http://127.0.0.1:{free_port()}/", name="dead")  # nothing listens
    dead = local.register(card=dead_card)

    task = local.delegate(
        target_agent=dead, capability_name="conformance", message="task 1 0", retries=1
    )

    result = result_data(task)
    assert result["peer_id"] == healthy
    passed_over = [m for m in local.messages(task["id"]) if "did not accept" in m]
    assert passed_over == [m for m in passed_over if m.startswith("peer dead did not accept")]
    assert len(passed_over) == 1 and "ConnectError" in passed_over[0]


def test_tenants_cannot_see_each_others_delegations(
    network: Peers, database_url: str, data_dir: Path
) -> None:
    acme_key = create_key(database_url, "acme", ["read", "write"])
    globex_key = create_key(database_url, "globex", ["read", "write"])
    with delegator(database_url, data_dir) as url:
        acme, globex = Delegator(url, acme_key), Delegator(url, globex_key)
        peer_id = acme.register(card_url=network.ours_a)
        task = acme.delegate(target_agent=peer_id, capability_name="conformance", message="hi")
        assert result_data(task)["text"] == "hi"

        unseen = globex.client.get(f"/a2a/tasks/{task['id']}/result")
        not_found = globex.client.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task["id"]}},
        ).json()
        refused = globex.client.post(
            "/a2a/tasks/delegate",
            json={"target_agent": peer_id, "capability_name": "conformance"},
        )
        seen = acme.client.get(f"/a2a/tasks/{task['id']}/result")
        acme.close()
        globex.close()
    assert unseen.status_code == 404
    assert unseen.headers["content-type"] == "application/problem+json"
    assert not_found["error"]["code"] == -32001
    assert refused.status_code == 422  # globex has no such peer
    assert seen.status_code == 200


def test_a_delegation_whose_worker_dies_is_followed_to_its_end_by_another(
    network: Peers, database_url: str, data_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    doomed = delegator_process(port, database_url, tmp_path / "doomed")
    try:
        on_doomed = Delegator(f"http://127.0.0.1:{port}")
        peer_id = on_doomed.register(card_url=network.ours_a)
        task = on_doomed.delegate(
            blocking=False,
            target_agent=peer_id,
            capability_name="conformance",
            message="task 10 150",
        )
        remote_id = on_doomed.wait_for_message(task["id"], r"as task (\S+)")[1]
        on_doomed.close()
        os.kill(doomed.pid, signal.SIGKILL)  # no shutdown code runs
        doomed.wait(timeout=10)

        with delegator(database_url, data_dir, worker_sweep_seconds=0.1) as url:
            survivor = Delegator(url)
            done = survivor.client.get(
                f"/a2a/tasks/{task['id']}/result", params={"wait_seconds": 60}
            )
            messages = survivor.messages(task["id"])
            survivor.close()
    finally:
        doomed.kill()
        doomed.wait(timeout=10)
    assert done.status_code == 200, done.text
    result = result_data(done.json()["task"])
    assert result["remote_task_id"] == remote_id  # followed, not sent again
    assert result["text"] == "done after 10 updates"
    assert any(m.startswith(f"following task {remote_id}") for m in messages)


def test_a_delegation_is_referenced_by_the_callers_session(
    network: Peers, local: Delegator
) -> None:
    peer_id = local.register(card_url=network.ours_a)

    task = local.delegate(target_agent=peer_id, capability_name="conformance", message="hi")

    assert result_data(task)["text"] == "hi"
    session = local.client.get(f"/a2a/sessions/{task['contextId']}").json()
    assert session["delegations"] == [{"task_id": task["id"], "peer_id": peer_id}]
    assert [(p["kind"], p["id"]) for p in session["participants"]] == [
        ("caller", "local:local"),
        ("peer", peer_id),
    ]


def test_a_peer_that_asks_for_input_pauses_the_delegation_until_the_caller_answers(
    network: Peers, local: Delegator
) -> None:
    peer_id = local.register(card_url=network.ours_a)
    name = local.client.get(f"/a2a/agents/{peer_id}").json()["agent_type"]

    asked = local.delegate(target_agent=peer_id, capability_name="conformance", message="ask")

    assert asked["status"]["state"] == "input-required"
    assert status_text(asked) == (f"peer {name} asks: What should I answer? Reply on this task.")
    answer = {
        "role": "user",
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "taskId": asked["id"],
        "parts": [{"kind": "text", "text": "forty-two"}],
    }
    reply = call(local.client, "message/send", {"message": answer})
    assert "result" in reply, reply
    done = reply["result"]

    result = result_data(done)
    assert result["text"] == "you said: forty-two"
    assert result["delegation_id"] == asked["id"]
    remote = remote_task(network.ours_a, result["remote_task_id"])
    assert remote["status"]["state"] == "completed"
    assert [p["text"] for p in remote["history"][-1]["parts"]] == ["forty-two"]


class Hooks:
    """A real webhook receiver: the notifications each path got, with their headers."""

    def __init__(self) -> None:
        self.received: dict[str, list[tuple[dict[str, str], dict[str, Any]]]] = {}
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{name}", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.received.setdefault(request.path_params["name"], []).append(
                (dict(request.headers), body)
            )
        return Response(status_code=204)

    def until_final(self, name: str) -> list[tuple[dict[str, str], dict[str, Any]]]:
        deadline = time.monotonic() + 30
        while not any(b["status"]["state"] == "completed" for _, b in self.received.get(name, [])):
            assert time.monotonic() < deadline, f"{name}: {self.received.get(name)}"
            time.sleep(0.05)
        return self.received[name]


def test_callbacks_hear_of_every_status_change_and_of_the_result(
    network: Peers, local: Delegator
) -> None:
    hooks = Hooks()
    peer_id = local.register(card_url=network.ours_a)
    with serve_in_thread(hooks.app()) as hooks_url:
        body = {
            "target_agent": peer_id,
            "capability_name": "conformance",
            "message": "task 2 20",
            "statusCallbackUrl": f"{hooks_url}/status",
            "resultWebhookUrl": f"{hooks_url}/result",
        }
        accepted = local.client.post("/a2a/tasks/delegate", json=body)
        assert accepted.status_code == 202, accepted.text
        task_id = accepted.json()["task_id"]
        status, result = hooks.until_final("status"), hooks.until_final("result")
    jwks = local.client.get("/.well-known/jwks.json").json()

    # The status callback heard of the progress (working, with its message) and the end.
    working = [status_text(b) for _, b in status if b["status"]["state"] == "working"]
    assert any(t.startswith("delegated to peer") for t in working)
    assert any(t.endswith("step 2 of 2") for t in working)
    # The result webhook got the final task only, with its result.
    assert [b["status"]["state"] for _, b in result] == ["completed"]
    assert result_data(result[0][1])["text"] == "done after 2 updates"
    for (headers, notified), url in [
        *((n, f"{hooks_url}/status") for n in status),
        (result[0], f"{hooks_url}/result"),
    ]:
        assert notified["id"] == task_id
        token = headers["authorization"].removeprefix("Bearer ")
        kid = jwt.get_unverified_header(token)["kid"]
        key = next(k for k in jwks["keys"] if k["kid"] == kid)
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["ES256"], audience=url)
        assert claims["taskId"] == task_id


class GuardedCard:
    """A peer's card served only to requests that carry its key, as a peer that requires
    credentials for everything would: it records the key each request came with."""

    def __init__(self, card: dict[str, Any], key: str) -> None:
        self.card, self.key = card, key
        self.keys: list[str | None] = []

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/.well-known/agent-card.json", self._card)])

    async def _card(self, request: Request) -> Response:
        given = request.headers.get("x-api-key")
        self.keys.append(given)
        if given != self.key:
            return Response(status_code=401)
        return Response(json.dumps(self.card), media_type="application/json")


def test_a_peers_credentials_are_sent_for_their_tenant_alone(
    postgres_dsn: str, database_url: str, data_dir: Path
) -> None:
    """Two tenants of one delegator register the same peer; the credentials configured for
    the peer's origin under tenant alpha are alpha's: beta's delegation reaches the peer
    without them (and is refused), and so do its card fetches."""
    peer_database = create_database(postgres_dsn)
    key = create_key(peer_database, "acme", ["read", "write"])
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    with delegator(peer_database, data_dir / "peer", require_auth=True) as peer_url:
        without = Delegator(peer_url)
        assert without.client.post("/", json={}).status_code == 401  # it requires credentials
        without.close()
        guarded = GuardedCard(card_of(peer_url), key)
        with serve_in_thread(guarded.app()) as card_url:
            credentials = {"alpha": {peer_url: {"X-API-Key": key}, card_url: {"X-API-Key": key}}}
            with delegator(
                database_url, data_dir / "us", peer_credentials=credentials, require_auth=True
            ) as url:
                alpha, beta = Delegator(url, alpha_key), Delegator(url, beta_key)
                task = alpha.delegate(
                    target_agent=alpha.register(card_url=peer_url),
                    capability_name="conformance",
                    message="hi",
                )
                refused = beta.delegate(
                    target_agent=beta.register(card_url=peer_url),
                    capability_name="conformance",
                    message="hi",
                    retries=0,
                )
                guarded_url = card_url + "/.well-known/agent-card.json"
                assert alpha.register(card_url=guarded_url)
                unfetched = beta.client.post("/a2a/agents/register", json={"card_url": guarded_url})
                alpha.close()
                beta.close()
        # The peer ran alpha's for the key's tenant.
        with httpx.Client(base_url=peer_url, headers={"X-API-Key": key}) as acme:
            remote = call(acme, "tasks/get", {"id": result_data(task)["remote_task_id"]})

    assert result_data(task)["text"] == "hi"
    assert remote["result"]["status"]["state"] == "completed"
    assert refused["status"]["state"] == "failed"
    assert "HTTP 401" in status_text(refused)
    assert unfetched.status_code == 502, unfetched.text
    assert "HTTP 401" in unfetched.json()["detail"]
    assert guarded.keys == [key, None]  # alpha's fetch carried the key, beta's nothing

"""A2A 1.0 with credentials (docs/a2a-notes.md §13, docs/security.md): ListTasks and GetTask
see only the caller's tenant, scopes are enforced on 1.0 methods, and the extended card is
served as a 1.0 card to an authenticated caller."""

import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from conformance.skills import conformance_registry
from tests.support.live import live_server
from tests.support.security import create_key


def rpc(url: str, key: str | None, method: str, params: dict[str, Any]) -> httpx.Response:
    headers = {"A2A-Version": "1.0"} | ({"X-API-Key": key} if key else {})
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers=headers, timeout=30)


def send(url: str, key: str, text: str) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    task: dict[str, Any] = rpc(url, key, "SendMessage", {"message": message}).json()["result"][
        "task"
    ]
    return task


def test_tenants_scopes_and_the_extended_card(database_url: str, data_dir: Path) -> None:
    with live_server(conformance_registry(), database_url=database_url, data_dir=data_dir) as s:
        acme = create_key(database_url, "acme", ["read", "write"])
        globex = create_key(database_url, "globex", ["read", "write"])
        reader = create_key(database_url, "acme", ["read"])
        deadline = time.monotonic() + 10
        while rpc(s.url, None, "ListTasks", {}).status_code != 401:
            assert time.monotonic() < deadline, "the server stayed open after keys were created"
            time.sleep(0.2)

        task = send(s.url, acme, "acme's")
        mine = rpc(s.url, acme, "ListTasks", {}).json()["result"]
        assert [t["id"] for t in mine["tasks"]] == [task["id"]]
        theirs = rpc(s.url, globex, "ListTasks", {}).json()["result"]
        assert theirs["tasks"] == [] and theirs["totalSize"] == 0
        hidden = rpc(s.url, globex, "GetTask", {"id": task["id"]}).json()
        assert hidden["error"]["code"] == -32001

        refused = rpc(s.url, reader, "SendMessage", {"message": {"parts": [{"text": "x"}]}})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == -32011
        assert rpc(s.url, reader, "GetTask", {"id": task["id"]}).status_code == 200

        public = httpx.get(s.url + "/.well-known/agent-card.json").json()
        assert public["capabilities"]["extendedAgentCard"] is True
        assert public["securityRequirements"]
        card = rpc(s.url, acme, "GetExtendedAgentCard", {}).json()["result"]
        assert card["capabilities"]["extendedAgentCard"] is True
        assert card["supportedInterfaces"][0] == {
            "url": s.url + "/",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
        assert {skill["id"] for skill in card["skills"]} >= {"script"}
        rest = httpx.get(
            s.url + "/json/extendedAgentCard",
            headers={"A2A-Version": "1.0", "X-API-Key": acme},
            timeout=30,
        )
        assert rest.json()["name"] == card["name"]

"""DNS rebinding and cross-site requests, on every door of the app (security/host_guard.py):
a request whose Host names another server is answered 421, one from a page of another site 403,
before authentication and routing; the server's own names and pages are served. Each door in
open local mode and in authenticated mode, on real servers (uvicorn, PostgreSQL)."""

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentic_rag.config import Settings
from agentic_rag.security.host_guard import ServedNames
from conformance.skills import conformance_registry
from tests.support.databases import create_database
from tests.support.live import LiveServer, live_server
from tests.support.rpc import text_message
from tests.support.security import create_key

V1 = {"A2A-Version": "1.0"}
MCP = {"MCP-Protocol-Version": "2025-11-25", "Accept": "application/json"}


def rpc(method: str, params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@dataclass(frozen=True)
class Door:
    """A request to one door, and what its answer is when the door serves it."""

    method: str
    path: str
    served: Callable[[httpx.Response], bool]
    body: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


DOORS = {
    "a2a-0.2.1": Door(
        "POST",
        "/",
        lambda r: r.json()["result"]["status"]["state"] == "completed",
        rpc("message/send", {"message": text_message("hi")}),
    ),
    # A method 0.2.1 lacks: the task's absence is A2A's own answer.
    "a2a-0.3": Door(
        "POST",
        "/",
        lambda r: r.json()["error"]["code"] == -32001,
        rpc("tasks/pushNotificationConfig/list", {"id": "no-such-task"}),
    ),
    "a2a-1.0-jsonrpc": Door(
        "POST", "/", lambda r: "tasks" in r.json()["result"], rpc("ListTasks", {}), V1
    ),
    "a2a-1.0-http-json": Door("GET", "/json/tasks", lambda r: "tasks" in r.json(), headers=V1),
    "rest": Door("GET", "/a2a/agents", lambda r: isinstance(r.json(), dict | list)),
    "metrics": Door("GET", "/metrics", lambda r: "# HELP" in r.text),
    "healthz": Door("GET", "/healthz", lambda r: r.json()["status"] == "ok"),
    "readyz": Door("GET", "/readyz", lambda r: r.json()["status"] == "ready"),
    "agent-card": Door("GET", "/.well-known/agent-card.json", lambda r: bool(r.json()["name"])),
    "home": Door("GET", "/", lambda r: "/mcp" in r.text),
    "oauth-metadata": Door(
        "GET", "/.well-known/oauth-protected-resource/mcp", lambda r: bool(r.json()["resource"])
    ),
    "mcp": Door(
        "POST", "/mcp", lambda r: "tools" in r.json()["result"], rpc("tools/list", {}), MCP
    ),
}


@dataclass
class Mode:
    server: LiveServer
    credentials: dict[str, str]

    @property
    def port(self) -> int:
        return self.server.settings.port

    def request(self, door: Door, **headers: str) -> httpx.Response:
        return httpx.request(
            door.method,
            self.server.url + door.path,
            json=door.body,
            headers={**(door.headers or {}), **self.credentials, **headers},
            timeout=30,
        )


@pytest.fixture(scope="module")
def open_mode(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mode]:
    """A server in open local mode: what `make run` starts."""
    with live_server(
        conformance_registry(),
        database_url=create_database(postgres_dsn),
        data_dir=tmp_path_factory.mktemp("open"),
    ) as server:
        yield Mode(server, {})


@pytest.fixture(scope="module")
def authenticated(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mode]:
    """A server that requires credentials; its requests carry a key with every scope."""
    database = create_database(postgres_dsn)
    with live_server(
        conformance_registry(),
        database_url=database,
        data_dir=tmp_path_factory.mktemp("authenticated"),
        require_auth=True,
    ) as server:
        key = create_key(database, "acme", ["read", "write", "admin"])
        yield Mode(server, {"X-API-Key": key})


@pytest.fixture(params=["open", "authenticated"])
def mode(request: pytest.FixtureRequest) -> Mode:
    fixture = "open_mode" if request.param == "open" else "authenticated"
    served: Mode = request.getfixturevalue(fixture)
    return served


def refusal(response: httpx.Response, status: int, kind: str) -> str:
    """The refusal's detail, once its status and problem type are checked."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"] == f"urn:agentic-rag:problem:{kind}"
    assert problem["status"] == status
    detail: str = problem["detail"]
    return detail


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
def test_a_rebound_name_is_refused_on_every_door(mode: Mode, door: Door) -> None:
    rebound = f"evil.example:{mode.port}"
    answer = mode.request(door, Host=rebound, Origin=f"http://{rebound}")
    detail = refusal(answer, 421, "misdirected")
    assert "'evil.example:" in detail and "AGENTIC_RAG_ALLOWED_HOSTS" in detail


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://localhost:1", "null"], ids=["site", "port", "null"]
)
def test_a_page_of_another_origin_is_refused_on_every_door(
    mode: Mode, door: Door, origin: str
) -> None:
    """Another site, another web application of this machine (another port), a sandboxed frame."""
    answer = mode.request(door, Host=f"localhost:{mode.port}", Origin=origin)
    assert repr(origin) in refusal(answer, 403, "foreign-origin")


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:{port}", "http://localhost:{port}"),
        ("127.0.0.1:{port}", None),
        ("[::1]:{port}", "http://[::1]:{port}"),
        ("LOCALHOST.:{port}", None),
        ("10.1.2.3:8000", None),  # an address: what a probe or a port mapping sends
    ],
    ids=["localhost", "loopback-address", "ipv6", "spelled", "address"],
)
def test_the_servers_own_names_and_pages_are_served(
    mode: Mode, door: Door, host: str, origin: str | None
) -> None:
    headers = {"Host": host.format(port=mode.port)}
    if origin is not None:
        headers["Origin"] = origin.format(port=mode.port)
    answer = mode.request(door, **headers)
    assert answer.status_code == 200, answer.text
    assert door.served(answer)


def test_the_host_is_checked_before_credentials(authenticated: Mode) -> None:
    """No credential (a browser sends none): the rebound name is refused, not challenged."""
    answer = httpx.post(
        authenticated.server.url + "/",
        json=rpc("message/send", {"message": text_message("hi")}),
        headers={"Host": "evil.example"},
    )
    refusal(answer, 421, "misdirected")
    assert "www-authenticate" not in answer.headers


def test_a_malformed_or_repeated_host_is_refused(open_mode: Mode) -> None:
    port = open_mode.port
    for host in (f"evil example:{port}", f"localhost:{port}@evil.example", "localhost:99999"):
        answer = open_mode.request(DOORS["healthz"], Host=host)
        refusal(answer, 421, "misdirected")
    # Two Host headers, the second foreign (httpx refuses to send them).
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(
            f"GET /healthz HTTP/1.1\r\nHost: localhost:{port}\r\nHost: evil.example\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 421 "), answer
    assert b"urn:agentic-rag:problem:misdirected" in answer


def test_a_proxys_names_and_the_public_urls_site_are_served(
    postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with live_server(
        conformance_registry(),
        database_url=create_database(postgres_dsn),
        data_dir=tmp_path_factory.mktemp("proxied"),
        public_url="https://rag.example.com/",
        allowed_hosts=["rag-internal.lan"],
    ) as server:
        mode = Mode(server, {})
        door = DOORS["a2a-1.0-jsonrpc"]
        for host, origin in [
            ("rag.example.com", "https://rag.example.com"),  # the client's Host, passed on
            ("127.0.0.1:8000", "https://rag.example.com"),  # a proxy that sets its own Host
            ("rag-internal.lan:8080", "http://rag-internal.lan:8080"),
        ]:
            answer = mode.request(door, Host=host, Origin=origin)
            assert answer.status_code == 200 and door.served(answer), (host, origin)
        refusal(mode.request(door, Host="evil.example"), 421, "misdirected")
        refused = mode.request(door, Host="rag.example.com", Origin="https://evil.example")
        refusal(refused, 403, "foreign-origin")


def test_the_allow_list_of_a_server_bound_to_every_address() -> None:
    """--host 0.0.0.0 (--insecure, or credentials): it cannot know its names, so only
    localhost, addresses, and the names it is given; its own bind address names nothing."""
    anywhere = ServedNames.of(Settings(host="0.0.0.0", insecure=True))
    assert anywhere.names == {"localhost"} and anywhere.page_hosts == set()
    named = ServedNames.of(
        Settings(
            host="::",
            public_url="https://RAG.example.com:8443/a2a",
            allowed_hosts="proxy.lan, Box.Local.",
        )
    )
    assert named.names == {"localhost", "rag.example.com", "proxy.lan", "box.local"}
    assert named.page_hosts == {"rag.example.com", "proxy.lan", "box.local"}
    assert ServedNames.of(Settings(host="agent.lan")).names == {"localhost", "agent.lan"}


@pytest.mark.parametrize(
    ("typed", "read"),
    [("rag.example.com", ["rag.example.com"]), ('["A.lan", "b.lan."]', ["a.lan", "b.lan"])],
)
def test_the_allowed_hosts_setting_reads_names(
    monkeypatch: pytest.MonkeyPatch, typed: str, read: list[str]
) -> None:
    monkeypatch.setenv("AGENTIC_RAG_ALLOWED_HOSTS", typed)
    assert Settings().allowed_hosts == read

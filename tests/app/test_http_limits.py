"""What one connection may hold of the server (`serve`'s HTTP limits, docs/security.md, Limits):
a request head over the size limit is refused before it is kept, one that does not arrive in
time (a connection that sends nothing, a head sent a byte at a time) loses its connection, and
neither limit cuts a request that is slow to answer. The server runs with `serve`'s HTTP
options (serving.http_options), with small limits; every socket read is bounded, so a
connection held open fails the test."""

import http.client
import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

from conformance.skills import conformance_registry
from tests.support.databases import create_database
from tests.support.live import live_server
from tests.support.rpc import text_message

MAX_HEAD = 16 * 1024
HEAD_SECONDS = 2
CLIENT_SECONDS = 30  # far past the server's limits: a connection held this long fails


@pytest.fixture(scope="module")
def port(postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with live_server(
        conformance_registry(),
        database_url=create_database(postgres_dsn),
        data_dir=tmp_path_factory.mktemp("data"),
        http_max_head_bytes=MAX_HEAD,
        http_head_timeout_seconds=HEAD_SECONDS,
    ) as server:
        yield server.settings.port


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=CLIENT_SECONDS)


def head(port: int, *headers: str) -> bytes:
    lines = ["GET /healthz HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers]
    return ("\r\n".join(lines) + "\r\n").encode()


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout if it never does)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:  # closed with our bytes unread: closed all the same
        pass
    return received


def test_a_head_over_the_limit_is_answered_431(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(head(port, f"X-Padding: {'a' * (MAX_HEAD + 4096)}") + b"\r\n")
        answer = until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert answer.endswith(b"the request head (request line and headers) is too large")


def test_an_endless_head_is_refused_once_over_the_limit_not_kept(port: int) -> None:
    piece = b"a" * 65536
    refused_while_sending = False
    with connect(port) as sock:
        sock.sendall(head(port) + b"X-Padding: ")
        try:
            for _ in range(128):  # 8 MB, and the head still not ended
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            refused_while_sending = True
        answer = until_closed(sock)
    assert refused_while_sending or answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    with connect(port) as sock:
        assert until_closed(sock) == b""


def test_a_head_sent_a_byte_at_a_time_loses_its_connection_with_408(port: int) -> None:
    drip = head(port, *(f"X-Drip-{i}: {i}" for i in range(1000)))
    deadline = time.monotonic() + CLIENT_SECONDS
    with connect(port) as sock:
        for byte in drip:  # slowloris: a byte every 0.1 s, for far longer than the limit
            assert time.monotonic() < deadline, "the connection is still open"
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            if select.select([sock], [], [], 0.1)[0]:  # the server spoke, or closed
                break
        answer = until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]


def test_a_request_slower_than_the_head_limit_is_answered_and_its_connection_kept(
    port: int,
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_SECONDS)
    slow = {"message": text_message(f"task 2 {HEAD_SECONDS * 1000}")}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": slow})
    connection.request("POST", "/", body, {"Content-Type": "application/json"})
    answer = json.loads(connection.getresponse().read())
    assert answer["result"]["status"]["state"] == "completed"
    used = connection.sock
    for _ in range(2):
        connection.request("GET", "/healthz")
        assert connection.getresponse().read() and connection.sock is used
    connection.close()

"""The SSRF guard: URL shapes, address rules, the allow-list, pinning, redirects and TLS."""

import datetime
import ssl
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from agentic_rag.security.ssrf import MAX_REDIRECTS, SSRFGuard, UnsafeURLError
from tests.support.live import serve

hits: dict[str, int] = {}


async def echo(request: Request) -> Response:
    return JSONResponse(
        {
            "method": request.method,
            "headers": dict(request.headers),
            "body": (await request.body()).decode(),
        }
    )


async def redirect(request: Request) -> Response:
    status = int(request.query_params.get("status", "302"))
    return RedirectResponse(request.query_params["to"], status_code=status)


async def loop(request: Request) -> Response:
    hits["loop"] = hits.get("loop", 0) + 1
    return RedirectResponse("/loop", status_code=302)


app = Starlette(
    routes=[
        Route("/echo", echo, methods=["GET", "POST"]),
        Route("/redirect", redirect, methods=["GET", "POST"]),
        Route("/loop", loop),
    ]
)

LOCAL = SSRFGuard(allow=["127.0.0.1"])


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://127.1/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://172.31.255.254/", "private"),
        ("http://192.168.1.1:8080/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://100.64.0.1/", "CGNAT"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://0/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
        ("http://[::1]/", "loopback"),
        ("http://[::]/", "unspecified"),
        ("http://[fc00::1]/", "unique local"),
        ("http://[fd12:3456::1]/", "unique local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[ff02::1]/", "multicast"),
        ("http://[::ffff:10.0.0.1]/", "private (IPv4 10.0.0.1 embedded in IPv6)"),
        ("http://[::ffff:127.0.0.1]/", "loopback (IPv4 127.0.0.1 embedded"),
        ("http://[::ffff:a9fe:a9fe]/", "link-local (IPv4 169.254.169.254 embedded"),
        ("http://[::127.0.0.1]/", "loopback (IPv4 127.0.0.1 embedded"),
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local (IPv4 169.254.169.254 embedded"),
        ("http://[2002:c0a8:101::1]/", "private (IPv4 192.168.1.1 embedded"),
        # The forms getaddrinfo (inet_aton) and browsers read as IPv4 addresses.
        ("http://2130706433/", "loopback"),
        ("http://0x7f000001/", "loopback"),
        ("http://0x7f.1/", "loopback"),
        ("http://0177.0.0.1/", "malformed URL"),  # httpx itself refuses octal dotted quads
        ("http://0177.0.1/", "loopback"),
        ("http://017700000001/", "loopback"),
        ("http://127.0.0.1./", "loopback"),
        ("http://0xA9.0xFE.0xA9.0xFE/", "link-local"),
        ("http://167772161/", "private"),
        ("http://10.1/", "private"),
        ("http://1.2.3.4.5/", "malformed IPv4 address"),
        ("http://256.1.1.1/", "malformed URL"),
        ("http://256.1.1/", "out of range"),
        ("http://1.2.3.0x100000000/", "out of range"),
        ("http://www.example.123/", "malformed IPv4 address"),
        ("http://[fe80::1%25eth0]/", "zone identifiers"),
        ("http://ex%41mple.com/", "malformed host name"),
        ("http://user:secret@example.com/", "credentials in the URL"),
        ("http://user@example.com/", "credentials in the URL"),
        ("http://example.com\\@127.0.0.1/", "credentials in the URL"),
        ("ftp://example.com/file", "scheme 'ftp' is not allowed"),
        ("file:///etc/passwd", "scheme 'file' is not allowed"),
        ("gopher://example.com/", "scheme 'gopher' is not allowed"),
        ("//example.com/", "scheme '(none)' is not allowed"),
        ("http:///path", "no host"),
        ("http://", "no host"),
        ("http://example.com:0/", "port 0 is out of range"),
        ("http://example.com:99999/", "port 99999 is out of range"),
    ],
)
def test_check_shape_refuses(url: str, rule: str) -> None:
    with pytest.raises(UnsafeURLError, match="URL refused") as caught:
        SSRFGuard().check_shape(url)
    assert rule in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook?sig=abc",
        "http://93.184.215.14/",
        "http://8.8.8.8:8080/x",
        "http://134744072/",  # 8.8.8.8
        "https://[2606:4700:4700::1111]/",
        "http://[::ffff:8.8.8.8]/",
        "http://[64:ff9b::808:808]/",
        "https://münchen.de/",
        "https://EXAMPLE.com./",
        "http://my_host.example/",
    ],
)
def test_check_shape_accepts_public(url: str) -> None:
    SSRFGuard().check_shape(url)


def test_messages_name_rule_and_address_not_secrets() -> None:
    with pytest.raises(UnsafeURLError) as caught:
        SSRFGuard().check_shape("http://2130706433/hook?token=s3cret")
    assert str(caught.value) == (
        "URL refused (host '2130706433', address 127.0.0.1): loopback address"
    )
    assert (caught.value.rule, caught.value.address) == ("loopback address", "127.0.0.1")

    with pytest.raises(UnsafeURLError) as caught:
        SSRFGuard().check_shape("http://admin:hunter2@example.com/")
    assert "hunter2" not in str(caught.value)


def test_allow_list_exempts_addresses_networks_and_names() -> None:
    guard = SSRFGuard(allow=["127.0.0.1", "10.0.0.0/8", "Hooks.Internal.", "fd00::/8"])
    guard.check_shape("http://127.0.0.1:9000/")
    guard.check_shape("http://2130706433/")
    guard.check_shape("http://10.20.30.40/")
    guard.check_shape("http://[::ffff:10.0.0.1]/")
    guard.check_shape("http://[fd00::5]/")
    guard.check_shape("http://hooks.internal/")
    with pytest.raises(UnsafeURLError, match="private"):
        guard.check_shape("http://192.168.0.1/")
    with pytest.raises(UnsafeURLError, match="loopback"):
        guard.check_shape("http://127.0.0.2/")
    # Only the address rules are exempt.
    with pytest.raises(UnsafeURLError, match="scheme"):
        guard.check_shape("ftp://127.0.0.1/")
    with pytest.raises(UnsafeURLError, match="credentials"):
        guard.check_shape("http://u:p@127.0.0.1/")


def test_invalid_allow_list_entry() -> None:
    with pytest.raises(ValueError, match="'not a host!' is neither"):
        SSRFGuard(allow=["not a host!"])


async def test_hostname_resolving_to_loopback_is_refused() -> None:
    with pytest.raises(UnsafeURLError, match=r"host 'localhost', address 127\.0\.0\.1"):
        await SSRFGuard().resolve("http://localhost:8080/hook")


async def test_resolve_pins_checked_address() -> None:
    pinned = await SSRFGuard(allow=["localhost"]).resolve("http://localhost:8080/hook?a=1")
    assert (pinned.host, pinned.port, str(pinned.ip)) == ("localhost", 8080, "127.0.0.1")
    assert str(pinned.connect_url()) == "http://127.0.0.1:8080/hook?a=1"
    assert pinned.host_header == "localhost:8080"

    literal = await LOCAL.resolve("https://127.0.0.1/")
    assert (literal.port, literal.host_is_ip) == (443, True)


async def test_unresolvable_host() -> None:
    with pytest.raises(OSError):
        await SSRFGuard().resolve("http://no-such-host.invalid/")
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError, match=r"cannot resolve 'no-such-host\.invalid'"):
            await SSRFGuard().request(client, "GET", "http://no-such-host.invalid/")


async def test_request_goes_to_pinned_address_with_original_host() -> None:
    async with serve(app) as port, httpx.AsyncClient() as client:
        url = f"http://localhost:{port}/echo?x=1"
        with pytest.raises(UnsafeURLError, match="loopback"):
            await SSRFGuard().request(client, "GET", url)

        response = await LOCAL.request(client, "POST", url, json={"a": 1})
        assert response.status_code == 200
        seen = response.json()
        assert (seen["method"], seen["body"]) == ("POST", '{"a":1}')
        assert seen["headers"]["host"] == f"localhost:{port}"
        assert str(response.url) == url  # the URL asked for, not the pinned address


async def test_redirects_are_rechecked() -> None:
    async with serve(app) as port, httpx.AsyncClient() as client:
        base = f"http://127.0.0.1:{port}"
        for target in ("http://10.0.0.1/", "http://169.254.169.254/", "ftp://127.0.0.1/"):
            with pytest.raises(UnsafeURLError):
                await LOCAL.request(client, "GET", f"{base}/redirect", params={"to": target})

        # Refused before any connection: not followed even when told not to follow.
        kept = await LOCAL.request(
            client,
            "GET",
            f"{base}/redirect",
            params={"to": "http://10.0.0.1/"},
            follow_redirects=False,
        )
        assert kept.status_code == 302

        followed = await LOCAL.request(
            client,
            "POST",
            f"{base}/redirect",
            params={"to": "/echo", "status": "307"},
            content=b"payload",
        )
        assert followed.json()["method"] == "POST"
        assert followed.json()["body"] == "payload"
        assert [r.status_code for r in followed.history] == [307]
        assert str(followed.url) == f"{base}/echo"

        # 303 turns the POST into a GET without a body.
        seen = await LOCAL.request(
            client,
            "POST",
            f"{base}/redirect",
            params={"to": "/echo", "status": "303"},
            content=b"payload",
        )
        assert (seen.json()["method"], seen.json()["body"]) == ("GET", "")


async def test_credentials_are_not_forwarded_to_another_origin() -> None:
    guard = SSRFGuard(allow=["127.0.0.1", "localhost"])
    async with serve(app) as port, httpx.AsyncClient() as client:
        headers = {"Authorization": "Bearer abc"}
        same = await guard.request(
            client,
            "GET",
            f"http://localhost:{port}/redirect",
            params={"to": "/echo"},
            headers=headers,
        )
        assert same.json()["headers"]["authorization"] == "Bearer abc"

        other = await guard.request(
            client,
            "GET",
            f"http://localhost:{port}/redirect",
            params={"to": f"http://127.0.0.1:{port}/echo"},
            headers=headers,
        )
        assert "authorization" not in other.json()["headers"]


async def test_at_most_five_redirects() -> None:
    async with serve(app) as port, httpx.AsyncClient() as client:
        hits.clear()
        with pytest.raises(httpx.TooManyRedirects, match=f"more than {MAX_REDIRECTS}"):
            await LOCAL.request(client, "GET", f"http://127.0.0.1:{port}/loop")
        assert hits["loop"] == MAX_REDIRECTS + 1


async def test_streamed_responses_and_a_redirect_limit() -> None:
    async with serve(app) as port, httpx.AsyncClient() as client:
        base = f"http://127.0.0.1:{port}"
        with pytest.raises(UnsafeURLError, match="private"):
            await LOCAL.request(
                client, "GET", f"{base}/redirect", params={"to": "http://10.0.0.1/"}, stream=True
            )

        response = await LOCAL.request(
            client, "GET", f"{base}/redirect", params={"to": "/echo"}, stream=True
        )
        try:
            assert not response.is_stream_consumed  # the caller reads the body, bounded
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        finally:
            await response.aclose()
        assert b'"method":"GET"' in body
        assert [r.status_code for r in response.history] == [302]
        assert str(response.url) == f"{base}/echo"

        hits.clear()
        with pytest.raises(httpx.TooManyRedirects, match="more than 1 redirects"):
            await LOCAL.request(client, "GET", f"{base}/loop", stream=True, max_redirects=1)
        assert hits["loop"] == 2


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_https_verifies_the_name_while_connecting_to_the_address(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "localhost")
    guard = SSRFGuard(allow=["localhost"])
    address = str((await guard.resolve("https://localhost/")).ip)
    trust = ssl.create_default_context(cafile=str(cert))
    async with (
        serve(app, host=address, ssl_certfile=str(cert), ssl_keyfile=str(key)) as port,
        httpx.AsyncClient(verify=trust) as client,
    ):
        response = await guard.request(client, "GET", f"https://localhost:{port}/echo")
        assert response.json()["headers"]["host"] == f"localhost:{port}"
        # The connection was not pooled: a later request for another name cannot reuse it.
        assert response.json()["headers"]["connection"] == "close"

        # The certificate names localhost, not the address: without SNI/name checks this passes.
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await SSRFGuard(allow=[address]).request(client, "GET", f"https://{address}:{port}/")

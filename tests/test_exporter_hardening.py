"""The exporter against hostile clients and hostile web configuration files: idle plain and TLS connections
that fill every slot, a flood of wrong basic-auth passwords, YAML alias bombs, header injection and a
passphrase-protected key. Each attack is a bounded loop against the real server on 127.0.0.1; what is
asserted is that a real scrape still succeeds (never how long anything took)."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from click.testing import CliRunner

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.main import cli
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.server import ExporterHTTPServer, Scraper, serve_in_thread
from kgpu.exporter.webconfig import WebConfig, WebConfigError, load_web_config
from test_exporter_web import _certs, openssl


def serve(web: WebConfig | None, **kwargs: float) -> ExporterHTTPServer:
    scraper = Scraper(GpuCollector(Nvml(FakeNvml(make_gpus(1))), hostname="h"), timeout=2)
    srv = ExporterHTTPServer(("127.0.0.1", 0), scraper, web=web, **kwargs)  # type: ignore[arg-type]
    serve_in_thread(srv)
    return srv


@pytest.fixture
def servers() -> Iterator[list[ExporterHTTPServer]]:
    started: list[ExporterHTTPServer] = []
    yield started
    for srv in started:
        srv.shutdown()
        srv.server_close()


def web_config(tmp_path: Path, text: str) -> WebConfig:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return load_web_config(str(path))


def scrape(
    srv: ExporterHTTPServer, headers: dict[str, str] | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    host, port = str(srv.server_address[0]), int(srv.server_address[1])
    conn = (
        http.client.HTTPSConnection(host, port, context=context, timeout=10)
        if context is not None
        else http.client.HTTPConnection(host, port, timeout=10)
    )
    try:
        conn.request("GET", "/metrics", headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


# --- idle connections ---------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> tuple[WebConfig, ssl.SSLContext]:
    _certs(tmp_path)
    web = web_config(tmp_path, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    return web, ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))


def test_tcp_connections_that_never_say_hello_do_not_lock_out_a_tls_scrape(
    tls: tuple[WebConfig, ssl.SSLContext], servers: list[ExporterHTTPServer]
) -> None:
    """Twice as many plain TCP connections as slots, none starting a TLS handshake, opened again and again:
    every TLS scrape in between gets 200."""
    web, client = tls
    srv = serve(web, max_connections=6, header_timeout=5)
    servers.append(srv)
    held: list[socket.socket] = []
    try:
        for _ in range(3):
            held += [socket.create_connection(srv.server_address[:2], timeout=5) for _ in range(12)]
            status, body = scrape(srv, context=client)
            assert status == 200 and b"nvidia_smi_gpu_info" in body
    finally:
        for s in held:
            s.close()
    assert srv.evicted_connections > 0


def test_tls_connections_idle_after_the_handshake_do_not_lock_out_a_scrape(
    tls: tuple[WebConfig, ssl.SSLContext], servers: list[ExporterHTTPServer]
) -> None:
    """Every slot taken by clients that finish the TLS handshake and then send nothing: scrapes succeed."""
    web, client = tls
    srv = serve(web, max_connections=6, header_timeout=5)
    servers.append(srv)
    held: list[ssl.SSLSocket] = []
    try:
        for _ in range(2):
            for _ in range(8):
                raw = socket.create_connection(srv.server_address[:2], timeout=5)
                held.append(
                    client.wrap_socket(raw, server_hostname="127.0.0.1")
                )  # handshake done, then silence
            for _ in range(2):
                status, body = scrape(srv, context=client)
                assert status == 200 and b"nvidia_smi_gpu_info" in body
    finally:
        for s in held:
            s.close()


# --- basic auth under a flood of wrong passwords ------------------------------------------------------


def test_wrong_password_flood_does_not_starve_real_scrapes(
    tmp_path: Path, servers: list[ExporterHTTPServer]
) -> None:
    """32 clients sending wrong passwords for a bcrypt hash of cost 10 (each check costs real CPU), while
    Prometheus scrapes with its (already checked) password: every real scrape is answered 200, and no
    wrong password is ever let in (401, or 429 while the password checks are saturated)."""
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode()
    srv = serve(web_config(tmp_path, f"basic_auth_users:\n  prometheus: '{hashed}'\n"), max_connections=64)
    servers.append(srv)
    good = basic("prometheus", "s3cret")
    assert scrape(srv, good)[0] == 200  # the first scrape pays for bcrypt once
    stop = threading.Event()
    flood: list[int] = []
    lock = threading.Lock()

    def attacker(n: int) -> None:
        for i in range(6):
            if stop.is_set():
                return
            try:
                status = scrape(srv, basic("prometheus", f"guess-{n}-{i}"))[0]
            except OSError:
                continue
            with lock:
                flood.append(status)

    threads = [threading.Thread(target=attacker, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    try:
        for _ in range(5):
            status, body = scrape(srv, good)
            assert status == 200 and b"nvidia_smi_gpu_info" in body
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert flood and set(flood) <= {401, 429}, sorted(set(flood))
    assert 429 in flood  # the checks were saturated, and said so instead of queueing
    assert scrape(srv, basic("prometheus", "wrong"))[0] == 401


# --- hostile web configuration files ------------------------------------------------------------------

BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
    "http_server_config:\n  headers:\n    Content-Security-Policy: *g\n"
)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (BOMB, "alias expansion"),
        (
            'http_server_config:\n  headers:\n    X-XSS-Protection: "1\\r\\nSet-Cookie: session=stolen"\n',
            "headers.X-XSS-Protection: a header value must be one line",
        ),
        (
            'http_server_config:\n  headers:\n    Content-Security-Policy: "a\\nb"\n',
            "without control characters (CR and LF would break the response)",
        ),
        (
            'http_server_config:\n  headers:\n    "X Frame Options": deny\n',
            "header 'X Frame Options' can not be configured",
        ),
        (
            "http_server_config:\n  headers:\n    Set-Cookie: a=b\n",
            "header 'Set-Cookie' can not be configured",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow-all\n",
            "'allow-all' is not one of deny",
        ),
        ("http_server_config:\n  headers:\n    X-XSS-Protection: [1]\n", "must be a string, got list"),
    ],
    ids=["alias bomb", "CRLF injection", "LF", "name with spaces", "not allowed", "bad value", "list"],
)
def test_hostile_web_config_is_refused_naming_the_field(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(WebConfigError) as err:
        web_config(tmp_path, text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)
    result = CliRunner().invoke(cli, ["exporter", "--web.config.file", str(tmp_path / "web.yml")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert fragment in result.stderr and "Traceback" not in result.stderr


def test_allowed_headers_reach_the_response_unchanged(
    tmp_path: Path, servers: list[ExporterHTTPServer]
) -> None:
    web = web_config(
        tmp_path,
        "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        "    Strict-Transport-Security: max-age=31536000; includeSubDomains\n",
    )
    srv = serve(web)
    servers.append(srv)
    host, port = str(srv.server_address[0]), int(srv.server_address[1])
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200
    assert resp.getheader("X-Content-Type-Options") == "nosniff"
    assert resp.getheader("Strict-Transport-Security") == "max-age=31536000; includeSubDomains"


def test_passphrase_protected_key_is_an_error_not_a_prompt(tmp_path: Path) -> None:
    """A key encrypted with a passphrase: `kgpu exporter` exits 2 with one line naming the key file, and
    OpenSSL never asks for the passphrase (run without a terminal, it would hang or print a prompt)."""

    def run(*args: str) -> None:
        subprocess.run([openssl(), *args], cwd=tmp_path, check=True, capture_output=True, timeout=60)

    run(
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-aes256",
        "-pass",
        "pass:x",
        "-out",
        "enc.key",
    )
    run(
        "req",
        "-x509",
        "-key",
        "enc.key",
        "-passin",
        "pass:x",
        "-out",
        "enc.crt",
        "-days",
        "2",
        "-subj",
        "/CN=kgpu",
    )
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: enc.crt\n  key_file: enc.key\n")
    with pytest.raises(WebConfigError, match="is protected by a passphrase"):
        load_web_config(str(tmp_path / "web.yml"))
    result = subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", "exporter", "--web.config.file", str(tmp_path / "web.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal for OpenSSL to prompt on
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "key_file" in line and "enc.key is protected by a passphrase" in line
    assert "pass phrase" not in result.stderr.lower()

"""The TLS exporter under connection floods, and web configurations no scrape could pass.

Each flood runs against the real server on 127.0.0.1 with its production limits (512 connections, a 10 s
header timeout) and a real certificate, and is followed by a scrape made as Prometheus makes one (a new
TLS connection, Prometheus's request headers, gzip) that must be answered within 2 s: TCP connections that
never start TLS, connections stalled mid-handshake, handshaken connections that send nothing, and clients
dribbling their headers. Where the open files limit cannot be raised far enough for a flood (client and
server ends both live in this process), the flood is scaled to the limit and the assertion says so.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import httpx
import pytest
from click.testing import CliRunner

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.main import cli
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.connections import MAX_HEAD_BYTES
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.server import DEFAULT_MAX_CONNECTIONS, ExporterHTTPServer, Scraper, serve_in_thread
from kgpu.exporter.webconfig import load_web_config
from test_exporter_abuse import _Hung
from test_exporter_web import openssl

SCRAPE_DEADLINE = 2.0  # seconds: the answer a scrape must get under any flood
# what Prometheus 3 sends with each scrape
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
    "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/3.5.0",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a server certificate for 127.0.0.1 signed by it, P-256 keys (cheap handshakes)."""
    d = tmp_path_factory.mktemp("tls")

    def run(*args: str) -> None:
        subprocess.run([openssl(), *args], cwd=d, check=True, capture_output=True, timeout=60)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=kgpu flood CA"
    )
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (d / "ext").write_text(
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature\n"
    )
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial")
    run(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "2", "-extfile", "ext",
    )  # fmt: skip
    (d / "web.yml").write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    return d


@pytest.fixture
def client(certs: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs / "ca.crt"))


@pytest.fixture
def server(certs: Path) -> Iterator[ExporterHTTPServer]:
    """The TLS exporter with its production connection limits."""
    scraper = Scraper(GpuCollector(Nvml(FakeNvml(make_gpus(1))), hostname="h"), timeout=2)
    srv = ExporterHTTPServer(("127.0.0.1", 0), scraper, web=load_web_config(str(certs / "web.yml")))
    serve_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


def fitting(wanted: int) -> tuple[int, str]:
    """How many flood connections the open files limit allows (raised to the hard limit first), and a note
    for assertion messages when that is fewer than wanted. Each connection costs two descriptors here: the
    client's end and, until the server closes it, the server's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    room = (soft - len(os.listdir("/proc/self/fd")) - 128) // 2
    n = max(1, min(wanted, room))
    note = "" if n == wanted else f" (flood scaled to {n} of {wanted} connections: ulimit -n is {soft})"
    return n, note


def prometheus_scrape(srv: ExporterHTTPServer, client: ssl.SSLContext) -> tuple[int, bytes, float]:
    """A scrape on a new connection, as Prometheus makes one: (status, body, seconds taken)."""
    start = time.monotonic()
    with httpx.Client(verify=client, timeout=SCRAPE_DEADLINE + 8) as http:
        resp = http.get(f"https://127.0.0.1:{srv.server_address[1]}/metrics", headers=PROMETHEUS_HEADERS)
        body = resp.content
    return resp.status_code, body, time.monotonic() - start


def assert_scrape_in_time(srv: ExporterHTTPServer, client: ssl.SSLContext, flood: str) -> float:
    status, body, took = prometheus_scrape(srv, client)
    assert status == 200 and b"nvidia_smi_gpu_info" in body, f"after {flood}: {status} {body[:200]!r}"
    assert took < SCRAPE_DEADLINE, f"after {flood}: the scrape took {took:.2f}s"
    return took


def client_hello(client: ssl.SSLContext) -> bytes:
    """The bytes a TLS client opens with."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def closed_without_a_byte(sock: socket.socket, within: float = 3.0) -> bool:
    """Whether the server closed ``sock`` and sent nothing on it."""
    sock.settimeout(within)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.close()


# --- floods -------------------------------------------------------------------------------------------


def test_tcp_connections_that_never_start_tls_do_not_delay_a_scrape(
    server: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    """1,100 TCP connections opened in a burst and left silent sit in the accept queue ahead of the scrape:
    it is still answered within 2 s, the oldest of them are closed without a byte (no plain-text 503 on a
    TLS port), and the exporter holds at most its 512 connections and no thread per connection."""
    n, note = fitting(1100)
    threads_before = threading.active_count()
    held = [socket.create_connection(server.server_address[:2], timeout=5) for _ in range(n)]
    try:
        assert_scrape_in_time(server, client, f"{n} silent TCP connections{note}")
        assert server.active_connections <= DEFAULT_MAX_CONNECTIONS
        if n > DEFAULT_MAX_CONNECTIONS:
            assert server.evicted_connections >= n - DEFAULT_MAX_CONNECTIONS, note
            assert closed_without_a_byte(held[0]), "the oldest silent connection was not closed, or got bytes"
        assert threading.active_count() - threads_before <= 4, "idle connections must not hold threads"
        assert server.refused_connections == 0
    finally:
        close_all(held)


def test_connections_stalled_mid_handshake_do_not_delay_a_scrape(
    server: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    """1,100 connections that send half a ClientHello and stall: the scrape is answered within 2 s."""
    n, note = fitting(1100)
    hello = client_hello(client)
    held = []
    try:
        for _ in range(n):
            s = socket.create_connection(server.server_address[:2], timeout=5)
            s.sendall(hello[: len(hello) // 2])
            held.append(s)
        assert_scrape_in_time(server, client, f"{n} connections stalled mid-handshake{note}")
        assert server.active_connections <= DEFAULT_MAX_CONNECTIONS
    finally:
        close_all(held)


def test_handshaken_idle_connections_do_not_delay_a_scrape(
    server: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    """1,024 clients that finish the TLS handshake and send nothing: the scrape is answered within 2 s."""
    n, note = fitting(1024)
    held: list[socket.socket] = []
    try:
        for _ in range(n):
            raw = socket.create_connection(server.server_address[:2], timeout=5)
            held.append(client.wrap_socket(raw, server_hostname="127.0.0.1"))
        assert_scrape_in_time(server, client, f"{n} handshaken idle TLS connections{note}")
        assert server.active_connections <= DEFAULT_MAX_CONNECTIONS
        if n > DEFAULT_MAX_CONNECTIONS:
            assert closed_without_a_byte(held[0]), "the oldest idle TLS connection was not closed"
    finally:
        close_all(held)


def test_dribbled_headers_do_not_delay_a_scrape(server: ExporterHTTPServer, client: ssl.SSLContext) -> None:
    """Slowloris: 700 TLS clients keep sending their headers a byte at a time (more connections than the
    exporter serves at once, so it keeps closing the oldest); three scrapes meanwhile each get through
    within 2 s."""
    n, note = fitting(700)
    dribblers: list[ssl.SSLSocket] = []
    for _ in range(n):
        raw = socket.create_connection(server.server_address[:2], timeout=5)
        tls = client.wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        dribblers.append(tls)
    stop = threading.Event()
    sent = [0]

    def dribble() -> None:
        while not stop.is_set():
            for s in dribblers:
                if stop.is_set():
                    return
                with contextlib.suppress(OSError):
                    s.send(b"a")
                    sent[0] += 1

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    try:
        time.sleep(0.3)
        for i in range(3):
            assert_scrape_in_time(server, client, f"scrape {i} among {n} dribbling clients{note}")
        assert sent[0] > n, "the dribblers were not sending"
        assert server.active_connections <= DEFAULT_MAX_CONNECTIONS
    finally:
        stop.set()
        thread.join(5)
        close_all(dribblers)


def test_a_sustained_flood_of_new_silent_connections_never_fails_a_scrape(
    server: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    """A client that keeps opening silent connections as fast as it can (keeping its newest 1,500 open):
    every scrape made meanwhile gets through within 2 s, and the exporter never holds more than its
    limit."""
    n, note = fitting(1500)
    stop = threading.Event()
    opened = [0]
    peak = [0]

    def flood() -> None:
        held: list[socket.socket] = []
        try:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    held.append(socket.create_connection(server.server_address[:2], timeout=5))
                    opened[0] += 1
                if len(held) > n:
                    held.pop(0).close()
                peak[0] = max(peak[0], server.active_connections)
        finally:
            close_all(held)

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        time.sleep(0.3)
        for i in range(6):
            assert_scrape_in_time(
                server, client, f"scrape {i} during a flood of {opened[0]} connections{note}"
            )
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(10)
    assert opened[0] > DEFAULT_MAX_CONNECTIONS, "the flood did not fill the exporter's connections"
    assert peak[0] <= DEFAULT_MAX_CONNECTIONS


def test_a_refusal_on_the_tls_port_is_never_plain_text(certs: Path, client: ssl.SSLContext) -> None:
    """Every connection busy (scrapes held by a hung NVML call): a newcomer on the TLS port is closed
    without a byte, where a plain HTTP port answers `503 too many connections`."""
    fake = _Hung()
    scraper = Scraper(GpuCollector(Nvml(fake), hostname="h"), timeout=1.5, max_age=0)
    srv = ExporterHTTPServer(
        ("127.0.0.1", 0), scraper, web=load_web_config(str(certs / "web.yml")), max_connections=4
    )
    serve_in_thread(srv)
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(prometheus_scrape(srv, client)[0])) for _ in range(4)
    ]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5
        while scraper.waiting < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert scraper.waiting == 4
        probe = socket.create_connection(srv.server_address[:2], timeout=5)
        probe.sendall(client_hello(client))
        assert closed_without_a_byte(probe), "a refused TLS connection got bytes (plain text?)"
        probe.close()
        assert srv.refused_connections >= 1 and srv.evicted_connections == 0
        # the TLS client sees the connection end, not the "wrong version number" plain text would give
        with pytest.raises((ssl.SSLEOFError, ConnectionError)):
            client.wrap_socket(
                socket.create_connection(srv.server_address[:2], timeout=5), server_hostname="127.0.0.1"
            )
        for t in threads:
            t.join(10)
        assert results == [503] * 4  # the held scrapes ended with the scrape timeout
    finally:
        fake.gate.set()
        srv.shutdown()
        srv.server_close()


# --- deadlines and bounds of a single connection ------------------------------------------------------


@pytest.fixture
def strict(certs: Path) -> Iterator[ExporterHTTPServer]:
    scraper = Scraper(GpuCollector(Nvml(FakeNvml(make_gpus(1))), hostname="h"), timeout=2)
    srv = ExporterHTTPServer(
        ("127.0.0.1", 0), scraper, web=load_web_config(str(certs / "web.yml")), header_timeout=0.5
    )
    serve_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_stalled_handshake_is_closed_after_the_header_timeout(
    strict: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    """As net/http bounds the handshake by ReadHeaderTimeout: half a ClientHello, then nothing."""
    s = socket.create_connection(strict.server_address[:2], timeout=5)
    hello = client_hello(client)
    s.sendall(hello[: len(hello) // 2])
    start = time.monotonic()
    assert closed_without_a_byte(s, within=3)
    assert time.monotonic() - start < 1.5
    s.close()


def test_a_handshaken_silent_connection_is_closed_after_the_header_timeout(
    strict: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    tls = client.wrap_socket(
        socket.create_connection(strict.server_address[:2], timeout=5), server_hostname="127.0.0.1"
    )
    start = time.monotonic()
    tls.settimeout(3)
    assert tls.recv(100) == b""  # closed (no close_notify needed: the exporter just closes)
    assert time.monotonic() - start < 1.5
    tls.close()


def test_an_oversized_request_head_gets_431(strict: ExporterHTTPServer, client: ssl.SSLContext) -> None:
    tls = client.wrap_socket(
        socket.create_connection(strict.server_address[:2], timeout=5), server_hostname="127.0.0.1"
    )
    tls.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n")
    tls.settimeout(3)
    assert tls.recv(100).startswith(b"HTTP/1.1 431 ")
    tls.close()


def test_keep_alive_and_pipelined_requests_share_one_connection(
    server: ExporterHTTPServer, client: ssl.SSLContext
) -> None:
    """Prometheus keeps its connection between scrapes: three scrapes on one client use one connection,
    and two requests sent in one write are both answered, in order."""
    accepted = server.connections.accepted
    with httpx.Client(verify=client, timeout=10) as http:
        for _ in range(3):
            resp = http.get(
                f"https://127.0.0.1:{server.server_address[1]}/metrics", headers=PROMETHEUS_HEADERS
            )
            assert resp.status_code == 200 and b"nvidia_smi_gpu_info" in resp.content
    assert server.connections.accepted == accepted + 1
    tls = client.wrap_socket(
        socket.create_connection(server.server_address[:2], timeout=5), server_hostname="127.0.0.1"
    )
    tls.sendall(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    data = b""
    tls.settimeout(5)
    while chunk := tls.recv(65536):
        data += chunk
    tls.close()
    assert data.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 404 " in data


# --- web configurations no scrape could pass -----------------------------------------------------------


def _hash() -> str:
    return bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()


TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
IMPOSSIBLE = [
    (
        TLS + "  min_version: TLS13\n  max_version: TLS12\n",
        "tls_server_config.max_version: max_version TLS12",
    ),
    (
        TLS + "  max_version: TLS11\n",
        "tls_server_config.max_version: max_version TLS11 is below min_version TLS12",
    ),
    (TLS + "  min_version: TLS10\n  max_version: TLS11\n", "tls_server_config.min_version: no TLS handshake"),
    (
        TLS + "  client_ca_file: ca.crt\n",
        "tls_server_config.client_ca_file: given without a client_auth_type",
    ),
    (
        "basic_auth_users:\n  prometheus: '{cut}'\n",
        "basic_auth_users.prometheus: a bcrypt hash has 60 characters",
    ),
    ("basic_auth_users:\n  prometheus: '{cost}'\n", "basic_auth_users.prometheus: bcrypt cost 03"),
    ("basic_auth_users:\n  prometheus: '{edited}'\n", "basic_auth_users.prometheus: the last character"),
    (
        "basic_auth_users:\n  'prom:etheus': '{good}'\n",
        "basic_auth_users.prom:etheus: a user name holding ':'",
    ),
]


@pytest.mark.parametrize(
    ("text", "fragment"),
    IMPOSSIBLE,
    ids=["min above max", "max below default min", "TLS10-11", "CA without client auth", "truncated hash",
         "cost 3", "edited hash", "colon in user"],
)  # fmt: skip
def test_web_config_no_scrape_could_pass_is_refused_at_start(
    certs: Path, tmp_path: Path, text: str, fragment: str
) -> None:
    good = _hash()
    for name in ("server.crt", "server.key", "ca.crt"):
        (tmp_path / name).write_bytes((certs / name).read_bytes())
    config = tmp_path / "web.yml"
    config.write_text(text.format(cut=good[:-1], cost="$2y$03" + good[6:], edited=good[:-1] + "D", good=good))
    result = CliRunner().invoke(cli, ["exporter", "--web.config.file", str(config)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert fragment in line and str(config) in line and "Traceback" not in result.stderr


def test_a_possible_web_config_still_loads(certs: Path, tmp_path: Path) -> None:
    """The checks refuse only what no scrape could pass: TLS 1.3 only, client certificates, a good hash."""
    for name in ("server.crt", "server.key", "ca.crt"):
        (tmp_path / name).write_bytes((certs / name).read_bytes())
    (tmp_path / "web.yml").write_text(
        TLS
        + "  min_version: TLS13\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        f"basic_auth_users:\n  prometheus: '{_hash()}'\n"
    )
    web = load_web_config(str(tmp_path / "web.yml"))
    assert web.ssl_context is not None and web.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert list(web.users) == ["prometheus"]

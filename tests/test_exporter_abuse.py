"""The exporter under HTTP abuse: slow clients, too many connections, clients that leave, HEAD, bad flags."""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.main import cli
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.server import ExporterHTTPServer, Scraper, parse_listen, serve_in_thread


def _server(**kwargs: float) -> ExporterHTTPServer:
    scraper = Scraper(GpuCollector(Nvml(FakeNvml(make_gpus(1))), hostname="h"), timeout=2)
    srv = ExporterHTTPServer(("127.0.0.1", 0), scraper, **kwargs)  # type: ignore[arg-type]
    serve_in_thread(srv)
    return srv


@pytest.fixture
def strict() -> Iterator[ExporterHTTPServer]:
    """Short header timeout and few connection slots, so that abuse shows within a test's time."""
    srv = _server(header_timeout=0.5, max_connections=8)
    yield srv
    srv.shutdown()
    srv.server_close()


def _metrics(srv: ExporterHTTPServer, method: str = "GET") -> tuple[int, bytes, dict[str, str]]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=5)
    try:
        conn.request(method, "/metrics")
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    finally:
        conn.close()


def _open_silent(srv: ExporterHTTPServer, n: int, first_bytes: bytes = b"") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection(srv.server_address[:2], timeout=5)
        if first_bytes:
            s.sendall(first_bytes)
        socks.append(s)
    return socks


def _wait_idle(srv: ExporterHTTPServer, deadline_s: float = 3.0) -> None:
    deadline = time.monotonic() + deadline_s
    while srv.active_connections and time.monotonic() < deadline:
        time.sleep(0.05)


def test_slowloris_connections_cannot_lock_a_scrape_out(strict: ExporterHTTPServer) -> None:
    """Clients that never finish their headers take every slot: a scrape still gets 200 at once (the
    longest-idle connection makes room), and the rest are shut after header_timeout."""
    socks = _open_silent(strict, 8, b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # every slot, headers unfinished
    time.sleep(0.2)
    status, body, _ = _metrics(strict)
    assert status == 200 and b"nvidia_smi_gpu_info" in body
    assert strict.evicted_connections >= 1
    for s in socks:  # the server shuts each of them
        s.settimeout(3)
        assert s.recv(100) == b""
        s.close()
    _wait_idle(strict)
    assert strict.active_connections == 0


@pytest.mark.parametrize("rounds", [3])
def test_idle_connections_refilled_in_a_loop_never_fail_a_scrape(strict: ExporterHTTPServer, rounds: int) -> None:
    """An attacker who keeps every slot filled with silent connections (opening new ones as fast as the
    server shuts them): every real scrape in between succeeds."""
    held: list[socket.socket] = []
    try:
        for _ in range(rounds):
            held += _open_silent(strict, 12)  # more than the 8 slots, nothing sent
            time.sleep(0.1)
            for _ in range(3):
                status, body, _ = _metrics(strict)
                assert status == 200 and b"nvidia_smi_gpu_info" in body
    finally:
        for s in held:
            s.close()


class _Hung(FakeNvml):
    """Every collection blocks in its first NVML read until ``gate`` opens (a hung driver call)."""

    def __init__(self) -> None:
        super().__init__(make_gpus(1))
        self.gate = threading.Event()

    def nvmlDeviceGetTemperature(self, h, sensor):  # type: ignore[no-untyped-def]
        self.gate.wait(10)
        return super().nvmlDeviceGetTemperature(h, sensor)


def test_connections_busy_in_scrapes_are_not_evicted() -> None:
    """Slots held by scrapes in progress (a hung NVML call) are not taken away for newcomers: the next
    connection is refused with 503 at once, and the held scrapes end with the scrape timeout (503)."""
    fake = _Hung()
    scraper = Scraper(GpuCollector(Nvml(fake), hostname="h"), timeout=1.5, max_age=0)
    srv = ExporterHTTPServer(("127.0.0.1", 0), scraper, header_timeout=0.5, max_connections=4)
    serve_in_thread(srv)
    try:
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(_metrics(srv)[0])) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 3
        while scraper.waiting < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        status, body, _ = _metrics(srv)
        assert status == 503 and body == b"too many connections"
        assert srv.evicted_connections == 0
        for t in threads:
            t.join()
        assert results == [503] * 4
        fake.gate.set()
        assert _metrics(srv)[0] == 200
    finally:
        fake.gate.set()
        srv.shutdown()
        srv.server_close()


def test_max_requests_bounds_concurrent_scrapes() -> None:
    """--web.max-requests: with one scrape running (hung), a second scrape of the metrics path is answered
    503 at once; /-/healthy and /-/ready still answer 200."""
    fake = _Hung()
    scraper = Scraper(GpuCollector(Nvml(fake), hostname="h"), timeout=1.5, max_age=0)
    srv = ExporterHTTPServer(("127.0.0.1", 0), scraper, max_requests=1)
    serve_in_thread(srv)
    try:
        first: list[int] = []
        t = threading.Thread(target=lambda: first.append(_metrics(srv)[0]))
        t.start()
        deadline = time.monotonic() + 3
        while scraper.waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        status, body, _ = _metrics(srv)
        assert status == 503 and b"too many concurrent scrapes (limit 1)" in body
        host, port = srv.server_address[:2]
        for path in ("/-/healthy", "/-/ready", "/healthz"):
            conn = http.client.HTTPConnection(str(host), int(port), timeout=5)
            conn.request("GET", path)
            assert conn.getresponse().status == 200, path
            conn.close()
        t.join()
        fake.gate.set()
        assert _metrics(srv)[0] == 200
    finally:
        fake.gate.set()
        srv.shutdown()
        srv.server_close()


def test_header_trickle_cannot_extend_the_deadline(strict: ExporterHTTPServer) -> None:
    """One header byte at a time, each within the socket timeout: the whole request still has a deadline."""
    s = socket.create_connection(strict.server_address[:2], timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\n")
    start = time.monotonic()
    closed = False
    while time.monotonic() - start < 3:
        try:
            s.sendall(b"X")
        except OSError:
            closed = True
            break
        s.settimeout(0.2)
        try:
            if s.recv(100) == b"":
                closed = True
                break
        except TimeoutError:
            pass
    s.close()
    assert closed and time.monotonic() - start < 2.5


def test_head_is_answered_without_a_body(strict: ExporterHTTPServer) -> None:
    status, body, headers = _metrics(strict, "HEAD")
    assert status == 200 and body == b""
    assert int(headers["Content-Length"]) > 0 and headers["Content-Type"].startswith("text/plain")


def test_client_leaving_mid_response_logs_no_traceback(
    strict: ExporterHTTPServer, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG, logger="kgpu.exporter.server")
    for _ in range(20):
        s = socket.create_connection(strict.server_address[:2], timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        s.close()
    time.sleep(0.5)
    assert _metrics(strict)[0] == 200
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_many_concurrent_scrapes_still_succeed() -> None:
    """The connection bound does not cost honest concurrency: 200 scrapes at once all get 200."""
    srv = _server()
    try:
        results: list[int] = []
        lock = threading.Lock()

        def scrape() -> None:
            status = _metrics(srv)[0]
            with lock:
                results.append(status)

        threads = [threading.Thread(target=scrape) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200] * 200
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("address", ["127.0.0.1:65536", ":99999999", "127.0.0.1:٣٣", "127.0.0.1:-1", "x"])
def test_parse_listen_rejects_ports_out_of_range(address: str) -> None:
    with pytest.raises(ValueError, match="port from 0 to 65535"):
        parse_listen(address)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0])
def test_scraper_refuses_unbounded_timeouts(value: float) -> None:
    with pytest.raises(ValueError, match="finite number of seconds"):
        Scraper(GpuCollector(Nvml(FakeNvml(make_gpus(1))), hostname="h"), timeout=value)


@pytest.mark.parametrize(
    "args",
    [
        ["--listen", "127.0.0.1:65536"],
        ["--timeout", "inf"],
        ["--timeout", "nan"],
        ["--timeout", "-1"],
        ["--max-age", "inf"],
        ["--max-age", "nan"],
    ],
)
def test_exporter_flags_are_usage_errors(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["exporter", *args])
    assert (result.exit_code == 2 and result.exception is None) or isinstance(result.exception, SystemExit)
    assert "Invalid value" in result.stderr and "Traceback" not in result.stderr

"""The exporter's HTTP server: endpoints, concurrent scrapers, per-scrape timeout, surviving NVML failures."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.server import (
    DEFAULT_MAX_AGE,
    ExporterHTTPServer,
    Scraper,
    ScrapeTimeout,
    make_server,
    parse_listen,
    serve_in_thread,
)


@pytest.fixture
def fake() -> FakeNvml:
    return FakeNvml(make_gpus(2))


@pytest.fixture
def server(fake: FakeNvml) -> Iterator[ExporterHTTPServer]:
    """The library's defaults (``max_age`` included): none of its tests needs a fresh collection per scrape."""
    srv = make_server(GpuCollector(Nvml(fake), hostname="h"), "127.0.0.1:0", timeout=0.5)
    serve_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


class Gated(FakeNvml):
    """``nvmlDeviceGetTemperature`` blocks until ``gate`` opens: a hung NVML call while it stays shut."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()  # a collection is inside the gated call

    def nvmlDeviceGetTemperature(self, h, sensor):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.gate.wait(10)
        return super().nvmlDeviceGetTemperature(h, sensor)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def serve(scraper: Scraper) -> ExporterHTTPServer:
    srv = ExporterHTTPServer(("127.0.0.1", 0), scraper)
    serve_in_thread(srv)
    return srv


def stop(srv: ExporterHTTPServer) -> None:
    srv.shutdown()
    srv.server_close()


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.005)


def test_metrics_endpoint(server: ExporterHTTPServer) -> None:
    status, ctype, body = get(server.url + "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    assert "# TYPE nvidia_smi_utilization_gpu_ratio gauge" in body
    assert body.count("nvidia_smi_temperature_gpu{") == 2


def test_healthz_and_404(server: ExporterHTTPServer) -> None:
    for path in ("/healthz", "/-/healthy"):
        status, ctype, body = get(server.url + path)
        assert status == 200 and ctype == "application/json"
        health = json.loads(body)
        assert health["status"] == "ok"
        assert health["collection_running_seconds"] == 0
    assert get(server.url + "/nope")[0] == 404


def test_default_server_reuses_a_collection_for_quick_scrapes(server: ExporterHTTPServer) -> None:
    """make_server's default reuse window is the CLI's: a second scrape right after the first gets its body."""
    assert server.scraper.max_age == DEFAULT_MAX_AGE == 1.0
    first = get(server.url + "/metrics")
    second = get(server.url + "/metrics")
    assert first[0] == second[0] == 200
    # every collection renders its own kgpu_exporter_collect_duration_seconds: equal bodies are one collection
    assert "kgpu_exporter_collect_duration_seconds " in first[2]
    assert second[2] == first[2]


def test_server_keeps_serving_through_a_lost_gpu(server: ExporterHTTPServer, fake: FakeNvml) -> None:
    """A lost GPU is a 200 with last_collect_success 0; recovery needs no restart."""
    for gpu in fake.gpus:
        gpu.lost = True
    status, _, body = get(server.url + "/metrics")
    assert status == 200
    assert "nvidia_smi_last_collect_success 0" in body
    assert json.loads(get(server.url + "/healthz")[2])["last_collect_success"] is False
    for gpu in fake.gpus:
        gpu.lost = False
    status, _, body = get(server.url + "/metrics")
    assert "nvidia_smi_last_collect_success 1" in body
    assert "nvidia_smi_failed_scrapes_total 1" in body
    assert fake.init_calls == 2


def test_many_concurrent_scrapers(server: ExporterHTTPServer) -> None:
    """40 scrapers at once all get complete answers."""
    results: list[tuple[int, int]] = []
    lock = threading.Lock()

    def scrape() -> None:
        status, _, body = get(server.url + "/metrics")
        with lock:
            results.append((status, body.count("nvidia_smi_gpu_info{")))

    threads = [threading.Thread(target=scrape) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(200, 2)] * 40


def test_per_scrape_timeout_answers_503_and_recovers() -> None:
    """A hung NVML call costs a 503 within the timeout, not a stuck scrape; later scrapes succeed."""
    fake = Gated()
    # max_age=0: the scrape after recovery must be a fresh collection, the one that counts the timeout
    srv = make_server(GpuCollector(Nvml(fake), hostname="h"), "127.0.0.1:0", timeout=0.3, max_age=0)
    serve_in_thread(srv)
    try:
        t0 = time.monotonic()
        status, _, body = get(srv.url + "/metrics")
        assert status == 503
        assert "did not finish within 0.3s" in body
        assert time.monotonic() - t0 < 3
        assert srv.scraper.collector.stats.scrape_timeouts == 1
        fake.gate.set()
        wait_for(lambda: srv.scraper._flight is None)  # the hung collection has finished
        status, _, body = get(srv.url + "/metrics")
        assert status == 200
        assert "kgpu_exporter_scrape_timeouts_total 1" in body
    finally:
        fake.gate.set()
        stop(srv)


def test_scrape_timeout_names_the_timeout_waited() -> None:
    fake = Gated()
    scraper = Scraper(GpuCollector(Nvml(fake), hostname="h"), timeout=5, max_age=0)
    try:
        with pytest.raises(ScrapeTimeout, match=r"within 0\.05s$"):
            scraper.scrape(timeout=0.05)
    finally:
        fake.gate.set()
    wait_for(lambda: scraper._flight is None)


def test_concurrent_scrapes_share_one_collection() -> None:
    """Scrapes arriving during a collection wait for it instead of starting their own."""
    fake = Gated()
    # max_age=0: with a reuse window a late scrape would be served the finished body and hide a second flight
    srv = make_server(GpuCollector(Nvml(fake), hostname="h"), "127.0.0.1:0", timeout=5, max_age=0)
    serve_in_thread(srv)
    results: list[int] = []
    try:
        threads = [
            threading.Thread(target=lambda: results.append(get(srv.url + "/metrics")[0])) for _ in range(10)
        ]
        for t in threads:
            t.start()
        # the collection is stuck inside NVML and all 10 scrapes wait for it: none can start another
        wait_for(lambda: fake.entered.is_set() and srv.scraper.waiting == 10)
        fake.gate.set()
        for t in threads:
            t.join()
        assert results == [200] * 10
        assert fake.calls["nvmlDeviceGetTemperature"] == 1
        assert srv.scraper.waiting == 0
    finally:
        fake.gate.set()
        stop(srv)


def test_failed_refresh_ahead_clears_the_reuse_window(fake: FakeNvml) -> None:
    """NVML fails during a background refresh: the next scrape collects (re-initialising NVML) at once."""
    clock = Clock()
    srv = serve(Scraper(GpuCollector(Nvml(fake), hostname="h"), clock=clock))  # default max_age: 1 s
    try:
        status, _, first = get(srv.url + "/metrics")
        assert status == 200 and "nvidia_smi_last_collect_success 1" in first
        clock.now += 0.6  # second half of the window: served from `first`, a refresh starts behind it
        for gpu in fake.gpus:
            gpu.lost = True
        assert get(srv.url + "/metrics")[2] == first
        wait_for(lambda: srv.scraper._flight is None)
        assert json.loads(get(srv.url + "/healthz")[2])["last_collect_success"] is False
        for gpu in fake.gpus:
            gpu.lost = False
        # still inside the first collection's window (clock unmoved), yet it is not served again
        status, _, body = get(srv.url + "/metrics")
        assert status == 200 and body != first
        assert "nvidia_smi_last_collect_success 1" in body
        assert "nvidia_smi_failed_scrapes_total 1" in body
        assert fake.init_calls == 2
    finally:
        stop(srv)


def test_healthz_fails_while_a_collection_is_hung_and_recovers() -> None:
    """Past ``hung_after`` a running collection makes /healthz 503, so the liveness probe restarts the pod."""
    fake = Gated()
    clock = Clock()  # the collection's age is read from it; the per-scrape timeout waits in real time
    scraper = Scraper(GpuCollector(Nvml(fake), hostname="h"), timeout=0.2, max_age=0, clock=clock)
    assert scraper.hung_after == 30.0  # max(30 s, 6 x timeout)
    srv = serve(scraper)
    try:
        assert get(srv.url + "/metrics")[0] == 503
        wait_for(fake.entered.is_set)
        clock.now += 10
        status, _, body = get(srv.url + "/healthz")
        assert status == 200
        assert json.loads(body)["collection_running_seconds"] == 10.0
        clock.now += 21  # 31 s > hung_after
        for path in ("/healthz", "/-/healthy"):
            status, ctype, body = get(srv.url + path)
            assert status == 503 and ctype == "application/json"
            health = json.loads(body)
            assert health["status"] == "collection hung"
            assert health["collection_running_seconds"] == 31.0
            assert health["hung_after_seconds"] == 30.0
            assert "running for 31s (limit 30s)" in health["error"]
        assert get(srv.url + "/metrics")[0] == 503  # joins the hung collection, still stuck

        fake.gate.set()
        wait_for(lambda: scraper._flight is None)
        status, _, body = get(srv.url + "/healthz")
        assert status == 200
        health = json.loads(body)
        assert health["status"] == "ok" and health["last_collect_success"] is True
        assert health["collection_running_seconds"] == 0
        assert "hung_after_seconds" not in health
        assert get(srv.url + "/metrics")[0] == 200
    finally:
        fake.gate.set()
        stop(srv)


def test_hung_after_default_scales_with_the_timeout() -> None:
    collector = GpuCollector(Nvml(FakeNvml()), hostname="h")
    assert Scraper(collector, timeout=5).hung_after == 30.0
    assert Scraper(collector, timeout=10).hung_after == 60.0
    assert Scraper(collector, timeout=5, hung_after=0.5).hung_after == 0.5


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":9835", ("", 9835)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9835", ("::1", 9835))],
)
def test_parse_listen(address: str, expected: tuple[str, int]) -> None:
    assert parse_listen(address) == expected


def test_parse_listen_rejects_missing_port() -> None:
    with pytest.raises(ValueError, match="PORT"):
        parse_listen("localhost")


def scraper_with(fake: FakeNvml, max_age: float) -> tuple[Scraper, Clock]:
    clock = Clock()
    return Scraper(GpuCollector(Nvml(fake), hostname="h"), max_age=max_age, clock=clock), clock


def collections(fake: FakeNvml) -> int:
    return fake.calls["nvmlDeviceGetTemperature"] // len(fake.gpus)


def temperatures(body: bytes) -> list[float]:
    return [
        float(m.group(1)) for m in re.finditer(rb"^nvidia_smi_temperature_gpu\{[^}]*\} (\S+)$", body, re.M)
    ]


def test_reuse_window_serves_one_collection_then_refreshes_ahead() -> None:
    fake = FakeNvml(make_gpus(2))
    scraper, clock = scraper_with(fake, max_age=1.0)
    first = scraper.scrape()
    assert collections(fake) == 1
    clock.now += 0.4  # inside the first half of the window: reused, nothing started
    assert scraper.scrape() is first
    assert collections(fake) == 1

    fake.gpus[0].temperature = 91
    clock.now += 0.2  # second half: answered from the old one, a refresh starts in the background
    assert scraper.scrape() is first
    wait_for(lambda: scraper._flight is None and collections(fake) == 2)
    refreshed = scraper.scrape()
    assert refreshed is not first
    assert temperatures(refreshed) == [91.0, 59.0]
    assert temperatures(first) == [59.0, 59.0]
    assert collections(fake) == 2


def test_reuse_window_expired_waits_for_a_fresh_collection() -> None:
    fake = FakeNvml(make_gpus(1))
    scraper, clock = scraper_with(fake, max_age=1.0)
    scraper.scrape()
    fake.gpus[0].temperature = 77
    clock.now += 1.0  # the age is counted from the collection's start: exactly max_age is too old
    body = scraper.scrape()
    assert collections(fake) == 2
    assert temperatures(body) == [77.0]


def test_failed_collection_is_never_reused() -> None:
    """NVML down: the next scrape (even inside the window) collects again, i.e. re-initialises NVML."""
    fake = FakeNvml(make_gpus(1))
    scraper, clock = scraper_with(fake, max_age=10.0)
    fake.driver_loaded = False
    assert "nvidia_smi_last_collect_success 0" in scraper.scrape().decode()
    fake.driver_loaded = True
    clock.now += 0.1
    assert "nvidia_smi_last_collect_success 1" in scraper.scrape().decode()
    assert fake.init_calls == 2


def test_max_age_zero_collects_on_every_scrape() -> None:
    fake = FakeNvml(make_gpus(1))
    scraper, _ = scraper_with(fake, max_age=0.0)
    for _ in range(3):
        scraper.scrape()
    assert collections(fake) == 3

"""``kgpu.exporter.app.run``: the process lifecycle, from serving to a clean shutdown."""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import time
import urllib.request

import pytest

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.exporter_cmd import command
from kgpu.exporter.app import ExporterConfig, run
from kgpu.exporter.collector import CollectorOptions
from kgpu.exporter.server import DEFAULT_MAX_AGE, ExporterHTTPServer, Scraper, make_server


def scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        return resp.read().decode()


def test_run_serves_then_releases_nvml_buffers_on_shutdown() -> None:
    fake = FakeNvml(make_gpus(2))  # H100s: GPM-capable, so the collector holds NVML sample buffers
    started = threading.Event()
    holder: list[ExporterHTTPServer] = []

    def ready(server: ExporterHTTPServer) -> None:
        holder.append(server)
        started.set()

    before = sys.getswitchinterval()
    config = ExporterConfig(listen="127.0.0.1:0", max_age=0, xid=False, options=CollectorOptions(pods=False))
    thread = threading.Thread(target=run, args=(config,), kwargs={"lib": fake, "ready": ready}, daemon=True)
    thread.start()
    assert started.wait(5)
    server = holder[0]
    scrape(server.url)
    fake.advance_gpm(1.0)
    time.sleep(0.15)  # past the sampler's minimum interval between GPM samples (real time)
    body = scrape(server.url)
    assert "nvidia_smi_sm_activity_ratio{" in body  # two samples taken: buffers are live
    assert fake.gpm_live

    server.shutdown()
    thread.join(5)
    assert not thread.is_alive()
    assert not fake.gpm_live  # every NVML-allocated buffer freed
    assert fake.gpm_freed
    assert sys.getswitchinterval() == before


def test_library_and_cli_share_the_default_reuse_window() -> None:
    """``make_server``, ``Scraper``, ``ExporterConfig`` and ``kgpu exporter --max-age`` default alike."""
    assert DEFAULT_MAX_AGE == 1.0
    assert inspect.signature(make_server).parameters["max_age"].default == DEFAULT_MAX_AGE
    assert inspect.signature(Scraper).parameters["max_age"].default == DEFAULT_MAX_AGE
    assert ExporterConfig().max_age == DEFAULT_MAX_AGE
    (option,) = [p for p in command.params if p.name == "max_age"]
    assert option.default == DEFAULT_MAX_AGE


def _started(
    listen: str, caplog: pytest.LogCaptureFixture
) -> tuple[ExporterHTTPServer, threading.Thread, str]:
    started = threading.Event()
    holder: list[ExporterHTTPServer] = []

    def ready(server: ExporterHTTPServer) -> None:
        holder.append(server)
        started.set()

    caplog.set_level(logging.INFO, logger="kgpu.exporter.app")
    config = ExporterConfig(listen=listen, xid=False, options=CollectorOptions(pods=False))
    thread = threading.Thread(
        target=run, args=(config,), kwargs={"lib": FakeNvml(make_gpus(1)), "ready": ready}, daemon=True
    )
    thread.start()
    assert started.wait(5)
    (line,) = [r.getMessage() for r in caplog.records if "listening on" in r.getMessage()]
    return holder[0], thread, line


@pytest.mark.parametrize(
    ("listen", "shown"),
    [
        (":0", "http://0.0.0.0:{port} (every IPv4 interface)"),
        ("127.0.0.1:0", "http://127.0.0.1:{port} (this address only)"),
    ],
)
def test_start_up_line_says_where_it_really_listens(
    listen: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`--web.listen-address :9835` binds every interface and the log line says so (it used to name
    127.0.0.1); a loopback address is named as such; a scrape reaches it there."""
    server, thread, line = _started(listen, caplog)
    try:
        port = int(server.server_address[1])
        assert line == f"kgpu exporter listening on {shown.format(port=port)}, metrics at /metrics"
        assert "nvidia_smi_gpu_info" in scrape(f"http://127.0.0.1:{port}")
    finally:
        server.shutdown()
        thread.join(5)

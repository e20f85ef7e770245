"""Integration: Debian's real Prometheus scrapes kgpu's exporter (fake NVML) with kgpu's rendered rules.

The fake GPUs report high utilization, temperature and memory, an uncorrectable ECC error and an XID; the
test asserts through Prometheus's HTTP API that the series exist and the alerts fire. Rules are rendered
with ``for: 0s`` so it finishes in seconds.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.server import make_server, serve_in_thread
from kgpu.exporter.xid import XidWatcher
from kgpu.render.monitoring import alert_rules_file, prometheus_config

pytestmark = pytest.mark.integration
DEADLINE_S = 45


def prometheus_binary() -> str:
    path = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if path is None:
        pytest.fail(
            "prometheus is not installed: `make test` unpacks Debian's prometheus package into .cache/deb (make promtool)"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]


def test_prometheus_scrapes_exporter_and_alerts_fire(tmp_path: Path) -> None:
    binary = prometheus_binary()
    gpus = make_gpus(2)
    hot, cool = gpus
    cool.util_gpu = 20
    hot.util_gpu, hot.temperature, hot.memory_used = 97, 88, int(hot.memory_total * 0.95)
    hot.ecc[(1, 0)] = 1  # one uncorrected volatile error
    fake = FakeNvml(gpus)
    nvml = Nvml(fake)
    xid = XidWatcher(nvml)
    xid.record("5d1b2d6e-0000-4a5b-8c9d-000000000000", 79, when=time.time())
    exporter = make_server(GpuCollector(nvml, xid=xid, hostname="h"), "127.0.0.1:0")
    serve_in_thread(exporter)
    target = f"127.0.0.1:{exporter.server_address[1]}"

    rules = tmp_path / "kgpu-gpu.rules.yml"
    rules.write_text(yaml.safe_dump(alert_rules_file(for_="0s")))
    config = prometheus_config([{"targets": [target], "labels": {"gpu": "h100"}}], rule_files=[str(rules)])
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["scrape_configs"][0]["scrape_interval"] = "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    expected_alerts = {
        "GPUUtilizationHigh",
        "GPUTemperatureHigh",
        "GPUMemoryUsedHigh",
        "GPUEccUncorrectedErrors",
        "GPUXidErrors",
    }
    try:
        deadline = time.monotonic() + DEADLINE_S
        firing: set[str] = set()
        series_ok = False
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                result = api(base, "/api/v1/query", query="nvidia_smi_utilization_gpu_ratio")["result"]
                series_ok = len(result) == 2
                alerts = api(base, "/api/v1/alerts")["alerts"]
                firing = {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}
            except OSError:
                pass
            if series_ok and expected_alerts <= firing:
                break
            time.sleep(0.5)
        assert series_ok, "nvidia_smi_utilization_gpu_ratio never reached Prometheus"
        assert expected_alerts <= firing, f"firing: {sorted(firing)}"
        assert "GPUExporterDown" not in firing and "GPUExporterNVMLFailing" not in firing

        # the series exist with nvidia_gpu_exporter's labels and the static target's labels
        (temp,) = api(
            base,
            "/api/v1/query",
            query='nvidia_smi_temperature_gpu{uuid="5d1b2d6e-0000-4a5b-8c9d-000000000000"}',
        )["result"]
        assert temp["metric"]["gpu"] == "h100" and temp["metric"]["job"] == "kgpu-exporter"
        assert float(temp["value"][1]) == 88
        util = api(base, "/api/v1/alerts")["alerts"]
        hot_alerts = [a for a in util if a["labels"]["alertname"] == "GPUUtilizationHigh"]
        assert [a["labels"]["uuid"] for a in hot_alerts] == ["5d1b2d6e-0000-4a5b-8c9d-000000000000"], (
            "only the hot GPU fires"
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        exporter.shutdown()
        exporter.server_close()

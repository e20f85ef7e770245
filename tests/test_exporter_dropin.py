"""kgpu exporter in place of nvidia_gpu_exporter and dcgm-exporter: their collection-health metrics, and their
recommended XID alerts (run by the real promtool over the series the exporter serves) firing on kgpu's
series."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.xid import XidWatcher

# nvidia_gpu_exporter's docs/METRICS.md: "prefer the timestamp and filter to an explicit code allowlist"
NVIDIA_SMI_XID_ALERT = (
    'time() - nvidia_smi_xid_last_timestamp_seconds{xid=~"48|62|64|74|79|95|119|120"} < 300'
)
# NVIDIA/dcgm-exporter#309, the query that motivated the err_code/err_msg labels
DCGM_XID_ALERT = (
    'max(DCGM_FI_DEV_XID_ERRORS{err_code=~"4|8|9|12|13|24|30|31|37|38|43|48|54|74|119|140|143"}) '
    "by (Hostname, DCGM_FI_DRIVER_VERSION, device, gpu, modelName, err_msg)"
)


def samples(collector: GpuCollector) -> list[tuple[str, dict[str, str], float]]:
    text = TextWriter().render(collector.build()).decode()
    return [
        (s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(text) for s in f.samples
    ]


def series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def test_collection_health_metrics_as_nvidia_gpu_exporter_serves_them() -> None:
    """last_collect_success_timestamp_seconds, last_collect_duration_seconds and the NVML backend's
    nvml_return_code, without a uuid label: 0 and a timestamp after a good collection; NVML's GpuIsLost (15)
    after a failed one, the timestamp still that of the last success."""
    fake = FakeNvml(make_gpus(1))
    collector = GpuCollector(Nvml(fake), options=CollectorOptions(pods=False), hostname="h")
    good = {(n, tuple(sorted(labels.items()))): v for n, labels, v in samples(collector)}
    stamp = good[("nvidia_smi_last_collect_success_timestamp_seconds", ())]
    assert stamp > 1_700_000_000
    assert good[("nvidia_smi_nvml_return_code", ())] == 0
    assert good[("nvidia_smi_last_collect_duration_seconds", ())] >= 0
    fake.gpus[0].lost = True
    bad = {(n, tuple(sorted(labels.items()))): v for n, labels, v in samples(collector)}
    assert bad[("nvidia_smi_last_collect_success", ())] == 0
    assert bad[("nvidia_smi_nvml_return_code", ())] == 15
    assert bad[("nvidia_smi_last_collect_success_timestamp_seconds", ())] == stamp


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: `make test` installs Debian's prometheus package")
    return path


@pytest.mark.integration
def test_upstream_xid_alerts_fire_on_kgpu_series(tmp_path: Path) -> None:
    """XID 79 (fallen off the bus) on GPU 0 and XID 13 (an application's fault) on GPU 1, at unix time 100:
    nvidia_gpu_exporter's alert (reset-class codes) fires for GPU 0's XID 79 only; the dcgm-exporter query
    (a list with 13, without 79) for GPU 1's XID 13 only, with dcgm-exporter's err_msg text."""
    nvml = Nvml(FakeNvml(make_gpus(2)))
    xid = XidWatcher(nvml)
    collector = GpuCollector(
        nvml, options=CollectorOptions(metrics="all", pods=False), xid=xid, hostname="n1"
    )
    uuids = [d.uuid for d in collector._device_infos()]
    xid.record(uuids[0], 79, when=100.0)
    xid.record(uuids[1], 13, when=100.0)
    wanted = {"nvidia_smi_xid_last_timestamp_seconds", "DCGM_FI_DEV_XID_ERRORS"}
    scraped = [(n, labels, v) for n, labels, v in samples(collector) if n in wanted]
    assert scraped
    rules = {
        "groups": [
            {
                "name": "upstream",
                "rules": [
                    {"alert": "NvidiaSmiXid", "expr": NVIDIA_SMI_XID_ALERT},
                    {"alert": "DcgmXid", "expr": DCGM_XID_ALERT},
                ],
            }
        ]
    }
    dcgm = {labels["UUID"]: labels for n, labels, _ in scraped if n == "DCGM_FI_DEV_XID_ERRORS"}
    dcgm = {u: dcgm[next(k for k in dcgm if k.lower().endswith(u))] for u in uuids}  # by kgpu's uuid
    by = ("Hostname", "DCGM_FI_DRIVER_VERSION", "device", "gpu", "modelName", "err_msg")
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": series(n, labels), "values": f"{v:g}x10"} for n, labels, v in scraped
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "3m",
                        "alertname": "NvidiaSmiXid",
                        "exp_alerts": [
                            {"exp_labels": {"alertname": "NvidiaSmiXid", "uuid": uuids[0], "xid": "79"}}
                        ],
                    },
                    {
                        "eval_time": "3m",
                        "alertname": "DcgmXid",
                        "exp_alerts": [
                            {"exp_labels": {"alertname": "DcgmXid", **{k: dcgm[uuids[1]][k] for k in by}}}
                        ],
                    },
                ],
            }
        ],
    }
    assert {labels["err_msg"] for labels in dcgm.values()} == {
        "GPU has fallen off the bus",
        "Graphics Engine Exception",
    }
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    result = subprocess.run(
        [promtool(), "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr

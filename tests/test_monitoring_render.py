"""kgpu.render.monitoring: alert rules (checked and unit-tested by the real promtool), scrape config,
exporter DaemonSet, Service/ServiceMonitor, PrometheusRule and dashboard."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kgpu.errors import InputError
from kgpu.render import grafana, monitoring
from kgpu.render.monitoring import alert_rules_file, render_monitoring, scrape_config

PROMTOOL_TESTS = Path(__file__).parent / "promtool" / "rules.test.yaml"
GPU_TERMS = [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]
TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is not installed: `make test` unpacks Debian's prometheus package into .cache/deb (make promtool)"
        )
    return path


def run_promtool_tests(tmp_path: Path, rules: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "kgpu-gpu.rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    shutil.copy(PROMTOOL_TESTS, tmp_path / "rules.test.yaml")
    return subprocess.run(
        [promtool(), "test", "rules", "rules.test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.integration
def test_promtool_check_rules(tmp_path: Path) -> None:
    """The plain rules file and the PrometheusRule's spec both pass `promtool check rules`."""
    plain = tmp_path / "plain.yml"
    plain.write_text(yaml.safe_dump(alert_rules_file()))
    operator = tmp_path / "operator.yml"
    operator.write_text(yaml.safe_dump(monitoring.prometheus_rule()["spec"]))
    result = subprocess.run(
        [promtool(), "check", "rules", str(plain), str(operator)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


@pytest.mark.integration
def test_promtool_rule_unit_tests(tmp_path: Path) -> None:
    """Every alert fires just above its threshold after its `for`, and stays silent at the threshold."""
    result = run_promtool_tests(tmp_path, alert_rules_file())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.integration
def test_promtool_tests_catch_seed_002_rule(tmp_path: Path) -> None:
    """The unit tests would catch seed 002's utilization rule (`ratio > 90`, which can never fire)."""
    rules = alert_rules_file()
    for rule in rules["groups"][0]["rules"]:
        if rule["alert"] == "GPUUtilizationHigh":
            rule["expr"] = "nvidia_smi_utilization_gpu_ratio > 90"
    result = run_promtool_tests(tmp_path, rules)
    assert result.returncode != 0
    assert "GPUUtilizationHigh" in result.stdout + result.stderr


def test_rules_use_ratios_and_bytes() -> None:
    exprs = {r["alert"]: r["expr"] for r in alert_rules_file()["groups"][0]["rules"]}
    assert exprs["GPUUtilizationHigh"] == "nvidia_smi_utilization_gpu_ratio > 0.9"
    assert exprs["GPUMemoryUsedHigh"] == "nvidia_smi_memory_used_bytes / nvidia_smi_memory_total_bytes > 0.9"
    assert exprs["GPUTemperatureHigh"] == "nvidia_smi_temperature_gpu > 80"
    assert exprs["GPUExporterDown"] == 'up{job="kgpu-exporter"} == 0'
    assert "nvidia_smi_xid_last_timestamp_seconds" in exprs["GPUXidErrors"]
    assert "nvidia_smi_ecc_errors_uncorrected" in exprs["GPUEccUncorrectedErrors"]


def test_for_override_and_job() -> None:
    rules = alert_rules_file(job="gpu", for_="0s")["groups"][0]["rules"]
    assert {r["for"] for r in rules} == {"0s"}
    assert any(r["expr"] == 'up{job="gpu"} == 0' for r in rules)


def test_scrape_config_spells_labels() -> None:
    """Seed 002's on-prem job, with `labels` (the seed's `lables` is rejected with a hint)."""
    cfg = scrape_config(
        [
            {"targets": ["192.168.2.23:9835"], "labels": {"gpu": "nvidia-4090", "app": "gpu-exporter"}},
            {"targets": ["192.168.2.26:9835"], "labels": {"gpu": "nvidia-4080", "app": "gpu-exporter"}},
        ]
    )
    assert cfg["job_name"] == "kgpu-exporter"
    assert cfg["static_configs"][0] == {
        "targets": ["192.168.2.23:9835"],
        "labels": {"gpu": "nvidia-4090", "app": "gpu-exporter"},
    }
    with pytest.raises(InputError, match="did you mean 'labels'"):
        scrape_config([{"targets": ["192.168.2.23:9835"], "lables": {"gpu": "x"}}])
    with pytest.raises(InputError, match=r"static_targets\[0\]\.targets"):
        scrape_config([{"targets": []}])


@pytest.mark.integration
def test_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(alert_rules_file()))
    cfg = monitoring.prometheus_config([{"targets": ["10.0.0.5:9835"]}], rule_files=["rules.yml"])
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    result = subprocess.run(
        [promtool(), "check", "config", "prometheus.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def render(**overrides: Any) -> dict[str, dict[str, Any]]:
    args: dict[str, Any] = {
        "image": "ghcr.io/kgpu/kgpu:0.1.0",
        "gpu_node_selector_terms": GPU_TERMS,
        "tolerations": TOLERATIONS,
        "static_targets": [],
    } | overrides
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in render_monitoring(**args)}


def test_daemonset() -> None:
    """GPU nodes only, caller's tolerations, pod-resources read-only, `kgpu exporter --listen :9835`."""
    ds = render(namespace="monitoring")["DaemonSet/kgpu-exporter"]
    assert ds["metadata"]["namespace"] == "monitoring"
    spec = ds["spec"]["template"]["spec"]
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ] == (GPU_TERMS)
    assert spec["tolerations"] == TOLERATIONS
    assert "hostPID" not in spec
    (c,) = spec["containers"]
    assert c["args"] == ["exporter", "--listen", ":9835"]
    assert c["image"] == "ghcr.io/kgpu/kgpu:0.1.0"
    assert "nvidia.com/gpu" not in json.dumps(c["resources"]), "the exporter must not take a GPU"
    (mount,) = c["volumeMounts"]
    assert mount == {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}
    assert spec["volumes"][0]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]


def test_service_monitor_selects_service_and_rule_kind() -> None:
    objs = render()
    svc, sm = objs["Service/kgpu-exporter"], objs["ServiceMonitor/kgpu-exporter"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert svc["spec"]["ports"][0]["port"] == 9835
    rule = objs["PrometheusRule/kgpu-gpu-alerts"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == alert_rules_file()
    assert set(objs) >= {"Namespace/kgpu-system", "ConfigMap/kgpu-gpu-dashboard"}
    assert "ConfigMap/kgpu-prometheus-onprem" not in objs


def test_static_targets_add_plain_prometheus_files() -> None:
    objs = render(static_targets=[{"targets": ["192.168.2.23:9835"], "labels": {"gpu": "nvidia-4090"}}])
    data = objs["ConfigMap/kgpu-prometheus-onprem"]["data"]
    prom = yaml.safe_load(data["prometheus.yml"])
    assert prom["scrape_configs"][0]["static_configs"][0]["labels"] == {"gpu": "nvidia-4090"}
    assert yaml.safe_load(data["kgpu-gpu.rules.yml"]) == alert_rules_file()


def test_dashboard_queries_kgpu_metrics() -> None:
    """Every dashboard query names a metric the exporter serves."""
    from fakes.fake_nvml import FakeNvml
    from kgpu.exporter.collector import CollectorOptions, GpuCollector
    from kgpu.exporter.nvml import Nvml
    from kgpu.exporter.podresources import PodResources
    from kgpu.exporter.xid import XidWatcher

    nvml = Nvml(FakeNvml())
    collector = GpuCollector(
        nvml, options=CollectorOptions(), xid=XidWatcher(nvml), pods=PodResources(lambda: b""), hostname="h"
    )
    served = {f.name for f in collector.build()} | {
        f.name + "_total" for f in collector.build() if f.type == "counter"
    }
    served |= {"nvidia_smi_gpu_pod_info"}  # present only while a pod holds a GPU
    dash = grafana.grafana_dashboard()
    import re

    for panel in dash["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"\b(nvidia_smi_[a-z_]+)\{", target["expr"]):
                assert name in served, f"{panel['title']}: {name}"
    cm = render()["ConfigMap/kgpu-gpu-dashboard"]
    assert json.loads(cm["data"]["kgpu-gpu.json"])["uid"] == "kgpu-gpu"


def test_render_requires_node_selector_terms() -> None:
    with pytest.raises(InputError, match="node selector term"):
        render(gpu_node_selector_terms=[])


OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}


def promtool_check_files(tmp_path: Path, files: dict[str, str]) -> str:
    """Write the ConfigMap's files as Prometheus would mount them; `promtool check config` (which loads
    the rules file prometheus.yml names) and `promtool check rules` must pass."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    config = subprocess.run(
        [promtool(), "check", "config", "prometheus.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert config.returncode == 0, config.stdout + config.stderr
    rules = subprocess.run(
        [promtool(), "check", "rules", monitoring.RULES_FILE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 7 rules found" in rules.stdout
    return config.stdout


@pytest.mark.integration
def test_without_prometheus_operator_plain_files_and_no_operator_kinds(tmp_path: Path) -> None:
    """prometheusOperator false, in a cluster: no ServiceMonitor or PrometheusRule (kinds a cluster without
    the operator does not have); a ConfigMap with prometheus.yml (DNS discovery of the headless exporter
    Service, the profile's job) and the rules file, both passing the real promtool."""
    objs = render(prometheus_operator=False, namespace="monitoring", job="gpu-exporter")
    assert not {o["kind"] for o in objs.values()} & OPERATOR_KINDS
    data = objs["ConfigMap/kgpu-prometheus"]["data"]
    out = promtool_check_files(tmp_path, data)
    assert "SUCCESS: 1 rule files found" in out
    (job,) = yaml.safe_load(data["prometheus.yml"])["scrape_configs"]
    assert job["job_name"] == "gpu-exporter"
    svc = objs["Service/kgpu-exporter"]
    assert svc["spec"]["clusterIP"] == "None"  # headless: one A record per exporter pod
    assert job["dns_sd_configs"] == [
        {
            "names": [f"{svc['metadata']['name']}.monitoring.svc"],
            "type": "A",
            "port": svc["spec"]["ports"][0]["port"],
        }
    ]
    rules = yaml.safe_load(data[monitoring.RULES_FILE])
    assert rules == alert_rules_file(job="gpu-exporter")
    assert 'up{job="gpu-exporter"} == 0' in data[monitoring.RULES_FILE]


@pytest.mark.integration
def test_onprem_without_operator_keeps_static_targets(tmp_path: Path) -> None:
    """The on-prem profile with prometheusOperator false: through `render`, no operator kinds; the
    ConfigMap's scrape job names the hosts (static targets), and promtool accepts it."""
    from kgpu.model.profile import builtin_profile
    from kgpu.render.stack import render_stack

    profile = builtin_profile("onprem")
    profile = profile.model_copy(
        update={"monitoring": profile.monitoring.model_copy(update={"prometheus_operator": False})}
    )
    docs = render_stack(profile, ["monitoring"])["monitoring"]
    assert not {d["kind"] for d in docs} & OPERATOR_KINDS
    (cm,) = [d for d in docs if d["metadata"]["name"] == "kgpu-prometheus-onprem"]
    promtool_check_files(tmp_path, cm["data"])
    (job,) = yaml.safe_load(cm["data"]["prometheus.yml"])["scrape_configs"]
    assert "dns_sd_configs" not in job
    assert all(t.endswith(":9835") for c in job["static_configs"] for t in c["targets"])
    with_operator = render_stack(builtin_profile("onprem"), ["monitoring"])["monitoring"]
    assert {d["kind"] for d in with_operator} >= OPERATOR_KINDS

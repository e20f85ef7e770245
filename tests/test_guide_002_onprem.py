"""Seed 002's on-prem rows, each from the guide's own text: the container toolkit installed with the guide's
yum commands (a CentOS 7 host has yum and no dnf); the device plugin through NVIDIA's Helm chart; the
image's CUDA against the GPU's architecture; the guide's Grafana dashboard 14574."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.doctor import doctor_report
from kgpu.render import grafana, onprem, validate

CHART_VALUES = Path(str(resources.files("kgpu.render") / "schemas" / "nvidia-device-plugin.helm-values.yaml"))

CENTOS7 = 'NAME="CentOS Linux"\nVERSION="7 (Core)"\nID="centos"\nID_LIKE="rhel fedora"\nVERSION_ID="7"\n'
# The repository file NVIDIA serves at the guide's URL (nvidia.github.io/libnvidia-container/stable/rpm/).
TOOLKIT_REPO = """[nvidia-container-toolkit]
name=nvidia-container-toolkit
baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch
repo_gpgcheck=1
gpgcheck=0
enabled=1
gpgkey=https://nvidia.github.io/libnvidia-container/gpgkey
sslverify=1
sslcacert=/etc/pki/tls/certs/ca-bundle.crt

[nvidia-container-toolkit-experimental]
name=nvidia-container-toolkit-experimental
baseurl=https://nvidia.github.io/libnvidia-container/experimental/rpm/$basearch
repo_gpgcheck=1
gpgcheck=0
enabled=0
gpgkey=https://nvidia.github.io/libnvidia-container/gpgkey
sslverify=1
sslcacert=/etc/pki/tls/certs/ca-bundle.crt
"""
# Seed 002, section 2.1, verbatim.
GUIDE_YUM = """curl -s -L https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo | \\
  sudo tee /etc/yum.repos.d/nvidia-container-toolkit.repo

yum-config-manager --enable nvidia-container-toolkit-experimental

yum install -y nvidia-container-toolkit"""


def _yum_host(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A CentOS 7 host under tmp_path/root: driver present (nvidia-smi), no toolkit yet (no nvidia-ctk),
    yum and yum-config-manager (no dnf) and curl as stubs that log their arguments, containerd 2.x."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text(CENTOS7)
    runtime = root / onprem.RUNTIME.lstrip("/")
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "commands.log"
    (tmp_path / "repo").write_text(TOOLKIT_REPO)
    stubs = {
        "nvidia-smi": "echo 570.86.15",
        "yum": f'echo "yum $*" >> {log}',
        "yum-config-manager": f'echo "yum-config-manager $*" >> {log}',
        "curl": f'echo "curl $*" >> {log}; cat {tmp_path / "repo"}',
        "systemctl": f'echo "systemctl $*" >> {log}',
        "containerd": "echo 'containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7'",
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    assert shutil.which("dnf", path=path) is None and shutil.which("nvidia-ctk", path=path) is None
    env = {"PATH": path, "KGPU_ROOT": str(root), "HOME": str(tmp_path)}
    return root, env, log


def _script(tmp_path: Path) -> Path:
    script = tmp_path / onprem.BOOTSTRAP
    script.write_text(onprem.bootstrap_script())
    script.chmod(0o755)
    return script


def test_yum_host_installs_the_toolkit_with_the_guides_commands(tmp_path: Path) -> None:
    """On a yum-only host the bootstrap runs the guide's steps: NVIDIA's repository file from the guide's
    URL into /etc/yum.repos.d/nvidia-container-toolkit.repo, then `yum install -y nvidia-container-toolkit`;
    the experimental channel only when asked (NVIDIA_TOOLKIT_EXPERIMENTAL=1, the guide's
    yum-config-manager line). dnf is never called."""
    root, env, log = _yum_host(tmp_path)
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    words = GUIDE_YUM.split()
    url = words[words.index("-L") + 1]
    repo_file = words[words.index("tee") + 1]
    assert (root / repo_file.lstrip("/")).read_text() == TOOLKIT_REPO
    calls = log.read_text().splitlines()
    assert calls[0] == f"curl -fsSL {url}"
    assert "yum install -y -q nvidia-container-toolkit" in calls
    assert not any("experimental" in c for c in calls)
    assert calls[-1] == "systemctl restart containerd"

    log.unlink()
    (root / "etc/yum.repos.d/nvidia-container-toolkit.repo").unlink()
    env["NVIDIA_TOOLKIT_EXPERIMENTAL"] = "1"
    again = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    calls = log.read_text().splitlines()
    enable = "yum-config-manager --enable nvidia-container-toolkit-experimental"
    assert enable in GUIDE_YUM and enable in calls
    assert calls.index(enable) < calls.index("yum install -y -q nvidia-container-toolkit")


def test_yum_host_without_a_driver_takes_nvidias_rhel7_repository(tmp_path: Path) -> None:
    """No nvidia-smi: the driver comes from NVIDIA's CUDA repository for rhel7 with yum (latest-dkms: RHEL 7
    has no per-branch DKMS flavor and no module streams)."""
    _root, env, log = _yum_host(tmp_path)
    (tmp_path / "bin/nvidia-smi").unlink()
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    arch = os.uname().machine
    assert (
        f"yum-config-manager --add-repo https://developer.download.nvidia.com/compute/cuda/repos/rhel7/{arch}/"
        "cuda-rhel7.repo" in calls
    )
    assert "yum install -y -q nvidia-driver-latest-dkms" in calls
    assert not any(c.startswith("dnf") for c in calls)


def test_rpm_host_without_dnf_or_yum_stops_with_an_error(tmp_path: Path) -> None:
    """Neither package manager: one error line, non-zero, nothing installed."""
    root, env, log = _yum_host(tmp_path)
    (tmp_path / "bin/yum").unlink()
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "neither dnf nor yum is installed" in result.stderr
    assert not (root / "etc/yum.repos.d/nvidia-container-toolkit.repo").exists()
    assert not log.exists()


# --- 2.2: "生产建议用helm部署" (production: deploy the plugin with Helm) ----------------------------------------


def _onprem_profile(tmp_path: Path, change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    path = tmp_path / "kgpu.yaml"
    res = CliRunner().invoke(cli, ["init", "-t", "onprem", "-f", str(path), "--force"])
    assert res.exit_code == 0, res.output
    if change is not None:
        data = yaml.safe_load(path.read_text())
        change(data)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _helm(data: dict[str, Any]) -> None:
    data.setdefault("devicePlugin", {})["install"] = "helm"


def test_helm_install_renders_the_charts_values_instead_of_the_daemonset(tmp_path: Path) -> None:
    """devicePlugin.install: helm writes device-plugin-chart-values.yaml (headed by the helm command) and no
    device-plugin.yaml; the values carry the guide's toleration (nvidia.com/gpu Exists NoSchedule), the
    guide's node label gpu-node=true as the required affinity, and only keys of the chart's values.yaml."""
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli, ["render", "-f", str(_onprem_profile(tmp_path, _helm)), "--output-dir", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert not (out / "device-plugin.yaml").exists()
    text = (out / "device-plugin-chart-values.yaml").read_text()
    assert "helm upgrade -i nvdp nvdp/nvidia-device-plugin --namespace kube-system --version 0.20.0" in text
    assert "device-plugin-chart" not in (out / "kustomization.yaml").read_text()
    values = yaml.safe_load(text)
    assert values["image"] == {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "gpu-node", "operator": "In", "values": ["true"]} in terms[0]["matchExpressions"]
    upstream = yaml.safe_load(CHART_VALUES.read_text())
    for key, value in values.items():
        assert key in upstream
        if isinstance(value, dict) and upstream[key]:
            assert set(value) <= set(upstream[key])
    assert validate.chart_values_errors(values, validate.CHART_VALUES["device-plugin-chart"]) == []

    checked = CliRunner().invoke(
        cli,
        [
            "render",
            "-f",
            str(_onprem_profile(tmp_path, _helm)),
            "--target",
            "device-plugin-chart",
            "--validate",
        ],
    )
    assert checked.exit_code == 0, checked.output

    piped = CliRunner().invoke(cli, ["render", "-f", str(_onprem_profile(tmp_path, _helm))])
    assert piped.exit_code == 0, piped.output
    assert "nvidia-device-plugin-daemonset" not in piped.stdout
    assert "note: left out device-plugin-chart-values.yaml" in piped.stderr


def test_packaged_chart_values_are_nvidias_v0_20_0_file() -> None:
    """The packaged values.yaml is the chart's file at v0.20.0, byte for byte (the checksum SOURCES.md
    records for deployments/helm/nvidia-device-plugin/values.yaml)."""
    digest = hashlib.sha256(CHART_VALUES.read_bytes()).hexdigest()
    sources = (CHART_VALUES.parent / "SOURCES.md").read_text()
    assert f"{digest}  nvidia-device-plugin.helm-values.yaml" in sources


def test_chart_values_check_names_a_misspelt_key_and_a_wrong_shape() -> None:
    """Helm ignores a key the chart does not have; the check names it, and a map given for a scalar."""
    errors = validate.chart_values_errors(
        {
            "tolerationz": [],
            "image": {"tag": "v0.20.0", "digest": "x"},
            "migStrategy": "single",
            "priorityClassName": {"name": "x"},
        },
        validate.CHART_VALUES["device-plugin-chart"],
    )
    assert errors == [
        "tolerationz: not a value of the chart (nvidia-device-plugin.helm-values.yaml)",
        "image.digest: not a value of the chart (nvidia-device-plugin.helm-values.yaml)",
        "priorityClassName: the chart expects a str here, not a map",
    ]


def test_time_slicing_goes_into_the_charts_config_map(tmp_path: Path) -> None:
    """With time-slicing the plugin config is the chart's config.map `default` (the chart's own way to
    pass it); asked by name, the values render without devicePlugin.install: helm too."""

    def slicing(data: dict[str, Any]) -> None:
        data.setdefault("devicePlugin", {})["strategy"] = "time-slicing"

    res = CliRunner().invoke(
        cli, ["render", "-f", str(_onprem_profile(tmp_path, slicing)), "--target", "device-plugin-chart"]
    )
    assert res.exit_code == 0, res.output
    values = yaml.safe_load(res.stdout)
    assert values["config"]["default"] == "default"
    config = yaml.safe_load(values["config"]["map"]["default"])
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]


# --- GPU architecture against the image's CUDA ----------------------------------------------------------------

# Seed 002's verify pod and its Dockerfile's base image, verbatim.
GUIDE_VERIFY_POD = """apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
spec:
  restartPolicy: Never
  containers:
    - name: cuda-container
      image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda10.2
      resources:
        limits:
          nvidia.com/gpu: 1 # requesting 1 GPU
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
"""
GUIDE_BASE_IMAGE = "nvidia/cuda:10.0-cudnn7-devel-centos7"  # "FROM nvidia/cuda:10.0-cudnn7-devel-centos7"
RTX_4090_GFD = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.count": "2",
    "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090",
    "nvidia.com/gpu.family": "ada-lovelace",
    "nvidia.com/gpu.compute.major": "8",
    "nvidia.com/gpu.compute.minor": "9",
    "nvidia.com/gpu.memory": "24564",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "127",
    "nvidia.com/cuda.driver.rev": "05",
}


def onprem_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    gpus: int | None = 2,
    ip: str = "192.168.2.23",
) -> dict[str, Any]:
    """A kubeadm-joined CentOS 7 GPU host as `kubectl get node -o json` shows it (seed 002's k8s-node05:
    labelled gpu-node=true by hand); ``gpus`` None: no device plugin has advertised nvidia.com/gpu."""
    capacity = {
        "cpu": "32",
        "ephemeral-storage": "51175Mi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "131811244Ki",
        "pods": "110",
    }
    allocatable = {**capacity, "ephemeral-storage": "48294789041", "memory": "131708844Ki"}
    if gpus is not None:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///var/run/containerd/containerd.sock",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": "2026-11-20T08:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **(labels or {}),
            },
            "name": name,
            "resourceVersion": "884211",
            "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        },
        "spec": {"podCIDR": "10.244.5.0/24", "podCIDRs": ["10.244.5.0/24"]},
        "status": {
            "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2026-11-22T09:58:00Z",
                    "lastTransitionTime": "2026-11-20T08:01:00Z",
                }
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.6.33",
                "kernelVersion": "3.10.0-1160.119.1.el7.x86_64",
                "kubeProxyVersion": "v1.28.15",
                "kubeletVersion": "v1.28.15",
                "operatingSystem": "linux",
                "osImage": "CentOS Linux 7 (Core)",
            },
        },
    }


def _bound(manifest: dict[str, Any], node: str, image: str | None = None) -> dict[str, Any]:
    """The guide's pod as the API server returns it once scheduled and running on ``node``."""
    pod = yaml.safe_load(yaml.safe_dump(manifest))
    pod["metadata"].update({"namespace": "default", "uid": f"uid-{pod['metadata']['name']}"})
    pod["spec"]["nodeName"] = node
    if image:
        pod["spec"]["containers"][0]["image"] = image
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def _snapshot(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _findings(doc: dict[str, Any], check: str) -> list[Any]:
    return doctor_report(doc).by_check(check)


def test_guides_cuda_10_images_on_an_rtx_4090_are_flagged() -> None:
    """RTX 4090 (GFD: compute capability 8.9) running the guide's vectoradd-cuda10.2 pod and a pod on its
    Dockerfile's nvidia/cuda:10.0 base: CUDA 10 compiles up to 7.5, so only PTX can run there (warning),
    and the fix names CUDA 11.8, the first release with sm_89. The driver check stays quiet: 550 runs CUDA
    10 fine."""
    manifest = yaml.safe_load(GUIDE_VERIFY_POD)
    tf = yaml.safe_load(GUIDE_VERIFY_POD)
    tf["metadata"]["name"] = "tf-train"
    doc = _snapshot(
        [
            onprem_node("k8s-node05", labels={"gpu-node": "true", **RTX_4090_GFD}),
            _bound(manifest, "k8s-node05"),
            _bound(tf, "k8s-node05", GUIDE_BASE_IMAGE),
        ]
    )
    found = _findings(doc, "cuda-arch-unsupported")
    assert [(f.severity, f.object) for f in found] == [
        ("warning", "Pod/default/gpu-pod"),
        ("warning", "Pod/default/tf-train"),
    ]
    sample = found[0]
    assert "NVIDIA-GeForce-RTX-4090 (compute capability 8.9)" in sample.message
    assert "CUDA 10.2 compiles for (up to 7.5)" in sample.message
    assert "no kernel image is available for execution on the device" in sample.message
    assert "CUDA >= 11.8 (the first release with sm_89" in sample.fix
    assert "CUDA 10.0" in found[1].message and GUIDE_BASE_IMAGE in found[1].message
    assert _findings(doc, "cuda-driver-insufficient") == []


def test_cuda_arch_within_a_major_and_unlabelled_nodes_are_not_flagged() -> None:
    """A cubin for 8.0 runs on 8.6 (same major): CUDA 11.0 on an A10 is fine; a node without GFD's compute
    labels is not judged."""
    a10 = {**RTX_4090_GFD, "nvidia.com/gpu.product": "NVIDIA-A10", "nvidia.com/gpu.compute.minor": "6"}
    bare = {k: v for k, v in RTX_4090_GFD.items() if "compute" not in k}
    manifest = yaml.safe_load(GUIDE_VERIFY_POD)
    other = yaml.safe_load(GUIDE_VERIFY_POD)
    other["metadata"]["name"] = "gpu-pod-2"
    doc = _snapshot(
        [
            onprem_node("k8s-node05", labels=a10),
            onprem_node("k8s-node06", labels=bare, ip="192.168.2.26"),
            _bound(manifest, "k8s-node05", "nvidia/cuda:11.0.3-runtime-ubuntu20.04"),
            _bound(other, "k8s-node06", GUIDE_BASE_IMAGE),
        ]
    )
    assert _findings(doc, "cuda-arch-unsupported") == []


def test_cuda_13_image_on_a_volta_gpu_is_an_error() -> None:
    """CUDA 13.0 dropped offline compilation for Maxwell, Pascal and Volta: on a V100 (7.0) an image built
    on it has no code at all (error), and the fix names the last release that builds for 7.0 (12.9)."""
    v100 = {
        **RTX_4090_GFD,
        "nvidia.com/gpu.product": "Tesla-V100-PCIE-32GB",
        "nvidia.com/gpu.compute.major": "7",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/cuda.driver.minor": "65",
        "nvidia.com/cuda.driver.rev": "06",
    }
    doc = _snapshot(
        [
            onprem_node("k8s-node07", labels=v100),
            _bound(yaml.safe_load(GUIDE_VERIFY_POD), "k8s-node07", "nvidia/cuda:13.0.1-runtime-ubuntu24.04"),
        ]
    )
    [f] = _findings(doc, "cuda-arch-unsupported")
    assert f.severity == "error"
    assert "builds no code below compute capability 7.5" in f.message
    assert "CUDA <= 12.9" in f.fix


# --- Grafana dashboard 14574 ("# 面板 https://grafana.com/grafana/dashboards/14574-nvidia-gpu-metrics/") ----------

EXPRS = Path(__file__).parent / "fixtures" / "monitoring" / "grafana-14574.exprs.txt"
DASHBOARD = Path(str(resources.files("kgpu.render") / "dashboards" / "grafana-14574.json"))


def _exprs(dashboard: dict[str, Any]) -> set[str]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in panels:
            yield panel
            yield from walk(panel.get("panels") or [])

    return {t["expr"] for p in walk(dashboard["panels"]) for t in p.get("targets") or [] if "expr" in t}


def _reference_exprs(version: str) -> set[str]:
    """The expressions the reference file lists for one revision of dashboard 14574."""
    out: set[str] = set()
    section = ""
    for line in EXPRS.read_text().splitlines():
        if line.startswith("====="):
            section = line
        elif f"dash14574_{version}" in section and line.startswith("["):
            out.add(line.split(": ", 1)[1])
    return out


def test_monitoring_renders_dashboard_14574_wired_to_the_rendered_datasource(tmp_path: Path) -> None:
    """The guide's dashboard, by id, beside kgpu's own: a sidecar ConfigMap with 14574 unchanged (every
    expression of the current revision, gnetId 14574), its `datasource` variable starting on the uid of
    the Grafana data source rendered for the guide's Prometheus (monitoring.prometheusUrl)."""

    def prometheus(data: dict[str, Any]) -> None:
        data.setdefault("monitoring", {}).update(
            {"prometheusUrl": "http://192.168.2.10:9090", "grafanaDatasourceUid": "onprem-prom"}
        )

    res = CliRunner().invoke(
        cli, ["render", "-f", str(_onprem_profile(tmp_path, prometheus)), "--target", "monitoring"]
    )
    assert res.exit_code == 0, res.output
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(res.stdout) if d}
    board_cm, ours = docs["kgpu-gpu-dashboard-14574"], docs["kgpu-gpu-dashboard"]
    assert (
        board_cm["metadata"]["labels"]["grafana_dashboard"] == ours["metadata"]["labels"]["grafana_dashboard"]
    )
    board = json.loads(board_cm["data"]["nvidia-gpu-metrics-14574.json"])
    assert board["gnetId"] == 14574 and board["title"] == "Nvidia GPU Metrics"
    assert _exprs(board) == _reference_exprs("head")
    [var] = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert var["current"]["value"] == "onprem-prom"
    source = yaml.safe_load(docs["kgpu-grafana-datasource"]["data"]["kgpu-datasource.yaml"])
    assert source["datasources"] == [
        {
            "name": "Prometheus (kgpu)",
            "type": "prometheus",
            "uid": "onprem-prom",
            "access": "proxy",
            "url": "http://192.168.2.10:9090",
        }
    ]
    assert docs["kgpu-grafana-datasource"]["metadata"]["labels"]["grafana_datasource"] == "1"
    # unchanged otherwise: the packaged file with only the variable's start and the id
    packaged = json.loads(DASHBOARD.read_text())
    for v in packaged["templating"]["list"]:
        if v["type"] == "datasource":
            v["current"] = var["current"]
    assert board == packaged


def test_packaged_dashboard_is_the_reference_file() -> None:
    """Byte for byte what dashboards/SOURCES.md records."""
    digest = hashlib.sha256(DASHBOARD.read_bytes()).hexdigest()
    assert f"{digest}  grafana-14574.json" in (DASHBOARD.parent / "SOURCES.md").read_text()


def test_an_externally_exported_dashboard_gets_its_ds_prometheus_input_wired() -> None:
    """Exported "for sharing externally", 14574 names its data source ${DS_PROMETHEUS} through __inputs,
    which Grafana resolves only in its import dialog: a sidecar-loaded copy would say "Datasource
    ${DS_PROMETHEUS} was not found". Wired, every panel names the uid and the inputs are gone."""
    text = DASHBOARD.read_text().replace("${datasource}", "${DS_PROMETHEUS}")
    exported = json.loads(text)
    exported["__inputs"] = [
        {
            "name": "DS_PROMETHEUS",
            "label": "Prometheus",
            "description": "",
            "type": "datasource",
            "pluginId": "prometheus",
            "pluginName": "Prometheus",
        }
    ]
    wired = grafana.wire_datasource(exported, "prometheus")
    assert "${DS_PROMETHEUS}" not in json.dumps(wired) and "__inputs" not in wired
    uids = {
        t["datasource"]["uid"] for p in wired["panels"] for t in p.get("targets") or [] if t.get("datasource")
    }
    assert uids == {"prometheus"}
    assert _exprs(wired) == _exprs(json.loads(DASHBOARD.read_text()))


def test_without_a_prometheus_url_no_datasource_is_rendered(tmp_path: Path) -> None:
    """kube-prometheus-stack provisions its own Prometheus data source (uid prometheus): by default kgpu
    renders none and the dashboard starts on that uid."""
    res = CliRunner().invoke(cli, ["render", "-f", str(_onprem_profile(tmp_path)), "--target", "monitoring"])
    assert res.exit_code == 0, res.output
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(res.stdout) if d}
    assert "kgpu-grafana-datasource" not in docs
    board = json.loads(docs["kgpu-gpu-dashboard-14574"]["data"]["nvidia-gpu-metrics-14574.json"])
    assert [v["current"]["value"] for v in board["templating"]["list"] if v["type"] == "datasource"] == [
        "prometheus"
    ]


# --- a GPU host before GFD, NFD's labels or the plugin: "kubectl describe no k8s-node05 | grep gpu" ----------


def _node_findings(node: dict[str, Any], *pods: dict[str, Any]) -> dict[str, list[Any]]:
    report = doctor_report(_snapshot([node, *pods]))
    out: dict[str, list[Any]] = {}
    for f in report.findings:
        out.setdefault(f.check, []).append(f)
    return out


@pytest.mark.parametrize(
    ("label", "reason"),
    [
        ("feature.node.kubernetes.io/pci-10de.present", "(an NVIDIA PCI device)"),  # NVIDIA's chart's NFD
        ("feature.node.kubernetes.io/pci-0300_10de.present", "per Node Feature Discovery"),  # NFD's default
        ("feature.node.kubernetes.io/pci-0302_10de.present", "per Node Feature Discovery"),  # 3D controller
    ],
)
def test_nfd_pci_label_makes_the_unplugged_host_a_gpu_node(label: str, reason: str) -> None:
    """The guide's k8s-node05 before the device plugin (gpu-node=true by hand, no nvidia.com/gpu yet), with
    NFD's PCI label in either naming: a GPU node that advertises no GPUs (error, the plugin is missing),
    not a CPU node."""
    found = _node_findings(onprem_node("k8s-node05", labels={"gpu-node": "true", label: "true"}, gpus=None))
    [f] = found["gpu-node-no-gpus"]
    assert f.object == "Node/k8s-node05" and f.severity == "error"
    assert label in f.message and reason in f.message
    assert "gpu-node-unrecognised" not in found


def test_nvidia_hdmi_audio_alone_is_not_a_gpu() -> None:
    """NFD labels NVIDIA's HDMI audio function (class 0403) too when its whitelist has class 04: not a GPU,
    so the hand-made label leaves doctor unable to tell."""
    labels = {"gpu-node": "true", "feature.node.kubernetes.io/pci-0403_10de.present": "true"}
    found = _node_findings(onprem_node("k8s-node05", labels=labels, gpus=None))
    assert "gpu-node-no-gpus" not in found
    assert [f.object for f in found["gpu-node-unrecognised"]] == ["Node/k8s-node05"]


def test_zero_gpu_capacity_left_by_a_removed_plugin_counts() -> None:
    """kubelet keeps nvidia.com/gpu at 0 once the plugin that registered it is gone: a GPU host whose
    plugin stopped, not a CPU node."""
    found = _node_findings(onprem_node("k8s-node05", labels={"gpu-node": "true"}, gpus=0))
    [f] = found["gpu-node-no-gpus"]
    assert "a device plugin registered GPUs here before" in f.message


def test_a_running_pod_with_the_nvidia_runtime_class_marks_its_node() -> None:
    """A Running pod with runtimeClassName nvidia proves the host's containerd has the nvidia handler (the
    guide's containerd config): a GPU host, though nothing else says so yet."""
    smi = yaml.safe_load(GUIDE_VERIFY_POD)
    smi["metadata"]["name"] = "nvidia-smi"
    smi["spec"]["runtimeClassName"] = "nvidia"
    del smi["spec"]["containers"][0]["resources"]
    found = _node_findings(
        onprem_node("k8s-node05", gpus=None), _bound(smi, "k8s-node05", "nvidia/cuda:12.4.1-base-ubuntu22.04")
    )
    [f] = found["gpu-node-no-gpus"]
    assert "pod default/nvidia-smi runs there with runtimeClassName nvidia" in f.message


def test_a_host_labelled_by_hand_only_is_one_doctor_cannot_tell() -> None:
    """Only the guide's own label gpu-node=true: doctor says it cannot tell (info, naming every sign it
    looked for and how to check on the host); a GPU-sounding node name alone is no hint."""
    found = _node_findings(onprem_node("k8s-node05", labels={"gpu-node": "true"}, gpus=None))
    [f] = found["gpu-node-unrecognised"]
    assert f.severity == "info" and "labelled gpu-node=true" in f.message
    assert "cannot tell whether it is a GPU host" in f.message
    for sign in (
        "nvidia.com/gpu.present",
        "feature.node.kubernetes.io/pci-10de.present",
        "nvidia.com/gpu capacity",
        "nvidia runtime class",
    ):
        assert sign in f.message
    assert "lspci -nn | grep -i nvidia" in f.fix and "kgpu node-check" in f.fix
    assert "gpu-node-no-gpus" not in found
    assert _node_findings(onprem_node("gpu-node-1", gpus=None)) == {}


# /etc/os-release as each distribution ships it (the fields the bootstrap reads).
AMAZON_LINUX_2 = 'NAME="Amazon Linux"\nVERSION="2"\nID="amzn"\nID_LIKE="centos rhel fedora"\nVERSION_ID="2"\n'
AMAZON_LINUX_2023 = 'NAME="Amazon Linux"\nVERSION="2023"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n'
FEDORA_41 = 'NAME="Fedora Linux"\nVERSION="41 (Server Edition)"\nID=fedora\nVERSION_ID=41\n'
ROCKY_9 = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'


@pytest.mark.parametrize(
    ("os_release", "with_dnf", "distro"),
    [
        (AMAZON_LINUX_2, False, "rhel7"),
        (AMAZON_LINUX_2023, True, "amzn2023"),
        (FEDORA_41, True, "fedora41"),
        (ROCKY_9, True, "rhel9"),
    ],
    ids=["al2", "al2023", "fedora41", "rocky9"],
)
def test_driver_repository_is_the_one_nvidia_publishes_for_the_host(
    tmp_path: Path, os_release: str, with_dnf: bool, distro: str
) -> None:
    """NVIDIA's CUDA repositories are per distribution (rhel9, fedora41, amzn2023): Amazon Linux 2023 is not
    `rhel2023`, nor Fedora `rhel41`; Amazon Linux 2, an EL7 derivative without a repository of its own, takes
    rhel7 with yum."""
    root, env, log = _yum_host(tmp_path)
    (root / "etc/os-release").write_text(os_release)
    (tmp_path / "bin/nvidia-smi").unlink()
    if with_dnf:
        (tmp_path / "bin/dnf").write_text(f'#!/bin/sh\necho "dnf $*" >> {log}\n')
        (tmp_path / "bin/dnf").chmod(0o755)
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    url = f"https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{os.uname().machine}/cuda-{distro}.repo"
    tool = "dnf config-manager" if with_dnf else "yum-config-manager"
    assert f"{tool} --add-repo {url}" in calls, calls


def test_debian_host_writes_the_toolkit_keyring_and_source_under_its_root(tmp_path: Path) -> None:
    """On apt hosts the toolkit's keyring and source list go where the rest of the script writes (KGPU_ROOT
    prefixes every file), and the list is signed by that keyring, as NVIDIA's install guide writes it."""
    root, env, log = _yum_host(tmp_path)
    (root / "etc/os-release").write_text('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n')
    listing = "deb https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    (tmp_path / "repo").write_text(listing)
    for name, body in {
        "apt-get": f'echo "apt-get $*" >> {log}',
        "gpg": 'while [ "$1" != -o ]; do shift; done; cat > "$2"',
    }.items():
        (tmp_path / "bin" / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    result = subprocess.run([str(_script(tmp_path))], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    keyring = root / "usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    assert keyring.read_text() == listing  # what curl served for the key, through gpg --dearmor
    source = (root / "etc/apt/sources.list.d/nvidia-container-toolkit.list").read_text()
    assert source.startswith(
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/"
    )
    assert "apt-get install -y -q nvidia-container-toolkit" in log.read_text()

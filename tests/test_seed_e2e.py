"""Each guide end to end, as a user follows it: ``kgpu init`` -> the guide's settings -> ``kgpu render
--validate`` -> ``kgpu plan`` on the guide's own workloads -> the outcome the guide expects."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.examples import example_files


def kgpu(*args: str, expect: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == expect, f"kgpu {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result.stdout


def follow_guide(
    tmp_path: Path, template: str, settings: Callable[[dict[str, Any]], None] | None = None
) -> tuple[Path, Path]:
    """init, apply the guide's settings to the profile, render --validate into manifests/."""
    profile = tmp_path / "kgpu.yaml"
    kgpu("init", "--template", template, "-f", str(profile))
    if settings is not None:
        data = yaml.safe_load(profile.read_text())
        settings(data)
        profile.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "manifests"
    kgpu("render", "-f", str(profile), "--validate", "-d", str(out))
    return profile, out


def plan(profile: Path, *workloads: Path, expect: int = 0) -> dict[str, Any]:
    args = ["plan", "-f", str(profile), "-o", "json"]
    for w in workloads:
        args += ["-w", str(w)]
    data: dict[str, Any] = json.loads(kgpu(*args, expect=expect))
    return data


def pods(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in result["pods"]}


def write_example(tmp_path: Path, name: str, provider: str | None = None) -> Path:
    path = tmp_path / name.replace("/", "_")
    path.write_bytes(dict(example_files(provider))[name])
    return path


# --- seed 003: TKE super nodes ---------------------------------------------------------------------------


def test_seed_003_every_example_gets_the_spec_the_guide_lists(tmp_path: Path) -> None:
    """The guide's examples run on super nodes with or without the guide's own toleration (TKE places pods
    that fit nowhere else itself), each with the spec the guide writes next to it. The two examples that
    contradict the guide's spec tables stay Pending with TKE's wording (docs/tke.md)."""
    profile, out = follow_guide(tmp_path, "tke-supernode")
    rendered = yaml.safe_load_all((out / "workloads.yaml").read_text())
    tolerations = [
        t for d in rendered if d and d["kind"] == "Job" for t in d["spec"]["template"]["spec"]["tolerations"]
    ]
    assert {
        "key": "eks.tke.cloud.tencent.com/eklet",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in tolerations
    workloads = write_example(tmp_path, "003-supernode-gpu-pods.yaml", "tke")
    contradicting = tmp_path / "003-contradicting-examples.yaml"
    contradicting.write_bytes(dict(example_files(seed="003-contradicting"))["003-contradicting-examples.yaml"])
    planned = plan(profile, workloads, contradicting, expect=1)
    result = pods(planned)
    notes = {n["pods"][0]: n["note"] for n in planned["new_nodes"]}
    assert (
        "no cpu and memory request: the smallest cpu and memory" in notes["default/gpu-workload-affinity-0"]
    )
    assert "request" not in notes["default/multi-gpu-priority"]
    specs = {name: p.get("instance_type") for name, p in result.items() if p["phase"] == "Provisioned"}
    assert specs == {
        "tensorflow-training-v100": "V100 1x 8C 40Gi",  # 最终分配: V100 1卡, 8核/40GiB
        **{f"inference-service-t4-mini-{i}": "1/4*T4 1x 4C 16Gi" for i in range(3)},  # 1/4 T4, 4核/16GiB
        **{f"inference-service-t4-half-{i}": "1/2*T4 1x 8C 32Gi" for i in range(2)},  # 1/2 T4, 8核/32GiB
        "multi-gpu-priority": "T4 1x 8C 32Gi",  # 优先尝试 T4
        **{f"gpu-workload-affinity-{i}": "A10*GNV4 1x 2C 2Gi" for i in range(2)},
        "multi-gpu-training-a10-0": "A10*PNV4 4x 112C 466Gi",  # A10 PNV4 4卡, 112核/466GiB
        "flexible-v100-pod": "V100 1x 2C 2Gi",  # V100 1卡, 2核/2GiB
        "gpu-inference-fast": "T4 1x 2C 2Gi",
        "gpu-training-multi": "V100 1x 2C 2Gi",
        "gpu-inference-cached": "T4 1x 2C 2Gi",
        **{f"gpu-inference-service-{i}": "T4 1x 8C 32Gi" for i in range(3)},
    }
    pending = {name: p["reason"] for name, p in result.items() if p["phase"] != "Provisioned"}
    assert set(pending) == {"pytorch-training-job-0", "large-model-inference-pnv5b"}
    assert "No matching instance type: T4 has no 2-GPU spec" in pending["pytorch-training-job-0"]
    assert "did you mean 'L20'" in pending["large-model-inference-pnv5b"]


def test_seed_003_without_auto_scheduling_only_tolerating_pods_run(tmp_path: Path) -> None:
    """With TKE's AUTO_SCALE_EKS off (autoSchedule: false), the super-node taint keeps out every pod that
    does not tolerate eks.tke.cloud.tencent.com/eklet: the guide's examples then all need a toleration."""

    def no_auto(data: dict[str, Any]) -> None:
        data["pools"][0]["autoSchedule"] = False

    profile, _ = follow_guide(tmp_path, "tke-supernode", no_auto)
    workloads = write_example(tmp_path, "003-supernode-gpu-pods.yaml", "tke")
    result = pods(plan(profile, workloads, expect=1))
    assert result["tensorflow-training-v100"]["phase"] == "Unschedulable"
    assert "untolerated taint" in result["tensorflow-training-v100"]["reason"]
    assert result["gpu-inference-fast"]["phase"] == "Unschedulable"  # tolerates serverless, not eklet


# --- seed 002: on-prem GPU hosts, nvidia_gpu_exporter scraped by a static Prometheus job ------------------


def _guide_002(data: dict[str, Any]) -> None:
    """The guide keeps its Prometheus job name, gpu-exporter, and scrapes the hosts at host:9835."""
    data["monitoring"] = {"jobName": "gpu-exporter"}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _promtool() -> str:
    import shutil

    path = shutil.which("promtool")
    assert path, "promtool is not installed: `make test` unpacks Debian's prometheus package into .cache/deb (make promtool)"
    return path


PROMTOOL_002 = """
rule_files: [kgpu-gpu.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'up{instance="192.168.2.23:9835", job="gpu-exporter", gpu="RTX 4090", node="k8s-node05"}'
        values: '0x10'
      - series: 'up{instance="192.168.2.26:9835", job="gpu-exporter", gpu="RTX 4080", node="k8s-node06"}'
        values: '1x10'
      - series: 'nvidia_smi_utilization_gpu_ratio{uuid="GPU-1", instance="192.168.2.26:9835", job="gpu-exporter"}'
        values: '0.95x10'
    alert_rule_test:
      - eval_time: 5m
        alertname: GPUExporterDown
        exp_alerts:
          - exp_labels: {severity: critical, instance: "192.168.2.23:9835", job: gpu-exporter,
                         gpu: RTX 4090, node: k8s-node05}
            exp_annotations:
              summary: The GPU exporter cannot be scraped
              description: Prometheus cannot scrape 192.168.2.23:9835 (job gpu-exporter).
      - eval_time: 6m
        alertname: GPUUtilizationHigh
        exp_alerts:
          - exp_labels: {severity: warning, uuid: GPU-1, instance: "192.168.2.26:9835", job: gpu-exporter}
            exp_annotations:
              summary: GPU utilization is above 90%
              description: GPU GPU-1 on 192.168.2.26:9835 is 95% busy.
"""


def test_seed_002_onprem_scrape_config_daemonset_and_alerts_agree(tmp_path: Path) -> None:
    """The rendered static scrape job (the guide's gpu-exporter, spelled `labels`) targets host:9835, the
    exporter DaemonSet listens there (hostNetwork + hostPort), the rules select that job and fire in promtool,
    and the guide's vector-add pod runs on a GPU host."""
    import subprocess

    profile, out = follow_guide(tmp_path, "onprem", _guide_002)
    docs = _docs(out / "monitoring.yaml")
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    ds = by_kind["DaemonSet", "kgpu-exporter"]["spec"]["template"]["spec"]
    assert ds["hostNetwork"] is True and ds["dnsPolicy"] == "ClusterFirstWithHostNet"
    (port,) = ds["containers"][0]["ports"]
    assert port["containerPort"] == port["hostPort"] == 9835
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in ds[
        "containers"
    ][0]["env"]
    service = by_kind["Service", "kgpu-exporter"]
    monitor = by_kind["ServiceMonitor", "kgpu-exporter"]
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "gpu-exporter"
    data = by_kind["ConfigMap", "kgpu-prometheus-onprem"]["data"]
    prom = yaml.safe_load(data["prometheus.yml"])
    (job,) = prom["scrape_configs"]
    assert job["job_name"] == "gpu-exporter"
    assert [c["targets"] for c in job["static_configs"]] == [["192.168.2.23:9835"], ["192.168.2.26:9835"]]
    assert all(t.endswith(f":{port['hostPort']}") for c in job["static_configs"] for t in c["targets"])
    operator_rules = by_kind["PrometheusRule", "kgpu-gpu-alerts"]["spec"]
    assert yaml.safe_load(data["kgpu-gpu.rules.yml"]) == operator_rules

    (tmp_path / "prometheus.yml").write_text(data["prometheus.yml"])
    (tmp_path / "kgpu-gpu.rules.yml").write_text(data["kgpu-gpu.rules.yml"])
    (tmp_path / "test.yml").write_text(PROMTOOL_002)
    for args in (["check", "config", "prometheus.yml"], ["test", "rules", "test.yml"]):
        result = subprocess.run(
            [_promtool(), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stdout + result.stderr

    work = write_example(tmp_path, "002-vector-add-pod.yaml")
    (pod,) = plan(profile, work)["pods"]
    assert pod["phase"] == "Scheduled" and pod["node"] in ("k8s-node05", "k8s-node06")


# --- seed 000: EKS + Karpenter GPU NodePool on an existing cluster ---------------------------------------

DLAMI = "Deep Learning OSS Nvidia Driver AMI GPU PyTorch * (Amazon Linux 2023) *"


def _guide_000(data: dict[str, Any]) -> None:
    """An existing cluster: the Deep Learning AMI (AL2023) by name, the cluster's own node role, subnets
    and security groups by its discovery tag; the guide's 30 s WhenEmpty consolidation."""
    data["cluster"]["name"] = "ml-cluster"
    gpu = next(p for p in data["pools"] if p["name"] == "gpu")
    gpu["amiSelectorTerms"] = [{"name": DLAMI, "owner": "amazon"}]
    gpu["role"] = "eks-ml-cluster-node-role"
    gpu["subnetSelectorTerms"] = [{"tags": {"karpenter.sh/discovery": "ml-cluster", "tier": "private"}}]
    gpu["securityGroupSelectorTerms"] = [{"id": "sg-0123456789abcdef0"}]
    gpu["consolidation"] = {"policy": "WhenEmpty", "after": "30s"}


def test_seed_000_dlami_nodeclass_and_every_example_on_spot_gpu_nodes(tmp_path: Path) -> None:
    """The EC2NodeClass selects the guide's Deep Learning AMI with amiFamily AL2023, the given role, subnets
    and security groups; the PyTorch Job and both TensorFlow Serving replicas land on new spot GPU nodes of
    the gpu NodePool (labelled node-type=gpu, tainted nvidia.com/gpu)."""
    profile, out = follow_guide(tmp_path, "eks-karpenter", _guide_000)
    docs = {(d["kind"], d["metadata"]["name"]): d for d in _docs(out / "karpenter.yaml")}
    nodeclass = docs["EC2NodeClass", "gpu"]["spec"]
    assert nodeclass["amiSelectorTerms"] == [{"name": DLAMI, "owner": "amazon"}]
    assert nodeclass["amiFamily"] == "AL2023"
    assert nodeclass["role"] == "eks-ml-cluster-node-role" and "instanceProfile" not in nodeclass
    assert nodeclass["subnetSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "ml-cluster", "tier": "private"}}
    ]
    assert nodeclass["securityGroupSelectorTerms"] == [{"id": "sg-0123456789abcdef0"}]
    nodepool = docs["NodePool", "gpu"]["spec"]
    assert nodepool["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert nodepool["disruption"]["consolidateAfter"] == "30s"

    work = [
        write_example(tmp_path, "000-pytorch-training.yaml"),
        write_example(tmp_path, "000-tensorflow-serving.yaml"),
    ]
    result = plan(profile, *work)
    placed = pods(result)
    assert set(placed) == {"pytorch-training-0", "tensorflow-serving-0", "tensorflow-serving-1"}
    for pod in placed.values():
        assert pod["phase"] == "Provisioned" and pod["pool"] == "gpu" and pod["capacity_type"] == "spot"
        assert pod["instance_type"].split(".")[0] in ("g4dn", "g5", "g6", "p3")


def test_seed_000_custom_ami_without_user_data_is_an_input_error(tmp_path: Path) -> None:
    """amiFamily Custom with a name selector but no userData: nodes would never join; exit 2 naming the field."""

    def custom(data: dict[str, Any]) -> None:
        gpu = next(p for p in data["pools"] if p["name"] == "gpu")
        gpu["amiFamily"] = "Custom"
        gpu["amiSelectorTerms"] = [{"name": DLAMI, "owner": "amazon"}]

    profile = tmp_path / "kgpu.yaml"
    kgpu("init", "--template", "eks-karpenter", "-f", str(profile))
    data = yaml.safe_load(profile.read_text())
    custom(data)
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(cli, ["render", "-f", str(profile)])
    assert result.exit_code == 2
    assert "pools[1]" in result.output and "needs userData" in result.output
    data["pools"][1]["userData"] = "#!/bin/bash\n/etc/eks/bootstrap.sh ml-cluster\n"
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    out = kgpu("render", "-f", str(profile), "--target", "karpenter", "--validate")
    nodeclass = next(
        d
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "EC2NodeClass" and d["metadata"]["name"] == "gpu"
    )
    assert nodeclass["spec"]["amiFamily"] == "Custom"
    assert nodeclass["spec"]["userData"].startswith("#!/bin/bash")


# --- seed 001: eksctl spot node groups per zone, cluster-autoscaler from zero -------------------------------


def test_seed_001_ten_replicas_scale_spot_gpu_groups_from_zero_with_consistent_tags(tmp_path: Path) -> None:
    """Every GPU group's ASG describes its labels and taint to cluster-autoscaler in the right form and is
    found by the chart's auto-discovery; the 10 cuda-vector-add replicas scale the per-zone spot groups
    from zero, balanced over the three zones."""
    profile, out = follow_guide(tmp_path, "eks-eksctl")
    (config,) = _docs(out / "eksctl.yaml")
    (values,) = _docs(out / "cluster-autoscaler-values.yaml")
    cluster = values["autoDiscovery"]["clusterName"]
    assert cluster == config["metadata"]["name"] == "gaia-kube"
    gpu_groups = [g for g in config["nodeGroups"] if g["name"].startswith("gpu-spot-ng-")]
    assert [g["name"] for g in gpu_groups] == ["gpu-spot-ng-a", "gpu-spot-ng-b", "gpu-spot-ng-c"]
    for group in gpu_groups:
        tags = group["tags"]
        # auto-discovery's default tags
        assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
        assert f"k8s.io/cluster-autoscaler/{cluster}" in tags
        for key, value in group["labels"].items():
            assert tags[f"k8s.io/cluster-autoscaler/node-template/label/{key}"] == value
        for taint in group["taints"]:
            tag = tags[f"k8s.io/cluster-autoscaler/node-template/taint/{taint['key']}"]
            assert tag == f"{taint.get('value', '')}:{taint['effect']}"
        assert not any("taint/dedicated" in k for k in tags)  # the guide's ineffective tag
        assert group["instancesDistribution"]["instanceTypes"] == ["p3.2xlarge"]  # one GPU count per group

    work = write_example(tmp_path, "001-cuda-vector-add.yaml")
    result = plan(profile, work)
    assert {p["phase"] for p in result["pods"]} == {"Provisioned"}
    assert len(result["pods"]) == 10
    zones: dict[str, int] = {}
    for node in result["new_nodes"]:
        assert node["capacity_type"] == "spot" and node["pool"] == "gpu-spot-ng"
        zones[node["zone"]] = zones.get(node["zone"], 0) + 1
    assert set(zones) == {"us-west-2a", "us-west-2b", "us-west-2c"}
    assert max(zones.values()) - min(zones.values()) <= 1


def test_seed_001_the_guides_mixed_gpu_group_warns_at_render(tmp_path: Path) -> None:
    """The guide's group of p3.2xlarge, p3.8xlarge and p3.16xlarge: render warns that cluster-autoscaler
    sizes it from zero as a 1-GPU p3.2xlarge, and plan shows a 4-GPU pod never scaling it up."""

    def guide_mix(data: dict[str, Any]) -> None:
        data["pools"][1]["instanceTypes"] = ["p3.2xlarge", "p3.8xlarge", "p3.16xlarge"]

    profile = tmp_path / "kgpu.yaml"
    kgpu("init", "--template", "eks-eksctl", "-f", str(profile))
    data = yaml.safe_load(profile.read_text())
    guide_mix(data)
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(cli, ["render", "-f", str(profile), "-d", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert "warning: pool gpu-spot-ng: pools[1].instanceTypes: mixes GPU counts" in result.output
    assert "p3.2xlarge, 1 GPU(s)" in result.output

    four = tmp_path / "four.yaml"
    four.write_text(
        """
apiVersion: v1
kind: Pod
metadata: {name: four-gpus}
spec:
  nodeSelector: {nvidia.com/gpu: "true"}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]
"""
    )
    (pod,) = plan(profile, four, expect=1)["pods"]
    assert pod["phase"] == "Unschedulable"


# --- seed 004: KubeRay on EKS managed node groups -------------------------------------------------------


def test_seed_004_ray_head_on_cpu_group_and_gpu_worker_on_bottlerocket_group(tmp_path: Path) -> None:
    """The CPU group (m5.xlarge, 256 GB) runs the head, the tainted Bottlerocket NVIDIA g5.xlarge group
    (1024 GB) the GPU worker; no device-plugin DaemonSet reaches the Bottlerocket group (plugin built in)."""
    profile, out = follow_guide(tmp_path, "kuberay")
    (config,) = _docs(out / "eksctl.yaml")
    groups = {g["name"]: g for g in config["managedNodeGroups"]}
    assert groups["cpu-node-group"]["instanceTypes"] == ["m5.xlarge"]
    assert groups["cpu-node-group"]["volumeSize"] == 256
    gpu = groups["gpu-node-group"]
    assert gpu["instanceTypes"] == ["g5.xlarge"] and gpu["volumeSize"] == 1024
    assert gpu["amiFamily"] == "Bottlerocket"
    assert gpu["taints"] == [{"key": "ray.io/node-type", "value": "worker", "effect": "NoSchedule"}]
    for g in groups.values():
        assert (g["minSize"], g["maxSize"], g["desiredCapacity"]) == (0, 1, 1)
    assert _docs(out / "device-plugin.yaml") == []  # the only GPU group has the plugin built in

    work = write_example(tmp_path, "004-raycluster.yaml")
    placed = pods(plan(profile, work))
    assert placed["raycluster-gpu-head-0"]["node"].startswith("cpu-node-group")
    assert placed["raycluster-gpu-gpu-group-worker-0"]["node"].startswith("gpu-node-group")
    assert {p["phase"] for p in placed.values()} == {"Scheduled"}


def test_plan_without_f_uses_kgpu_yaml_in_the_current_directory(tmp_path: Path, monkeypatch: Any) -> None:
    """As render does: ./kgpu.yaml when it exists, else the built-in default; it says which (on stderr for
    tables, as profile_file in JSON)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["plan"])
    assert "profile: the built-in template eks-karpenter" in result.stderr
    assert json.loads(kgpu("plan", "-o", "json"))["profile_file"] is None
    kgpu("init", "--template", "eks-eksctl", "-f", "kgpu.yaml")
    result = CliRunner().invoke(cli, ["plan"])
    assert result.exit_code in (0, 1), result.output
    assert "profile: kgpu.yaml (eks-eksctl)" in result.stderr
    data = json.loads(CliRunner().invoke(cli, ["plan", "-o", "json"]).stdout)
    assert (data["profile"], data["profile_file"]) == ("eks-eksctl", "kgpu.yaml")


def test_unknown_instance_type_same_verdict_in_render_and_plan(tmp_path: Path) -> None:
    """A retired type (p2.xlarge, K80) in a node group with no known type: render and plan both exit 2 with
    the same line naming the field; beside a known type, both go on and render warns."""
    profile = tmp_path / "kgpu.yaml"
    kgpu("init", "--template", "eks-eksctl", "-f", str(profile))
    data = yaml.safe_load(profile.read_text())
    data["pools"][1]["instanceTypes"] = ["p2.xlarge"]
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    render = CliRunner().invoke(cli, ["render", "-f", str(profile)])
    planned = CliRunner().invoke(cli, ["plan", "-f", str(profile)])
    assert render.exit_code == planned.exit_code == 2
    line = next(ln for ln in render.stderr.splitlines() if "p2.xlarge" in ln)
    assert "pools[1].instanceTypes[0]" in line
    assert "instance type 'p2.xlarge' (NVIDIA K80, Kepler) is not supported" in line
    assert "instance type 'p2.xlarge' (NVIDIA K80, Kepler) is not supported" in planned.stderr
    data["pools"][1]["instanceTypes"] = ["p3.2xlarge", "p2.xlarge"]
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    render = CliRunner().invoke(cli, ["render", "-f", str(profile), "-d", str(tmp_path / "m")])
    assert render.exit_code == 0, render.output
    assert "warning: profile: pools[1].instanceTypes[1]: instance type 'p2.xlarge' (NVIDIA K80" in render.stderr
    planned = CliRunner().invoke(cli, ["plan", "-f", str(profile), "-o", "json"])
    assert planned.exit_code in (0, 1)  # the input is accepted; exit 1 only for example pods elsewhere
    assert any("'p2.xlarge' (NVIDIA K80, Kepler) is not supported" in w for w in json.loads(planned.stdout)["warnings"])

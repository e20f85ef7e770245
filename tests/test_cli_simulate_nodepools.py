"""`kgpu simulate` with the cluster's own Karpenter NodePools and EC2NodeClasses as pools: from input files
(next to Nodes and Pods) and from a `kgpu snapshot`, with or without a profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from builders import pod_dict
from kgpu.cli.main import cli
from snapshot_builders import node, nodepool, snapshot

GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def ec2nodeclass(name: str = "default", alias: str = "al2023@latest") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiSelectorTerms": [{"alias": alias}],
            "role": "KarpenterNodeRole-x",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "x"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "x"}}],
        },
    }


GPU_POOL = nodepool(
    "gpu",
    requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["t4"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Lt", "values": ["2"]},
    ],
    taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
    labels={"node-type": "gpu"},
    limits={"nodes": "2", "nvidia.com/gpu": "8"},
)


def write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_nodepool_in_workload_files_provisions(tmp_path: Path) -> None:
    """A NodePool and its EC2NodeClass beside the pods, no profile: the pods get g4dn.xlarge on-demand nodes
    of pool gpu (its gpu-name and gpu-count requirements), within its nvidia.com/gpu limit of 2."""
    pool = {**GPU_POOL, "spec": {**GPU_POOL["spec"], "limits": {"nvidia.com/gpu": "2"}}}
    pods = [pod_dict(f"train-{i}", cpu="2", memory="8Gi", gpus=1, tolerations=GPU_TOL) for i in range(3)]
    work = write(tmp_path, "w.yaml", [pool, ec2nodeclass(), *pods])
    res = invoke("simulate", "-w", work, "-o", "json")
    assert res.exit_code == 1, res.output
    data = json.loads(res.output)
    by_name = {p["name"]: p for p in data["pods"]}
    placed = [p for p in by_name.values() if p["phase"] == "Provisioned"]
    assert len(placed) == 2
    assert {(p["pool"], p["instance_type"], p["capacity_type"]) for p in placed} == {
        ("gpu", "g4dn.xlarge", "on-demand")
    }
    pending = [p for p in by_name.values() if p["phase"] != "Provisioned"]
    assert 'all available instance types exceed limits for nodepool "gpu"' in pending[0]["reason"]


def test_nodepool_from_snapshot_counts_its_existing_nodes(tmp_path: Path) -> None:
    """A `kgpu snapshot` holding the NodePool and one node it launched: that node counts against
    limits.nodes (0 here: usage 1 exceeds it), so the pool launches nothing more; with limits.nodes 1 the
    limit is not exceeded and it launches (Karpenter's Limits.ExceededBy: usage above the limit)."""
    launched = node("ip-10-0-0-1", instance_type="g4dn.xlarge", nodepool="gpu")
    busy = pod_dict("busy", cpu="3", memory="8Gi", gpus=1, tolerations=GPU_TOL, node_name="ip-10-0-0-1")
    work = write(tmp_path, "w.yaml", [pod_dict("t-0", cpu="3", memory="8Gi", gpus=1, tolerations=GPU_TOL)])
    for limit, phase in (("0", "Unschedulable"), ("1", "Provisioned")):
        pool = {**GPU_POOL, "spec": {**GPU_POOL["spec"], "limits": {"nodes": limit}}}
        snap = tmp_path / "snap.json"
        snap.write_text(json.dumps(snapshot([launched, pool, ec2nodeclass(), busy])))
        data = json.loads(invoke("simulate", "-c", str(snap), "-w", work, "-o", "json").output)
        pod = next(p for p in data["pods"] if p["name"] == "t-0")
        assert pod["phase"] == phase, (limit, pod)


def test_nodepool_replaces_profile_pool_of_the_same_name(tmp_path: Path) -> None:
    """With a profile, an input NodePool of the same name replaces the profile's pool (the cluster's object
    is what Karpenter runs), and simulate says so."""
    prof = tmp_path / "kgpu.yaml"
    res = invoke("init", "--template", "eks-karpenter", "-f", str(prof))
    assert res.exit_code == 0, res.output
    work = write(
        tmp_path, "w.yaml", [GPU_POOL, pod_dict("g", cpu="1", memory="1Gi", gpus=1, tolerations=GPU_TOL)]
    )
    res = invoke("simulate", "-f", str(prof), "-w", work, "-o", "json")
    data = json.loads(res.output)
    assert data["pods"][0]["instance_type"] == "g4dn.xlarge"
    assert any("replaces the profile's pool 'gpu'" in w for w in data.get("warnings", []))


def test_bad_nodepool_requirement_names_object_and_field(tmp_path: Path) -> None:
    bad = nodepool("gpu", requirements=[{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}])
    work = write(tmp_path, "w.yaml", [bad, pod_dict("p", cpu="1")])
    res = CliRunner().invoke(cli, ["simulate", "-w", work])
    assert res.exit_code == 2
    assert "NodePool gpu: spec.template.spec.requirements[0]" in res.output
    assert 'invalid key: "karpenter.sh/nodepool" in requirements, restricted' in res.output
    assert "Traceback" not in res.output


def test_unknown_limit_in_nodepool_is_input_error(tmp_path: Path) -> None:
    bad = nodepool("gpu", limits={"gpus": "4"})
    work = write(tmp_path, "w.yaml", [bad, pod_dict("p", cpu="1")])
    res = CliRunner().invoke(cli, ["simulate", "-w", work])
    assert res.exit_code == 2
    assert "NodePool gpu: spec.limits" in res.output
    assert "'gpus' is not a resource Karpenter can limit here" in res.output


def test_startup_taints_are_noted_not_modelled(tmp_path: Path) -> None:
    pool = nodepool(
        "general",
        requirements=[{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]}],
    )
    pool["spec"]["template"]["spec"]["startupTaints"] = [
        {"key": "node.cilium.io/agent-not-ready", "effect": "NoSchedule"}
    ]
    work = write(tmp_path, "w.yaml", [pool, pod_dict("p", cpu="1", memory="1Gi")])
    data = json.loads(invoke("simulate", "-w", work, "-o", "json").output)
    assert data["pods"][0]["phase"] == "Provisioned"
    assert any("startupTaints are not modelled" in w for w in data["warnings"])


def test_requirement_on_label_the_catalog_lacks_is_not_applied_and_said(tmp_path: Path) -> None:
    """The docs' example NodePool asks for instance-hypervisor In [nitro]: applied (the catalog has the
    label). A requirement on instance-accelerator-name (no Inferentia or Trainium type in the catalog) is not
    applied (the pool keeps its types) and simulate says so."""
    pool = nodepool(
        "general",
        requirements=[
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g"]},
            {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": ["nitro"]},
            {"key": "karpenter.k8s.aws/instance-cpu-manufacturer", "operator": "In", "values": ["amd"]},
            {"key": "karpenter.k8s.aws/instance-accelerator-name", "operator": "DoesNotExist"},
        ],
    )
    work = write(tmp_path, "w.yaml", [pool, pod_dict("p", cpu="1", memory="1Gi")])
    data = json.loads(invoke("simulate", "-w", work, "-o", "json").output)
    assert data["pods"][0]["phase"] == "Provisioned"
    # g4dn (Intel) is the cheapest g family; AMD CPUs leave g4ad, g5, g6, g6e, gr6
    assert data["pods"][0]["instance_type"].split(".")[0] in {"g4ad", "g5", "g6", "g6e", "gr6"}
    assert any(
        "requirement karpenter.k8s.aws/instance-accelerator-name DoesNotExist is not applied" in w
        for w in data["profile_warnings"]
    )
    assert not any("instance-hypervisor" in w for w in data["profile_warnings"])


def time_sliced_overlay(name: str = "t4-time-sliced", **spec: Any) -> dict[str, Any]:
    """The NodeOverlay a user writes for a time-sliced pool (karpenter.sh/v1alpha1): g4dn.xlarge's one T4 is
    advertised as 4 nvidia.com/gpu by the device plugin, so Karpenter should believe 4."""
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g4dn.xlarge"]}],
            "capacity": {"nvidia.com/gpu": "4"},
            **spec,
        },
    }


def test_nodeoverlay_in_the_input_changes_what_karpenter_launches(tmp_path: Path) -> None:
    """Four one-GPU pods on a pool of one-T4 types: without an overlay Karpenter believes one GPU per node and
    launches four; with the input's overlay (capacity nvidia.com/gpu: 4) it launches one, and says the overlay
    is applied as with Karpenter's feature gate on."""
    pool = {**GPU_POOL, "spec": {**GPU_POOL["spec"], "limits": {"nvidia.com/gpu": "16"}}}
    pods = [pod_dict(f"infer-{i}", cpu="500m", memory="1Gi", gpus=1, tolerations=GPU_TOL) for i in range(4)]
    plain = invoke("simulate", "-w", write(tmp_path, "w.yaml", [pool, ec2nodeclass(), *pods]), "-o", "json")
    assert plain.exit_code == 0, plain.output
    assert len(json.loads(plain.output)["new_nodes"]) == 4

    docs = [pool, ec2nodeclass(), time_sliced_overlay(), *pods]
    res = invoke("simulate", "-w", write(tmp_path, "o.yaml", docs), "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [n["instance_type"] for n in data["new_nodes"]] == ["g4dn.xlarge"]
    assert {p["phase"] for p in data["pods"]} == {"Provisioned"}
    assert any("NodeOverlay(s) from the input applied" in w for w in data["warnings"])
    assert not any("not applied" in w for w in data["warnings"])


def test_nodeoverlay_karpenter_refuses_is_left_out_with_its_reason(tmp_path: Path) -> None:
    """An overlay on a restricted resource (cpu) is refused by Karpenter's validation: kgpu leaves it out and
    says why, and the pods are placed as without it."""
    pool = {**GPU_POOL, "spec": {**GPU_POOL["spec"], "limits": {"nvidia.com/gpu": "16"}}}
    pods = [pod_dict(f"infer-{i}", cpu="500m", memory="1Gi", gpus=1, tolerations=GPU_TOL) for i in range(2)]
    bad = time_sliced_overlay("more-cpu")
    bad["spec"]["capacity"] = {"cpu": "64"}
    res = invoke("simulate", "-w", write(tmp_path, "w.yaml", [pool, ec2nodeclass(), bad, *pods]), "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert len(data["new_nodes"]) == 2
    [left] = [w for w in data["warnings"] if w.startswith("NodeOverlay more-cpu left out")]
    assert "cpu" in left


def test_malformed_nodeoverlay_is_bad_input_naming_file_and_field(tmp_path: Path) -> None:
    bad = time_sliced_overlay("typo")
    bad["spec"]["requirements"][0]["operator"] = "Inn"
    work = write(tmp_path, "w.yaml", [GPU_POOL, ec2nodeclass(), bad])
    res = CliRunner().invoke(cli, ["simulate", "-w", work])
    assert res.exit_code == 2
    assert "w.yaml: NodeOverlay typo: spec.requirements[0]" in res.output and "Inn" in res.output
    assert "Traceback" not in res.output

"""Render-time rows of the guides a user did by hand: seed 004's head pool, seed 001's node groups, seed
000's EC2NodeClass and verify pods. Each starts from the template of its guide, changed as the guide's
text says, and goes through `kgpu render` as a user runs it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kgpu.cli.main import cli


def _profile(tmp_path: Path, template: str, change: Callable[[dict[str, Any]], None]) -> Path:
    path = tmp_path / "kgpu.yaml"
    res = CliRunner().invoke(cli, ["init", "-t", template, "-f", str(path), "--force"])
    assert res.exit_code == 0, res.output
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _render(profile: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["render", "-f", str(profile), *args])


def _pool(data: dict[str, Any], name: str) -> dict[str, Any]:
    pool: dict[str, Any] = next(p for p in data["pools"] if p["name"] == name)
    return pool


# --- seed 004: the Ray head on the GPU node group ----------------------------------------------------------


def test_head_pool_on_the_guides_one_node_gpu_group_is_a_render_error(tmp_path: Path) -> None:
    """The guide's GPU group is one g5.xlarge (4 vCPU, 16 GiB, max 1). With headPool set to it the head
    takes that node and the GPU worker can never be placed: render refuses, naming kuberay.headPool."""

    def head_on_gpu(data: dict[str, Any]) -> None:
        data["kuberay"]["headPool"] = "gpu-node-group"

    res = _render(_profile(tmp_path, "kuberay", head_on_gpu))
    assert res.exit_code == 1, res.output
    assert "pool gpu-node-group: kuberay.headPool:" in res.output
    assert "Ray GPU worker(s) at maxReplicas can never be placed" in res.output
    assert "Insufficient cpu" in res.output and "max node group size reached" in res.output


def test_head_pool_on_a_gpu_group_with_room_is_a_warning(tmp_path: Path) -> None:
    """On a g5.2xlarge (8 vCPU, 32 GiB) the head and the worker share the node: render writes the stack
    and warns that the head keeps a GPU node up."""

    def head_on_bigger_gpu(data: dict[str, Any]) -> None:
        data["kuberay"]["headPool"] = "gpu-node-group"
        _pool(data, "gpu-node-group")["instanceTypes"] = ["g5.2xlarge"]

    res = _render(_profile(tmp_path, "kuberay", head_on_bigger_gpu))
    assert res.exit_code == 0, res.output
    assert "warning: pool gpu-node-group: kuberay.headPool: the Ray head runs on GPU pool" in res.stderr
    assert "kind: RayCluster" in res.stdout


def test_two_workers_beside_the_head_need_a_third_node(tmp_path: Path) -> None:
    """maxSize 2 gives the worker group maxReplicas 2: with the head on one of the two g5.xlarge nodes, the
    second worker has nowhere to go."""

    def two(data: dict[str, Any]) -> None:
        data["kuberay"]["headPool"] = "gpu-node-group"
        _pool(data, "gpu-node-group")["maxSize"] = 2

    res = _render(_profile(tmp_path, "kuberay", two))
    assert res.exit_code == 1 and "gpu-node-group-worker-1" in res.output


def test_the_guides_head_on_the_cpu_group_says_nothing(tmp_path: Path) -> None:
    res = _render(_profile(tmp_path, "kuberay", lambda data: None))
    assert res.exit_code == 0, res.output
    assert "kuberay.headPool" not in res.stderr


# --- seed 001: eksctl node groups -------------------------------------------------------------------------

# The guide's general group, its types that still exist ("m5.2xlarge, m5.4xlarge, ... c5.2xlarge, c5.4xlarge")
GUIDE_SPOT_NG = ["m5.2xlarge", "m5.4xlarge", "c5.2xlarge", "c5.4xlarge"]
# The guide's GPU group "gpu-spot-ng-a": p3 and p2 types
GUIDE_GPU_NG = ["p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p2.xlarge", "p2.8xlarge", "p2.16xlarge"]


def _plan_json(profile: Path, *args: str) -> dict[str, Any]:
    import json

    res = CliRunner().invoke(cli, ["plan", "-f", str(profile), "-o", "json", *args])
    assert res.exit_code in (0, 1), res.output
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def test_a_group_mixing_2xlarge_and_4xlarge_warns_in_render_and_plan(tmp_path: Path) -> None:
    def guide_types(data: dict[str, Any]) -> None:
        _pool(data, "spot-ng")["instanceTypes"] = GUIDE_SPOT_NG

    profile = _profile(tmp_path, "eks-eksctl", guide_types)
    res = _render(profile)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stderr.splitlines() if "mixes sizes" in ln)
    assert "node group spot-ng mixes sizes (m5.2xlarge 8 vCPU 32 GiB; m5.4xlarge 16 vCPU 64 GiB" in line
    assert "cluster-autoscaler sizes every node of the group by its first type, m5.2xlarge" in line
    assert any("spot-ng mixes sizes" in w for w in _plan_json(profile)["warnings"])


def test_one_size_per_group_says_nothing(tmp_path: Path) -> None:
    """The eks-eksctl template diversifies spot-ng within one size (m5/m6i/m7i.2xlarge)."""
    res = _render(_profile(tmp_path, "eks-eksctl", lambda data: None))
    assert res.exit_code == 0 and "mixes sizes" not in res.stderr


def test_the_guides_p2_types_are_named_unsupported(tmp_path: Path) -> None:
    """Beside p3 types the group is still rendered, one warning per p2 type saying why; a group of p2 only
    is bad input (exit 2) in render and plan alike."""

    def guide_gpu(data: dict[str, Any]) -> None:
        _pool(data, "gpu-spot-ng")["instanceTypes"] = GUIDE_GPU_NG

    profile = _profile(tmp_path, "eks-eksctl", guide_gpu)
    res = _render(profile)
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if "is not supported" in ln]
    assert len(lines) == 3
    assert "instance type 'p2.xlarge' (NVIDIA K80, Kepler) is not supported" in lines[0]
    assert "do not list P2" in lines[0] and "R470" in lines[0]

    def only_p2(data: dict[str, Any]) -> None:
        _pool(data, "gpu-spot-ng")["instanceTypes"] = ["p2.xlarge", "p2.8xlarge"]

    profile = _profile(tmp_path, "eks-eksctl", only_p2)
    for verb in ("render", "plan"):
        res = CliRunner().invoke(cli, [verb, "-f", str(profile)])
        assert res.exit_code == 2, res.output
        assert "pools[1].instanceTypes[0]: instance type 'p2.xlarge' (NVIDIA K80, Kepler) is not supported" in (
            res.output
        )


def test_every_unmanaged_group_is_tagged_with_its_eksctl_group_name(tmp_path: Path) -> None:
    """eksctl labels nodes alpha.eksctl.io/nodegroup-name=<group>; each group's ASG declares it to
    cluster-autoscaler, so a pod selecting one zone's GPU group scales exactly that group from zero."""
    profile = _profile(tmp_path, "eks-eksctl", lambda data: None)
    res = _render(profile, "--target", "eksctl")
    assert res.exit_code == 0, res.output
    config = next(d for d in yaml.safe_load_all(res.stdout) if d and d.get("kind") == "ClusterConfig")
    tag = "k8s.io/cluster-autoscaler/node-template/label/alpha.eksctl.io/nodegroup-name"
    assert {g["name"]: g["tags"][tag] for g in config["nodeGroups"]} == {
        "spot-ng": "spot-ng",
        "gpu-spot-ng-a": "gpu-spot-ng-a",
        "gpu-spot-ng-b": "gpu-spot-ng-b",
        "gpu-spot-ng-c": "gpu-spot-ng-c",
    }
    work = tmp_path / "vector-add.yaml"
    work.write_text(
        """
apiVersion: v1
kind: Pod
metadata: {name: cuda-vector-add-b}
spec:
  nodeSelector: {alpha.eksctl.io/nodegroup-name: gpu-spot-ng-b}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: cuda-vector-add
    image: k8s.gcr.io/cuda-vector-add:v0.1
    resources: {limits: {nvidia.com/gpu: 1}}
"""
    )
    (pod,) = _plan_json(profile, "-w", str(work))["pods"]
    assert (pod["phase"], pod["pool"], pod["zone"]) == ("Provisioned", "gpu-spot-ng", "us-west-2b")


def test_catalog_shows_the_spot_advisors_band_per_gpu_type() -> None:
    import json

    res = CliRunner().invoke(cli, ["catalog", "--gpu", "v100", "--region", "us-west-2", "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["instance_type"]: r["spot_interruption"] for r in json.loads(res.stdout)}
    assert rows["p3.2xlarge"] == ">20%"
    table = CliRunner().invoke(cli, ["catalog", "--gpu", "v100", "--region", "us-west-2"]).stdout
    assert "INTERRUPTION" in table.splitlines()[1]
    assert "Spot Instance Advisor (spot-advisor-data.json) as of 2025-06-28" in table


def test_plan_warns_when_a_spot_only_gpu_pool_picks_types_above_20_percent(tmp_path: Path) -> None:
    """The guide: "some GPU instance types have >20% interruption frequency; check the Spot Instance
    Advisor". The template's spot-only p3.2xlarge groups get the warning; with on-demand allowed, none."""
    data = _plan_json(_profile(tmp_path, "eks-eksctl", lambda data: None))
    line = next(w for w in data["warnings"] if "interruption frequency" in w)
    assert line.startswith("pool gpu-spot-ng: spot only, and it picked p3.2xlarge (10 node(s))")
    assert ">20% in us-west-2 (Spot Instance Advisor (spot-advisor-data.json), 2025-06-28)" in line

    def on_demand_too(data: dict[str, Any]) -> None:
        _pool(data, "gpu-spot-ng")["capacityTypes"] = ["spot", "on-demand"]

    data = _plan_json(_profile(tmp_path, "eks-eksctl", on_demand_too))
    assert not any("interruption frequency" in w for w in data["warnings"])


# --- seed 000: the guide's NodePool, EC2NodeClass and verify pod names -------------------------------------


def _seed_000(data: dict[str, Any]) -> None:
    """`kubectl get nodepool nodepool-gpu`, `kubectl get ec2nodeclass nodeclass-gpu`, `kubectl logs
    gpu-standard-test` (方式1: nvidia.com/gpu), `kubectl logs gpu-test-pod` (方式2: NodeSelector)."""
    pool = _pool(data, "gpu")
    pool["name"] = "nodepool-gpu"
    pool["nodeClassName"] = "nodeclass-gpu"
    pool["verifyPods"] = {"byRequest": "gpu-standard-test", "bySelector": "gpu-test-pod"}


def test_the_guides_nodepool_nodeclass_and_verify_pods_render_under_its_names(tmp_path: Path) -> None:
    profile = _profile(tmp_path, "eks-karpenter", _seed_000)
    res = _render(profile, "--validate", "--with-workloads")
    assert res.exit_code == 0, res.output
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    assert "nodeclass-gpu" in by_kind["EC2NodeClass"]
    assert "nodepool-gpu" not in by_kind["EC2NodeClass"]
    ref = by_kind["NodePool"]["nodepool-gpu"]["spec"]["template"]["spec"]["nodeClassRef"]
    assert ref == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "nodeclass-gpu"}
    assert by_kind["NodePool"]["general"]["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "general"
    standard, selector = by_kind["Pod"]["gpu-standard-test"], by_kind["Pod"]["gpu-test-pod"]
    limits = standard["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1} or limits == {"nvidia.com/gpu": "1"}
    assert selector["spec"]["nodeSelector"]["node-type"] == "gpu"  # the guide's `-l node-type=gpu`
    assert not any(n.startswith("gpu-verify") for n in by_kind["Pod"])


def test_without_names_the_defaults_stay(tmp_path: Path) -> None:
    res = _render(_profile(tmp_path, "eks-karpenter", lambda data: None), "--with-workloads")
    assert res.exit_code == 0, res.output
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(res.stdout) if d and d["kind"] in ("Pod", "EC2NodeClass")}
    assert {"gpu-verify-gpu", "gpu-verify-selector-gpu", "gpu", "general"} <= names


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: _pool(d, "gpu").update(nodeClassName="NodeClass_GPU"), "pools[1].nodeClassName"),
        (lambda d: _pool(d, "general").update(nodeClassName="gpu"), "EC2NodeClass names must be unique"),
        (
            lambda d: _pool(d, "gpu").update(verifyPods={"byRequest": "t", "bySelector": "t"}),
            "byRequest and bySelector are both 't'",
        ),
        (
            lambda d: _pool(d, "gpu").update(verifyPods={"byRequest": "Gpu Test"}),
            "pools[1].verifyPods.byRequest",
        ),
        (
            lambda d: _pool(d, "general").update(verifyPods={"byRequest": "gpu-verify-gpu"}),
            "verifyPods: pod names must be unique across pools, repeated: gpu-verify-gpu",
        ),
    ],
)
def test_bad_names_are_exit_2_naming_the_field(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], words: str
) -> None:
    res = _render(_profile(tmp_path, "eks-karpenter", change))
    assert res.exit_code == 2, res.output
    assert words in res.output and "Traceback" not in res.output


def test_node_class_name_on_a_node_group_is_exit_2(tmp_path: Path) -> None:
    res = _render(_profile(tmp_path, "eks-eksctl", lambda d: _pool(d, "spot-ng").update(nodeClassName="x")))
    assert res.exit_code == 2 and "only a karpenter pool has an EC2NodeClass" in res.output

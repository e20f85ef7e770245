"""`kgpu top` on clusters shaped as EKS and TKE clusters really are (snapshot_builders' objects, NVIDIA's DRA
driver's ResourceSlices, GFD and MIG-manager labels): an idle p4d, a busy spot g5, a g5 whose device plugin
never registered its GPU (seed 004's `GPU <none>`), a NotReady g4dn, a MIG-mixed p4d, a DRA g5, a TKE super
node and a TKE node pool; the tables compared whole at 80 and 200 columns, colours with --color=always,
-l, --sort-by, -o name / wide / json (against top.schema.json), --no-headers and bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kgpu.catalog.dra import node_slices
from kgpu.cli.main import cli
from kgpu.cli.topview import middle
from snapshot_builders import (
    GPU_TAINT,
    GPU_TOLERATION,
    container,
    daemon_pod,
    node,
    plugin_ds,
    pod,
    snapshot,
    v1_list,
)
from test_dra_doctor import allocated_claim, claim_pod
from test_json_schemas import validate

ZONE = "us-west-2a"
P4D_IDLE = "ip-10-0-1-17.us-west-2.compute.internal"
G5_BUSY = "ip-10-0-1-18.us-west-2.compute.internal"
G5_NONE = "ip-10-0-2-9.us-west-2.compute.internal"
G4_DOWN = "ip-10-0-2-33.us-west-2.compute.internal"
P4D_MIG = "ip-10-0-4-21.us-west-2.compute.internal"
G5_DRA = "ip-10-0-3-40.us-west-2.compute.internal"
SYSTEM = "ip-10-0-0-5.us-west-2.compute.internal"
A100 = "NVIDIA-A100-SXM4-40GB"
BALANCED = {
    "1g.5gb": 2,
    "2g.10gb": 1,
    "3g.20gb": 1,
}  # the MIG manager's all-balanced on an A100-40GB, per GPU
TORCH = "nvcr.io/nvidia/pytorch:24.05-py3"
TRITON = "nvcr.io/nvidia/tritonserver:24.05-py3"


def karpenter(pool: str, capacity: str = "on-demand") -> dict[str, str]:
    return {
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/capacity-type": capacity,
        "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "karpenter.k8s.aws/ec2nodeclass": "gpu",
    }


def p4d(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A p4d.24xlarge as the kubelet registers it (the builders' shapes stop at p3): 96 vCPUs, 1,152 GiB, 8 A100s
    with GFD's labels, the GPU taint."""
    n = node(name, "p3.8xlarge", zone=ZONE, labels=labels, taints=[GPU_TAINT], driver="550.90.07")
    lab = n["metadata"]["labels"]
    for key in (
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
        "nvidia.com/gpu.machine",
    ):
        lab[key] = "p4d.24xlarge"
    lab.update(
        {
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.product": A100,
            "nvidia.com/gpu.memory": "40960",
            "nvidia.com/gpu.family": "ampere",
            "nvidia.com/mig.capable": "true",
        }
    )
    if "karpenter.sh/nodepool" in lab:
        lab.update({"karpenter.k8s.aws/instance-family": "p4d", "karpenter.k8s.aws/instance-gpu-count": "8"})
    n["status"]["capacity"].update(
        {"cpu": "96", "memory": "1176472348Ki", "pods": "737", "nvidia.com/gpu": "8"}
    )
    n["status"]["allocatable"].update(
        {"cpu": "95690m", "memory": "1156108572Ki", "pods": "737", "nvidia.com/gpu": "8"}
    )
    return n


def advertise(n: dict[str, Any], resources: dict[str, int]) -> None:
    """What the device plugin registers, in capacity and allocatable alike."""
    for part in ("capacity", "allocatable"):
        for key in [k for k in n["status"][part] if k.startswith("nvidia.com/")]:
            del n["status"][part][key]
        n["status"][part].update({k: str(v) for k, v in resources.items()})


def trainer(
    name: str,
    node_name: str,
    resource: str,
    count: int,
    *,
    image: str = TORCH,
    owner: tuple[str, str] | None = None,
    ns: str = "ml",
) -> dict[str, Any]:
    c = container(
        name.rsplit("-", 2)[0] if owner else "train",
        image,
        requests={"cpu": "8", "memory": "64Gi", resource: str(count)},
        limits={resource: str(count)},
    )
    return pod(name, ns, containers=[c], node_name=node_name, tolerations=[GPU_TOLERATION], owner=owner)


def eks_cluster() -> dict[str, Any]:
    """`kgpu snapshot` of an EKS cluster with Karpenter, eksctl and managed node groups, MIG and DRA."""
    idle = p4d(P4D_IDLE, karpenter("gpu-train"))
    busy = node(
        G5_BUSY,
        "g5.12xlarge",
        zone=ZONE,
        nodepool="gpu-train",
        capacity_type="spot",
        taints=[GPU_TAINT],
        driver="550.90.07",
    )
    eksctl = {"alpha.eksctl.io/cluster-name": "ml-prod", "alpha.eksctl.io/nodegroup-name": "ng-gpu"}
    # seed 004: the node group's device plugin never ran here, so no GFD labels and no nvidia.com/gpu
    none = node(G5_NONE, "g5.xlarge", zone="us-west-2b", labels=eksctl, gpus=-1, gfd=False)
    down = node(
        G4_DOWN,
        "g4dn.xlarge",
        zone="us-west-2b",
        labels=eksctl,
        ready=False,
        taints=[GPU_TAINT, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}],
    )
    mig = p4d(
        P4D_MIG,
        {
            "eks.amazonaws.com/nodegroup": "a100-mig",
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "nvidia.com/mig.config": "all-balanced",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/mig.strategy": "mixed",
        },
    )
    advertise(mig, {f"nvidia.com/mig-{p}": 8 * c for p, c in BALANCED.items()} | {"nvidia.com/gpu": 0})
    dra = node(
        G5_DRA,
        "g5.12xlarge",
        zone=ZONE,
        nodepool="gpu-dra",
        taints=[GPU_TAINT],
        labels={"nvidia.com/gpu.deploy.device-plugin": "false"},
    )
    advertise(dra, {})
    system = node(SYSTEM, "m5.xlarge", zone=ZONE, labels={"eks.amazonaws.com/nodegroup": "system"})
    plugin = plugin_ds(desired=4)
    items: list[dict[str, Any]] = [system, idle, busy, none, down, mig, dra, plugin]
    items += [daemon_pod(plugin, n) for n in (P4D_IDLE, G5_BUSY, P4D_MIG, G4_DOWN)]
    items += [
        trainer("llama-ft-0", G5_BUSY, "nvidia.com/gpu", 3),
        trainer(
            "embed-7d9f8c6b5-x2kqp",
            P4D_MIG,
            "nvidia.com/mig-1g.5gb",
            1,
            image=TRITON,
            owner=("ReplicaSet", "embed-7d9f8c6b5"),
        ),
        trainer(
            "embed-7d9f8c6b5-m8zrt",
            P4D_MIG,
            "nvidia.com/mig-1g.5gb",
            1,
            image=TRITON,
            owner=("ReplicaSet", "embed-7d9f8c6b5"),
        ),
        trainer(
            "rerank-5c4b7d9f8-q7wlx",
            P4D_MIG,
            "nvidia.com/mig-3g.20gb",
            1,
            image=TRITON,
            owner=("ReplicaSet", "rerank-5c4b7d9f8"),
        ),
        trainer("done-0", G5_BUSY, "nvidia.com/gpu", 1) | {"status": {"phase": "Succeeded"}},
        pod(
            "coredns-5d8b6f7c9-abcde",
            "kube-system",
            node_name=SYSTEM,
            owner=("ReplicaSet", "coredns-5d8b6f7c9"),
        ),
        *node_slices(G5_DRA, "a10g", 4, 22888),
        claim_pod("sd-0", node_name=G5_DRA, claim="sd-0-gpu-x7k2p"),
        allocated_claim("sd-0", G5_DRA, "gpu-1"),
    ]
    return snapshot(items)


SUPER = "eklet-subnet-8x2kd9fq-4"
TKE_NODE = "10.0.1.15"


def tke_cluster() -> list[dict[str, Any]]:
    """`kubectl get nodes,pods -A -o json` of a TKE cluster: a super node running two GPU pods (each buys its
    own V100), a node pool of GN7 (T4) CVMs, which kgpu's AWS catalog cannot price."""
    sn = node(
        SUPER,
        "m5.xlarge",
        zone="ap-guangzhou-3",
        labels={"type": "virtual-kubelet"},
        taints=[{"key": "eks.tke.cloud.tencent.com/eklet", "effect": "NoSchedule"}],
    )
    sn["metadata"]["labels"].update(
        {
            "node.kubernetes.io/instance-type": "eklet",
            "beta.kubernetes.io/instance-type": "eklet",
            "topology.kubernetes.io/region": "ap-guangzhou",
        }
    )
    cvm = node(
        TKE_NODE,
        "g4dn.xlarge",
        zone="ap-guangzhou-3",
        labels={
            "tke.cloud.tencent.com/nodepool-id": "np-8x2kd9fq",
            "topology.kubernetes.io/region": "ap-guangzhou",
        },
    )
    for key in (
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
        "nvidia.com/gpu.machine",
    ):
        cvm["metadata"]["labels"][key] = "GN7.2XLARGE32"
    tol = [{"key": "eks.tke.cloud.tencent.com/eklet", "operator": "Exists", "effect": "NoSchedule"}]
    pods = []
    for i in range(2):
        p = trainer(f"infer-{i}", SUPER, "nvidia.com/gpu", 1)
        p["spec"]["tolerations"] += tol
        p["metadata"]["annotations"] = {"eks.tke.cloud.tencent.com/gpu-type": "V100"}
        pods.append(p)
    pods.append(trainer("notebook-0", TKE_NODE, "nvidia.com/gpu", 1))
    return [sn, cvm, *pods]


def kgpu(tmp_path: Path, doc: Any, *args: str, columns: int = 80, name: str = "cluster.json") -> Result:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    env = {"KUBECONFIG": "", "HOME": "/nonexistent", "COLUMNS": str(columns) if columns else None}
    return CliRunner().invoke(cli, ["top", "-f", str(path), *args], env=env)


def shown(res: Result, tmp_path: Path) -> str:
    assert res.exit_code == 0, res.output
    return res.stdout.replace(str(tmp_path / "cluster.json"), "FILE")


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


EKS_80 = """\
GPU nodes of FILE (GPUS: requested / allocatable)
NODE           POOL       GPU               KIND   GPUS        $/H      STATUS
-------------  ---------  ----------------  -----  ----------  -------  --------
ip-10-0-4-21…  a100-mig   A100-SXM4-40GB×8  mig    ░░░░░ 3/32  $32.773  Ready
ip-10-0-4-21…  a100-mig     1g.5gb          mig    █░░░░ 2/16  -        -
ip-10-0-4-21…  a100-mig     2g.10gb         mig    ░░░░░ 0/8   -        -
ip-10-0-4-21…  a100-mig     3g.20gb         mig    █░░░░ 1/8   -        -
ip-10-0-3-40…  gpu-dra    A10G×4            dra    █░░░░ 1/4   $5.672   Ready
ip-10-0-1-17…  gpu-train  A100-SXM4-40GB×8  whole  ░░░░░ 0/8   $32.773  Idle
ip-10-0-1-18…  gpu-train  A10G×4            whole  ████░ 3/4   $1.938   Ready
ip-10-0-2-33…  ng-gpu     T4×1              whole  ░░░░░ 0/1   $0.526   NotReady
ip-10-0-2-9…   ng-gpu     A10G×1            -      ░░░░░ 0/0   $1.006   NoGPUs

GPU pools
POOL       SOURCE         NODES  GPUS             $/H      IDLE-$/H  PROBLEMS
---------  -------------  -----  ---------------  -------  --------  --------
a100-mig   eks-nodegroup  1      █░░░░░░░░░ 3/32  $32.773  -         -
a100-mig     1g.5gb       -      █░░░░░░░░░ 2/16  -        -         -
a100-mig     2g.10gb      -      ░░░░░░░░░░ 0/8   -        -         -
a100-mig     3g.20gb      -      █░░░░░░░░░ 1/8   -        -         -
gpu-dra    karpenter      1      ███░░░░░░░ 1/4   $5.672   -         -
gpu-train  karpenter      2      ███░░░░░░░ 3/12  $34.711  $32.773   -
ng-gpu     eksctl         2      ░░░░░░░░░░ 0/1   $1.532   -         2

Total: 6 GPU node(s), 7/49 GPUs requested, $74.6875/h ($54,521.88/mo)
Idle: 1 node(s) with GPUs allocatable and none requested, $32.7726/h
  ($23,924.00/mo)
NotReady: 1 node(s): the node's Ready condition is False: pods cannot start on
  it
NoGPUs: 1 node(s): a GPU instance whose node advertises no GPUs: no device
  plugin registered them (kubectl: <none>)
Bars: GPUs requested / allocatable; green ≥ 80 %, yellow ≥ 30 %, red < 30 %
prices as of 2026-11-21 (AWS, USD; month = 730 h); spot prices change hourly
"""

EKS_200_NODES = """\
GPU nodes of FILE (GPUS: requested / allocatable)
NODE                                     POOL       GPU               KIND   GPUS             $/H      STATUS
---------------------------------------  ---------  ----------------  -----  ---------------  -------  --------
ip-10-0-4-21.us-west-2.compute.internal  a100-mig   A100-SXM4-40GB×8  mig    █░░░░░░░░░ 3/32  $32.773  Ready
ip-10-0-4-21.us-west-2.compute.internal  a100-mig     1g.5gb          mig    █░░░░░░░░░ 2/16  -        -
ip-10-0-4-21.us-west-2.compute.internal  a100-mig     2g.10gb         mig    ░░░░░░░░░░ 0/8   -        -
ip-10-0-4-21.us-west-2.compute.internal  a100-mig     3g.20gb         mig    █░░░░░░░░░ 1/8   -        -
ip-10-0-3-40.us-west-2.compute.internal  gpu-dra    A10G×4            dra    ███░░░░░░░ 1/4   $5.672   Ready
ip-10-0-1-17.us-west-2.compute.internal  gpu-train  A100-SXM4-40GB×8  whole  ░░░░░░░░░░ 0/8   $32.773  Idle
ip-10-0-1-18.us-west-2.compute.internal  gpu-train  A10G×4            whole  ████████░░ 3/4   $1.938   Ready
ip-10-0-2-33.us-west-2.compute.internal  ng-gpu     T4×1              whole  ░░░░░░░░░░ 0/1   $0.526   NotReady
ip-10-0-2-9.us-west-2.compute.internal   ng-gpu     A10G×1            -      ░░░░░░░░░░ 0/0   $1.006   NoGPUs
"""

EKS_200_FOOTER = """\
Total: 6 GPU node(s), 7/49 GPUs requested, $74.6875/h ($54,521.88/mo)
Idle: 1 node(s) with GPUs allocatable and none requested, $32.7726/h ($23,924.00/mo)
NotReady: 1 node(s): the node's Ready condition is False: pods cannot start on it
NoGPUs: 1 node(s): a GPU instance whose node advertises no GPUs: no device plugin registered them (kubectl: <none>)
"""

TKE_80 = """\
GPU nodes of FILE (GPUS: requested / allocatable)
NODE                     POOL         GPU   KIND        GPUS       $/H  STATUS
-----------------------  -----------  ----  ----------  ---------  ---  ------
10.0.1.15                np-8x2kd9fq  T4×1  whole       █████ 1/1  n/a  Ready
eklet-subnet-8x2kd9fq-4  super-nodes  -     super-node  per-pod 2  n/a  Ready

GPU pools
POOL         SOURCE         NODES  GPUS            $/H  IDLE-$/H  PROBLEMS
-----------  -------------  -----  --------------  ---  --------  --------
np-8x2kd9fq  tke            1      ██████████ 1/1  n/a  -         -
super-nodes  tke-supernode  1      per-pod 2       n/a  -         -

Total: 2 GPU node(s), 1/1 GPUs requested (and 2 by pods on 1 super node(s)), no
  prices known
"""


def test_an_eks_cluster_at_80_columns(tmp_path: Path) -> None:
    """The idle p4d reads Idle at its full price, the g5 without a device plugin NoGPUs with the model its type
    has, the NotReady g4dn NotReady, the MIG p4d a line per profile, the DRA g5 its driver's four A10Gs (one
    claimed); names cut at a DNS label, every line within 80 columns; prices are the catalog's."""
    out = shown(kgpu(tmp_path, eks_cluster(), columns=80), tmp_path)
    assert out == EKS_80
    assert widest(out) <= 80


def test_an_eks_cluster_at_200_columns(tmp_path: Path) -> None:
    """Nothing is cut in 200 columns: whole names, ten-cell bars, footer lines unwrapped."""
    out = shown(kgpu(tmp_path, eks_cluster(), columns=200), tmp_path)
    assert out.startswith(EKS_200_NODES)
    assert EKS_200_FOOTER in out
    assert widest(out) <= 200 and "…" not in out


def test_a_tke_cluster_from_kubectl_get_o_json(tmp_path: Path) -> None:
    """A `kubectl get -o json` List: the super node is a super node in super-nodes (its pods' GPUs per pod), the
    node pool by its nodepool-id; types the AWS catalog does not sell are n/a, not $0."""
    out = shown(kgpu(tmp_path, v1_list(tke_cluster()), columns=80), tmp_path)
    assert out.startswith(TKE_80)
    data = json.loads(kgpu(tmp_path, v1_list(tke_cluster()), "-o", "json").stdout)
    validate("top", data)
    sn = next(n for n in data["nodes"] if n["node"] == SUPER)
    assert (sn["super_node"], sn["pool"], sn["pool_source"], sn["gpu_kind"]) == (
        True,
        "super-nodes",
        "tke-supernode",
        "super node",
    )
    assert sn["gpus"] == {"allocatable": 0, "requested": 2, "free": -2} and sn["status"] == ["ready"]
    assert data["totals"]["hourly_price"] is None and data["totals"]["unpriced_nodes"] == 2


def test_the_same_cluster_piped_is_never_cut(tmp_path: Path) -> None:
    """Without COLUMNS and without a terminal (a pipe, a file) the lines are whole, as kubectl's are."""
    out = shown(kgpu(tmp_path, eks_cluster(), columns=0), tmp_path)
    assert out.startswith(EKS_200_NODES) and "…" not in out


def test_two_nodes_that_differ_late_in_their_first_label_stay_apart() -> None:
    """ip-10-0-1-17 and ip-10-0-1-18 both read ip-10-0-1-1… when cut at the end; a DNS name keeps its first
    label, other names their start and end (GKE and AKS names differ at the end)."""
    assert middle(P4D_IDLE, 20) == "ip-10-0-1-17…" and middle(G5_BUSY, 20) == "ip-10-0-1-18…"
    assert middle(P4D_IDLE, 24) == "ip-10-0-1-17.us-west-2…"
    assert middle(P4D_IDLE, 8) == "ip-1…-17" and middle(G5_BUSY, 8) == "ip-1…-18"  # the first label, cut
    gke = "gke-ml-prod-gpu-pool-a100-5f8e9c2a-x7k2"
    assert middle(gke, 21) == "gke-ml-pro…e9c2a-x7k2" and middle(gke, 100) == gke


@pytest.mark.parametrize("columns", [70, 80, 100, 140])
def test_every_table_line_fits_the_terminal(tmp_path: Path, columns: int) -> None:
    out = shown(kgpu(tmp_path, eks_cluster(), columns=columns), tmp_path)
    table = out.split("\n\nTotal:")[0]
    assert widest(table) <= columns, table
    rows = [ln.split()[0] for ln in table.splitlines()[3:] if ln.startswith("ip-")]
    assert len(set(rows)) == 6  # six nodes, six names however short


def test_json_is_snake_case_and_matches_its_schema(tmp_path: Path) -> None:
    """-o json / yaml: the data behind the tables, every key snake_case (resource names aside), each status
    code as documented, validated against top.schema.json, with --pools too."""
    res = kgpu(tmp_path, eks_cluster(), "-o", "json")
    data = json.loads(res.stdout)
    validate("top", data)
    pools = json.loads(kgpu(tmp_path, eks_cluster(), "-o", "json", "--pools").stdout)
    validate("top", pools)
    assert "nodes" not in pools and pools["pools"] == data["pools"]

    def keys(obj: Any) -> set[str]:
        if isinstance(obj, dict):
            return {k for k in obj if "/" not in k and ":" not in k} | {
                x for v in obj.values() for x in keys(v)
            }
        return {x for v in obj for x in keys(v)} if isinstance(obj, list) else set()

    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", k) for k in keys(data)), sorted(keys(data))
    nodes = {n["node"]: n for n in data["nodes"]}
    assert nodes[P4D_IDLE]["status"] == ["ready", "idle"] and nodes[P4D_IDLE]["idle_hourly_cost"] == 32.7726
    assert nodes[G5_NONE]["status"] == ["ready", "no_gpus"] and nodes[G5_NONE]["resources"] == {}
    assert (nodes[G5_NONE]["gpu_product"], nodes[G5_NONE]["gpu_count"]) == ("A10G", 1)  # from the catalog
    assert nodes[G4_DOWN]["status"] == ["not_ready"] and not nodes[G4_DOWN]["ready"]
    assert nodes[G5_DRA]["resources"] == {"dra:gpu": {"allocatable": 4, "requested": 1}}
    assert nodes[P4D_MIG]["resources"]["nvidia.com/mig-1g.5gb"] == {"allocatable": 16, "requested": 2}
    assert (
        nodes[G5_BUSY]["capacity_type"] == "spot" and nodes[G5_BUSY]["gpus"]["requested"] == 3
    )  # done-0 left out
    assert SYSTEM not in nodes
    assert data["totals"]["idle_nodes"] == 1 and data["totals"]["problem_nodes"] == 2
    import yaml

    assert yaml.safe_load(kgpu(tmp_path, eks_cluster(), "-o", "yaml").stdout) == data


@pytest.mark.parametrize(
    ("order", "first"),
    [
        ("name", [P4D_IDLE, G5_BUSY, G4_DOWN, G5_NONE, G5_DRA, P4D_MIG]),  # as strings: 2-33 before 2-9
        ("gpu-free", [P4D_MIG, P4D_IDLE, G5_DRA, G5_BUSY, G4_DOWN, G5_NONE]),  # ties by name
        ("gpu-req", [G5_BUSY, P4D_MIG, G5_DRA, P4D_IDLE, G4_DOWN, G5_NONE]),
        ("price", [P4D_IDLE, P4D_MIG, G5_DRA, G5_BUSY, G5_NONE, G4_DOWN]),
        ("idle", [P4D_IDLE, P4D_MIG, G5_DRA, G5_BUSY, G5_NONE, G4_DOWN]),
        ("pool", [P4D_MIG, G5_DRA, P4D_IDLE, G5_BUSY, G4_DOWN, G5_NONE]),
    ],
)
def test_sort_by_and_o_name(tmp_path: Path, order: str, first: list[str]) -> None:
    res = kgpu(tmp_path, eks_cluster(), "--sort-by", order, "-o", "name")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"node/{n}" for n in first]


def test_selector_selects_nodes_by_label(tmp_path: Path) -> None:
    """-l as kubectl reads it (set-based, negation); the pools and totals are those of the nodes selected."""
    res = kgpu(tmp_path, eks_cluster(), "-l", "karpenter.sh/nodepool in (gpu-train,gpu-dra)", "-o", "name")
    assert res.stdout.splitlines() == [f"node/{n}" for n in (G5_DRA, P4D_IDLE, G5_BUSY)]
    data = json.loads(
        kgpu(
            tmp_path,
            eks_cluster(),
            "-l",
            "!karpenter.sh/nodepool,nvidia.com/mig.strategy!=mixed",
            "-o",
            "json",
        ).stdout
    )
    assert [n["node"] for n in data["nodes"]] == [G4_DOWN, G5_NONE]
    assert data["selector"] == "!karpenter.sh/nodepool,nvidia.com/mig.strategy!=mixed"
    assert [p["pool"] for p in data["pools"]] == ["ng-gpu"] and data["totals"]["nodes"] == 2
    res = kgpu(tmp_path, eks_cluster(), "-l", "karpenter.sh/nodepool=nope", "--no-headers")
    assert res.exit_code == 0 and res.stdout == ""


def test_no_headers_names_the_node_on_every_line(tmp_path: Path) -> None:
    """--no-headers: the nodes' lines alone, uncut, each starting with its node (the MIG profiles' too), the same
    number of fields on a node's line and on its profiles' lines, for awk."""
    res = kgpu(tmp_path, eks_cluster(), "--no-headers", columns=80)
    lines = res.stdout.splitlines()
    assert len(lines) == 9 and all(ln.startswith("ip-10-0-") for ln in lines)
    mig = [ln.split() for ln in lines if ln.startswith(P4D_MIG)]
    assert [m[2] for m in mig] == ["A100-SXM4-40GB×8", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert {len(ln.split()) for ln in lines} == {8}
    pools = kgpu(tmp_path, eks_cluster(), "--no-headers", "--pools").stdout.splitlines()
    assert [p.split()[0] for p in pools] == ["a100-mig"] * 4 + ["gpu-dra", "gpu-train", "ng-gpu"]


def test_wide_adds_types_free_gpus_and_idle_cost(tmp_path: Path) -> None:
    res = kgpu(tmp_path, eks_cluster(), "-o", "wide", columns=80)
    lines = res.stdout.splitlines()
    assert lines[1].split() == [
        "NODE",
        "POOL",
        "INSTANCE-TYPE",
        "CAPACITY",
        "GPU",
        "KIND",
        "GPUS",
        "FREE",
        "$/H",
        "STATUS",
        "IDLE-$/H",
    ]
    idle = next(ln.split() for ln in lines if ln.startswith(P4D_IDLE))
    assert idle[2:4] == ["p4d.24xlarge", "on-demand"] and idle[-3:] == ["$32.7726", "Idle", "$32.7726"]
    mig = next(ln.split() for ln in lines if ln.startswith(P4D_MIG))
    assert mig[5] == "mig-mixed" and mig[8] == "29"


def test_colours_only_when_asked_or_on_a_terminal(tmp_path: Path) -> None:
    """--color=always: the node view's bar colours (red under 30 %, yellow from 30, green from 80), the idle
    price and problems red and bold, Idle yellow, Ready green; --color=never and a pipe: none."""
    out = kgpu(tmp_path, eks_cluster(), "--color=always", columns=200).stdout
    red, green, yellow, bold_red = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[31m\x1b[1m"
    idle = next(ln for ln in out.splitlines() if ln.startswith(P4D_IDLE))
    assert f"{bold_red}\x1b[22m$32.773\x1b[0m" in idle and f"{yellow}\x1b[22m\x1b[22mIdle" in idle
    assert f"{red}\x1b[22m\x1b[22m░░░░░░░░░░\x1b[0m 0/8" in idle
    busy = next(ln for ln in out.splitlines() if ln.startswith(G5_BUSY))
    assert f"{green}\x1b[22m\x1b[22mReady" in busy and f"{yellow}\x1b[22m\x1b[22m████████░░" in busy  # 75 %
    none = next(ln for ln in out.splitlines() if ln.startswith(G5_NONE))
    assert f"{bold_red}\x1b[22mNoGPUs" in none
    from click import unstyle

    assert unstyle(out) == kgpu(tmp_path, eks_cluster(), columns=200).stdout
    for args in (("--color=never",), ()):
        assert "\x1b[" not in kgpu(tmp_path, eks_cluster(), *args).stdout


@pytest.mark.parametrize(
    ("args", "content", "words"),
    [
        (("-l", "a=b=c"), None, "invalid requirement"),
        (("--sort-by", "cost"), None, "'cost' is not one of"),
        (("--watch",), None, "--watch follows a live cluster"),
        ((), "{not json", "cluster.json"),
        ((), '{"kind": "List", "items": {"a": 1}}', "items is not a list"),
        ((), '{"kind": "List", "items": [1]}', "items[0] is not an object"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], content: str | None, words: str
) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(content if content is not None else json.dumps(eks_cluster()))
    res = CliRunner().invoke(cli, ["top", "-f", str(path), *args])
    assert res.exit_code == 2, res.output
    assert words in res.output and "Traceback" not in res.output


def test_a_bad_quantity_in_a_file_names_the_object(tmp_path: Path) -> None:
    doc = eks_cluster()
    busy = next(i for i in doc["items"] if i["kind"] == "Node" and i["metadata"]["name"] == G5_BUSY)
    busy["status"]["allocatable"]["nvidia.com/gpu"] = "four"
    res = kgpu(tmp_path, doc)
    assert res.exit_code == 2
    assert f"Node/{G5_BUSY}.status.allocatable.nvidia.com/gpu" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_standard_input_and_a_snapshot_agree(tmp_path: Path) -> None:
    """`kubectl get nodes,pods -A -o json | kgpu top -f -` reads what a snapshot of the same objects reads."""
    doc = eks_cluster()
    snap = json.loads(kgpu(tmp_path, doc, "-o", "json").stdout)
    res = CliRunner().invoke(cli, ["top", "-f", "-", "-o", "json"], input=json.dumps(v1_list(doc["items"])))
    assert res.exit_code == 0, res.output
    piped = json.loads(res.stdout)
    assert (
        piped["source"] == "<stdin>" and piped["nodes"] == snap["nodes"] and piped["pools"] == snap["pools"]
    )


def test_every_broken_gpu_node_is_shown_with_what_is_wrong(tmp_path: Path) -> None:
    """doctor's gpu-node-no-gpus cases as top's status: a plugin that registered GPUs and left (capacity 0),
    every GPU unhealthy (capacity 4, allocatable 0), fewer GPUs than the type has, the MIG manager at work or
    failed, a cordoned node; none is hidden, and a broken node is never called idle (its GPUs are not free)."""
    items: list[dict[str, Any]] = []
    for name, cap, alloc in (("gone", 0, 0), ("unhealthy", 4, 0), ("missing", 4, 3)):
        n = node(
            f"ip-10-0-9-{len(items) + 1}.us-west-2.compute.internal", "g5.12xlarge", nodepool="gpu-train"
        )
        n["status"]["capacity"]["nvidia.com/gpu"] = str(cap)
        n["status"]["allocatable"]["nvidia.com/gpu"] = str(alloc)
        n["metadata"]["labels"]["case"] = name
        items.append(n)
    pending = p4d(
        "ip-10-0-9-4.us-west-2.compute.internal",
        {
            "nvidia.com/mig.config.state": "pending",
            "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
            "case": "mig",
        },
    )
    advertise(pending, {"nvidia.com/gpu": 0})
    failed = p4d(
        "ip-10-0-9-5.us-west-2.compute.internal", {"nvidia.com/mig.config.state": "failed", "case": "failed"}
    )
    cordoned = node("ip-10-0-9-6.us-west-2.compute.internal", "g5.xlarge", labels={"case": "cordoned"})
    cordoned["spec"]["unschedulable"] = True
    data = json.loads(kgpu(tmp_path, snapshot([*items, pending, failed, cordoned]), "-o", "json").stdout)
    validate("top", data)
    status = {n["node"].split(".")[0]: n["status"] for n in data["nodes"]}
    assert status == {
        "ip-10-0-9-1": ["ready", "plugin_gone"],
        "ip-10-0-9-2": ["ready", "gpus_unhealthy"],
        "ip-10-0-9-3": ["ready", "gpus_missing"],
        "ip-10-0-9-4": ["ready", "mig_pending"],
        "ip-10-0-9-5": ["ready", "mig_failed"],
        "ip-10-0-9-6": ["ready", "cordoned", "idle"],
    }
    out = kgpu(tmp_path, snapshot([*items, pending, failed, cordoned]), columns=200).stdout
    words = {
        ln.split()[0].split(".")[0]: ln.split()[-1] for ln in out.splitlines() if ln.startswith("ip-10-0-9")
    }
    assert words == {
        "ip-10-0-9-1": "PluginGone",
        "ip-10-0-9-2": "GPUsUnhealthy",
        "ip-10-0-9-3": "GPUsMissing",
        "ip-10-0-9-4": "MIGPending",
        "ip-10-0-9-5": "MIGFailed",
        "ip-10-0-9-6": "Cordoned,Idle",
    }


def test_the_schema_is_valid_and_the_docs_show_the_real_output() -> None:
    """top.schema.json is a valid draft 2020-12 schema listed in docs/json.md; docs/live.md shows the table
    this file compares at 80 columns, as printed."""
    import jsonschema

    from test_json_schemas import ROOT, schema

    jsonschema.Draft202012Validator.check_schema(schema("top"))
    assert "`top.schema.json`" in (ROOT / "docs" / "json.md").read_text()
    live = (ROOT / "docs" / "live.md").read_text()
    assert EKS_80.replace("FILE", "cluster.json") in live

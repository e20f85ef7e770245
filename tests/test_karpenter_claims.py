"""Claims about Karpenter provisioning that users rely on, each checked end to end through `kgpu simulate`:
claims are sized on what fits, DaemonSet overhead counts, and a pod that cannot run on any offering (DaemonSet
overhead, a DaemonSet's host port) launches and bills nothing. Karpenter's own cases:
pkg/controllers/provisioning/scheduling/suite_test.go, Context "Daemonsets" ("should account for daemonset
resources / overhead", "should not schedule if daemonset overhead is too large") and Context "Host Ports"
(hostportusage: a DaemonSet's host port on the new node conflicts with the pod's)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from builders import pod_dict
from kgpu.cli.main import cli

PROFILE = {
    "apiVersion": "kgpu.dev/v1alpha1",
    "kind": "ClusterProfile",
    "metadata": {"name": "claims"},
    "provider": "eks",
    "autoscaler": "karpenter",
    "cluster": {"region": "us-west-2", "zones": ["us-west-2a", "us-west-2b"]},
    "monitoring": {"enabled": False},
    "pools": [
        {
            "name": "general",
            "kind": "karpenter",
            "requirements": {"categories": ["m", "c"]},
            "capacityTypes": ["spot", "on-demand"],
            "weight": 10,
        },
        {
            "name": "gpu",
            "kind": "karpenter",
            "requirements": {"families": ["g4dn", "g5"]},
            "capacityTypes": ["on-demand"],
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            "devicePlugin": "none",
        },
    ],
}
GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def daemonset(
    name: str, cpu: str, memory: str = "64Mi", port: int | None = None, tolerate: bool = True
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "a",
        "image": "x",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    if port:
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    spec: dict[str, Any] = {"containers": [container]}
    if tolerate:
        spec["tolerations"] = [{"operator": "Exists"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"ds": name}},
            "template": {"metadata": {"labels": {"ds": name}}, "spec": spec},
        },
    }


def run(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    prof = tmp_path / "kgpu.yaml"
    prof.write_text(yaml.safe_dump(PROFILE))
    work = tmp_path / "w.yaml"
    work.write_text(yaml.safe_dump_all(docs))
    res = CliRunner().invoke(
        cli, ["simulate", "-f", str(prof), "-w", str(work), "-o", "json"], catch_exceptions=False
    )
    return res.exit_code, json.loads(res.output)


def test_claims_never_fall_back_to_an_offering_that_does_not_fit(tmp_path: Path) -> None:
    """Seeded mixes of pod sizes, GPU pods and DaemonSets: every pod Karpenter provisions for lands on the
    node launched for it, and each new node holds its pods plus the DaemonSet pods (requests within the
    type's allocatable) - the launch never falls back to placing a claim's pod somewhere else."""
    from kgpu.catalog import aws_catalog

    cat = aws_catalog("us-west-2")
    for seed in range(6):
        r = random.Random(seed)
        docs: list[dict[str, Any]] = [daemonset("agent", f"{r.choice((100, 500, 1500))}m", "256Mi")]
        for c in range(6):
            gpus = r.choice((0, 0, 1, 2))
            cpu = r.choice((250, 1000, 3000, 7000, 15000))
            for k in range(r.choice((1, 3, 7))):
                docs.append(
                    pod_dict(
                        f"c{c}-{k}",
                        cpu=f"{cpu}m",
                        memory=f"{r.choice((512, 4096, 30000))}Mi",
                        gpus=gpus,
                        tolerations=GPU_TOL if gpus else None,
                    )
                )
        _, data = run(tmp_path, docs)
        nodes = {n["name"]: n for n in data["new_nodes"]}
        requests: dict[str, int] = {}
        for pod in data["pods"]:
            if pod["phase"] == "Provisioned":
                assert pod["node"] in nodes and pod["name"] in [
                    p.split("/")[1] for p in nodes[pod["node"]]["pods"]
                ]
                cpu = next(d for d in docs if d["metadata"]["name"] == pod["name"])
                req = cpu["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                requests[pod["node"]] = requests.get(pod["node"], 0) + int(req.removesuffix("m"))
        ds_cpu = int(
            docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"].removesuffix(
                "m"
            )
        )
        for name, node in nodes.items():
            alloc = cat.get(node["instance_type"]).allocatable()["cpu"]
            assert requests.get(name, 0) + ds_cpu <= alloc, (seed, name, node["instance_type"])


def test_daemonset_overhead_counts(tmp_path: Path) -> None:
    """suite_test.go Daemonsets "should account for daemonset resources": a 1.5-core DaemonSet leaves no
    2-vCPU type for a 1-core pod, so the node is a 4-vCPU type, and it runs the DaemonSet pod."""
    _, data = run(tmp_path, [daemonset("agent", "1500m"), pod_dict("a", cpu="1", memory="1Gi")])
    node = data["new_nodes"][0]
    assert node["instance_type"].endswith(".xlarge")
    _, bare = run(tmp_path, [pod_dict("a", cpu="1", memory="1Gi")])
    assert bare["new_nodes"][0]["instance_type"].endswith(".large")


def test_pod_no_type_can_host_for_daemonset_overhead_launches_nothing(tmp_path: Path) -> None:
    """suite_test.go Daemonsets "should not schedule if daemonset overhead is too large": a DaemonSet on
    every node asking 15 cores and a 2-core pod: no type of either pool holds both (the largest general type
    has 16 vCPUs), so nothing launches and nothing is billed, with Karpenter's reason."""
    code, data = run(tmp_path, [daemonset("hog", "15"), pod_dict("a", cpu="2", memory="1Gi")])
    assert code == 1
    assert "new_nodes" not in data and data["summary"]["new_nodes"] == 0
    assert data["summary"]["hourly_cost"] == 0 and data["cost"]["total"] == 0
    reason = data["pods"][0]["reason"]
    assert 'incompatible with nodepool "general", daemonset overhead={"cpu":"15"' in reason
    assert "no instance type satisfied resources" in reason


def test_pod_blocked_by_daemonset_host_port_launches_and_bills_nothing(tmp_path: Path) -> None:
    """Host Ports: a DaemonSet holding host port 9100 on every node of both pools and a pod asking for the
    same port: Karpenter launches nothing (the conflict is on every possible node), kgpu bills nothing."""
    pod = pod_dict("exporter", cpu="100m", memory="64Mi")
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
    code, data = run(tmp_path, [daemonset("node-exporter", "100m", port=9100), pod])
    assert code == 1
    assert "new_nodes" not in data and data["summary"]["new_nodes"] == 0
    assert data["summary"]["hourly_cost"] == 0 and data["cost"]["total"] == 0
    assert (
        "checking host port usage, pod hostport conflicts with existing hostport configuration"
        in (data["pods"][0]["reason"])
    )


def test_host_port_daemonset_only_on_one_pool_sends_the_pod_to_the_other(tmp_path: Path) -> None:
    """The DaemonSet does not tolerate the GPU pool's taint, so its port is only taken on general nodes: a
    GPU pod asking for the same port gets a GPU node (and pays for it)."""
    pod = pod_dict("g", cpu="1", memory="1Gi", gpus=1, tolerations=GPU_TOL)
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
    _, data = run(tmp_path, [daemonset("node-exporter", "100m", port=9100, tolerate=False), pod])
    assert data["pods"][0]["phase"] == "Provisioned" and data["pods"][0]["pool"] == "gpu"
    assert data["summary"]["hourly_cost"] > 0


def test_pod_without_requests_launches_nothing_when_daemonset_overhead_exceeds_every_type(
    tmp_path: Path,
) -> None:
    """suite_test.go Daemonsets "should not schedule if daemonset overhead is too large", as written there:
    the DaemonSet asks 10000 cores and 10000Gi, the pod asks nothing. Karpenter fits the pod's requests plus
    the DaemonSet overhead against every resource of a type, so no type holds them and nothing launches."""
    code, data = run(tmp_path, [daemonset("hog", "10000", "10000Gi"), pod_dict("a")])
    assert code == 1
    assert data["summary"]["new_nodes"] == 0 and data["cost"]["total"] == 0
    assert data["pods"][0]["phase"] == "Unschedulable"
    assert 'incompatible with nodepool "general", daemonset overhead={"cpu":"10000","memory":"10000Gi"' in data["pods"][0]["reason"]


def test_daemonset_init_container_or_limit_overhead_too_large_launches_nothing(tmp_path: Path) -> None:
    """suite_test.go Daemonsets "should not schedule if initContainer resources are too large" and "should not
    schedule if resource requests are not defined and limits (requests) are too large": a DaemonSet pod's
    requests are the larger of its init containers' and its containers' (and a limit without a request is
    the request), so these DaemonSets fit no type and a pod asking nothing launches no node."""
    init = daemonset("init-hog", "10m")
    init["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "i", "image": "x", "resources": {"requests": {"cpu": "10000", "memory": "10000Gi"}}}
    ]
    limits = daemonset("limit-hog", "1")
    limits["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1"},
        "limits": {"cpu": "10000", "memory": "10000Gi"},
    }
    for ds in (init, limits):
        code, data = run(tmp_path, [ds, pod_dict("a")])
        assert code == 1, ds["metadata"]["name"]
        assert data["summary"]["new_nodes"] == 0, ds["metadata"]["name"]


def _with_inits(pod: dict[str, Any], *inits: tuple[str, str, bool]) -> dict[str, Any]:
    """``inits``: (name, cpu, sidecar) in order; a sidecar has ``restartPolicy: Always``."""
    pod["spec"]["initContainers"] = [
        {"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
        | ({"restartPolicy": "Always"} if sidecar else {})
        for name, cpu, sidecar in inits
    ]
    return pod


def test_init_containers_and_sidecars_size_the_claim_with_a_capacity_type(tmp_path: Path) -> None:
    """sigs.k8s.io/karpenter v1.8 provisioning suite_test.go "should schedule based on the max resource
    requests of containers and initContainers with sidecar containers when sidecar container comes first
    and init container resources are bigger": a sidecar started before a plain init container runs beside
    it (1 + 3.5 = 4.5 cores, more than a 4-vCPU type holds), while the same init container first peaks at
    3.5 alone (the main container and the sidecar: 1.5); with a capacity-type node selector the claim
    launches at that capacity type's price."""
    from kgpu.catalog import aws_catalog

    cat = aws_catalog("us-west-2")
    on_demand = {"karpenter.sh/capacity-type": "on-demand"}
    sidecar_first = _with_inits(
        pod_dict("a", cpu="500m", memory="1Gi", node_selector=on_demand), ("proxy", "1", True), ("setup", "3500m", False)
    )
    init_first = _with_inits(
        pod_dict("a", cpu="500m", memory="1Gi", node_selector=on_demand), ("setup", "3500m", False), ("proxy", "1", True)
    )
    _, big = run(tmp_path, [sidecar_first])
    _, small = run(tmp_path, [init_first])
    [b], [s] = big["new_nodes"], small["new_nodes"]
    assert cat.get(b["instance_type"]).vcpus >= 8
    assert cat.get(s["instance_type"]).vcpus == 4
    assert b["capacity_type"] == s["capacity_type"] == "on-demand"
    spot = dict(init_first, spec={**init_first["spec"], "nodeSelector": {"karpenter.sh/capacity-type": "spot"}})
    _, cheap = run(tmp_path, [spot])
    [c] = cheap["new_nodes"]
    assert c["capacity_type"] == "spot" and c["hourly_price"] < s["hourly_price"]

"""`kgpu doctor`'s Kueue checks (kgpu.doctor.queues) on clusters shaped as `kubectl get -o json` returns them from
a cluster running Kueue v0.15.0 (kueue.x-k8s.io/v1beta2 objects, status as Kueue writes it): each finding fires
on a cluster with the fault and stays silent on a healthy one and on a cluster without Kueue."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from click.testing import CliRunner

from builders import node_dict, pod_dict
from kgpu.cli.main import cli
from kgpu.doctor import all_check_ids, doctor_report
from test_kueue_model import (
    T0,
    admitted,
    cluster_queue,
    container,
    gpu_group,
    local_queue,
    namespace,
    podset,
    resource_flavor,
    workload,
)

A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def gpu_node(name: str, gpus: int = 8, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return node_dict(
        name,
        cpu="96",
        memory="1100Gi",
        gpus=gpus,
        labels={
            "node.kubernetes.io/instance-type": "p4d.24xlarge",
            "karpenter.sh/capacity-type": "on-demand",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": str(gpus),
            **A100,
            **(labels or {}),
        },
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
    )


def nodepool(
    name: str,
    labels: dict[str, str] | None = None,
    limit: str | None = None,
    requirements: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": labels or {}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": requirements or [],
            },
        }
    }
    if limit is not None:
        spec["limits"] = {"nvidia.com/gpu": limit}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def cluster(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def team(cq_quota: int = 16, flavor_labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [
        resource_flavor("a100", flavor_labels if flavor_labels is not None else A100),
        cluster_queue("team-a", gpu_group(("a100", cq_quota))),
        namespace("team-a"),
        local_queue("team-a", "jobs", "team-a"),
    ]


def running(job: str, gpus: int) -> dict[str, Any]:
    psa = {
        "name": "main",
        "flavors": {"nvidia.com/gpu": "a100"},
        "resourceUsage": {"nvidia.com/gpu": str(gpus)},
        "count": 1,
    }
    return workload("team-a", job, "jobs", podset(1, container(gpus)), status=admitted("team-a", [psa]))


def kueue_findings(doc: dict[str, Any]) -> dict[str, list[Any]]:
    report = doctor_report(doc)
    return {c: report.by_check(c) for c in all_check_ids() if c.startswith("kueue-") and report.by_check(c)}


def test_a_healthy_kueue_cluster_and_a_cluster_without_kueue_get_no_kueue_finding() -> None:
    healthy = cluster(gpu_node("gpu-1"), gpu_node("gpu-2"), *team(16), running("train", 8))
    assert kueue_findings(healthy) == {}
    assert kueue_findings(cluster(gpu_node("gpu-1"))) == {}
    # Kueue's objects alone (no node, no NodePool in the input): nothing said of the nodes
    assert kueue_findings(cluster(*team(16, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}))) == {}


def test_an_inactive_cluster_queue_in_kueues_words() -> None:
    cq = cluster_queue("team-a", gpu_group(("a100", 8), ("h100", 8)))
    doc = cluster(
        gpu_node("gpu-1"),
        resource_flavor("a100", A100),
        cq,
        namespace("team-a"),
        local_queue("team-a", "jobs", "team-a"),
    )
    (f,) = kueue_findings(doc)["kueue-clusterqueue-inactive"]
    assert f.severity == "error" and f.object == "ClusterQueue/team-a"
    assert "references missing ResourceFlavor(s): h100" in f.message


def test_a_local_queue_to_no_cluster_queue_and_pods_naming_no_local_queue() -> None:
    pod = pod_dict("train-0", gpus=1, namespace="team-a", tolerations=TOL)
    pod["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "jbos"}
    stranded = workload("team-a", "eval", "old", podset(1, container(1)))
    typo = workload("team-a", "tune", "jbos", podset(1, container(1)))
    doc = cluster(gpu_node("gpu-1"), *team(8), local_queue("team-a", "old", "team-z"), pod, stranded, typo)
    found = kueue_findings(doc)
    (lq,) = found["kueue-localqueue-no-clusterqueue"]
    assert lq.object == "LocalQueue/team-a/old" and "ClusterQueue team-z, which does not exist" in lq.message
    assert "1 wait there (job-eval-" in lq.message
    (named,) = found["kueue-queue-name-unknown"]
    assert "LocalQueue jbos" in named.message and "it has jobs, old" in named.message
    assert "1 Workload(s) (job-tune-" in named.message
    assert ") and 1 pod(s) (train-0) name LocalQueue jbos" in named.message
    assert "LocalQueue jbos doesn't exist" in named.message
    # neither is counted as waiting for quota: there is no quota to wait for
    assert "kueue-pending-on-quota" not in found
    fixed = cluster(gpu_node("gpu-1"), *team(8), workload("team-a", "tune", "jobs", podset(1, container(1))))
    assert kueue_findings(fixed) == {}


def test_quota_in_a_flavor_no_node_and_no_nodepool_can_give() -> None:
    h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    doc = cluster(gpu_node("gpu-1"), *team(8, h100))
    (f,) = kueue_findings(doc)["kueue-flavor-no-nodes"]
    assert f.object == "ResourceFlavor/a100" and "8 nvidia.com/gpu of quota" in f.message
    # a NodePool that does not pin the product label could launch such nodes (GFD labels them): silent
    assert "kueue-flavor-no-nodes" not in kueue_findings(
        cluster(gpu_node("gpu-1"), *team(8, h100), nodepool("gpu"))
    )
    # one that pins another capacity type cannot
    pinned = nodepool(
        "gpu", requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
    )
    labels = {**h100, "karpenter.sh/capacity-type": "on-demand"}
    (g,) = kueue_findings(cluster(gpu_node("gpu-1"), *team(8, labels), pinned))["kueue-flavor-no-nodes"]
    assert "no NodePool can launch one" in g.message
    # a NodePool of CPU instance types launches no node with nvidia.com/gpu
    cpu_only = nodepool(
        "general",
        requirements=[
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}
        ],
    )
    assert "kueue-flavor-no-nodes" in kueue_findings(cluster(gpu_node("gpu-1"), *team(8, h100), cpu_only))
    # the flavor selects p5 by instance type: a NodePool of A10G GPUs (g5) cannot launch one, a p5 one can
    p5 = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    g5 = nodepool(
        "g5", requirements=[{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]}]
    )
    p5_pool = nodepool(
        "p5",
        requirements=[{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]}],
    )
    assert "kueue-flavor-no-nodes" in kueue_findings(cluster(gpu_node("gpu-1"), *team(8, p5), g5))
    assert "kueue-flavor-no-nodes" not in kueue_findings(
        cluster(gpu_node("gpu-1"), *team(8, p5), g5, p5_pool)
    )


def test_quota_beyond_what_nodes_and_nodepool_limits_hold() -> None:
    pool = nodepool("gpu", limit="24")  # 16 GPUs exist outside it, it may launch 24
    doc = cluster(gpu_node("gpu-1"), gpu_node("gpu-2"), pool, *team(48))
    (f,) = kueue_findings(doc)["kueue-quota-beyond-capacity"]
    assert "nominal quota of 48 nvidia.com/gpu" in f.message and "offer 16 plus 24" in f.message
    assert "kueue-quota-beyond-capacity" not in kueue_findings(
        cluster(gpu_node("gpu-1"), gpu_node("gpu-2"), pool, *team(40))
    )
    # a NodePool of CPU instance types without a GPU limit adds no GPUs: the warning stays
    cpu_only = nodepool(
        "general",
        requirements=[{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}],
    )
    assert "kueue-quota-beyond-capacity" in kueue_findings(
        cluster(gpu_node("gpu-1"), gpu_node("gpu-2"), pool, cpu_only, *team(48))
    )
    unbounded = nodepool("gpu")  # no GPU limit: Karpenter may launch any number
    assert "kueue-quota-beyond-capacity" not in kueue_findings(
        cluster(gpu_node("gpu-1"), unbounded, *team(400))
    )


def test_pending_on_quota_quotes_kueue_and_pending_on_nodes_quotes_the_scheduler() -> None:
    big = workload("team-a", "big", "jobs", podset(1, container(16)))
    pod = pod_dict("train-0", gpus=8, namespace="team-a", tolerations=TOL)
    pod["metadata"]["labels"] = {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/queue-name": "jobs"}
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": T0,
                "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
                "1 No preemption victims found for incoming pod.",
            }
        ],
    }
    doc = cluster(gpu_node("gpu-1"), *team(16), running("train", 8), big, pod)
    found = kueue_findings(doc)
    (q,) = found["kueue-pending-on-quota"]
    assert q.severity == "info" and q.object == "ClusterQueue/team-a"
    assert "insufficient unused quota for nvidia.com/gpu in flavor a100, 8 more needed" in q.message
    (n,) = found["kueue-pending-on-nodes"]
    assert "1 Insufficient nvidia.com/gpu" in n.message and n.object == "Namespace/team-a"


def preempted(job: str, times: int) -> dict[str, Any]:
    """A Workload Kueue has preempted ``times`` times and requeued, as it reads after the last eviction."""
    wl = workload("team-a", job, "jobs", podset(1, container(4)))
    said = (
        "Preempted to accommodate a workload (UID: 5b0e4c1e-8d4f-4c1a-9f55-1f3c2b7d9e01, JobUID: "
        "0c3f1a2b-7e6d-4f8a-b1c2-d3e4f5a6b7c8) due to reclamation within the cohort; preemptor path: /gpu/team-b; "
        "preemptee path: /gpu/team-a"
    )
    wl["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "lastTransitionTime": T0,
                "message": said,
            },
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "lastTransitionTime": T0,
                "message": said,
            },
            {
                "type": "Preempted",
                "status": "True",
                "reason": "InCohortReclamation",
                "lastTransitionTime": T0,
                "message": said,
            },
        ],
        "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": times}]},
    }
    return wl


def test_workloads_preempted_again_and_again_one_finding_per_cluster_queue() -> None:
    doc = cluster(
        gpu_node("gpu-1"), *team(16), preempted("flaky", 5), preempted("shaky", 3), preempted("fine", 1)
    )
    (f,) = kueue_findings(doc)["kueue-preemption-loop"]
    assert f.object == "ClusterQueue/team-a"
    assert re.search(
        r"2 Workload\(s\) preempted 3 or more times \(team-a/job-flaky-\w+ 5x, team-a/job-shaky-\w+ 3x;",
        f.message,
    )
    assert "due to reclamation within the cohort" in f.message
    assert "kueue-preemption-loop" not in kueue_findings(
        cluster(gpu_node("gpu-1"), *team(16), preempted("x", 2))
    )
    # requeueState.count counts PodsReady-timeout evictions, not preemptions
    timed_out = preempted("slow", 0)
    timed_out["status"]["requeueState"] = {"count": 4, "requeueAt": T0}
    assert "kueue-preemption-loop" not in kueue_findings(cluster(gpu_node("gpu-1"), *team(16), timed_out))


def test_unreadable_kueue_objects_leave_the_other_checks_running() -> None:
    bad = cluster_queue("team-a", gpu_group(("a100", 8)))
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    doc = cluster(gpu_node("gpu-1"), resource_flavor("a100", A100), bad)
    report = doctor_report(doc)
    (f,) = report.by_check("kueue-unreadable")
    assert "nominalQuota" in f.message
    assert report.counts["gpu_nodes"] == 1


def test_five_thousand_pending_workloads_make_a_few_lines(tmp_path: Any) -> None:
    items = [gpu_node("gpu-1"), *team(8)]
    items += [workload("team-a", f"job-{i}", "jobs", podset(1, container(16))) for i in range(5000)]
    path = tmp_path / "cluster.json"
    import json

    path.write_text(json.dumps(cluster(*items)))
    t = time.perf_counter()
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(path)])
    took = time.perf_counter() - t
    print(f"doctor on 5,000 pending Workloads: {took:.2f}s, {res.output.count(chr(10))} lines")
    assert res.exit_code in (0, 1), res.output
    assert "5000 Workload(s) wait for quota" in res.output
    assert res.output.count("\n") < 60


@pytest.mark.parametrize("check", [c for c in all_check_ids() if c.startswith("kueue-")])
def test_every_kueue_check_is_documented(check: str) -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "doctor.md").read_text()
    assert f"`{check}`" in doc

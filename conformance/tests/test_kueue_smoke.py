"""Smoke test of the real Kueue on the rig (``kueue_rig``: minimalkueue from sigs.k8s.io/kueue v0.15.0 on the
rig's kube-apiserver and etcd): hand-built set-ups whose outcome follows from Kueue's documented admission
rules, asserted on what Kueue writes into the Workloads, word for word where Kueue's words are fixed.

Every Workload requests one resource that can fail (GPUs; cpu and memory well inside the quota), since with
two failing resources Kueue names them in Go map order (``kueue_diff.resource_order``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kueue_rig import API, Key, KueueRig, condition, is_true

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def rig(kueue: KueueRig) -> KueueRig:
    return kueue


def flavor(name: str, product: str = "NVIDIA-A100-SXM4-80GB") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}},
    }


def cluster_queue(name: str, flavors: list[tuple[str, int, dict[str, str]]], **spec: Any) -> dict[str, Any]:
    """``flavors``: (ResourceFlavor, GPU nominal quota, extra GPU quota fields such as lendingLimit)."""
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            **spec,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": f,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "64"},
                                {"name": "memory", "nominalQuota": "256Gi"},
                                {"name": GPU, "nominalQuota": str(gpus), **extra},
                            ],
                        }
                        for f, gpus, extra in flavors
                    ],
                }
            ],
        },
    }


def team(rig: KueueRig, cq: dict[str, Any]) -> str:
    """The ClusterQueue, a namespace of its name and a LocalQueue ``team-queue`` there; waits until active."""
    ns = str(cq["metadata"]["name"])
    rig.create_all(
        [
            cq,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "team-queue", "namespace": ns},
                "spec": {"clusterQueue": ns},
            },
        ]
    )
    rig.wait_active({"ClusterQueue": {ns}, "LocalQueue": {f"{ns}/team-queue"}})
    return ns


def job_workload(ns: str, job: str, gpus: int, priority: int = 0) -> dict[str, Any]:
    """A Workload as Kueue's batch/v1 Job integration creates it for a one-pod Job."""
    uid = f"00000000-0000-4000-8000-{abs(hash((ns, job))) % 10**12:012d}"
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": f"job-{job}-1a2b3",
            "namespace": ns,
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": "team-queue",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "nvcr.io/nvidia/pytorch:24.07-py3",
                                    "resources": {
                                        "requests": {"cpu": "1", "memory": "4Gi", GPU: str(gpus)},
                                        "limits": {GPU: str(gpus)},
                                    },
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def settle(rig: KueueRig, tried: list[Key]) -> dict[Key, dict[str, Any]]:
    """Kueue's settled Workloads, once every Workload of ``tried`` carries a QuotaReserved condition."""

    def ready(snap: dict[Key, dict[str, Any]]) -> str | None:
        missing = [k for k in tried if k not in snap or condition(snap[k], "QuotaReserved") is None]
        return f"no QuotaReserved condition on {missing}" if missing else None

    return rig.wait_settled(ready, timeout=60)


def reserved(wl: dict[str, Any]) -> tuple[str, str, str]:
    c = condition(wl, "QuotaReserved") or {}
    return c.get("status", ""), c.get("reason", ""), c.get("message", "")


def key(obj: dict[str, Any]) -> Key:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def test_over_quota_pends_with_kueues_message(rig: KueueRig) -> None:
    """8 GPUs never fit a 4-GPU quota (no cohort): "insufficient quota ... > maximum capacity"; with 3 of
    the 4 in use (the next in priority order) a 2-GPU Workload waits "1 more needed" (withinClusterQueue
    Never: nothing is preempted)."""
    rig.create(flavor("smoke-quota-a100"))
    ns = team(rig, cluster_queue("smoke-quota", [("smoke-quota-a100", 4, {})]))
    big, used, small = (  # distinct priorities: Kueue orders equal ones created in one second at random
        rig.create(job_workload(ns, j, g, priority=p))
        for j, g, p in (("big", 8, 100), ("used", 3, 50), ("small", 2, 10))
    )
    snap = settle(rig, [key(big), key(used), key(small)])
    assert reserved(snap[key(big)]) == (
        "False",
        "Pending",
        (
            f"couldn't assign flavors to pod set main: insufficient quota for {GPU} in flavor smoke-quota-a100, "
            "previously considered podsets requests (0) + current podset request (8) > maximum capacity (4)"
        ),
    )
    assert reserved(snap[key(used)]) == (
        "True",
        "QuotaReserved",
        "Quota reserved in ClusterQueue smoke-quota",
    )
    assert snap[key(used)]["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "smoke-quota-a100",
        "memory": "smoke-quota-a100",
        GPU: "smoke-quota-a100",
    }
    assert reserved(snap[key(small)]) == (
        "False",
        "Pending",
        (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in flavor smoke-quota-a100, "
            "1 more needed"
        ),
    )


def test_borrowing_from_the_cohort_up_to_the_lending_limit(rig: KueueRig) -> None:
    """team-a (4 GPUs) borrows from team-b (4 GPUs, lendingLimit 2) in a cohort: 6 GPUs are admitted, one
    more is not: team-b lends no more than 2."""
    rig.create(flavor("smoke-borrow-a100"))
    team(
        rig,
        cluster_queue(
            "smoke-borrow-b", [("smoke-borrow-a100", 4, {"lendingLimit": "2"})], cohortName="smoke-borrow"
        ),
    )
    ns = team(rig, cluster_queue("smoke-borrow-a", [("smoke-borrow-a100", 4, {})], cohortName="smoke-borrow"))
    six = rig.create(job_workload(ns, "six", 6, priority=100))
    one = rig.create(job_workload(ns, "one", 1, priority=10))
    snap = settle(rig, [key(six), key(one)])
    assert reserved(snap[key(six)])[:2] == ("True", "QuotaReserved")
    assert snap[key(six)]["status"]["admission"]["clusterQueue"] == "smoke-borrow-a"
    assert reserved(snap[key(one)]) == (
        "False",
        "Pending",
        (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in flavor smoke-borrow-a100, "
            "1 more needed"
        ),
    )


def test_preemption_within_the_cluster_queue(rig: KueueRig) -> None:
    """withinClusterQueue LowerPriority: a priority-100 Workload evicts the priority-10 one holding the
    quota; the rig releases the eviction as the job integration would, the preemptor is admitted, and the
    victim waits with Kueue's message."""
    rig.create(flavor("smoke-preempt-a100"))
    ns = team(
        rig,
        cluster_queue(
            "smoke-preempt",
            [("smoke-preempt-a100", 4, {})],
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
    )
    low = rig.create(job_workload(ns, "low", 4, priority=10))
    settle(rig, [key(low)])
    rig.evictions.clear()
    high = rig.create(job_workload(ns, "high", 2, priority=100))
    snap = settle(rig, [key(high), key(low)])
    assert reserved(snap[key(high)])[:2] == ("True", "QuotaReserved")
    words = (
        f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, "
        f"JobUID: {high['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to prioritization in the "
        "ClusterQueue; preemptor path: /smoke-preempt; preemptee path: /smoke-preempt"
    )
    evicted = condition(snap[key(low)], "Evicted") or {}
    assert (evicted.get("status"), evicted.get("reason"), evicted.get("message")) == (
        "True",
        "Preempted",
        words,
    )
    assert (condition(snap[key(low)], "Preempted") or {}).get("reason") == "InClusterQueue"
    assert rig.evictions[key(low)]["message"] == words
    assert reserved(snap[key(low)]) == (
        "False",
        "Pending",
        (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in flavor smoke-preempt-a100, "
            "2 more needed"
        ),
    )


def test_strict_fifo_head_blocks_what_best_effort_admits(rig: KueueRig) -> None:
    """A head that can never fit (8 GPUs of 4): BestEffortFIFO admits the 1-GPU Workload behind it;
    StrictFIFO keeps trying the head and never looks at the one behind (no QuotaReserved condition)."""
    rig.create(flavor("smoke-fifo-a100"))
    out: dict[str, tuple[Key, Key]] = {}
    for strategy in ("BestEffortFIFO", "StrictFIFO"):
        ns = team(
            rig,
            cluster_queue(
                f"smoke-fifo-{strategy.lower()}", [("smoke-fifo-a100", 4, {})], queueingStrategy=strategy
            ),
        )
        out[strategy] = (
            key(rig.create(job_workload(ns, "head", 8, priority=100))),
            key(rig.create(job_workload(ns, "behind", 1, priority=10))),
        )
    snap = settle(rig, [out["BestEffortFIFO"][0], out["BestEffortFIFO"][1], out["StrictFIFO"][0]])
    head, behind = out["BestEffortFIFO"]
    assert reserved(snap[head])[:2] == ("False", "Pending")
    assert is_true(snap[behind], "QuotaReserved")
    head, behind = out["StrictFIFO"]
    assert reserved(snap[head])[:2] == ("False", "Pending")
    assert condition(snap[behind], "QuotaReserved") is None
    assert not snap[behind].get("status", {}).get("admission")


def test_finished_workload_frees_its_quota(rig: KueueRig) -> None:
    """Finishing a Workload as Kueue's performance runner does (the Finished condition, applied) frees its
    quota: the one waiting for it is admitted."""
    rig.create(flavor("smoke-finish-a100"))
    ns = team(rig, cluster_queue("smoke-finish", [("smoke-finish-a100", 4, {})]))
    first = rig.create(job_workload(ns, "first", 4, priority=100))
    second = rig.create(job_workload(ns, "second", 4, priority=10))
    snap = settle(rig, [key(first), key(second)])
    assert is_true(snap[key(first)], "QuotaReserved") and not is_true(snap[key(second)], "QuotaReserved")
    done = rig.finish(*key(first))
    assert is_true(done, "Finished")
    snap = settle(rig, [key(second)])
    assert is_true(snap[key(second)], "QuotaReserved")


def test_crds_serve_v1beta2_only(rig: KueueRig) -> None:
    """The rig stores and serves v1beta2 (no conversion webhook runs in minimalkueue)."""
    crd = rig.cluster.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workloads.kueue.x-k8s.io")
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1beta2", True, True)
    ]
    assert Path(rig.binary).name == "minimalkueue"

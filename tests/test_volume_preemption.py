"""DefaultPreemption for pods with PersistentVolumeClaims: the dry run runs the volume plugins on each node it
tries (kube-scheduler v1.34's SelectVictimsOnNode runs every filter), VolumeRestrictions' PreFilter
extensions let evicting the pod that holds a ReadWriteOncePod claim free it, and an evicted pod's claims
count one user less. Objects shaped as in test_volumes (the EBS and EFS CSI drivers' volumes)."""

from __future__ import annotations

from typing import Any

from builders import pod_dict
from kgpu.doctor.pending import _Existing
from kgpu.doctor.reading import cluster_state
from kgpu.model.load import parse_documents
from kgpu.sim.simulate import simulate
from test_volumes import ebs_class, ebs_pv, nodes, pvc, trainer

RWOP_WORDS = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
    "by another pod"
)


def shared_pv(name: str, claim: str) -> dict[str, Any]:
    """An EFS access point volume: no node affinity (every node reaches it), bound to ``claim``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": "efs.csi.aws.com"}},
        "spec": {
            "accessModes": ["ReadWriteOncePod"],
            "capacity": {"storage": "100Gi"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "name": claim,
                "namespace": "ml",
            },
            "csi": {
                "driver": "efs.csi.aws.com",
                "volumeHandle": "fs-0123456789abcdef0::fsap-0a1b2c3d4e5f60718",
            },
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "efs-sc",
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound"},
    }


def on(doc: dict[str, Any], node: str, priority: int) -> dict[str, Any]:
    doc["spec"]["nodeName"] = node
    doc["spec"]["priority"] = priority
    doc["status"] = {"phase": "Running", "startTime": "2026-11-28T08:00:00Z"}
    return doc


def rwop_cluster() -> list[dict[str, Any]]:
    """Two nodes; the claim ``solo`` (ReadWriteOncePod) is used by a priority-0 pod on n-a, and n-b runs
    another priority-0 pod."""
    holder = on(trainer("holder", "solo"), "n-a", 0)
    filler = on(pod_dict("filler", cpu="1", namespace="ml"), "n-b", 0)
    return [
        *nodes("us-west-2a", "us-west-2b"),
        ebs_class(),
        shared_pv("pv-solo", "solo"),
        pvc("solo", "efs-sc", volume="pv-solo", modes=("ReadWriteOncePod",), phase="Bound"),
        holder,
        filler,
    ]


def placed(cluster: list[dict[str, Any]], work: list[dict[str, Any]]) -> dict[str, Any]:
    result = simulate(parse_documents(cluster, "cluster.json"), parse_documents(work, "w.json"))
    return {p.pod.name: p for p in result.placements}


def test_a_higher_priority_pod_evicts_the_holder_of_its_read_write_once_pod_claim() -> None:
    """PreFilter counts the claim in use; on n-a the dry run takes the holder off (RemovePod: the count drops
    to 0) and putting it back conflicts again, so it is the victim; on n-b the conflict stays."""
    urgent = trainer("urgent", "solo")
    urgent["spec"]["priority"] = 1000
    out = placed(rwop_cluster(), [urgent])
    assert out["urgent"].node == "n-a"
    assert out["urgent"].victims == ["ml/holder"]
    assert out["holder"].phase == "Preempted" and out["holder"].preempted_by == "ml/urgent"
    assert "filler" not in out  # n-b's pod is not touched


def test_the_evicted_holder_s_claim_is_then_in_use_by_the_preemptor() -> None:
    """After the eviction the claim counts the preemptor, not the holder: a third pod asking for it sees the
    conflict (and, being of priority 0, preempts nobody)."""
    urgent = trainer("urgent", "solo")
    urgent["spec"]["priority"] = 1000
    late = trainer("late", "solo")
    late["spec"]["priority"] = 0
    out = placed(rwop_cluster(), [urgent, late])
    assert out["urgent"].node == "n-a"
    assert out["late"].reason == (
        f"0/2 nodes are available: 2 {RWOP_WORDS}. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 2 No preemption victims found for incoming pod."
    )


def test_a_pod_of_equal_priority_gets_the_conflict_from_every_node_in_the_dry_run() -> None:
    """Nothing below it anywhere: every node is potential (VolumeRestrictions' status is Unschedulable) and
    has no victim."""
    out = placed(rwop_cluster(), [trainer("peer", "solo")])
    assert out["peer"].node is None
    assert out["peer"].reason == (
        f"0/2 nodes are available: 2 {RWOP_WORDS}. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 2 No preemption victims found for incoming pod."
    )


def zonal_cluster() -> list[dict[str, Any]]:
    """The claim ``ckpt`` is bound to an EBS volume in us-west-2b. n-a (2a) is full with a priority-0 pod,
    n-b (2b) with a priority-5000 one."""
    low = on(pod_dict("batch", cpu="4", namespace="ml"), "n-a", 0)
    vip = on(pod_dict("vip", cpu="4", namespace="ml"), "n-b", 5000)
    return [
        *nodes("us-west-2a", "us-west-2b"),
        ebs_class(),
        ebs_pv("pvc-1", "us-west-2b", "ckpt"),
        pvc("ckpt", volume="pvc-1", phase="Bound"),
        low,
        vip,
    ]


def test_the_dry_run_runs_the_volume_plugins_on_a_node_it_frees() -> None:
    """n-a fails NodeResourcesFit first (resolvable); with its pod off, VolumeBinding rejects it for the
    volume's zone. So no candidate, and the PostFilter words say why, node by node."""
    train = trainer("train", "ckpt", cpu="3")
    train["spec"]["priority"] = 1000
    out = placed(zonal_cluster(), [train])
    assert out["train"].node is None
    assert "batch" not in out  # not evicted
    assert out["train"].reason == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 1 No preemption victims found for incoming pod, 1 node(s) didn't match PersistentVolume's "
        "node affinity."
    )


def test_a_pod_with_claims_preempts_in_its_volume_s_zone() -> None:
    """The same pod with n-b's pod at priority 0: n-b is the candidate, its pod the victim."""
    cluster = zonal_cluster()
    cluster[-1]["spec"]["priority"] = 0
    train = trainer("train", "ckpt", cpu="3")
    train["spec"]["priority"] = 1000
    out = placed(cluster, [train])
    assert out["train"].node == "n-b" and out["train"].victims == ["ml/vip"]


def test_doctor_words_a_pending_pod_with_claims_as_simulate_does() -> None:
    """doctor's explanation of the pending pod (the cluster as it is) carries the same PostFilter words."""
    train = trainer("train", "ckpt", cpu="3")
    train["spec"]["priority"] = 1000
    state = cluster_state({"apiVersion": "v1", "kind": "List", "items": [*zonal_cluster(), train]})
    pod = next(p for p in state.pods if p.name == "train")
    assert _Existing(state).reason(pod.model) == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 1 No preemption victims found for incoming pod, 1 node(s) didn't match PersistentVolume's "
        "node affinity."
    )


def test_on_the_exact_path_the_conflict_comes_before_pod_affinity() -> None:
    """A pod whose required pod affinity no pod meets (InterPodAffinity: UnschedulableAndUnresolvable) but
    whose claim is in use: VolumeRestrictions rejects every node first, so every node is potential. On n-a
    the holder taken off ends the conflict and pod affinity then fails; on n-b the conflict stays."""
    urgent = trainer("urgent", "solo")
    urgent["spec"]["priority"] = 1000
    urgent["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "cache"}}}]}}
    out = placed(rwop_cluster(), [urgent])
    assert out["urgent"].node is None
    assert out["urgent"].reason == (
        f"0/2 nodes are available: 2 {RWOP_WORDS}. no new claims to deallocate, preemption: 0/2 nodes are "
        f"available: 1 node(s) didn't match pod affinity rules, 1 {RWOP_WORDS}.")

"""Pods with PersistentVolumeClaims placed as kube-scheduler's VolumeRestrictions, VolumeBinding and
VolumeZone place them (v1.34 words), claims binding where their first pod lands, and the provisioners
growing nodes in the volume's zone. Objects are shaped like `kubectl get -o yaml` of what the EBS CSI driver,
the EFS CSI driver and a StatefulSet create."""

from __future__ import annotations

from typing import Any

import pytest

from builders import node_dict, pod_dict
from kgpu.errors import InputError
from kgpu.model.inputs import Objects
from kgpu.model.load import parse_documents
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import simulate
from test_provision_karpenter import CAT, GENERAL, profile

ZONE = "topology.kubernetes.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"


def nodes(*zones: str, cpu: str = "4") -> list[dict[str, Any]]:
    return [
        node_dict(f"n-{z[-1]}", cpu=cpu, labels={ZONE: z, "topology.kubernetes.io/region": z[:-1],
                                                  "kubernetes.io/hostname": f"n-{z[-1]}"})
        for z in zones
    ]


def ebs_class(name: str = "ebs-gp3", mode: str = "WaitForFirstConsumer", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3", "encrypted": "true"},
        "reclaimPolicy": "Delete", "volumeBindingMode": mode, "allowVolumeExpansion": True, **extra,
    }


def efs_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "efs-sc"},
        "provisioner": "efs.csi.aws.com",
        "parameters": {"provisioningMode": "efs-ap", "fileSystemId": "fs-0123456789abcdef0", "directoryPerms": "700"},
    }


def pvc(name: str, cls: str | None = "ebs-gp3", *, size: str = "100Gi", modes: tuple[str, ...] = ("ReadWriteOnce",),
        volume: str = "", phase: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}},
                            "volumeMode": "Filesystem"}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": name, "namespace": "ml"}, "spec": spec}
    if phase:
        doc["status"] = {"phase": phase}
    return doc


def ebs_pv(name: str, zone: str, claim: str, *, size: str = "100Gi") -> dict[str, Any]:
    """A volume as the EBS CSI driver provisions it (bound; zone in nodeAffinity)."""
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"], "capacity": {"storage": size},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": claim, "namespace": "ml"},
            "csi": {"driver": "ebs.csi.aws.com", "fsType": "ext4", "volumeHandle": "vol-0a1b2c3d4e5f60718"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": EBS_ZONE, "operator": "In", "values": [zone]}]}]}},
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "ebs-gp3", "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound"},
    }


def trainer(name: str, *claims: str, cpu: str = "1") -> dict[str, Any]:
    doc = pod_dict(name, cpu=cpu, namespace="ml")
    doc["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return doc


def run(cluster: list[dict[str, Any]], work: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    result = simulate(parse_documents(cluster, "cluster.yaml"), parse_documents(work, "w.yaml"), **kw)
    return {p.pod.name: p for p in result.placements}


def test_bound_ebs_volume_pins_the_pod_to_its_zone() -> None:
    """A claim bound to an EBS volume in us-west-2b: only the 2b node passes VolumeBinding."""
    out = run([*nodes("us-west-2a", "us-west-2b", "us-west-2c"), ebs_class(), ebs_pv("pvc-1", "us-west-2b", "ckpt"),
               pvc("ckpt", volume="pvc-1", phase="Bound")], [trainer("train", "ckpt")])
    assert out["train"].node == "n-b" and out["train"].warnings == ()


def test_volume_zone_conflict_words() -> None:
    """The only node in the volume's zone is full: kube-scheduler's words, each node counted once under the
    first filter it fails."""
    busy = pod_dict("busy", cpu="2", node_name="n-b", phase="Running")
    out = run([*nodes("us-west-2a", "us-west-2b"), ebs_class(), ebs_pv("pvc-1", "us-west-2b", "ckpt"),
               pvc("ckpt", volume="pvc-1", phase="Bound"), busy], [trainer("train", "ckpt", cpu="3")])
    reason = out["train"].reason
    assert reason.startswith("0/2 nodes are available: 1 Insufficient cpu, "
                             "1 node(s) didn't match PersistentVolume's node affinity.")


def test_pv_zone_labels_are_volume_zone() -> None:
    """A volume with zone labels and no node affinity (an old in-tree volume): VolumeZone's words."""
    pv = ebs_pv("pvc-1", "us-west-2b", "ckpt")
    del pv["spec"]["nodeAffinity"]
    pv["metadata"]["labels"] = {ZONE: "us-west-2c"}
    out = run([*nodes("us-west-2a", "us-west-2b"), ebs_class(), pv, pvc("ckpt", volume="pvc-1", phase="Bound")],
              [trainer("train", "ckpt")])
    assert out["train"].reason == ("0/2 nodes are available: 2 node(s) had no available volume zone. "
                                   "no new claims to deallocate, preemption: 0/2 nodes are available: "
                                   "2 Preemption is not helpful for scheduling.")


def test_wait_for_first_consumer_binds_where_the_first_pod_lands_and_others_follow() -> None:
    """A WaitForFirstConsumer claim binds in the zone of the node its first pod lands on; a second pod of the
    same claim (ReadWriteMany is not needed for this: the scheduler does not check ReadWriteOnce) must follow
    it although the other zone's node is emptier."""
    cluster = [*nodes("us-west-2a", "us-west-2b"), ebs_class()]
    first = trainer("first", "ckpt", cpu="3")
    second = trainer("second", "ckpt", cpu="500m")
    out = run(cluster, [pvc("ckpt"), first, second])
    assert out["first"].node == "n-a"  # ties broken by name
    assert out["second"].node == "n-a"
    alone = run(cluster, [pvc("ckpt"), trainer("other", "other-claim", cpu="3"), pvc("other-claim"), second])
    assert alone["other"].node == "n-a" and alone["second"].node == "n-b"  # unbound: the emptier node


def test_efs_claims_go_anywhere() -> None:
    """EFS volumes have no zone: a second pod of the claim takes the emptier node in another zone."""
    out = run([*nodes("us-west-2a", "us-west-2b"), efs_class()],
              [pvc("datasets", "efs-sc", modes=("ReadWriteMany",)), trainer("a", "datasets", cpu="3"),
               trainer("b", "datasets", cpu="1")])
    assert out["a"].node == "n-a" and out["b"].node == "n-b"
    assert out["a"].warnings == () and out["b"].warnings == ()


def test_missing_claim_and_unbound_immediate() -> None:
    """PreFilter's words, for every node at once, and nothing for the provisioners. VolumeBinding's PreFilter
    runs before DynamicResources' and stops the phase, so DynamicResources' PostFilter errs with CycleState's
    "not found" and DefaultPreemption never runs: the real event ends with those two words."""
    out = run([*nodes("us-west-2a"), ebs_class()], [trainer("train", "nope")])
    assert out["train"].reason == '0/1 nodes are available: persistentvolumeclaim "nope" not found. not found'
    assert "preemption" not in out["train"].reason
    # an Immediate claim the cluster says is Pending (no volume could be provisioned yet)
    out = run([*nodes("us-west-2a"), ebs_class(mode="Immediate"), pvc("ckpt", phase="Pending")],
              [trainer("train", "ckpt")])
    assert out["train"].reason.startswith("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    # a class that does not exist is read as Immediate (IsDelayBindingMode)
    out = run([*nodes("us-west-2a"), ebs_class()], [pvc("ckpt", "gp2-old"), trainer("train", "ckpt")])
    assert "pod has unbound immediate PersistentVolumeClaims" in out["train"].reason


def test_no_available_volume_to_bind_with_local_volumes() -> None:
    """No provisioner (local volumes): a WaitForFirstConsumer claim binds only where an Available volume
    fits; the node without one says so."""
    local = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local-nvme"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "local-pv-n-b"},
          "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1700Gi"}, "storageClassName": "local-nvme",
                   "local": {"path": "/mnt/nvme0"},
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n-b"]}]}]}}},
          "status": {"phase": "Available"}}
    out = run([*nodes("us-west-2a", "us-west-2b"), local, pv],
              [pvc("scratch", "local-nvme", size="1000Gi"), trainer("t", "scratch"),
               pvc("scratch2", "local-nvme", size="1000Gi"), trainer("u", "scratch2")])
    assert out["t"].node == "n-b"
    assert out["u"].reason.startswith("0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.")


def test_read_write_once_pod_in_use() -> None:
    """A ReadWriteOncePod claim another pod uses: VolumeRestrictions rejects every node."""
    running = trainer("running", "solo")
    running["spec"]["nodeName"] = "n-a"
    running["status"] = {"phase": "Running"}
    out = run([*nodes("us-west-2a", "us-west-2b"), ebs_class(), ebs_pv("pvc-1", "us-west-2a", "solo"),
               pvc("solo", volume="pvc-1", modes=("ReadWriteOncePod",), phase="Bound"), running],
              [trainer("second", "solo")])
    assert out["second"].reason.startswith(
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access "
        "mode already in-use by another pod.")


def test_statefulset_claims_are_made_from_templates() -> None:
    """A StatefulSet's volumeClaimTemplates: each pod gets its own claim `<template>-<pod>` of the default
    class, bound where it lands; existing claims (data-ckpt-0 in 2b) keep their pod in its zone."""
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ckpt", "namespace": "ml"},
        "spec": {"replicas": 2, "serviceName": "ckpt", "selector": {"matchLabels": {"app": "ckpt"}},
                 "template": {"metadata": {"labels": {"app": "ckpt"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox",
                                                       "resources": {"requests": {"cpu": "1"}}}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                           "spec": {"accessModes": ["ReadWriteOnce"],
                                                    "resources": {"requests": {"storage": "50Gi"}}}}]},
    }
    out = run([*nodes("us-west-2a", "us-west-2b"), ebs_class(), ebs_pv("pvc-9", "us-west-2b", "data-ckpt-0"),
               pvc("data-ckpt-0", volume="pvc-9", phase="Bound")], [sts])
    assert out["ckpt-0"].node == "n-b"
    assert out["ckpt-1"].node == "n-a"
    assert all(p.warnings == () for p in out.values())


def test_karpenter_provisions_in_the_volume_zone() -> None:
    """No node fits: Karpenter launches in the bound volume's zone (its volume topology), whichever zone
    that is."""
    prof = profile(GENERAL)
    cluster = [ebs_class(), ebs_pv("pvc-1", "us-west-2b", "ckpt"), pvc("ckpt", volume="pvc-1", phase="Bound")]
    result = simulate(parse_documents(cluster, "c.yaml"), parse_documents([trainer("train", "ckpt", cpu="3")], "w.yaml"),
                      provisioner=provisioner_for(prof, CAT))
    [p] = result.placements
    assert p.phase == "Provisioned" and p.new_node.zone == "us-west-2b"
    # the other zone for a claim pinned to us-west-2a
    cluster[1] = ebs_pv("pvc-1", "us-west-2a", "ckpt")
    result = simulate(parse_documents(cluster, "c.yaml"), parse_documents([trainer("train", "ckpt", cpu="3")], "w.yaml"),
                      provisioner=provisioner_for(prof, CAT))
    assert result.placements[0].new_node.zone == "us-west-2a"


def test_without_storage_objects_the_warning_stays() -> None:
    """Only pods whose claims kgpu was given nothing about keep the `volumes` warning."""
    out = run(nodes("us-west-2a"), [trainer("t", "data")])
    assert out["t"].node == "n-a"
    assert [w.code for w in out["t"].warnings] == ["volumes"]
    assert "no PersistentVolumeClaim, PersistentVolume or StorageClass was given" in out["t"].warnings[0].message


def test_unknown_provisioner_is_said() -> None:
    """A provisioner kgpu does not know: placed, with a `volumes` warning naming it."""
    cls = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ceph"},
           "provisioner": "rbd.csi.ceph.com", "volumeBindingMode": "WaitForFirstConsumer"}
    out = run([*nodes("us-west-2a"), cls], [pvc("d", "ceph"), trainer("t", "d")])
    assert out["t"].node == "n-a"
    assert "provisioner rbd.csi.ceph.com" in out["t"].warnings[0].message


def test_bad_storage_objects_are_input_errors() -> None:
    """One line naming the file, object and field."""
    bad = pvc("x")
    bad["spec"]["accessModes"] = ["ReadWriteSometimes"]
    with pytest.raises(InputError, match=r"PersistentVolumeClaim ml/x: spec.accessModes\[0\]"):
        run([*nodes("us-west-2a"), bad], [trainer("t", "x")])
    sc = ebs_class(mode="Later")
    with pytest.raises(InputError, match="StorageClass ebs-gp3: volumeBindingMode"):
        run([*nodes("us-west-2a"), sc], [trainer("t", "x")])


def test_pods_without_claims_are_untouched() -> None:
    """Storage objects in the input change nothing for pods without claims."""
    objs: Objects = parse_documents([*nodes("us-west-2a", "us-west-2b"), ebs_class()], "c.yaml")
    result = simulate(objs, parse_documents([pod_dict("plain", cpu="1")], "w.yaml"))
    assert result.placements[0].node == "n-a" and result.placements[0].warnings == ()


def test_spread_counts_every_zone_the_pod_may_use_not_only_the_volume_zone() -> None:
    """A zone spread (nodeAffinityPolicy Honor) counts the domains of every node the pod's own affinity
    matches; the volume's zone is not part of that affinity. With one `app: ckpt` pod in us-west-2b and
    none elsewhere, a second one whose volume is in 2b would make the skew 2: kube-scheduler's words."""
    running = pod_dict("ckpt-old", cpu="1", node_name="n-b", phase="Running", labels={"app": "ckpt"})
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "ckpt"}}}]
    new = trainer("ckpt-new", "ckpt")
    new["metadata"]["labels"] = {"app": "ckpt"}
    new["spec"]["topologySpreadConstraints"] = spread
    new["metadata"]["namespace"] = running["metadata"]["namespace"] = "ml"
    out = run([*nodes("us-west-2a", "us-west-2b", "us-west-2c"), ebs_class(), ebs_pv("pvc-1", "us-west-2b", "ckpt"),
               pvc("ckpt", volume="pvc-1", phase="Bound"), running], [new])
    assert out["ckpt-new"].reason.startswith(
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "2 node(s) didn't match PersistentVolume's node affinity.")


def test_generic_ephemeral_volume_claim_is_made_from_its_template() -> None:
    """A generic ephemeral volume: the claim `<pod>-<volume>` the ephemeral volume controller creates, of the
    template's class; its zone pinned by allowedTopologies puts the pod there."""
    pinned = ebs_class("ebs-2b", allowedTopologies=[{"matchLabelExpressions": [{"key": ZONE, "values": ["us-west-2b"]}]}])
    pinned["metadata"]["annotations"] = {}
    scratch = pod_dict("scratch", cpu="1", namespace="ml")
    scratch["spec"]["volumes"] = [{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "ebs-2b", "resources": {"requests": {"storage": "20Gi"}}}}}}]
    out = run([*nodes("us-west-2a", "us-west-2b"), pinned], [scratch])
    assert out["scratch"].node == "n-b" and out["scratch"].warnings == ()
    scratch["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] = "ebs-2b-typo"
    out = run([*nodes("us-west-2a", "us-west-2b"), pinned], [scratch])
    assert out["scratch"].reason.startswith("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")


def test_snapshot_keeps_claims_volumes_and_classes_for_simulate_and_doctor(tmp_path: Any) -> None:
    """`kgpu snapshot` of a cluster (a fake API server) saves its claims, volumes and classes; `simulate
    --cluster` then says in kube-scheduler's words why the pending trainer cannot run, without the `volumes`
    warning, and doctor explains the pending GPU pod the same way."""
    import json

    import yaml
    from click.testing import CliRunner

    from fake_apiserver import FakeApiServer
    from kgpu.cli.main import cli

    gpu = nodes("us-west-2a", "us-west-2b")
    for n in gpu:
        n["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    train = trainer("train", "ckpt")
    train["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}
    train["status"] = {"phase": "Pending"}
    server = FakeApiServer([*gpu, ebs_class(), ebs_pv("pvc-1", "us-west-2c", "ckpt"),
                            pvc("ckpt", volume="pvc-1", phase="Bound"), train])
    env = {"KUBECONFIG": "", "HOME": "/nonexistent"}
    with server.running():
        kc = tmp_path / "kc"
        kc.write_text(yaml.safe_dump(server.kubeconfig()))
        snap = tmp_path / "snap.json"
        res = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", str(kc), "-f", str(snap)], env=env)
        assert res.exit_code == 0, res.output
    counts = json.loads(snap.read_text())["metadata"]["counts"]
    assert (counts["PersistentVolumeClaim"], counts["PersistentVolume"], counts["StorageClass"]) == (1, 1, 1)
    res = CliRunner().invoke(cli, ["simulate", "--cluster", str(snap), "-o", "json"], env=env)
    assert res.exit_code == 1, res.output
    [p] = json.loads(res.stdout)["pods"]
    assert p["reason"].startswith("0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity.")
    assert p["warnings"] == []
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(snap), "-o", "json"], env=env)
    text = res.stdout
    assert "didn't match PersistentVolume's node affinity" in text and "Not modelled for it: volumes" not in text

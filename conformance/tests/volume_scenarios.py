"""PersistentVolumeClaims in the seeded scenarios: storage objects and claims drawn from their own random stream.

A scenario of ``scenarios.generate`` is drawn unchanged; ``add_volumes`` then adds, from a random stream of
its own (``volumes/<seed>``), what a GPU cluster with datasets and checkpoints holds, as `kubectl get -o
json` shows it:

- StorageClasses: EBS (``ebs.csi.aws.com``) WaitForFirstConsumer, the same pinned to one zone
  (``allowedTopologies``), EBS Immediate, EFS (``efs.csi.aws.com``) WaitForFirstConsumer, local volumes
  (``kubernetes.io/no-provisioner``, WaitForFirstConsumer);
- PersistentVolumes: bound EBS volumes with their zone in ``nodeAffinity`` (``topology.kubernetes.io/zone``,
  the key the EBS CSI driver reports with the well-known label) or, for an old in-tree volume, only in
  their labels (VolumeZone); Available local volumes pinned to one node by ``kubernetes.io/hostname``;
- claims: bound (``pv.kubernetes.io/bind-completed``, phase Bound), unbound WaitForFirstConsumer ones,
  an unbound Immediate one (phase Pending), ReadWriteOncePod ones, some used by bound pods;
- pending pods mount one or two of them (shared between pods), or a claim that does not exist.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from scenarios import ZONES, Scenario

ZONE = "topology.kubernetes.io/zone"
CLASSES = [
    {"metadata": {"name": "ebs-gp3"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
     "parameters": {"type": "gp3"}},
    {"metadata": {"name": "ebs-gp3-2b"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
     "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["us-west-2b"]}]}]},
    {"metadata": {"name": "ebs-immediate"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "Immediate"},
    {"metadata": {"name": "efs"}, "provisioner": "efs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
     "parameters": {"provisioningMode": "efs-ap", "fileSystemId": "fs-0123456789abcdef0"}},
    {"metadata": {"name": "local-nvme"}, "provisioner": "kubernetes.io/no-provisioner",
     "volumeBindingMode": "WaitForFirstConsumer"},
]


class VolumeScenario(Scenario):
    storage: list[dict[str, Any]]


def _claim(name: str, cls: str, size: str, modes: list[str], volume: str = "") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-claim-{name}"},
        "spec": {"accessModes": modes, "storageClassName": cls, "volumeMode": "Filesystem",
                 "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Pending"},
    }
    if volume:
        doc["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes",
                                          "pv.kubernetes.io/bound-by-controller": "yes"}
        doc["spec"]["volumeName"] = volume
        doc["status"] = {"phase": "Bound", "accessModes": modes, "capacity": {"storage": size}}
    return doc


def _volume(name: str, cls: str, size: str, modes: list[str], *, claim: str = "", zone: str = "",
            zone_label: bool = False, host: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": modes, "capacity": {"storage": size}, "storageClassName": cls,
                            "persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Filesystem"}
    meta: dict[str, Any] = {"name": name}
    if host:
        spec["local"] = {"path": "/mnt/nvme0"}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}
    else:
        spec["csi"] = {"driver": "ebs.csi.aws.com", "fsType": "ext4", "volumeHandle": f"vol-{abs(hash(name)) % 10**17:017d}"}
        if zone_label:
            meta["labels"] = {ZONE: zone, "topology.kubernetes.io/region": zone[:-1]}
        else:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}
    if claim:
        spec["claimRef"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default",
                            "name": claim, "uid": f"uid-claim-{claim}"}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"phase": "Bound" if claim else "Available"}}


def add_volumes(base: Scenario) -> VolumeScenario:
    rng = random.Random(f"volumes/{base.seed}")
    s = VolumeScenario(base.seed, copy.deepcopy(base.nodes), copy.deepcopy(base.bound), copy.deepcopy(base.pending),
                       copy.deepcopy(base.priority_classes), set(base.features) | {"volumes"})
    s.storage = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "reclaimPolicy": "Delete", **c}
                 for c in CLASSES]
    claims: list[str] = []
    for i in range(rng.randint(1, 4)):  # bound EBS volumes in a zone
        name = f"ckpt-{i}"
        zone = rng.choice(ZONES)
        modes = ["ReadWriteOncePod"] if rng.random() < 0.25 else ["ReadWriteOnce"]
        s.storage.append(_volume(f"pvc-{name}", "ebs-gp3", "100Gi", modes, claim=name, zone=zone,
                                 zone_label=rng.random() < 0.3))
        s.storage.append(_claim(name, "ebs-gp3", "100Gi", modes, volume=f"pvc-{name}"))
        claims.append(name)
    for i in range(rng.randint(1, 4)):  # unbound WaitForFirstConsumer claims
        name = f"data-{i}"
        cls = rng.choice(["ebs-gp3", "ebs-gp3", "ebs-gp3-2b", "efs", "local-nvme"])
        s.storage.append(_claim(name, cls, rng.choice(["50Gi", "500Gi", "1500Gi"]),
                                ["ReadWriteMany"] if cls == "efs" else ["ReadWriteOnce"]))
        claims.append(name)
    for node in rng.sample(s.nodes, k=min(len(s.nodes), rng.randint(0, 3))):  # local NVMe volumes
        host = node["metadata"]["name"]
        s.storage.append(_volume(f"local-pv-{host}", "local-nvme", rng.choice(["1000Gi", "1700Gi"]), ["ReadWriteOnce"],
                                 host=host))
    if rng.random() < 0.3:
        s.storage.append(_claim("scratch-immediate", "ebs-immediate", "10Gi", ["ReadWriteOnce"]))
        claims.append("scratch-immediate")
    for pod in s.bound:  # a few bound pods use a bound claim (ReadWriteOncePod in use)
        if rng.random() < 0.1:
            name = rng.choice([c for c in claims if c.startswith("ckpt-")])
            pod["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": name}}]
    for pod in s.pending:
        r = rng.random()
        if pod["metadata"].get("namespace", "default") != "default":  # the claims live in default
            r = 0.36 if r < 0.05 else 1.0
        if r < 0.35:
            picked = rng.sample(claims, k=min(len(claims), rng.choice([1, 1, 2])))
        elif r < 0.38:
            picked = ["no-such-claim"]
        else:
            continue
        pod["spec"]["volumes"] = [{"name": f"v{j}", "persistentVolumeClaim": {"claimName": c}}
                                  for j, c in enumerate(picked)]
    return s

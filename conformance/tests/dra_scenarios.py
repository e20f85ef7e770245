"""Seeded random clusters with Dynamic Resource Allocation objects, for the DRA differential.

Each scenario is a handful of nodes (zones, instance types, a few too small for some pods), the
resource.k8s.io/v1 objects a cluster with DRA drivers holds, and pending pods with resource claims, written
as plain v1 List JSON (the form both `kgpu simulate` and `dra-oracle` read):

- ResourceSlices of several drivers: NVIDIA's GPU driver on GPU nodes, whole GPUs or MIG devices exactly as
  ``kgpu.catalog.dra.node_slices`` publishes them (the driver's device names and attributes); a NIC driver
  with one pool per node spread over two slices (``resourceSliceCount`` 2, sometimes one missing: an
  incomplete pool; sometimes an outdated generation left behind); network-attached accelerators in pools
  whose slices are ``allNodes`` or select nodes by zone label;
- DeviceClasses: the driver's ``gpu.nvidia.com`` and ``mig.nvidia.com``, one per other driver, and classes
  narrowed by CEL (a product, a memory floor);
- ResourceClaimTemplates and ResourceClaims: ``exactly`` requests with counts, CEL selectors over
  productName, memory (``quantity``), versions (``semver``), architecture, MIG profile; ``allocationMode:
  All``; ``firstAvailable`` sub-requests; ``matchAttribute`` constraints (same product, same parent GPU,
  same PCIe root); ``adminAccess``; claims shared by several pods; claims read already allocated (pinned to a node,
  reserved for a bound pod) or being deleted; claims the resourceclaim controller made already (with its
  random suffix, named in the pod's status) or decided not to make; and the broken references the plugin
  names (a missing template, claim or device class);
- pods: one or two claims each, CPU and memory requests, sometimes a zone nodeSelector.

``features`` records the DRA behaviours a scenario exercises, so that a disagreement can be put in its
class (docs/simulate.md, "Dynamic Resource Allocation": known differences).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgpu.catalog.dra import device_classes, node_slices

ZONES = ["us-east-1a", "us-east-1b"]
GPU_NODES = [  # instance type, catalog GPU, GPUs, memory MiB, MIG layouts (profile -> count per GPU) or None
    ("p5.48xlarge", "h100", 8, 81920, None),
    ("p4d.24xlarge", "a100", 8, 40960, None),
    ("p4d.24xlarge", "a100", 8, 40960, {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}),
    ("p4de.24xlarge", "a100", 8, 81920, {"1g.10gb": 7}),
    ("g6e.12xlarge", "l40s", 4, 45776, None),
    ("g5.12xlarge", "a10g", 4, 22888, None),
    ("p5e.48xlarge", "h200", 8, 144384, None),
    ("p5.48xlarge", "h100", 8, 81920, {"7g.80gb": 1}),
]
CPU_NODES = ["m5.4xlarge", "c5.2xlarge"]
NIC = "net.example.com"
ACCEL = "accel.example.com"
NVIDIA = "gpu.nvidia.com"

GPU_SELECTORS = [
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('60Gi'))",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.5.0'))",
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.0.0')) >= 0",
    "device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Ampere']",
    "device.attributes['gpu.nvidia.com'].architecture == 'Ada Lovelace'",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() >= 9",
    "device.driver == 'gpu.nvidia.com'",
    # Kubernetes' CEL libraries (ext.Strings, library.Lists, library.Regex, ext.Sets, ext.Lists): NVIDIA's demo
    # selects A100s by productName.lowerAscii().matches(...)
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^nvidia a100.*$')",
    "device.attributes['gpu.nvidia.com'].productName.split(' ').size() >= 3",
    "device.attributes['gpu.nvidia.com'].productName.indexOf('H100') >= 0",
    "device.attributes['gpu.nvidia.com'].architecture.upperAscii() in ['HOPPER', 'AMPERE']",
    "device.attributes['gpu.nvidia.com'].productName.substring(0, 6) == 'NVIDIA'",
    "device.attributes['gpu.nvidia.com'].productName.find('[0-9]+GB') != ''",
    "sets.intersects([device.attributes['gpu.nvidia.com'].architecture], ['Hopper', 'Blackwell'])",
    "device.attributes['gpu.nvidia.com'].productName.trim().lastIndexOf('G') > 10",
    "device.attributes['gpu.nvidia.com'].productName.replace('NVIDIA ', '').startsWith('A')",
    "device.attributes['gpu.nvidia.com'].productName.split(' ').distinct().size() >= 2",
    "device.attributes['gpu.nvidia.com'].productName.findAll('[0-9]').size() >= 3",
    # ext.Bindings (the DRA environment adds it to name a domain once) and ext.Strings' quote
    "cel.bind(g, device.attributes['gpu.nvidia.com'], g.productName.startsWith('NVIDIA') && "
    "g.architecture in ['Hopper', 'Ampere'])",
    "strings.quote(device.attributes['gpu.nvidia.com'].productName).size() > 22",
]
MIG_SELECTORS = [
    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    "device.attributes['gpu.nvidia.com'].profile in ['3g.20gb', '2g.10gb']",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0",
    "device.capacity['gpu.nvidia.com'].multiprocessors.asInteger() >= 28",
    "device.attributes['gpu.nvidia.com'].profile.split('.')[0] in ['1g', '2g']",
    "device.attributes['gpu.nvidia.com'].profile.charAt(0) == '3'",
    "[device.capacity['gpu.nvidia.com'].multiprocessors.asInteger(), 14].max() > 14",
]
NIC_SELECTORS = [
    "device.attributes['net.example.com'].rdma",
    "device.attributes['net.example.com'].speed >= 200",
    "device.capacity['net.example.com'].bandwidth.compareTo(quantity('100G')) > 0",
    # Kubernetes' IP and CIDR libraries over an address attribute
    "cidr('10.1.0.0/16').containsIP(device.attributes['net.example.com'].ipv4)",
    "ip(device.attributes['net.example.com'].ipv4).family() == 4 && "
    "!cidr('10.2.0.0/16').containsIP(ip(device.attributes['net.example.com'].ipv4))",
    "cel.bind(n, device.attributes['net.example.com'], n.rdma && n.speed >= 200)",
]
# the functions of Kubernetes' CEL libraries the selectors above call (kgpu.sim.scheduler.plugins.cel_library)
CEL_LIBRARY = ("lowerAscii", "upperAscii", "split", "indexOf", "lastIndexOf", "substring", "find", "findAll", "trim",
               "replace", "charAt", "distinct", "max", "sets.intersects", "cel.bind", "strings.quote", "cidr", "ip")
ACCEL_SELECTORS = [
    "device.attributes['accel.example.com'].family == 'agilex'",
    "device.attributes['accel.example.com'].firmware.isLessThan(semver('2.0.0'))",
]
# a selector reading an attribute only some devices have: a CEL runtime error on the others
RISKY_SELECTORS = [
    "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'",
    # an index past the end of most product names: ext.Strings' "index out of range" error
    "device.attributes['gpu.nvidia.com'].productName.charAt(21) != 'x'",
]


@dataclass
class Scenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    bound: list[dict[str, Any]] = field(default_factory=list)
    dra: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    features: set[str] = field(default_factory=set)

    def write(self, directory: Path) -> tuple[Path, Path]:
        cluster = directory / "cluster.json"
        pods = directory / "pods.json"
        cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": self.nodes + self.bound + self.dra}))
        pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": self.pending}))
        return cluster, pods


def _node(name: str, itype: str, zone: str, cpu: str, memory: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": zone}
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "95551679124"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {}, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def _slice(name: str, driver: str, pool: str, devices: list[dict[str, Any]], *, generation: int = 1, count: int = 1,
           **where: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                     **where, "devices": devices}}


def _nic_devices(rng: random.Random, first: int, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(first, first + n):
        out.append({"name": f"nic-{i}", "attributes": {
            "rdma": {"bool": rng.random() < 0.7}, "speed": {"int": rng.choice([100, 200, 400])},
            "ipv4": {"string": f"10.{i % 3}.{i}.5"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2:02x}"}},
            "capacity": {"bandwidth": {"value": rng.choice(["100G", "200G", "400G"])}}})
    return out


def _accel_devices(rng: random.Random, prefix: str, n: int) -> list[dict[str, Any]]:
    return [{"name": f"{prefix}-{i}", "attributes": {
        "family": {"string": rng.choice(["agilex", "stratix"])},
        "firmware": {"version": rng.choice(["1.4.0", "2.1.0", "1.9.3-rc.1"])}}} for i in range(n)]


def _class(name: str, exprs: list[str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}}


CLASSES = {  # name -> (driver it selects, its selectors besides the driver's)
    "nic.example.com": (NIC, []),
    "accel.example.com": (ACCEL, []),
    "h100.nvidia.com": (NVIDIA, ["device.attributes['gpu.nvidia.com'].type == 'gpu'",
                                 "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"]),
    "big-gpu.nvidia.com": (NVIDIA, ["device.attributes['gpu.nvidia.com'].type == 'gpu' && "
                                    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) >= 0"]),
}


def _request_body(rng: random.Random, s: Scenario, cls: str, *, sub: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls}
    pools = {"gpu.nvidia.com": GPU_SELECTORS, "h100.nvidia.com": GPU_SELECTORS, "big-gpu.nvidia.com": GPU_SELECTORS,
             "mig.nvidia.com": MIG_SELECTORS, "nic.example.com": NIC_SELECTORS, "accel.example.com": ACCEL_SELECTORS}
    choices = pools.get(cls, [])
    if choices and rng.random() < 0.55:
        picked = rng.sample(choices, rng.choice([1, 1, 2]))
        body["selectors"] = [{"cel": {"expression": e}} for e in picked]
        s.features.add("cel")
        if any(re.search(rf"(?<![A-Za-z_]){re.escape(name)}\(", e) for e in picked for name in CEL_LIBRARY):
            s.features.add("cel-library")
    if cls in ("gpu.nvidia.com", "accel.example.com") and rng.random() < 0.03:
        body.setdefault("selectors", []).append({"cel": {"expression": rng.choice(RISKY_SELECTORS)}})
        s.features.add("cel-error")
    r = rng.random()
    if r < 0.1 and not sub:
        body["allocationMode"] = "All"
        s.features.add("all")
    elif r < 0.55:
        # small counts of MIG devices: a request the node cannot serve is searched exhaustively (the real
        # allocator has a 10 s Filter timeout for it, kgpu has none)
        body["count"] = rng.choice([1, 2, 2] if cls == "mig.nvidia.com" else [1, 2, 2, 3, 4, 8])
    if not sub and rng.random() < 0.04:
        body["adminAccess"] = True
        s.features.add("admin-access")
    return body


def _claim_spec(rng: random.Random, s: Scenario, classes: list[str]) -> dict[str, Any]:
    requests = []
    for k in range(rng.choice([1, 1, 1, 2, 2])):
        name = ["gpu", "nic"][k]
        if rng.random() < 0.2:
            subs = []
            for j, cls in enumerate(rng.sample(classes, min(len(classes), rng.choice([2, 2, 3])))):
                subs.append({"name": f"opt{j}", **_request_body(rng, s, cls, sub=True)})
            requests.append({"name": name, "firstAvailable": subs})
            s.features.add("first-available")
        else:
            requests.append({"name": name, "exactly": _request_body(rng, s, rng.choice(classes))})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.3:
        attr = rng.choice(["gpu.nvidia.com/productName", "gpu.nvidia.com/parentUUID", "resource.kubernetes.io/pcieRoot",
                           "gpu.nvidia.com/architecture"])
        con: dict[str, Any] = {"matchAttribute": attr}
        if len(requests) > 1 and rng.random() < 0.5:
            con["requests"] = [r["name"] for r in rng.sample(requests, 2)]
        devices["constraints"] = [con]
        s.features.add("constraint")
    return {"devices": devices}


def _pod(name: str, rng: random.Random, claims: list[dict[str, Any]]) -> dict[str, Any]:
    requests = {"cpu": rng.choice(["500m", "1", "4", "16", "40"]), "memory": rng.choice(["1Gi", "8Gi", "64Gi"])}
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                 "resources": {"requests": requests, "claims": [{"name": c["name"]} for c in claims]}}
    spec: dict[str, Any] = {"containers": [container], "resourceClaims": claims}
    if rng.random() < 0.15:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                                                         "labels": {"app": "train"}},
            "spec": spec}


def generate(seed: int) -> Scenario:
    rng = random.Random(seed)
    s = Scenario(seed)
    s.dra.extend(device_classes())
    # nodes
    n_gpu = rng.randint(2, 5)
    gpu_nodes = []
    for i in range(n_gpu):
        itype, gpu, count, mem, mig = rng.choice(GPU_NODES)
        name = f"gpu-{i:02d}-{itype.replace('.', '-')}"
        zone = rng.choice(ZONES)
        s.nodes.append(_node(name, itype, zone, rng.choice(["47810m", "191450m"]), "1000000000Ki"))
        gpu_nodes.append(name)
        if rng.random() < 0.9:  # a node without the driver's slice: its GPUs are not published
            s.dra.extend(node_slices(name, gpu, count, mem, mig=mig))
            if mig:
                s.features.add("mig")
    for i in range(rng.randint(0, 2)):
        itype = rng.choice(CPU_NODES)
        name = f"cpu-{i:02d}-{itype.replace('.', '-')}"
        s.nodes.append(_node(name, itype, rng.choice(ZONES), "15890m", "61255492Ki"))
    # NICs: one pool per GPU node, over two slices
    if rng.random() < 0.7:
        for name in gpu_nodes:
            if rng.random() < 0.2:
                continue
            gen = rng.choice([1, 1, 2])
            halves = [_nic_devices(rng, 0, 2), _nic_devices(rng, 2, 2)]
            missing = rng.random() < 0.1
            for k, devs in enumerate(halves):
                if missing and k == 1:
                    s.features.add("incomplete-pool")
                    continue
                s.dra.append(_slice(f"{name}-{NIC}-{k}", NIC, name, devs, generation=gen, count=2, nodeName=name))
            if gen == 2 and rng.random() < 0.5:  # an outdated slice the driver has not deleted yet
                s.dra.append(_slice(f"{name}-{NIC}-old", NIC, name, _nic_devices(rng, 4, 2), generation=1, count=2,
                                    nodeName=name))
                s.features.add("outdated-generation")
        s.dra.append(_class("nic.example.com", [f"device.driver == '{NIC}'"]))
    # network-attached accelerators: allNodes or per zone
    if rng.random() < 0.6:
        for k in range(rng.randint(1, 2)):
            pool = f"fabric-{k}"
            if rng.random() < 0.5:
                s.dra.append(_slice(f"{pool}-slice", ACCEL, pool, _accel_devices(rng, f"{pool}-acc", rng.randint(1, 4)),
                                    allNodes=True))
                s.features.add("all-nodes")
            else:
                zone = rng.choice(ZONES)
                sel = {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}
                s.dra.append(_slice(f"{pool}-slice", ACCEL, pool, _accel_devices(rng, f"{pool}-acc", rng.randint(1, 4)),
                                    nodeSelector=sel))
                s.features.add("node-selector-slice")
        s.dra.append(_class("accel.example.com", [f"device.driver == '{ACCEL}'"]))
    for name, (driver, extra) in CLASSES.items():
        if driver == NVIDIA and rng.random() < 0.5:
            s.dra.append(_class(name, [f"device.driver == '{driver}'", *extra]))
    classes = [c["metadata"]["name"] for c in s.dra if c["kind"] == "DeviceClass"]
    if rng.random() < 0.1:
        classes.append("tpu.example.com")  # a class that does not exist
        s.features.add("missing-class")
    # templates
    templates = []
    for k in range(rng.randint(1, 3)):
        name = f"tpl-{k}"
        templates.append(name)
        s.dra.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                      "metadata": {"name": name, "namespace": "default"},
                      "spec": {"spec": _claim_spec(rng, s, classes)}})
    # shared claims, some read allocated
    shared = []
    for k in range(rng.randint(0, 2)):
        name = f"shared-{k}"
        shared.append(name)
        claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                 "metadata": {"name": name, "namespace": "default", "uid": f"0c1a1m-{seed}-{k}"},
                                 "spec": _claim_spec(rng, s, classes)}
        s.features.add("shared-claim")
        if rng.random() < 0.35 and gpu_nodes:
            node = rng.choice(gpu_nodes)
            slices = [x for x in s.dra if x["kind"] == "ResourceSlice" and x["spec"].get("nodeName") == node
                      and x["spec"]["driver"] == NVIDIA]
            if slices and slices[0]["spec"]["devices"]:
                dev = slices[0]["spec"]["devices"][-1]["name"]
                owner = f"runner-{k}"
                runner = _pod(owner, rng, [{"name": "gpu", "resourceClaimName": name}])
                runner["spec"]["nodeName"] = node
                s.bound.append(runner)
                claim["status"] = {
                    "allocation": {"devices": {"results": [{"request": "gpu", "driver": NVIDIA, "pool": node, "device": dev}]},
                                   "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                       {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": owner, "uid": f"uid-{owner}"}]}
                claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
                s.features.add("allocated-claim")
        elif rng.random() < 0.05:
            claim["metadata"]["deletionTimestamp"] = "2026-11-20T08:00:00Z"
            claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
            s.features.add("deleting-claim")
        s.dra.append(claim)
    # pods
    for i in range(rng.randint(3, 10)):
        refs: list[dict[str, Any]] = []
        for k in range(rng.choice([1, 1, 1, 2, 2])):
            r = rng.random()
            name = f"c{k}"
            if r < 0.65 or not shared:
                tpl = rng.choice(templates)
                if rng.random() < 0.04:
                    tpl = "no-such-template"
                    s.features.add("missing-template")
                refs.append({"name": name, "resourceClaimTemplateName": tpl})
            elif r < 0.97:
                free = [c for c in shared if c not in {x.get("resourceClaimName") for x in refs}]
                if not free:
                    continue
                refs.append({"name": name, "resourceClaimName": rng.choice(free)})
            else:
                refs.append({"name": name, "resourceClaimName": "no-such-claim"})
                s.features.add("missing-claim")
        pod = _pod(f"job-{i:02d}", rng, refs)
        statuses = []
        for ref in refs:
            tpl = next((t for t in s.dra if t["kind"] == "ResourceClaimTemplate"
                        and t["metadata"]["name"] == ref.get("resourceClaimTemplateName")), None)
            if tpl is None or rng.random() > 0.15:
                continue
            if rng.random() < 0.2:  # the controller decided not to create it (the status names no claim)
                statuses.append({"name": ref["name"]})
                s.features.add("claim-not-needed")
                continue
            # the claim the resourceclaim controller made, with its random suffix, owned by the pod
            made = f"{pod['metadata']['name']}-{ref['name']}-{rng.choice(['x7k2p', 'q9d4m', 'b5n8t'])}"
            s.dra.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": made, "namespace": "default", "uid": f"uid-{made}",
                                       "annotations": {"resource.kubernetes.io/pod-claim-name": ref["name"]},
                                       "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                                            "uid": pod["metadata"]["uid"], "controller": True,
                                                            "blockOwnerDeletion": True}]},
                          "spec": tpl["spec"]["spec"]})
            statuses.append({"name": ref["name"], "resourceClaimName": made})
            s.features.add("controller-claim")
        if statuses:
            pod["status"] = {"phase": "Pending", "resourceClaimStatuses": statuses}
        s.pending.append(pod)
    return s

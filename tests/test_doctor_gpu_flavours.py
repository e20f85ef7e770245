"""doctor and top on healthy clusters of every GPU flavour: whole GPUs, time-slicing (renamed and not), MPS, MIG
single, MIG mixed, MIG mixed with time-slicing, a MIG repartition in progress, DRA, and DRA beside device-plugin
nodes. None gets an error-level finding; every GPU is counted, with its model and kind.

Each flavour changes the GPU Operator cluster of ``tests/fixtures/clusters/gpu-operator.json`` (v25.3.4, made as
the Operator makes it) the way the component that does it would: the Operator's device plugin with a
time-slicing ConfigMap mounted into its config-manager (``devicePlugin.config``), GPU Feature Discovery's labels
for the strategy (docs/gpu-sharing.md and docs/mig of NVIDIA's device plugin: ``nvidia.com/gpu.replicas``,
``-SHARED`` products, ``nvidia.com/mig-<profile>.*``), the MIG manager's ``nvidia.com/mig.config.state`` and its
``paused-for-mig-change`` deploy labels, the allocatable the plugin registers; and for DRA the driver's chart
(nvidia-dra-driver-gpu 25.8.1) and the ResourceSlices its kubelet plugin publishes (``kgpu.catalog.dra``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kgpu.catalog.dra import node_slices
from kgpu.doctor import doctor_report
from kgpu.doctor.reading import cluster_state
from kgpu.live.top import summarize
from kgpu.model.gpus import DraDevice, node_gpus
from snapshot_builders import container, pod, snapshot
from test_dra_doctor import allocated_claim, claim_pod, classes, kubelet_plugin, template

HERE = Path(__file__).parent / "fixtures" / "clusters"
GPU_A = "ip-192-168-20-11.us-west-2.compute.internal"  # g4dn.xlarge, 1 T4
GPU_B = "ip-192-168-21-12.us-west-2.compute.internal"  # p3.8xlarge, 4 V100 (p4d.24xlarge, 8 A100 for MIG)
OPERATOR_NS = "gpu-operator"
TOLERATE = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
PAUSED = "paused-for-mig-change"


def operator_cluster() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HERE / "gpu-operator.json").read_text(encoding="utf-8"))
    return doc


def _node(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in doc["items"] if i["kind"] == "Node" and i["metadata"]["name"] == name)


def _advertise(n: dict[str, Any], resources: dict[str, int], capacity: dict[str, int] | None = None) -> None:
    """What the device plugin registers: the GPU resources of status.allocatable (and capacity)."""
    for part in ("capacity", "allocatable"):
        for key in [k for k in n["status"][part] if k.startswith("nvidia.com/")]:
            del n["status"][part][key]
    for key, value in resources.items():
        n["status"]["allocatable"][key] = str(value)
        n["status"]["capacity"][key] = str(value)
    for key, value in (capacity or {}).items():
        n["status"]["capacity"][key] = str(value)


def _workload(doc: dict[str, Any], node_name: str, resource: str, count: int) -> None:
    """The ml pod on the node asks ``count`` of ``resource`` instead."""
    for item in doc["items"]:
        if item["kind"] == "Pod" and item["metadata"]["namespace"] == "ml" and item["spec"].get("nodeName") == node_name:
            res = item["spec"]["containers"][0]["resources"]
            res["requests"] = {"cpu": "100m", "memory": "128Mi", resource: str(count)}
            res["limits"] = {resource: str(count)}


def _time_slicing_config(doc: dict[str, Any], rename: bool, strategy: str = "timeSlicing", replicas: int = 4,
                         resource: str = "nvidia.com/gpu", mig: str = "none") -> None:
    """The ConfigMap the Operator's docs have users create (gpu-sharing.html), named in the ClusterPolicy's
    devicePlugin.config, which the Operator mounts into the plugin's config-manager containers."""
    body = f"version: v1\nflags:\n  migStrategy: {mig}\nsharing:\n  {strategy}:\n"
    if rename:
        body += "    renameByDefault: true\n"
    body += f"    resources:\n    - name: {resource}\n      replicas: {replicas}\n"
    doc["items"].append({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "time-slicing-config", "namespace": OPERATOR_NS, "uid": "5b0c3f0e-1d3c-4f0a-9b1e-6f1c2f7d8e90",
                     "resourceVersion": "88411", "creationTimestamp": "2026-11-20T10:00:00Z"},
        "data": {"any": body},
    })
    for item in doc["items"]:
        if item["kind"] == "DaemonSet" and item["metadata"]["name"] in ("nvidia-device-plugin-daemonset",
                                                                           "gpu-feature-discovery"):
            spec = item["spec"]["template"]["spec"]
            spec.setdefault("volumes", []).append({"configMap": {"defaultMode": 420, "name": "time-slicing-config"},
                                                   "name": "time-slicing-config"})
            for c in spec["containers"] + spec.get("initContainers", []):
                if c["command"] == ["config-manager"]:
                    c["env"] += [{"name": "DEFAULT_CONFIG", "value": "any"},
                                 {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
                                 {"name": "CONFIG_FILE_DST", "value": "/config/config.yaml"}]
                    c["volumeMounts"] = [{"mountPath": "/available-configs", "name": "time-slicing-config"}]


def _shared_labels(n: dict[str, Any], replicas: int, strategy: str, rename: bool, product: str) -> None:
    n["metadata"]["labels"].update({
        "nvidia.com/device-plugin.config": "any",
        "nvidia.com/gpu.replicas": str(replicas),
        "nvidia.com/gpu.sharing-strategy": strategy,
        "nvidia.com/gpu.product": product if rename else f"{product}-SHARED",
    })


def time_slicing(rename: bool) -> dict[str, Any]:
    doc = operator_cluster()
    _time_slicing_config(doc, rename)
    resource = "nvidia.com/gpu.shared" if rename else "nvidia.com/gpu"
    for name, gpus, product in ((GPU_A, 1, "Tesla-T4"), (GPU_B, 4, "Tesla-V100-SXM2-16GB")):
        n = _node(doc, name)
        _shared_labels(n, 4, "time-slicing", rename, product)
        _advertise(n, {resource: gpus * 4})
        _workload(doc, name, resource, 1)
    return doc


def mps() -> dict[str, Any]:
    doc = operator_cluster()
    _time_slicing_config(doc, False, strategy="mps")
    n = _node(doc, GPU_B)
    _shared_labels(n, 4, "mps", False, "Tesla-V100-SXM2-16GB")
    n["metadata"]["labels"]["nvidia.com/mps.capable"] = "true"
    _advertise(n, {"nvidia.com/gpu": 16})
    _workload(doc, GPU_B, "nvidia.com/gpu", 1)
    # the MPS control daemon the Operator runs on mps.capable nodes
    ds = next(i for i in doc["items"] if i["kind"] == "DaemonSet"
              and i["metadata"]["name"] == "nvidia-device-plugin-mps-control-daemon")
    ds["status"].update({"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberAvailable": 1,
                         "numberReady": 1, "updatedNumberScheduled": 1})
    return doc


A100 = "NVIDIA-A100-SXM4-40GB"


def _a100(doc: dict[str, Any]) -> dict[str, Any]:
    """GPU_B as a p4d.24xlarge with its 8 A100s, MIG-capable, the MIG manager deployed."""
    n = _node(doc, GPU_B)
    labels = n["metadata"]["labels"]
    for key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "nvidia.com/gpu.machine"):
        labels[key] = "p4d.24xlarge"
    labels.update({
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": A100, "nvidia.com/gpu.memory": "40960",
        "nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/mig.capable": "true", "nvidia.com/gpu.deploy.mig-manager": "true",
    })
    return n


def _mig_labels(n: dict[str, Any], config: str, strategy: str, state: str = "success") -> None:
    n["metadata"]["labels"].update({"nvidia.com/mig.config": config, "nvidia.com/mig.config.state": state,
                                    "nvidia.com/mig.strategy": strategy})


def mig_single() -> dict[str, Any]:
    doc = operator_cluster()
    n = _a100(doc)
    _mig_labels(n, "all-1g.5gb", "single")
    n["metadata"]["labels"].update({"nvidia.com/gpu.product": f"{A100}-MIG-1g.5gb", "nvidia.com/gpu.count": "56",
                                    "nvidia.com/gpu.memory": "4864", "nvidia.com/gpu.multiprocessors": "14",
                                    "nvidia.com/gpu.slices.gi": "1", "nvidia.com/gpu.slices.ci": "1"})
    _advertise(n, {"nvidia.com/gpu": 56})
    _workload(doc, GPU_B, "nvidia.com/gpu", 1)
    return doc


BALANCED = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}  # all-balanced on an A100-SXM4-40GB, per GPU


def _mixed_labels(n: dict[str, Any], replicas: int = 1) -> None:
    for profile, per_gpu in BALANCED.items():
        key = f"nvidia.com/mig-{profile}"
        n["metadata"]["labels"].update({
            f"{key}.count": str(8 * per_gpu),
            f"{key}.product": f"{A100}-MIG-{profile}" + ("-SHARED" if replicas > 1 else ""),
            f"{key}.replicas": str(replicas),
            f"{key}.sharing-strategy": "time-slicing" if replicas > 1 else "none",
            f"{key}.memory": str({"1g.5gb": 4864, "2g.10gb": 9856, "3g.20gb": 19968}[profile]),
        })


def mig_mixed() -> dict[str, Any]:
    doc = operator_cluster()
    n = _a100(doc)
    _mig_labels(n, "all-balanced", "mixed")
    _mixed_labels(n)
    # the plugin registered nvidia.com/gpu before the GPUs went into MIG mode: the kubelet keeps it, at 0
    _advertise(n, {f"nvidia.com/mig-{p}": 8 * c for p, c in BALANCED.items()} | {"nvidia.com/gpu": 0})
    _workload(doc, GPU_B, "nvidia.com/mig-3g.20gb", 1)
    return doc


def mig_mixed_time_slicing() -> dict[str, Any]:
    doc = operator_cluster()
    _time_slicing_config(doc, False, resource="nvidia.com/mig-1g.5gb", replicas=2, mig="mixed")
    n = _a100(doc)
    _mig_labels(n, "all-balanced", "mixed")
    _mixed_labels(n, replicas=2)
    n["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "any"
    _advertise(n, {f"nvidia.com/mig-{p}": 8 * c * 2 for p, c in BALANCED.items()})
    _workload(doc, GPU_B, "nvidia.com/mig-1g.5gb", 1)
    return doc


def mig_repartition() -> dict[str, Any]:
    """The MIG manager applying all-balanced: it paused the plugin, GFD and DCGM exporter on the node (their
    deploy labels), the Operator removed their pods; the kubelet keeps the 8 GPUs in capacity, none allocatable."""
    doc = operator_cluster()
    n = _a100(doc)
    _mig_labels(n, "all-balanced", "mixed", state="pending")
    for operand in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter"):
        n["metadata"]["labels"][f"nvidia.com/gpu.deploy.{operand}"] = PAUSED
    _advertise(n, {"nvidia.com/gpu": 0}, capacity={"nvidia.com/gpu": 8})
    paused = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter")
    doc["items"] = [i for i in doc["items"] if not (
        i["kind"] == "Pod" and i["spec"].get("nodeName") == GPU_B
        and any(r.get("name") in paused for r in i["metadata"].get("ownerReferences", ())))]
    doc["items"] = [i for i in doc["items"] if not (
        i["kind"] == "Pod" and i["metadata"]["namespace"] == "ml" and i["spec"].get("nodeName") == GPU_B)]
    for item in doc["items"]:
        if item["kind"] == "DaemonSet" and item["metadata"]["name"] in paused:
            for key in ("currentNumberScheduled", "desiredNumberScheduled", "numberAvailable", "numberReady",
                        "updatedNumberScheduled"):
                item["status"][key] = 1
    return doc


def _dra_node(doc: dict[str, Any], name: str, gpu: str, count: int, memory: int) -> list[dict[str, Any]]:
    """The node's GPUs go to NVIDIA's DRA driver: the Operator's device plugin is off there
    (nvidia.com/gpu.deploy.device-plugin=false), the node advertises no nvidia.com/gpu, its slice lists them."""
    n = _node(doc, name)
    n["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "false"
    _advertise(n, {})
    doc["items"] = [i for i in doc["items"] if not (
        i["kind"] == "Pod" and i["spec"].get("nodeName") == name
        and any(r.get("name") == "nvidia-device-plugin-daemonset" for r in i["metadata"].get("ownerReferences", ())))]
    doc["items"] = [i for i in doc["items"] if not (
        i["kind"] == "Pod" and i["metadata"]["namespace"] == "ml" and i["spec"].get("nodeName") == name)]
    return node_slices(name, gpu, count, memory)


def _dra_objects(doc: dict[str, Any], node_name: str, device: str) -> None:
    doc["items"] += [kubelet_plugin(desired=1, ready=1), *classes(), template(),
                     claim_pod("train-0", node_name=node_name, claim="train-0-gpu-x7k2p"),
                     allocated_claim("train-0", node_name, device)]


def dra_only() -> dict[str, Any]:
    doc = operator_cluster()
    items = _dra_node(doc, GPU_A, "t4", 1, 16384) + _dra_node(doc, GPU_B, "v100", 4, 16384)
    doc["items"] = [i for i in doc["items"] if not (i["kind"] == "DaemonSet"
                                                     and i["metadata"]["name"] == "nvidia-device-plugin-daemonset")]
    doc["items"] += items
    _dra_objects(doc, GPU_B, "gpu-0")
    return doc


def dra_beside_plugin() -> dict[str, Any]:
    doc = operator_cluster()
    published = _dra_node(doc, GPU_B, "v100", 4, 16384)
    doc["items"] += published
    for item in doc["items"]:
        if item["kind"] == "DaemonSet" and item["metadata"]["name"] == "nvidia-device-plugin-daemonset":
            for key in ("currentNumberScheduled", "desiredNumberScheduled", "numberAvailable", "numberReady",
                        "updatedNumberScheduled"):
                item["status"][key] = 1
    _dra_objects(doc, GPU_B, "gpu-1")
    return doc


FLAVOURS = {
    "whole": operator_cluster,
    "time-slicing": lambda: time_slicing(False),
    "time-slicing-renamed": lambda: time_slicing(True),
    "mps": mps,
    "mig-single": mig_single,
    "mig-mixed": mig_mixed,
    "mig-mixed-time-slicing": mig_mixed_time_slicing,
    "mig-repartition": mig_repartition,
    "dra": dra_only,
    "dra-beside-device-plugin": dra_beside_plugin,
}


def _snapshot(doc: dict[str, Any]) -> dict[str, Any]:
    return snapshot(doc["items"])


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_no_error_on_a_healthy_cluster_of_each_gpu_flavour(flavour: str) -> None:
    report = doctor_report(_snapshot(FLAVOURS[flavour]()))
    errors = [(f.check, f.object, f.message) for f in report.findings if f.severity == "error"]
    assert errors == []


def test_the_repartition_is_said_once_as_what_it_is() -> None:
    """No plugin missing, no 'unhealthy' GPUs: the MIG manager's state, a warning."""
    report = doctor_report(_snapshot(mig_repartition()))
    on_node = [(f.check, f.severity) for f in report.findings if f.object == f"Node/{GPU_B}"]
    assert ("mig-config-state", "warning") in on_node
    assert not {c for c, _ in on_node} & {"gpu-node-no-gpus", "device-plugin-node-selector", "gpu-node-missing-gpus"}
    assert not any("unhealthy" in f.message for f in report.findings)


def test_a_failed_repartition_is_the_mig_managers_error_not_unhealthy_gpus() -> None:
    doc = mig_repartition()
    labels = _node(doc, GPU_B)["metadata"]["labels"]
    labels["nvidia.com/mig.config.state"] = "failed"
    labels["nvidia.com/gpu.deploy.device-plugin"] = "true"
    report = doctor_report(_snapshot(doc))
    on_node = {(f.check, f.severity) for f in report.findings if f.object == f"Node/{GPU_B}"}
    assert ("mig-config-state", "error") in on_node
    assert not any("unhealthy" in f.message for f in report.findings)


def test_a_renamed_shared_node_that_loses_gpus_is_still_found() -> None:
    """The inventory counts replicas as physical GPUs: 8 of 16 replicas on a 4-GPU node is 2 GPUs missing."""
    doc = time_slicing(True)
    _advertise(_node(doc, GPU_B), {"nvidia.com/gpu.shared": 8})
    found = [f for f in doctor_report(_snapshot(doc)).findings if f.check == "gpu-node-missing-gpus"]
    assert [f.object for f in found] == [f"Node/{GPU_B}"]
    assert "8 nvidia.com/gpu.shared (time-slicing x4), 2 GPU(s), but has 4" in found[0].message
    # and one advertising none of its shared resources is an error as before
    _advertise(_node(doc, GPU_B), {}, capacity={"nvidia.com/gpu.shared": 16})
    errors = [f for f in doctor_report(_snapshot(doc)).findings if f.check == "gpu-node-no-gpus"]
    assert [f.object for f in errors] == [f"Node/{GPU_B}"]
    assert "16 nvidia.com/gpu.shared" in errors[0].message


def _pending(doc: dict[str, Any], resource: str, count: int) -> dict[str, Any]:
    c = container("train", "nvcr.io/nvidia/pytorch:24.05-py3", requests={"cpu": "1", resource: str(count)},
                  limits={resource: str(count)})
    doc["items"].append(pod("wants-gpus", "ml", containers=[c], tolerations=TOLERATE))
    return doc


@pytest.mark.parametrize(("flavour", "resource", "count", "said"), [
    ("mig-mixed", "nvidia.com/mig-3g.20gb", 9, "it asks 9 nvidia.com/mig-3g.20gb; the largest node offers 8"),
    ("mig-mixed", "nvidia.com/mig-3g.40gb", 1, "did you mean nvidia.com/mig-3g.20gb?"),
    ("mig-mixed", "nvidia.com/mig-2g.20gb", 2, "did you mean nvidia.com/mig-2g.10gb?"),
    ("time-slicing-renamed", "nvidia.com/gpu.shared", 20, "it asks 20 nvidia.com/gpu.shared; the largest node offers 16"),
    ("time-slicing-renamed", "nvidia.com/gpu", 1, "did you mean nvidia.com/gpu.shared?"),
])
def test_pending_pods_asking_any_gpu_resource_get_a_finding(flavour: str, resource: str, count: int, said: str) -> None:
    report = doctor_report(_snapshot(_pending(FLAVOURS[flavour](), resource, count)))
    found = [f for f in report.findings if f.check == "pending-gpu-pod" and f.object == "Pod/ml/wants-gpus"]
    assert len(found) == 1
    assert found[0].severity == "error"
    assert found[0].message.startswith("0/3 nodes are available:")
    assert f"Insufficient {resource}" in found[0].message
    assert said in found[0].fix
    assert report.counts["pending_gpu_pods"] == 1


def _top(doc: dict[str, Any]) -> dict[str, Any]:
    items = doc["items"]
    state = cluster_state(_snapshot(doc))
    slices = state.dra().slices if state.dra() is not None else []
    return summarize([i for i in items if i["kind"] == "Node"], [i for i in items if i["kind"] == "Pod"],
                     slices=slices, claims=[i for i in items if i["kind"] == "ResourceClaim"])


@pytest.mark.parametrize(("flavour", "node", "kind", "product", "resources"), [
    ("whole", GPU_B, "whole", "Tesla-V100-SXM2-16GB", {"nvidia.com/gpu": (4, 4)}),
    ("time-slicing-renamed", GPU_B, "time-slicing x4", "Tesla-V100-SXM2-16GB", {"nvidia.com/gpu.shared": (16, 1)}),
    ("mps", GPU_B, "mps x4", "Tesla-V100-SXM2-16GB-SHARED", {"nvidia.com/gpu": (16, 1)}),
    ("mig-single", GPU_B, "mig single", f"{A100}-MIG-1g.5gb", {"nvidia.com/gpu": (56, 1)}),
    ("mig-mixed", GPU_B, "mig mixed", A100, {"nvidia.com/mig-1g.5gb": (16, 0), "nvidia.com/mig-2g.10gb": (8, 0),
                                             "nvidia.com/mig-3g.20gb": (8, 1)}),
    ("dra", GPU_B, "dra", "Tesla-V100-SXM2-16GB", {"dra:gpu": (4, 1)}),
    ("dra-beside-device-plugin", GPU_A, "whole", "Tesla-T4", {"nvidia.com/gpu": (1, 1)}),
    ("dra-beside-device-plugin", GPU_B, "dra", "Tesla-V100-SXM2-16GB", {"dra:gpu": (4, 1)}),
])
def test_top_counts_every_kind_of_gpu(flavour: str, node: str, kind: str, product: str,
                                      resources: dict[str, tuple[int, int]]) -> None:
    data = _top(FLAVOURS[flavour]())
    row = next(r for r in data["nodes"] if r["node"] == node)
    assert row["gpu_kind"] == kind
    assert row["gpu_product"] == product
    got = {r: (v["allocatable"], v["requested"]) for r, v in row["resources"].items()}
    assert got == resources


def test_top_pools_sum_dra_devices() -> None:
    data = _top(dra_only())
    pool = next(p for p in data["pools"] if p["pool"] == "gpu")
    assert pool["nodes"] == 2
    assert pool["resources"]["dra:gpu"] == {"allocatable": 5, "requested": 1}


def test_inventory_reads_dra_mig_devices_with_their_parent() -> None:
    devices = [DraDevice("gpu.nvidia.com", f"gpu-0-mig-19-{i}-1", "mig", "NVIDIA A100-SXM4-40GB", "GPU-aaa",
                         f"MIG-{i}", "1g.5gb") for i in range(7)]
    devices.append(DraDevice("gpu.nvidia.com", "gpu-1", "gpu", "NVIDIA A100-SXM4-40GB", "", "GPU-bbb"))
    inv = node_gpus({}, {}, None, devices)
    assert inv.count == 2  # one GPU in MIG mode (the parent of 7 slices) and one whole
    assert inv.units == 8
    assert inv.kind == "dra"
    assert inv.product == "NVIDIA A100-SXM4-40GB"
    assert {r.label: r.allocatable for r in inv.resources} == {"dra:gpu": 1, "dra:mig-1g.5gb": 7}


def test_every_flavour_is_built_from_the_operator_cluster() -> None:
    """The variants keep the Operator's objects: its DaemonSets owned by the ClusterPolicy, its namespace."""
    for name, make in FLAVOURS.items():
        doc = make()
        owners = {r["kind"] for i in doc["items"] if i["kind"] == "DaemonSet" and i["metadata"]["namespace"] == OPERATOR_NS
                  for r in i["metadata"].get("ownerReferences", ())}
        assert "ClusterPolicy" in owners, name
    assert copy.deepcopy(operator_cluster()) == operator_cluster()


def test_node_view_draws_dra_gpus_and_mig_slices(tmp_path: Path) -> None:
    """simulate's node view counts the DRA driver's GPUs (claims held: used) as it counts the plugin's."""
    from click.testing import CliRunner

    from kgpu.cli.main import cli

    for make, node_type, bar in ((dra_only, "p3.8xlarge", "1/4"), (mig_mixed, "p4d.24xlarge", "1/32")):
        path = tmp_path / "cluster.json"
        path.write_text(json.dumps(_snapshot(make())), encoding="utf-8")
        res = CliRunner().invoke(cli, ["simulate", "-c", str(path)])
        assert res.exit_code == 0, res.output
        line = next(ln for ln in res.output.splitlines() if f" {node_type} " in ln)
        assert f" {bar} " in line, res.output
    assert "mig-3g.20gb" in res.output and "7 idle" in res.output


def test_live_findings_speak_of_the_cluster_not_a_snapshot() -> None:
    doc = _snapshot(_pending(mig_mixed(), "nvidia.com/mig-3g.20gb", 9))
    live = doctor_report(doc, source="cluster prod-eks")
    found = next(f for f in live.findings if f.check == "pending-gpu-pod")
    assert "(the cluster has no FailedScheduling event for it)" in found.message
    assert "snapshot" not in found.message
    saved = doctor_report(doc, source="snap.json")
    assert "(the snapshot has no FailedScheduling event for it)" in next(
        f for f in saved.findings if f.check == "pending-gpu-pod").message


def test_simulate_warns_of_a_shared_nodepool_without_an_overlay(tmp_path: Path) -> None:
    """A NodePool whose template selects a time-slicing config and no NodeOverlay: Karpenter sizes its nodes by
    physical GPUs (a node per GPU pod); simulate --cluster says so, as doctor's nodepool-overlay does."""
    from click.testing import CliRunner

    from kgpu.cli.main import cli
    from snapshot_builders import node, nodepool

    np = nodepool("infer", labels={"nvidia.com/device-plugin.config": "ts-4"})
    cpu = node("ip-10-0-1-5.us-west-2.compute.internal", "m5.xlarge")
    pods = [pod(f"infer-{i}", "ml", containers=[container("vllm", "vllm/vllm-openai:v0.6.0",
                                                          requests={"cpu": "1", "nvidia.com/gpu": "1"},
                                                          limits={"nvidia.com/gpu": "1"})])
            for i in range(4)]
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "infer-sharing"},
               "spec": {"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["infer"]}],
                        "capacity": {"nvidia.com/gpu": "4"}}}
    for items, warned in (([cpu, np, *pods], True), ([cpu, np, overlay, *pods], False)):
        path = tmp_path / "cluster.json"
        path.write_text(json.dumps(snapshot(items)), encoding="utf-8")
        res = CliRunner().invoke(cli, ["simulate", "-c", str(path), "-o", "json"])
        assert res.exit_code in (0, 1), res.output
        warnings = json.loads(res.stdout).get("warnings", [])
        hit = [w for w in warnings if w.startswith("NodePool infer: its template labels select a device-plugin config "
                                                   "(nvidia.com/device-plugin.config=ts-4)")]
        assert bool(hit) is warned, warnings


def test_the_dra_driver_under_its_newer_name_is_the_driver() -> None:
    """Chart dra-driver-nvidia-gpu: DaemonSet dra-driver-nvidia-gpu-kubelet-plugin, image
    registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu."""
    doc = dra_only()
    for item in doc["items"]:
        if item["kind"] == "DaemonSet" and item["metadata"]["name"].endswith("kubelet-plugin"):
            item["metadata"]["name"] = "dra-driver-nvidia-gpu-kubelet-plugin"
            item["metadata"]["namespace"] = "dra-driver-nvidia-gpu"
            for c in item["spec"]["template"]["spec"]["containers"]:
                c["image"] = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v25.12.0"
    healthy = doctor_report(_snapshot(doc))
    assert [f for f in healthy.findings if f.severity == "error"] == []
    # without GPU_A's slice, the node is the driver's problem, said by the driver's check and naming its DaemonSet
    doc["items"] = [i for i in doc["items"] if not (i["kind"] == "ResourceSlice" and i["spec"]["nodeName"] == GPU_A)]
    found = [f for f in doctor_report(_snapshot(doc)).findings if f.object == f"Node/{GPU_A}" and f.severity == "error"]
    assert [f.check for f in found] == ["dra-driver-missing"]
    assert "DaemonSet/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu-kubelet-plugin" in found[0].message


@pytest.mark.parametrize("flavour", ["dra", "dra-beside-device-plugin"])
def test_a_dra_node_with_all_its_gpus_published_is_not_missing_any(flavour: str) -> None:
    """The p3.8xlarge's 4 V100 are ResourceSlice devices of NVIDIA's DRA driver, not nvidia.com/gpu: the
    node has every GPU its instance type has."""
    report = doctor_report(_snapshot(FLAVOURS[flavour]()))
    assert [f.message for f in report.findings if f.check == "gpu-node-missing-gpus"] == []

"""doctor's DRA findings over snapshots shaped like what NVIDIA's DRA driver (chart nvidia-dra-driver-gpu
25.8.1) and the resourceclaim controller create: claims that wait (with the allocator's reason and the fix it
calls for), device classes that do not exist, GPU nodes neither the plugin nor the driver advertises, GPUs
advertised twice, pods with claims Karpenter will not provision for; and the API server's rejections as bad
input (exit 2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kgpu.catalog.dra import device_classes, node_slices
from kgpu.doctor import CHECK_IDS, doctor_report
from kgpu.errors import InputError
from snapshot_builders import container, daemonset, node, nodepool, plugin_ds, pod, snapshot, uid

NS = "nvidia-dra-driver-gpu"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def kubelet_plugin(*, tolerations: list[dict[str, Any]] | None = None, desired: int = 1, ready: int = 1,
                   affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chart's kubelet-plugin DaemonSet (templates/kubeletplugin.yaml at v25.8.1), as kubectl shows it."""
    ds = daemonset(f"{NS}-kubelet-plugin", NS, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1",
                   tolerations=tolerations if tolerations is not None else TOLERATE,
                   labels={"nvidia-dra-driver-gpu-component": "kubelet-plugin"}, desired=desired, ready=ready,
                   container_name="gpus", affinity=affinity)
    ds["metadata"]["labels"] = {"app.kubernetes.io/instance": NS, "app.kubernetes.io/managed-by": "Helm",
                                "app.kubernetes.io/name": NS, "app.kubernetes.io/version": "25.8.1",
                                "helm.sh/chart": f"{NS}-25.8.1"}
    ds["metadata"]["annotations"] = {"meta.helm.sh/release-name": NS, "meta.helm.sh/release-namespace": NS}
    ds["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    return ds


def classes() -> list[dict[str, Any]]:
    out = []
    for dc in device_classes():
        dc = copy.deepcopy(dc)
        dc["metadata"].update({"uid": uid("dc", dc["metadata"]["name"]), "resourceVersion": "1201",
                               "labels": {"app.kubernetes.io/managed-by": "Helm"},
                               "annotations": {"meta.helm.sh/release-name": NS, "meta.helm.sh/release-namespace": NS}})
        out.append(dc)
    return out


def template(name: str = "single-gpu", namespace: str = "ml", device_class: str = "gpu.nvidia.com",
             count: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "uid": uid("rct", namespace, name),
                         "resourceVersion": "3001", "creationTimestamp": "2026-11-22T09:00:00Z"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                            "count": count}}]}}}}


def claim_pod(name: str, *, namespace: str = "ml", tpl: str = "single-gpu", node_name: str | None = None,
              node_selector: dict[str, str] | None = None, claim: str | None = None) -> dict[str, Any]:
    """A pod whose container claims a GPU through a template; pending unless ``node_name``; ``claim`` is the
    generated claim's name the controller recorded in status.resourceClaimStatuses."""
    c = container("cuda", "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu24.04")
    c["resources"] = {"claims": [{"name": "gpu"}], "requests": {"cpu": "1"}}
    p = pod(name, namespace, containers=[c], node_name=node_name, tolerations=TOLERATE, node_selector=node_selector)
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": tpl}]
    if claim:
        p["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return p


def allocated_claim(pod_name: str, node_name: str, device: str, namespace: str = "ml") -> dict[str, Any]:
    """The claim the resourceclaim controller made for a pod, allocated and reserved (kubectl get -o json)."""
    name = f"{pod_name}-gpu-x7k2p"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": uid("rc", namespace, name),
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "controller": True,
                                              "blockOwnerDeletion": True, "uid": uid("pod", namespace, pod_name)}]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                           "allocationMode": "ExactCount", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node_name, "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}},
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": uid("pod", namespace, pod_name)}]}}


def dra_node(name: str, itype: str = "g5.xlarge", **kw: Any) -> dict[str, Any]:
    """A GPU node of a DRA pool: the driver's slices, no device plugin, so no nvidia.com/gpu."""
    n = node(name, itype, taints=[GPU_TAINT], **kw)
    for part in ("capacity", "allocatable"):
        n["status"][part].pop("nvidia.com/gpu", None)
    return n


def slices(name: str, itype: str = "g5.xlarge") -> list[dict[str, Any]]:
    count = {"g5.xlarge": 1, "g5.12xlarge": 4}[itype]
    return node_slices(name, "a10g", count, 22888)


N1 = "ip-10-0-12-34.us-west-2.compute.internal"
N2 = "ip-10-0-40-7.us-west-2.compute.internal"


def report(items: list[dict[str, Any]]) -> Any:
    return doctor_report(snapshot(items))


def findings(rep: Any, check: str) -> list[Any]:
    return rep.by_check(check)


def test_checks_are_registered() -> None:
    assert CHECK_IDS["DRA"] == ("dra-claim-pending", "dra-unknown-class", "dra-driver-missing",
                                "dra-double-advertised", "dra-karpenter")


def test_a_healthy_dra_cluster_has_no_dra_findings() -> None:
    items = [dra_node(N1), *slices(N1), kubelet_plugin(), *classes(), template(),
             claim_pod("train-0", node_name=N1, claim="train-0-gpu-x7k2p"), allocated_claim("train-0", N1, "gpu-0")]
    rep = report(items)
    assert [f for f in rep.findings if f.check.startswith("dra-")] == []
    # the node's GPUs are the driver's: no device plugin is missing, no GPU is unadvertised, the claim uses one
    assert not [f for f in rep.findings if f.check in ("device-plugin-missing", "gpu-node-no-gpus", "gpu-node-no-gpu-pods",
                                                        "gpu-node-idle")]
    # the same node without its slice is the driver's problem, said once: the cluster runs the DRA driver, so
    # neither the device plugin (whose advice would double-advertise the GPUs) nor gpu-node-no-gpus is named
    bare = report([i for i in items if i["kind"] != "ResourceSlice"])
    checks = {f.check for f in bare.findings}
    assert "dra-driver-missing" in checks
    assert not checks & {"device-plugin-missing", "gpu-node-no-gpus"}


def test_a_claim_waiting_for_devices_in_use_names_the_allocators_reason() -> None:
    items = [dra_node(N1), *slices(N1), kubelet_plugin(), *classes(), template(),
             claim_pod("train-0", node_name=N1, claim="train-0-gpu-x7k2p"), allocated_claim("train-0", N1, "gpu-0"),
             claim_pod("train-1")]
    (f,) = findings(report(items), "dra-claim-pending")
    assert f.severity == "error" and f.object == "Pod/ml/train-1"
    assert "0/1 nodes are available: 1 cannot allocate all claims." in f.message
    assert "1 node(s) publish 1 device(s), 1 allocated to claims" in f.fix


def test_a_claim_on_a_missing_template_waits_in_prefilter_and_the_fix_is_the_template() -> None:
    items = [dra_node(N1), *slices(N1), kubelet_plugin(), *classes(), template(), claim_pod("job-a", tpl="two-gpus")]
    (f,) = findings(report(items), "dra-claim-pending")
    assert 'pod "ml/job-a": ResourceClaim not created yet' in f.message
    assert "create ResourceClaimTemplate ml/two-gpus" in f.fix and "(single-gpu)" in f.fix
    assert "deviceClassName: gpu.nvidia.com" in f.fix


def test_no_slices_anywhere_points_at_the_driver() -> None:
    items = [dra_node(N1), *classes(), template(), claim_pod("train-1")]
    rep = report(items)
    (f,) = findings(rep, "dra-claim-pending")
    assert "cannot allocate all claims" in f.message
    assert "no node publishes gpu.nvidia.com devices" in f.fix and "helm upgrade --install nvidia-dra-driver-gpu" in f.fix
    (missing,) = findings(rep, "dra-driver-missing")
    assert missing.object == f"Node/{N1}" and "no nvidia-dra-driver-gpu-kubelet-plugin DaemonSet" in missing.message


def test_a_kubelet_plugin_that_does_not_tolerate_the_gpu_taint_is_named_with_the_values_to_add() -> None:
    items = [dra_node(N1), kubelet_plugin(tolerations=[], desired=0, ready=0), *classes(), template()]
    (f,) = findings(report(items), "dra-driver-missing")
    assert f"DaemonSet/{NS}/{NS}-kubelet-plugin does not run there" in f.message
    assert "untolerated taint" in f.message
    assert "kubeletPlugin:" in f.fix and "key: nvidia.com/gpu" in f.fix


def test_unknown_device_class_in_a_template_is_a_finding_not_bad_input() -> None:
    items = [dra_node(N1), *slices(N1), kubelet_plugin(), *classes(), template(device_class="gpu.nvidia.con"),
             claim_pod("train-1")]
    rep = report(items)
    (f,) = findings(rep, "dra-unknown-class")
    assert f.object == "ResourceClaimTemplate/ml/single-gpu" and f.severity == "error"
    assert "deviceClassName: gpu.nvidia.com" in f.fix
    (p,) = findings(rep, "dra-claim-pending")
    assert "request gpu: device class gpu.nvidia.con does not exist" in p.message


def test_an_unused_template_with_a_missing_class_is_a_warning() -> None:
    (f,) = findings(report([*classes(), template(device_class="fpga.example.com")]), "dra-unknown-class")
    assert f.severity == "warning"


def test_gpus_advertised_by_the_plugin_and_the_driver() -> None:
    n = node(N2, "g5.12xlarge", taints=[GPU_TAINT])  # the device plugin advertises 4
    items = [n, *slices(N2, "g5.12xlarge"), plugin_ds(desired=1, ready=1), kubelet_plugin(), *classes()]
    (f,) = findings(report(items), "dra-double-advertised")
    assert f.object == f"Node/{N2}"
    assert "4 nvidia.com/gpu by the device plugin (DaemonSet/kube-system/nvidia-device-plugin-daemonset)" in f.message
    assert f"kubectl label node {N2} nvidia.com/gpu.deploy.device-plugin=false" in f.fix


def test_mig_only_slices_are_not_double_advertising() -> None:
    n = node(N2, "g5.12xlarge", taints=[GPU_TAINT])
    mig = node_slices(N2, "a100", 1, 40960, mig={"1g.5gb": 7})
    assert all(d["attributes"]["type"]["string"] == "mig" for d in mig[0]["spec"]["devices"])
    assert findings(report([n, *mig, *classes()]), "dra-double-advertised") == []


def test_pods_with_claims_on_a_karpenter_nodepool() -> None:
    items = [nodepool("gpu"), *classes(), template(), dra_node(N1, nodepool="gpu"), *slices(N1), kubelet_plugin(),
             claim_pod("serve-0", node_name=N1, node_selector={"karpenter.sh/nodepool": "gpu"}, claim="serve-0-gpu-x7k2p"),
             allocated_claim("serve-0", N1, "gpu-0"),
             claim_pod("serve-1", node_selector={"karpenter.sh/nodepool": "gpu"})]
    rep = report(items)
    by = {f.object: f for f in findings(rep, "dra-karpenter")}
    assert by["Pod/ml/serve-1"].severity == "error" and by["Pod/ml/serve-0"].severity == "warning"
    assert ("Failed to schedule pod, pod has Dynamic Resource Allocation requirements that are not yet supported by "
            "Karpenter") in by["Pod/ml/serve-1"].message
    assert "StaticCapacity" in by["Pod/ml/serve-1"].fix


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s["spec"]["devices"].append(copy.deepcopy(s["spec"]["devices"][0])), "Duplicate value"),
        (lambda s: s["spec"].pop("pool"), "spec.pool"),
    ],
)
def test_slices_the_api_server_rejects_are_bad_input(change: Any, words: str) -> None:
    (bad,) = slices(N1)
    change(bad)
    with pytest.raises(InputError) as err:
        report([dra_node(N1), bad, *classes(), template(), claim_pod("train-1")])
    assert words in err.value.line() and f"ResourceSlice {bad['metadata']['name']}" in err.value.line()


def test_malformed_cel_in_a_device_class_is_said_and_the_rest_checked() -> None:
    """A snapshot stays usable: the selector that does not compile is one finding naming the class."""
    dc = classes()
    dc[0]["spec"]["selectors"][0]["cel"]["expression"] = "device.driver == "
    rep = report([dra_node(N1), *slices(N1), *dc, template(), claim_pod("train-1")])
    (f,) = findings(rep, "dra-claim-pending")
    assert f.object == "DeviceClass gpu.nvidia.com" and "compilation failed" in f.message, f
    assert findings(rep, "gpu-node-idle"), "the other checks still run"


def test_an_idle_dra_node_is_an_idle_gpu_node() -> None:
    """A node whose GPUs the driver publishes and no pod claims costs as much as any idle GPU node."""
    rep = report([dra_node(N1), *slices(N1), kubelet_plugin(), *classes()])
    (f,) = findings(rep, "gpu-node-idle")
    assert f.object == f"Node/{N1}"

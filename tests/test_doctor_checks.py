"""Doctor's checks one by one: what each looks at, its wording and its fix, and where it must stay quiet."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from kgpu.doctor import doctor_report
from kgpu.doctor.cuda import node_driver
from kgpu.doctor.deviceplugin_workloads import plugin_version
from kgpu.doctor.nodepools import nodepool_pool, nodepool_profile
from kgpu.doctor.reading import cluster_state
from kgpu.errors import InputError
from snapshot_builders import (
    GPU_TAINT,
    GPU_TOLERATION,
    container,
    daemon_pod,
    event,
    node,
    nodepool,
    plugin_ds,
    pod,
    snapshot,
)

SNAPSHOTS = Path(__file__).parent / "fixtures" / "snapshots"
GPU = "gpu-1"


def load(name: str) -> dict:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def findings(doc: dict, check: str) -> list:
    return doctor_report(doc).by_check(check)


def fix_yaml(fix: str) -> object:
    """The YAML part of a fix (comment lines dropped)."""
    return yaml.safe_load(
        "\n".join(line for line in fix.splitlines() if not line.lstrip().startswith(("#", "kubectl")))
    )


def _gpu_cluster(*extra: dict, taints: list | None = None, **node_kw) -> dict:
    ds = plugin_ds(desired=1)
    gpu = node(
        GPU, "g5.xlarge", taints=[GPU_TAINT] if taints is None else taints, driver="550.127.05", **node_kw
    )
    return snapshot([node("cpu-1"), gpu, ds, daemon_pod(ds, GPU), *extra])


# --- device plugin ------------------------------------------------------------------------------------


def test_untolerated_taint_fix_is_the_missing_toleration():
    doc = load("device-plugin-untolerated")
    [f] = findings(doc, "device-plugin-untolerated-taint")
    assert f.object == "Node/ip-192-168-20-11.us-west-2.compute.internal"
    assert "ray.io/node-type=worker:NoSchedule" in f.message
    assert fix_yaml(f.fix) == [
        {"key": "ray.io/node-type", "operator": "Equal", "value": "worker", "effect": "NoSchedule"}
    ]


def test_untolerated_taint_fix_applied_makes_it_quiet():
    doc = load("device-plugin-untolerated")
    ds = next(i for i in doc["items"] if i["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["tolerations"].append(
        {"key": "ray.io/node-type", "operator": "Equal", "value": "worker", "effect": "NoSchedule"}
    )
    assert findings(doc, "device-plugin-untolerated-taint") == []
    # the DaemonSet now selects the node but no pod runs there yet: that is not-ready, not a taint problem
    [f] = findings(doc, "device-plugin-not-ready")
    assert f.object.startswith("Node/") and "no plugin pod runs on it" in f.message


def test_plugin_selector_that_leaves_a_gpu_node_out():
    ds = plugin_ds(desired=0, node_selector={"node-type": "gpu"})
    doc = snapshot([node("cpu-1"), node(GPU, "g5.xlarge", taints=[GPU_TAINT], gpus=-1), ds])
    [f] = findings(doc, "device-plugin-node-selector")
    assert f.severity == "error" and f.object == f"Node/{GPU}"
    assert "didn't match Pod's node affinity/selector" in f.message
    assert f"kubectl get node {GPU} --show-labels" in f.fix


def test_plugin_missing_is_quiet_when_nodes_have_a_builtin_plugin():
    doc = snapshot(
        [node(GPU, "g5.xlarge", taints=[GPU_TAINT], os_image="Bottlerocket OS 1.26.2 (aws-k8s-1.31-nvidia)")]
    )
    assert findings(doc, "device-plugin-missing") == []
    assert findings(doc, "device-plugin-duplicate") == []


def test_two_plugin_daemonsets_on_one_node_are_duplicates():
    first = plugin_ds(desired=1)
    operator = plugin_ds(desired=1, name="nvidia-device-plugin-daemonset", namespace="gpu-operator")
    doc = snapshot(
        [
            node(
                GPU, "g5.xlarge", taints=[GPU_TAINT], labels={"nvidia.com/gpu.deploy.device-plugin": "true"}
            ),
            first,
            operator,
            daemon_pod(first, GPU),
            daemon_pod(operator, GPU),
        ]
    )
    [f] = findings(doc, "device-plugin-duplicate")
    assert "DaemonSet/gpu-operator/nvidia-device-plugin-daemonset" in f.message
    assert "DaemonSet/kube-system/nvidia-device-plugin-daemonset" in f.message
    assert "GPU Operator" in f.fix


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", (0, 20, 0)),
        ("nvidia/k8s-device-plugin:1.11", (1, 11, 0)),
        ("nvcr.io/nvidia/k8s-device-plugin:v0.14.3-ubi8", (0, 14, 3)),
        ("nvcr.io/nvidia/k8s-device-plugin@sha256:abc", None),
    ],
)
def test_plugin_version(image, version):
    assert plugin_version(image) == version


def test_current_and_pre_0x_plugin_versions():
    assert findings(_gpu_cluster(), "device-plugin-outdated") == []
    doc = _gpu_cluster()
    ds = next(i for i in doc["items"] if i["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "nvidia/k8s-device-plugin:1.11"
    [f] = findings(doc, "device-plugin-outdated")
    assert "pre-0.x" in f.message
    assert (
        "set image daemonset/nvidia-device-plugin-daemonset nvidia-device-plugin-ctr=nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
        in f.fix
    )


# --- GPU nodes ----------------------------------------------------------------------------------------


def test_not_ready_gpu_node_is_reported_once_and_not_as_idle():
    doc = _gpu_cluster(ready=False)
    report = doctor_report(doc)
    assert [
        (f.check, f.object)
        for f in report.findings
        if f.object == f"Node/{GPU}" and f.check.startswith("gpu-node-")
    ] == [("gpu-node-not-ready", f"Node/{GPU}")]


def test_idle_cost_uses_capacity_type_price():
    doc = load("gpu-node-waste")
    report = doctor_report(doc)
    [idle] = report.by_check("gpu-node-idle")
    assert "g5.12xlarge spot costs $" in idle.message
    [other] = report.by_check("gpu-node-no-gpu-pods")
    assert "g5.xlarge on-demand costs $1.006/hour" in other.message
    spot = float(idle.message.split("$")[1].split("/")[0])
    assert report.summary()["idle_gpu_cost_per_hour"] == pytest.approx(1.006 + spot, abs=1e-3)


def test_untainted_fix_names_the_nodepool_taint():
    [f] = findings(load("gpu-node-waste"), "gpu-node-untainted")
    assert (
        "kubectl taint nodes ip-192-168-20-11.us-west-2.compute.internal nvidia.com/gpu=true:NoSchedule"
        in f.fix
    )
    assert "in NodePool gpu spec.template.spec.taints" in f.fix


def test_gpu_node_detected_by_capacity_alone():
    """A node the catalog does not know and no GFD labels, that advertises GPUs, is still a GPU node."""
    n = node("onprem-1", "m5.xlarge")
    n["status"]["capacity"]["nvidia.com/gpu"] = "2"
    n["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    state = cluster_state(snapshot([n]))
    assert state.nodes[0].is_gpu and state.nodes[0].gpu_reason == "capacity nvidia.com/gpu: 2"


# --- pending GPU pods ---------------------------------------------------------------------------------


def test_pending_message_is_kube_schedulers_and_compares_with_event():
    [f] = findings(load("pending-untolerated-taint"), "pending-gpu-pod")
    assert f.message.startswith(
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)."
    )
    assert "FailedScheduling event (2026-11-22T09:58:12Z) says the same" in f.message
    assert fix_yaml(f.fix) == {
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ]
    }


def test_pending_event_that_differs_is_quoted():
    [f] = findings(load("pending-insufficient"), "pending-gpu-pod")
    assert f.message.startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    assert (
        'newest FailedScheduling event (2026-11-22T09:58:12Z) says: "0/2 nodes are available: 1 Insufficient'
        in f.message
    )
    # quoted whole, PostFilter's part included
    assert (
        'says: "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint '
        '{nvidia.com/gpu: true}. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."'
        in f.message
    )


def test_pending_selector_names_label_and_nodepool_reason():
    [f] = findings(load("pending-selector"), "pending-gpu-pod")
    assert "FailedScheduling event (2026-11-22T09:58:12Z) says the same" in f.message  # DRA's words too
    assert 'label "node-type" does not have known values' in f.message
    assert "nodeSelector node-type: 'gpu' matches no node" in f.fix
    assert "kubectl label node ip-192-168-20-11.us-west-2.compute.internal node-type=gpu" in f.fix
    assert "labels:\n        node-type: gpu" in f.fix


def test_pending_limits_fix_raises_nodepool_limit():
    [f] = findings(load("pending-nodepool-limits"), "pending-gpu-pod")
    assert 'all available instance types exceed limits for nodepool "gpu"' in f.message
    assert "kubectl patch nodepool gpu --type merge" in f.fix


def test_pending_pod_a_nodepool_could_serve_points_at_the_autoscaler():
    ds = plugin_ds(desired=0)
    pending = pod(
        "train-0",
        "ml",
        image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        gpus=1,
        tolerations=[GPU_TOLERATION],
    )
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "gpu-x7k2p", "labels": {"karpenter.sh/nodepool": "gpu"}},
        "status": {
            "conditions": [
                {
                    "type": "Launched",
                    "status": "False",
                    "reason": "InsufficientCapacityError",
                    "message": "all requested instance types were unavailable during launch",
                }
            ]
        },
    }
    doc = snapshot([node("cpu-1"), ds, pending, nodepool("gpu", taints=[GPU_TAINT]), claim])
    [f] = findings(doc, "pending-gpu-pod")
    assert f.severity == "error"
    assert 'The snapshot\'s NodePools: pool "gpu" can launch a g4dn.xlarge' in f.message
    assert "NodeClaim gpu-x7k2p" in f.message and "InsufficientCapacityError" in f.message
    assert "kubectl get nodeclaims" in f.fix


def test_pending_pod_that_fits_now_is_a_warning():
    pending = pod("train-0", "ml", gpus=1, tolerations=[GPU_TOLERATION])
    [f] = findings(_gpu_cluster(pending), "pending-gpu-pod")
    assert f.severity == "warning" and f"places it on node {GPU}" in f.message


def test_pending_pod_that_would_preempt_names_its_victims():
    """A pending high-priority GPU pod and a running low-priority one on the only GPU node: the simulation
    preempts (kube-scheduler would have too), so the finding is a warning naming the victim."""
    running = pod("batch-0", "ml", gpus=1, tolerations=[GPU_TOLERATION], node_name=GPU, priority=0)
    pending = pod("train-0", "ml", gpus=1, tolerations=[GPU_TOLERATION], priority=1000)
    [f] = findings(_gpu_cluster(running, pending), "pending-gpu-pod")
    assert f.severity == "warning"
    assert f"places it on node {GPU} now by preempting 1 pod(s) of lower priority (ml/batch-0)" in f.message


def test_pending_non_gpu_pod_is_not_a_finding():
    doc = _gpu_cluster(pod("web-0", node_selector={"node-type": "nope"}))
    assert findings(doc, "pending-gpu-pod") == []


# --- workloads ----------------------------------------------------------------------------------------


def test_gpu_request_without_limit_in_a_pod_template():
    p = pod(
        "infer-0",
        "ml",
        containers=[container("infer", "triton:1", requests={"nvidia.com/gpu": "1", "cpu": "1"})],
    )
    [f] = findings(_gpu_cluster(p), "gpu-request-without-limit")
    assert f.object == "Pod/ml/infer-0" and f.severity == "error"
    assert "spec.containers[0] (infer) requests 1 nvidia.com/gpu without a limit" in f.message
    assert fix_yaml(f.fix) == {"resources": {"limits": {"nvidia.com/gpu": 1}}}


def test_valid_gpu_limits_alone_or_equal_are_quiet():
    only_limit = pod(
        "a-0",
        containers=[container("a", "x:1", limits={"nvidia.com/gpu": "1"})],
        node_name=GPU,
        tolerations=[GPU_TOLERATION],
    )
    equal = pod("b-0", containers=[container("b", "x:1", gpus=1)], tolerations=[GPU_TOLERATION])
    report = doctor_report(_gpu_cluster(only_limit, equal))
    assert not {f.check for f in report.findings} & {
        "gpu-request-without-limit",
        "gpu-request-limit-mismatch",
        "gpu-fractional",
    }


def test_tke_no_spec_fix_is_a_runnable_match_command():
    [f] = [x for x in findings(load("tke-annotations"), "tke-annotation-no-spec") if "train-v100" in x.object]
    assert "kgpu tke match --gpu-type 'V100' --gpus 3 --cpu 24 --memory 120Gi --explicit -o table" in f.fix


def test_too_many_gpus_uses_nodepool_catalog_limit():
    [f] = findings(load("gpu-request-too-large"), "gpu-request-too-large")
    assert 'the most any node or NodePool offers is 8 (NodePool "gpu" (g5.48xlarge))' in f.message


def test_nodepool_requirements_become_a_pool():
    np = nodepool(
        "gpu",
        taints=[GPU_TAINT],
        limits={"nvidia.com/gpu": "8"},
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["a10g"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
            {"key": "team", "operator": "In", "values": ["ml"]},
            {"key": "karpenter.k8s.aws/instance-category", "operator": "NotIn", "values": ["t"]},
        ],
    )
    pool, notes = nodepool_pool(np)
    assert pool["capacityTypes"] == ["spot"]
    assert pool["requirements"]["gpuNames"] == ["a10g"] and pool["requirements"]["generation"] == {"min": 5}
    assert pool["labels"] == {"team": "ml"}
    assert pool["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "true"}]
    assert notes == [
        "NodePool \"gpu\": requirement karpenter.k8s.aws/instance-category NotIn ['t'] is not modelled"
    ]
    profile, _ = nodepool_profile(cluster_state(snapshot([node("cpu-1"), np])))
    assert profile is not None and profile.pools[0].name == "gpu" and profile.cluster.region == "us-west-2"


# --- CUDA vs driver -----------------------------------------------------------------------------------


def test_cuda_error_predicts_the_runtime_message_and_fix():
    [f] = [x for x in findings(load("cuda-driver"), "cuda-driver-insufficient") if "train-torch" in x.object]
    assert '"CUDA driver version is insufficient for CUDA runtime version"' in f.message
    assert (
        "CUDA 12.1 needs driver >= 530.30.02" in f.message
        and "the node has 470.182.03 (CUDA 11.4)" in f.message
    )
    assert "image built for CUDA <= 11.4" in f.fix and ">= 530.30.02" in f.fix


def test_cuda_fits_when_driver_is_new_enough():
    p = pod(
        "t-0",
        "ml",
        image="nvidia/cuda:12.4.1-base-ubuntu22.04",
        gpus=1,
        node_name=GPU,
        tolerations=[GPU_TOLERATION],
    )
    assert findings(_gpu_cluster(p), "cuda-driver-insufficient") == []


def test_cuda_unknown_driver_is_info_once():
    ds = plugin_ds(desired=1)
    gpu = node(GPU, "g5.xlarge", taints=[GPU_TAINT], gfd=False)
    p = pod(
        "t-0",
        "ml",
        image="nvidia/cuda:12.4.1-base-ubuntu22.04",
        gpus=1,
        node_name=GPU,
        tolerations=[GPU_TOLERATION],
    )
    [f] = findings(snapshot([gpu, ds, daemon_pod(ds, GPU), p]), "cuda-driver-unknown")
    assert f.severity == "info" and f.object == f"Node/{GPU}"
    assert "gfd.enabled=true" in f.fix


@pytest.mark.parametrize(
    ("labels", "driver"),
    [
        (
            {
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/cuda.driver.minor": "54",
                "nvidia.com/cuda.driver.rev": "15",
            },
            (550, 54, 15),
        ),
        ({"nvidia.com/cuda.driver-version.full": "535.104.05"}, (535, 104, 5)),
        (
            {
                "nvidia.com/cuda.driver-version.major": "570",
                "nvidia.com/cuda.driver-version.minor": "86",
                "nvidia.com/cuda.driver-version.revision": "10",
            },
            (570, 86, 10),
        ),
        ({}, None),
    ],
)
def test_node_driver_labels(labels, driver):
    assert node_driver(labels) == driver


# --- monitoring ---------------------------------------------------------------------------------------


def test_exporter_found_by_image_of_other_exporters():
    dcgm = pod(
        "dcgm-exporter-x",
        "gpu-operator",
        image="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
        node_name=GPU,
        owner=("DaemonSet", "dcgm-exporter"),
        tolerations=[GPU_TOLERATION],
    )
    assert findings(_gpu_cluster(dcgm), "gpu-exporter-missing") == []
    assert len(findings(_gpu_cluster(), "gpu-exporter-missing")) == 1


# --- input --------------------------------------------------------------------------------------------


def test_snapshot_without_secrets_or_metadata_still_reads():
    doc = copy.deepcopy(load("healthy"))
    del doc["metadata"]
    assert doctor_report(doc).findings == []


def test_invalid_node_is_bad_input_naming_the_field():
    doc = _gpu_cluster()
    doc["items"][1]["spec"]["taints"] = [{"key": "x", "effect": "Sometimes"}]
    with pytest.raises(InputError) as exc:
        doctor_report(doc, source="snap.json")
    assert (
        exc.value.line()
        == "snap.json: Node gpu-1: spec.taints[0].effect: 'Sometimes' is not one of NoSchedule, PreferNoSchedule, NoExecute"
    )


def test_failed_scheduling_event_picks_the_newest():
    p = pod("train-0", "ml", gpus=1)
    old = event(p, "0/9 nodes are available: old.")
    new = event(p, "0/9 nodes are available: new.")
    old["lastTimestamp"] = "2026-11-22T07:00:00Z"
    state = cluster_state(snapshot([p, new, old]))
    assert state.failed_scheduling()["ml/train-0"].message == "0/9 nodes are available: new."


@pytest.mark.parametrize(
    "name", ["healthy", "cuda-driver", "tke-annotations", "pending-selector", "onprem-list"]
)
def test_pod_models_equal_the_loaders(name):
    """Doctor decodes each distinct pod spec once; every pod's model is still exactly what the loader builds."""
    from kgpu.model.load import parse_documents

    state = cluster_state(load(name))
    pods = [p for p in state.pods if p.model is not None]
    assert pods
    for p in pods:
        [expected] = parse_documents([p.raw], "x").pods
        got = p.model
        assert (
            got.spec,
            got.limits,
            got.priority,
            got.preemption_policy,
            got.phase,
            got.owner_kind,
            got.owner_name,
        ) == (
            expected.spec,
            expected.limits,
            expected.priority,
            expected.preemption_policy,
            expected.phase,
            expected.owner_kind,
            expected.owner_name,
        )
        assert (dict(got.labels), dict(got.annotations), got.key) == (
            dict(expected.labels),
            dict(expected.annotations),
            expected.key,
        )


def test_pods_differing_only_in_volumes_share_one_decode():
    a = pod("web-1", node_name="cpu-1", owner=("ReplicaSet", "web"))
    b = copy.deepcopy(a)
    b["metadata"]["name"] = "web-2"
    b["spec"]["volumes"][0]["name"] = "kube-api-access-q9z8y"
    b["spec"]["containers"][0]["volumeMounts"][0]["name"] = "kube-api-access-q9z8y"
    b["spec"]["nodeName"] = "cpu-2"
    state = cluster_state(snapshot([node("cpu-1"), node("cpu-2"), a, b]))
    ma, mb = (p.model for p in state.pods)
    assert ma is not None and mb is not None
    assert (ma.node_name, mb.node_name) == ("cpu-1", "cpu-2")
    assert ma.spec.requests is mb.spec.requests  # one decode, two pods


def test_pending_nodes_limit_fix_names_the_nodes_limit():
    """Karpenter v1.8 refuses every claim of a NodePool whose node count is above `limits.nodes` (the
    provisioner's Create, not Solve): the fix raises that limit, not the GPU one."""
    doc = load("pending-nodepool-limits")
    [np] = [item for item in doc["items"] if item.get("kind") == "NodePool"]
    np["spec"]["limits"] = {"nodes": "0"}
    [f] = findings(doc, "pending-gpu-pod")
    assert 'nodepool "gpu": creating node claim, resource usage exceeds limit' in f.message
    assert "NodePool gpu already has 1 nodes against its limit of 0" in f.fix
    assert '"limits":{"nodes":"<more>"}' in f.fix

"""doctor on healthy clusters as users build them (tests/fixtures/clusters/): no error from any check, and
every fix right for the cluster it is given.

The flavours: NVIDIA's device-plugin Helm chart with GPU Feature Discovery, the GPU Operator, Bottlerocket
NVIDIA nodes (the host runs the plugin) and on-prem nodes with NVIDIA's static manifest. The variations below
change one thing of a healthy cluster and check the finding, its object and its fix.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kgpu.catalog import aws_catalog
from kgpu.cli.main import cli
from kgpu.doctor import CHECK_IDS, doctor_report
from kgpu.doctor.deviceplugin_workloads import plugin_daemonsets, plugin_pods, runs_plugin
from kgpu.doctor.reading import cluster_state
from snapshot_builders import event, pod, v1_list

FIXTURES = Path(__file__).parent / "fixtures"
HERE = FIXTURES / "clusters"
FLAVOURS = ("helm-gfd", "gpu-operator", "bottlerocket", "onprem-static")
ALL_CHECKS = sorted({c for ids in CHECK_IDS.values() for c in ids})
GPU_A = "ip-192-168-20-11.us-west-2.compute.internal"
GPU_B = "ip-192-168-21-12.us-west-2.compute.internal"

# flavour -> every finding doctor must give (none at error level)
EXPECTED: dict[str, set[tuple[str, str, str]]] = {
    "helm-gfd": set(),
    "gpu-operator": set(),
    # Bottlerocket runs no GFD: the drivers are unknown (info)
    "bottlerocket": {("cuda-driver-unknown", "info", f"Node/{GPU_B}")},
    # seed 002 runs the exporter on the hosts, and the static manifest deploys no GFD
    "onprem-static": {
        ("gpu-exporter-missing", "warning", "Node/k8s-node04"),
        ("cuda-driver-unknown", "info", "Node/k8s-node04"),
    },
}


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
    return doc


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("cluster_fixture_generator", HERE / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _items(doc: dict[str, Any], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [i for i in doc["items"] if i["kind"] == kind and (name is None or i["metadata"]["name"] == name)]


def _findings(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f.check, f.severity, f.object) for f in doctor_report(doc).findings}


def test_fixture_files_are_what_generate_writes():
    gen = _generator()
    assert {p.stem for p in HERE.glob("*.json")} == set(gen.FIXTURES) == set(FLAVOURS)
    for name in gen.FIXTURES:
        assert (HERE / f"{name}.json").read_text(encoding="utf-8") == gen.render(name), name


@pytest.mark.parametrize("check", ALL_CHECKS)
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_no_check_finds_an_error_on_a_healthy_cluster(flavour, check):
    report = doctor_report(load(flavour), source=f"{flavour}.json")
    assert [f for f in report.findings if f.check == check and f.severity == "error"] == []


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_healthy_flavours_findings_exactly(flavour):
    doc = load(flavour)
    report = doctor_report(doc)
    assert {(f.check, f.severity, f.object) for f in report.findings} == EXPECTED[flavour]
    s = report.summary()
    assert (s["errors"], s["gpu_nodes"], s["pending_gpu_pods"]) == (0, 2, 0)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_list_and_snapshot_give_the_same_findings(flavour):
    doc = load(flavour)
    as_list = v1_list(copy.deepcopy(doc["items"]))
    snap = {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterSnapshot",
        "metadata": {},
        "items": doc["items"],
    }
    assert _findings(as_list) == _findings(snap) == EXPECTED[flavour]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cli_exits_0_on_a_healthy_cluster(flavour):
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(HERE / f"{flavour}.json"), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"]["errors"] == 0


# --- which DaemonSets run the device plugin ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavour", "plugins"),
    [
        ("helm-gfd", ["DaemonSet/nvidia-device-plugin/nvdp-nvidia-device-plugin"]),
        ("gpu-operator", ["DaemonSet/gpu-operator/nvidia-device-plugin-daemonset"]),
        ("bottlerocket", []),
        ("onprem-static", ["DaemonSet/kube-system/nvidia-device-plugin-daemonset"]),
    ],
)
def test_only_the_daemonset_that_runs_the_plugin_counts(flavour, plugins):
    state = cluster_state(load(flavour))
    shared = [
        ds.ref for ds in state.daemonsets if any("k8s-device-plugin" in i for i in ds.images)
    ]  # GFD, the MPS daemon and config managers share the image
    assert [ds.ref for ds in plugin_daemonsets(state)] == plugins
    if flavour in ("helm-gfd", "gpu-operator"):
        assert len(shared) == 3  # plugin, GFD, MPS control daemon
    got = sorted((p.node_name, p.owner_name) for p in plugin_pods(state.pods))
    gpu_nodes = [n.name for n in state.gpu_nodes]
    assert got == sorted((n, ref.rsplit("/", 1)[1]) for n in gpu_nodes for ref in plugins)


IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"


@pytest.mark.parametrize(
    ("container", "runs"),
    [
        ({"image": IMAGE, "name": "nvidia-device-plugin-ctr"}, True),  # static manifest: the entrypoint
        ({"image": IMAGE, "args": ["--fail-on-init-error=false"]}, True),  # arguments to the entrypoint
        ({"image": IMAGE, "command": ["nvidia-device-plugin"]}, True),  # the Helm chart
        ({"image": IMAGE, "command": ["/usr/bin/nvidia-device-plugin"]}, True),
        ({"image": IMAGE, "command": ["gpu-feature-discovery"]}, False),  # the chart's GFD
        ({"image": IMAGE, "command": ["/usr/bin/gpu-feature-discovery"]}, False),  # GFD's static manifest
        ({"image": IMAGE, "command": ["config-manager"]}, False),
        ({"image": IMAGE, "command": ["mps-control-daemon", "mount-shm"]}, False),
        (
            {
                "image": IMAGE,
                "command": ["sh", "-c"],
                "args": ["exec nvidia-device-plugin --pass-device-specs"],
            },
            True,
        ),
        ({"image": IMAGE, "command": ["sh", "-c", "gpu-feature-discovery --oneshot"]}, False),
        # the GPU Operator's wrapper script: it mounts the kubelet's device-plugin directory
        (
            {
                "image": IMAGE,
                "command": ["/bin/bash", "-c"],
                "args": ["/bin/entrypoint.sh"],
                "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
            },
            True,
        ),
        ({"image": IMAGE, "command": ["sleep", "infinity"]}, False),
        ({"image": "registry.k8s.io/nfd/node-feature-discovery:v0.15.3", "command": ["nfd-worker"]}, False),
    ],
)
def test_runs_plugin(container, runs):
    assert runs_plugin(container) is runs


def test_a_second_plugin_on_helm_nodes_is_a_duplicate_that_leaves_gfd_alone():
    doc = load("helm-gfd")
    gen = _generator()
    static = gen.static_plugin_ds(2)
    doc["items"] += [static, *gen.pods_of(static, [GPU_A, GPU_B])]
    report = doctor_report(doc)
    dup = report.by_check("device-plugin-duplicate")
    assert {f.object for f in dup} == {f"Node/{GPU_A}", f"Node/{GPU_B}"}
    for f in dup:
        assert f.severity == "error"
        assert "DaemonSet/kube-system/nvidia-device-plugin-daemonset" in f.message
        assert "DaemonSet/nvidia-device-plugin/nvdp-nvidia-device-plugin)" in f.message
        assert "gpu-feature-discovery" not in f.message + f.fix
        assert f.message.startswith("2 device plugins")
        # the hand-applied manifest goes, the Helm release (with its GFD) stays
        assert (
            "# keep one plugin per node: exclude the node from DaemonSet/kube-system/nvidia-device-plugin-daemonset\n"
            in f.fix
        )
        assert "helm upgrade" not in f.fix


def test_bottlerocket_with_the_chart_for_gfd_only_is_healthy_and_with_its_plugin_a_duplicate():
    helm = load("helm-gfd")
    gfd_only = load("bottlerocket")
    gfd = _items(helm, "DaemonSet", "nvdp-nvidia-device-plugin-gpu-feature-discovery")
    gfd_pods = [
        p for p in _items(helm, "Pod") if p["metadata"]["name"].startswith(gfd[0]["metadata"]["name"])
    ]
    gfd_only["items"] += gfd + gfd_pods
    assert not [f for f in doctor_report(gfd_only).findings if f.severity == "error"]

    both = copy.deepcopy(gfd_only)
    plugin = _items(helm, "DaemonSet", "nvdp-nvidia-device-plugin")
    both["items"] += plugin + [
        p
        for p in _items(helm, "Pod")
        if p["metadata"]["ownerReferences"][0]["name"] == "nvdp-nvidia-device-plugin"
    ]
    dup = doctor_report(both).by_check("device-plugin-duplicate")
    assert {f.object for f in dup} == {f"Node/{GPU_A}", f"Node/{GPU_B}"}
    for f in dup:
        assert "aws-k8s-1.31-nvidia" in f.message
        assert "exclude the node from DaemonSet/nvidia-device-plugin/nvdp-nvidia-device-plugin\n" in f.fix
        assert "--reuse-values --set devicePlugin.enabled=false (GPU Feature Discovery stays)" in f.fix


# --- fixes that fit the cluster ---------------------------------------------------------------------------


def _strip_gfd(doc: dict[str, Any]) -> dict[str, Any]:
    """The cluster as it would be without GFD: no driver labels, no GFD DaemonSet or pods."""
    out = copy.deepcopy(doc)
    items = []
    for item in out["items"]:
        name = item["metadata"]["name"]
        if item["kind"] in ("DaemonSet", "Pod") and "gpu-feature-discovery" in name:
            continue
        if item["kind"] == "Node":
            labels = item["metadata"]["labels"]
            for key in [k for k in labels if k.startswith("nvidia.com/cuda.")]:
                del labels[key]
        items.append(item)
    out["items"] = items
    return out


@pytest.mark.parametrize(
    ("flavour", "must", "must_not"),
    [
        # the host runs the plugin: GFD alone
        ("bottlerocket", ["--set devicePlugin.enabled=false", "gfd.enabled=true"], ["--reuse-values"]),
        (
            "onprem-static",
            ["--set devicePlugin.enabled=false", "DaemonSet/kube-system/nvidia-device-plugin-daemonset"],
            [],
        ),
        # the chart's release runs the plugin: turn GFD on in that release
        (
            "helm-gfd",
            [
                "helm upgrade nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --reuse-values --set gfd.enabled=true"
            ],
            ["devicePlugin.enabled", "upgrade -i"],
        ),
        # the GPU Operator: its ClusterPolicy
        (
            "gpu-operator",
            ["kubectl patch clusterpolicies.nvidia.com cluster-policy", '"gfd":{"enabled":true}'],
            ["helm"],
        ),
    ],
)
def test_cuda_driver_unknown_fix_adds_gfd_without_a_second_plugin(flavour, must, must_not):
    report = doctor_report(_strip_gfd(load(flavour)))
    (finding,) = report.by_check("cuda-driver-unknown")
    for text in must:
        assert text in finding.fix
    for text in must_not:
        assert text not in finding.fix
    assert not report.by_check("device-plugin-duplicate")


def test_cuda_driver_unknown_without_any_plugin_installs_it_with_gfd():
    doc = _strip_gfd(load("helm-gfd"))
    doc["items"] = [
        i
        for i in doc["items"]
        if not (i["kind"] in ("DaemonSet", "Pod") and i["metadata"]["name"].startswith("nvdp-nvidia"))
    ]
    (finding,) = doctor_report(doc).by_check("cuda-driver-unknown")
    assert "--set gfd.enabled=true" in finding.fix
    assert "devicePlugin.enabled" not in finding.fix


def test_cpu_pod_on_a_tainted_gpu_node_names_the_catch_all_toleration():
    doc = load("helm-gfd")
    doc["items"] = [
        i
        for i in doc["items"]
        if not (i["kind"] == "Pod" and i["metadata"]["name"].startswith("embed-batch"))
    ]
    web = pod(
        "web-7f9c8d7b5-abcde",
        "shop",
        node_name=GPU_A,
        owner=("ReplicaSet", "web-7f9c8d7b5"),
        tolerations=[{"operator": "Exists"}],
    )
    doc["items"].append(web)
    (finding,) = doctor_report(doc).by_check("gpu-node-no-gpu-pods")
    assert finding.object == f"Node/{GPU_A}"
    assert "nvidia.com/gpu=present:NoSchedule" in finding.message
    assert "shop/web-7f9c8d7b5-abcde tolerate every taint" in finding.message
    assert "kubectl taint" not in finding.fix  # the node has the taint already
    assert "ReplicaSet shop/web-7f9c8d7b5: remove the catch-all toleration" in finding.fix


def test_cpu_pod_on_an_untainted_gpu_node_gets_the_taint():
    doc = load("onprem-static")
    for item in _items(doc, "Node", "k8s-node05"):
        del item["spec"]["taints"]
    doc["items"] = [
        i
        for i in doc["items"]
        if not (i["kind"] == "Pod" and i["metadata"]["name"].startswith("cuda-sample"))
    ]
    doc["items"].append(pod("web-1", "shop", node_name="k8s-node05"))
    (finding,) = doctor_report(doc).by_check("gpu-node-no-gpu-pods")
    assert finding.fix.startswith("kubectl taint nodes k8s-node05 nvidia.com/gpu=true:NoSchedule")


def _gt_values(fix: str) -> list[int]:
    return [int(v) for v in re.findall(r"operator: Gt\n\s+values:\n\s+- '(\d+)'", fix)]


@pytest.mark.parametrize("gpus", [2, 5, 8, 16, 64])
def test_a_larger_instance_requirement_matches_an_instance_type_kgpu_knows(gpus):
    doc = load("bottlerocket")
    doc["items"].append(
        pod(
            "train-big-a1s2d",
            "ml",
            image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            gpus=gpus,
            owner=("Job", "train-big"),
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        )
    )
    report = doctor_report(doc)
    most = max(t.gpu_count for t in aws_catalog().types() if t.gpu_manufacturer == "nvidia")
    too_large = report.by_check("gpu-request-too-large")
    pending = report.by_check("pending-gpu-pod")
    fixes = [f.fix for f in too_large + pending]
    for fix in fixes:
        for value in _gt_values(fix):
            assert any(t.gpu_count > value for t in aws_catalog().types()), fix
    if gpus > most:
        assert too_large and all(f"no instance type kgpu knows has {gpus} GPUs" in f.fix for f in too_large)
        assert all(not _gt_values(f) for f in fixes)
    elif too_large:
        assert _gt_values(too_large[0].fix) == [gpus - 1]


# --- monitoring ------------------------------------------------------------------------------------------


def test_exporter_on_cpu_nodes_only_covers_no_gpu_node():
    doc = load("bottlerocket")
    for ds in _items(doc, "DaemonSet", "kgpu-exporter"):
        ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = "DoesNotExist"
        ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"][0]["matchExpressions"][0].pop("values")
    for p in _items(doc, "Pod"):
        if p["metadata"]["name"].startswith("kgpu-exporter"):
            p["spec"]["nodeName"] = "ip-192-168-10-5.us-west-2.compute.internal"
    (finding,) = doctor_report(doc).by_check("gpu-exporter-missing")
    assert finding.object == "DaemonSet/kgpu-system/kgpu-exporter"  # exists in the cluster
    assert "other GPU nodes" not in finding.message
    assert (
        "run only on node(s) that have no GPU (ip-192-168-10-5.us-west-2.compute.internal)" in finding.message
    )


def test_exporter_missing_on_one_node_counts_the_others():
    doc = load("gpu-operator")
    doc["items"] = [
        i
        for i in doc["items"]
        if not (
            i["kind"] == "Pod"
            and i["metadata"]["name"].startswith("nvidia-dcgm-exporter")
            and i["spec"]["nodeName"] == GPU_A
        )
    ]
    (finding,) = doctor_report(doc).by_check("gpu-exporter-missing")
    assert finding.object == f"Node/{GPU_A}"
    assert "while 1 other GPU node(s) do" in finding.message


# --- every finding's object exists ------------------------------------------------------------------------


def _refs(doc: dict[str, Any]) -> set[str]:
    out = set()
    for item in doc["items"]:
        meta = item.get("metadata") or {}
        kind, name, ns = item["kind"], meta.get("name"), meta.get("namespace")
        out.add(f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}")
        if kind == "Event":
            inv = item["involvedObject"]
            out.add(f"{inv['kind']}/{inv.get('namespace')}/{inv['name']}")
    return out


def _variants() -> list[tuple[str, dict[str, Any]]]:
    docs = [(f"clusters/{n}", load(n)) for n in FLAVOURS]
    docs += [(f"clusters/{n} without GFD", _strip_gfd(load(n))) for n in FLAVOURS]
    docs += [
        (f"snapshots/{p.stem}", json.loads(p.read_text(encoding="utf-8")))
        for p in sorted((FIXTURES / "snapshots").glob("*.json"))
    ]
    return docs


@pytest.mark.parametrize(("label", "doc"), _variants(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_finding_names_an_object_of_the_cluster(label, doc):
    refs = _refs(doc)
    for f in doctor_report(doc).findings:
        assert f.object in refs, (label, f.check, f.object)


# --- pending pods: kube-scheduler's words over the cluster as it is -------------------------------------


def test_pending_message_counts_the_clusters_nodes_not_the_simulations():
    """Two pods wait; the NodePool's limit lets Karpenter launch one node: the second pod's message is over
    the cluster's 3 nodes (kube-scheduler's "0/3"), and what the NodePool would do is its own sentence."""
    doc = load("helm-gfd")
    for np in _items(doc, "NodePool"):
        np["spec"]["limits"] = {"nvidia.com/gpu": "9"}  # 5 in use: room for one g5.12xlarge (4), not two
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    waiting = [
        pod(
            f"train-{c}-k2m4p",
            "ml",
            image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            gpus=4,
            owner=("Job", f"train-{c}"),
            tolerations=tol,
        )
        for c in ("a", "b")
    ]
    doc["items"] += waiting
    report = doctor_report(doc)
    found = {f.object: f for f in report.by_check("pending-gpu-pod")}
    assert set(found) == {"Pod/ml/train-a-k2m4p", "Pod/ml/train-b-k2m4p"}
    messages = [f.message for f in found.values()]
    for msg in messages:
        assert msg.startswith("0/3 nodes are available: "), msg
        assert "0/4" not in msg
    blocked = [m for m in messages if "exceed limits" in m]
    assert len(blocked) == 1
    assert (
        "). The snapshot's NodePools: karpenter: all available instance types exceed limits for nodepool"
        in blocked[0]
    )
    launching = [m for m in messages if "can launch" in m]
    assert len(launching) == 1


def test_pending_message_agrees_with_the_event_kube_scheduler_wrote():
    doc = load("onprem-static")
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    waiting = pod(
        "train-c-p8q7r",
        "default",
        image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        gpus=4,
        owner=("Job", "train-c"),
        tolerations=tol,
    )

    said = (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for "
        "scheduling, 2 No preemption victims found for incoming pod."
    )
    doc["items"] += [waiting, event(waiting, said)]
    (finding,) = doctor_report(doc).by_check("pending-gpu-pod")
    assert finding.message.startswith(said + " (the cluster's FailedScheduling event")
    assert "says the same" in finding.message


# --- fixes for DaemonSets a tool manages ------------------------------------------------------------------


def _retaint(doc: dict[str, Any], node_name: str, taint: dict[str, str]) -> None:
    for item in _items(doc, "Node", node_name):
        item["spec"]["taints"] = [*item["spec"].get("taints", []), taint]
    doc["items"] = [
        i
        for i in doc["items"]
        if not (
            i["kind"] == "Pod"
            and i["spec"].get("nodeName") == node_name
            and "plugin" in i["metadata"]["name"]
        )
    ]


RAY = {"key": "ray.io/node-type", "value": "worker", "effect": "NoSchedule"}


def test_untolerated_taint_on_a_helm_release_is_fixed_in_its_values():
    doc = load("helm-gfd")
    _retaint(doc, GPU_A, RAY)
    (finding,) = doctor_report(doc).by_check("device-plugin-untolerated-taint")
    assert finding.object == f"Node/{GPU_A}"
    assert "/spec/template/spec/tolerations/-" in finding.fix  # the template has a tolerations list
    assert (
        "Helm release nvdp's: the next upgrade undoes an edit of the DaemonSet; put tolerations in its values"
        in finding.fix
    )
    assert (
        "helm upgrade nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --reuse-values -f values.yaml"
        in finding.fix
    )


def test_untolerated_taint_on_the_operators_plugin_is_fixed_in_the_cluster_policy():
    doc = load("gpu-operator")
    _retaint(doc, GPU_A, RAY)
    (finding,) = doctor_report(doc).by_check("device-plugin-untolerated-taint")
    assert "ClusterPolicy cluster-policy (spec.daemonsets.tolerations)" in finding.fix


def test_untolerated_taint_on_a_template_without_tolerations_adds_the_list():
    doc = load("onprem-static")
    for ds in _items(doc, "DaemonSet", "nvidia-device-plugin-daemonset"):
        del ds["spec"]["template"]["spec"]["tolerations"]
    doc["items"] = [i for i in doc["items"] if not (i["kind"] == "Pod" and "plugin" in i["metadata"]["name"])]
    found = doctor_report(doc).by_check("device-plugin-untolerated-taint")
    assert {f.object for f in found} == {"Node/k8s-node04", "Node/k8s-node05"}
    for f in found:
        assert '"path":"/spec/template/spec/tolerations","value":[{"key":"nvidia.com/gpu"' in f.fix
        assert "/tolerations/-" not in f.fix  # a JSON patch cannot append to a list that is not there
        assert "helm" not in f.fix and "ClusterPolicy" not in f.fix


def test_operator_node_without_its_deploy_label_names_the_operators_label():
    doc = load("gpu-operator")
    for item in _items(doc, "Node", GPU_A):
        item["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "false"
    doc["items"] = [
        i
        for i in doc["items"]
        if not (
            i["kind"] == "Pod"
            and i["spec"].get("nodeName") == GPU_A
            and "device-plugin" in i["metadata"]["name"]
        )
    ]
    (finding,) = doctor_report(doc).by_check("device-plugin-node-selector")
    assert finding.object == f"Node/{GPU_A}"
    assert "widen" not in finding.fix  # the Operator owns the DaemonSet
    assert f"kubectl label node {GPU_A} nvidia.com/gpu.deploy.device-plugin=true --overwrite" in finding.fix


def test_operator_nodes_without_any_plugin_turn_the_operators_on():
    doc = load("gpu-operator")
    doc["items"] = [
        i
        for i in doc["items"]
        if not (
            i["kind"] in ("DaemonSet", "Pod")
            and i["metadata"]["name"].startswith("nvidia-device-plugin-daemonset")
        )
    ]
    (finding,) = doctor_report(doc).by_check("device-plugin-missing")
    assert finding.object == f"Node/{GPU_A}"
    assert '"devicePlugin":{"enabled":true}' in finding.fix
    assert "kgpu render" not in finding.fix and "kubectl apply" not in finding.fix


@pytest.mark.parametrize(
    ("flavour", "name", "must"),
    [
        (
            "helm-gfd",
            "nvdp-nvidia-device-plugin",
            "helm upgrade nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --reuse-values --version 0.20.0",
        ),
        ("gpu-operator", "nvidia-device-plugin-daemonset", '"devicePlugin":{"version":"v0.20.0"}'),
        (
            "onprem-static",
            "nvidia-device-plugin-daemonset",
            "kubectl -n kube-system set image daemonset/nvidia-device-plugin-daemonset "
            "nvidia-device-plugin-ctr=nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        ),
    ],
)
def test_outdated_plugin_is_upgraded_by_what_manages_it(flavour, name, must):
    doc = load(flavour)
    for ds in _items(doc, "DaemonSet", name):
        for c in ds["spec"]["template"]["spec"]["containers"]:
            if "k8s-device-plugin" in c["image"]:
                c["image"] = "nvcr.io/nvidia/k8s-device-plugin:v0.14.3"
    (finding,) = doctor_report(doc).by_check("device-plugin-outdated")
    assert finding.object.endswith(f"/{name}")
    assert must in finding.fix
    if flavour != "onprem-static":
        assert "set image daemonset" not in finding.fix


def test_idle_node_of_a_nodepool_that_consolidates_already_names_what_keeps_it():
    doc = load("bottlerocket")
    doc["items"] = [
        i for i in doc["items"] if not (i["kind"] == "Pod" and i["metadata"]["name"].startswith("infer-a10g"))
    ]
    for item in _items(doc, "Node", GPU_A):
        item["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    (finding,) = doctor_report(doc).by_check("gpu-node-idle")
    assert finding.object == f"Node/{GPU_A}"
    assert (
        "NodePool gpu removes empty nodes already (consolidationPolicy: WhenEmptyOrUnderutilized"
        in finding.fix
    )
    assert f"kubectl annotate node {GPU_A} karpenter.sh/do-not-disrupt-" in finding.fix
    assert "consolidateAfter: 1m\n" not in finding.fix  # not the YAML it has already

    for np in _items(doc, "NodePool"):
        np["spec"]["disruption"] = {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "Never",
        }
    (finding,) = doctor_report(doc).by_check("gpu-node-idle")
    assert finding.fix.startswith("# let Karpenter remove empty nodes: in NodePool gpu spec.disruption:")


def _nfd_never_ran(doc: dict[str, Any], taint_value: str) -> dict[str, Any]:
    """helm-gfd with the GPU nodes tainted nvidia.com/gpu=<taint_value>: where NFD's worker does not run, no
    NFD or GFD label, so the chart's plugin and GFD never start and no GPU is advertised."""
    items = []
    for i in doc["items"]:
        on_gpu = i["kind"] == "Pod" and i["spec"].get("nodeName") in (GPU_A, GPU_B)
        if i["kind"] == "Node" and i["metadata"]["name"] in (GPU_A, GPU_B):
            i["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": taint_value, "effect": "NoSchedule"}]
            labels = i["metadata"]["labels"]
            for key in [k for k in labels if k.startswith(("nvidia.com/", "feature.node.kubernetes.io/"))]:
                del labels[key]
            for part in ("allocatable", "capacity"):
                del i["status"][part]["nvidia.com/gpu"]
        if on_gpu and i["metadata"]["name"].startswith(("nvdp-", "kgpu-exporter", "llm-", "embed-")):
            continue
        items.append(i)
    doc["items"] = items
    return doc


def test_plugin_not_selected_because_nfd_does_not_tolerate_the_taint_names_nfds_toleration():
    doc = _nfd_never_ran(load("helm-gfd"), "true")
    found = doctor_report(doc).by_check("device-plugin-node-selector")
    assert {f.object for f in found} == {f"Node/{GPU_A}", f"Node/{GPU_B}"}
    for f in found:
        assert (
            "NFD's worker DaemonSet/nvidia-device-plugin/nvdp-node-feature-discovery-worker does not tolerate its "
            "taint nvidia.com/gpu=true:NoSchedule" in f.fix
        )
        assert "in the values of Helm release nvdp (nfd.worker.tolerations" in f.fix
        assert "helm upgrade nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin" in f.fix
        assert "- key: nvidia.com/gpu\n  operator: Equal\n  value: 'true'\n  effect: NoSchedule" in f.fix
        assert "widen" not in f.fix


def test_plugin_selecting_by_nfd_labels_without_nfd_says_so():
    doc = _nfd_never_ran(load("helm-gfd"), "present")
    doc["items"] = [i for i in doc["items"] if "node-feature-discovery" not in i["metadata"]["name"]]
    found = doctor_report(doc).by_check("device-plugin-node-selector")
    assert len(found) == 2
    for f in found:
        assert "no NFD runs in the cluster" in f.fix
        node = f.object.removeprefix("Node/")
        assert f"kubectl label node {node} nvidia.com/gpu.present=true" in f.fix

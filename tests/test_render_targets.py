"""Per-target semantics: what each renderer emits for the seeds' clusters."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kgpu.errors import InputError
from kgpu.model.profile import builtin_profile
from kgpu.render import karpenter, rbac, workloads
from kgpu.render.sort import apply_order
from kgpu.render.stack import applicable_targets, render_stack
from render_helpers import changed, named, of_kind, pod_spec, pool_data


def _req(nodepool: dict[str, Any], key: str) -> dict[str, Any]:
    for r in nodepool["spec"]["template"]["spec"]["requirements"]:
        if r["key"] == key:
            return r  # type: ignore[no-any-return]
    raise KeyError(key)


def test_karpenter_nodepool_for_seed_000() -> None:
    docs = render_stack(builtin_profile("eks-karpenter"), ["karpenter"])["karpenter"]
    gpu = named(docs, "NodePool", "gpu")
    spec = gpu["spec"]
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "gpu",
    }
    assert _req(gpu, "karpenter.k8s.aws/instance-family")["values"] == ["g4dn", "g5", "g6", "p3"]
    assert _req(gpu, "karpenter.sh/capacity-type")["values"] == ["spot", "on-demand"]
    assert spec["template"]["metadata"]["labels"] == {"node-type": "gpu", "nvidia.com/gpu": "true"}
    assert spec["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30s",
        "budgets": [{"nodes": "10%"}],
    }
    assert spec["limits"]["nvidia.com/gpu"] == "32"
    assert spec["weight"] == 50
    general = named(docs, "NodePool", "general")
    assert _req(general, "karpenter.k8s.aws/instance-generation") == {
        "key": "karpenter.k8s.aws/instance-generation",
        "operator": "Gt",
        "values": ["4"],
    }
    nodeclass = named(docs, "EC2NodeClass", "gpu")["spec"]
    assert nodeclass["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert nodeclass["role"] == "KarpenterNodeRole-gpu-cluster"
    assert nodeclass["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "gpu-cluster"}}]
    assert nodeclass["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "200Gi"
    # apply order: the node class before the pool that names it
    assert [d["kind"] for d in docs] == ["EC2NodeClass", "EC2NodeClass", "NodePool", "NodePool"]


def test_karpenter_gpu_memory_is_mib_and_ranges_are_exclusive() -> None:
    def gpu_req(data: dict[str, Any]) -> None:
        pool_data(data, "gpu")["requirements"] = {
            "gpuMemoryGiB": {"min": 24},
            "gpuCount": {"min": 1, "max": 4},
        }

    pool = changed("eks-karpenter", gpu_req).pool("gpu")
    reqs = {r["key"]: r for r in karpenter.requirements(changed("eks-karpenter", gpu_req), pool)}
    assert reqs["karpenter.k8s.aws/instance-gpu-memory"] == {
        "key": "karpenter.k8s.aws/instance-gpu-memory",
        "operator": "Gt",
        "values": ["24575"],
    }
    counts = [
        r
        for r in karpenter.requirements(changed("eks-karpenter", gpu_req), pool)
        if r["key"].endswith("gpu-count")
    ]
    assert [(r["operator"], r["values"]) for r in counts] == [("Gt", ["0"]), ("Lt", ["5"])]


def test_bottlerocket_nodeclass_uses_alias_and_data_volume() -> None:
    profile = changed("eks-karpenter", lambda d: pool_data(d, "gpu").update(amiFamily="BottlerocketNvidia"))
    nodeclass = named(render_stack(profile, ["karpenter"])["karpenter"], "EC2NodeClass", "gpu")["spec"]
    assert nodeclass["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert [b["deviceName"] for b in nodeclass["blockDeviceMappings"]] == ["/dev/xvda", "/dev/xvdb"]
    assert nodeclass["blockDeviceMappings"][1]["ebs"]["volumeSize"] == "200Gi"


def test_eksctl_per_zone_gpu_groups_for_seed_001() -> None:
    config = render_stack(builtin_profile("eks-eksctl"), ["eksctl"])["eksctl"][0]
    assert config["metadata"] == {
        "name": "gaia-kube",
        "region": "us-west-2",
        "version": "1.33",
        "tags": {"kgpu.dev/profile": "eks-eksctl"},
    }
    groups = {g["name"]: g for g in config["nodeGroups"]}
    assert list(groups) == ["spot-ng", "gpu-spot-ng-a", "gpu-spot-ng-b", "gpu-spot-ng-c"]
    general = groups["spot-ng"]
    assert (general["minSize"], general["maxSize"]) == (2, 20)
    assert general["instancesDistribution"]["onDemandPercentageAboveBaseCapacity"] == 0
    gpu_b = groups["gpu-spot-ng-b"]
    assert (gpu_b["minSize"], gpu_b["maxSize"], gpu_b["availabilityZones"]) == (0, 10, ["us-west-2b"])
    assert gpu_b["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "true"}]
    assert gpu_b["tags"]["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert gpu_b["tags"]["k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu"] == "true"
    assert gpu_b["tags"]["k8s.io/cluster-autoscaler/gaia-kube"] == "owned"
    assert gpu_b["iam"]["withAddonPolicies"]["autoScaler"] is True


def test_cluster_autoscaler_values() -> None:
    values = render_stack(builtin_profile("eks-eksctl"), ["cluster-autoscaler"])["cluster-autoscaler"][0]
    assert values["autoDiscovery"] == {"clusterName": "gaia-kube"}
    assert values["awsRegion"] == "us-west-2"
    assert values["extraArgs"]["balance-similar-node-groups"] is True
    assert values["extraArgs"]["skip-nodes-with-system-pods"] is False
    assert values["extraArgs"]["expander"] == "least-waste"


def test_managed_groups_propagate_asg_tags_for_seed_004() -> None:
    config = render_stack(builtin_profile("kuberay"), ["eksctl"])["eksctl"][0]
    gpu = config["managedNodeGroups"][1]
    assert gpu["name"] == "gpu-node-group"
    assert gpu["instanceTypes"] == ["g5.xlarge"]
    assert gpu["amiFamily"] == "Bottlerocket"
    assert gpu["propagateASGTags"] is True
    assert gpu["taints"] == [{"key": "ray.io/node-type", "effect": "NoSchedule", "value": "worker"}]


def test_kuberay_raycluster_for_seed_004() -> None:
    cluster = render_stack(builtin_profile("kuberay"), ["kuberay"])["kuberay"][0]
    spec = cluster["spec"]
    assert cluster["apiVersion"] == "ray.io/v1"
    assert spec["headGroupSpec"]["rayStartParams"] == {"num-cpus": "0", "dashboard-host": "0.0.0.0"}
    assert spec["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"ray.io/node-type": "head"}
    (worker,) = spec["workerGroupSpecs"]
    assert (worker["minReplicas"], worker["maxReplicas"], worker["replicas"]) == (0, 1, 1)
    assert worker["rayStartParams"] == {"num-gpus": "1"}
    wspec = worker["template"]["spec"]
    assert wspec["tolerations"] == [
        {"key": "ray.io/node-type", "operator": "Equal", "value": "worker", "effect": "NoSchedule"}
    ]
    assert wspec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert wspec["containers"][0]["image"] == "rayproject/ray:2.46.0-gpu"
    assert "enableInTreeAutoscaling" not in spec
    auto = changed("kuberay", lambda d: d["kuberay"].update(enableInTreeAutoscaling=True))
    assert render_stack(auto, ["kuberay"])["kuberay"][0]["spec"]["enableInTreeAutoscaling"] is True


def test_tke_workloads_carry_annotations_and_image_cache() -> None:
    docs = render_stack(builtin_profile("tke-supernode"), ["workloads"])["workloads"]
    kinds = [d["kind"] for d in docs]
    assert kinds.index("ImageCache") < min(
        kinds.index(k) for k in ("Deployment", "Job", "Pod")
    )  # cache first
    job = named(docs, "Job", "gpu-train-supernode")
    ann = job["spec"]["template"]["metadata"]["annotations"]
    assert ann["eks.tke.cloud.tencent.com/gpu-type"] == "T4,V100"
    assert (
        ann["eks.tke.cloud.tencent.com/gpu-count"],
        ann["eks.tke.cloud.tencent.com/cpu"],
        ann["eks.tke.cloud.tencent.com/mem"],
    ) == ("1", "8", "32Gi")
    assert ann["eks.tke.cloud.tencent.com/use-image-cache"] == "auto"
    disk = json.loads(ann["eks.tke.cloud.tencent.com/pod-resource"])["disk"]["size"]
    cache = named(docs, "ImageCache", "gpu-images-supernode")
    assert cache["spec"]["imageCacheSize"] == disk == workloads.tke_disk_size_gib(16.0)
    assert pod_spec(job)["nodeSelector"] == {"type": "virtual-kubelet"}
    assert pod_spec(job)["tolerations"] == [
        {"key": "eks.tke.cloud.tencent.com/eklet", "operator": "Exists", "effect": "NoSchedule"}
    ]
    infer = named(docs, "Deployment", "gpu-infer-supernode")
    infer_ann = infer["spec"]["template"]["metadata"]["annotations"]
    assert "eks.tke.cloud.tencent.com/cpu" not in infer_ann  # requests/limits mode: TKE rounds up


@pytest.mark.parametrize(
    ("image", "disk"),
    [(0.5, 50), (1.99, 50), (2, 100), (4.9, 100), (5, 200), (10, 200), (10.5, 300), (200, 350)],
)
def test_tke_disk_size_follows_the_guides_table(image: float, disk: int) -> None:
    """Seed 003's table: <2 GB -> 50, 2-5 -> 100, 5-10 -> 200, >10 -> 300+ (the formula when larger)."""
    assert workloads.tke_disk_size_gib(image) == disk


def test_workloads_have_probes_limits_and_verification_pods() -> None:
    docs = render_stack(builtin_profile("eks-karpenter"), ["workloads"])["workloads"]
    container = pod_spec(named(docs, "Deployment", "gpu-infer-gpu"))["containers"][0]
    assert {"readinessProbe", "livenessProbe", "startupProbe"} <= set(container)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    by_request = pod_spec(named(docs, "Pod", "gpu-verify-gpu"))
    assert "nodeSelector" not in by_request
    assert by_request["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    by_selector = pod_spec(named(docs, "Pod", "gpu-verify-selector-gpu"))
    assert by_selector["nodeSelector"] == {"node-type": "gpu", "nvidia.com/gpu": "true"}
    assert "resources" not in by_selector["containers"][0]
    # Service before Deployment, pods last
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Service", "Deployment", "Job", "Pod", "Pod"]


def test_device_plugin_time_slicing_config() -> None:
    profile = changed(
        "eks-karpenter",
        lambda d: d.update(devicePlugin={"strategy": "time-slicing", "timeSlicingReplicas": 4}),
    )
    docs = render_stack(profile, ["device-plugin"])["device-plugin"]
    assert [d["kind"] for d in docs] == ["ConfigMap", "DaemonSet"]
    assert "replicas: 4" in docs[0]["data"]["config.yaml"]
    env = pod_spec(docs[1])["containers"][0]["env"]
    assert env == [{"name": "CONFIG_FILE", "value": "/etc/nvidia-device-plugin/config.yaml"}]


def test_rbac_is_read_only_and_exact() -> None:
    docs = rbac.render(builtin_profile("eks-karpenter"))
    role = named(docs, "ClusterRole", "kgpu-doctor")
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {
        ("", "nodes"), ("", "pods"), ("", "events"), ("apps", "daemonsets"),
        ("karpenter.sh", "nodepools"), ("karpenter.sh", "nodeclaims"), ("karpenter.k8s.aws", "ec2nodeclasses"),
        ("scheduling.k8s.io", "priorityclasses"), ("ray.io", "rayclusters"), ("karpenter.sh", "nodeoverlays"),
        ("resource.k8s.io", "deviceclasses"), ("resource.k8s.io", "resourceclaims"),
        ("resource.k8s.io", "resourceclaimtemplates"), ("resource.k8s.io", "resourceslices"),
        ("eks.cloud.tencent.com", "imagecaches"), ("", "configmaps"),
        ("", "persistentvolumeclaims"), ("", "persistentvolumes"), ("storage.k8s.io", "storageclasses"),
        ("", "namespaces"), ("kueue.x-k8s.io", "resourceflavors"), ("kueue.x-k8s.io", "clusterqueues"),
        ("kueue.x-k8s.io", "cohorts"), ("kueue.x-k8s.io", "localqueues"),
        ("kueue.x-k8s.io", "workloadpriorityclasses"), ("kueue.x-k8s.io", "workloads"),
    }  # fmt: skip
    verbs = {r: rule["verbs"] for rule in role["rules"] for r in rule["resources"]}
    assert verbs.pop("configmaps") == ["get"]  # by name only: ConfigMaps are never listed
    assert all(v == ["get", "list", "watch"] for v in verbs.values())
    assert "secrets" not in verbs
    run = named(docs, "ClusterRole", "kgpu-run")
    assert {(r, v) for rule in run["rules"] for r in rule["resources"] for v in rule["verbs"]} == {
        ("pods", "create"), ("pods", "get"), ("pods", "delete"), ("pods/log", "get"),
    }  # fmt: skip


def test_onprem_runtime_files_for_seed_002() -> None:
    from kgpu.render import onprem

    files = onprem.host_files(builtin_profile("onprem"))
    toml = files["/etc/containerd/conf.d/99-nvidia.toml"]
    assert 'default_runtime_name = "nvidia"' in toml
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in toml
    assert json.loads(files["/etc/docker/daemon.json"])["default-runtime"] == "nvidia"
    assert "kubectl describe node k8s-node05" in files["verify-gpu-runtime.sh"]
    configmap = render_stack(builtin_profile("onprem"), ["onprem"])["onprem"][0]
    assert configmap["data"]["99-nvidia.toml"] == toml


def test_apply_order_puts_namespaces_first_and_pods_last() -> None:
    docs = [
        {"kind": k}
        for k in (
            "Pod",
            "Deployment",
            "NodePool",
            "ClusterRole",
            "Namespace",
            "EC2NodeClass",
            "ServiceAccount",
        )
    ]
    assert [d["kind"] for d in apply_order(docs)] == [
        "Namespace", "ServiceAccount", "ClusterRole", "EC2NodeClass", "NodePool", "Deployment", "Pod",
    ]  # fmt: skip


def test_targets_per_template() -> None:
    assert "karpenter" in applicable_targets(builtin_profile("eks-karpenter"))
    assert "eksctl" not in applicable_targets(builtin_profile("eks-karpenter"))
    assert "onprem" in applicable_targets(builtin_profile("onprem"))
    assert "kuberay" in applicable_targets(builtin_profile("kuberay"))
    with pytest.raises(InputError, match="does not apply"):
        render_stack(builtin_profile("eks-karpenter"), ["eksctl"])
    with pytest.raises(InputError, match="unknown target"):
        render_stack(builtin_profile("eks-karpenter"), ["karpentr"])


def test_no_device_plugin_for_tke_super_nodes() -> None:
    stack = render_stack(builtin_profile("tke-supernode"))
    assert stack["device-plugin"] == []
    assert of_kind(stack["workloads"], "DaemonSet") == []

"""Rendering shared GPUs: the plugin ConfigMap with one key per shared pool and the config-manager that picks
it by node label, the MIG manager's label, Karpenter NodeOverlays with the feature gate, cluster-autoscaler
resources tags; all validated against the packaged upstream schemas."""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import parse_profile
from kgpu.model.safeyaml import load_document
from kgpu.render import addons, deviceplugin, eksctl, karpenter
from kgpu.render.validate import CRDS, validate_document
from test_sharing import karpenter_pool, profile_dict, time_slicing

MIG = {"mig": {"strategy": "mixed", "config": "all-balanced"}}


def shared_profile() -> Any:
    return parse_profile(
        profile_dict(
            karpenter_pool("infer", ["g5.xlarge", "g5.12xlarge"], time_slicing(4, renameByDefault=True)),
            karpenter_pool("mig", ["p5.48xlarge"], MIG),
        )
    )


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def test_plugin_configmap_has_a_key_per_pool_and_the_label_selects_it() -> None:
    prof = shared_profile()
    docs = deviceplugin.render(prof)
    (cm,) = by_kind(docs, "ConfigMap")
    assert sorted(cm["data"]) == ["default", "infer", "mig"]
    infer = load_document(cm["data"]["infer"], "infer")
    assert infer["sharing"]["timeSlicing"] == {
        "renameByDefault": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
    }
    assert load_document(cm["data"]["mig"], "mig")["flags"]["migStrategy"] == "mixed"
    (ds,) = by_kind(docs, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["shareProcessNamespace"] is True
    sidecar = next(c for c in spec["containers"] if c["name"] == "nvidia-device-plugin-sidecar")
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["NODE_LABEL"] == "nvidia.com/device-plugin.config" and env["DEFAULT_CONFIG"] == "default"
    assert [c["name"] for c in spec["initContainers"]] == ["nvidia-device-plugin-init"]
    assert by_kind(docs, "ClusterRole")[0]["rules"][0]["resources"] == ["nodes"]
    # the NodePool template carries the label that selects the key, and the MIG manager's
    pools = {d["metadata"]["name"]: d for d in by_kind(karpenter.render(prof), "NodePool")}
    assert pools["infer"]["spec"]["template"]["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "infer"
    mig_labels = pools["mig"]["spec"]["template"]["metadata"]["labels"]
    assert mig_labels["nvidia.com/mig.config"] == "all-balanced"
    (errors, _) = validate_document(ds)
    assert errors == []


def test_nodeoverlays_per_capacity_and_feature_gate() -> None:
    prof = shared_profile()
    overlays = by_kind(karpenter.render(prof), "NodeOverlay")
    caps = {o["metadata"]["name"]: (o["spec"]["capacity"], o["spec"]["requirements"][1]["values"]) for o in overlays}
    # g5.xlarge: 1 GPU x 4; g5.12xlarge: 4 GPUs x 4, renamed: the physical resource is 0 to Karpenter
    assert caps["infer-gpu-sharing-1"] == ({"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "16"}, ["g5.12xlarge"])
    assert caps["infer-gpu-sharing-2"] == ({"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "4"}, ["g5.xlarge"])
    assert caps["mig-gpu-sharing"][0] == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "16",
        "nvidia.com/mig-2g.20gb": "8",
        "nvidia.com/mig-3g.40gb": "8",
    }
    assert addons.karpenter_chart_values(prof)[0]["settings"]["featureGates"] == {"nodeOverlay": True}
    assert ("karpenter.sh/v1alpha1", "NodeOverlay") in CRDS
    for o in overlays:
        errors, skipped = validate_document(o)
        assert errors == [] and skipped is None


def test_overlay_off_renders_none_and_no_gate() -> None:
    sharing = {**time_slicing(4), "nodeOverlay": False}
    prof = parse_profile(profile_dict(karpenter_pool("infer", ["g5.xlarge"], sharing)))
    assert not by_kind(karpenter.render(prof), "NodeOverlay")
    assert "featureGates" not in addons.karpenter_chart_values(prof)[0]["settings"]


def test_bad_overlay_fails_the_schema() -> None:
    """The packaged CRD's rules: no cpu in capacity, not both price and priceAdjustment."""
    prof = shared_profile()
    overlay = by_kind(karpenter.render(prof), "NodeOverlay")[0]
    overlay["spec"]["capacity"]["cpu"] = "4"
    overlay["spec"]["price"] = "1.0"
    overlay["spec"]["priceAdjustment"] = "-10%"
    errors = " ".join(validate_document(overlay)[0])
    assert "invalid resource restricted" in errors and "price" in errors


def test_eksctl_shared_group_has_resources_tags() -> None:
    """8 GPUs (g5.48xlarge) x 10 replicas renamed: 80 nvidia.com/gpu.shared from zero, as the node advertises."""
    data = profile_dict(
        {
            "name": "infer",
            "kind": "nodegroup",
            "instanceTypes": ["g5.48xlarge"],
            "sharing": time_slicing(10, renameByDefault=True),
        },
        autoscaler="cluster-autoscaler",
    )
    prof = parse_profile(data)
    (cfg,) = eksctl.render(prof)
    (group,) = cfg["nodeGroups"]
    tags = eksctl.effective_asg_tags(group)
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu.shared"] == "80"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "0"
    assert tags["k8s.io/cluster-autoscaler/node-template/label/nvidia.com/device-plugin.config"] == "infer"
    errors, skipped = validate_document(cfg)
    assert errors == [] and skipped is None

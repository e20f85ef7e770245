"""Shared GPUs: the profile's sharing per pool, the device plugin's advertised capacity and GFD labels,
MIG tables, and what simulate / plan place on time-sliced, MPS and MIG nodes."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from builders import make_node, placement
from kgpu.catalog.mig import config_names, mig_layout, mig_profiles, profile_of_config
from kgpu.errors import InputError
from kgpu.model.load import parse_documents
from kgpu.model.profile import parse_profile
from kgpu.model.sharing import DeviceConfig, pool_config
from kgpu.sim.plan import plan
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import simulate

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def profile_dict(*pools: dict[str, Any], autoscaler: str = "karpenter") -> dict[str, Any]:
    return {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "shared"},
        "provider": "eks",
        "autoscaler": autoscaler,
        "pools": list(pools),
        "monitoring": {"enabled": False},
    }


def karpenter_pool(name: str, types: list[str], sharing: dict[str, Any] | None) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": name,
        "kind": "karpenter",
        "instanceTypes": types,
        "capacityTypes": ["on-demand"],
        "taints": [GPU_TAINT],
    }
    if sharing is not None:
        pool["sharing"] = sharing
    return pool


def time_slicing(replicas: int, **extra: Any) -> dict[str, Any]:
    return {"timeSlicing": {**extra, "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}


def gpu_pod(name: str, resource: str = "nvidia.com/gpu", count: int = 1) -> dict[str, Any]:
    """A vLLM-like inference pod asking ``count`` of ``resource`` (limits, as users write GPUs)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "infer"}},
        "spec": {
            "tolerations": [GPU_TOL],
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.6.0",
                    "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {resource: count}},
                }
            ],
        },
    }


def workloads(*docs: dict[str, Any]) -> Any:
    return parse_documents(list(docs), "w.yaml")


# --- the profile ------------------------------------------------------------------------------------------


def test_sharing_labels_select_the_pool_config() -> None:
    """A shared pool's nodes carry nvidia.com/device-plugin.config (its key) and nvidia.com/mig.config."""
    prof = parse_profile(
        profile_dict(
            karpenter_pool("infer", ["g5.xlarge"], time_slicing(4)),
            karpenter_pool("mig", ["p4d.24xlarge"], {"mig": {"strategy": "mixed", "config": "all-balanced"}}),
        )
    )
    assert prof.pools[0].labels["nvidia.com/device-plugin.config"] == "infer"
    assert prof.pools[1].labels == {"nvidia.com/device-plugin.config": "mig", "nvidia.com/mig.config": "all-balanced"}
    cfg = pool_config(prof.pools[0])
    assert cfg is not None and (cfg.strategy, dict(cfg.replicas), cfg.fail_gt_one) == (
        "time-slicing",
        {"nvidia.com/gpu": 4},
        False,
    )


def test_mps_fails_requests_greater_than_one_by_default() -> None:
    """MPS keeps the plugin's historical default (failRequestsGreaterThanOne true); time-slicing does not."""
    prof = parse_profile(
        profile_dict(karpenter_pool("mps", ["g5.xlarge"], {"mps": time_slicing(2)["timeSlicing"]}))
    )
    cfg = pool_config(prof.pools[0])
    assert cfg is not None and cfg.strategy == "mps" and cfg.fail_gt_one


@pytest.mark.parametrize(
    ("sharing", "where", "words"),
    [
        (time_slicing(1), "pools[0].sharing.timeSlicing.resources[0].replicas", "replicas >= 2"),
        ({**time_slicing(2), "mps": time_slicing(2)["timeSlicing"]}, "pools[0].sharing", "one sharing strategy"),
        ({"mig": {"strategy": "mixed", "config": "all-1g.10gbb"}}, "pools[0].sharing.mig.config", "all-1g.10gb"),
        ({"mig": {"strategy": "single", "config": "all-balanced"}}, "pools[0].sharing", "one profile per node"),
        ({"mig": {"strategy": "mixd", "config": "all-balanced"}}, "pools[0].sharing.mig.strategy", "single, mixed"),
        ({"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}},
         "pools[0].sharing", "mixed MIG strategy"),
    ],
)
def test_bad_sharing_is_an_input_error(sharing: dict[str, Any], where: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse_profile(profile_dict(karpenter_pool("p", ["g5.xlarge"], sharing)), source="kgpu.yaml")
    assert err.value.where.startswith(f"kgpu.yaml: {where}"), err.value.where
    assert words in err.value.message


def test_mig_profile_the_gpu_lacks_names_both() -> None:
    """all-1g.5gb is an A100-40GB profile: on p5 (H100) it is an error naming the profile, the GPU and the type."""
    prof = parse_profile(
        profile_dict(karpenter_pool("mig", ["p5.48xlarge"], {"mig": {"strategy": "mixed", "config": "all-1g.5gb"}}))
    )
    with pytest.raises(InputError) as err:
        provisioner_for(prof)
    assert err.value.where == "pools[0].sharing.mig.config"
    assert "1g.5gb" in err.value.message and "H100" in err.value.message and "p5.48xlarge" in err.value.message


def test_mig_on_a_gpu_without_mig_is_an_error() -> None:
    prof = parse_profile(
        profile_dict(karpenter_pool("mig", ["g5.xlarge"], {"mig": {"strategy": "single", "config": "all-1g.10gb"}}))
    )
    with pytest.raises(InputError, match="A10G has no MIG"):
        provisioner_for(prof)


# --- the device plugin's and GFD's rules -------------------------------------------------------------------


def test_readme_example_8_gpus_10_replicas_renamed() -> None:
    """The plugin README: 8 GPUs, 10 replicas, renameByDefault -> 80 nvidia.com/gpu.shared, no -SHARED product."""
    cfg = DeviceConfig(strategy="time-slicing", replicas={"nvidia.com/gpu": 10}, rename=True)
    assert cfg.advertised("A10G", 8) == {"nvidia.com/gpu.shared": 80}
    labels = cfg.gfd_labels("A10G", 8)
    assert labels["nvidia.com/gpu.replicas"] == "10"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A10G"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_not_renamed_product_gets_shared_suffix() -> None:
    cfg = DeviceConfig(strategy="mps", replicas={"nvidia.com/gpu": 4}, fail_gt_one=True)
    assert cfg.advertised("A10G", 1) == {"nvidia.com/gpu": 4}
    assert cfg.gfd_labels("A10G", 1)["nvidia.com/gpu.product"] == "NVIDIA-A10G-SHARED"
    assert cfg.unit_share("A10G", "nvidia.com/gpu") == Fraction(1, 4)


def test_mixed_mig_resources_and_products() -> None:
    """all-balanced on H100: 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb per GPU; products <model>-MIG-<profile>."""
    cfg = DeviceConfig(mig_strategy="mixed", mig_config="all-balanced")
    assert cfg.advertised("H100", 8) == {
        "nvidia.com/mig-1g.10gb": 16,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-3g.40gb": 8,
    }
    labels = cfg.gfd_labels("H100", 8)
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "16"
    assert cfg.unit_share("H100", "nvidia.com/mig-3g.40gb") == Fraction(4, 8)


def test_single_mig_is_nvidia_gpu_and_me_profiles_use_dots() -> None:
    single = DeviceConfig(mig_strategy="single", mig_config="all-1g.10gb")
    assert single.advertised("A100", 8) == {"nvidia.com/gpu": 32}  # 4 x 1g.10gb on the 40GB part
    assert single.advertised("A100-80GB", 8) == {"nvidia.com/gpu": 56}  # 7 on the 80GB part
    assert single.gfd_labels("A100", 8)["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.10gb"
    me = DeviceConfig(mig_strategy="mixed", mig_config="all-1g.10gb.me")
    assert me.advertised("H100", 1) == {"nvidia.com/mig-1g.10gb.me": 1}


def test_mig_with_time_slicing() -> None:
    cfg = DeviceConfig(
        strategy="time-slicing", replicas={"nvidia.com/mig-1g.10gb": 2}, mig_strategy="mixed", mig_config="all-1g.10gb"
    )
    assert cfg.advertised("H100", 1) == {"nvidia.com/mig-1g.10gb": 14}
    assert cfg.gfd_labels("H100", 1)["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"
    assert cfg.unit_share("H100", "nvidia.com/mig-1g.10gb") == Fraction(1, 16)


def test_mig_tables_agree_with_the_gpu_operator_configmap() -> None:
    """Counts the GPU Operator's default-mig-parted-config writes for each all-<profile> config."""
    assert mig_layout("all-1g.10gb", "H100") == {"1g.10gb": 7}
    assert mig_layout("all-1g.10gb", "A100") == {"1g.10gb": 4}
    assert mig_layout("all-1g.18gb", "H200") == {"1g.18gb": 7}
    assert mig_layout("all-1g.35gb", "H200") == {"1g.35gb": 4}
    assert mig_layout("all-1g.23gb", "B200") == {"1g.23gb": 7}
    assert mig_layout("all-balanced", "B200") == {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}
    assert mig_layout("all-disabled", "H100") == {}
    assert profile_of_config("all-1g.10gb.me") == "1g.10gb+me"
    assert {"all-disabled", "all-enabled", "all-balanced", "all-7g.80gb"} <= set(config_names())
    for gpu in ("A100", "A100-80GB", "H100", "H200", "B200"):
        profiles = mig_profiles(gpu)
        # every profile fits the GPU at its most instances: memory and compute slices
        for p in profiles.values():
            if "+me" not in p.name:
                assert p.max_count * p.memory_slices <= 8 and p.max_count * p.compute_slices <= 7, p
        # balanced fits too
        layout = mig_layout("all-balanced", gpu)
        assert sum(profiles[n].memory_slices * c for n, c in layout.items()) <= 8


# --- simulate and plan ----------------------------------------------------------------------------------


def test_time_sliced_pool_packs_four_pods_per_gpu() -> None:
    """replicas 4 on g5.xlarge (1 A10G): 6 single-GPU pods need 2 nodes, not 6, with the NodeOverlay."""
    prof = parse_profile(profile_dict(karpenter_pool("infer", ["g5.xlarge"], time_slicing(4))))
    result = plan(prof, workloads(*(gpu_pod(f"infer-{i}") for i in range(6)))).simulation
    assert {p.phase for p in result.placements} == {"Provisioned"}
    assert len(result.new_nodes) == 2
    node = next(st.node for st in result.nodes if st.node.name == "infer-1")
    assert node.allocatable["nvidia.com/gpu"] == 4
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A10G-SHARED"
    assert node.labels["nvidia.com/gpu.replicas"] == "4"


def test_without_overlay_karpenter_launches_one_node_per_gpu_and_says_so() -> None:
    """Karpenter counts the physical GPU: 6 nodes, and a warning with the fix."""
    sharing = {**time_slicing(4), "nodeOverlay": False}
    prof = parse_profile(profile_dict(karpenter_pool("infer", ["g5.xlarge"], sharing)))
    result = plan(prof, workloads(*(gpu_pod(f"infer-{i}") for i in range(6))))
    assert len(result.simulation.new_nodes) == 6
    assert any("NodeOverlay" in w and "pool infer" in w for w in result.warnings)


def test_renamed_resource_needs_the_overlay() -> None:
    """nvidia.com/gpu.shared exists on no instance type: Karpenter places it only through the overlay."""
    pod = gpu_pod("p", "nvidia.com/gpu.shared")
    with_overlay = parse_profile(
        profile_dict(karpenter_pool("infer", ["g5.xlarge"], time_slicing(4, renameByDefault=True)))
    )
    assert placement(plan(with_overlay, workloads(pod)).simulation, "p").phase == "Provisioned"
    sharing = {**time_slicing(4, renameByDefault=True), "nodeOverlay": False}
    without = parse_profile(profile_dict(karpenter_pool("infer", ["g5.xlarge"], sharing)))
    got = placement(plan(without, workloads(pod)).simulation, "p")
    assert got.phase == "Unschedulable"
    assert "nvidia.com/gpu.shared" in (got.reason or "")


def test_mig_pod_lands_on_a_mig_node() -> None:
    """A pod asking nvidia.com/mig-1g.10gb lands on the mixed-MIG pool, not the time-sliced one."""
    prof = parse_profile(
        profile_dict(
            karpenter_pool("infer", ["g5.xlarge"], time_slicing(4)),
            karpenter_pool("mig", ["p4de.24xlarge"], {"mig": {"strategy": "mixed", "config": "all-1g.10gb"}}),
        )
    )
    result = plan(prof, workloads(gpu_pod("slice", "nvidia.com/mig-1g.10gb"))).simulation
    p = placement(result, "slice")
    assert p.phase == "Provisioned" and p.new_node.pool == "mig"
    node = next(st.node for st in result.nodes if st.node.name == p.node)
    assert node.allocatable["nvidia.com/mig-1g.10gb"] == 56
    assert node.allocatable.get("nvidia.com/gpu", 0) == 0
    assert node.labels["nvidia.com/mig.config.state"] == "success"


def test_more_than_one_shared_gpu_fails_admission_with_a_warning() -> None:
    """MPS (failRequestsGreaterThanOne by default): a pod asking 2 binds, and carries the admission warning."""
    prof = parse_profile(
        profile_dict(karpenter_pool("mps", ["g5.xlarge"], {"mps": time_slicing(4)["timeSlicing"]}))
    )
    result = plan(prof, workloads(gpu_pod("two", count=2), gpu_pod("one")))
    two = placement(result.simulation, "two")
    assert two.phase == "Provisioned"
    assert [w.code for w in two.warnings] == ["shared-gpu-admission"]
    assert "UnexpectedAdmissionError" in two.warnings[0].message
    assert not placement(result.simulation, "one").warnings
    assert any("default/two" in w for w in result.simulation.warnings)


def test_time_slicing_allows_more_than_one_unless_told() -> None:
    prof = parse_profile(profile_dict(karpenter_pool("ts", ["g5.xlarge"], time_slicing(4))))
    assert not placement(plan(prof, workloads(gpu_pod("two", count=2))).simulation, "two").warnings
    strict = parse_profile(
        profile_dict(karpenter_pool("ts", ["g5.xlarge"], time_slicing(4, failRequestsGreaterThanOne=True)))
    )
    warned = placement(plan(strict, workloads(gpu_pod("two", count=2))).simulation, "two")
    assert [w.code for w in warned.warnings] == ["shared-gpu-admission"]


def test_existing_node_with_mig_config_pending_is_placed_by_allocatable_with_a_warning() -> None:
    """nvidia.com/mig.config.state: pending: kube-scheduler still places by the node's allocatable (it reads no
    label); the kubelet refuses the pod while the MIG manager has the plugin paused, which the warning says."""
    labels = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "pending"}
    cluster = workloads()
    cluster.nodes.append(make_node("gpu-1", gpus=8, labels=labels))
    result = simulate(cluster, workloads(gpu_pod("p")))
    p = placement(result, "p")
    assert p.phase == "Scheduled" and p.node == "gpu-1"
    assert [w.code for w in p.warnings] == ["mig-repartition"]
    assert "all-1g.10gb is pending" in p.warnings[0].message
    assert any(line.startswith("default/p on gpu-1: node gpu-1's MIG config") for line in result.warnings)
    ready = copy.deepcopy(labels) | {"nvidia.com/mig.config.state": "success"}
    cluster = workloads()
    cluster.nodes.append(make_node("gpu-1", gpus=8, labels=ready))
    done = placement(simulate(cluster, workloads(gpu_pod("p"))), "p")
    assert done.node == "gpu-1" and done.warnings == ()


def test_existing_mps_node_refuses_two_replicas_and_hints_name_what_nodes_offer() -> None:
    """simulate --cluster, no profile: MPS's default failRequestsGreaterThanOne read from GFD's labels; a MIG
    profile of another GPU's memory gets the same-slice profile the nodes offer."""
    mps = {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4"}
    cluster = workloads()
    cluster.nodes.append(make_node("gpu-1", gpus=16, labels=mps))
    result = simulate(cluster, workloads(gpu_pod("two", count=2), gpu_pod("one")))
    assert [w.code for w in placement(result, "two").warnings] == ["shared-gpu-admission"]
    assert "maximum request size for shared resources is 1" in placement(result, "two").warnings[0].message
    assert placement(result, "one").warnings == ()
    mixed = workloads()
    node = make_node("a100-80", labels={"nvidia.com/mig.strategy": "mixed"})
    mixed.nodes.append(dataclasses.replace(node, allocatable={**node.allocatable, "nvidia.com/mig-2g.20gb": 24}))
    result = simulate(mixed, workloads(gpu_pod("p", resource="nvidia.com/mig-2g.10gb")))
    assert placement(result, "p").phase == "Unschedulable"
    assert any("asks nvidia.com/mig-2g.10gb, which no node offers (they offer nvidia.com/mig-2g.20gb): did you mean "
               "nvidia.com/mig-2g.20gb?" in w for w in result.warnings), result.warnings


def test_static_node_advertises_shared_capacity() -> None:
    """On-prem: a static node of 2 A100s with all-1g.10gb (single) advertises 8 nvidia.com/gpu."""
    prof = parse_profile(
        {
            "apiVersion": "kgpu.dev/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "onprem"},
            "provider": "generic",
            "autoscaler": "none",
            "monitoring": {"enabled": False},
            "pools": [
                {
                    "name": "lab",
                    "kind": "static",
                    "nodes": [{"name": "dgx-1", "cpu": "64", "memory": "512Gi", "gpus": 2, "gpuName": "A100"}],
                    "sharing": {"mig": {"strategy": "single", "config": "all-1g.10gb"}},
                }
            ],
        }
    )
    result = plan(prof, workloads(*(gpu_pod(f"p{i}") for i in range(9)))).simulation
    assert sum(1 for p in result.placements if p.phase == "Scheduled") == 8
    assert sum(1 for p in result.placements if p.phase == "Unschedulable") == 1


def test_renamed_pool_and_a_pod_asking_the_old_name() -> None:
    """renameByDefault: nvidia.com/gpu is gone from the node; the pod stays pending and a warning says why."""
    prof = parse_profile(
        profile_dict(karpenter_pool("infer", ["g5.xlarge"], time_slicing(4, renameByDefault=True)))
    )
    result = plan(prof, workloads(gpu_pod("old")))
    assert placement(result.simulation, "old").phase == "Unschedulable"
    assert any("nvidia.com/gpu.shared" in w and "renameByDefault" in w for w in result.warnings)


def test_mig_profile_typo_is_named() -> None:
    prof = parse_profile(
        profile_dict(karpenter_pool("mig", ["p4d.24xlarge"], {"mig": {"strategy": "mixed", "config": "all-1g.5gb"}}))
    )
    result = plan(prof, workloads(gpu_pod("typo", "nvidia.com/mig-1g.5gbb")))
    assert placement(result.simulation, "typo").phase == "Unschedulable"
    assert any("did you mean nvidia.com/mig-1g.5gb?" in w for w in result.warnings)


def test_cluster_autoscaler_scales_a_shared_group_from_zero_by_its_resources_tags() -> None:
    """A renamed time-sliced node group at size 0: the node-template resources tags say 4 nvidia.com/gpu.shared
    per g5.xlarge, so 8 pods asking one each scale it to 2 nodes."""
    data = profile_dict(
        {
            "name": "infer",
            "kind": "nodegroup",
            "instanceTypes": ["g5.xlarge"],
            "taints": [GPU_TAINT],
            "maxSize": 10,
            "sharing": time_slicing(4, renameByDefault=True),
        },
        autoscaler="cluster-autoscaler",
    )
    result = plan(parse_profile(data), workloads(*(gpu_pod(f"p{i}", "nvidia.com/gpu.shared") for i in range(8))))
    assert {p.phase for p in result.simulation.placements} == {"Provisioned"}
    assert len(result.simulation.new_nodes) == 2

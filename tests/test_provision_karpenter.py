"""Karpenter NodePools: pool compatibility, cheapest type, spot first, bin-packing, weights, limits."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from builders import node_dict
from builders_catalog import make_instance_type
from kgpu.catalog import Catalog, InstanceType, RegionPricing
from kgpu.errors import InputError
from kgpu.model.inputs import Objects
from kgpu.model.load import parse_documents
from kgpu.model.objects import DaemonSet, HostPort, Pod, PodSpecInfo, Toleration, resources
from kgpu.model.profile import Profile, parse_profile
from kgpu.sim.provisioners.karpenter.solve import Karpenter
from kgpu.sim.provisioners.pools import Context, karpenter_order
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.scheduler.scheduler import Scheduler
from kgpu.sim.simulate import PROVISIONED, UNSCHEDULABLE, SimulationResult, simulate

GIB = 1024**3
ZONES = ("us-west-2a", "us-west-2b")
GPU_TOL = (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)


def catalog(*rows: tuple[InstanceType, float, float | None]) -> Catalog:
    """Types with (on-demand, spot) prices in us-west-2, two zones."""
    types = {t.name: t for t, _, _ in rows}
    pricing = {
        (t.name, "us-west-2"): RegionPricing(
            t.name, "us-west-2", od, spot, spot, ZONES, ("usw2-az1", "usw2-az2")
        )
        for t, od, spot in rows
    }
    return Catalog(types, pricing, "us-west-2")


CAT = catalog(
    (make_instance_type("m5.large", vcpus=2, memory_mib=8192), 0.096, 0.04),
    (make_instance_type("m5.xlarge", vcpus=4, memory_mib=16384), 0.192, 0.08),
    (make_instance_type("m5.4xlarge", vcpus=16, memory_mib=65536), 0.768, 0.32),
    (make_instance_type("g5.xlarge", vcpus=4, memory_mib=16384, gpus=1, gpu_name="a10g"), 1.006, 0.36),
    (make_instance_type("g5.12xlarge", vcpus=48, memory_mib=196608, gpus=4, gpu_name="a10g"), 5.672, 2.2),
    (make_instance_type("g4dn.xlarge", vcpus=4, memory_mib=16384, gpus=1, gpu_name="t4"), 0.526, None),
)


def profile(*pools: dict[str, Any]) -> Profile:
    return parse_profile(
        {
            "metadata": {"name": "t"},
            "provider": "eks",
            "autoscaler": "karpenter",
            "cluster": {"zones": list(ZONES)},
            "monitoring": {"enabled": False},
            "pools": list(pools),
        }
    )


GENERAL = {
    "name": "general",
    "kind": "karpenter",
    "requirements": {"categories": ["m"]},
    "capacityTypes": ["spot", "on-demand"],
    "weight": 10,
}
GPU_POOL = {
    "name": "gpu",
    "kind": "karpenter",
    "requirements": {"families": ["g5", "g4dn"]},
    "capacityTypes": ["spot", "on-demand"],
    "labels": {"node-type": "gpu"},
    "weight": 50,
    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
}


def make_pod(
    name: str,
    cpu: int = 500,
    mem_gib: float = 1,
    gpus: int = 0,
    selector: dict[str, str] | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> Pod:
    req = {"cpu": cpu, "memory": int(mem_gib * GIB), "nvidia.com/gpu": gpus}
    spec = PodSpecInfo(
        resources(req),
        cpu,
        int(mem_gib * GIB),
        tuple(sorted((selector or {}).items())),
        tolerations=tolerations,
    )
    return Pod("default", name, spec)


def sim(
    prof: Profile, *pods: Pod, cat: Catalog = CAT, daemonsets: tuple[DaemonSet, ...] = ()
) -> SimulationResult:
    work = Objects()
    work.pods.extend(pods)
    return simulate(Objects(), work, provisioner=provisioner_for(prof, cat, daemonsets=daemonsets))


def placed(result: SimulationResult, name: str) -> dict[str, Any]:
    return next(p.as_dict() for p in result.placements if p.pod.name == name)


def test_cheapest_type_that_fits_spot_first() -> None:
    """A 3-core pod needs m5.4xlarge? No: m5.xlarge (4 vCPU) is the cheapest that fits, bought spot."""
    result = sim(profile(GENERAL), make_pod("a", cpu=3000, mem_gib=4))
    p = placed(result, "a")
    assert p["phase"] == PROVISIONED
    assert (p["instance_type"], p["capacity_type"]) == ("m5.xlarge", "spot")
    assert result.summary()["hourly_cost"] == 0.08


def test_on_demand_when_only_on_demand_allowed() -> None:
    pool = {**GENERAL, "capacityTypes": ["on-demand"]}
    p = placed(sim(profile(pool), make_pod("a")), "a")
    assert (p["instance_type"], p["capacity_type"]) == ("m5.large", "on-demand")


def test_pods_are_bin_packed_onto_one_node() -> None:
    """Six half-core pods share new nodes instead of one node each."""
    result = sim(profile(GENERAL), *(make_pod(f"p-{i}", cpu=500, mem_gib=0.5) for i in range(6)))
    assert all(p.phase == PROVISIONED for p in result.placements)
    assert len(result.new_nodes) < 6
    assert sum(len(n.pods) for n in result.new_nodes) == 6


def test_untolerated_taint_is_explained_in_karpenter_words() -> None:
    """A GPU pod without the toleration: kube-scheduler's message plus Karpenter's per-pool reasons."""
    result = sim(profile(GPU_POOL), make_pod("g", gpus=1))
    p = placed(result, "g")
    assert p["phase"] == UNSCHEDULABLE
    assert p["reason"].startswith("no nodes available to schedule pods; karpenter: ")
    assert 'incompatible with nodepool "gpu"' in p["reason"]
    assert "did not tolerate nvidia.com/gpu=true:NoSchedule" in p["reason"]


def test_unknown_label_has_no_known_values() -> None:
    pod = make_pod("g", gpus=1, selector={"nvidia.com/gpu": "true"}, tolerations=GPU_TOL)
    reason = placed(sim(profile(GPU_POOL), pod), "g")["reason"]
    assert 'incompatible requirements, label "nvidia.com/gpu" does not have known values' in reason


def test_gpu_pod_goes_to_weighted_gpu_pool_and_cpu_pod_to_general() -> None:
    gpu = make_pod("g", gpus=1, selector={"node-type": "gpu"}, tolerations=GPU_TOL)
    result = sim(profile(GENERAL, GPU_POOL), gpu, make_pod("c"))
    assert placed(result, "g")["pool"] == "gpu"
    assert placed(result, "g")["instance_type"] == "g5.xlarge"  # spot 0.36 beats on-demand-only g4dn
    assert placed(result, "c")["pool"] == "general"


def test_selector_on_instance_gpu_name_narrows_types() -> None:
    pod = make_pod("g", gpus=1, selector={"karpenter.k8s.aws/instance-gpu-name": "t4"}, tolerations=GPU_TOL)
    p = placed(sim(profile(GPU_POOL), pod), "g")
    assert (p["instance_type"], p["capacity_type"]) == ("g4dn.xlarge", "on-demand")


def test_limits_cap_the_pool() -> None:
    """nvidia.com/gpu limit 2: two one-GPU claims fit, the third pod stays pending."""
    pool = {**GPU_POOL, "limits": {"nvidia.com/gpu": "2"}, "requirements": {"families": ["g4dn"]}}
    pods = [make_pod(f"g-{i}", cpu=3000, mem_gib=8, gpus=1, tolerations=GPU_TOL) for i in range(3)]
    result = sim(profile(pool), *pods)
    phases = sorted(p.phase for p in result.placements)
    assert phases == [PROVISIONED, PROVISIONED, UNSCHEDULABLE]
    assert 'all available instance types exceed limits for nodepool "gpu"' in (
        result.unschedulable[0].reason or ""
    )


def test_no_type_big_enough() -> None:
    reason = placed(sim(profile(GENERAL), make_pod("huge", cpu=64000)), "huge")["reason"]
    assert "no instance type satisfied resources" in reason and '"cpu":"64"' in reason


def test_daemonset_overhead_counts_on_new_nodes() -> None:
    """A DaemonSet asking 1.5 cores leaves m5.large too small for a 1-core pod: m5.xlarge instead."""
    ds_spec = PodSpecInfo(resources({"cpu": 1500}), 1500, 0)
    ds = DaemonSet("kube-system", "agent", ds_spec)
    result = sim(profile(GENERAL), make_pod("a", cpu=1000, mem_gib=1), daemonsets=(ds,))
    assert placed(result, "a")["instance_type"] == "m5.xlarge"
    node = next(st for st in result.nodes if st.name == result.new_nodes[0].name)
    assert any(p.owner_kind == "DaemonSet" for p in node.pods)


def test_unknown_gpu_name_in_pool_names_the_closest() -> None:
    pool = {**GPU_POOL, "requirements": {"gpuNames": ["a10"]}}
    with pytest.raises(InputError) as err:
        provisioner_for(profile(pool), CAT)
    assert err.value.where == "pools[0].requirements.gpuNames[0]"
    assert "a10g" in err.value.hint


def test_new_node_json_fields() -> None:
    result = sim(profile(GENERAL), make_pod("a"))
    data = result.as_dict()
    node = data["new_nodes"][0]
    assert set(node) >= {"name", "pool", "instance_type", "capacity_type", "zone", "hourly_price", "pods"}
    assert node["pods"] == ["default/a"]
    assert data["pods"][0]["node"] == node["name"]
    assert data["summary"]["hourly_cost"] == node["hourly_price"]


def test_equal_weights_try_pools_by_name_descending() -> None:
    """Karpenter's OrderByWeight (pkg/utils/nodepool): equal weights sort by name, descending."""
    a = {**GENERAL, "name": "a-pool", "weight": 10}
    b = {**GENERAL, "name": "b-pool", "weight": 10}
    assert placed(sim(profile(a, b), make_pod("p")), "p")["pool"] == "b-pool"


def test_prefer_no_schedule_pool_only_when_nothing_else_fits() -> None:
    """Karpenter tolerates PreferNoSchedule taints only when relaxing: the heavier tainted pool loses to an
    untainted one that fits, and takes the pod when that one cannot."""
    spare = {
        **GENERAL,
        "name": "spare",
        "weight": 50,
        "taints": [{"key": "spare", "effect": "PreferNoSchedule"}],
    }
    small = {**GENERAL, "name": "small", "weight": 1, "instanceTypes": ["m5.large"]}
    result = sim(profile(spare, small), make_pod("fits", cpu=1000), make_pod("big", cpu=3000))
    assert placed(result, "fits")["pool"] == "small"
    assert placed(result, "big")["pool"] == "spare"


def test_daemonset_host_port_keeps_the_pod_off_the_pool() -> None:
    """The DaemonSet holds host port 9100 on every node of the pool: Karpenter launches nothing for a pod
    that wants the same port, and says why."""
    ds_spec = PodSpecInfo(resources({"cpu": 100}), 100, 0, host_ports=(HostPort(9100),))
    ds = DaemonSet("kube-system", "node-exporter", ds_spec)
    pod = make_pod("p")
    pod = Pod("default", "p", replace(pod.spec, host_ports=(HostPort(9100),)))
    result = sim(profile(GENERAL), pod, daemonsets=(ds,))
    assert not result.new_nodes
    assert "checking host port usage, pod hostport conflicts" in (placed(result, "p")["reason"] or "")


def test_one_pod_per_host_port_on_a_claim_and_one_claim_per_batch() -> None:
    """Three replicas asking host port 8080 need three nodes, however small they are. Karpenter's claims of one
    pool share their host ports within a Solve (NewNodeClaim hands each the template's HostPortUsage), so its
    first batch launches one node and leaves the other two pods with a host-port conflict; each later batch
    launches one more."""
    base = make_pod("x", cpu=100, mem_gib=0.1)
    spec = replace(base.spec, host_ports=(HostPort(8080),))
    result = sim(profile(GENERAL), *(Pod("default", f"w-{i}", spec) for i in range(3)))
    assert all(p.phase == PROVISIONED for p in result.placements)
    assert len(result.new_nodes) == 3
    assert [n.batch for n in result.new_nodes] == [1, 2, 3]


def test_a_host_port_taken_in_a_batch_blocks_every_claim_of_the_pool() -> None:
    """Two different pods asking host port 9400, one pinned to zone a and one to zone b (they cannot share a
    node anyway): one Solve gives the second no claim of its own, because the first took the port on every
    claim of the pool, and says why; the provisioner's next batch launches its node."""
    zone = "topology.kubernetes.io/zone"
    a = make_pod("a", cpu=500, selector={zone: "us-west-2a"})
    b = make_pod("b", cpu=700, selector={zone: "us-west-2b"})
    pods = [Pod("default", p.name, replace(p.spec, host_ports=(HostPort(9400),))) for p in (a, b)]
    prof = profile(GENERAL)
    karpenter = Karpenter(prof, CAT)
    ctx = Context(Scheduler([]), prof, CAT, [])
    notes = karpenter._provision(karpenter_order(pods), ctx)  # one Solve
    assert len(ctx.new_nodes) == 1
    (waiting,) = notes.values()
    assert "checking host port usage (taken by another claim of this batch), pod hostport conflicts" in waiting
    both = sim(prof, *pods)
    assert all(p.phase == PROVISIONED for p in both.placements)
    assert sorted(n.batch for n in both.new_nodes) == [1, 2]


def test_limits_count_capacity_not_allocatable() -> None:
    """Karpenter's filterByRemainingResources compares instance capacity: with cpu limit 3950m, m5.xlarge
    (4 vCPU capacity, 3920m allocatable) is over the limit, so a 3-core pod has no type left."""
    pool = {**GENERAL, "limits": {"cpu": "3950m"}}
    p = placed(sim(profile(pool), make_pod("a", cpu=3000, mem_gib=4)), "a")
    assert p["phase"] == UNSCHEDULABLE
    assert 'all available instance types exceed limits for nodepool "general"' in (p["reason"] or "")
    ok = {**GENERAL, "limits": {"cpu": "4"}}
    assert placed(sim(profile(ok), make_pod("a", cpu=3000, mem_gib=4)), "a")["instance_type"] == "m5.xlarge"


def test_an_existing_node_counts_its_capacity_against_the_limits() -> None:
    """Karpenter subtracts each existing node's StateNode.Capacity (status.capacity) from the pool's limits:
    a node of 4 vCPU (3920m allocatable) under a 5950m limit leaves 1950m, less than m5.large's 2 vCPU, so
    the pod waits; counted by allocatable (2030m left) an m5.large would launch."""
    node = node_dict("ip-10-0-1-5.us-west-2.compute.internal", cpu="3920m", memory="15Gi",
                     labels={"karpenter.sh/nodepool": "general"},
                     taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    node["status"]["capacity"] = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    pool = {**GENERAL, "limits": {"cpu": "5950m"}}
    cluster = parse_documents([node], "nodes.json")
    work = Objects()
    work.pods.append(make_pod("a", cpu=500, mem_gib=1))
    result = simulate(cluster, work, provisioner=provisioner_for(profile(pool), CAT))
    p = placed(result, "a")
    assert p["phase"] == UNSCHEDULABLE, p
    assert 'all available instance types exceed limits for nodepool "general"' in (p["reason"] or "")
    del node["status"]["capacity"]  # a node without capacity counts its allocatable: room for m5.large
    result = simulate(parse_documents([node], "nodes.json"), work, provisioner=provisioner_for(profile(pool), CAT))
    assert placed(result, "a")["instance_type"] == "m5.large"


def test_gpu_types_launch_last_for_pods_that_do_not_need_them() -> None:
    """The AWS provider's filterExoticInstanceTypes: a claim that a CPU type can hold does not launch a GPU
    (or metal) type, even a cheaper one; a pod that only fits the GPU type still gets it."""
    cat = catalog(
        (make_instance_type("m5.large", vcpus=2, memory_mib=8192), 0.096, None),
        (make_instance_type("g4dn.xlarge", vcpus=4, memory_mib=16384, gpus=1, gpu_name="t4"), 0.05, None),
    )
    pool = {"name": "any", "kind": "karpenter", "requirements": {"categories": ["m", "g"]}}
    result = sim(profile(pool), make_pod("small", cpu=1000, mem_gib=1), cat=cat)
    assert placed(result, "small")["instance_type"] == "m5.large"
    result = sim(profile(pool), make_pod("wide", cpu=3000, mem_gib=4), cat=cat)
    assert placed(result, "wide")["instance_type"] == "g4dn.xlarge"


def test_first_affinity_term_first() -> None:
    """Karpenter schedules with the first nodeSelectorTerm and drops it only when nothing can take the pod:
    terms [m5.4xlarge] OR [m5.large] launch the (pricier) first; an impossible first term falls to the next."""
    from kgpu.model.objects import NodeSelector, Requirement, Term

    def with_terms(name: str, *types: str) -> Pod:
        terms = tuple(Term((Requirement("node.kubernetes.io/instance-type", "In", (t,)),)) for t in types)
        base = make_pod(name, cpu=500, mem_gib=1)
        return Pod("default", name, replace(base.spec, affinity=NodeSelector(terms)))

    result = sim(
        profile(GENERAL), with_terms("a", "m5.4xlarge", "m5.large"), with_terms("b", "c9.huge", "m5.large")
    )
    assert placed(result, "a")["instance_type"] == "m5.4xlarge"
    assert placed(result, "b")["instance_type"] == "m5.large"

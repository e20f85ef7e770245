"""Karpenter NodePool requirements in their native form: any key and operator, minValues, label aliases,
limits (``nodes`` included). Cases transcribed from sigs.k8s.io/karpenter v1.8 (named in each docstring):
``pkg/controllers/provisioning/scheduling/suite_test.go``, ``instance_selection_test.go`` (Context
"MinValues"), ``pkg/apis/v1/nodepool_validation_cel_test.go`` / ``nodeclaim_validation.go``, and
``pkg/apis/v1/labels.go`` (NormalizedLabels)."""

from __future__ import annotations

from typing import Any

import pytest

from builders_catalog import make_instance_type
from kgpu.errors import InputError
from kgpu.model.objects import NodeSelector, Requirement, Term
from kgpu.model.profile import parse_profile
from kgpu.render.karpenter import nodepool
from kgpu.render.validate import validate_document
from kgpu.sim.simulate import PROVISIONED, UNSCHEDULABLE
from test_provision_karpenter import CAT, GENERAL, catalog, make_pod, placed, profile, sim

AWS = "karpenter.k8s.aws/"


def native(*reqs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "native", "kind": "karpenter", "requirements": list(reqs), **extra}


def with_affinity(pod: Any, *reqs: Requirement) -> Any:
    from dataclasses import replace

    spec = replace(pod.spec, affinity=NodeSelector((Term(tuple(reqs)),)))
    return replace(pod, spec=spec)


# --- requirements narrow the offerings -------------------------------------------------------------------


def test_native_in_on_instance_type() -> None:
    """suite_test.go Context "Well Known Labels": the NodePool's instance-type requirement limits the
    launch to its values (here the only allowed type is bigger than the cheapest that fits)."""
    pool = native({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.4xlarge"]})
    p = placed(sim(profile(pool), make_pod("a")), "a")
    assert p["phase"] == PROVISIONED
    assert p["instance_type"] == "m5.4xlarge"


def test_native_notin_and_exists_operators() -> None:
    """NotIn excludes the cheapest family; DoesNotExist on the GPU name keeps GPU types out; no
    capacity-type requirement in the native list: spot and on-demand are both offered (spot first)."""
    pool = native(
        {"key": AWS + "instance-size", "operator": "NotIn", "values": ["large"]},
        {"key": AWS + "instance-gpu-name", "operator": "DoesNotExist"},
    )
    p = placed(sim(profile(pool), make_pod("a", cpu=500)), "a")
    assert (p["instance_type"], p["capacity_type"]) == ("m5.xlarge", "on-demand")


def test_native_gt_lt_on_cpu() -> None:
    """suite_test.go "should schedule compatible requirements with Operator=Gt/Lt": Gt 4 on instance-cpu
    leaves only the 16-vCPU type of the m family."""
    pool = native(
        {"key": AWS + "instance-cpu", "operator": "Gt", "values": ["4"]},
        {"key": AWS + "instance-category", "operator": "In", "values": ["m"]},
    )
    p = placed(sim(profile(pool), make_pod("a")), "a")
    assert p["instance_type"] == "m5.4xlarge"
    lt = native({"key": AWS + "instance-cpu", "operator": "Lt", "values": ["4"]})
    assert placed(sim(profile(lt), make_pod("b")), "b")["instance_type"] == "m5.large"


def test_network_bandwidth_requirement_narrows_real_types() -> None:
    """karpenter.k8s.aws/instance-network-bandwidth from the packaged catalog (the AWS provider's
    bandwidth table): Gt 5000 leaves m6i/m7i/c6i/c7i.4xlarge (6250) as the only 4xlarge-or-smaller CPU
    types of the m and c categories."""
    from kgpu.catalog import aws_catalog

    pool = native(
        {"key": AWS + "instance-network-bandwidth", "operator": "Gt", "values": ["5000"]},
        {"key": AWS + "instance-category", "operator": "In", "values": ["m", "c"]},
        {"key": AWS + "instance-gpu-name", "operator": "DoesNotExist"},
        capacityTypes=["on-demand"],
    )
    p = placed(sim(profile(pool), make_pod("a"), cat=aws_catalog("us-west-2")), "a")
    assert p["instance_type"] in {"m6i.4xlarge", "m7i.4xlarge", "c6i.4xlarge", "c7i.4xlarge"}


def test_hardware_labels_narrow_real_types() -> None:
    """The AWS provider's hardware labels from the packaged catalog (Karpenter's generated instance-type
    reference): local NVMe Gt 1000 GiB among 1-GPU-capable g types, an EBS bandwidth floor, a CPU
    manufacturer, and the empty hypervisor of metal types (In [nitro] leaves them out)."""
    from kgpu.catalog import aws_catalog

    cat = aws_catalog("us-west-2")
    gpu_pod = make_pod("a", gpus=1)
    nvme = native(
        {"key": AWS + "instance-local-nvme", "operator": "Gt", "values": ["1000"]},
        {"key": AWS + "instance-category", "operator": "In", "values": ["g"]},
        capacityTypes=["on-demand"],
    )
    p = placed(sim(profile(nvme), gpu_pod, cat=cat), "a")
    assert int(cat.get(p["instance_type"]).labels("us-west-2", "", "")[AWS + "instance-local-nvme"]) > 1000
    intel = native(
        {"key": AWS + "instance-cpu-manufacturer", "operator": "NotIn", "values": ["amd", "aws"]},
        {"key": AWS + "instance-category", "operator": "In", "values": ["g"]},
        capacityTypes=["on-demand"],
    )
    assert placed(sim(profile(intel), gpu_pod, cat=cat), "a")["instance_type"].startswith("g4dn.")
    no_metal = native(
        {"key": AWS + "instance-hypervisor", "operator": "In", "values": ["nitro"]},
        {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["g4dn.metal", "g4dn.xlarge"],
        },
        capacityTypes=["on-demand"],
    )
    assert placed(sim(profile(no_metal), gpu_pod, cat=cat), "a")["instance_type"] == "g4dn.xlarge"
    metal_only = native(
        {"key": AWS + "instance-hypervisor", "operator": "NotIn", "values": ["nitro", "xen"]},
        {"key": AWS + "instance-ebs-bandwidth", "operator": "Gt", "values": ["10000"]},
        capacityTypes=["on-demand"],
    )
    assert placed(sim(profile(metal_only), gpu_pod, cat=cat), "a")["instance_type"] in {
        "g4dn.metal",
        "g5g.metal",
    }


def test_native_capacity_type_replaces_the_default() -> None:
    """A capacity-type requirement in the native list decides (the profile's default on-demand does not
    intersect it away)."""
    pool = native({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]})
    p = placed(sim(profile(pool), make_pod("a")), "a")
    assert (p["instance_type"], p["capacity_type"]) == ("m5.large", "spot")


def test_custom_key_in_becomes_the_node_label() -> None:
    """suite_test.go Context "Custom Labels": a NodePool requirement on a custom key with In values lets a
    pod select one of the values, and the node carries it; a pod selecting another value is incompatible;
    a pod selecting an undefined key gets Karpenter's 'does not have known values'."""
    pool = native(
        {"key": "example.com/team", "operator": "In", "values": ["ml", "web"]},
        {"key": AWS + "instance-category", "operator": "In", "values": ["m"]},
    )
    result = sim(
        profile(pool),
        make_pod("web", selector={"example.com/team": "web"}),
        make_pod("ops", selector={"example.com/team": "ops"}),
        make_pod("undefined", selector={"example.com/rack": "r1"}),
    )
    web = placed(result, "web")
    assert web["phase"] == PROVISIONED
    node = next(st for st in result.nodes if st.name == web["node"])
    assert node.node.labels["example.com/team"] == "web"
    assert placed(result, "ops")["phase"] == UNSCHEDULABLE
    assert "example.com/team In [ops] not in example.com/team In [ml web]" in placed(result, "ops")["reason"]
    assert 'label "example.com/rack" does not have known values' in placed(result, "undefined")["reason"]


# --- minValues ------------------------------------------------------------------------------------------


TWO = catalog(
    (make_instance_type("c5.large", vcpus=2, memory_mib=4096), 0.085, None),
    (make_instance_type("c5.2xlarge", vcpus=8, memory_mib=16384), 0.34, None),
)


def test_min_values_keeps_two_instance_types_per_claim() -> None:
    """instance_selection_test.go MinValues "should schedule respecting the minValues from instance-type
    requirements": two pods fit together only on the bigger type; with minValues 2 on the instance type a
    claim must keep both types, so each pod gets its own node."""
    pool = native(
        {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["c5.large", "c5.2xlarge"],
            "minValues": 2,
        },
        capacityTypes=["on-demand"],
    )
    pods = [make_pod(f"p-{i}", cpu=1200, mem_gib=1) for i in range(2)]
    result = sim(profile(pool), *pods, cat=TWO)
    assert all(p.phase == PROVISIONED for p in result.placements)
    assert len(result.new_nodes) == 2
    # without minValues both share the bigger type... no: one c5.large holds one pod, so two nodes either
    # way; the cheaper plan without minValues packs both onto one c5.2xlarge when it is cheaper per pod
    free = native(
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "c5.2xlarge"]},
        capacityTypes=["on-demand"],
    )
    assert all(p.phase == PROVISIONED for p in sim(profile(free), *pods, cat=TWO).placements)


def test_min_values_packing_stops_where_flexibility_would_drop() -> None:
    """Same rule while packing: four small pods fit the big type together, but then only one type would be
    left, so a claim stops at the pods that both types still hold."""
    pool = native(
        {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["c5.large", "c5.2xlarge"],
            "minValues": 2,
        },
    )
    pods = [make_pod(f"p-{i}", cpu=500, mem_gib=0.5) for i in range(4)]
    result = sim(profile(pool), *pods, cat=TWO)
    assert all(p.phase == PROVISIONED for p in result.placements)
    # c5.large allocatable holds 3 such pods (1930m cpu); the 4th opens a second claim
    assert sorted(len(n.pods) for n in result.new_nodes) == [1, 3]


def test_min_values_not_met_is_karpenter_error() -> None:
    """instance_selection_test.go MinValues "scheduler should fail if the minValues in Gt operator is not
    satisfied": one family left, minValues 2 on the family: the pool cannot take the pod, in Karpenter's
    words."""
    pool = native({"key": AWS + "instance-family", "operator": "Exists", "minValues": 2})
    p = placed(sim(profile(pool), make_pod("a"), cat=TWO), "a")
    assert p["phase"] == UNSCHEDULABLE
    assert (
        "minValues requirement is not met for label(s) (label(s)=[karpenter.k8s.aws/instance-family])"
        in (p["reason"])
    )


def test_min_values_on_gt_counts_distinct_values() -> None:
    """instance_selection_test.go MinValues "should schedule respecting the minValues in Gt operator":
    Gt 2 on the vCPUs with minValues 2 keeps both bigger types on the claim (here: m5.xlarge and m5.4xlarge)."""
    pool = native(
        {"key": AWS + "instance-cpu", "operator": "Gt", "values": ["2"], "minValues": 2},
        {"key": AWS + "instance-category", "operator": "In", "values": ["m"]},
    )
    result = sim(profile(pool), make_pod("a", cpu=3000), make_pod("b", cpu=3000))
    assert all(p.phase == PROVISIONED for p in result.placements)
    assert {n.instance_type for n in result.new_nodes} == {"m5.xlarge"}
    assert len(result.new_nodes) == 2  # together they would need m5.4xlarge alone: below minValues


# --- aliases ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "value", "expect"),
    [
        ("beta.kubernetes.io/instance-type", "m5.xlarge", ("instance_type", "m5.xlarge")),
        ("failure-domain.beta.kubernetes.io/zone", "us-west-2b", ("zone", "us-west-2b")),
        ("beta.kubernetes.io/arch", "amd64", ("instance_type", "m5.large")),
        ("beta.kubernetes.io/os", "linux", ("instance_type", "m5.large")),
        ("failure-domain.beta.kubernetes.io/region", "us-west-2", ("instance_type", "m5.large")),
    ],
)
def test_alias_labels_in_pod_selectors(alias: str, value: str, expect: tuple[str, str]) -> None:
    """labels.go NormalizedLabels: a pod selecting the deprecated alias is placed as if it selected the
    stable label, and the new node carries both (as EKS nodes do)."""
    result = sim(profile(GENERAL), make_pod("a", selector={alias: value}))
    p = placed(result, "a")
    assert p["phase"] == PROVISIONED
    assert p[expect[0]] == expect[1]
    node = next(st for st in result.nodes if st.name == p["node"])
    assert node.node.labels[alias] == value


def test_alias_in_pool_requirement_is_normalized() -> None:
    """The NodePool requirement on beta.kubernetes.io/instance-type narrows like the stable key, and a
    pod's NotIn on the alias applies to it too."""
    pool = native(
        {"key": "beta.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]}
    )
    pod = with_affinity(
        make_pod("a"), Requirement("beta.kubernetes.io/instance-type", "NotIn", ("m5.large",))
    )
    assert placed(sim(profile(pool), pod), "a")["instance_type"] == "m5.xlarge"


# --- limits ---------------------------------------------------------------------------------------------


def test_nodes_limit_is_not_reserved_within_one_batch() -> None:
    """limits.nodes as Karpenter v1.8's Solve applies it: a new claim reserves the largest instance capacity,
    which has no ``nodes``, so one batch may launch past limits.nodes (three nodes under a limit of 1); the
    pool's existing nodes do count (test_cli_simulate_nodepools)."""
    pool = {**GENERAL, "limits": {"nodes": "1"}, "capacityTypes": ["on-demand"]}
    pods = [make_pod(f"p-{i}", cpu=6000, mem_gib=1) for i in range(3)]
    result = sim(profile(pool), *pods)
    assert all(p.phase == PROVISIONED for p in result.placements)
    assert len(result.new_nodes) == 2  # two 6-core pods per m5.4xlarge


def test_nodes_limit_exceeded_refuses_the_pools_claims() -> None:
    """limits.nodes where the pool's nodes already exceed it (2 nodes, limit 1): Karpenter v1.8's Solve does
    not count ``nodes`` and still gives the pod to the heaviest pool, whose claim the provisioner's Create
    then refuses (``Limits.ExceededBy``: usage above the limit); the pod waits, it never goes to the lighter
    pool. With the nodes at the limit (usage not above it) the pool launches."""
    from kgpu.model.inputs import Objects
    from kgpu.model.objects import Node
    from kgpu.sim.provisioners.provision import provisioner_for
    from kgpu.sim.simulate import simulate

    heavy = {**GENERAL, "name": "heavy", "weight": 50, "limits": {"nodes": "1"}, "capacityTypes": ["on-demand"]}
    light = {**GENERAL, "name": "light", "weight": 1, "capacityTypes": ["on-demand"]}

    def run(existing: int) -> Any:
        cluster = Objects()
        for i in range(existing):
            labels = {"karpenter.sh/nodepool": "heavy", "kubernetes.io/hostname": f"heavy-{i}"}
            cluster.nodes.append(Node(f"heavy-{i}", labels, {"cpu": 100, "memory": 1 << 30, "pods": 110}))
        work = Objects()
        work.pods.append(make_pod("a", cpu=1000))
        return simulate(cluster, work, provisioner=provisioner_for(profile(heavy, light), CAT))

    refused = run(2)
    p = placed(refused, "a")
    assert p["phase"] == UNSCHEDULABLE
    assert not refused.new_nodes
    assert (
        'karpenter: nodepool "heavy": creating node claim, resource usage exceeds limit '
        "(limit=1, resource-name=nodes, usage=2)"
    ) in (p["reason"] or "")
    at_limit = run(1)
    assert placed(at_limit, "a")["pool"] == "heavy"
    assert [n.pool for n in at_limit.new_nodes] == ["heavy"]


def test_limit_on_pods_resource() -> None:
    """Limits on any resource the catalog knows: ``pods`` counts each node's pod capacity (110 for these
    types), so a limit of 150 lets one node launch and not a second (the pods cannot share one)."""
    pool = {**GENERAL, "limits": {"pods": "150"}, "capacityTypes": ["on-demand"]}
    result = sim(profile(pool), *(make_pod(f"p-{i}", cpu=10000) for i in range(2)))
    assert len(result.new_nodes) == 1
    assert len(result.unschedulable) == 1


def test_unknown_limit_key_is_an_input_error() -> None:
    with pytest.raises(InputError) as err:
        profile({**GENERAL, "limits": {"cpus": "10"}})
    assert "pools[0].limits" in str(err.value.where)
    assert "'cpus' is not a resource Karpenter can limit here; did you mean cpu?" in err.value.message


# --- validation (nodeclaim_validation.go ValidateRequirement, the NodePool CRD rules) --------------------


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]},
            'invalid key: "karpenter.sh/nodepool" in requirements, restricted',
        ),
        (
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]},
            "label kubernetes.io/hostname is restricted",
        ),
        (
            {"key": "karpenter.k8s.aws/unknown", "operator": "Exists"},
            "label karpenter.k8s.aws/unknown is restricted",
        ),
        (
            {"key": "example.com/a", "operator": "In"},
            "key example.com/a with operator In must have a value defined",
        ),
        ({"key": AWS + "instance-cpu", "operator": "Gt", "values": ["-1"]}, "invalid value -1 for key"),
        (
            {"key": AWS + "instance-cpu", "operator": "Gt", "values": ["1.5"]},
            "must have a single positive integer value",
        ),
        (
            {"key": AWS + "instance-cpu", "operator": "Lt", "values": ["1", "2"]},
            "must have a single positive integer value",
        ),
        (
            {"key": AWS + "instance-family", "operator": "In", "values": ["m5"], "minValues": 2},
            "must have at least minimum number of values",
        ),
        ({"key": "example.com/a", "operator": "Exists", "values": ["x"]}, "values must be empty"),
        ({"key": "example.com/a", "operator": "Equal", "values": ["x"]}, "'Equal' is not one of In, NotIn"),
        ({"key": "example.com/a", "operator": "Exists", "minValues": 51}, "less than or equal to 50"),
    ],
)
def test_invalid_native_requirement_names_the_field(req: dict[str, Any], message: str) -> None:
    """nodepool_validation_cel_test.go Context "Requirements": "should fail for the karpenter.sh/nodepool
    label", "should fail for restricted label domains", "should fail with invalid GT or LT values", "should
    error when minValues is greater than the number of unique values specified within In operator", "should
    fail because In operator with no values", and minValues' CRD bounds (1-50); the profile error names the
    requirement's field path."""
    with pytest.raises(InputError) as err:
        profile(native(req))
    assert message in err.value.message
    assert (
        err.value.where.endswith("pools[0].requirements[0]") or "pools[0].requirements[0]" in err.value.where
    )


def test_allowed_domains_validate() -> None:
    """nodepool_validation_cel_test.go "should allow restricted domains exceptions" / "should allow well
    known label exceptions": node.kubernetes.io is an exception domain; custom domains are free; well-known
    provider keys pass."""
    profile(
        native(
            {"key": "node.kubernetes.io/custom", "operator": "Exists"},
            {"key": "example.com/x", "operator": "NotIn", "values": ["a"]},
            {"key": AWS + "instance-hypervisor", "operator": "In", "values": ["nitro"]},
        )
    )


# --- render: the NodePool says what the profile says --------------------------------------------------


def test_render_writes_native_requirements_faithfully() -> None:
    pool = native(
        {"key": AWS + "instance-family", "operator": "In", "values": ["m5", "c5"], "minValues": 2},
        {"key": "example.com/team", "operator": "Exists"},
        {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
    )
    prof = profile(pool)
    doc = nodepool(prof, prof.pools[0])
    reqs = doc["spec"]["template"]["spec"]["requirements"]
    assert reqs == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": AWS + "instance-family", "operator": "In", "values": ["m5", "c5"], "minValues": 2},
        {"key": "example.com/team", "operator": "Exists"},
        {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
    ]
    assert validate_document(doc) == ([], None)


def test_profile_requirements_round_trip_through_render_and_simulate() -> None:
    """What render writes for a native pool is what simulate provisions from: the same requirements."""
    prof = parse_profile(
        {
            "metadata": {"name": "t"},
            "provider": "eks",
            "autoscaler": "karpenter",
            "pools": [native({"key": AWS + "instance-gpu-name", "operator": "In", "values": ["t4"]})],
        }
    )
    assert prof.pools[0].is_gpu
    p = placed(sim(prof, make_pod("g", gpus=1), cat=CAT), "g")
    assert p["instance_type"] == "g4dn.xlarge"


def test_gpu_limit_does_not_exclude_cpu_types_of_the_same_size() -> None:
    """Found by the Karpenter differential: with the pool's nvidia.com/gpu limit used up, m5.xlarge (no GPU)
    is still within limits although g5.xlarge and g4dn.xlarge hold the same pods (Karpenter's
    filterByRemainingResources looks at each type's own capacity)."""
    pool = {
        "name": "mixed",
        "kind": "karpenter",
        "requirements": {"categories": ["m", "g"]},
        "capacityTypes": ["on-demand"],
        "limits": {"nvidia.com/gpu": "0"},
        "devicePlugin": "none",
    }
    p = placed(sim(profile(pool), make_pod("a", cpu=3000, mem_gib=4)), "a")
    assert (p["phase"], p["instance_type"]) == (PROVISIONED, "m5.xlarge")

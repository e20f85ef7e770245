"""Karpenter NodeOverlays (karpenter.sh/v1alpha1) as Karpenter v1.8 applies them (kgpu.sim.provisioners.karpenter.overlay).
Cases after sigs.k8s.io/karpenter v1.8.0 ``pkg/controllers/nodeoverlay/suite_test.go`` and
``pkg/cloudprovider/types.go`` (AdjustedPrice), named in each docstring; ``make conformance`` checks the
same against Karpenter's own controller and store (docs/simulate.md, "Known differences from Karpenter")."""

from __future__ import annotations

from typing import Any

import pytest

from kgpu.errors import InputError
from kgpu.model.inputs import Objects
from kgpu.model.objects import Toleration
from kgpu.sim.provisioners.karpenter.overlay import OverlayStore, adjusted_price, parse_overlay
from kgpu.sim.provisioners.karpenter.solve import Karpenter
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import PROVISIONED, simulate
from test_provision_karpenter import CAT, GENERAL, GPU_POOL, make_pod, placed, profile

TOL = Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule")


def overlay(name: str, reqs: list[dict[str, Any]], weight: int | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"requirements": reqs, **spec}
    if weight is not None:
        body["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": body}


def itype(*names: str) -> dict[str, Any]:
    return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(names)}


def run(prof: Any, *pods: Any, overlays: tuple[dict[str, Any], ...] = ()) -> tuple[Any, Karpenter]:
    prov = provisioner_for(prof, CAT)
    karp = next(p for p in prov.parts if isinstance(p, Karpenter))
    karp.overlays = [parse_overlay(o, "overlays.yaml") for o in overlays]
    work = Objects()
    work.pods.extend(pods)
    return simulate(Objects(), work, provisioner=prov), karp


@pytest.mark.parametrize(
    ("price", "change", "want"),
    [
        (1.0, "", 1.0),
        (1.0, "0.25", 0.25),  # an absolute price
        (1.0, "+0.5", 1.5),
        (1.0, "-10%", 0.9),
        (2.0, "+50%", 3.0),
        (1.0, "-2", 0.0),  # never below 0
        (1.0, "-150%", 0.0),
    ],
)
def test_adjusted_price(price: float, change: str, want: float) -> None:
    """cloudprovider.AdjustedPrice: absolute, +/- amount, +/- percent, floored at 0."""
    assert adjusted_price(price, change) == pytest.approx(want)


def test_price_overlay_changes_the_launch() -> None:
    """A price overlay on m5.4xlarge below the m5.xlarge spot price: Karpenter ranks offerings by the
    overlaid price, so the 4-core pod gets the bigger type; the node's price is the overlaid one."""
    pod = make_pod("a", cpu=3000, mem_gib=4)
    plain, _ = run(profile(GENERAL), pod)
    assert placed(plain, "a")["instance_type"] == "m5.xlarge"
    cheap = overlay("cheap-4xl", [itype("m5.4xlarge")], price="0.01")
    result, karp = run(profile(GENERAL), pod, overlays=(cheap,))
    p = placed(result, "a")
    assert (p["phase"], p["instance_type"]) == (PROVISIONED, "m5.4xlarge")
    assert result.new_nodes[0].hourly_price == pytest.approx(0.01)
    assert karp.overlay_errors == {}


def test_on_demand_priced_below_every_spot_offering_launches_nothing() -> None:
    """The AWS provider's SpotInstanceFilter (v1.8), over the overlaid prices its Create applies: with
    m5.4xlarge's on-demand offerings priced at 0.01, every type that fits has only spot offerings dearer
    than that, so none is left: the launch fails with insufficient capacity (again on every retry) and the
    pod waits, with the reason."""
    pod = make_pod("a", cpu=3000, mem_gib=4)
    od = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    cheap_od = overlay("cheap-od", [itype("m5.4xlarge"), od], price="0.01")
    result, karp = run(profile(GENERAL), pod, overlays=(cheap_od,))
    p = placed(result, "a")
    assert p["phase"] == "Unschedulable" and result.new_nodes == []
    assert "all requested instance types were unavailable during launch" in p["reason"]
    assert "$0.0100/h" in p["reason"]
    assert karp.overlay_errors == {}


def test_spot_filter_keeps_types_without_spot_offerings() -> None:
    """SpotInstanceFilter keeps a type that has no spot offering (g4dn.xlarge here): priced at 0.1 on
    demand by an overlay, it is the only type left, so it launches on demand, not g5.xlarge spot at 0.36."""
    od = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    cheap = overlay("cheap-t4", [itype("g4dn.xlarge"), od], price="0.1")
    result, _ = run(profile(GPU_POOL), make_pod("g", gpus=1, tolerations=(TOL,)), overlays=(cheap,))
    p = placed(result, "g")
    assert (p["instance_type"], p["capacity_type"]) == ("g4dn.xlarge", "on-demand")
    assert result.new_nodes[0].hourly_price == pytest.approx(0.1)
    plain, _ = run(profile(GPU_POOL), make_pod("g", gpus=1, tolerations=(TOL,)))
    assert (placed(plain, "g")["instance_type"], placed(plain, "g")["capacity_type"]) == ("g5.xlarge", "spot")


def test_heaviest_price_overlay_wins() -> None:
    """suite_test.go "should update price offerings instance types from multiple overlays with different
    weights": the heavier overlay's price stays; a lighter one on the same offerings does not replace it."""
    heavy = overlay("a-heavy", [itype("m5.4xlarge")], weight=50, price="0.01")
    light = overlay("b-light", [itype("m5.4xlarge")], weight=10, price="5")
    result, karp = run(profile(GENERAL), make_pod("a", cpu=3000, mem_gib=4), overlays=(light, heavy))
    assert placed(result, "a")["instance_type"] == "m5.4xlarge"
    assert karp.overlay_errors == {}


def test_equal_weight_price_overlays_conflict() -> None:
    """suite_test.go "should fail when requirements overlays overlap": two overlays of one weight pricing
    the same offerings conflict; the later by name (descending order: "a" after "b") is left out entirely,
    so its price applies nowhere."""
    first = overlay("b-first", [itype("m5.4xlarge")], weight=10, price="0.01")
    second = overlay("a-second", [itype("m5.4xlarge", "m5.xlarge")], weight=10, price="9")
    result, karp = run(profile(GENERAL), make_pod("a", cpu=3000, mem_gib=4), overlays=(first, second))
    assert karp.overlay_errors == {"a-second": "Conflict: conflict with another overlay"}
    assert placed(result, "a")["instance_type"] == "m5.4xlarge"  # b-first's price applies


def test_capacity_overlay_on_a_well_known_resource_is_left_out() -> None:
    """NodeOverlaySpec.validateCapacity: cpu, memory, ephemeral-storage and pods are restricted."""
    bad = overlay("more-cpu", [itype("m5.large")], capacity={"cpu": "64"})
    _, karp = run(profile(GENERAL), make_pod("a"), overlays=(bad,))
    assert karp.overlay_errors == {"more-cpu": "RuntimeValidation: invalid capacity: cpu in resource, restricted"}


def test_gpu_capacity_overlay_on_a_time_sliced_pool() -> None:
    """A time-sliced pool (4 replicas) without kgpu's own overlay: Karpenter counts 1 physical GPU per
    g5.xlarge, so four 1-GPU pods launch four nodes; with an input overlay saying nvidia.com/gpu: 4 they
    share one, as the device plugin will advertise."""
    shared = {
        **GPU_POOL,
        "instanceTypes": ["g5.xlarge"],
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}, "nodeOverlay": False},
    }
    pods = [make_pod(f"p{i}", cpu=500, gpus=1, tolerations=(TOL,)) for i in range(4)]
    without, _ = run(profile(shared), *pods)
    assert len(without.new_nodes) == 4
    four = overlay("gpu-x4", [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu"]}],
                   capacity={"nvidia.com/gpu": "4"})
    with_overlay, _ = run(profile(shared), *pods, overlays=(four,))
    assert len(with_overlay.new_nodes) == 1
    assert all(p.phase == PROVISIONED for p in with_overlay.placements)


def test_lighter_capacity_overlay_sets_the_resource_again() -> None:
    """Karpenter v1.8.0's store merges capacity overlays in weight order and a lighter one naming the same
    resource overwrites the heavier one's value (updateInstanceTypeCapacity)."""
    store = OverlayStore(
        [
            parse_overlay(overlay("heavy", [itype("m5.large")], weight=50, capacity={"example.com/fuse": "5"})),
            parse_overlay(overlay("light", [itype("m5.large")], weight=10, capacity={"example.com/fuse": "55"})),
        ],
        profile(GENERAL).pools,
        CAT,
        "us-west-2",
    )
    got = store.get("general", CAT.get("m5.large"), {})
    assert got is not None and got.capacity == {"example.com/fuse": 55}
    assert store.errors == {}


def test_hugepages_capacity_is_reserved_from_memory() -> None:
    """InstanceType.precompute (v1.8): hugepages-<size> in the overlaid capacity comes off allocatable
    memory, never below zero. A 4 GiB pod launches an m5.large (5.9 GiB allocatable); with 1 GiB of it in
    hugepages still (its node has 1 GiB less memory), with 4 GiB an m5.xlarge; 64 GiB on both types leave
    no memory."""
    pool = {**GENERAL, "instanceTypes": ["m5.large", "m5.xlarge"], "capacityTypes": ["on-demand"]}

    def launched(*overlays: dict[str, Any]) -> tuple[str | None, dict[str, int]]:
        """The type launched for the pod, and the allocatable an m5.large node would have."""
        result, karp = run(profile(pool), make_pod("a", cpu=500, mem_gib=4), overlays=overlays)
        large = next(o for o in karp.models[0].options if o.type.name == "m5.large")
        return (result.new_nodes[0].instance_type if result.new_nodes else None), dict(large.node.allocatable)

    kind, plain = launched()
    assert kind == "m5.large"
    kind, one = launched(overlay("one", [itype("m5.large")], capacity={"hugepages-2Mi": "1Gi"}))
    assert kind == "m5.large"
    assert one["memory"] == plain["memory"] - 2**30 and one["hugepages-2Mi"] == 2**30
    kind, four = launched(overlay("four", [itype("m5.large")], capacity={"hugepages-2Mi": "4Gi"}))
    assert kind == "m5.xlarge" and four["memory"] == plain["memory"] - 4 * 2**30
    kind, none = launched(overlay("all", [itype("m5.large", "m5.xlarge")], capacity={"hugepages-1Gi": "64Gi"}))
    assert kind is None and none["memory"] == 0


def test_overlay_selects_by_nodepool_and_zone() -> None:
    """getOverlaidOfferings: the NodePool's name and template labels take part in matching, and a zone
    requirement prices only that zone's offerings."""
    store = OverlayStore(
        [parse_overlay(overlay("z", [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["general"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]},
        ], price="0.001"))],
        profile(GENERAL, {**GENERAL, "name": "other"}).pools,
        CAT,
        "us-west-2",
    )
    m5 = CAT.get("m5.large")
    base = {("us-west-2a", "spot"): 0.04, ("us-west-2b", "spot"): 0.04}
    got = store.get("general", m5, base)
    assert got is not None and got.prices == {("us-west-2a", "spot"): 0.001}
    assert store.get("other", m5, base) is None


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"requirements": [{"key": "a", "operator": "Near"}]}, "spec.requirements[0]", "operator 'Near'"),
        ({"requirements": [], "price": "1", "priceAdjustment": "+1"}, "spec", "mutually exclusive"),
        ({"requirements": [], "priceAdjustment": "+x%"}, "spec.priceAdjustment", "invalid priceAdjustment"),
        ({"requirements": [], "capacity": {"example.com/fuse": "lots"}}, "spec.capacity.example.com/fuse", "invalid quantity"),
        # what the NodeOverlay CRD's rules and patterns make the API server reject
        ({"requirements": [], "priceAdjustment": "-150%"}, "spec.priceAdjustment", "the CRD's pattern"),
        ({"requirements": [], "price": ".5"}, "spec.price", "invalid price"),
        ({"requirements": [], "price": "1", "weight": 0}, "spec.weight", "from 1 to 10000"),
        ({"requirements": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}, "spec.requirements[0]",
         'label "kubernetes.io/hostname" is restricted'),
        ({"requirements": [{"key": "karpenter.sh/nodeclaim", "operator": "Exists"}]}, "spec.requirements[0]",
         'label domain "karpenter.sh" is restricted'),
        ({"requirements": [{"key": "team", "operator": "NotIn"}]}, "spec.requirements[0]", "must have a value"),
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["-1"]}]},
         "spec.requirements[0]", "single positive integer"),
    ],
)
def test_bad_overlay_is_an_input_error(spec: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_overlay({"kind": "NodeOverlay", "metadata": {"name": "x"}, "spec": spec}, "o.yaml")
    assert err.value.where == f"o.yaml: NodeOverlay x: {field}"
    assert message in err.value.message


def test_overlay_selects_offerings_by_zone_id() -> None:
    """The AWS provider's offerings carry topology.k8s.aws/zone-id: an overlay on usw2-az2 (us-west-2b in
    the test catalog) prices only that zone's offerings, so the pod launches there."""
    zone_id = {"key": "topology.k8s.aws/zone-id", "operator": "In", "values": ["usw2-az2"]}
    cheap = overlay("az2", [itype("m5.xlarge"), zone_id], price="0.01")
    result, _ = run(profile(GENERAL), make_pod("a", cpu=3000, mem_gib=4), overlays=(cheap,))
    p = placed(result, "a")
    assert (p["instance_type"], p["zone"]) == ("m5.xlarge", "us-west-2b")
    assert result.new_nodes[0].hourly_price == pytest.approx(0.01)


def test_contradictory_overlay_requirements_select_types_without_the_label() -> None:
    """Karpenter intersects an overlay's requirements on one key; Exists with DoesNotExist leaves nothing,
    which it keeps as DoesNotExist: the overlay prices every type without a GPU (case 8675322), not none."""
    both = [{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": op} for op in ("Exists", "DoesNotExist")]
    dear = overlay("dear", both, price="40")
    assert [str(r) for r in parse_overlay(dear).requirements] == ["karpenter.k8s.aws/instance-gpu-name DoesNotExist"]
    result, _ = run(profile(GENERAL), make_pod("a", cpu=3000, mem_gib=4), overlays=(dear,))
    assert result.new_nodes[0].hourly_price == pytest.approx(40)


def test_overlay_requirements_that_intersect_stay_as_written() -> None:
    """In with NotIn on one key, something left: both apply as written."""
    reqs = [itype("m5.xlarge", "m5.4xlarge"), {"key": "node.kubernetes.io/instance-type", "operator": "NotIn",
                                              "values": ["m5.xlarge"]}]
    assert len(parse_overlay(overlay("o", reqs, price="1")).requirements) == 2


def test_overlay_on_a_restricted_label_is_left_out_as_karpenter_leaves_it_out() -> None:
    """RuntimeValidate: a requirement on a restricted domain's label that is not well known (a typo of a
    Karpenter label) is not applied anywhere (ValidationSucceeded=False, RuntimeValidation), rather than
    repricing every type, as a NotIn on a label no type has would."""
    typo = overlay("typo", [{"key": "karpenter.k8s.aws/instance-famly", "operator": "NotIn", "values": ["x"]}],
                   price="0.01")
    result, karp = run(profile(GENERAL), make_pod("a", cpu=3000, mem_gib=4), overlays=(typo,))
    assert karp.overlay_errors["typo"].startswith("RuntimeValidation: invalid value: label karpenter.k8s.aws/")
    assert result.new_nodes[0].hourly_price == pytest.approx(0.08)  # m5.xlarge spot, not repriced

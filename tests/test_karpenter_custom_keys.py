"""Requirements on custom label keys as Karpenter's scheduler holds them (sigs.k8s.io/karpenter v1.8
``pkg/scheduling/requirement.go`` and ``NodeClaim.CanAdd``): a pod's ``NotIn``/``DoesNotExist`` on a key the
NodePool does not define passes the pool's check and stays with its claim, so a later pod may select that key
on the claim; a pool's own ``NotIn``/``Exists`` on a custom key is held the same way."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kgpu.model.objects import NodeSelector, Pod, Requirement, Term
from kgpu.sim.provisioners.karpenter.requirements import LabelSet
from kgpu.sim.simulate import PROVISIONED, UNSCHEDULABLE
from test_provision_karpenter import GENERAL, make_pod, placed, profile, sim


def with_affinity(pod: Pod, *reqs: Requirement) -> Pod:
    return replace(pod, spec=replace(pod.spec, affinity=NodeSelector((Term(tuple(reqs)),))))


def node_of(result, name: str):  # type: ignore[no-untyped-def]
    p = placed(result, name)
    return next(st.node for st in result.nodes if st.name == p["node"])


# --- the algebra ------------------------------------------------------------------------------------------


def test_intersections_follow_karpenters_requirement() -> None:
    not_batch = LabelSet.of("NotIn", ["batch"])
    assert not_batch.intersection(LabelSet.of("In", ["web", "batch"])) == LabelSet.of("In", ["web"])
    assert not_batch.intersection(LabelSet.of("NotIn", ["x"])) == LabelSet.of("NotIn", ["batch", "x"])
    assert not_batch.intersection(LabelSet.of("DoesNotExist")).operator == "DoesNotExist"
    # bounds that leave nothing collapse to DoesNotExist; a concrete set drops the values outside them
    assert LabelSet.of("Gt", ["5"]).intersection(LabelSet.of("Lt", ["5"])) == LabelSet.of("DoesNotExist")
    assert LabelSet.of("Gt", ["5"]).intersection(LabelSet.of("Lt", ["6"])).operator == "Exists"  # as in Go
    assert LabelSet.of("Gt", ["5"]).intersection(LabelSet.of("In", ["3", "7", "x"])) == LabelSet.of(
        "In", ["7"]
    )
    assert LabelSet.of("Exists").intersection(LabelSet.of("Gt", ["2"])).text("k") == "k Exists >2"


def test_admits_lets_exclusions_meet_exclusions() -> None:
    """``Requirements.Intersects``: no common value is still compatible when both sides only exclude."""
    dne = LabelSet.of("DoesNotExist")
    assert not dne.meets(LabelSet.of("NotIn", ["a"]))
    assert dne.admits(LabelSet.of("NotIn", ["a"]))
    assert not dne.admits(LabelSet.of("In", ["a"]))
    assert not LabelSet.of("In", ["a"]).admits(LabelSet.of("NotIn", ["a"]))
    assert LabelSet.of("NotIn", ["a"]).admits(LabelSet.of("In", ["b"]))


@pytest.mark.parametrize(
    ("held", "label"),
    [
        (LabelSet.of("In", ["web"]), "web"),
        (LabelSet.of("DoesNotExist"), None),
        (LabelSet.of("NotIn", ["0", "1"]), "2"),
        (LabelSet.of("Exists").intersection(LabelSet.of("Gt", ["9"])), "10"),
        (
            LabelSet.of("Gt", ["3"])
            .intersection(LabelSet.of("Lt", ["5"]))
            .intersection(LabelSet.of("NotIn", ["4"])),
            None,
        ),
    ],
)
def test_label_the_node_gets(held: LabelSet, label: str | None) -> None:
    assert held.label() == label


def test_text_is_karpenters() -> None:
    many = LabelSet.of("In", [f"v{i}" for i in range(7)])
    assert many.text("k") == "k In [v0 v1 v2 v3 v4 and 2 others]"


# --- claims -----------------------------------------------------------------------------------------------


def test_a_pod_selecting_a_key_an_earlier_pod_excluded_joins_its_claim() -> None:
    """The bigger pod goes first (Karpenter's queue order) and opens a claim holding ``team NotIn [batch]``;
    the smaller one selects ``team: web``, which the pool alone does not define, and joins that claim: one
    node, labelled ``team=web``, so kube-scheduler binds both."""
    first = with_affinity(make_pod("first", cpu=2000), Requirement("team", "NotIn", ("batch",)))
    second = make_pod("second", cpu=500, selector={"team": "web"})
    result = sim(profile(GENERAL), first, second)
    a, b = placed(result, "first"), placed(result, "second")
    assert a["phase"] == b["phase"] == PROVISIONED, (a["reason"], b["reason"])
    assert a["node"] == b["node"]
    assert node_of(result, "second").labels["team"] == "web"


def test_alone_the_selecting_pod_finds_no_known_values() -> None:
    p = placed(sim(profile(GENERAL), make_pod("second", selector={"team": "web"})), "second")
    assert p["phase"] == UNSCHEDULABLE
    assert 'label "team" does not have known values' in p["reason"]


def test_a_pod_selecting_the_excluded_value_does_not_join() -> None:
    first = with_affinity(make_pod("first", cpu=2000), Requirement("team", "NotIn", ("batch",)))
    second = make_pod("second", cpu=500, selector={"team": "batch"})
    result = sim(profile(GENERAL), first, second)
    assert placed(result, "first")["phase"] == PROVISIONED
    assert placed(result, "second")["phase"] == UNSCHEDULABLE
    # the claim launched with the made-up label Karpenter gives a NotIn key
    assert node_of(result, "first").labels["team"] == "0"


# --- the pool's own requirements on a custom key ----------------------------------------------------------


def native_pool(*reqs: dict[str, object]) -> dict[str, object]:
    return {
        "name": "native",
        "kind": "karpenter",
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]},
            *reqs,
        ],
    }


def test_pool_not_in_on_a_custom_key_lets_a_pod_select_another_value() -> None:
    prof = profile(native_pool({"key": "team", "operator": "NotIn", "values": ["batch"]}))
    result = sim(
        prof, make_pod("web", selector={"team": "web"}), make_pod("batch", selector={"team": "batch"})
    )
    assert placed(result, "web")["phase"] == PROVISIONED
    assert node_of(result, "web").labels["team"] == "web"
    refused = placed(result, "batch")
    assert refused["phase"] == UNSCHEDULABLE
    assert "key team, team In [batch] not in team NotIn [batch]" in refused["reason"]


def test_pool_exists_on_a_custom_key_gives_the_node_a_value() -> None:
    prof = profile(native_pool({"key": "team", "operator": "Exists"}))
    pod = with_affinity(make_pod("a"), Requirement("team", "Exists"))
    result = sim(prof, pod)
    assert placed(result, "a")["phase"] == PROVISIONED
    assert node_of(result, "a").labels["team"] == "0"


# --- Karpenter's queue: a pod that found no place is tried again after a later pod found one ---------------


def test_a_pod_that_failed_joins_a_claim_a_later_pod_opened() -> None:
    """The bigger pod selects ``team: web`` and goes first: no pool defines ``team``, so it fails. The smaller
    one opens a claim holding ``team NotIn [batch]``; the queue tries the first again and it joins."""
    first = make_pod("first", cpu=2000, selector={"team": "web"})
    second = with_affinity(make_pod("second", cpu=500), Requirement("team", "NotIn", ("batch",)))
    result = sim(profile(GENERAL), first, second)
    a, b = placed(result, "first"), placed(result, "second")
    assert a["phase"] == b["phase"] == PROVISIONED, (a["reason"], b["reason"])
    assert a["node"] == b["node"]
    assert node_of(result, "first").labels["team"] == "web"


def test_a_not_in_the_claim_holds_admits_a_does_not_exist_the_template_refused() -> None:
    """The pool holds ``tier Gt 2``, which a ``DoesNotExist`` does not meet: the first pod fails. The second
    (``tier NotIn [4]``) opens a claim holding ``NotIn [4] >2``; two exclusions are compatible in Karpenter
    (``Requirements.Intersects``), so the first pod joins it when tried again, and the claim holds
    ``DoesNotExist``: the node gets no ``tier`` label (as Karpenter's oracle answers, case 128099391)."""
    prof = profile(native_pool({"key": "tier", "operator": "Gt", "values": ["2"]}))
    first = with_affinity(make_pod("first", cpu=2000), Requirement("tier", "DoesNotExist"))
    second = with_affinity(make_pod("second", cpu=500), Requirement("tier", "NotIn", ("4",)))
    alone = placed(sim(prof, first), "first")
    assert alone["phase"] == UNSCHEDULABLE
    assert "key tier, tier DoesNotExist not in tier Exists >2" in alone["reason"]
    result = sim(prof, first, second)
    a, b = placed(result, "first"), placed(result, "second")
    assert a["phase"] == b["phase"] == PROVISIONED, (a["reason"], b["reason"])
    assert a["node"] == b["node"]
    assert "tier" not in node_of(result, "first").labels


def test_a_claims_hostname_is_its_own() -> None:
    """Karpenter gives each claim ``kubernetes.io/hostname In [<its name>]``: a pod excluding one hostname does
    not make the key open, and a pod selecting another hostname joins no claim (Karpenter's oracle agrees)."""
    first = with_affinity(make_pod("first", cpu=2000), Requirement("kubernetes.io/hostname", "NotIn", ("x",)))
    second = make_pod("second", cpu=500, selector={"kubernetes.io/hostname": "y"})
    result = sim(profile(GENERAL), first, second)
    assert placed(result, "first")["phase"] == PROVISIONED
    refused = placed(result, "second")
    assert refused["phase"] == UNSCHEDULABLE
    assert 'label "kubernetes.io/hostname" does not have known values' in refused["reason"]

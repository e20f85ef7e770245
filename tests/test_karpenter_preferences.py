"""Karpenter's preferences for new nodes: preferred node affinity is required until relaxed, heaviest first,
before PreferNoSchedule taints are tolerated (sigs.k8s.io/karpenter v1.8 ``scheduling/preferences.go`` and
``NewPodRequirements``). Cases transcribed from ``pkg/controllers/provisioning/scheduling/suite_test.go``,
Context "Preferential Fallback" (named in each docstring), on the test catalog's two zones."""

from __future__ import annotations

from dataclasses import replace

from kgpu.model.objects import NodeSelector, Pod, PreferredTerm, Requirement, Term
from kgpu.sim.simulate import PROVISIONED, UNSCHEDULABLE
from test_provision_karpenter import GENERAL, make_pod, placed, profile, sim

ZONE = "topology.kubernetes.io/zone"
TYPE = "node.kubernetes.io/instance-type"


def term(key: str, *values: str, op: str = "In") -> Term:
    return Term((Requirement(key, op, values),))


def prefer(pod: Pod, *weighted: tuple[int, Term], required: tuple[Term, ...] = ()) -> Pod:
    spec = replace(
        pod.spec,
        preferred=tuple(PreferredTerm(w, t) for w, t in weighted),
        affinity=NodeSelector(required) if required else None,
    )
    return replace(pod, spec=spec)


def test_relaxes_all_node_affinity_terms() -> None:
    """Preferences: "should relax all node affinity terms": two preferences no offering meets are dropped
    one after the other and the pod still gets a node."""
    pod = prefer(make_pod("p"), (1, term(ZONE, "invalid")), (1, term(TYPE, "invalid")))
    p = placed(sim(profile(GENERAL), pod), "p")
    assert p["phase"] == PROVISIONED


def test_relaxes_to_lighter_weights() -> None:
    """Preferences: "should relax to use lighter weights": the heaviest preference (a zone the pool does not
    have) goes first, the next heaviest decides the zone."""
    pod = prefer(
        make_pod("p"),
        (1, term(ZONE, "us-west-2a")),
        (100, term(ZONE, "us-west-2c")),
        (50, term(ZONE, "us-west-2b")),
    )
    assert placed(sim(profile(GENERAL), pod), "p")["zone"] == "us-west-2b"


def test_heaviest_preference_is_required_first_even_when_it_costs_more() -> None:
    """NewPodRequirements treats the heaviest preference as a requirement: a preferred bigger type or
    on-demand capacity is launched although a cheaper offering would hold the pod."""
    big = prefer(make_pod("big"), (10, term(TYPE, "m5.4xlarge")), (90, term(TYPE, "m5.xlarge")))
    assert placed(sim(profile(GENERAL), big), "big")["instance_type"] == "m5.xlarge"
    od = prefer(make_pod("od"), (1, term("karpenter.sh/capacity-type", "on-demand")))
    assert placed(sim(profile(GENERAL), od), "od")["capacity_type"] == "on-demand"
    plain = placed(sim(profile(GENERAL), make_pod("plain")), "plain")
    assert (plain["instance_type"], plain["capacity_type"]) == ("m5.large", "spot")


def test_preference_applies_with_each_required_term_before_it_is_dropped() -> None:
    """Required: "should relax multiple terms", with a preference: the first required term that any
    offering meets is kept (the invalid one is dropped first), the preference still holds with it."""
    pod = prefer(
        make_pod("p"),
        (1, term(TYPE, "m5.xlarge")),
        required=(term(ZONE, "invalid"), term(ZONE, "us-west-2b"), term(ZONE, "us-west-2a")),
    )
    p = placed(sim(profile(GENERAL), pod), "p")
    assert (p["zone"], p["instance_type"]) == ("us-west-2b", "m5.xlarge")


def test_final_required_term_is_not_relaxed() -> None:
    """Required: "should not relax the final term": preferences go, the last required term stays."""
    pod = prefer(make_pod("p"), (1, term(TYPE, "m5.xlarge")), required=(term(ZONE, "invalid"),))
    assert placed(sim(profile(GENERAL), pod), "p")["phase"] == UNSCHEDULABLE


def test_prefer_no_schedule_is_tolerated_only_after_preferences() -> None:
    """Preferences: "should tolerate PreferNoSchedule taint only after trying to relax Affinity terms": the
    only pool has a PreferNoSchedule taint; the preferences that nothing meets are relaxed first, then the
    taint is tolerated and the pod gets a node of that pool. With an untainted pool that meets the
    preference, the preference wins over the taint-free fallback of the tainted one."""
    tainted = {**GENERAL, "name": "tainted", "taints": [{"key": "spare", "effect": "PreferNoSchedule"}]}
    pod = prefer(make_pod("p"), (1, term(ZONE, "invalid")), (1, term(TYPE, "invalid")))
    assert placed(sim(profile(tainted), pod), "p")["pool"] == "tainted"
    untainted = {**GENERAL, "name": "plain", "weight": 1, "instanceTypes": ["m5.4xlarge"]}
    want_big = prefer(make_pod("q"), (1, term(TYPE, "m5.4xlarge")))
    # the untainted pool meets the preference; the heavier tainted pool only meets it by tolerating the taint
    assert placed(sim(profile({**tainted, "weight": 50}, untainted), want_big), "q")["pool"] == "plain"

"""Karpenter's zone and hostname topology spread for new NodeClaims, transcribed from sigs.k8s.io/karpenter
v1.8 ``pkg/controllers/provisioning/scheduling/topology_test.go`` (Describe "Topology") and ``suite_test.go``
(Context "Topology"). Each test names the upstream ``It``; where upstream provisions twice, the first
round's nodes and pods are the cluster of the second.

Upstream's fake cloud provider offers every type in test-zone-1..3; here one small type (2 vCPU, so a
1.1-CPU pod fills a node, as upstream's ``rr`` does) and one large are offered there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from builders import node_dict, pod_dict
from builders_catalog import make_instance_type
from kgpu.catalog import Catalog, RegionPricing
from kgpu.model.inputs import Objects
from kgpu.model.load import parse_documents
from kgpu.model.profile import parse_profile
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import PROVISIONED, SimulationResult, simulate

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
LABELS = {"test": "test"}


def _catalog() -> Catalog:
    rows = [
        (make_instance_type("m5.large", vcpus=2, memory_mib=8192), 0.096),
        (make_instance_type("m5.4xlarge", vcpus=16, memory_mib=65536), 0.768),
    ]
    types = {t.name: t for t, _ in rows}
    ids = tuple(f"usw2-az{i + 1}" for i in range(len(ZONES)))
    pricing = {
        (t.name, "us-west-2"): RegionPricing(t.name, "us-west-2", od, None, None, ZONES, ids)
        for t, od in rows
    }
    return Catalog(types, pricing, "us-west-2")


CAT = _catalog()


def pool(name: str = "default", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "karpenter", "requirements": {"categories": ["m"]}, **extra}


def provision(
    pods: list[dict[str, Any]], *pools: dict[str, Any], cluster: list[dict[str, Any]] | None = None
) -> SimulationResult:
    profile = parse_profile(
        {
            "metadata": {"name": "t"},
            "provider": "eks",
            "autoscaler": "karpenter",
            "cluster": {"zones": list(ZONES)},
            "monitoring": {"enabled": False},
            "pools": list(pools) or [pool()],
        }
    )
    objs = parse_documents(cluster, "cluster.yaml") if cluster else Objects()
    return simulate(objs, parse_documents(pods, "pods.yaml"), provisioner=provisioner_for(profile, CAT))


def spread(key: str = ZONE, skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": LABELS},
        **extra,
    }


def pods(
    n: int,
    *constraints: dict[str, Any],
    cpu: str | None = None,
    labels: dict[str, str] | None = LABELS,
    prefix: str = "p",
    **kw: Any,
) -> list[dict[str, Any]]:
    return [
        pod_dict(f"{prefix}-{i}", cpu=cpu, labels=labels, spread=list(constraints) or None, **kw)
        for i in range(n)
    ]


def skew(result: SimulationResult, key: str = ZONE, running: dict[str, int] | None = None) -> list[int]:
    """ExpectSkew: matching pods per domain (new nodes' zones, or node names for hostname), plus the
    ``running`` pods of earlier rounds per zone."""
    counts: Counter[str] = Counter(running or {})
    for p in result.placements:
        if p.pod.labels.get("test") == "test" and p.phase == PROVISIONED:
            counts[p.new_node.zone if key == ZONE else p.node] += 1
    return sorted(counts.values())


def pending(result: SimulationResult) -> int:
    return sum(1 for p in result.placements if p.node is None)


def existing_nodes(*zones: str, labelled: int = 1) -> list[dict[str, Any]]:
    """Nodes of earlier rounds, one per zone, each running ``labelled`` pods that match LABELS."""
    docs: list[dict[str, Any]] = []
    for i, zone in enumerate(zones):
        name = f"old-{i}"
        docs.append(
            node_dict(name, cpu="2", labels={ZONE: zone, HOSTNAME: name, "karpenter.sh/nodepool": "default"})
        )
        for j in range(labelled):
            docs.append(pod_dict(f"old-{i}-{j}", cpu="1.1", labels=LABELS, node_name=name, phase="Running"))
    return docs


# --- topology_test.go: Topology ---------------------------------------------------------------------------


def test_should_ignore_unknown_topology_keys() -> None:
    """A DoNotSchedule constraint on a key no node and no pool has: kgpu's Karpenter does not model other
    keys, so it says so (karpenter-topology) instead of leaving the pod pending as Karpenter does."""
    result = provision([*pods(1, spread("unknown")), pod_dict("plain")])
    warned = {p.pod.name: [w.code for w in p.warnings] for p in result.placements}
    assert warned == {"p-0": ["karpenter-topology"], "plain": []}


def test_should_not_spread_when_a_nil_label_selector_is_defined() -> None:
    c = spread()
    del c["labelSelector"]
    result = provision(pods(2, c))
    assert skew(result) == [2]


# --- Zonal ------------------------------------------------------------------------------------------------


def test_should_balance_pods_across_zones_match_labels() -> None:
    result = provision(pods(4, spread()))
    assert skew(result) == [1, 1, 2]


def test_should_balance_pods_across_zones_match_expressions() -> None:
    c = spread()
    c["labelSelector"] = {"matchExpressions": [{"key": "test", "operator": "In", "values": ["test"]}]}
    assert skew(provision(pods(4, c))) == [1, 1, 2]


def test_should_respect_nodepool_zonal_constraints() -> None:
    assert skew(provision(pods(4, spread()), pool(zones=list(ZONES)))) == [1, 1, 2]


def test_should_respect_nodepool_zonal_constraints_subset_with_requirements() -> None:
    """The domains are the pool's two zones only."""
    assert skew(provision(pods(4, spread()), pool(zones=["test-zone-1", "test-zone-2"]))) == [2, 2]


def test_should_respect_nodepool_zonal_constraints_subset_with_labels() -> None:
    assert skew(provision(pods(4, spread()), pool(zones=["test-zone-1"]))) == [4]


def test_should_respect_nodepool_zonal_constraints_subset_with_labels_across_nodepools() -> None:
    result = provision(pods(4, spread()), pool("a", zones=["test-zone-1"]), pool("b", zones=["test-zone-2"]))
    assert skew(result) == [2, 2]


def test_should_respect_nodepool_zonal_constraints_existing_pod() -> None:
    """A pod already runs in test-zone-3, which the pool cannot launch in: two per zone at most in the
    others before the skew is violated; the rest stay pending."""
    cluster = existing_nodes("test-zone-3")
    result = provision(
        pods(6, spread(), cpu="1.1"), pool(zones=["test-zone-1", "test-zone-2"]), cluster=cluster
    )
    assert skew(result, running={"test-zone-3": 1}) == [1, 2, 2]
    assert pending(result) == 2


def test_should_schedule_to_the_non_minimum_domain_if_its_all_thats_available() -> None:
    """maxSkew 5, one pod in zone-1 and zone-2 each, the pool only in zone-3: six there, the rest pending."""
    cluster = existing_nodes("test-zone-1", "test-zone-2")
    result = provision(pods(10, spread(skew=5), cpu="1.1"), pool(zones=["test-zone-3"]), cluster=cluster)
    assert skew(result, running={"test-zone-1": 1, "test-zone-2": 1}) == [1, 1, 6]
    assert pending(result) == 4


def test_should_only_schedule_to_minimum_domains_if_already_violating_max_skew() -> None:
    """Zone-1 holds three pods (on a full node), the others none: three new pods go to the emptier zones,
    one and two."""
    cluster = existing_nodes("test-zone-1", labelled=0)
    cluster += [
        pod_dict(f"old-0-{j}", cpu="0.6", labels=LABELS, node_name="old-0", phase="Running") for j in range(3)
    ]
    result = provision(pods(3, spread(), cpu="1.1"), cluster=cluster)
    assert skew(result, running={"test-zone-1": 3}) == [1, 2, 3]


def test_should_not_violate_max_skew_when_unsat_do_not_schedule() -> None:
    cluster = existing_nodes("test-zone-1")
    result = provision(
        pods(10, spread(), cpu="1.1"), pool(zones=["test-zone-2", "test-zone-3"]), cluster=cluster
    )
    assert skew(result, running={"test-zone-1": 1}) == [1, 2, 2]
    assert pending(result) == 6


def test_should_not_violate_max_skew_when_unsat_do_not_schedule_discover_domains() -> None:
    """The zone-1 pod has no constraint of its own; its node's zone is a domain all the same."""
    cluster = existing_nodes("test-zone-1")
    result = provision(
        pods(10, spread(), cpu="1.1"), pool(zones=["test-zone-2", "test-zone-3"]), cluster=cluster
    )
    assert skew(result, running={"test-zone-1": 1}) == [1, 2, 2]


def test_should_only_count_running_scheduled_pods_with_matching_labels() -> None:
    """should only count running/scheduled pods with matching labels scheduled to nodes with a
    corresponding domain: two in zone-1, one in zone-2; unlabelled, other-namespace, finished pods and a node
    without a zone do not count. Two new pods end with 2, 2, 1 (the second goes to zone-2 or zone-3)."""
    cluster = [  # too small for the new pods: only Karpenter's new nodes can take them
        node_dict("first", cpu="1", labels={ZONE: "test-zone-1"}),
        node_dict("second", cpu="1", labels={ZONE: "test-zone-2"}),
        node_dict("third", cpu="1"),
        pod_dict("unlabelled", node_name="first", phase="Running"),
        pod_dict("no-domain", labels=LABELS, node_name="third", phase="Running"),
        pod_dict("wrong-ns", labels=LABELS, node_name="first", phase="Running", namespace="other"),
        pod_dict("failed", labels=LABELS, node_name="first", phase="Failed"),
        pod_dict("succeeded", labels=LABELS, node_name="first", phase="Succeeded"),
        pod_dict("a", labels=LABELS, node_name="first", phase="Running"),
        pod_dict("b", labels=LABELS, node_name="first", phase="Running"),
        pod_dict("c", labels=LABELS, node_name="second", phase="Running"),
    ]
    result = provision(pods(2, spread(), cpu="3.5", prefix="new"), cluster=cluster)
    assert skew(result, running={"test-zone-1": 2, "test-zone-2": 1}) == [1, 2, 2]
    assert "test-zone-3" in {p.new_node.zone for p in result.placements if p.phase == PROVISIONED}


def test_should_handle_interdependent_selectors() -> None:
    """The pods do not match their own hostname constraint's selector: no count grows, all share a node."""
    result = provision(pods(5, spread(HOSTNAME), labels=None))
    assert len({p.node for p in result.placements}) == 1 and pending(result) == 0


def test_should_respect_min_domains_constraints() -> None:
    """minDomains 3 with two zones: the minimum is 0, so one pod per zone; the third stays pending."""
    result = provision(pods(3, spread(minDomains=3)), pool(zones=["test-zone-1", "test-zone-2"]))
    assert skew(result) == [1, 1]
    assert pending(result) == 1


def test_satisfied_min_domains_constraints_equal_should_allow_expected_pod_scheduling() -> None:
    result = provision(pods(11, spread(minDomains=3)), pool(zones=list(ZONES)))
    assert skew(result) == [3, 4, 4]


def test_satisfied_min_domains_constraints_greater_than_minimum_should_allow_expected_pod_scheduling() -> (
    None
):
    result = provision(pods(11, spread(minDomains=2)), pool(zones=list(ZONES)))
    assert skew(result) == [3, 4, 4]


# --- Hostname ---------------------------------------------------------------------------------------------


def test_should_balance_pods_across_nodes() -> None:
    assert skew(provision(pods(4, spread(HOSTNAME))), HOSTNAME) == [1, 1, 1, 1]


def test_should_balance_pods_on_the_same_hostname_up_to_maxskew() -> None:
    assert skew(provision(pods(4, spread(HOSTNAME, skew=4))), HOSTNAME) == [4]


def test_balance_multiple_deployments_with_hostname_topology_spread() -> None:
    """Two deployments of two pods, each spread by hostname over its own app label: two nodes suffice."""
    docs = []
    for app in ("app1", "app2"):
        c = {**spread(HOSTNAME), "labelSelector": {"matchLabels": {"app": app}}}
        docs += [pod_dict(f"{app}-{i}", labels={"app": app}, spread=[c]) for i in range(2)]
    result = provision(docs)
    assert pending(result) == 0 and len(result.new_nodes) == 2


def test_balance_multiple_deployments_with_hostname_topology_spread_and_varying_arch() -> None:
    """balance multiple deployments with hostname topology spread & varying arch: the two apps cannot
    share nodes, so four."""
    docs = []
    for app, zone in (("app1", "test-zone-1"), ("app2", "test-zone-2")):
        c = {**spread(HOSTNAME), "labelSelector": {"matchLabels": {"app": app}}}
        docs += [
            pod_dict(f"{app}-{i}", labels={"app": app}, spread=[c], node_selector={ZONE: zone})
            for i in range(2)
        ]
    result = provision(docs)
    assert pending(result) == 0 and len(result.new_nodes) == 4


# --- Combined Hostname and Zonal Topology -----------------------------------------------------------------


def test_should_spread_pods_while_respecting_both_constraints_hostname_and_zonal() -> None:
    topology = (spread(), spread(HOSTNAME, skew=3))
    result = provision(pods(2, *topology))
    assert skew(result) == [1, 1]
    result = provision(pods(5, *topology))
    assert skew(result) == [1, 2, 2]
    result = provision(pods(21, *topology))
    assert skew(result) == [7, 7, 7]
    assert max(skew(result, HOSTNAME)) <= 3


def test_should_spread_pods_while_respecting_both_constraints_zone_limited_pools() -> None:
    """should spread pods while respecting both constraints (zone DoNotSchedule, hostname ScheduleAnyway):
    the pool is in zone-1 and zone-2, a second pool in zone-3 has a limit of 0 CPU: one pod per zone, the
    rest pending."""
    topology = (spread(), spread(HOSTNAME, when="ScheduleAnyway"))
    result = provision(
        pods(10, *topology),
        pool("a", zones=["test-zone-1", "test-zone-2"]),
        pool("b", zones=["test-zone-3"], limits={"cpu": "0"}),
    )
    assert skew(result) == [1, 1]
    assert pending(result) == 8


# --- Combined Zonal Topology and Node Affinity ------------------------------------------------------------


def test_should_limit_spread_options_by_node_selector() -> None:
    """Five pods selecting zone-1 and five selecting zone-2: each group spreads within its zone only."""
    docs = pods(5, spread(), node_selector={ZONE: "test-zone-1"}, prefix="a")
    docs += pods(5, spread(), node_selector={ZONE: "test-zone-2"}, prefix="b")
    assert skew(provision(docs)) == [5, 5]


def test_should_limit_spread_options_by_required_node_affinity() -> None:
    """Pods restricted to zone-1 and zone-2 by required affinity: the domains they count are those two."""
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["test-zone-1", "test-zone-2"]}]}
    result = provision(pods(6, spread(), affinity_terms=[term]))
    assert skew(result) == [3, 3]


# --- suite_test.go: Topology --------------------------------------------------------------------------------


def test_should_balance_pods_across_zones_with_in_flight_nodes() -> None:
    """Four pods in one batch: 1, 1, 2; the next five go on the same claims' zones: 3, 3, 3."""
    assert skew(provision(pods(4, spread()))) == [1, 1, 2]
    assert skew(provision(pods(9, spread()))) == [3, 3, 3]


def test_should_balance_pods_across_hostnames_with_in_flight_nodes() -> None:
    result = provision(pods(4, spread(HOSTNAME)))
    assert skew(result, HOSTNAME) == [1, 1, 1, 1] and len(result.new_nodes) == 4


# --- what kgpu adds ---------------------------------------------------------------------------------------


def test_a_zone_pool_at_its_limit_leaves_pods_pending() -> None:
    """One pool per zone, zone-3's capped at one node: six spread pods get two per zone where they can, and
    the pods zone-3 would need wait (Karpenter: all available instance types exceed limits)."""
    result = provision(
        pods(6, spread(), cpu="1.1"),
        pool("a", zones=["test-zone-1"]),
        pool("b", zones=["test-zone-2"]),
        pool("c", zones=["test-zone-3"], limits={"cpu": "2"}),
    )
    assert skew(result) == [1, 2, 2]
    [reason] = {p.reason for p in result.placements if p.node is None}
    assert "unsatisfiable topology constraint for topology spread, key=topology.kubernetes.io/zone" in reason
    assert 'exceed limits for nodepool "c"' in reason


def test_pods_without_constraints_that_match_count_on_claims() -> None:
    """Pods of the same app without a constraint of their own count where they land (Topology.Record)."""
    plain = pod_dict("plain", cpu="1.1", labels=LABELS, node_selector={ZONE: "test-zone-1"})
    result = provision([plain, *pods(2, spread(), cpu="1.1", prefix="s")])
    zones = sorted(p.new_node.zone for p in result.placements if p.pod.name.startswith("s-"))
    assert zones == ["test-zone-2", "test-zone-3"]


def test_a_pool_without_suitable_types_still_brings_its_zones() -> None:
    """Karpenter's domains are every NodePool's zones, whether or not an instance type suits the pool
    (buildDomainGroups): a second pool over all three zones that can launch nothing keeps zone-2 and
    zone-3 at 0, so the zone-1 pool takes one spread pod and the other waits."""
    result = provision(
        pods(2, spread(), cpu="1.1"),
        pool("a", zones=["test-zone-1"]),
        pool("b", requirements={"cpu": {"min": 1000}}),
    )
    assert skew(result) == [1] and pending(result) == 1


# --- ScheduleAnyway: required until relaxed (preferences.go removeTopologySpreadScheduleAnyway) ----------


def test_schedule_anyway_spreads_like_do_not_schedule_when_it_can() -> None:
    """Karpenter's first try for a pod treats a ScheduleAnyway constraint as required: the new nodes are
    balanced over the zones exactly as with DoNotSchedule."""
    soft = provision(pods(6, spread(when="ScheduleAnyway"), cpu="1.1"))
    hard = provision(pods(6, spread(), cpu="1.1"))
    assert skew(soft) == skew(hard) == [2, 2, 2]
    assert not any(w.code == "karpenter-preferences" for p in soft.placements for w in p.warnings)


def test_schedule_anyway_is_relaxed_when_it_cannot_be_met() -> None:
    """The only pool the pods tolerate launches in test-zone-1; a tainted pool makes test-zone-2 and -3
    domains too (nodeTaintsPolicy Ignore). With DoNotSchedule only maxSkew pods can launch, the rest stay
    pending; with ScheduleAnyway the constraint is dropped once it fails and every pod gets a node."""
    one_zone = pool("one-zone", zones=["test-zone-1"])
    tainted = pool(
        "tainted",
        zones=["test-zone-2", "test-zone-3"],
        taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
    )
    hard = provision(pods(3, spread(), cpu="1.1"), one_zone, tainted)
    assert pending(hard) == 2
    soft = provision(pods(3, spread(when="ScheduleAnyway"), cpu="1.1"), one_zone, tainted)
    assert pending(soft) == 0
    assert skew(soft) == [3]


def test_schedule_anyway_is_relaxed_after_preferred_node_affinity() -> None:
    """Relax order: the preferred zone goes before the ScheduleAnyway spread. The preference alone does not
    narrow the spread's domains (Karpenter counts them over the pod's StrictRequirements), so the first pod
    takes the preferred zone, and the next ones, for which that zone would break the skew, lose the
    preference and keep the spread: one pod per zone."""
    pref = [
        {
            "weight": 1,
            "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["test-zone-1"]}]},
        }
    ]
    result = provision(pods(3, spread(when="ScheduleAnyway"), cpu="1.1", preferred=pref))
    assert pending(result) == 0
    assert skew(result) == [1, 1, 1]
    zones = {p.pod.name: p.new_node.zone for p in result.placements if p.new_node is not None}
    assert zones["p-0"] == "test-zone-1"

"""Placement: kube-scheduler's filters, scoring and messages, through the fast scheduler.

The fast scheduler (classes, heaps, memoised filters) is checked against a naive reference that runs every
filter on every node for every pod and scores them all, on seeded random clusters.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from builders import (
    GPU_TAINT,
    GPU_TOLERATION,
    assert_scheduled,
    assert_unschedulable,
    make_node,
    make_pod,
    node_dict,
    placement,
    pod_dict,
)
from kgpu.model.load import parse_documents
from kgpu.model.objects import LabelSelector, Node, Pod, Requirement
from kgpu.model.predicates import (
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
    affinity_matches,
    filter_reasons,
    first_untolerated,
    selector_matches,
    term_matches,
    tolerated,
    unschedulable_message,
)
from kgpu.sim.scheduler.plugins.defaultpreemption import filters_part
from kgpu.sim.scheduler.plugins.topology import resolve_term
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler, score
from kgpu.sim.simulate import simulate


def run(nodes: list[dict], pods: list[dict], cluster_pods: list[dict] | None = None):
    cluster = parse_documents(nodes + (cluster_pods or []), "cluster.yaml")
    work = parse_documents(pods, "work.yaml")
    return simulate(cluster, work)


def test_gpu_taint_and_insufficient_gpu_message_in_kube_scheduler_words():
    """The DESIGN's example: one tainted GPU node the pod doesn't tolerate, two CPU nodes without GPUs."""
    nodes = [
        node_dict("gpu-1", gpus=1, taints=[GPU_TAINT]),
        node_dict("cpu-1"),
        node_dict("cpu-2"),
    ]
    result = run(nodes, [pod_dict("train", gpus=1)])
    assert_unschedulable(
        result,
        "train",
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu.",
    )


def test_tolerating_pod_lands_on_gpu_node():
    nodes = [node_dict("gpu-1", gpus=1, taints=[GPU_TAINT]), node_dict("cpu-1")]
    result = run(nodes, [pod_dict("train", gpus=1, tolerations=[GPU_TOLERATION])])
    assert_scheduled(result, "train", "gpu-1")


def test_each_node_reports_only_its_first_failing_filter():
    """A cordoned node that is also tainted and lacks GPUs reports only 'were unschedulable'; a full node
    reports every resource it lacks. Entries are sorted as strings, like Go's sort.Strings ('I' < 'T' < 'n')."""
    nodes = [
        node_dict("a", taints=[GPU_TAINT], unschedulable=True),
        node_dict("b", labels={"zone": "x"}, taints=[GPU_TAINT]),
        node_dict("c", labels={"zone": "y"}),
        node_dict("d", labels={"zone": "x"}, pods=0),
    ]
    result = run(nodes, [pod_dict("p", gpus=1, node_selector={"zone": "x"})])
    assert placement(result, "p").reason == (
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. "
        # every status is UnschedulableAndUnresolvable (d lacks the GPU in its whole allocatable)
        "no new claims to deallocate, preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )


def test_free_resources_shrink_as_pods_land():
    nodes = [node_dict("gpu-1", gpus=2, taints=[GPU_TAINT])]
    pods = [pod_dict(f"p{i}", gpus=1, tolerations=[GPU_TOLERATION]) for i in range(3)]
    result = run(nodes, pods)
    assert [p.phase for p in result.placements] == ["Scheduled", "Scheduled", "Unschedulable"]
    assert result.placements[2].reason == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_running_pods_use_resources_and_finished_pods_free_them():
    nodes = [node_dict("n", cpu="2")]
    running = [
        pod_dict("old", cpu="1500m", node_name="n", phase="Running"),
        pod_dict("done", cpu="2", node_name="n", phase="Succeeded"),
    ]
    result = run(nodes, [pod_dict("fits", cpu="500m"), pod_dict("too-big", cpu="1m")], running)
    assert_scheduled(result, "fits", "n")
    assert_unschedulable(result, "too-big", "0/1 nodes are available: 1 Insufficient cpu.")


def test_higher_priority_is_placed_first():
    nodes = [node_dict("n", cpu="1")]
    pods = [pod_dict("low", cpu="1", priority=0), pod_dict("high", cpu="1", priority=1000)]
    result = run(nodes, pods)
    assert_scheduled(result, "high", "n")
    assert placement(result, "low").phase == "Unschedulable"
    assert [p.pod.name for p in result.placements] == ["low", "high"]  # output keeps input order


def test_least_allocated_spreads_and_ties_go_to_the_first_name():
    nodes = [node_dict("b"), node_dict("a"), node_dict("c")]
    pods = [pod_dict(f"p{i}", cpu="1", memory="1Gi") for i in range(3)]
    result = run(nodes, pods)
    assert [p.node for p in result.placements] == ["a", "b", "c"]


def test_balanced_allocation_prefers_the_node_the_pod_balances():
    """Two nodes equally free by LeastAllocated; the pod evens out b's usage, so b scores higher."""
    nodes = [node_dict("a", cpu="4", memory="4Gi"), node_dict("b", cpu="4", memory="4Gi")]
    cluster = [
        pod_dict("x", cpu="2", memory="0", node_name="a", phase="Running"),
        pod_dict("y", cpu="0", memory="2Gi", node_name="b", phase="Running"),
    ]
    # The pod asks for cpu: on b it balances cpu against b's memory use, on a it piles onto cpu.
    result = run(nodes, [pod_dict("p", cpu="2", memory="0")], cluster)
    a, b = (NodeState(make_node(n, cpu="4", memory="4Gi"), 0) for n in "ab")
    a.add(make_pod("x", cpu="2", memory="0"))
    b.add(make_pod("y", cpu="0", memory="2Gi"))
    spec = make_pod("p", cpu="2", memory="0").spec
    assert score(spec, b) > score(spec, a)
    assert_scheduled(result, "p", "b")


def test_daemonset_gets_one_pod_per_eligible_node_and_tolerates_cordon():
    nodes = [
        node_dict("gpu-1", gpus=1, taints=[GPU_TAINT], labels={"gpu": "yes"}),
        node_dict("gpu-2", gpus=1, unschedulable=True, labels={"gpu": "yes"}),
        node_dict("cpu-1"),
    ]
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "plugin", "namespace": "kube-system"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"gpu": "yes"},
                    "tolerations": [GPU_TOLERATION],
                    "containers": [{"name": "c", "image": "x"}],
                }
            }
        },
    }
    result = run(nodes, [ds])
    assert {(p.pod.name, p.node) for p in result.placements} == {
        ("plugin-gpu-1", "gpu-1"),
        ("plugin-gpu-2", "gpu-2"),
    }


def test_scheduling_gates_hold_a_pod():
    doc = pod_dict("gated")
    doc["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    result = run([node_dict("n")], [doc])
    assert placement(result, "gated").reason == "waiting for scheduling gates: example.com/wait"


def test_no_nodes_at_all():
    result = run([], [pod_dict("p")])
    assert placement(result, "p").reason == "no nodes available to schedule pods"


def test_host_port_conflict():
    doc = pod_dict("p")
    doc["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    other = pod_dict("q")
    other["spec"]["containers"][0]["ports"] = [{"containerPort": 81, "hostPort": 8080}]
    result = run([node_dict("n")], [doc, other])
    assert_scheduled(result, "p", "n")
    assert_unschedulable(
        result, "q", "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )


def test_prefer_no_schedule_taint_costs_more_than_free_resources():
    """TaintToleration weighs 3 x 100 after normalisation: an empty node with a PreferNoSchedule taint loses
    to a busier untainted one, unless the pod tolerates the taint (then the emptier node wins again)."""
    soft = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
    nodes = [node_dict("a-spot", taints=[soft]), node_dict("b")]
    busy = [pod_dict("x", cpu="2", memory="4Gi", node_name="b", phase="Running")]
    tolerant = pod_dict("tolerant", cpu="100m", tolerations=[{"key": "spot", "operator": "Exists"}])
    result = run(nodes, [pod_dict("plain", cpu="100m"), tolerant], busy)
    assert_scheduled(result, "plain", "b")
    assert_scheduled(result, "tolerant", "a-spot")


def test_preferred_node_affinity_outweighs_free_resources():
    """NodeAffinity weighs 2 x 100 for the best-matching node, whatever the term's own weight (1 here)."""
    nodes = [node_dict("a", labels={"zone": "x"}), node_dict("b", labels={"zone": "y"})]
    busy = [pod_dict("x", cpu="2", memory="4Gi", node_name="b", phase="Running")]
    preferred = [
        {
            "weight": 1,
            "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["y"]}]},
        }
    ]
    result = run(nodes, [pod_dict("p", cpu="100m", preferred=preferred)], busy)
    assert_scheduled(result, "p", "b")


def test_normalisation_is_over_the_nodes_that_fit():
    """NodeAffinity's raw scores are normalised by their maximum over the nodes that pass every filter,
    resources included. Node a matches all three preferred terms (100) but has no room for a pod; b scores
    60 and c 45, so b gets 100 and c 75: 2 x 25 points outweigh c's emptier resources (187 vs 149). Normalised
    by a's 100, b would get 60 and c 45, and c would win."""
    exists = [("pool", 45), ("fast", 15), ("best", 40)]
    preferred = [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": "Exists"}]}}
        for k, w in exists
    ]
    nodes = [
        node_dict("a", pods=0, labels={"pool": "1", "fast": "1", "best": "1"}),
        node_dict("b", labels={"pool": "1", "fast": "1"}),
        node_dict("c", labels={"pool": "1"}),
    ]
    busy = [pod_dict("x", cpu="1500m", memory="1Gi", node_name="b", phase="Running")]
    result = run(nodes, [pod_dict("p", cpu="500m", memory="1Gi", preferred=preferred)], busy)
    assert_scheduled(result, "p", "b")


# --- the fast scheduler against a naive reference ------------------------------------------------------


def normalize(raw: list[int], reverse: bool) -> list[int]:
    """DefaultNormalizeScore, written out: [0, max] scaled to [0, 100] (int64 division), reversed or not."""
    top = max(raw)
    if top == 0:
        return [100 if reverse else 0 for _ in raw]
    return [100 - 100 * r // top if reverse else 100 * r // top for r in raw]


def best_node(pod: Pod, feasible: list[NodeState], states: list[NodeState] | None = None) -> NodeState:
    """The default profile's scores, summed with their weights: LeastAllocated and BalancedAllocation (1
    each), TaintToleration (3: untolerated PreferNoSchedule taints, normalised reversed) and NodeAffinity (2:
    weights of the matching preferred terms, normalised), both normalised over the feasible nodes; with
    ``states``, PodTopologySpread and InterPodAffinity (2 each) recounted over them."""
    spec = pod.spec
    taints = [
        sum(
            1 for t in st.node.taints if t.effect == "PreferNoSchedule" and not tolerated(spec.tolerations, t)
        )
        for st in feasible
    ]
    weights = [
        sum(p.weight for p in spec.preferred if term_matches(p.term, st.node.labels, st.node.name))
        for st in feasible
    ]
    total = [
        score(spec, st) + 3 * t + 2 * a
        for st, t, a in zip(feasible, normalize(taints, True), normalize(weights, False), strict=True)
    ]
    if states is not None and len(feasible) > 1:
        total = [a + b for a, b in zip(total, naive_topology_scores(pod, feasible, states), strict=True)]
    return min(zip(total, feasible, strict=True), key=lambda ts: (-ts[0], ts[1].node.name))[1]


def naive_topology(pod: Pod, st: NodeState, states: list[NodeState]) -> str | None:
    """PodTopologySpread and InterPodAffinity for one pod and node, recounted from every pod on every node
    (upstream's PreFilter, then Filter), without kgpu.sim.scheduler.plugins.topology's counters."""
    spec, labels = pod.spec, st.node.labels
    hard = [c for c in spec.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
    for c in hard:
        sel = c.selector
        if sel is not None and c.match_label_keys:
            extra = tuple(
                Requirement(k, "In", (pod.labels[k],)) for k in c.match_label_keys if k in pod.labels
            )
            if extra:
                sel = LabelSelector(extra + sel.requirements)
        domains: Counter[str] = Counter()
        for other in states:
            ol = other.node.labels
            if not all(h.topology_key in ol for h in hard):
                continue
            if c.node_affinity_policy == "Honor" and not affinity_matches(spec, ol, other.node.name):
                continue
            if c.node_taints_policy == "Honor" and first_untolerated(other.node.taints, spec.tolerations):
                continue
            domains[ol[c.topology_key]] += sum(
                1
                for q in other.pods
                if q.namespace == pod.namespace
                and sel is not None
                and sel.requirements
                and selector_matches(sel, q.labels)
            )
        if c.topology_key not in labels:
            return ERR_SPREAD_LABEL
        low = min(domains.values()) if len(domains) >= c.min_domains else 0
        if domains[labels[c.topology_key]] + selector_matches(sel, pod.labels) - low > c.max_skew:
            return ERR_SPREAD
    placed = [(q, other.node.labels) for other in states for q in other.pods]
    terms = [resolve_term(t, pod) for t in spec.pod_affinity]
    if terms:
        counts: Counter[tuple[str, str]] = Counter()
        for q, ol in placed:
            if all(t.matches(q) for t in terms):
                for t in terms:
                    if t.topology_key in ol:
                        counts[(t.topology_key, ol[t.topology_key])] += 1
        if any(t.topology_key not in labels for t in terms):
            return ERR_POD_AFFINITY
        if not all(counts[(t.topology_key, labels[t.topology_key])] for t in terms) and not (
            not counts and all(t.matches(pod) for t in terms)
        ):
            return ERR_POD_AFFINITY
    for t in (resolve_term(t, pod) for t in spec.pod_anti_affinity):
        if t.topology_key in labels and any(
            t.matches(q) and ol.get(t.topology_key) == labels[t.topology_key] for q, ol in placed
        ):
            return ERR_POD_ANTI_AFFINITY
    for q, ol in placed:
        for t in (resolve_term(t, q) for t in q.spec.pod_anti_affinity):
            if t.topology_key in ol and t.matches(pod) and labels.get(t.topology_key) == ol[t.topology_key]:
                return ERR_EXISTING_ANTI_AFFINITY
    return None


def _merged(sel, keys, labels):
    if sel is None or not keys:
        return sel
    extra = tuple(Requirement(k, "In", (labels[k],)) for k in keys if k in labels)
    return LabelSelector(extra + sel.requirements) if extra else sel


def _count(pods: list[Pod], namespace: str, sel) -> int:
    if sel is None or not sel.requirements:
        return 0
    return sum(1 for q in pods if q.namespace == namespace and selector_matches(sel, q.labels))


def naive_topology_scores(pod: Pod, feasible: list[NodeState], states: list[NodeState]) -> list[int]:
    """PodTopologySpread (ScheduleAnyway) and InterPodAffinity scores, normalised and weighted 2, recounted
    from every pod on every node."""
    spec = pod.spec
    total = [0] * len(feasible)
    soft = [c for c in spec.topology_spread if c.when_unsatisfiable == "ScheduleAnyway"]
    if soft:
        keys = [c.topology_key for c in soft]
        ignored = [not all(k in st.node.labels for k in keys) for st in feasible]
        kept = [st for st, ign in zip(feasible, ignored, strict=True) if not ign]
        raw = [0.0] * len(feasible)
        for c in soft:
            sel = _merged(c.selector, c.match_label_keys, pod.labels)
            if c.topology_key == "kubernetes.io/hostname":
                weight = math.log(len(kept) + 2)
            else:
                weight = math.log(len({st.node.labels[c.topology_key] for st in kept}) + 2)
            for i, st in enumerate(feasible):
                if ignored[i]:
                    continue
                if c.topology_key == "kubernetes.io/hostname":
                    cnt = _count(st.pods, pod.namespace, sel)
                else:
                    value = st.node.labels[c.topology_key]
                    cnt = 0
                    for other in states:
                        ol = other.node.labels
                        if not all(k in ol for k in keys) or ol[c.topology_key] != value:
                            continue
                        if c.node_affinity_policy == "Honor" and not affinity_matches(
                            spec, ol, other.node.name
                        ):
                            continue
                        if c.node_taints_policy == "Honor" and first_untolerated(
                            other.node.taints, spec.tolerations
                        ):
                            continue
                        cnt += _count(other.pods, pod.namespace, sel)
                raw[i] += cnt * weight + c.max_skew - 1
        scores = [math.floor(r + 0.5) for r in raw]
        valid = [v for v, ign in zip(scores, ignored, strict=True) if not ign] or [0]
        low, high = min(valid), max([0, *valid])
        for i, v in enumerate(scores):
            total[i] += 2 * (0 if ignored[i] else 100 if high == 0 else 100 * (high + low - v) // high)
    pairs: Counter[tuple[str, str]] = Counter()
    for other in states:
        ol = other.node.labels
        for q in other.pods:
            weighted = [(resolve_term(w.term, pod), w.weight, q) for w in spec.preferred_pod_affinity]
            weighted += [(resolve_term(w.term, pod), -w.weight, q) for w in spec.preferred_pod_anti_affinity]
            weighted += [(resolve_term(t, q), 1, pod) for t in q.spec.pod_affinity]
            weighted += [(resolve_term(w.term, q), w.weight, pod) for w in q.spec.preferred_pod_affinity]
            weighted += [
                (resolve_term(w.term, q), -w.weight, pod) for w in q.spec.preferred_pod_anti_affinity
            ]
            for t, weight, target in weighted:
                if t.matches(target) and t.topology_key in ol:
                    pairs[(t.topology_key, ol[t.topology_key])] += weight
    if pairs:
        tks = {k for k, _ in pairs}
        raw_a = [sum(pairs[(k, st.node.labels[k])] for k in tks if k in st.node.labels) for st in feasible]
        low, high = min(raw_a), max(raw_a)
        if high > low:
            for i, v in enumerate(raw_a):
                total[i] += 2 * int(100.0 * ((v - low) / (high - low)))
    return total


def reference(
    nodes: list[Node], pods: list[Pod], bound: list[Pod] = ()
) -> list[tuple[str | None, str | None]]:
    """Every filter on every node for every pod, every feasible node scored; ties by name."""
    states = [NodeState(n, i) for i, n in enumerate(nodes)]
    for pod in bound:
        for st in states:
            if st.node.name == pod.node_name:
                st.add(pod)
    out = []
    for pod in sorted(pods, key=lambda p: -p.priority):
        feasible, reasons = [], Counter()
        for st in states:
            r = filter_reasons(pod.spec, st.node, st.requested, st.pod_count, st.ports)
            if r is None:
                why = naive_topology(pod, st, states)
                r = [why] if why else None
            if r is None:
                feasible.append(st)
            else:
                reasons.update(r)
        if feasible:
            best = best_node(pod, feasible, states)
            best.add(pod)
            out.append((pod.name, best.node.name, None))
        else:
            out.append((pod.name, None, unschedulable_message(len(states), reasons)))
    order = {p.name: i for i, p in enumerate(pods)}
    out.sort(key=lambda t: order[t[0]])
    return [(n, r) for _, n, r in out]


SOFT_TOLERATIONS = [
    {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"key": "legacy", "value": "true"},
    {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},  # the wrong effect: tolerates nothing here
]


def random_preferred(rng: random.Random, zones: str | list[str]) -> list[dict]:
    """One to three preferred terms over zone and rank labels, weights 1-100."""
    terms = []
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(["In", "NotIn", "Gt", "Exists"])
        key = "rank" if op == "Gt" else "zone"
        values = {
            "In": [rng.choice(zones)],
            "NotIn": [rng.choice(zones)],
            "Gt": [str(rng.randint(0, 8))],
            "Exists": [],
        }[op]
        terms.append(
            {
                "weight": rng.choice([1, 2, 5, 50, 100]),
                "preference": {"matchExpressions": [{"key": key, "operator": op, "values": values}]},
            }
        )
    return terms


def random_case(rng: random.Random) -> tuple[list[dict], list[dict]]:
    zones = ["a", "b", "c"]
    nodes = []
    for i in range(rng.randint(1, 12)):
        gpus = rng.choice([0, 0, 1, 2, 4])
        taints = [GPU_TAINT] if gpus and rng.random() < 0.8 else []
        if rng.random() < 0.1:
            taints.append(
                {
                    "key": "dedicated",
                    "value": "infra",
                    "effect": rng.choice(["NoSchedule", "PreferNoSchedule"]),
                }
            )
        for key in ("spot", "legacy"):  # soft taints: TaintToleration scoring
            if rng.random() < 0.25:
                taints.append({"key": key, "value": "true", "effect": "PreferNoSchedule"})
        nodes.append(
            node_dict(
                f"node-{rng.randint(0, 99):02d}-{i}",
                cpu=rng.choice(["2", "4", "8", "3500m"]),
                memory=rng.choice(["4Gi", "8Gi", "16Gi", "7000Mi"]),
                pods=rng.choice([3, 5, 110]),
                gpus=gpus,
                labels={
                    "zone": rng.choice(zones),
                    "gpu": "yes" if gpus else "no",
                    "rank": str(rng.randint(0, 9)),
                },
                taints=taints,
                unschedulable=rng.random() < 0.05,
            )
        )
    pods = []
    shapes = []
    for _ in range(rng.randint(1, 5)):
        kw: dict = {
            "cpu": rng.choice([None, "100m", "500m", "1", "2"]),
            "memory": rng.choice([None, "256Mi", "1Gi", "3Gi"]),
            "gpus": rng.choice([0, 0, 1, 2]),
            "priority": rng.choice([None, 0, 10]),
        }
        if rng.random() < 0.6:
            kw["tolerations"] = [
                rng.choice(
                    [GPU_TOLERATION, {"operator": "Exists"}, {"key": "nvidia.com/gpu", "value": "true"}]
                )
            ]
        if rng.random() < 0.3:
            kw["tolerations"] = [*kw.get("tolerations", []), rng.choice(SOFT_TOLERATIONS)]
        if rng.random() < 0.3:
            kw["preferred"] = random_preferred(rng, zones)
        if rng.random() < 0.3:
            kw["node_selector"] = {"zone": rng.choice(zones)}
        if rng.random() < 0.3:
            op = rng.choice(["In", "NotIn", "Gt", "Lt", "Exists"])
            values = {"In": ["a", "b"], "NotIn": ["c"], "Gt": ["4"], "Lt": ["5"], "Exists": []}[op]
            key = "rank" if op in ("Gt", "Lt") else "zone"
            kw["affinity_terms"] = [{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]
        shapes.append(kw)
    for i in range(rng.randint(1, 40)):
        pods.append(pod_dict(f"pod-{i}", **rng.choice(shapes)))
    return nodes, pods


def test_fast_scheduler_matches_naive_reference_on_random_clusters():
    rng = random.Random(7)
    for case in range(300):
        node_docs, pod_docs = random_case(rng)
        nodes = parse_documents(node_docs, "n").nodes
        pods = parse_documents(pod_docs, "p").pods
        expected = reference(nodes, pods)
        result = simulate(parse_documents(node_docs, "n"), parse_documents(pod_docs, "p"))
        # no pod is bound before the queue, so nothing can be preempted; PostFilter's words are checked
        # against a reference in test_preemption.py
        got = [(p.node, p.reason and filters_part(p.reason)) for p in result.placements]
        assert got == expected, f"case {case}"


def random_topology_case(rng: random.Random) -> tuple[list[dict], list[dict], list[dict]]:
    """Nodes over zones (some without a zone label, some tainted), running pods with labels (a few with
    required anti-affinity), and pod specs with spread constraints and pod (anti-)affinity of every kind."""
    zones = ["a", "b", "c"]
    apps = ["web", "db", "cache"]
    nodes = []
    for i in range(rng.randint(1, 9)):
        name = f"node-{i}"
        labels = {"kubernetes.io/hostname": name, "rank": str(rng.randint(0, 3))}
        if rng.random() < 0.9:
            labels["zone"] = rng.choice(zones)
        taints = [GPU_TAINT] if rng.random() < 0.2 else []
        if rng.random() < 0.2:  # TaintToleration scoring beside the topology scores
            taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        nodes.append(
            node_dict(
                name,
                cpu=rng.choice(["2", "4", "8"]),
                memory="16Gi",
                pods=rng.choice([4, 110]),
                labels=labels,
                taints=taints,
            )
        )

    def term() -> dict:
        t: dict = {
            "topologyKey": rng.choice(["zone", "kubernetes.io/hostname"]),
            "labelSelector": {"matchLabels": {"app": rng.choice(apps)}},
        }
        if rng.random() < 0.2:
            t["namespaces"] = ["default", "ml"]
        elif rng.random() < 0.1:
            t["namespaceSelector"] = {}
        return t

    bound = []
    for i in range(rng.randint(0, 6)):
        kw: dict = {"labels": {"app": rng.choice(apps), "rev": rng.choice("12")}}
        if rng.random() < 0.2:
            kw["pod_anti_affinity"] = [term()]
        bound.append(
            pod_dict(
                f"run-{i}",
                cpu="500m",
                node_name=rng.choice(nodes)["metadata"]["name"],
                phase="Running",
                namespace=rng.choice(["default", "ml"]),
                **kw,
            )
        )
    shapes = []
    for _ in range(rng.randint(1, 5)):
        app = rng.choice(apps)
        kw = {
            "cpu": rng.choice(["100m", "1", "2"]),
            "labels": {"app": app, "rev": rng.choice("12")},
            "namespace": rng.choice(["default", "default", "ml"]),
        }
        if rng.random() < 0.3:
            kw["tolerations"] = [GPU_TOLERATION]
        if rng.random() < 0.2:
            kw["node_selector"] = {"rank": str(rng.randint(0, 3))}
        if rng.random() < 0.5:
            spread = []
            for key in rng.sample(["zone", "kubernetes.io/hostname"], rng.choice([1, 1, 2])):
                c: dict = {
                    "maxSkew": rng.choice([1, 2]),
                    "topologyKey": key,
                    "whenUnsatisfiable": rng.choice(["DoNotSchedule"] * 4 + ["ScheduleAnyway"]),
                    "labelSelector": rng.choice(
                        [{"matchLabels": {"app": app}}, {"matchLabels": {"app": "web"}}, {}]
                    ),
                }
                if rng.random() < 0.1:
                    del c["labelSelector"]
                if c["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.2:
                    c["minDomains"] = rng.choice([2, 4])
                if rng.random() < 0.2:
                    c["nodeTaintsPolicy"] = "Honor"
                if rng.random() < 0.2:
                    c["nodeAffinityPolicy"] = "Ignore"
                if rng.random() < 0.2 and c.get("labelSelector") is not None:
                    c["matchLabelKeys"] = ["rev"]
                spread.append(c)
            kw["spread"] = spread
        if rng.random() < 0.3:
            kw["pod_anti_affinity"] = [term()]
        if rng.random() < 0.2:
            kw["pod_affinity"] = [term() for _ in range(rng.choice([1, 1, 2]))]
        preferred = {}
        for kind in ("podAffinity", "podAntiAffinity"):
            if rng.random() < 0.15:
                preferred[kind] = [{"weight": rng.randint(1, 100), "podAffinityTerm": term()}]
        shapes.append((kw, preferred))
    pods = []
    for i in range(rng.randint(1, 25)):
        kw, preferred = rng.choice(shapes)
        doc = pod_dict(f"pod-{i}", **kw)
        if kw.get("cpu") == "2" and kw.get("namespace") == "ml":  # host ports: the exact path without arrays
            doc["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        for kind, terms in preferred.items():
            affinity = doc["spec"].setdefault("affinity", {}).setdefault(kind, {})
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = terms
        pods.append(doc)
    return nodes, bound, pods


def test_fast_scheduler_matches_naive_reference_with_topology_spread_and_pod_affinity():
    """Spread constraints and pod (anti-)affinity recounted from scratch for every pod and node, against the
    exact path's counters kept on bind, with pods of every other kind placed on the fast path in between."""
    rng = random.Random(23)
    for case in range(250):
        node_docs, bound_docs, pod_docs = random_topology_case(rng)
        nodes = parse_documents(node_docs, "n").nodes
        bound = parse_documents(bound_docs, "b").pods
        pods = parse_documents(pod_docs, "p").pods
        expected = reference(nodes, pods, bound)
        result = simulate(parse_documents(node_docs + bound_docs, "n"), parse_documents(pod_docs, "p"))
        # every pod has priority 0: nothing is preempted, and PostFilter's words are tested in test_preemption
        assert not any(p.phase == "Preempted" for p in result.placements)
        got = [(p.node, p.reason and filters_part(p.reason)) for p in result.placements]
        assert got == expected, f"case {case}"


def test_new_nodes_become_candidates_for_waiting_classes():
    sched = Scheduler([make_node("small", cpu="1")])
    big = make_pod("big", cpu="2")
    assert sched.place(big).node is None
    sched.add_node(make_node("large", cpu="4"))
    decision = sched.place(make_pod("big2", cpu="2"))
    assert decision.node is not None and decision.node.name == "large"
    assert sched.explain_pod(make_pod("huge", cpu="8")) == "0/2 nodes are available: 2 Insufficient cpu."


def reference_events(events: list[tuple[str, object]]) -> list[tuple[str | None, str | None]]:
    """The naive reference over a sequence of pods to place and nodes that join in between."""
    states: list[NodeState] = []
    out: list[tuple[str | None, str | None]] = []
    for kind, obj in events:
        if kind == "node":
            states.append(NodeState(obj, len(states)))  # type: ignore[arg-type]
            continue
        pod: Pod = obj  # type: ignore[assignment]
        feasible, reasons = [], Counter()
        for st in states:
            r = filter_reasons(pod.spec, st.node, st.requested, st.pod_count, st.ports)
            if r is None:
                why = naive_topology(pod, st, states)
                r = [why] if why else None
            if r is None:
                feasible.append(st)
            else:
                reasons.update(r)
        if feasible:
            best = best_node(pod, feasible, states)
            best.add(pod)
            out.append((best.node.name, None))
        else:
            out.append(
                (
                    None,
                    unschedulable_message(len(states), reasons)
                    if states
                    else "no nodes available to schedule pods",
                )
            )
    return out


def shaped_pod(name: str, kw: dict) -> Pod:
    """make_pod, plus a host port when the shape asks for one (such classes stay on the heap path)."""
    kw = dict(kw)
    port = kw.pop("host_port", None)
    doc = pod_dict(name, **kw)
    if port:
        doc["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return parse_documents([doc], "p").pods[0]


def many_classes_case(rng: random.Random) -> list[tuple[str, object]]:
    """Dozens of pod specs over nodes of very different sizes: tiny pods on big nodes (a bind may raise
    BalancedAllocation), pods without requests (non-zero defaults near a full node), selectors, taints,
    nodes joining between pods, and a few specs with a zone spread constraint or anti-affinity."""

    def node(i: int) -> Node:
        gpus = rng.choice([0, 0, 0, 1, 4])
        doc = node_dict(
            f"n{rng.randint(0, 999):03d}-{i}",
            cpu=rng.choice(["1", "2", "4", "16", "96", "1500m"]),
            memory=rng.choice(["1Gi", "4Gi", "16Gi", "64Gi", "1Ti", "3000Mi"]),
            pods=rng.choice([4, 8, 110]),
            gpus=gpus,
            labels={
                "zone": rng.choice("abc"),
                "size": str(rng.randint(0, 9)),
                "rank": str(rng.randint(0, 9)),
            },
            taints=([GPU_TAINT] if gpus and rng.random() < 0.7 else [])
            + [
                {"key": k, "value": "true", "effect": "PreferNoSchedule"}
                for k in ("spot", "legacy")
                if rng.random() < soft
            ],
        )
        return parse_documents([doc], "n").nodes[0]

    soft = rng.choice([0.0, 0.0, 0.1, 0.4])  # a third of the cases: no soft taints at all (the fast path)
    shapes = []
    for _ in range(rng.randint(20, 60)):
        kw: dict = {
            "cpu": rng.choice([None, "1m", "10m", "100m", "250m", "700m", "1", "3"]),
            "memory": rng.choice([None, "1Mi", "64Mi", "256Mi", "1Gi", "5Gi"]),
            "gpus": rng.choice([0, 0, 0, 1, 2]),
        }
        if rng.random() < 0.5:
            kw["tolerations"] = [GPU_TOLERATION]
        if rng.random() < 0.2:
            kw["tolerations"] = [*kw.get("tolerations", []), rng.choice(SOFT_TOLERATIONS)]
        if rng.random() < 0.15:
            kw["preferred"] = random_preferred(rng, "abc")
        if rng.random() < 0.05:
            kw["host_port"] = rng.choice([8080, 9090])
        if rng.random() < 0.3:
            kw["node_selector"] = {"zone": rng.choice("abc")}
        if rng.random() < 0.2:
            kw["affinity_terms"] = [
                {"matchExpressions": [{"key": "size", "operator": "Gt", "values": [str(rng.randint(0, 8))]}]}
            ]
        kw["labels"] = {"app": rng.choice("xyz")}
        if rng.random() < 0.1:  # the exact path among heap and array classes
            kw["spread"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": kw["labels"]},
                }
            ]
        elif rng.random() < 0.05:
            kw["pod_anti_affinity"] = [
                {"topologyKey": "size", "labelSelector": {"matchLabels": kw["labels"]}}
            ]
        shapes.append(kw)
    events: list[tuple[str, object]] = [("node", node(i)) for i in range(rng.randint(0, 15))]
    for i in range(rng.randint(40, 160)):
        if rng.random() < 0.04:
            events.append(("node", node(100 + i)))
        events.append(("pod", shaped_pod(f"pod-{i}", rng.choice(shapes))))
    return events


@pytest.mark.parametrize("array_after", [10_000, 24, 0], ids=["heaps", "default", "arrays"])
def test_fast_scheduler_matches_naive_reference_with_many_classes_and_joining_nodes(array_after):
    """Per-class heaps, array mode from the 25th class (the default), and array mode for every class."""
    rng = random.Random(11)
    for case in range(150):
        events = many_classes_case(rng)
        expected = reference_events(events)
        sched = Scheduler([], array_after=array_after)
        got = []
        for kind, obj in events:
            if kind == "node":
                sched.add_node(obj)  # type: ignore[arg-type]
                continue
            decision = sched.place(obj)  # type: ignore[arg-type]
            got.append((decision.node.name if decision.node else None, decision.reason))
        assert got == expected, f"case {case}"


def test_array_mode_steps_back_to_heaps_when_a_node_too_large_for_int64_joins():
    """A class in array mode, then a node whose memory x100 would overflow an int64: same answers as the
    reference, from the heap path."""
    events: list[tuple[str, object]] = [("node", make_node("a", cpu="4", memory="8Gi"))]
    events += [("pod", make_pod(f"p{i}", cpu=f"{100 + i}m", memory="64Mi")) for i in range(4)]
    events.append(("node", make_node("huge", cpu="4", memory="100Pi")))
    events += [("pod", make_pod(f"q{i}", cpu=f"{100 + i}m", memory="64Mi")) for i in range(4)]
    sched = Scheduler([], array_after=0)
    got = []
    for kind, obj in events:
        if kind == "node":
            sched.add_node(obj)  # type: ignore[arg-type]
        else:
            d = sched.place(obj)  # type: ignore[arg-type]
            got.append((d.node.name if d.node else None, d.reason))
    assert got == reference_events(events)
    assert got[-1][0] == "huge"

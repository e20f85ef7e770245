"""PodTopologySpread and InterPodAffinity: the filters that depend on where the other pods run.

kube-scheduler v1.34 (pkg/scheduler/framework/plugins/podtopologyspread, interpodaffinity) computes, in
PreFilter, counts over every node and the pods on it, then checks each node against them in Filter. A
simulation places thousands of pods, so the counts here are kept, not recomputed: each distinct
constraint a pod brings gets a *counter* that takes in nodes when first asked (counting the pods already
on them) and is updated by every bind after that. A pod's PreFilter is then a few dictionary reads.

- PodTopologySpread (DoNotSchedule constraints): per constraint, the matching pods per topology domain,
  over the nodes that carry every constraint's topology key and pass the constraint's node inclusion
  policies (nodeAffinityPolicy Honor: the pod's nodeSelector and required node affinity; nodeTaintsPolicy
  Honor: its tolerations). Pods count when in the pod's namespace and matched by the selector, with
  matchLabelKeys merged in from the pod's labels; an empty selector counts no pod (countPodsMatchSelector).
  A node fails when ``count(domain) + self-match - min(domains) > maxSkew``; the minimum is 0 while fewer
  than minDomains domains exist. A node without a topology key fails "(missing required label)".
- InterPodAffinity: the pod's required affinity terms (pods matching *all* terms, per topology pair), its
  required anti-affinity terms (per term), and the required anti-affinity terms of pods already placed
  (which topology pairs they forbid to a pod they match). The first pod of a group that matches its own
  affinity terms may go anywhere the topology keys exist, as upstream allows.

Terms are resolved per pod as the API server and scheduler do: no namespaces and no namespace selector
means the pod's namespace; matchLabelKeys / mismatchLabelKeys are merged into the selector with the pod's
label values. kgpu reads no Namespace objects: a namespace selector sees the one label every namespace has,
``kubernetes.io/metadata.name``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kgpu.model.objects import (
    LabelSelector,
    Node,
    Pod,
    PodAffinityTerm,
    PodSpecInfo,
    Requirement,
    SpreadConstraint,
)
from kgpu.model.predicates import (
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
    affinity_matches,
    first_untolerated,
    selector_matches,
)

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DO_NOT_SCHEDULE = "DoNotSchedule"


class NodeLike(Protocol):
    """What the counters read of the scheduler's node state."""

    node: Node
    index: int
    pods: list[Pod]


def _with_keys(
    selector: LabelSelector | None,
    labels: Mapping[str, str],
    match: Sequence[str],
    mismatch: Sequence[str] = (),
) -> LabelSelector | None:
    """``key In (value)`` for each matchLabelKeys key the pod has, ``NotIn`` for mismatchLabelKeys; a nil
    selector stays nil (it matches nothing either way)."""
    if selector is None or not (match or mismatch):
        return selector
    extra = [Requirement(k, "In", (labels[k],)) for k in match if k in labels]
    extra += [Requirement(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
    if not extra:
        return selector
    return LabelSelector(tuple(extra) + selector.requirements)


@dataclass(frozen=True, slots=True)
class Term:
    """A pod affinity term resolved for the pod that carries it."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None

    def matches(self, pod: Pod) -> bool:
        """AffinityTerm.Matches: the pod's namespace is named or selected, and its labels are selected."""
        if pod.namespace not in self.namespaces and not (
            self.namespace_selector is not None
            and selector_matches(self.namespace_selector, {NAMESPACE_NAME_LABEL: pod.namespace})
        ):
            return False
        return selector_matches(self.selector, pod.labels)


def resolve_term(term: PodAffinityTerm, pod: Pod) -> Term:
    namespaces = frozenset(term.namespaces)
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((pod.namespace,))
    selector = _with_keys(term.selector, pod.labels, term.match_label_keys, term.mismatch_label_keys)
    return Term(term.topology_key, selector, namespaces, term.namespace_selector)


def hard_constraints(spec: PodSpecInfo) -> tuple[SpreadConstraint, ...]:
    return tuple(c for c in spec.topology_spread if c.when_unsatisfiable == DO_NOT_SCHEDULE)


def needs_filters(spec: PodSpecInfo) -> bool:
    """The pod's own constraints make PodTopologySpread or InterPodAffinity filter it."""
    return bool(spec.pod_affinity or spec.pod_anti_affinity or hard_constraints(spec))


class _Counter:
    """Counts over the nodes taken in so far (``seen``); binds to nodes not yet taken in are counted when
    the node is."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = 0

    def catch_up(self, states: Sequence[NodeLike]) -> None:
        for idx in range(self.seen, len(states)):
            self.seen = idx + 1
            self.take(states[idx])

    def take(self, st: NodeLike) -> None:
        for pod in st.pods:
            self.add(pod, st)

    def add(self, pod: Pod, st: NodeLike) -> None:
        raise NotImplementedError


class SpreadCounter(_Counter):
    """One DoNotSchedule constraint of one kind of pod: matching pods per domain over the eligible nodes."""

    __slots__ = (
        "domains",
        "eligible",
        "honor_affinity",
        "honor_taints",
        "key",
        "keys",
        "namespace",
        "selector",
        "spec",
    )

    def __init__(
        self,
        namespace: str,
        selector: LabelSelector | None,
        c: SpreadConstraint,
        keys: tuple[str, ...],
        spec: PodSpecInfo,
    ) -> None:
        super().__init__()
        self.namespace = namespace
        # countPodsMatchSelector counts nothing for an empty selector (and a nil one matches nothing)
        self.selector = selector if selector is not None and selector.requirements else None
        self.key = c.topology_key
        self.keys = keys  # every hard constraint's topology key: a node must have them all
        self.spec = spec
        self.honor_affinity = c.node_affinity_policy == "Honor"
        self.honor_taints = c.node_taints_policy == "Honor"
        self.domains: dict[str, int] = {}
        self.eligible: list[str | None] = []  # per node index: its domain, or None when not counted

    def take(self, st: NodeLike) -> None:
        node = st.node
        labels = node.labels
        value: str | None = None
        if all(k in labels for k in self.keys):
            spec = self.spec
            ok = not self.honor_affinity or affinity_matches(spec, labels, node.name)
            if ok and self.honor_taints:
                ok = first_untolerated(node.taints, spec.tolerations) is None
            if ok:
                value = labels[self.key]
        self.eligible.append(value)
        if value is None:
            return
        self.domains.setdefault(value, 0)
        for pod in st.pods:
            self.add(pod, st)

    def add(self, pod: Pod, st: NodeLike) -> None:
        if st.index >= self.seen:
            return
        value = self.eligible[st.index]
        if value is None or self.selector is None or pod.namespace != self.namespace:
            return
        if selector_matches(self.selector, pod.labels):
            self.domains[value] += 1


class AffinityCounter(_Counter):
    """A pod's required affinity terms: per topology pair, the pods that match every term."""

    __slots__ = ("counts", "terms")

    def __init__(self, terms: tuple[Term, ...]) -> None:
        super().__init__()
        self.terms = terms
        self.counts: Counter[tuple[str, str]] = Counter()

    def add(self, pod: Pod, st: NodeLike) -> None:
        if st.index >= self.seen:
            return
        if all(t.matches(pod) for t in self.terms):
            labels = st.node.labels
            for t in self.terms:
                value = labels.get(t.topology_key)
                if value is not None:
                    self.counts[(t.topology_key, value)] += 1


class AntiAffinityCounter(_Counter):
    """One required anti-affinity term of a pod: matching pods per value of its topology key."""

    __slots__ = ("counts", "term")

    def __init__(self, term: Term) -> None:
        super().__init__()
        self.term = term
        self.counts: Counter[str] = Counter()

    def add(self, pod: Pod, st: NodeLike) -> None:
        if st.index >= self.seen:
            return
        value = st.node.labels.get(self.term.topology_key)
        if value is not None and self.term.matches(pod):
            self.counts[value] += 1


@dataclass(slots=True)
class PodFilter:
    """PreFilter state of one pod: what ``reason`` checks on each node."""

    spread: list[tuple[str, dict[str, int], int, int, int]]  # key, domains, self-match, min, maxSkew
    affinity: tuple[tuple[Term, ...], Counter[tuple[str, str]], bool] | None  # terms, counts, first-pod pass
    anti: list[tuple[str, Counter[str]]]
    blocked: list[tuple[str, str]]

    def reason(self, node: Node) -> str | None:
        labels = node.labels
        for key, domains, self_match, min_match, max_skew in self.spread:
            value = labels.get(key)
            if value is None:
                return ERR_SPREAD_LABEL
            if domains.get(value, 0) + self_match - min_match > max_skew:
                return ERR_SPREAD
        if self.affinity is not None:
            terms, counts, first = self.affinity
            exist = True
            for t in terms:
                value = labels.get(t.topology_key)
                if value is None:
                    return ERR_POD_AFFINITY
                if counts.get((t.topology_key, value), 0) <= 0:
                    exist = False
            if not exist and not first:
                return ERR_POD_AFFINITY
        for key, anti in self.anti:
            value = labels.get(key)
            if value is not None and anti.get(value, 0) > 0:
                return ERR_POD_ANTI_AFFINITY
        for key, value in self.blocked:
            if labels.get(key) == value:
                return ERR_EXISTING_ANTI_AFFINITY
        return None


class Topology:
    """The counters of one scheduler, kept current by ``bound``."""

    def __init__(self, states: Sequence[NodeLike]) -> None:
        self.states = states
        self._spread: dict[tuple[object, ...], SpreadCounter] = {}
        self._spread_by_ns: dict[str, list[SpreadCounter]] = {}
        self._affinity: dict[tuple[Term, ...], AffinityCounter] = {}
        self._anti: dict[Term, AntiAffinityCounter] = {}
        self._pod_counters: list[_Counter] = []  # affinity and anti-affinity counters: any namespace
        # Required anti-affinity terms of the pods placed so far: the topology pairs each one forbids.
        self.existing_anti: dict[Term, Counter[tuple[str, str]]] = {}
        self._matched_cache: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}

    # --- binds -------------------------------------------------------------------------------------------

    def bound(self, pod: Pod, st: NodeLike) -> None:
        counters = self._spread_by_ns.get(pod.namespace)
        if counters:
            for c in counters:
                c.add(pod, st)
        for pc in self._pod_counters:
            pc.add(pod, st)
        if pod.spec.pod_anti_affinity:
            labels = st.node.labels
            for term in pod.spec.pod_anti_affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    continue
                t = resolve_term(term, pod)
                pairs = self.existing_anti.get(t)
                if pairs is None:
                    pairs = self.existing_anti[t] = Counter()
                    self._matched_cache.clear()
                pairs[(term.topology_key, value)] += 1

    # --- which pods need the exact path ------------------------------------------------------------------

    def matched_by_existing(self, pod: Pod) -> bool:
        """Some placed pod's required anti-affinity term matches this pod."""
        if not self.existing_anti:
            return False
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        hit = self._matched_cache.get(key)
        if hit is None:
            hit = self._matched_cache[key] = any(t.matches(pod) for t in self.existing_anti)
        return hit

    def needs_exact(self, pod: Pod) -> bool:
        return needs_filters(pod.spec) or self.matched_by_existing(pod)

    # --- PreFilter ---------------------------------------------------------------------------------------

    def prepare(self, pod: Pod) -> PodFilter:
        spec = pod.spec
        states = self.states
        spread = []
        hard = hard_constraints(spec)
        if hard:
            keys = tuple(c.topology_key for c in hard)
            for c in hard:
                selector = _with_keys(c.selector, pod.labels, c.match_label_keys)
                counter = self._spread_counter(pod.namespace, selector, c, keys, spec)
                if counter.seen < len(states):
                    counter.catch_up(states)
                domains = counter.domains
                min_match = min(domains.values()) if len(domains) >= c.min_domains else 0
                self_match = 1 if selector_matches(selector, pod.labels) else 0
                spread.append((c.topology_key, domains, self_match, min_match, c.max_skew))
        affinity = None
        if spec.pod_affinity:
            terms = tuple(resolve_term(t, pod) for t in spec.pod_affinity)
            ac = self._affinity.get(terms)
            if ac is None:
                ac = self._affinity[terms] = AffinityCounter(terms)
                self._pod_counters.append(ac)
            if ac.seen < len(states):
                ac.catch_up(states)
            first = not ac.counts and all(t.matches(pod) for t in terms)
            affinity = (terms, ac.counts, first)
        anti: list[tuple[str, Counter[str]]] = []
        for term in spec.pod_anti_affinity:
            t = resolve_term(term, pod)
            nc = self._anti.get(t)
            if nc is None:
                nc = self._anti[t] = AntiAffinityCounter(t)
                self._pod_counters.append(nc)
            if nc.seen < len(states):
                nc.catch_up(states)
            anti.append((t.topology_key, nc.counts))
        blocked: list[tuple[str, str]] = []
        for t, pairs in self.existing_anti.items():
            if t.matches(pod):
                blocked.extend(p for p, n in pairs.items() if n > 0)
        return PodFilter(spread, affinity, anti, blocked)

    def _spread_counter(
        self,
        namespace: str,
        selector: LabelSelector | None,
        c: SpreadConstraint,
        keys: tuple[str, ...],
        spec: PodSpecInfo,
    ) -> SpreadCounter:
        honor_affinity = c.node_affinity_policy == "Honor"
        honor_taints = c.node_taints_policy == "Honor"
        key = (
            namespace,
            selector,
            c.topology_key,
            keys,
            (spec.node_selector, spec.affinity) if honor_affinity else None,
            spec.tolerations if honor_taints else None,
        )
        counter = self._spread.get(key)
        if counter is None:
            counter = self._spread[key] = SpreadCounter(namespace, selector, c, keys, spec)
            self._spread_by_ns.setdefault(namespace, []).append(counter)
        return counter

"""PodTopologySpread and InterPodAffinity: the filters that depend on where the other pods run.

kube-scheduler v1.34 (pkg/scheduler/framework/plugins/podtopologyspread, interpodaffinity) computes, in
PreFilter, counts over every node and the pods on it, then checks each node against them in Filter. A
simulation places thousands of pods, so the counts here are kept, not recomputed: each distinct
constraint a pod brings gets a *counter* that takes in nodes when first asked (counting the pods already
on them) and is updated by every bind after that. A pod's PreFilter is then a few dictionary reads. A
counter made late (at a Deployment's first pod, with thousands of pods placed) reads the placed pods its
selector can match from a label index (``LabelIndex``), so setting it up costs those pods, not the
cluster; and the counts are mirrored in numpy arrays by domain id (``DomainArray``), updated from the
domains binds changed, which the vectorised filter and score read.

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

Their Score plugins (weight 2 each) are here too. PodTopologySpread scores ScheduleAnyway constraints:
matching pods in the node's domain (on the node itself for the hostname key, from a per-node counter)
times log(domains among the feasible nodes + 2) plus maxSkew - 1, normalised so the fewest scores 100.
InterPodAffinity adds per topology pair the weights of the pod's preferred terms matching pods there (from
the same per-term counters), and the placed pods' required affinity terms (hardPodAffinityWeight 1) and
preferred terms that match the pod (registered on bind), min-max normalised.

Terms are resolved per pod as the API server and scheduler do: no namespaces and no namespace selector
means the pod's namespace; matchLabelKeys / mismatchLabelKeys are merged into the selector with the pod's
label values. kgpu reads no Namespace objects: a namespace selector sees the one label every namespace has,
``kubernetes.io/metadata.name``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
HOSTNAME = "kubernetes.io/hostname"
DO_NOT_SCHEDULE = "DoNotSchedule"
MAX_NODE_SCORE = 100
SCORE_WEIGHT = 2  # PodTopologySpread and InterPodAffinity in the default profile (default_plugins.go)


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
    """The pod's own constraints make PodTopologySpread or InterPodAffinity filter or score it."""
    return bool(
        spec.pod_affinity
        or spec.pod_anti_affinity
        or spec.topology_spread
        or spec.preferred_pod_affinity
        or spec.preferred_pod_anti_affinity
    )


class _Counter:
    """Counts over the nodes taken in so far (``seen``); binds to nodes not yet taken in are counted when
    the node is."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = 0

    def catch_up(self, states: Sequence[NodeLike], index: LabelIndex | None = None) -> None:
        """Take in the nodes added since. A counter that starts late (a Deployment's first pod) takes, from
        ``index``, only the placed pods its selector can match, not every pod on every node: the counts are
        the same integers, summed in another order."""
        lo, hi = self.seen, len(states)
        if lo == 0 and hi and index is not None:
            found = self.candidates(index, hi)
            if found is not None:
                self.open(states, hi)
                self.seen = hi
                for pod, idx, n in found:
                    self.add(pod, states[idx], n)
                return
        for idx in range(lo, hi):
            self.seen = idx + 1
            self.take(states[idx])

    def candidates(self, index: LabelIndex, hi: int) -> list[list[Any]] | None:
        """The placed pods on nodes below ``hi`` that this counter may count, as [pod, node index, times],
        or None when its selector names no label value to look up."""
        return None

    def open(self, states: Sequence[NodeLike], hi: int) -> None:
        """Take in the nodes below ``hi`` as ``take`` does, without their pods."""

    def take(self, st: NodeLike) -> None:
        for pod in st.pods:
            self.add(pod, st)

    def add(self, pod: Pod, st: NodeLike, n: int = 1) -> None:
        """Count ``pod`` on ``st`` (``n`` = -1: an eviction)."""
        raise NotImplementedError


class LabelIndex:
    """The placed pods by (namespace, label value), for the label keys the counters' selectors look up
    (each key indexed from its first use, over the nodes taken in, then kept current by every bind): what
    lets a counter that starts late read the few pods it can match. Entries are [pod, node index, times]."""

    def __init__(self, states: Sequence[NodeLike]) -> None:
        self.states = states
        self._tables: dict[str, dict[tuple[str, str], dict[tuple[int, int], list[Any]]]] = {}
        self._seen: dict[str, int] = {}

    def bound(self, pod: Pod, st: NodeLike, n: int) -> None:
        labels = pod.labels
        for key, table in self._tables.items():
            value = labels.get(key)
            if value is not None and st.index < self._seen[key]:
                self._put(table, pod, st.index, value, n)

    @staticmethod
    def _put(
        table: dict[tuple[str, str], dict[tuple[int, int], list[Any]]], pod: Pod, idx: int, value: str, n: int
    ) -> None:
        slot = table.get((pod.namespace, value))
        if slot is None:
            slot = table[(pod.namespace, value)] = {}
        ref = (id(pod), idx)
        entry = slot.get(ref)
        if entry is None:
            slot[ref] = [pod, idx, n]
        else:
            entry[2] += n
            if not entry[2]:
                del slot[ref]

    def _table(self, key: str, hi: int) -> dict[tuple[str, str], dict[tuple[int, int], list[Any]]]:
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = {}
            self._seen[key] = 0
        seen = self._seen[key]
        if seen < hi:
            put, states = self._put, self.states
            for idx in range(seen, hi):
                for pod in states[idx].pods:
                    value = pod.labels.get(key)
                    if value is not None:
                        put(table, pod, idx, value, 1)
            self._seen[key] = hi
        return table

    def find(self, namespaces: Iterable[str], selector: LabelSelector | None, hi: int) -> list[list[Any]] | None:
        """The pods in ``namespaces`` on nodes below ``hi`` that ``selector``'s first ``In`` requirement
        admits (None without one; none for a nil selector)."""
        if selector is None:
            return []
        req = next((r for r in selector.requirements if r.operator == "In"), None)
        if req is None:
            return None
        table = self._table(req.key, hi)
        out: list[list[Any]] = []
        for ns in namespaces:
            for value in req.values:
                slot = table.get((ns, value))
                if slot:
                    out.extend(e for e in slot.values() if e[1] < hi)
        return out


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
        "view",
    )

    def __init__(
        self,
        namespace: str,
        selector: LabelSelector | None,
        c: SpreadConstraint,
        keys: tuple[str, ...],
        spec: PodSpecInfo,
        eligible: list[str | None] | None = None,
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
        self.view = DomainArray(self.key, self.domains)
        # Per node index: its domain, or None when not counted. Shared by the counters whose nodes are
        # chosen alike (same keys, policies and node filters), each node worked out by the first to take it.
        self.eligible: list[str | None] = [] if eligible is None else eligible

    def _eligible(self, node: Node) -> str | None:
        """The node's domain, or None when the constraint does not count it."""
        labels = node.labels
        if not all(k in labels for k in self.keys):
            return None
        spec = self.spec
        if self.honor_affinity and not affinity_matches(spec, labels, node.name):
            return None
        if self.honor_taints and first_untolerated(node.taints, spec.tolerations) is not None:
            return None
        return labels[self.key]

    def open(self, states: Sequence[NodeLike], hi: int) -> None:
        eligible = self.eligible
        for idx in range(len(eligible), hi):
            eligible.append(self._eligible(states[idx].node))
        domains = self.domains
        for value in dict.fromkeys(eligible[:hi]):  # in node order, as take() adds them
            if value is not None and value not in domains:
                domains[value] = 0

    def candidates(self, index: LabelIndex, hi: int) -> list[list[Any]] | None:
        return index.find((self.namespace,), self.selector, hi)

    def take(self, st: NodeLike) -> None:
        eligible = self.eligible
        if st.index < len(eligible):
            value = eligible[st.index]
        else:
            value = self._eligible(st.node)
            eligible.append(value)
        if value is None:
            return
        self.domains.setdefault(value, 0)
        selector, namespace = self.selector, self.namespace
        if selector is None:
            return
        # add() for each pod on the node, in one pass
        n = sum(1 for pod in st.pods if pod.namespace == namespace and selector_matches(selector, pod.labels))
        if n:
            self.domains[value] += n
            self.view.changed(value)

    def add(self, pod: Pod, st: NodeLike, n: int = 1) -> None:
        if st.index >= self.seen:
            return
        value = self.eligible[st.index]
        if value is None or self.selector is None or pod.namespace != self.namespace:
            return
        if selector_matches(self.selector, pod.labels):
            self.domains[value] += n
            self.view.changed(value)


class AffinityCounter(_Counter):
    """A pod's required affinity terms: per topology pair, the pods that match every term."""

    __slots__ = ("counts", "terms")

    def __init__(self, terms: tuple[Term, ...]) -> None:
        super().__init__()
        self.terms = terms
        self.counts: Counter[tuple[str, str]] = Counter()

    def candidates(self, index: LabelIndex, hi: int) -> list[list[Any]] | None:
        for t in self.terms:  # a pod must match every term: the candidates of one of them
            if t.namespace_selector is None:
                return index.find(t.namespaces, t.selector, hi)
        return None

    def add(self, pod: Pod, st: NodeLike, n: int = 1) -> None:
        if st.index >= self.seen:
            return
        if all(t.matches(pod) for t in self.terms):
            labels = st.node.labels
            for t in self.terms:
                value = labels.get(t.topology_key)
                if value is not None:
                    pair = (t.topology_key, value)
                    self.counts[pair] += n
                    if not self.counts[pair]:
                        del self.counts[pair]  # as upstream's counts drop a pair at 0 (the first-pod rule)


class NodeCounter(_Counter):
    """Matching pods per node: PodTopologySpread's Score counts a hostname constraint on the node itself."""

    __slots__ = ("_arr", "_dirty", "counts", "namespace", "selector")

    def __init__(self, namespace: str, selector: LabelSelector | None) -> None:
        super().__init__()
        self.namespace = namespace
        self.selector = selector if selector is not None and selector.requirements else None
        self.counts: list[int] = []
        self._arr: Any = None  # ``counts`` in numpy, kept current from the nodes that changed since
        self._dirty: set[int] = set()

    def array(self, np: Any) -> Any:
        """``counts`` as a numpy int64 array (not to be written to)."""
        arr, counts = self._arr, self.counts
        if arr is None or len(arr) != len(counts):
            arr = self._arr = np.array(counts, dtype=np.int64)
        else:
            for i in self._dirty:
                arr[i] = counts[i]
        self._dirty.clear()
        return arr

    def open(self, states: Sequence[NodeLike], hi: int) -> None:
        self.counts.extend([0] * (hi - len(self.counts)))

    def candidates(self, index: LabelIndex, hi: int) -> list[list[Any]] | None:
        return index.find((self.namespace,), self.selector, hi)

    def take(self, st: NodeLike) -> None:
        selector, namespace = self.selector, self.namespace
        if selector is None:
            self.counts.append(0)
            return
        self.counts.append(
            sum(1 for pod in st.pods if pod.namespace == namespace and selector_matches(selector, pod.labels))
        )

    def add(self, pod: Pod, st: NodeLike, n: int = 1) -> None:
        if st.index >= self.seen or self.selector is None or pod.namespace != self.namespace:
            return
        if selector_matches(self.selector, pod.labels):
            self.counts[st.index] += n
            if self._arr is not None:
                self._dirty.add(st.index)


class AntiAffinityCounter(_Counter):
    """One pod affinity term (a required anti-affinity term, or a preferred term of either kind): matching
    pods per value of its topology key."""

    __slots__ = ("counts", "term", "view")

    def __init__(self, term: Term) -> None:
        super().__init__()
        self.term = term
        self.counts: Counter[str] = Counter()
        self.view = DomainArray(term.topology_key, self.counts)

    def candidates(self, index: LabelIndex, hi: int) -> list[list[Any]] | None:
        if self.term.namespace_selector is not None:
            return None
        return index.find(self.term.namespaces, self.term.selector, hi)

    def take(self, st: NodeLike) -> None:
        value = st.node.labels.get(self.term.topology_key)
        if value is None:
            return
        matches = self.term.matches
        n = sum(1 for pod in st.pods if matches(pod))
        if n:
            self.counts[value] += n
            self.view.changed(value)

    def add(self, pod: Pod, st: NodeLike, n: int = 1) -> None:
        if st.index >= self.seen:
            return
        value = st.node.labels.get(self.term.topology_key)
        if value is not None and self.term.matches(pod):
            self.counts[value] += n
            self.view.changed(value)


class DomainArray:
    """Counts per value of one topology key as a numpy array over :class:`DomainIds`' value ids (a trailing
    0 for nodes without the key), kept current from the values that changed since it was last asked for:
    what lets a pod's scores read a term's counts without a pass over every domain."""

    __slots__ = ("arr", "counts", "dirty", "key")

    def __init__(self, key: str, counts: Mapping[str, int]) -> None:
        self.key = key
        self.counts = counts
        self.arr: Any = None
        self.dirty: set[str] = set()

    def changed(self, value: str) -> None:
        if self.arr is not None:
            self.dirty.add(value)

    def array(self, dom: DomainIds) -> Any:
        """The counts by value id; ``dom.ids(key)`` must be current."""
        known = dom.values.get(self.key, {})
        arr = self.arr
        if arr is not None and len(arr) == len(known) + 1:
            counts = self.counts
            for value in self.dirty:
                i = known.get(value)
                if i is None:
                    arr = None
                    break
                arr[i] = counts.get(value, 0)
        else:
            arr = None
        if arr is None:
            arr = self.arr = dom.counts(self.key, self.counts)
        self.dirty.clear()
        return arr


# Reasons by code, in the order Filter checks them (code 0: the node passes), for ``PodFilter.codes``.
REASONS = (
    "",
    ERR_SPREAD_LABEL,
    ERR_SPREAD,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_EXISTING_ANTI_AFFINITY,
)


class DomainIds:
    """Per topology key, every node's value as a small integer (-1 without the label), in numpy: what lets
    a pod's PodFilter run over all nodes at once."""

    def __init__(self, states: Sequence[NodeLike]) -> None:
        import numpy as np

        self.np = np
        self.states = states
        self._ids: dict[str, Any] = {}
        self._seen: dict[str, int] = {}
        self.values: dict[str, dict[str, int]] = {}

    def ids(self, key: str) -> Any:
        np = self.np
        arr = self._ids.get(key)
        n = len(self.states)
        seen = self._seen.get(key, 0)
        if arr is None or seen < n:
            values = self.values.setdefault(key, {})
            fresh = [
                values.setdefault(v, len(values)) if v is not None else -1
                for v in (self.states[i].node.labels.get(key) for i in range(seen, n))
            ]
            grown = np.empty(n, dtype=np.int64)
            if arr is not None:
                grown[:seen] = arr[:seen]
            grown[seen:] = fresh
            arr = self._ids[key] = grown
            self._seen[key] = n
        return arr

    def counts(self, key: str, counts: Mapping[str, int]) -> Any:
        """The counts per value id of ``key`` (0 for values not given), with a trailing 0 for -1."""
        np = self.np
        known = self.values.get(key, {})
        out = np.zeros(len(known) + 1, dtype=np.int64)
        for v, c in counts.items():
            i = known.get(v)
            if i is not None:
                out[i] = c
        return out

    def flags(self, key: str, values: Any) -> Any:
        """A boolean per value id of ``key``: True for the ``values`` given (those absent from every node
        are ignored), with one extra False entry that nodes without the label (-1) index."""
        np = self.np
        known = self.values.get(key, {})
        out = np.zeros(len(known) + 1, dtype=bool)
        for v in values:
            i = known.get(v)
            if i is not None:
                out[i] = True
        return out


@dataclass(slots=True)
class PodFilter:
    """PreFilter state of one pod: what ``reason`` checks on each node (``codes``: on every node at once)."""

    # key, domains, self-match, min, maxSkew, the domains by value id, the counter, whether the minimum is
    # over the domains (minDomains met; else it is 0)
    spread: list[tuple[str, dict[str, int], int, int, int, DomainArray, SpreadCounter, bool]]
    affinity: tuple[tuple[Term, ...], Counter[tuple[str, str]], bool] | None  # terms, counts, first-pod pass
    # key, counts by value, the same by value id, the term
    anti: list[tuple[str, Counter[str], DomainArray, Term]]
    # existing pods' anti-affinity terms the pod matches: their topology key and their live counts by (key,
    # value) (read where they are, as ``spread`` and ``anti`` read theirs: no per-pod copy of every domain)
    blocked: list[tuple[str, Counter[tuple[str, str]]]]
    blocked_terms: list[Term]  # the terms of ``blocked``, in its order
    affinity_matches: bool = False  # the pod matches every term of ``affinity`` (the first-pod rule)

    def reason(self, node: Node) -> str | None:
        labels = node.labels
        for key, domains, self_match, min_match, max_skew, *_ in self.spread:
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
        for key, anti, *_ in self.anti:
            value = labels.get(key)
            if value is not None and anti.get(value, 0) > 0:
                return ERR_POD_ANTI_AFFINITY
        for key, pairs in self.blocked:
            value = labels.get(key)
            if value is not None and pairs.get((key, value), 0) > 0:
                return ERR_EXISTING_ANTI_AFFINITY
        return None

    def codes(self, dom: DomainIds) -> Any:
        """``reason`` for every node as a code into ``REASONS`` (0 where the node passes), vectorised."""
        np = dom.np
        n = len(dom.states)
        code = np.zeros(n, dtype=np.int8)

        def fail(mask: Any, c: int) -> None:
            code[(code == 0) & mask] = c

        for key, _, self_match, min_match, max_skew, view, *_ in self.spread:
            ids = dom.ids(key)
            fail(ids < 0, 1)
            over = view.array(dom) + (self_match - min_match) > max_skew
            over[-1] = False
            fail(over[ids], 2)
        if self.affinity is not None:
            terms, counts, first = self.affinity
            exist = np.ones(n, dtype=bool)
            for t in terms:
                ids = dom.ids(t.topology_key)
                fail(ids < 0, 3)
                present = dom.flags(
                    t.topology_key, [v for (k, v), c in counts.items() if k == t.topology_key and c > 0]
                )
                exist &= present[ids]
            if not first:
                fail(~exist, 3)
        for key, _, view, _ in self.anti:
            ids = dom.ids(key)
            fail((view.array(dom) > 0)[ids], 4)
        blocked: dict[str, list[str]] = {}
        for key, pairs in self.blocked:
            blocked.setdefault(key, []).extend(v for (k, v), c in pairs.items() if k == key and c > 0)
        for key, values in blocked.items():
            ids = dom.ids(key)
            fail(dom.flags(key, values)[ids], 5)
        return code


class Topology:
    """The counters of one scheduler, kept current by ``bound``."""

    def __init__(self, states: Sequence[NodeLike]) -> None:
        self.states = states
        self._spread: dict[tuple[object, ...], SpreadCounter] = {}
        # Pod counters by namespace, then by one ``key In (value)`` requirement of their selector (a bind
        # looks only at the counters its pod's labels can match), or under None when they have none.
        self._spread_by_ns: dict[str, dict[tuple[str, str] | None, list[SpreadCounter | NodeCounter]]] = {}
        self._index_keys: dict[str, set[str]] = {}
        self._eligible: dict[tuple[object, ...], list[str | None]] = {}
        self._affinity: dict[tuple[Term, ...], AffinityCounter] = {}
        self._anti: dict[Term, AntiAffinityCounter] = {}
        self._pod_counters: list[_Counter] = []  # affinity and anti-affinity counters: any namespace
        # The same, by the namespaces whose pods they can count (a term without a namespaceSelector counts
        # only pods of its namespaces), and those that may count a pod of any namespace: a bind looks at its
        # pod's namespace's only.
        # Within a namespace, by one ``key In (value)`` requirement of their (first) term's selector, as
        # _spread_by_ns: a pod without that label value matches no term of theirs.
        self._counters_by_ns: dict[str, dict[tuple[str, str] | None, list[_Counter]]] = {}
        self._counter_keys: dict[str, set[str]] = {}
        self._counters_any: list[_Counter] = []
        # Required anti-affinity terms of the pods placed so far: the topology pairs each one forbids.
        self.existing_anti: dict[Term, Counter[tuple[str, str]]] = {}
        # Terms of placed pods that InterPodAffinity's Score applies to the pods they match, with their
        # weight (required affinity: hardPodAffinityWeight 1; preferred: its weight, negative for anti).
        self.existing_score: dict[tuple[Term, int], Counter[tuple[str, str]]] = {}
        # the same counts by value of the term's topology key, and their numpy view (_affinity_scores_at)
        self._score_values: dict[tuple[Term, int], Counter[str]] = {}
        self._score_views: dict[tuple[Term, int], DomainArray] = {}
        self._node_counters: dict[tuple[str, LabelSelector | None], NodeCounter] = {}
        self._matched_cache: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}
        self._blocking_cache: dict[tuple[str, tuple[tuple[str, str], ...]], list[Term]] = {}
        self._scoring_cache: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[Term, int]]] = {}
        self._domain_ids: DomainIds | None = None
        self._index = LabelIndex(states)

    @property
    def domain_ids(self) -> DomainIds:
        if self._domain_ids is None:
            self._domain_ids = DomainIds(self.states)
        return self._domain_ids

    def scored(self, pod: Pod) -> bool:
        """Whether PodTopologySpread or InterPodAffinity could give this pod different scores on different
        nodes (ScheduleAnyway constraints, preferred terms, or placed pods' terms that match it)."""
        spec = pod.spec
        if spec.preferred_pod_affinity or spec.preferred_pod_anti_affinity:
            return True
        if any(c.when_unsatisfiable == "ScheduleAnyway" for c in spec.topology_spread):
            return True
        return bool(self.existing_score) and bool(self._scoring_terms(pod))

    def _scoring_terms(self, pod: Pod) -> list[tuple[Term, int]]:
        """The keys of ``existing_score`` whose term matches the pod, in their order; kept per namespace and
        labels until a new term is registered (pods of one Deployment ask alike)."""
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        hit = self._scoring_cache.get(key)
        if hit is None:
            hit = self._scoring_cache[key] = [k for k in self.existing_score if k[0].matches(pod)]
        return hit

    # --- binds -------------------------------------------------------------------------------------------

    def bound(self, pod: Pod, st: NodeLike, n: int = 1) -> None:
        """``pod`` landed on ``st``; with ``n`` = -1 it left (``unbound``)."""
        self._index.bound(pod, st, n)
        index = self._spread_by_ns.get(pod.namespace)
        if index:
            labels = pod.labels
            for key in self._index_keys[pod.namespace]:
                value = labels.get(key)
                if value is not None:
                    for c in index.get((key, value), ()):
                        c.add(pod, st, n)
            for c in index.get(None, ()):
                c.add(pod, st, n)
        for pc in self._counters_any:
            pc.add(pod, st, n)
        by_slot = self._counters_by_ns.get(pod.namespace)
        if by_slot:
            labels = pod.labels
            for key in self._counter_keys[pod.namespace]:
                value = labels.get(key)
                if value is not None:
                    for pc in by_slot.get((key, value), ()):
                        pc.add(pod, st, n)
            for pc in by_slot.get(None, ()):
                pc.add(pod, st, n)
        spec = pod.spec
        if spec.pod_anti_affinity:
            labels = st.node.labels
            for term in spec.pod_anti_affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    continue
                t = resolve_term(term, pod)
                pairs = self.existing_anti.get(t)
                if pairs is None:
                    pairs = self.existing_anti[t] = Counter()
                    self._matched_cache.clear()
                    self._blocking_cache.clear()
                pairs[(term.topology_key, value)] += n
        if spec.pod_affinity or spec.preferred_pod_affinity or spec.preferred_pod_anti_affinity:
            labels = st.node.labels
            weighted = [(t, 1) for t in spec.pod_affinity]
            weighted += [(w.term, w.weight) for w in spec.preferred_pod_affinity]
            weighted += [(w.term, -w.weight) for w in spec.preferred_pod_anti_affinity]
            for term, weight in weighted:
                value = labels.get(term.topology_key)
                if value is None:
                    continue
                scored = (resolve_term(term, pod), weight)
                pairs = self.existing_score.get(scored)
                if pairs is None:
                    pairs = self.existing_score[scored] = Counter()
                    self._score_values[scored] = Counter()
                    self._score_views[scored] = DomainArray(term.topology_key, self._score_values[scored])
                    self._matched_cache.clear()
                    self._scoring_cache.clear()
                pairs[(term.topology_key, value)] += n
                self._score_values[scored][value] += n
                self._score_views[scored].changed(value)

    def _add_pod_counter(self, counter: AffinityCounter | AntiAffinityCounter) -> None:
        self._pod_counters.append(counter)
        terms = counter.terms if isinstance(counter, AffinityCounter) else (counter.term,)
        if any(t.namespace_selector is not None for t in terms):
            self._counters_any.append(counter)
            return
        # every term must match (AffinityCounter): the namespaces all of them name
        names = frozenset.intersection(*(t.namespaces for t in terms))
        slot: tuple[str, str] | None = None
        selector = terms[0].selector
        for r in selector.requirements if selector is not None else ():
            if r.operator == "In" and len(r.values) == 1:
                slot = (r.key, r.values[0])
                break
        for ns in names:
            keys = self._counter_keys.setdefault(ns, set())
            if slot is not None:
                keys.add(slot[0])
            self._counters_by_ns.setdefault(ns, {}).setdefault(slot, []).append(counter)

    def unbound(self, pod: Pod, st: NodeLike) -> None:
        """``pod`` left ``st`` (preemption; the node no longer lists it): the counts drop again."""
        self.bound(pod, st, -1)

    # --- which pods need the exact path ------------------------------------------------------------------

    def matched_by_existing(self, pod: Pod) -> bool:
        """Some placed pod's required anti-affinity term (a filter), or a term InterPodAffinity scores with
        (required affinity, preferred terms), matches this pod."""
        if not self.existing_anti and not self.existing_score:
            return False
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        hit = self._matched_cache.get(key)
        if hit is None:
            hit = any(t.matches(pod) for t in self.existing_anti) or any(
                t.matches(pod) for t, _ in self.existing_score
            )
            self._matched_cache[key] = hit
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
                    counter.catch_up(states, self._index)
                domains = counter.domains
                applies = len(domains) >= c.min_domains
                min_match = min(domains.values()) if applies else 0
                self_match = 1 if selector_matches(selector, pod.labels) else 0
                skew, view = c.max_skew, counter.view
                spread.append((c.topology_key, domains, self_match, min_match, skew, view, counter, applies))
        affinity = None
        matches_all = False
        if spec.pod_affinity:
            terms = tuple(resolve_term(t, pod) for t in spec.pod_affinity)
            ac = self._affinity.get(terms)
            if ac is None:
                ac = self._affinity[terms] = AffinityCounter(terms)
                self._add_pod_counter(ac)
            if ac.seen < len(states):
                ac.catch_up(states, self._index)
            matches_all = all(t.matches(pod) for t in terms)
            affinity = (terms, ac.counts, not ac.counts and matches_all)
        anti: list[tuple[str, Counter[str], DomainArray, Term]] = []
        for term in spec.pod_anti_affinity:
            t = resolve_term(term, pod)
            nc = self._anti.get(t)
            if nc is None:
                nc = self._anti[t] = AntiAffinityCounter(t)
                self._add_pod_counter(nc)
            if nc.seen < len(states):
                nc.catch_up(states, self._index)
            anti.append((t.topology_key, nc.counts, nc.view, t))
        terms_blocking = self._blocking(pod)
        blocked = [(t.topology_key, self.existing_anti[t]) for t in terms_blocking]
        return PodFilter(spread, affinity, anti, blocked, terms_blocking, matches_all)

    def _blocking(self, pod: Pod) -> list[Term]:
        """The placed pods' required anti-affinity terms that match ``pod``, in their order; kept per namespace
        and labels until a new term is registered (pods of one Deployment ask alike)."""
        existing = self.existing_anti
        if not existing:
            return []
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        hit = self._blocking_cache.get(key)
        if hit is None:
            hit = self._blocking_cache[key] = [t for t in existing if t.matches(pod)]
        return hit

    # --- Score ---------------------------------------------------------------------------------------------

    def scores(self, pod: Pod, feasible: Sequence[NodeLike]) -> list[int] | None:
        """PodTopologySpread and InterPodAffinity, each normalised over the feasible nodes and weighted 2 as
        in the default profile, summed per node; None when neither scores this pod."""
        spread = self._spread_scores(pod, feasible)
        affinity = self._affinity_scores(pod, feasible)
        if spread is None and affinity is None:
            return None
        out = [0] * len(feasible)
        for part in (spread, affinity):
            if part is not None:
                for i, v in enumerate(part):
                    out[i] += SCORE_WEIGHT * v
        return out

    def scores_at(self, pod: Pod, idx: Any) -> Any:
        """:meth:`scores` over the nodes whose indexes are ``idx`` (a numpy array, ascending), in numpy: the
        same integer and float operations in the same order, so the same values; None when neither scores
        this pod."""
        spread = self._spread_scores_at(pod, idx)
        affinity = self._affinity_scores_at(pod, idx)
        if spread is None and affinity is None:
            return None
        if spread is None:
            return SCORE_WEIGHT * affinity
        if affinity is None:
            return SCORE_WEIGHT * spread
        return SCORE_WEIGHT * spread + SCORE_WEIGHT * affinity

    def _spread_scores_at(self, pod: Pod, idx: Any) -> Any:
        spec = pod.spec
        soft = [c for c in spec.topology_spread if c.when_unsatisfiable == "ScheduleAnyway"]
        if not soft:
            return None
        dom = self.domain_ids
        np = dom.np
        keys = tuple(c.topology_key for c in soft)
        ids = {k: dom.ids(k)[idx] for k in set(keys)}
        ignored = np.zeros(len(idx), dtype=bool)
        for k in keys:
            ignored |= ids[k] < 0
        kept = ~ignored
        n_kept = int(kept.sum())
        raw = np.zeros(len(idx), dtype=np.float64)
        for c in soft:
            selector = _with_keys(c.selector, pod.labels, c.match_label_keys)
            key = c.topology_key
            if key == HOSTNAME:
                nc = self._node_counter(pod.namespace, selector)
                if nc.seen < len(self.states):
                    nc.catch_up(self.states, self._index)
                weight = math.log(n_kept + 2)
                counts = nc.array(np)[idx]
            else:
                counter = self._spread_counter(pod.namespace, selector, c, keys, spec)
                if counter.seen < len(self.states):
                    counter.catch_up(self.states, self._index)
                # the number of domains among the kept nodes (their ids are >= 0)
                weight = math.log(int(np.count_nonzero(np.bincount(ids[key][kept], minlength=1))) + 2)
                counts = counter.view.array(dom)[ids[key]]
            raw = np.where(kept, raw + (counts * weight + (c.max_skew - 1)), raw)
        scores = np.floor(raw + 0.5).astype(np.int64)  # Go's math.Round of a non-negative score
        if not n_kept:
            return np.zeros(len(idx), dtype=np.int64)
        valid = scores[kept]
        low, high = int(valid.min()), max(0, int(valid.max()))
        if high == 0:
            return np.where(kept, MAX_NODE_SCORE, 0).astype(np.int64)
        return np.where(kept, MAX_NODE_SCORE * (high + low - scores) // high, 0).astype(np.int64)

    def _affinity_scores_at(self, pod: Pod, idx: Any) -> Any:
        # _affinity_pairs' sums, per node, from each term's counts by domain (integers: any order gives the
        # same totals); None where _affinity_pairs has no pair
        dom = self.domain_ids
        np = dom.np
        parts: list[tuple[int, DomainArray]] = []
        for nc, weight in self._preferred_counters(pod):
            if nc.counts:
                parts.append((weight, nc.view))
        existing = self.existing_score
        for scored in self._scoring_terms(pod) if existing else ():
            if existing[scored]:
                parts.append((scored[1], self._score_views[scored]))
        if not parts:
            return None
        raw = np.zeros(len(idx), dtype=np.int64)
        for weight, view in parts:
            ids = dom.ids(view.key)[idx]
            raw += weight * view.array(dom)[ids]
        low, high = int(raw.min()), int(raw.max())
        diff = high - low
        if diff <= 0:
            return np.zeros(len(idx), dtype=np.int64)
        return (float(MAX_NODE_SCORE) * ((raw - low) / diff)).astype(np.int64)

    def _spread_scores(self, pod: Pod, feasible: Sequence[NodeLike]) -> list[int] | None:
        """PodTopologySpread's PreScore, Score and NormalizeScore for the ScheduleAnyway constraints: per
        node, the matching pods in its domain (on the node itself for the hostname key) times
        log(domains among the feasible nodes + 2), plus maxSkew - 1; fewer is better. Feasible nodes that
        lack a constraint's key score 0."""
        spec = pod.spec
        soft = [c for c in spec.topology_spread if c.when_unsatisfiable == "ScheduleAnyway"]
        if not soft:
            return None
        keys = tuple(c.topology_key for c in soft)
        ignored = [not all(k in st.node.labels for k in keys) for st in feasible]
        kept = [st for st, ign in zip(feasible, ignored, strict=True) if not ign]
        raw = [0.0] * len(feasible)
        for c in soft:
            selector = _with_keys(c.selector, pod.labels, c.match_label_keys)
            key = c.topology_key
            if key == HOSTNAME:
                nc = self._node_counter(pod.namespace, selector)
                if nc.seen < len(self.states):
                    nc.catch_up(self.states, self._index)
                weight = math.log(len(kept) + 2)
                for i, st in enumerate(feasible):
                    if not ignored[i]:
                        raw[i] += nc.counts[st.index] * weight + (c.max_skew - 1)
                continue
            counter = self._spread_counter(pod.namespace, selector, c, keys, spec)
            if counter.seen < len(self.states):
                counter.catch_up(self.states, self._index)
            weight = math.log(len({st.node.labels[key] for st in kept}) + 2)
            domains = counter.domains
            for i, st in enumerate(feasible):
                if not ignored[i]:
                    raw[i] += domains.get(st.node.labels[key], 0) * weight + (c.max_skew - 1)
        scores = [math.floor(r + 0.5) for r in raw]  # Go's math.Round of a non-negative score
        valid = [v for v, ign in zip(scores, ignored, strict=True) if not ign]
        low, high = (min(valid), max(0, *valid)) if valid else (0, 0)
        out = []
        for v, ign in zip(scores, ignored, strict=True):
            if ign:
                out.append(0)
            elif high == 0:
                out.append(MAX_NODE_SCORE)
            else:
                out.append(MAX_NODE_SCORE * (high + low - v) // high)
        return out

    def _affinity_scores(self, pod: Pod, feasible: Sequence[NodeLike]) -> list[int] | None:
        """InterPodAffinity's PreScore, Score and NormalizeScore: per topology pair, the weights of the pod's
        preferred terms matching pods there (anti negative), plus the placed pods' required affinity (1) and
        preferred terms (anti negative) that match the pod; min-max normalised to 0..100."""
        pairs = self._affinity_pairs(pod)
        if not pairs:
            return None
        keys = {k for k, _ in pairs}
        raw = []
        for st in feasible:
            labels = st.node.labels
            raw.append(sum(pairs.get((k, labels[k]), 0) for k in keys if k in labels))
        low, high = min(raw), max(raw)
        diff = high - low
        if diff <= 0:
            return [0] * len(raw)
        return [int(float(MAX_NODE_SCORE) * ((v - low) / diff)) for v in raw]

    def _preferred_counters(self, pod: Pod) -> list[tuple[AntiAffinityCounter, int]]:
        """The pod's preferred (anti-)affinity terms as up-to-date counters, each with its signed weight."""
        spec = pod.spec
        own = [(w.term, w.weight) for w in spec.preferred_pod_affinity]
        own += [(w.term, -w.weight) for w in spec.preferred_pod_anti_affinity]
        out: list[tuple[AntiAffinityCounter, int]] = []
        for term, weight in own:
            t = resolve_term(term, pod)
            nc = self._anti.get(t)
            if nc is None:
                nc = self._anti[t] = AntiAffinityCounter(t)
                self._add_pod_counter(nc)
            if nc.seen < len(self.states):
                nc.catch_up(self.states, self._index)
            out.append((nc, weight))
        return out

    def _affinity_pairs(self, pod: Pod) -> Counter[tuple[str, str]]:
        """InterPodAffinity's PreScore: the summed weight per topology pair."""
        pairs: Counter[tuple[str, str]] = Counter()
        for nc, weight in self._preferred_counters(pod):
            for value, n in nc.counts.items():
                pairs[(nc.term.topology_key, value)] += weight * n
        for (t, weight), placed in self.existing_score.items():
            if t.matches(pod):
                for pair, n in placed.items():
                    pairs[pair] += weight * n
        return pairs

    def _register(self, namespace: str, counter: SpreadCounter | NodeCounter) -> None:
        slot: tuple[str, str] | None = None
        if counter.selector is not None:
            for r in counter.selector.requirements:
                if r.operator == "In" and len(r.values) == 1:
                    slot = (r.key, r.values[0])
                    self._index_keys.setdefault(namespace, set()).add(r.key)
                    break
        self._index_keys.setdefault(namespace, set())
        self._spread_by_ns.setdefault(namespace, {}).setdefault(slot, []).append(counter)

    def _node_counter(self, namespace: str, selector: LabelSelector | None) -> NodeCounter:
        key = (namespace, selector)
        counter = self._node_counters.get(key)
        if counter is None:
            counter = self._node_counters[key] = NodeCounter(namespace, selector)
            self._register(namespace, counter)
        return counter

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
            shared = self._eligible.setdefault(key[2:], [])
            counter = self._spread[key] = SpreadCounter(namespace, selector, c, keys, spec, shared)
            self._register(namespace, counter)
        return counter

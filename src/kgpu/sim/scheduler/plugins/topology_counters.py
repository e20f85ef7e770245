"""What PodTopologySpread and InterPodAffinity count, kept across binds (kgpu.sim.scheduler.plugins.topology's
docstring): resolved pod (anti-)affinity terms, the per-constraint and per-term counters of matching pods per
topology domain that every bind updates, the label index a late counter reads the placed pods from, and the
counts mirrored in numpy arrays by domain id (every node's topology domains as small integers)."""

from __future__ import annotations

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
    affinity_matches,
    first_untolerated,
    selector_matches,
)

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


HOSTNAME = "kubernetes.io/hostname"


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

    def find(
        self, namespaces: Iterable[str], selector: LabelSelector | None, hi: int
    ) -> list[list[Any]] | None:
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

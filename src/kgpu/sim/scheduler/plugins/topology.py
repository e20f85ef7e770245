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

Here: ``Topology``, which keeps the counters of one scheduler current, and the two Score plugins; the
counters, the label index and the domain arrays are in ``topology_counters``, the Filter in ``topology_filter``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kgpu.model.objects import (
    LabelSelector,
    Pod,
    PodSpecInfo,
    SpreadConstraint,
)
from kgpu.model.predicates import (
    selector_matches,
)
from kgpu.sim.scheduler.plugins.topology_counters import (
    HOSTNAME,
    AffinityCounter,
    AntiAffinityCounter,
    DomainArray,
    DomainIds,
    LabelIndex,
    NodeCounter,
    NodeLike,
    SpreadCounter,
    Term,
    _Counter,
    _with_keys,
    hard_constraints,
    needs_filters,
    resolve_term,
)
from kgpu.sim.scheduler.plugins.topology_filter import REASONS, PodFilter

MAX_NODE_SCORE = 100
SCORE_WEIGHT = 2  # PodTopologySpread and InterPodAffinity in the default profile (default_plugins.go)


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


__all__ = [
    "MAX_NODE_SCORE",
    "REASONS",
    "SCORE_WEIGHT",
    "AntiAffinityCounter",
    "NodeCounter",
    "PodFilter",
    "SpreadCounter",
    "Term",
    "Topology",
    "needs_filters",
    "resolve_term",
]

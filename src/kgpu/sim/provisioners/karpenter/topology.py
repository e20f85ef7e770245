"""Karpenter's topology spread for new NodeClaims: zone and hostname, ``DoNotSchedule``.

Karpenter (sigs.k8s.io/karpenter ``pkg/controllers/provisioning/scheduling/topology*.go``) keeps a
*topology group* per distinct spread constraint: the matching pods per domain. Its domains are every zone
of every NodePool (the pool's zone requirement intersected with the zones the region's instance types are
offered in, whether or not any of them suits the pool or the pod; with ``nodeTaintsPolicy: Honor`` only
pools whose taints the pod tolerates) plus the zones of existing nodes the constraint's node filter admits. Pods count where they run (existing nodes: the
scheduler's own counts) and where they were put on a claim of this batch, once the claim is narrowed to one
zone; a claim is always one hostname.

When a pod with such a constraint is added to a claim (in flight or new), the claim's zones are narrowed to
one: among the zones the claim can still use, those where ``count + self-match - min <= maxSkew`` (``min``
over the domains the pod's own zone requirements allow; 0 with fewer than ``minDomains`` of them), the one
with the fewest matching pods. Karpenter picks among equal counts at random; kgpu takes the one whose
best-ranked offering in the claim is first (spot first, then price), then the zone name. No zone left: the
claim cannot take the pod ("unsatisfiable topology constraint for topology spread, ..."). For hostname the
minimum is always 0 (Karpenter can always open a new node): a claim takes matching pods up to ``maxSkew``.

``ScheduleAnyway`` constraints are required too until Karpenter relaxes them (``Preferences.Relax``, one at a
time, after the preferred affinity terms): ``kgpu.sim.provisioners.karpenter.solve.relaxations`` hands this module the pod in
each form tried, with the constraints still in force turned into ``DoNotSchedule`` (``required_form``).

Other topology keys and pod (anti-)affinity are not modelled here: those pods carry a
``karpenter-topology`` or ``karpenter-preferences`` warning (``kgpu.sim.unmodelled``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kgpu.model.nodepool import LABEL_HOSTNAME, LABEL_ZONE
from kgpu.model.objects import LabelSelector, Pod, PodSpecInfo, Requirement, SpreadConstraint, Taint
from kgpu.model.predicates import affinity_matches, first_untolerated, requirement_matches, selector_matches

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
KEYS = (LABEL_ZONE, LABEL_HOSTNAME)


class PoolLike(Protocol):
    """What the groups read of a NodePool's model (``kgpu.sim.provisioners.karpenter.solve.PoolModel``)."""

    options: list[Any]
    taints: tuple[Taint, ...]


def modelled(c: SpreadConstraint) -> bool:
    return c.when_unsatisfiable == DO_NOT_SCHEDULE and c.topology_key in KEYS


def constraints(spec: PodSpecInfo) -> tuple[SpreadConstraint, ...]:
    """The pod's spread constraints this module models."""
    return tuple(c for c in spec.topology_spread if modelled(c))


def any_spread(spec: PodSpecInfo) -> bool:
    """Whether Karpenter's first try for the pod has a constraint this module models (``ScheduleAnyway``
    ones included: they are required until relaxed)."""
    return any(c.topology_key in KEYS for c in spec.topology_spread)


def required_form(spec: PodSpecInfo, spread: Sequence[SpreadConstraint] | None = None) -> PodSpecInfo:
    """``spec`` with ``spread`` (default: its own constraints) as Karpenter enforces them: ``ScheduleAnyway``
    turned into ``DoNotSchedule``."""
    cs = tuple(spec.topology_spread if spread is None else spread)
    strict = tuple(
        replace(c, when_unsatisfiable=DO_NOT_SCHEDULE) if c.when_unsatisfiable == SCHEDULE_ANYWAY else c
        for c in cs
    )
    return spec if strict == spec.topology_spread else replace(spec, topology_spread=strict)


def _selector(c: SpreadConstraint, labels: Mapping[str, str]) -> LabelSelector | None:
    """The constraint's selector with matchLabelKeys merged in from the pod's labels (Karpenter's
    newForTopologies); None selects no pod."""
    if c.selector is None:
        return None
    extra = tuple(Requirement(k, "In", (labels[k],)) for k in c.match_label_keys if k in labels)
    return LabelSelector(extra + c.selector.requirements) if extra else c.selector


@dataclass(eq=False)
class Group:
    """One TopologyGroup of type spread."""

    key: str
    namespace: str
    selector: LabelSelector | None
    max_skew: int
    min_domains: int
    owner: PodSpecInfo  # for the node filter: its selector, required affinity and tolerations
    honor_affinity: bool
    honor_taints: bool
    existing: Mapping[str, int] = field(default_factory=dict)  # zone -> pods on existing nodes (live)
    claims: dict[Any, int] = field(default_factory=dict)  # zone (or claim, for hostname) -> pods on claims
    universe: set[str] = field(default_factory=set)  # zones
    _masks: dict[int, int] = field(default_factory=dict)  # per pool model: offerings the filter admits

    def selects(self, pod: Pod) -> bool:
        return (
            self.selector is not None
            and pod.namespace == self.namespace
            and selector_matches(self.selector, pod.labels)
        )

    def admits(self, model: PoolLike) -> int:
        """The offerings of ``model`` whose nodes this group's node filter admits (TopologyNodeFilter)."""
        hit = self._masks.get(id(model))
        if hit is None:
            hit = 0
            if not (
                self.honor_taints and first_untolerated(model.taints, self.owner.tolerations) is not None
            ):
                for i, opt in enumerate(model.options):
                    if not self.honor_affinity or affinity_matches(self.owner, opt.node.labels, ""):
                        hit |= 1 << i
            self._masks[id(model)] = hit
        return hit

    def count(self, zone: str) -> int:
        return self.existing.get(zone, 0) + self.claims.get(zone, 0)

    def domains(self) -> set[str]:
        """The NodePools' zones and those of existing nodes the filter admits."""
        return self.universe | set(self.existing)


class ClaimTopology:
    """The spread groups of one provisioning pass, and the zones of each pool's offerings."""

    def __init__(
        self,
        scheduler: Any,
        models: Sequence[Any],
        pending: Iterable[Pod],
        zones: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        """``zones``: per pool model (by id), the zones the NodePool allows; its domains whether or not any
        instance type suits it (Karpenter's buildDomainGroups intersects the pool's zones with every type's
        offerings, compatible or not). Default: the zones of the pool's offerings."""
        self.scheduler = scheduler
        self.models = models
        self.zone_masks: dict[int, dict[str, int]] = {}
        self.pool_zones: dict[int, set[str]] = {}
        for m in models:
            masks: dict[str, int] = {}
            for i, opt in enumerate(m.options):
                masks[opt.zone] = masks.get(opt.zone, 0) | (1 << i)
            self.zone_masks[id(m)] = masks
            given = zones.get(id(m)) if zones is not None else None
            self.pool_zones[id(m)] = set(given) if given else set(masks)
        self.groups: dict[tuple[object, ...], Group] = {}
        self._owned: dict[tuple[int, str, int], list[Group]] = {}
        self._selecting: dict[tuple[str, int], list[Group]] = {}
        self._keep: list[object] = []  # keeps the objects whose ids key the memos alive
        strict: dict[int, PodSpecInfo] = {}
        for pod in pending:  # every group exists before the first pod is recorded (NewTopology)
            if any_spread(pod.spec):
                spec = strict.get(id(pod.spec))
                if spec is None:
                    spec = strict[id(pod.spec)] = required_form(pod.spec)
                self.owned(pod, spec)

    # --- groups ----------------------------------------------------------------------------------------

    def owned(self, pod: Pod, spec: PodSpecInfo) -> list[Group]:
        """The groups whose constraints ``pod`` (as ``spec``, the relaxed form being tried) must meet."""
        memo = (id(spec), pod.namespace, id(pod.labels))
        hit = self._owned.get(memo)
        if hit is None:
            self._keep.extend((spec, pod.labels))
            hit = self._owned[memo] = [self._group(pod, spec, c) for c in constraints(spec)]
        return hit

    def _group(self, pod: Pod, spec: PodSpecInfo, c: SpreadConstraint) -> Group:
        selector = _selector(c, pod.labels)
        honor_affinity = c.node_affinity_policy == "Honor"
        honor_taints = c.node_taints_policy == "Honor"
        key = (
            c.topology_key,
            pod.namespace,
            selector,
            c.max_skew,
            c.min_domains,
            (spec.node_selector, spec.affinity) if honor_affinity else None,
            spec.tolerations if honor_taints else None,
        )
        group = self.groups.get(key)
        if group is not None:
            return group
        group = Group(
            c.topology_key,
            pod.namespace,
            selector,
            c.max_skew,
            c.min_domains,
            spec,
            honor_affinity,
            honor_taints,
        )
        if c.topology_key == LABEL_ZONE:
            for m in self.models:  # buildDomainGroups: with Honor, the pools whose taints it tolerates
                if not (honor_taints and first_untolerated(m.taints, spec.tolerations) is not None):
                    group.universe.update(self.pool_zones[id(m)])
            # pods on existing nodes, and their zones: the scheduler's own counts for this constraint
            for k, domains, *_ in self.scheduler.topology.prepare(pod).spread:
                if k == LABEL_ZONE:
                    group.existing = domains
                    break
        self.groups[key] = group
        self._selecting.clear()
        return group

    def selecting(self, pod: Pod) -> list[Group]:
        """The groups that count ``pod`` (its namespace and labels match their selector)."""
        memo = (pod.namespace, id(pod.labels))
        hit = self._selecting.get(memo)
        if hit is None:
            self._keep.append(pod.labels)
            hit = self._selecting[memo] = [g for g in self.groups.values() if g.selects(pod)]
        return hit

    # --- a pod on a claim --------------------------------------------------------------------------------

    def zones(self, model: Any, mask: int) -> list[str]:
        return [z for z, m in self.zone_masks[id(model)].items() if m & mask]

    def narrow(
        self, pod: Pod, spec: PodSpecInfo, model: Any, mask: int, claim: object | None
    ) -> tuple[int, str]:
        """The offerings of ``mask`` (a claim of ``model``, or a new one when ``claim`` is None) left once the
        pod's spread constraints pick its zone; (0, Karpenter's error) when they leave none."""
        for group in self.owned(pod, spec):
            self_match = 1 if group.selects(pod) else 0
            if group.key == LABEL_HOSTNAME:
                on_claim = group.claims.get(id(claim), 0) if claim is not None else 0
                if on_claim + self_match > group.max_skew:
                    return 0, _error(
                        group, f"{LABEL_HOSTNAME} Exists", f"{LABEL_HOSTNAME} In [{_claim_name(claim)}]"
                    )
                continue
            domains = group.domains()
            allowed = [z for z in domains if _allows(spec, z)]
            low = min((group.count(z) for z in allowed), default=None)
            if low is None or len(allowed) < group.min_domains:
                low = 0 if low is not None else -(1 << 31)
            masks = self.zone_masks[id(model)]
            best: tuple[int, int, str] | None = None
            for z in self.zones(model, mask):
                if z not in domains:
                    continue
                n = group.count(z) + self_match
                if n - low > group.max_skew:
                    continue
                zm = mask & masks[z]
                rank = (n, (zm & -zm).bit_length(), z)
                if best is None or rank < best:
                    best = rank
            if best is None:
                pod_domains = _requirement_text(spec, allowed)
                node_domains = f"{LABEL_ZONE} In [{' '.join(sorted(self.zones(model, mask)))}]"
                return 0, _error(group, pod_domains, node_domains)
            mask &= masks[best[2]]
        return mask, ""

    def record(self, pods: Sequence[Pod], model: Any, claim: Any, mask: int) -> None:
        """Pods added to ``claim`` (offerings ``mask`` left): every group that selects them and whose node
        filter admits the claim counts them, in the claim's zone once it has only one (Topology.Record)."""
        if not self.groups:
            return
        zones = self.zones(model, mask)
        for pod in pods:
            for group in self.selecting(pod):
                if not group.admits(model) & mask:
                    continue
                if group.key == LABEL_HOSTNAME:
                    group.claims[id(claim)] = group.claims.get(id(claim), 0) + 1
                elif len(zones) == 1:
                    group.claims[zones[0]] = group.claims.get(zones[0], 0) + 1

    def opening_pods(self, pod: Pod, spec: PodSpecInfo, remaining: int) -> int:
        """How many of ``remaining`` such pods a new claim is sized for: its share of the zones, and at most
        maxSkew matching pods on one hostname."""
        n = remaining
        for group in self.owned(pod, spec):
            if group.key == LABEL_HOSTNAME and group.selects(pod):
                n = min(n, group.max_skew)
            elif group.key == LABEL_ZONE and group.domains():
                n = min(n, -(-remaining // len(group.domains())))
        return max(n, 1)


def _allows(spec: PodSpecInfo, zone: str) -> bool:
    """The pod's own zone requirements (node selector, the required affinity term it is tried with)."""
    labels = {LABEL_ZONE: zone}
    for k, v in spec.node_selector:
        if k == LABEL_ZONE and v != zone:
            return False
    if spec.affinity is not None and spec.affinity.terms:
        for term in spec.affinity.terms[:1]:
            for r in term.match_expressions:
                if r.key == LABEL_ZONE and not requirement_matches(r, labels):
                    return False
    return True


def _requirement_text(spec: PodSpecInfo, allowed: Sequence[str]) -> str:
    constrained = any(k == LABEL_ZONE for k, _ in spec.node_selector) or (
        spec.affinity is not None
        and any(r.key == LABEL_ZONE for t in spec.affinity.terms[:1] for r in t.match_expressions)
    )
    if not constrained:
        return f"{LABEL_ZONE} Exists"
    return f"{LABEL_ZONE} In [{' '.join(sorted(allowed))}]"


def _claim_name(claim: object | None) -> str:
    return f"hostname-placeholder-{id(claim) % 10000:04d}" if claim is not None else "hostname-placeholder"


def _error(group: Group, pod_domains: str, node_domains: str) -> str:
    """Karpenter's topologyError text (its closing parenthesis is missing upstream too)."""
    if group.key == LABEL_HOSTNAME:
        counts = ""
    else:
        counts = ", ".join(f"{z}: {group.count(z)}" for z in sorted(group.domains()))
    return (
        f"unsatisfiable topology constraint for topology spread, key={group.key} (counts = {counts}, "
        f"podDomains = {pod_domains}, nodeDomains = {node_domains}"
    )

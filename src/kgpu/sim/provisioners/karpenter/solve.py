"""Karpenter NodePools: a short solve loop over the pods kube-scheduler could not place.

For each pod, in Karpenter's queue order (CPU, then memory, descending), three strategies in turn:

1. **existing node**: a node of the cluster, or one this simulation already launched (``Scheduler.place``);
2. **in-flight node claim**: a claim opened earlier in this batch that can still hold the pod, the one with
   the fewest pods first (Karpenter sorts its claims by pod count before each pod);
3. **new node claim**: from the first NodePool, by descending weight (then name, descending), that the pod is compatible
   with: it tolerates the pool's taints, its node selector and required affinity can be met by some
   instance type / zone / capacity type the pool offers (the labels Karpenter puts on the node), and some
   type holds the pod plus the DaemonSet overhead, within the pool's limits.

A pod none of them takes goes to the back of the queue and is tried again once a pod behind it found a
place (a claim may now hold a key it selects: ``LabelSet``); the loop ends after a round that places nothing.

A claim keeps every instance type offering (type x zone x capacity type) that can still hold all its pods,
so later pods make it grow to a bigger type, as Karpenter's Solve does; when the batch ends it launches the
cheapest remaining one, spot first when the pool allows spot and a spot offering is left (Karpenter's
capacity-type preference). Offerings are ranked once per pool, so "the cheapest remaining" is the lowest set
bit of a bitmask, and identical pods are added to a claim in bulk.

Where Karpenter's disruption controller takes the launch later (consolidation) is
``kgpu.sim.provisioners.karpenter.disruption``.

Limits: like Karpenter, opening a claim reserves the largest capacity (not allocatable) it may still launch
against the pool's limits; offerings whose capacity would exceed what is left are not considered.

Topology spread on zone and hostname (``DoNotSchedule``) narrows each claim to the zone the pod's
constraints pick, one pod at a time (``kgpu.sim.provisioners.karpenter.topology``).

Known differences from Karpenter (docs/simulate.md): preferred pod (anti-)affinity, spread on other keys and pod affinity are not
modelled. Preferred node affinity and zone and hostname ScheduleAnyway spread are required until relaxed,
as Karpenter's Preferences.Relax does (``relaxations``).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kgpu.catalog import Catalog
from kgpu.model.objects import CPU, MEMORY, Node, NodeSelector, Pod, PodSpecInfo, Term
from kgpu.model.predicates import ports_conflict
from kgpu.model.profile import PoolKind, Profile
from kgpu.sim.provisioners.karpenter.nodeclaim import NodeClaim, _append, _first_fit, _settle
from kgpu.sim.provisioners.karpenter.overlay import NodeOverlay, OverlayStore, profile_overlays
from kgpu.sim.provisioners.karpenter.pool_model import (
    BIG,
    HOST_PORT_WAIT,
    Option,
    PoolModel,
    _port_conflict,
    bits,
)
from kgpu.sim.provisioners.karpenter.requirements import (
    MinValues,
    affinity_tries,
)
from kgpu.sim.provisioners.karpenter.topology import SCHEDULE_ANYWAY, ClaimTopology, required_form
from kgpu.sim.provisioners.karpenter.topology import any_spread as spread
from kgpu.sim.provisioners.pools import (
    Context,
    NewNode,
    format_resources,
    karpenter_order,
    pool_zones,
    runs,
)
from kgpu.sim.scheduler.scheduler import NodeState
from kgpu.sim.sharing import new_node


@dataclass(frozen=True, slots=True)
class Try:
    """One form of a pod Karpenter tries: ``want`` (its requirements, the preference it still holds ANDed
    in), ``strict`` (PreferNoSchedule taints not tolerated) and ``domains`` (the same without preferences:
    Karpenter's StrictRequirements, which alone narrow the topology domains a pod counts)."""

    want: PodSpecInfo
    strict: bool
    domains: PodSpecInfo


def relaxations(spec: PodSpecInfo, prefer_no_schedule: bool) -> list[Try]:
    """What Karpenter tries for a pod, in its relaxation order (Preferences.Relax), for what kgpu models.

    Karpenter's pod requirements are the first required node affinity term ANDed with the heaviest preferred
    term (``NewPodRequirements``: preferences are required until relaxed; equal weights keep their order).
    Each relaxation then removes one thing, the first that applies: a required term while more than one is
    left (the first), [preferred pod (anti-)affinity, not modelled], the heaviest preferred node affinity
    term, a ScheduleAnyway spread constraint (the first left, which Karpenter swaps with the last before
    dropping it), and last, when some NodePool has a PreferNoSchedule taint, tolerating those taints.
    ScheduleAnyway constraints still in force are required (``DoNotSchedule``)."""
    terms = spec.affinity.terms if spec.affinity is not None else ()
    preferred = spec.preferred
    original = spec
    soft = any(c.when_unsatisfiable == SCHEDULE_ANYWAY for c in spec.topology_spread)
    if soft:
        spec = required_form(spec)

    def with_terms(term: Term | None, pref: Term | None) -> PodSpecInfo:
        if pref is not None:
            exprs = (term.match_expressions if term is not None else ()) + pref.match_expressions
            term = Term(exprs, term.match_fields if term is not None else ())
        if term is None:
            return spec if not spec.preferred else replace(spec, preferred=())
        return replace(spec, affinity=NodeSelector((term,)), preferred=())

    # (want, domains) pairs: the requirements tried, and the same without the preference
    pairs = [(with_terms(t, p), with_terms(t, None)) for t, p in affinity_tries(original)]
    if len(terms) <= 1 and not preferred:
        pairs = [(spec, spec)]
    if soft:
        left, last = list(original.topology_spread), pairs[-1][0]
        while True:
            i = next((i for i, c in enumerate(left) if c.when_unsatisfiable == SCHEDULE_ANYWAY), None)
            if i is None:
                break
            left[i] = left[-1]
            left.pop()
            relaxed = required_form(last, left)
            pairs.append((relaxed, relaxed))
    if not prefer_no_schedule:
        return [Try(w, False, d) for w, d in pairs]
    return [Try(w, True, d) for w, d in pairs] + [Try(pairs[-1][0], False, pairs[-1][1])]


def resource_dims(pods: Sequence[Pod]) -> tuple[str, ...]:
    names = {CPU, MEMORY, "pods"}
    for pod in pods:
        names.update(k for k, _ in pod.spec.requests)
    return tuple(sorted(names))


def pod_vector(spec: PodSpecInfo, dims: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(1 if d == "pods" else spec.request(d) for d in dims)


class Karpenter:
    """The profile's Karpenter NodePools."""

    name = "karpenter"

    def __init__(
        self,
        profile: Profile,
        catalog: Catalog,
        *,
        overlays: Sequence[NodeOverlay] = (),
    ) -> None:
        self.profile = profile
        self.catalog = catalog
        # NodeOverlays from the input (karpenter.sh/v1alpha1), evaluated with those kgpu renders for the
        # profile's shared pools (kgpu.sim.provisioners.karpenter.overlay); ``overlay_errors``: the ones Karpenter leaves out
        self.overlays: list[NodeOverlay] = list(overlays)
        self.overlay_errors: dict[str, str] = {}
        pools = [p for p in profile.pools if p.kind == PoolKind.KARPENTER]
        # Karpenter's OrderByWeight: weight descending, equal weights by name descending
        by_name = sorted(pools, key=lambda p: p.name, reverse=True)
        self.pools = sorted(by_name, key=lambda p: -(p.weight or 0))
        self.models: list[PoolModel] = []  # the last pass's, for cost bounds and consolidation
        self._added: list[tuple[NodeClaim, Sequence[Pod]]] = []  # pods as they joined claims, in order

    def provision(self, pending: Sequence[Pod], ctx: Context) -> dict[str, str]:
        """Solve over the pending pods, then again over the pods it left for a host port another claim of the
        same pool took (the pool's claims share their host ports within one Solve: ``claim_ports``): the
        provisioner's next batch, with the nodes launched so far existing, as Karpenter runs it while pods
        stay pending. Each later batch launches at least one node, or stops."""
        notes = self._provision(pending, ctx)
        batch = 1
        while True:
            waiting = [p for p in pending if p.key in notes and HOST_PORT_WAIT in notes[p.key]]
            if not waiting:
                return notes
            batch += 1
            before = len(ctx.new_nodes)
            again = self._provision(waiting, ctx, [m.over(ctx) for m in self.models])
            if len(ctx.new_nodes) == before:
                return notes
            for node in ctx.new_nodes[before:]:
                node.batch = batch
            for pod in waiting:
                notes.pop(pod.key, None)
                if pod.key in again:
                    notes[pod.key] = again[pod.key]

    def overlay_store(self) -> OverlayStore | None:
        """Karpenter's InstanceTypeStore over the input's NodeOverlays and the profile's (None: none)."""
        overlays = [*profile_overlays(self.profile, self.catalog), *self.overlays]
        if not overlays:
            return None
        cluster = self.profile.cluster
        store = OverlayStore(overlays, self.pools, self.catalog, cluster.region, cluster.zones or ())
        self.overlay_errors = dict(store.errors)
        return store

    def _provision(
        self, pending: Sequence[Pod], ctx: Context, models: list[PoolModel] | None = None
    ) -> dict[str, str]:
        if models is None:
            dims = resource_dims(pending)
            store = self.overlay_store()
            models = [PoolModel(self.profile, p, self.catalog, ctx, dims, store) for p in self.pools]
        else:
            dims = models[0].dims if models else resource_dims(pending)
        self.models = models
        claims: list[NodeClaim] = []  # in-flight claims, fewest pods first (see _settle)
        self._added = []
        dead: dict[tuple[PodSpecInfo, bool], set[int]] = {}
        notes: dict[str, str] = {}
        prefer = any(m.prefer_no_schedule for m in models)
        topo = None
        if any(spread(p.spec) for p in pending):
            zones = {id(m): pool_zones(self.profile, m.pool) for m in models}
            topo = ClaimTopology(ctx.scheduler, models, pending, zones)
        # Karpenter's queue (Solve): a pod that finds no place goes to the back and is tried again, all its
        # relaxations anew, once some pod behind it found one (a claim it joined may now hold a key the pod
        # selects, or hold room); the loop ends when a whole round of the queue places nothing. Pods that
        # could fit no existing node wait on the claims only: existing nodes just fill up during a Solve.
        queue: collections.deque[tuple[list[Pod], list[str], int]] = collections.deque()
        successes = 0
        for run in runs(karpenter_order(pending)):
            todo = ctx.place_existing(run)
            before = len(todo)
            errors: list[str] = []
            todo, retry = self._try(todo, dims, models, claims, dead, prefer, topo, errors)
            successes += before - len(todo)
            if todo:
                queue.append((todo, errors, successes - 1 if retry else successes))
        while queue and queue[0][2] != successes:
            todo, errors, _ = queue.popleft()
            before = len(todo)
            todo, retry = self._try(todo, dims, models, claims, dead, prefer, topo, errors)
            successes += before - len(todo)
            if todo:
                queue.append((todo, errors, successes - 1 if retry else successes))
        for todo, errors, _ in queue:
            text = "karpenter: " + ("; ".join(errors) if errors else "no nodepool")
            for pod in todo:
                notes[pod.key] = text
        # every node first, then the pods in the order they joined their claims: kube-scheduler binds them
        # once the nodes are up, and in that order each bind keeps the spread each add kept
        states: dict[int, NodeState] = {}
        failed: dict[
            int, str
        ] = {}  # the provisioner's Create refused the claim, or the cloud launched nothing
        for claim in claims:
            opt = self._choose(claim)
            if opt is None:
                failed[id(claim)] = claim.pool.create_error or claim.launch_error()
            else:
                states[id(claim)] = self._launch(claim, opt, ctx)
        for claim, pods in self._added:
            st = states.get(id(claim))
            if st is None:  # its pods wait
                for pod in pods:
                    notes[pod.key] = "karpenter: " + failed[id(claim)]
                continue
            for pod in pods:
                if ctx.scheduler.admits(pod, st):
                    ctx.scheduler.bind(pod, st)
                    ctx.placed(pod, st)
                    continue
                decision = ctx.scheduler.place(pod)  # should not happen: the claim was sized for it
                if decision.node is not None:
                    ctx.placed(pod, decision.node)
        return notes

    def _try(
        self,
        todo: list[Pod],
        dims: tuple[str, ...],
        models: list[PoolModel],
        claims: list[NodeClaim],
        dead: dict[tuple[PodSpecInfo, bool], set[int]],
        prefer: bool,
        topo: ClaimTopology | None,
        errors: list[str],
    ) -> tuple[list[Pod], bool]:
        """Identical pods on the in-flight claims, else on new ones, each relaxation in turn; the pods left,
        and whether one of them was left before a later one found a place (spread pods go one at a time)."""
        if not todo:
            return todo, False
        spec = todo[0].spec
        vec = pod_vector(spec, dims)
        if topo is not None and spread(spec):
            return self._place_spread(todo, vec, models, claims, dead, prefer, topo, errors)
        for attempt in relaxations(spec, prefer):
            want, strict = attempt.want, attempt.strict
            # in-flight claims, emptiest first; a claim that cannot take this spec never will again
            skip = dead.setdefault((want, strict), set())
            masks = {id(m): m.compat(want, vec, strict).mask for m in models}
            loose = frozenset(id(m) for m in models if m.custom_sets(want))
            while todo:
                i, k, mask = _first_fit(claims, skip, masks, vec, spec, want, strict, loose)
                if i < 0:
                    break
                claim = claims[i]
                # the claim stays the first to try while it has no more pods than the claim after it
                after = len(claims[i + 1].pods) if i + 1 < len(claims) else BIG
                k = max(1, min(k, after - len(claim.pods)))
                claim.add(todo[:k], vec, mask, want)
                self._added.append((claim, todo[:k]))
                if topo is not None:
                    topo.record(todo[:k], claim.pool, claim, claim.allowed)
                todo = todo[k:]
                _settle(claims, i)
            # new node claims, pools by weight
            while todo:
                fresh = self._new_claim(models, want, vec, errors, len(todo), strict)
                if fresh is None:
                    break
                k = fresh.can_add(vec, fresh.allowed, spec.host_ports)
                if k <= 0:  # not expected: the pool's compatibility check sized it for one pod
                    break
                fresh.add(todo[:k], vec, fresh.allowed, want)
                fresh.pool.reserve(fresh.allowed)
                _append(claims, fresh)
                self._added.append((fresh, todo[:k]))
                if topo is not None:
                    topo.record(todo[:k], fresh.pool, fresh, fresh.allowed)
                todo = todo[k:]
            if not todo:
                break
        return todo, False

    def _place_spread(
        self,
        todo: list[Pod],
        vec: tuple[int, ...],
        models: list[PoolModel],
        claims: list[NodeClaim],
        dead: dict[tuple[PodSpecInfo, bool], set[int]],
        prefer: bool,
        topo: ClaimTopology,
        errors: list[str],
    ) -> tuple[list[Pod], bool]:
        """Pods with zone or hostname spread constraints, one at a time (kgpu.sim.provisioners.karpenter.topology): each
        narrows the claim it joins to the zone its constraints pick, so a claim that could not take one may
        take the next; claims are skipped for good only when their resources or compatibility rule it out."""
        left: list[Pod] = []
        retry = False  # a pod was left before a later one found a place
        spec = todo[0].spec if todo else None
        tries = relaxations(spec, prefer) if spec is not None else []
        for n, pod in enumerate(todo):
            assert spec is not None
            placed = False
            for attempt in tries:
                want, strict, dom = attempt.want, attempt.strict, attempt.domains
                masks = {id(m): m.compat(want, vec, strict).mask for m in models}
                loose = frozenset(id(m) for m in models if m.custom_sets(want))
                skip = dead.setdefault((want, strict), set())
                for j, claim in enumerate(claims):
                    if id(claim) in skip:
                        continue
                    mask = masks[id(claim.pool)]
                    if claim.held:
                        mask = claim.mask_for(want, vec, strict, mask)
                    if not mask or claim.can_add(vec, mask, spec.host_ports) <= 0:
                        if id(claim.pool) not in loose:  # as in _first_fit
                            skip.add(id(claim))
                        continue
                    narrowed, _ = topo.narrow(pod, dom, claim.pool, claim.allowed & mask, claim)
                    if narrowed and claim.can_add(vec, narrowed, spec.host_ports) > 0:
                        claim.add([pod], vec, narrowed, want)
                        self._added.append((claim, [pod]))
                        topo.record([pod], claim.pool, claim, claim.allowed)
                        _settle(claims, j)
                        placed = True
                        break
                if placed:
                    break
                share = topo.opening_pods(pod, dom, len(todo) - n)
                fresh = self._new_claim(models, want, vec, errors, share, strict, topo, pod, dom)
                if fresh is not None and fresh.can_add(vec, fresh.allowed, spec.host_ports) > 0:
                    fresh.add([pod], vec, fresh.allowed, want)
                    fresh.pool.reserve(fresh.allowed)
                    _append(claims, fresh)
                    self._added.append((fresh, [pod]))
                    topo.record([pod], fresh.pool, fresh, fresh.allowed)
                    placed = True
                    break
            if not placed:
                left.append(pod)
            elif left:
                retry = True
        return left, retry

    def _new_claim(
        self,
        models: list[PoolModel],
        spec: PodSpecInfo,
        vec: tuple[int, ...],
        errors: list[str],
        pods: int,
        strict: bool = False,
        topo: ClaimTopology | None = None,
        pod: Pod | None = None,
        domains: PodSpecInfo | None = None,
    ) -> NodeClaim | None:
        """A claim from the first pool, by weight, that can take the pod (with ``topo`` and ``pod``: in the
        zone its spread constraints pick, over the domains ``domains`` allows); ``errors`` gets each pool's
        reason when none can."""
        errors.clear()
        for model in models:
            compat = model.compat_with(spec, vec, strict, model.template_sets)
            if not compat.mask:
                errors.append(
                    f'incompatible with nodepool "{model.pool.name}", daemonset overhead='
                    f"{format_resources(model.overhead)}, {compat.error}"
                )
                continue
            mask = model.within_limits(compat.mask)
            if not mask:
                errors.append(f'all available instance types exceed limits for nodepool "{model.pool.name}"')
                continue
            if spec.host_ports and ports_conflict(spec.host_ports, model.claim_ports):
                errors.append(
                    f'incompatible with nodepool "{model.pool.name}", daemonset overhead='
                    f"{format_resources(model.overhead)}, {HOST_PORT_WAIT}, "
                    + _port_conflict(spec.host_ports, [tuple(model.claim_ports)])
                )
                continue
            if topo is not None and pod is not None:
                mask, error = topo.narrow(pod, domains or spec, model, mask, None)
                if not mask:
                    errors.append(
                        f'incompatible with nodepool "{model.pool.name}", daemonset overhead='
                        f"{format_resources(model.overhead)}, {error}"
                    )
                    continue
            if model.min_values:
                unmet = model.min_values.unmet(mask)
                if unmet:
                    errors.append(f'incompatible with nodepool "{model.pool.name}", {MinValues.error(unmet)}')
                    continue
            return NodeClaim(model, mask)
        return None

    def _choose(self, claim: NodeClaim) -> Option | None:
        """The offering launched for a claim; None when the provisioner's Create refuses it or the cloud
        provider launches nothing (consolidation's replacement filters it further)."""
        return None if claim.pool.create_error else claim.cheapest()

    def _launch(self, claim: NodeClaim, opt: Option, ctx: Context, name: str = "") -> NodeState:
        pool = claim.pool.pool
        name = name or ctx.node_name(pool.name)
        alloc, labels = new_node(
            pool, opt.type, opt.type.allocatable(), opt.node.labels
        )  # what the plugin advertises
        # an extended resource only a NodeOverlay gives (not the type, not the GPU sharing config) is what the
        # node's own device plugin advertises: the overlay says so
        alloc.update({k: v for k, v in opt.node.allocatable.items() if k not in alloc})
        if pool.sharing is None:
            # no sharing config kgpu knows of (a NodePool read from the cluster): the overlay is how the cluster
            # tells Karpenter what the node's device plugin advertises (time-slicing replicas), so the node
            # advertises it; with a profile's sharing config the node advertises what that config gives
            alloc.update(claim.pool.overlaid_capacity.get(opt.type.name, {}))
        node = Node(name, {**labels, **claim.labels(), "kubernetes.io/hostname": name}, alloc, opt.node.taints)
        new = NewNode(
            name,
            pool.name,
            opt.type.name,
            opt.capacity_type,
            opt.zone,
            opt.price,
            kind="karpenter",
            on_demand_price=opt.on_demand,
            gpus=opt.type.gpu_count,
        )
        return ctx.launch(node, new)


def bound_inputs(
    models: Sequence[PoolModel], pods: Sequence[Pod]
) -> tuple[list[tuple[int, tuple[int, ...], tuple[int, ...]]], list[tuple[int, ...]], list[float]]:
    """Demands (count, vector, columns), column capacities and prices for ``kgpu.sim.cost.lower_bound``.

    A column is a pool's offering shape at the cheapest price a pod kind may buy it; any compatible pool
    counts, so the bound is a relaxation of what the weight order allows too.
    """
    counts: dict[PodSpecInfo, int] = {}
    for pod in pods:
        counts[pod.spec] = counts.get(pod.spec, 0) + 1
    columns: dict[tuple[int, int, float], int] = {}
    caps: list[tuple[int, ...]] = []
    prices: list[float] = []
    demands = []
    for spec, n in counts.items():
        cols: list[int] = []
        for mi, model in enumerate(models):
            vec = pod_vector(spec, model.dims)
            mask = model.compat(spec, vec).mask
            if not mask:
                continue
            for si, shape in enumerate(model.shapes):
                m = shape.mask & mask
                if not m:
                    continue
                price = min(model.options[i].price for i in bits(m))
                key = (mi, si, price)
                if key not in columns:
                    columns[key] = len(caps)
                    caps.append(shape.cap)
                    prices.append(price)
                cols.append(columns[key])
        dims = models[0].dims if models else ()
        demands.append((n, pod_vector(spec, dims), tuple(cols)))
    return demands, caps, prices


__all__ = ["Karpenter", "NodeClaim", "Option", "PoolModel", "bits", "bound_inputs", "resource_dims"]

"""Karpenter NodePools: a short solve loop over the pods kube-scheduler could not place.

For each pod, in Karpenter's queue order (CPU, then memory, descending), three strategies in turn:

1. **existing node**: a node of the cluster, or one this simulation already launched (``Scheduler.place``);
2. **in-flight node claim**: a claim opened earlier in this batch that can still hold the pod, the one with
   the fewest pods first (Karpenter sorts its claims by pod count before each pod);
3. **new node claim**: from the first NodePool, by descending weight (then name, descending), that the pod is compatible
   with: it tolerates the pool's taints, its node selector and required affinity can be met by some
   instance type / zone / capacity type the pool offers (the labels Karpenter puts on the node), and some
   type holds the pod plus the DaemonSet overhead, within the pool's limits.

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

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kgpu.catalog import Catalog
from kgpu.catalog.instance import InstanceType, Offering
from kgpu.model.nodepool import LABEL_ZONE, LABEL_ZONE_ID
from kgpu.model.objects import CPU, MEMORY, HostPort, Node, NodeSelector, Pod, PodSpecInfo, Term
from kgpu.model.predicates import first_untolerated, ports_conflict, requirement_matches
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.sim.provisioners.karpenter.overlay import NodeOverlay, OverlayStore, profile_overlays
from kgpu.sim.provisioners.karpenter.requirements import (
    MinValues,
    affinity_tries,
    label_variants,
    matches,
    pool_requirements,
    well_known,
    with_aliases,
)
from kgpu.sim.provisioners.karpenter.topology import SCHEDULE_ANYWAY, ClaimTopology, required_form
from kgpu.sim.provisioners.karpenter.topology import any_spread as spread
from kgpu.sim.provisioners.pools import (
    LABEL_NODEPOOL,
    Context,
    NewNode,
    format_resources,
    karpenter_order,
    node_taints,
    pool_limits,
    pool_zones,
    runs,
)
from kgpu.sim.scheduler.scheduler import NodeState, StaticFilter
from kgpu.sim.sharing import new_node
from kgpu.sim.simulate import daemon_pods

LABEL_CAPACITY = "karpenter.sh/capacity-type"
BIG = 1 << 62
_OFFERING_KEYS = frozenset((LABEL_ZONE, LABEL_CAPACITY, LABEL_ZONE_ID))


def less_hugepages(allocatable: dict[str, int], capacity: Mapping[str, int]) -> dict[str, int]:
    """Karpenter's ``InstanceType.Allocatable`` (v1.8, ``precompute``): every ``hugepages-<size>`` in the
    capacity (a NodeOverlay's capacity merged over the type's) is reserved from the memory pods can ask
    for, never below zero; the kubelet reserves it the same way."""
    pages = sum(v for k, v in capacity.items() if k.startswith("hugepages-"))
    if not pages:
        return allocatable
    return {**allocatable, MEMORY: max(0, allocatable.get(MEMORY, 0) - pages)}


@dataclass(slots=True)
class Option:
    """One way to launch a node of a pool: instance type, zone, capacity type, price, and its node."""

    type: InstanceType
    zone: str
    capacity_type: str
    price: float
    on_demand: float | None
    node: Node
    shape: int = 0
    values: dict[str, frozenset[str]] | None = (
        None  # per minValues key: the type's values (SatisfiesMinValues)
    )


@dataclass(slots=True)
class Shape:
    """Offerings that hold the same pods: allocatable minus DaemonSet overhead over the batch's resources."""

    cap: tuple[int, ...]
    mask: int = 0
    limit: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Compat:
    """A pod spec against a pool: the offerings it may use, or why none."""

    mask: int
    error: str = ""


class PoolModel:
    """A NodePool's offerings for one provisioning pass, ranked once."""

    def __init__(
        self,
        profile: Profile,
        pool: Pool,
        catalog: Catalog,
        ctx: Context,
        dims: tuple[str, ...],
        overlays: OverlayStore | None = None,
    ) -> None:
        self.pool = pool
        self.dims = dims
        self.taints = node_taints(pool)
        region = profile.cluster.region
        zones = set(pool_zones(profile, pool))
        self.reqs = pool_requirements(pool)
        known = well_known(self.reqs)
        variants = label_variants(self.reqs, pool.labels)
        minv_keys = [r.key for r in self.reqs if r.min_values is not None]
        options: list[Option] = []
        overlaid_capacity: dict[str, Mapping[str, int]] = {}
        self.overlaid_capacity = overlaid_capacity  # by type: the capacity NodeOverlays merge over it
        self.overhead: dict[str, int] = {}
        self.ctx = ctx
        # type-level requirements are checked once per type, the offering-level ones per offering
        type_reqs = [r for r in known if r.key not in _OFFERING_KEYS]
        offering_reqs = [r for r in known if r.key in _OFFERING_KEYS]
        for t in catalog.types():
            offerings = catalog.offerings(t.name, region)
            if not offerings:
                continue
            probe = t.labels(region, offerings[0].zone, offerings[0].capacity_type)
            if not all(matches(r, probe) for r in type_reqs):
                continue
            # what Karpenter believes with the NodeOverlays (kgpu's own for shared pools, and the input's):
            # capacity merged over the type's, offering prices set or adjusted
            overlaid = (
                overlays.get(pool.name, t, {(o.zone, o.capacity_type): o.price for o in offerings})
                if overlays is not None
                else None
            )
            prices = overlaid.prices if overlaid is not None else {}
            if overlaid is not None and overlaid.capacity:
                overlaid_capacity[t.name] = overlaid.capacity
            allocatable = t.allocatable()
            if overlaid is not None and overlaid.capacity:
                allocatable = less_hugepages({**allocatable, **overlaid.capacity}, {**t.capacity(), **overlaid.capacity})
            od = next(
                (prices.get((o.zone, o.capacity_type), o.price) for o in offerings if o.capacity_type == "on-demand"),
                None,
            )
            for off in offerings:
                if zones and off.zone not in zones:
                    continue
                base = with_aliases(t.labels(region, off.zone, off.capacity_type))
                if off.zone_id:
                    base[LABEL_ZONE_ID] = off.zone_id
                if not all(matches(r, base) for r in offering_reqs):
                    continue
                values = _type_values(minv_keys, base, offerings) if minv_keys else None
                for extra in variants:
                    labels = {**base, **extra, **pool.labels, LABEL_NODEPOOL: pool.name}
                    node = Node("", labels, allocatable, self.taints)
                    price = prices.get((off.zone, off.capacity_type), off.price)
                    options.append(Option(t, off.zone, off.capacity_type, price, od, node, values=values))
        self.spot_allowed = any(o.capacity_type == "spot" for o in options)
        spot_first = self.spot_allowed
        options.sort(key=lambda o: (spot_first and o.capacity_type != "spot", o.price, o.type.name, o.zone))
        self.options = options
        shapes: dict[tuple[int, ...], Shape] = {}
        limit_keys = list(pool.limits)
        overheads: dict[str, dict[str, int]] = {}
        capacities: dict[str, dict[str, int]] = {}
        for i, opt in enumerate(options):
            ov = overheads.get(opt.type.name)
            if ov is None:
                ov = overheads[opt.type.name] = ctx.overhead(opt.node)
                if not self.overhead:
                    self.overhead = ov
            alloc = opt.node.allocatable
            cap = tuple(alloc.get(d, 0) - ov.get(d, 0) for d in dims)
            if any(alloc.get(k, 0) < v for k, v in ov.items()):
                # the DaemonSet pods alone do not fit, on some resource the pods may not even ask for:
                # Karpenter fits pod and daemon requests together on every resource, so nothing fits
                cap = (-1,) * len(dims)
            # limits count capacity, as Karpenter's filterByRemainingResources and subtractMax do; `nodes` is
            # no instance capacity: a claim reserves none of it (Karpenter v1.8's Solve), only the pool's
            # existing nodes count against it (_remaining)
            capacity = capacities.get(opt.type.name)
            if capacity is None:  # with the overlay's capacity, as Karpenter's InstanceType.Capacity
                capacity = capacities[opt.type.name] = {**opt.type.capacity(), **overlaid_capacity.get(opt.type.name, {})}
            limit = tuple(capacity.get(key, 0) for key in limit_keys)
            # types that hold the same pods but weigh differently on the limits are different shapes
            shape = shapes.get(cap + limit)
            if shape is None:
                shape = shapes[cap + limit] = Shape(cap, limit=dict(zip(limit_keys, limit, strict=True)))
            shape.mask |= 1 << i
        self.shapes = list(shapes.values())
        # host ports the DaemonSet pods hold on each offering's node (Karpenter's daemon host-port usage)
        self.daemon_ports: list[tuple[HostPort, ...]] = [()] * len(options)
        # the host ports of the pods every claim of this pool took in this pass: Karpenter v1.8 hands each new
        # NodeClaim of a template the template's one HostPortUsage (NewNodeClaim), and NodeClaim.Add records a
        # pod's ports there, so a pod with a host port blocks that port on every claim of the pool, open or new
        self.claim_ports: list[HostPort] = []
        if any(ds.template.host_ports for ds in ctx.daemonsets):
            self.daemon_ports = [self._daemon_ports(opt.node) for opt in options]
        for idx, shape in enumerate(self.shapes):
            m = shape.mask
            while m:
                low = m & -m
                options[low.bit_length() - 1].shape = idx
                m ^= low
        self.all_mask = (1 << len(options)) - 1
        # types the AWS provider launches first when a claim can use them (filterExoticInstanceTypes):
        # no accelerator and not metal
        self.generic_mask = 0
        self.on_demand_mask = 0
        for i, opt in enumerate(options):
            if not opt.type.has_gpu and "metal" not in opt.type.size:
                self.generic_mask |= 1 << i
            if opt.capacity_type == "on-demand":
                self.on_demand_mask |= 1 << i
        self.remaining = self._remaining(ctx)
        self._initial = dict(self.remaining)
        self.min_values = MinValues(self.reqs, [o.values or {} for o in options])
        self._compat: dict[tuple[PodSpecInfo, bool], Compat] = {}
        self._static: dict[tuple[object, ...], int] = {}
        self.prefer_no_schedule = any(t.effect == "PreferNoSchedule" for t in self.taints)

    def _daemon_ports(self, node: Node) -> tuple[HostPort, ...]:
        return tuple(
            hp for ds in self.ctx.daemonsets for pod in daemon_pods(ds, [node]) for hp in pod.spec.host_ports
        )

    def _remaining(self, ctx: Context) -> dict[str, int]:
        """What the pool's limits leave after its existing nodes, as Karpenter's Solve counts it. ``nodes``
        is not among them: Solve never counts it (no instance type or node has a ``nodes`` capacity); the
        provisioner's Create refuses the pool's claims instead (``create_error``)."""
        limits = pool_limits(self.pool)
        self.create_error = ""
        if not limits:
            return {}
        mine = [st for st in ctx.scheduler.states if st.node.labels.get(LABEL_NODEPOOL) == self.pool.name]
        nodes = limits.pop("nodes", None)
        if nodes is not None and len(mine) > nodes:
            # Provisioner.Create: Limits.ExceededBy(the pool's usage, one `nodes` per node): usage above
            # the limit refuses every new claim of the pool, and its pods stay pending
            self.create_error = (
                f'nodepool "{self.pool.name}": creating node claim, resource usage exceeds limit '
                f"(limit={nodes}, resource-name=nodes, usage={len(mine)})"
            )
        for st in mine:  # an existing node counts its capacity (StateNode.Capacity), allocatable without one
            counted = st.node.capacity if st.node.capacity is not None else st.node.allocatable
            for key in limits:
                limits[key] -= counted.get(key, 0)
        return limits

    def again(self) -> PoolModel:
        """The same pool for another pass over the same cluster: offerings and memos shared, limits as
        they were before this pass reserved any."""
        other = copy.copy(self)
        other.remaining = dict(self._initial)
        other.claim_ports = []
        return other

    def over(self, ctx: Context) -> PoolModel:
        """The same pool for a pass over another cluster (``ctx``): offerings and memos shared, limits
        counted against that cluster's nodes of the pool."""
        other = copy.copy(self)
        other.remaining = other._remaining(ctx)
        other._initial = dict(other.remaining)
        other.claim_ports = []
        return other

    def requirement_text(self) -> str:
        parts = [str(r) for r in self.reqs]
        parts.append(f"{LABEL_NODEPOOL} In [{self.pool.name}]")
        parts.extend(f"{k} In [{v}]" for k, v in sorted(self.pool.labels.items()))
        return ", ".join(parts)

    def compat(self, spec: PodSpecInfo, vec: tuple[int, ...], strict: bool = False) -> Compat:
        """Which offerings ``spec`` may use, memoised; the error in Karpenter's words when none.
        ``strict``: PreferNoSchedule taints count too (Karpenter's first try, before relaxing)."""
        hit = self._compat.get((spec, strict))
        if hit is not None:
            return hit
        hit = self._compat[spec, strict] = self._check(spec, vec, strict)
        return hit

    def _check(self, spec: PodSpecInfo, vec: tuple[int, ...], strict: bool) -> Compat:
        effects = ("NoSchedule", "NoExecute", "PreferNoSchedule") if strict else ("NoSchedule", "NoExecute")
        taint = first_untolerated(self.taints, spec.tolerations, effects)
        if taint is not None:
            return Compat(0, f"did not tolerate {taint}")
        ports_ok = self.all_mask
        if spec.host_ports:
            ports_ok = 0
            for i, used in enumerate(self.daemon_ports):
                if not ports_conflict(spec.host_ports, used):
                    ports_ok |= 1 << i
            if not ports_ok:
                return Compat(
                    0, "checking host port usage, " + _port_conflict(spec.host_ports, self.daemon_ports)
                )
        key = (spec.tolerations, spec.node_selector, spec.affinity, spec.node_name)
        static = self._static.get(key)
        if static is None:  # the node-only filters, once per distinct selector/affinity/tolerations
            flt = StaticFilter(spec)
            static = 0
            for i, opt in enumerate(self.options):
                if flt.reason(opt.node) is None:
                    static |= 1 << i
            self._static[key] = static
        mask = static & ports_ok
        if not mask:
            return Compat(0, "incompatible requirements, " + self._requirement_error(spec))
        fit = 0
        for shape in self.shapes:
            if shape.mask & mask and _count(shape.cap, None, vec) > 0:
                fit |= shape.mask
        if not mask & fit:
            wanted = {d: v for d, v in zip(self.dims, vec, strict=True) if v}
            return Compat(
                0,
                f"no instance type satisfied resources {format_resources(wanted)} and requirements {self.requirement_text()}",
            )
        if self.min_values:
            unmet = self.min_values.unmet(mask & fit)
            if unmet:
                wanted = {d: v for d, v in zip(self.dims, vec, strict=True) if v}
                return Compat(
                    0,
                    f"no instance type satisfied resources {format_resources(wanted)} and requirements "
                    f"{self.requirement_text()} ({MinValues.error(unmet)})",
                )
        return Compat(mask & fit)

    def _requirement_error(self, spec: PodSpecInfo) -> str:
        reqs: list[tuple[str, str, tuple[str, ...]]] = [(k, "In", (v,)) for k, v in spec.node_selector]
        if spec.affinity is not None and spec.affinity.terms:
            reqs.extend((r.key, r.operator, r.values) for r in spec.affinity.terms[0].match_expressions)
        from kgpu.model.objects import Requirement

        for key, op, values in reqs:
            req = Requirement(key, op, values)
            if any(requirement_matches(req, o.node.labels) for o in self.options):
                continue
            known = sorted({o.node.labels[key] for o in self.options if key in o.node.labels})
            if not known:
                return f'label "{key}" does not have known values'
            shown = " ".join(known[:8]) + (" ..." if len(known) > 8 else "")
            return f"key {key}, {key} {op} [{' '.join(values)}] not in {key} In [{shown}]"
        return "no offering of the pool meets all the pod's node selector terms together"

    def reserve(self, mask: int) -> None:
        """Karpenter subtracts the most a new claim may launch from the pool's remaining limits."""
        for key in self.remaining:
            self.remaining[key] -= max((s.limit.get(key, 0) for s in self.shapes if s.mask & mask), default=0)

    def within_limits(self, mask: int) -> int:
        if not self.remaining:
            return mask
        ok = 0
        for shape in self.shapes:
            if shape.mask & mask and all(shape.limit.get(k, 0) <= v for k, v in self.remaining.items()):
                ok |= shape.mask
        return mask & ok


# Karpenter's words for a pod whose host port a claim of the pool took in the same Solve (kgpu's own marker
# follows them: the pod waits for the provisioner's next batch)
HOST_PORT_WAIT = "checking host port usage (taken by another claim of this batch)"


def _port_conflict(wanted: Sequence[HostPort], used: Sequence[tuple[HostPort, ...]]) -> str:
    """Karpenter's HostPortUsage conflict text for the first conflicting pair."""
    for ports in used:
        for u in ports:
            for w in wanted:
                if ports_conflict((w,), (u,)):
                    return (
                        f"pod hostport conflicts with existing hostport configuration (existing-hostport-ip="
                        f"{u.host_ip or '0.0.0.0'}, existing-hostport-port={u.port}, existing-hostport-protocol="
                        f"{u.protocol}, pod-hostport-ip={w.host_ip or '0.0.0.0'}, pod-hostport-port={w.port}, "
                        f"pod-hostport-protocol={w.protocol})"
                    )
    return "pod hostport conflicts with existing hostport configuration"


def _type_values(
    keys: Sequence[str], labels: dict[str, str], offerings: Sequence[Offering]
) -> dict[str, frozenset[str]]:
    """An instance type's values of each minValues key: its label, or for zone and capacity type every
    zone / capacity type it is offered in (the type's requirements in Karpenter)."""
    out: dict[str, frozenset[str]] = {}
    for key in keys:
        if key == LABEL_ZONE:
            out[key] = frozenset(o.zone for o in offerings)
        elif key == LABEL_CAPACITY:
            out[key] = frozenset(o.capacity_type for o in offerings)
        elif key == LABEL_ZONE_ID:
            out[key] = frozenset(o.zone_id for o in offerings if o.zone_id)
        else:
            out[key] = frozenset((labels[key],)) if key in labels else frozenset()
    return out


def _count(cap: tuple[int, ...], total: list[int] | None, vec: tuple[int, ...]) -> int:
    """How many more pods of ``vec`` fit in ``cap`` on top of ``total``."""
    k = BIG
    for i, r in enumerate(vec):
        if r:
            free = cap[i] - (total[i] if total is not None else 0)
            q = free // r
            if q < k:
                k = q
    return max(k, 0)


def _first_fit(
    claims: list[NodeClaim],
    skip: set[int],
    masks: dict[int, int],
    vec: tuple[int, ...],
    spec: PodSpecInfo,
) -> tuple[int, int]:
    """The first claim, in order, that can take a pod of ``spec``, and how many; (-1, 0) when none. Claims
    that cannot are added to ``skip``: they only fill up and narrow, so they never will."""
    for i, claim in enumerate(claims):
        if id(claim) in skip:
            continue
        mask = masks[id(claim.pool)]
        k = claim.can_add(vec, mask, spec.host_ports) if mask else 0
        if k > 0:
            return i, k
        skip.add(id(claim))
    return -1, 0


def _settle(claims: list[NodeClaim], i: int) -> None:
    """Karpenter sorts its in-flight claims by pod count before it tries them for each pod (``Scheduler.add``,
    ``sort.Slice``, stable on such short lists): the claim at ``i``, which just took pods, moves behind the
    claims after it that now have fewer."""
    claim = claims[i]
    n = len(claim.pods)
    j = i
    while j + 1 < len(claims) and len(claims[j + 1].pods) < n:
        j += 1
    if j != i:
        del claims[i]
        claims.insert(j, claim)


def _append(claims: list[NodeClaim], fresh: NodeClaim) -> None:
    """A new claim joins the end with one pod and moves ahead of the claims with more; each further pod
    (identical ones are added in bulk) moves it behind those with fewer."""
    n = len(fresh.pods)
    j = len(claims)
    while j > 0 and len(claims[j - 1].pods) > 1:
        j -= 1
    claims.insert(j, fresh)
    if n > 1:
        _settle(claims, j)


class NodeClaim:
    """Pods meant for one new node, and the offerings that can still hold them all."""

    __slots__ = ("allowed", "pods", "pool", "ports", "shapes", "total")

    def __init__(self, pool: PoolModel, mask: int) -> None:
        self.pool = pool
        self.allowed = mask
        self.total = [0] * len(pool.dims)
        self.shapes = [s for s in pool.shapes if s.mask & mask]
        self.pods: list[Pod] = []
        self.ports = pool.claim_ports  # shared by the pool's claims (PoolModel.claim_ports)

    def can_add(self, vec: tuple[int, ...], mask: int, ports: Sequence[HostPort] = ()) -> int:
        """How many pods of this kind the claim can still take (one at most with host ports)."""
        allowed = self.allowed & mask
        if not allowed or (ports and ports_conflict(ports, self.ports)):
            return 0
        best = 0
        minv = self.pool.min_values
        counts: list[tuple[int, int]] = []
        for s in self.shapes:
            if s.mask & allowed:
                k = _count(s.cap, self.total, vec)
                if k > best:
                    best = k
                if minv and k > 0:
                    counts.append((k, s.mask & allowed))
        if minv and best:
            # the most pods that leave offerings with minValues distinct values of each key
            counts.sort(reverse=True)
            best, left = 0, 0
            for k, m in counts:
                left |= m
                if not minv.unmet(left):
                    best = k
                    break
        return min(best, 1) if ports else best

    def add(self, pods: Sequence[Pod], vec: tuple[int, ...], mask: int) -> None:
        n = len(pods)
        self.pods.extend(pods)
        for pod in pods:
            self.ports.extend(pod.spec.host_ports)
        total = self.total
        for i, r in enumerate(vec):
            total[i] += r * n
        self.allowed &= mask
        allowed = self.allowed
        self.shapes = [
            s
            for s in self.shapes
            if s.mask & allowed and all(c >= t for c, t in zip(s.cap, total, strict=True))
        ]

    def cheapest(self, within: int = -1) -> Option | None:
        """The offering the AWS provider (v1.8) launches for the claim, with the NodeOverlays' prices as its
        Create applies them; None when its filters leave no type (it fails with insufficient capacity, and
        fails again on every retry). Unless the claim has minValues: GPU and metal types only when nothing
        else can hold the pods (ExoticInstanceTypeFilter); where both capacity types are offered, only types
        with a spot offering at most the cheapest on-demand offering's price, or with no spot offering
        (SpotInstanceFilter). Then spot first where any offering left is spot, then price. ``within``: the
        offerings the claim is left with (consolidation's price filter), all by default."""
        pool = self.pool
        m = self.offered() & within
        if not pool.min_values:
            generic = m & pool.generic_mask
            if generic:
                m = generic
            od = m & pool.on_demand_mask
            if od and od != m:
                m = _spot_filter(pool.options, m, od)
        if not m:
            return None
        low = m & -m
        return pool.options[low.bit_length() - 1]

    def offered(self) -> int:
        """The offerings that can still hold every pod of the claim."""
        m = 0
        for s in self.shapes:
            m |= s.mask
        return m & self.allowed

    def launch_error(self) -> str:
        """Why the AWS provider launches nothing for the claim (:meth:`cheapest` is None): its spot filter."""
        pool = self.pool
        m = self.offered()
        generic = m & pool.generic_mask
        od = (generic or m) & pool.on_demand_mask
        if not od:
            return f'launching nodeclaim of nodepool "{pool.pool.name}": no instance type left to launch'
        cheapest_od = min(pool.options[i].price for i in bits(od))
        return (
            f'launching nodeclaim of nodepool "{pool.pool.name}": insufficient capacity, all requested instance '
            "types were unavailable during launch (the AWS provider launches no type whose spot offerings all cost "
            f"more than the cheapest on-demand offering, ${cheapest_od:.4f}/h as priced with the NodeOverlays; "
            "every retry fails the same way)"
        )


def _spot_filter(options: Sequence[Option], mask: int, od: int) -> int:
    """The AWS provider's SpotInstanceFilter (v1.8) over the offerings in ``mask`` (``od``: the on-demand
    ones): the types with a spot offering at most the cheapest on-demand price, or with no spot offering."""
    cheapest_od = min(options[i].price for i in bits(od))
    spot_ok: dict[str, bool] = {}  # per type with a spot offering: whether one is at most cheapest_od
    for i in bits(mask):
        opt = options[i]
        if opt.capacity_type == "spot":
            spot_ok[opt.type.name] = spot_ok.get(opt.type.name, False) or opt.price <= cheapest_od
    out = 0
    for i in bits(mask):
        if spot_ok.get(options[i].type.name, True):
            out |= 1 << i
    return out


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
        for run in runs(karpenter_order(pending)):
            spec = run[0].spec
            vec = pod_vector(spec, dims)
            todo = ctx.place_existing(run)
            errors: list[str] = []
            spread_run = topo is not None and bool(spread(spec))
            if topo is not None and spread_run:
                todo = self._place_spread(todo, vec, models, claims, dead, prefer, topo, errors)
            for attempt in () if spread_run else relaxations(spec, prefer):
                want, strict = attempt.want, attempt.strict
                # in-flight claims, emptiest first; a claim that cannot take this spec never will again
                skip = dead.setdefault((want, strict), set())
                masks = {id(m): m.compat(want, vec, strict).mask for m in models}
                while todo:
                    i, k = _first_fit(claims, skip, masks, vec, spec)
                    if i < 0:
                        break
                    claim = claims[i]
                    # the claim stays the first to try while it has no more pods than the claim after it
                    after = len(claims[i + 1].pods) if i + 1 < len(claims) else BIG
                    k = max(1, min(k, after - len(claim.pods)))
                    claim.add(todo[:k], vec, masks[id(claim.pool)])
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
                    fresh.add(todo[:k], vec, fresh.allowed)
                    fresh.pool.reserve(fresh.allowed)
                    _append(claims, fresh)
                    self._added.append((fresh, todo[:k]))
                    if topo is not None:
                        topo.record(todo[:k], fresh.pool, fresh, fresh.allowed)
                    todo = todo[k:]
                if not todo:
                    break
            if todo:
                text = "karpenter: " + ("; ".join(errors) if errors else "no nodepool")
                for pod in todo:
                    notes[pod.key] = text
        # every node first, then the pods in the order they joined their claims: kube-scheduler binds them
        # once the nodes are up, and in that order each bind keeps the spread each add kept
        states: dict[int, NodeState] = {}
        failed: dict[int, str] = {}  # the provisioner's Create refused the claim, or the cloud launched nothing
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
    ) -> list[Pod]:
        """Pods with zone or hostname spread constraints, one at a time (kgpu.sim.provisioners.karpenter.topology): each
        narrows the claim it joins to the zone its constraints pick, so a claim that could not take one may
        take the next; claims are skipped for good only when their resources or compatibility rule it out."""
        left: list[Pod] = []
        spec = todo[0].spec if todo else None
        tries = relaxations(spec, prefer) if spec is not None else []
        for n, pod in enumerate(todo):
            assert spec is not None
            placed = False
            for attempt in tries:
                want, strict, dom = attempt.want, attempt.strict, attempt.domains
                masks = {id(m): m.compat(want, vec, strict).mask for m in models}
                skip = dead.setdefault((want, strict), set())
                for j, claim in enumerate(claims):
                    if id(claim) in skip:
                        continue
                    mask = masks[id(claim.pool)]
                    if not mask or claim.can_add(vec, mask, spec.host_ports) <= 0:
                        skip.add(id(claim))
                        continue
                    narrowed, _ = topo.narrow(pod, dom, claim.pool, claim.allowed & mask, claim)
                    if narrowed and claim.can_add(vec, narrowed, spec.host_ports) > 0:
                        claim.add([pod], vec, narrowed)
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
                    fresh.add([pod], vec, fresh.allowed)
                    fresh.pool.reserve(fresh.allowed)
                    _append(claims, fresh)
                    self._added.append((fresh, [pod]))
                    topo.record([pod], fresh.pool, fresh, fresh.allowed)
                    placed = True
                    break
            if not placed:
                left.append(pod)
        return left

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
            compat = model.compat(spec, vec, strict)
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
        alloc, labels = new_node(pool, opt.type, opt.type.allocatable(), opt.node.labels)  # what the plugin advertises
        # an extended resource only a NodeOverlay gives (not the type, not the GPU sharing config) is what the
        # node's own device plugin advertises: the overlay says so
        alloc.update({k: v for k, v in opt.node.allocatable.items() if k not in alloc})
        if pool.sharing is None:
            # no sharing config kgpu knows of (a NodePool read from the cluster): the overlay is how the cluster
            # tells Karpenter what the node's device plugin advertises (time-slicing replicas), so the node
            # advertises it; with a profile's sharing config the node advertises what that config gives
            alloc.update(claim.pool.overlaid_capacity.get(opt.type.name, {}))
        node = Node(name, {**labels, "kubernetes.io/hostname": name}, alloc, opt.node.taints)
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


def bits(mask: int) -> list[int]:
    """The indexes of the set bits of ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out

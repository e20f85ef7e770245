"""A NodePool as Karpenter's scheduler sees it in one ``Solve`` (kgpu.sim.provisioners.karpenter.solve's
docstring): the instance types its requirements allow, each with its offerings (``Option``: zone, capacity
type, price) and allocatable after overhead, the pool's limits, and whether a pod is compatible with it
(``Compat``: requirements, taints, the pod's node selectors and affinity, the host ports of its DaemonSets),
with the helpers both it and a NodeClaim use (how many pods fit a capacity, host port conflicts)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kgpu.catalog import Catalog
from kgpu.catalog.instance import InstanceType, Offering
from kgpu.model.nodepool import LABEL_HOSTNAME, LABEL_ZONE, LABEL_ZONE_ID, WELL_KNOWN_LABELS, normalize
from kgpu.model.objects import MEMORY, HostPort, Node, NodeSelector, PodSpecInfo, Term
from kgpu.model.predicates import first_untolerated, ports_conflict, requirement_matches
from kgpu.model.profile import Pool, Profile
from kgpu.sim.provisioners.karpenter.overlay import OverlayStore
from kgpu.sim.provisioners.karpenter.requirements import (
    LabelSet,
    MinValues,
    label_variants,
    matches,
    pod_label_sets,
    pool_requirements,
    well_known,
    with_aliases,
)
from kgpu.sim.provisioners.pools import (
    LABEL_NODEPOOL,
    Context,
    format_resources,
    node_taints,
    pool_limits,
    pool_zones,
)
from kgpu.sim.scheduler.scheduler import StaticFilter
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
                allocatable = less_hugepages(
                    {**allocatable, **overlaid.capacity}, {**t.capacity(), **overlaid.capacity}
                )
            od = next(
                (
                    prices.get((o.zone, o.capacity_type), o.price)
                    for o in offerings
                    if o.capacity_type == "on-demand"
                ),
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
        # keys the offerings' labels answer for (well-known, the pool's labels and In values); on any other
        # key the template's requirements (NotIn, Exists, Gt, Lt) and those pods bring hold per claim
        # (a claim's hostname is its own: Karpenter gives each claim ``kubernetes.io/hostname In [<name>]``)
        self.label_keys = frozenset((*WELL_KNOWN_LABELS, LABEL_HOSTNAME)).union(*(o.node.labels for o in options))
        self.template_sets: dict[str, LabelSet] = {}
        for r in self.reqs:
            if r.key not in self.label_keys:
                have = self.template_sets.get(r.key)
                incoming = LabelSet.of(r.operator, r.values)
                self.template_sets[r.key] = incoming if have is None else have.intersection(incoming)
        self._custom: dict[PodSpecInfo, dict[str, LabelSet]] = {}
        self._stripped: dict[tuple[PodSpecInfo, tuple[str, ...]], PodSpecInfo] = {}
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
                capacity = capacities[opt.type.name] = {
                    **opt.type.capacity(),
                    **overlaid_capacity.get(opt.type.name, {}),
                }
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

    def custom_sets(self, spec: PodSpecInfo) -> dict[str, LabelSet]:
        """The pod's requirements on keys no offering labels (``LabelSet``), memoised."""
        hit = self._custom.get(spec)
        if hit is None:
            keys = self.label_keys
            hit = self._custom[spec] = pod_label_sets(spec, lambda k: k not in keys)
        return hit

    def compat_with(
        self, spec: PodSpecInfo, vec: tuple[int, ...], strict: bool, held: Mapping[str, LabelSet]
    ) -> Compat:
        """``compat`` against a claim (or the template) that holds requirements ``held`` on keys no offering
        labels: the pod's requirements on those keys must intersect them (Karpenter's ``Compatible``, which
        also lets a NotIn/DoesNotExist meet a NotIn/DoesNotExist); the rest is checked on the offerings."""
        if not held:
            return self.compat(spec, vec, strict)
        mine = self.custom_sets(spec)
        keys = tuple(sorted(k for k in mine if k in held))
        if not keys:
            return self.compat(spec, vec, strict)
        for key in keys:
            if not held[key].admits(mine[key]):
                return Compat(
                    0, f"incompatible requirements, key {key}, {mine[key].text(key)} not in {held[key].text(key)}"
                )
        stripped = self._stripped.get((spec, keys))
        if stripped is None:
            stripped = self._stripped[spec, keys] = _without_keys(spec, keys)
        return self.compat(stripped, vec, strict)

    def hold(self, held: dict[str, LabelSet], spec: PodSpecInfo) -> dict[str, LabelSet]:
        """``held`` with the pod's requirements on keys no offering labels added (``Requirements.Add``)."""
        mine = self.custom_sets(spec)
        if not mine:
            return held
        out = dict(held)
        for key, incoming in mine.items():
            have = out.get(key)
            out[key] = incoming if have is None else have.intersection(incoming)
        return out

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


def _without_keys(spec: PodSpecInfo, keys: Sequence[str]) -> PodSpecInfo:
    """``spec`` without its node selector entries and first-term affinity expressions on ``keys``."""
    drop = set(keys)
    selector = tuple((k, v) for k, v in spec.node_selector if normalize(k) not in drop)
    affinity = spec.affinity
    if affinity is not None and affinity.terms:
        first = affinity.terms[0]
        exprs = tuple(r for r in first.match_expressions if normalize(r.key) not in drop)
        if exprs or first.match_fields:
            affinity = NodeSelector((Term(exprs, first.match_fields), *affinity.terms[1:]))
        else:  # an empty term matches no node: the pod had nothing else to ask of the offerings
            affinity = NodeSelector(affinity.terms[1:]) if len(affinity.terms) > 1 else None
    return replace(spec, node_selector=selector, affinity=affinity)


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


def bits(mask: int) -> list[int]:
    """The indexes of the set bits of ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out

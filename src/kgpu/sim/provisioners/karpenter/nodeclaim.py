"""A NodeClaim being filled in one ``Solve`` (kgpu.sim.provisioners.karpenter.solve's docstring): the pods
added to it, the instance types that still hold them all (a bit mask over the pool's options), the host ports
they take, the cheapest launchable option with Karpenter's spot-versus-on-demand filter, and the error when
none can launch."""

from __future__ import annotations

from collections.abc import Sequence

from kgpu.model.nodepool import is_restricted_node_label
from kgpu.model.objects import HostPort, Pod, PodSpecInfo
from kgpu.model.predicates import ports_conflict
from kgpu.sim.provisioners.karpenter.pool_model import (
    Option,
    PoolModel,
    _count,
    bits,
)
from kgpu.sim.provisioners.karpenter.requirements import LabelSet


def _first_fit(
    claims: list[NodeClaim],
    skip: set[int],
    masks: dict[int, int],
    vec: tuple[int, ...],
    spec: PodSpecInfo,
    want: PodSpecInfo,
    strict: bool,
    loose: frozenset[int] = frozenset(),
) -> tuple[int, int, int]:
    """The first claim, in order, that can take a pod of ``spec`` (tried as ``want``), how many, and the
    offerings it may use there; (-1, 0, 0) when none. Claims that cannot are added to ``skip``: they only
    fill up and narrow, so they never will; unless the pod names a key no offering of the claim's pool
    labels (``loose``, by pool id: a claim may come to hold the key, and a NotIn it holds admits a
    DoesNotExist the bare key did not)."""
    for i, claim in enumerate(claims):
        if id(claim) in skip:
            continue
        mask = masks[id(claim.pool)]
        if claim.held:
            mask = claim.mask_for(want, vec, strict, mask)
        k = claim.can_add(vec, mask, spec.host_ports) if mask else 0
        if k > 0:
            return i, k, mask
        if id(claim.pool) not in loose:
            skip.add(id(claim))
    return -1, 0, 0


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

    __slots__ = ("allowed", "held", "pods", "pool", "ports", "shapes", "total")

    def __init__(self, pool: PoolModel, mask: int) -> None:
        self.pool = pool
        self.allowed = mask
        # the claim's requirements on keys no offering labels: the template's, then each pod's (CanAdd)
        self.held: dict[str, LabelSet] = pool.template_sets
        self.total = [0] * len(pool.dims)
        self.shapes = [s for s in pool.shapes if s.mask & mask]
        self.pods: list[Pod] = []
        self.ports = pool.claim_ports  # shared by the pool's claims (PoolModel.claim_ports)

    def mask_for(self, want: PodSpecInfo, vec: tuple[int, ...], strict: bool, pool_mask: int) -> int:
        """The offerings a pod tried as ``want`` may use on this claim: the pool's (``pool_mask``) unless
        the claim holds requirements on keys the pod's requirements name."""
        if not self.held:
            return pool_mask
        return self.pool.compat_with(want, vec, strict, self.held).mask

    def labels(self) -> dict[str, str]:
        """The labels the claim's held requirements give its node (``Requirements.Labels``), restricted
        keys left out."""
        out = {}
        for key, held in self.held.items():
            value = held.label()
            if value is not None and not is_restricted_node_label(key):
                out[key] = value
        return out

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

    def add(self, pods: Sequence[Pod], vec: tuple[int, ...], mask: int, want: PodSpecInfo | None = None) -> None:
        """Add ``pods`` (all alike; tried as ``want``, whose requirements on unlabelled keys the claim now
        holds) narrowed to the offerings ``mask``."""
        n = len(pods)
        if want is not None:
            self.held = self.pool.hold(self.held, want)
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

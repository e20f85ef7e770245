"""Karpenter's disruption controller: where consolidation takes the nodes Karpenter launched, and when.

Mirrors sigs.k8s.io/karpenter v1.8 ``pkg/controllers/disruption`` (``controller.go``, ``emptiness.go``,
``multinodeconsolidation.go``, ``singlenodeconsolidation.go``, ``consolidation.go``, ``helpers.go``,
``types.go``) and ``pkg/utils/disruption`` (eviction cost); behaviour, not code. The controller executes one
command at a time; each pass tries its methods in order and runs the first command one of them finds, until
none finds one (the steady state):

1. **Emptiness**: candidates without a reschedulable pod (DaemonSet pods do not count) are deleted, as many
   per NodePool as its budget allows. Both policies, ``WhenEmpty`` and ``WhenEmptyOrUnderutilized``, do this.
2. **Multi-node consolidation** (``WhenEmptyOrUnderutilized`` only): the candidates, cheapest to disrupt
   first, at most 100; a binary search for the longest prefix (two or more) whose pods fit on the other nodes
   plus at most *one* new node cheaper than the prefix together. A replacement may not be of an instance type
   being removed unless it is cheaper than that node (``filterOutSameInstanceType``): deleting is then the
   smaller disruption.
3. **Single-node consolidation**: each NodePool's candidates in the same order, the pools interleaved (the
   cheapest of each pool, then the second, ...); the first whose pods fit on the other nodes (delete) or on
   them plus one new node cheaper than it (replace).

Karpenter never turns nodes into several (``computeConsolidation`` refuses a simulation that needs more than
one new node). The pods of a command go through Karpenter's own scheduling (``kgpu.sim.provisioners.
karpenter.solve``) over the cluster without the candidates, existing nodes tried in Karpenter's order (by
name, the first that can add the pod). The replacement keeps the instance types whose *worst* launch price
(their dearest compatible offering at the capacity type the launch would use, spot before on-demand) is
below the candidates' price; then, when the claim allows both capacity types, spot only (the launch never
falls back to a pricier on-demand node). Candidates that are all spot, replaced by a claim that allows spot,
are *spot-to-spot* consolidation: only with the ``SpotToSpotConsolidation`` feature gate (off by default),
and for a single candidate only with at least 15 cheaper spot instance types (the 15 cheapest are kept).
Multi-node consolidation skips empty candidates (they are emptiness's).

A candidate is a node this simulation launched (or a replacement) whose NodePool's ``consolidateAfter`` is not
``Never`` and with no pod annotated ``karpenter.sh/do-not-disrupt: "true"``. Disruption cost: each pod's
eviction cost (1, plus ``controller.kubernetes.io/pod-deletion-cost`` / 2^27, plus its priority / 2^25,
clamped to [-10, 10]), DaemonSet pods included, summed, times the node's lifetime remaining (expireAfter
720h; each command is validated 15 s after it is computed and the next pass comes a second later, so a
replacement is younger than the nodes it joins, and of two alike nodes the older goes first). Ties by
node name (Karpenter's sort is not stable, over Go map order: its tie order changes from run to run). Budgets: each NodePool's default ``nodes: 10%`` of its nodes, rounded up.

Not modelled: nodes that existed before the simulation are destinations only, never candidates (their own
consolidation is a question about the cluster as it is, not about this launch); PodDisruptionBudgets; a
NodePool's own budgets; pods pending elsewhere in the cluster taking room in the simulation. When:
a node becomes a candidate ``consolidateAfter`` after its last pod event, and each consolidation command waits
15 s and is validated again before it runs (``consolidationTTL``).

Size: each try simulates the cluster without its candidates, so the view is computed for at most
``MAX_NODES`` nodes in all and ``MAX_CANDIDATES`` launched ones; beyond that it says so instead.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kgpu.catalog import Catalog
from kgpu.errors import InputError
from kgpu.model.objects import Node, Pod, PodSpecInfo
from kgpu.model.profile import Pool, Profile
from kgpu.sim.provisioners.karpenter.solve import Karpenter, NodeClaim, Option, PoolModel, bits, resource_dims
from kgpu.sim.provisioners.pools import LABEL_NODEPOOL, Context, NewNode, karpenter_order
from kgpu.sim.scheduler.scheduler import Scheduler

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
MULTI_NODE_MAX = 100  # multi-node consolidation looks at the first 100 candidates
SPOT_TO_SPOT_MIN_TYPES = 15  # cheaper spot instance types spot-to-spot consolidation needs, and keeps
DEFAULT_BUDGET = 0.10  # a NodePool's default disruption budget: nodes: 10%
VALIDATION_TTL = "15s"
# The controller's cadence: each command is validated 15 s after it is computed (consolidationTTL), runs, and
# the next pass comes a second later. Only nodes' ages depend on it, and only their order matters.
VALIDATION_SECONDS = 15.0
PASS_SECONDS = 1.0
EXPIRE_AFTER_SECONDS = 720 * 3600.0  # a NodePool's default expireAfter (the CRD's 720h)
MAX_NODES = 500
MAX_CANDIDATES = 60
MAX_ROUNDS = 200

EMPTINESS = "emptiness"
MULTI = "multi-node consolidation"
SINGLE = "single-node consolidation"


def eviction_cost(pod: Pod) -> float:
    """``disruption.EvictionCost``: 1, plus the pod-deletion-cost annotation / 2^27, plus the priority / 2^25,
    clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get(POD_DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += float(raw) / 2.0**27
    cost += pod.priority / 2.0**25
    return max(-10.0, min(10.0, cost))


def reschedulable(pods: Sequence[Pod]) -> list[Pod]:
    """The pods consolidation moves: all but DaemonSet pods (those go with their node)."""
    return [p for p in pods if p.owner_kind != "DaemonSet"]


@dataclass
class _Node:
    """A node Karpenter may disrupt: one this simulation launched, or a replacement (``born``: seconds after
    the launch)."""

    node: Node
    pods: list[Pod]
    new: NewNode
    born: float = 0.0

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def price(self) -> float:
        return self.new.hourly_price or 0.0

    def cost(self, now: float) -> float:
        """``ReschedulingCost`` over every pod of the node, DaemonSet pods included, times
        ``LifetimeRemaining`` at ``now`` (expireAfter 720h): of two nodes with the same pods, the older goes
        first."""
        lifetime = max(0.0, min(1.0, 1.0 - (now - self.born) / EXPIRE_AFTER_SECONDS))
        return sum(eviction_cost(p) for p in self.pods) * lifetime

    def as_dict(self) -> dict[str, Any]:
        out = self.new.as_dict()
        out["name"] = self.name
        out["pods"] = [p.key for p in reschedulable(self.pods)]
        return out


@dataclass
class Command:
    """One command of the disruption controller: delete the candidates, or replace them with one node."""

    method: str
    candidates: list[_Node]
    replacement: NewNode | None = None
    after: list[tuple[_Node | None, list[Pod]]] = field(default_factory=list)  # the next cluster
    replacement_pods: list[Pod] = field(default_factory=list)
    replacement_node: Node | None = None

    @property
    def decision(self) -> str:
        return "replace" if self.replacement is not None else "delete"

    def saving(self) -> float:
        new = (self.replacement.hourly_price or 0.0) if self.replacement is not None else 0.0
        return round(sum(c.price for c in self.candidates) - new, 4)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "decision": self.decision,
            "nodes": [
                {"name": c.name, "instance_type": c.new.instance_type, "capacity_type": c.new.capacity_type,
                 "hourly_price": c.new.hourly_price}
                for c in self.candidates
            ],
            "replacement": None,
            "hourly_saving": self.saving(),
        }
        if self.replacement is not None:
            rep = self.replacement.as_dict()
            rep["pods"] = [p.key for p in self.replacement_pods]
            out["replacement"] = rep
        return out


class _Simulation(Context):
    """A consolidation command's scheduling simulation: Karpenter's scheduler tries the existing nodes in its
    own order (``sortExistingNodes``: initialized first, then by name; every node here is initialized) and
    takes the first that can add the pod (``ExistingNode.CanAdd``), where kube-scheduler would score them."""

    namer: Callable[[str], str] | None = None  # the replacement's name from its NodePool's (default: <pool>-<n>)

    def node_name(self, base: str) -> str:
        return self.namer(base) if self.namer is not None else super().node_name(base)

    def place_existing(self, run: list[Pod]) -> list[Pod]:
        order = sorted(self.scheduler.states, key=lambda st: st.name)
        for n, pod in enumerate(run):
            st = next((s for s in order if self.scheduler.admits(pod, s)), None)
            if st is None:
                return run[n:]
            self.scheduler.bind(pod, st)
            self.placed(pod, st)
        return []


class _Replacement(Karpenter):
    """Karpenter's scheduling simulation for a consolidation command: Solve as the provisioner runs it, with
    the one new claim's offerings filtered as ``computeConsolidation`` filters them before the launch."""

    def __init__(
        self, profile: Profile, catalog: Catalog, candidates: Sequence[_Node], *, multi: bool, spot_to_spot: bool
    ) -> None:
        super().__init__(profile, catalog)
        self.candidates = candidates
        self.multi = multi
        self.spot_to_spot = spot_to_spot
        self.claims = 0
        self.why = ""

    def _choose(self, claim: NodeClaim) -> Option | None:
        """``computeConsolidation`` on the one new claim, then the launch (``NodeClaim.cheapest``)."""
        self.claims += 1
        if claim.pool.create_error or self.claims > 1:
            return None
        pool = claim.pool
        offered = claim.offered()
        price = sum(c.price for c in self.candidates)
        spot = _mask(pool, offered, lambda o: o.capacity_type == "spot")
        if all(c.new.capacity_type == "spot" for c in self.candidates) and spot:
            kept = self._spot_to_spot(pool, spot, price)
        else:
            kept = cheaper(pool, offered, price)
            if not kept:
                self.why = "no instance type is cheaper than the node(s) it would replace"
                return None
            if spot and spot != offered:
                kept &= spot  # both capacity types allowed: spot only, never a pricier on-demand fallback
        if kept and self.multi:
            # filterOutSameInstanceType: a replacement of a type being removed must be cheaper than that node
            names = {pool.options[i].type.name for i in bits(kept)}
            same = [c.price for c in self.candidates if c.new.instance_type in names]
            if same:
                kept = cheaper(pool, kept, min(same))
        return claim.cheapest(kept) if kept else None

    def _spot_to_spot(self, pool: PoolModel, spot: int, price: float) -> int:
        """``computeSpotToSpotConsolidation``: the spot offerings the replacement keeps (0: no command)."""
        if not self.spot_to_spot:
            self.why = "spot nodes are replaced only with the SpotToSpotConsolidation feature gate (off by default)"
            return 0
        kept = cheaper(pool, spot, price)
        if not kept:
            self.why = "no instance type is cheaper than the node(s) it would replace"
            return 0
        if self.multi:
            return kept
        first: dict[str, float] = {}  # each type's cheapest offering (OrderByPrice)
        for i in bits(kept):
            o = pool.options[i]
            first[o.type.name] = min(first.get(o.type.name, o.price), o.price)
        if len(first) < SPOT_TO_SPOT_MIN_TYPES:
            self.why = (
                f"spot-to-spot consolidation needs {SPOT_TO_SPOT_MIN_TYPES} cheaper spot instance types; "
                f"{len(first)} are"
            )
            return 0
        keep = set(sorted(first, key=lambda n: (first[n], n))[:SPOT_TO_SPOT_MIN_TYPES])
        return _mask(pool, kept, lambda o: o.type.name in keep)


def cheaper(pool: PoolModel, mask: int, price: float) -> int:
    """The offerings in ``mask`` of the instance types whose worst launch price is below ``price``
    (``RemoveInstanceTypeOptionsByPriceAndMinValues``: ``Offerings.WorstLaunchPrice``, the dearest offering at
    the capacity type the launch would use, spot before on-demand)."""
    worst: dict[str, tuple[int, float]] = {}  # type -> (0 spot / 1 on-demand, dearest price at it)
    for i in bits(mask):
        o = pool.options[i]
        rank = 0 if o.capacity_type == "spot" else 1
        have = worst.get(o.type.name)
        if have is None or rank < have[0] or (rank == have[0] and o.price > have[1]):
            worst[o.type.name] = (rank, o.price)
    return _mask(pool, mask, lambda o: worst[o.type.name][1] < price)


def _mask(pool: PoolModel, mask: int, keep: Callable[[Option], bool]) -> int:
    out = 0
    for i in bits(mask):
        if keep(pool.options[i]):
            out |= 1 << i
    return out


class Disruption:
    """The disruption controller over the nodes one provisioning pass launched."""

    def __init__(
        self,
        karpenter: Karpenter,
        before: Sequence[tuple[Node, Sequence[Pod]]],
        launched: Sequence[tuple[Node, Sequence[Pod], NewNode]],
        ctx: Context,
        *,
        spot_to_spot: bool = False,
        order: Callable[[str], Any] | None = None,
        naming: Callable[[str, int], str] | None = None,
        pools_first: Callable[[int], Sequence[str]] | None = None,
    ) -> None:
        self.karpenter = karpenter
        # among candidates of equal disruption cost: by name (Karpenter's own order is Go map order, random
        # from one run to the next; the differential passes other orders to see which ones reach its state)
        self.order: Callable[[str], Any] = order or (lambda name: name)
        # the NodePools single-node consolidation interleaves first in command n (from 1): Go map order
        # upstream, drawn again at every reconcile; by ``order`` here unless the differential replays one
        self.pools_first = pools_first
        # a replacement's name from its NodePool's and the command's number (from 1); by default
        # <pool>-<n>. Names matter: Karpenter's simulation tries existing nodes by name.
        self.naming = naming
        self.commands = 0
        self.now = 0.0  # seconds since the launch
        self.profile = karpenter.profile
        self.catalog = karpenter.catalog
        self.models = karpenter.models
        self.before = [(n, list(p)) for n, p in before]
        self.nodes = [_Node(n, list(p), new) for n, p, new in launched]
        self.ctx = ctx
        self.spot_to_spot = spot_to_spot
        self.pools = {p.name: p for p in self.profile.pools}
        self.names = dict(ctx.launched)
        self.notes: dict[str, str] = {}  # candidate name -> why nothing was done with it, last seen
        self._specs: dict[PodSpecInfo, PodSpecInfo] = {}

    # -- candidates -------------------------------------------------------------------------------------------

    def _pool(self, node: _Node) -> Pool | None:
        return self.pools.get(node.new.pool)

    def _candidates(self, *, underutilized: bool) -> list[_Node]:
        out = []
        for n in self.nodes:
            pool = self._pool(n)
            if pool is None or pool.consolidation.after == "Never":
                continue
            if underutilized and pool.consolidation.policy != "WhenEmptyOrUnderutilized":
                continue
            if any(p.annotations.get(DO_NOT_DISRUPT) == "true" for p in n.pods):
                continue
            out.append(n)
        return sorted(out, key=lambda n: (n.cost(self.now), self.order(n.name)))

    def _budgets(self) -> dict[str, int]:
        """Disruptions allowed per NodePool: 10 % of its nodes, rounded up."""
        counts: dict[str, int] = {}
        for node, _ in self.before:
            name = node.labels.get(LABEL_NODEPOOL)
            if name:
                counts[name] = counts.get(name, 0) + 1
        for n in self.nodes:
            counts[n.new.pool] = counts.get(n.new.pool, 0) + 1
        return {k: math.ceil(v * DEFAULT_BUDGET) for k, v in counts.items()}

    @staticmethod
    def _within(cands: Sequence[_Node], budgets: Mapping[str, int]) -> list[_Node]:
        left = dict(budgets)
        out = []
        for c in cands:
            if left.get(c.new.pool, 0) > 0:
                left[c.new.pool] -= 1
                out.append(c)
        return out

    # -- one command ------------------------------------------------------------------------------------------

    def _simulate(self, cands: Sequence[_Node], method: str) -> Command | None:
        """``computeConsolidation``: the candidates' pods over the cluster without them, through Karpenter's
        scheduling; a command when they all fit with at most one new node that passes the price filter."""
        gone = {id(c) for c in cands}
        keep = [n for n in self.nodes if id(n) not in gone]
        nodes = [n for n, _ in self.before] + [k.node for k in keep]
        pods = [p for _, p in self.before] + [k.pods for k in keep]
        scratch = Scheduler(nodes)
        for st, on in zip(scratch.states, pods, strict=True):
            for pod in on:
                st.add(pod)
                scratch.topology.bound(pod, st)
        sub = _Simulation(scratch, self.profile, self.ctx.catalog, self.ctx.daemonsets)
        sub.launched = dict(self.names)
        if self.naming is not None:
            naming, command = self.naming, self.commands + 1
            sub.namer = lambda pool: naming(pool, command)
        moving = [self._unbound(p) for c in cands for p in reschedulable(c.pods)]
        rep = _Replacement(self.profile, self.catalog, cands, multi=method == MULTI, spot_to_spot=self.spot_to_spot)
        rep._provision(karpenter_order(moving), sub, [m.over(sub) for m in self.models])
        where = {p.key: st for st in scratch.states for p in st.pods}
        if rep.claims > 1:
            self._note(cands, "its pods would need more than one new node; Karpenter never turns a node into several")
            return None
        if any(p.key not in where for p in moving):
            self._note(cands, rep.why or "its pods do not fit on the other nodes")
            return None
        new = next((n for n in sub.new_nodes if n.kind == "karpenter"), None)
        first = len(self.before)
        after: list[tuple[_Node | None, list[Pod]]] = [
            (k, list(st.pods)) for k, st in zip(keep, scratch.states[first : first + len(keep)], strict=True)
        ]
        if new is None:
            return Command(method, list(cands), None, after)
        st = scratch.by_name[new.name]
        after.append((None, list(st.pods)))
        return Command(method, list(cands), new, after, reschedulable(st.pods), st.node)

    def _unbound(self, pod: Pod) -> Pod:
        """The pod as its controller creates it again: no ``spec.nodeName`` (one spec per original spec)."""
        if not pod.spec.node_name:
            return pod
        spec = self._specs.get(pod.spec)
        if spec is None:
            spec = self._specs[pod.spec] = replace(pod.spec, node_name="")
        return replace(pod, spec=spec)

    def _note(self, cands: Sequence[_Node], why: str) -> None:
        if len(cands) == 1:
            self.notes[cands[0].name] = why

    def _emptiness(self, budgets: Mapping[str, int]) -> Command | None:
        empty = [c for c in self._candidates(underutilized=False) if not reschedulable(c.pods)]
        empty = self._within(empty, budgets)
        if not empty:
            return None
        gone = {id(c) for c in empty}
        return Command(EMPTINESS, empty, None, [(n, n.pods) for n in self.nodes if id(n) not in gone])

    def _multi(self, budgets: Mapping[str, int]) -> Command | None:
        # empty candidates are emptiness's, and take no budget here
        busy = [c for c in self._candidates(underutilized=True) if reschedulable(c.pods)]
        cands = self._within(busy, budgets)[:MULTI_NODE_MAX]
        if len(cands) < 2:
            return None
        lo, hi, best = 1, len(cands) - 1, None
        while lo <= hi:  # firstNConsolidationOption: prefixes of mid + 1 candidates
            mid = (lo + hi) // 2
            cmd = self._simulate(cands[: mid + 1], MULTI)
            if cmd is not None:
                best, lo = cmd, mid + 1
            else:
                hi = mid - 1
        return best

    def _single(self, budgets: Mapping[str, int]) -> Command | None:
        """``SingleNodeConsolidation``: each NodePool's candidates cheapest to disrupt first, the pools
        interleaved (the first of each pool, then the second, ...; pools in Go map order upstream, by name
        here), empty candidates and pools without budget skipped."""
        by_pool: dict[str, list[_Node]] = {}
        for c in self._candidates(underutilized=True):
            by_pool.setdefault(c.new.pool, []).append(c)
        pools = sorted(by_pool, key=self.order)
        if self.pools_first is not None:
            first = [p for p in self.pools_first(self.commands + 1) if p in by_pool]
            pools = [*dict.fromkeys(first), *(p for p in pools if p not in first)]
        depth = max((len(v) for v in by_pool.values()), default=0)
        for c in (by_pool[p][i] for i in range(depth) for p in pools if i < len(by_pool[p])):
            if budgets.get(c.new.pool, 0) <= 0 or not reschedulable(c.pods):
                continue
            cmd = self._simulate([c], SINGLE)
            if cmd is not None:
                return cmd
        return None

    def _apply(self, cmd: Command) -> None:
        nodes: list[_Node] = []
        for k, pods in cmd.after:
            if k is None:
                assert cmd.replacement is not None and cmd.replacement_node is not None
                new = cmd.replacement
                self.names[new.pool] = self.names.get(new.pool, 0) + 1
                nodes.append(_Node(cmd.replacement_node, pods, new, self.now))
            else:
                k.pods = pods
                nodes.append(k)
        self.nodes = nodes

    # -- the controller ---------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        launch_cost = round(sum(n.price for n in self.nodes), 4)
        view: dict[str, Any] = {"launch_hourly_cost": launch_cost, "steps": []}
        total = len(self.before) + len(self.nodes)
        if total > MAX_NODES or len(self.nodes) > MAX_CANDIDATES:
            view.update(hourly_cost=launch_cost, saving=0.0, new_nodes=[n.as_dict() for n in self.nodes],
                        modelled=False,
                        kept=[f"not computed: the consolidation view is computed for up to {MAX_NODES} nodes with "
                              f"{MAX_CANDIDATES} launched; this cluster has {total} with {len(self.nodes)} launched"])
            return view
        steps: list[dict[str, Any]] = []
        pools: set[str] = set()  # the NodePools of the nodes the commands disrupt
        capped = True
        for _ in range(MAX_ROUNDS):
            budgets = self._budgets()
            cmd = self._emptiness(budgets) or self._multi(budgets) or self._single(budgets)
            if cmd is None:
                capped = False
                break
            steps.append(cmd.as_dict())
            pools.update(c.new.pool for c in cmd.candidates)
            self.now += VALIDATION_SECONDS
            self._apply(cmd)
            self.commands += 1
            self.now += PASS_SECONDS
        hourly = round(sum(n.price for n in self.nodes), 4)
        view.update(
            hourly_cost=hourly,
            saving=round(launch_cost - hourly, 4),
            new_nodes=[n.as_dict() for n in self.nodes],
            steps=steps,
            modelled=True,
            after=", ".join(sorted({self.pools[name].consolidation.after for name in pools})),
            validation=VALIDATION_TTL,
        )
        if not steps:
            view["kept"] = self._why_kept()
        if capped:
            view["kept"] = [f"stopped after {MAX_ROUNDS} commands: the controller would go on"]
        return view

    def _why_kept(self) -> list[str]:
        """Why Karpenter keeps the nodes it launched: one line per NodePool or node."""
        reasons: list[str] = []
        for n in self.nodes:
            pool = self._pool(n)
            if pool is None:
                continue
            if pool.consolidation.after == "Never":
                why = f"nodepool {pool.name}: consolidateAfter Never"
            elif pool.consolidation.policy == "WhenEmpty":
                why = f"nodepool {pool.name}: consolidationPolicy WhenEmpty removes empty nodes only"
            elif any(p.annotations.get(DO_NOT_DISRUPT) == "true" for p in n.pods):
                why = f"{n.name}: a pod has {DO_NOT_DISRUPT}"
            else:
                why = f"{n.name}: {self.notes.get(n.name, 'no cheaper way to hold its pods')}"
            if why not in reasons:
                reasons.append(why)
        return reasons


def consolidate(
    karpenter: Karpenter,
    ctx: Context,
    *,
    spot_to_spot: bool = False,
    order: Callable[[str], Any] | None = None,
    naming: Callable[[str, int], str] | None = None,
    pools_first: Callable[[int], Sequence[str]] | None = None,
) -> dict[str, Any] | None:
    """Where Karpenter's disruption controller takes the nodes ``karpenter`` launched in the pass ``ctx``
    (None when it launched none): the steps it takes and the steady state, or why it keeps the launch."""
    new = {n.name: n for n in ctx.new_nodes if n.kind == "karpenter"}
    if not new:
        return None
    before = [(st.node, st.pods) for st in ctx.scheduler.states if st.name not in new]
    launched = [(st.node, st.pods, new[st.name]) for st in ctx.scheduler.states if st.name in new]
    return Disruption(
        karpenter, before, launched, ctx, spot_to_spot=spot_to_spot, order=order, naming=naming, pools_first=pools_first
    ).run()


@dataclass(frozen=True)
class KarpenterNode:
    """A node Karpenter launched and may disrupt: its NodePool, offering and the pods on it."""

    name: str
    pool: str
    instance_type: str
    zone: str
    capacity_type: str
    pods: Sequence[Pod] = ()


def consolidate_nodes(
    karpenter: Karpenter,
    ctx: Context,
    nodes: Sequence[KarpenterNode],
    *,
    spot_to_spot: bool = False,
    order: Callable[[str], Any] | None = None,
    naming: Callable[[str, int], str] | None = None,
    pools_first: Callable[[int], Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Where the disruption controller takes Karpenter nodes that exist: each is launched into ``ctx`` under
    its name as Karpenter would have launched its offering (labels, allocatable, DaemonSet pods), its pods
    bound to it, and all of them are candidates. ``order``, ``naming`` and ``pools_first``: see
    :class:`Disruption`."""
    pods = [p for n in nodes for p in n.pods]
    store = karpenter.overlay_store()
    dims = resource_dims(pods)
    karpenter.models = [PoolModel(karpenter.profile, p, karpenter.catalog, ctx, dims, store) for p in karpenter.pools]
    models = {m.pool.name: m for m in karpenter.models}
    for n in nodes:
        model = models.get(n.pool)
        if model is None:
            raise InputError(f"node {n.name}: nodepool {n.pool!r} is not a Karpenter pool of the profile")
        at = next(
            (i for i, o in enumerate(model.options)
             if (o.type.name, o.zone, o.capacity_type) == (n.instance_type, n.zone, n.capacity_type)),
            None,
        )
        if at is None:
            raise InputError(
                f"node {n.name}: nodepool {n.pool} offers no {n.instance_type} {n.capacity_type} in {n.zone}"
            )
        st = karpenter._launch(NodeClaim(model, 1 << at), model.options[at], ctx, n.name)
        for pod in n.pods:
            ctx.scheduler.bind(pod, st)
            ctx.placed(pod, st)
    return (
        consolidate(karpenter, ctx, spot_to_spot=spot_to_spot, order=order, naming=naming, pools_first=pools_first)
        or {}
    )

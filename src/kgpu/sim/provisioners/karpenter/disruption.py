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
3. **Single-node consolidation**: the candidates in the same order; the first whose pods fit on the other
   nodes (delete) or on them plus one new node cheaper than it (replace).

Karpenter never turns nodes into several (``computeConsolidation`` refuses a simulation that needs more than
one new node). The pods of a command go through Karpenter's own scheduling (``kgpu.sim.provisioners.
karpenter.solve``) over the cluster without the candidates; the replacement's instance types are those with
an offering cheaper than the candidates' price, spot only when the claim allows both capacity types (so the
launch never falls back to a pricier on-demand node). Candidates that are all spot, replaced by a claim that
allows spot, are *spot-to-spot* consolidation: only with the ``SpotToSpotConsolidation`` feature gate (off by
default), only for one candidate, and only with at least 15 cheaper spot instance types.

A candidate is a node this simulation launched (or a replacement) whose NodePool's ``consolidateAfter`` is not
``Never`` and with no pod annotated ``karpenter.sh/do-not-disrupt: "true"``. Disruption cost: each
reschedulable pod's eviction cost (1, plus ``controller.kubernetes.io/pod-deletion-cost`` / 2^27, plus its
priority / 2^25, clamped to [-10, 10]), summed; new nodes have their whole lifetime ahead. Ties by node name
(Karpenter's sort is not stable). Budgets: each NodePool's default ``nodes: 10%`` of its nodes, rounded up.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.catalog import Catalog
from kgpu.model.objects import Node, Pod
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.sim.provisioners.karpenter.solve import Karpenter, NodeClaim, Option, PoolModel, bits
from kgpu.sim.provisioners.pools import LABEL_NODEPOOL, Context, NewNode, karpenter_order
from kgpu.sim.scheduler.scheduler import Scheduler

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
MULTI_NODE_MAX = 100  # multi-node consolidation looks at the first 100 candidates
SPOT_TO_SPOT_MIN_TYPES = 15  # cheaper spot instance types spot-to-spot consolidation needs, and keeps
DEFAULT_BUDGET = 0.10  # a NodePool's default disruption budget: nodes: 10%
VALIDATION_TTL = "15s"
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
    """A node Karpenter may disrupt: one this simulation launched, or a replacement."""

    node: Node
    pods: list[Pod]
    new: NewNode

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def price(self) -> float:
        return self.new.hourly_price or 0.0

    def cost(self) -> float:
        return sum(eviction_cost(p) for p in reschedulable(self.pods))

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
        self.claims += 1
        if claim.pool.create_error or self.claims > 1:
            return None
        pool = claim.pool
        offered = claim.offered()
        price = sum(c.price for c in self.candidates)
        spot = _mask(pool, offered, lambda o: o.capacity_type == "spot")
        if all(c.new.capacity_type == "spot" for c in self.candidates) and spot:
            # spot-to-spot consolidation
            if not self.spot_to_spot:
                self.why = "spot nodes are replaced only with the SpotToSpotConsolidation feature gate (off by default)"
                return None
            if len(self.candidates) > 1:
                self.why = "spot-to-spot consolidation replaces one node at a time"
                return None
            cheaper = _mask(pool, spot, lambda o: o.price < price)
            types = sorted({pool.options[i].type.name: pool.options[i].price for i in bits(cheaper)}.items(),
                           key=lambda kv: (kv[1], kv[0]))
            if len(types) < SPOT_TO_SPOT_MIN_TYPES:
                self.why = (f"spot-to-spot consolidation needs {SPOT_TO_SPOT_MIN_TYPES} cheaper spot instance types; "
                            f"{len(types)} are")
                return None
            keep = {name for name, _ in types[:SPOT_TO_SPOT_MIN_TYPES]}
            return claim.cheapest(_mask(pool, cheaper, lambda o: o.type.name in keep))
        within = offered
        if spot and spot != offered:
            within = spot  # the launch may not fall back to a pricier on-demand node
        cap = price
        if self.multi:
            # filterOutSameInstanceType: a replacement of a type being removed must be cheaper than that node
            names = {pool.options[i].type.name for i in bits(within)}
            same = [c.price for c in self.candidates if c.new.instance_type in names]
            if same:
                cap = min(cap, min(same))
        within = _mask(pool, within, lambda o: o.price < cap)
        if not within:
            self.why = "no instance type is cheaper than the node(s) it would replace"
            return None
        return claim.cheapest(within)


def _mask(pool: PoolModel, mask: int, keep: Any) -> int:
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
    ) -> None:
        self.karpenter = karpenter
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
        return sorted(out, key=lambda n: (n.cost(), n.name))

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
        sub = Context(scratch, self.profile, self.ctx.catalog, self.ctx.daemonsets)
        sub.launched = dict(self.names)
        moving = [p for c in cands for p in reschedulable(c.pods)]
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
        cands = self._within(self._candidates(underutilized=True), budgets)[:MULTI_NODE_MAX]
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
        for c in self._candidates(underutilized=True):
            if budgets.get(c.new.pool, 0) <= 0:
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
                nodes.append(_Node(cmd.replacement_node, pods, new))
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
        for _ in range(MAX_ROUNDS):
            budgets = self._budgets()
            cmd = self._emptiness(budgets) or self._multi(budgets) or self._single(budgets)
            if cmd is None:
                break
            steps.append(cmd.as_dict())
            self._apply(cmd)
        hourly = round(sum(n.price for n in self.nodes), 4)
        view.update(
            hourly_cost=hourly,
            saving=round(launch_cost - hourly, 4),
            new_nodes=[n.as_dict() for n in self.nodes],
            steps=steps,
            modelled=True,
            after=self._after(),
            validation=VALIDATION_TTL,
        )
        if not steps:
            view["kept"] = self._why_kept()
        return view

    def _after(self) -> str:
        afters = sorted({p.consolidation.after for p in self.pools.values() if p.kind == PoolKind.KARPENTER})
        return ", ".join(afters)

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


def consolidate(karpenter: Karpenter, ctx: Context, *, spot_to_spot: bool = False) -> dict[str, Any] | None:
    """Where Karpenter's disruption controller takes the nodes ``karpenter`` launched in the pass ``ctx``
    (None when it launched none): the steps it takes and the steady state, or why it keeps the launch."""
    new = {n.name: n for n in ctx.new_nodes if n.kind == "karpenter"}
    if not new:
        return None
    before = [(st.node, st.pods) for st in ctx.scheduler.states if st.name not in new]
    launched = [(st.node, st.pods, new[st.name]) for st in ctx.scheduler.states if st.name in new]
    return Disruption(karpenter, before, launched, ctx, spot_to_spot=spot_to_spot).run()

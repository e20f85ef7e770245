"""Seeded clusters of Karpenter nodes after a change (pods gone, nodes underused), through kgpu's model of
the disruption controller (``kgpu.sim.provisioners.karpenter.disruption``) and through Karpenter's own
(``consolidation-oracle``), and the comparison of the steady states they reach.

A scenario: one or two zones of us-west-2; one or two kgpu profile pools (rendered to NodePools by
``kgpu.render.karpenter.nodepool``, as ``kgpu render`` writes them) with CPU instance categories or
families, capacity types, a consolidation policy and ``consolidateAfter`` (sometimes ``WhenEmpty`` or
``Never``); 2-12 nodes drawn among each pool's offerings; on each node 0-4 pods that fit it (ReplicaSet
pods, sometimes a bare pod, a priority, a ``karpenter.sh/do-not-disrupt`` pod); the SpotToSpotConsolidation
gate in some. Nodes are what Karpenter launches after a burst, and pods are what is left after a scale-down:
the situation consolidation exists for.

Compared, per scenario: the steady state's nodes as (NodePool, instance type, capacity type), a multiset;
and the number of nodes. A disagreement gets a class (``known_class``) or ``unexplained``.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consolidation_oracle import catalog_types, payload, pod, run_oracle
from karpenter_gen import REGION, ZONES

from kgpu.catalog import aws_catalog
from kgpu.model.load import parse_documents
from kgpu.model.profile import Profile, parse_profile
from kgpu.render.karpenter import nodepool
from kgpu.sim.provisioners.karpenter.disruption import KarpenterNode, consolidate_nodes
from kgpu.sim.provisioners.karpenter.solve import Karpenter, PoolModel
from kgpu.sim.provisioners.pools import Context
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.scheduler.scheduler import Scheduler

CPUS = ("250m", "500m", "1", "1500m", "2", "3", "4", "6")
MEMORY = ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")
GIB = 2**30


@dataclass
class Scenario:
    seed: int
    profile: dict[str, Any]
    zones: list[str]
    nodes: list[dict[str, Any]] = field(default_factory=list)  # the oracle's node entries
    pods: list[dict[str, Any]] = field(default_factory=list)
    spot_to_spot: bool = False


def _pool(r: random.Random, i: int) -> dict[str, Any]:
    req: dict[str, Any] = {}
    choice = r.random()
    if choice < 0.5:
        req["categories"] = sorted(r.sample(["c", "m", "r", "t"], r.randint(1, 3)))
    else:
        req["families"] = sorted(r.sample(["c5", "c6i", "c7i", "m5", "m6i", "m7i", "r5", "t3"], r.randint(1, 4)))
    captypes = r.choice((["on-demand"], ["on-demand"], ["spot", "on-demand"], ["spot"]))
    policy = "WhenEmpty" if r.random() < 0.2 else "WhenEmptyOrUnderutilized"
    after = "Never" if r.random() < 0.1 else "30s"
    return {
        "name": f"pool-{i}",
        "kind": "karpenter",
        "requirements": req,
        "capacityTypes": captypes,
        "devicePlugin": "none",
        "consolidation": {"policy": policy, "after": after},
    }


def _qty_milli(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000


def _qty_bytes(mem: str) -> int:
    return int(mem[:-2]) * (GIB if mem.endswith("Gi") else 2**20)


def _models(profile: Profile) -> list[PoolModel]:
    catalog = aws_catalog(REGION)
    karpenter = Karpenter(profile, catalog)
    ctx = Context(Scheduler([]), profile, catalog, [])
    return [PoolModel(profile, p, catalog, ctx, ("cpu", "memory", "pods")) for p in karpenter.pools]


def scenario(seed: int) -> Scenario:
    r = random.Random(seed)
    zones = sorted(r.sample(list(ZONES[:3]), r.randint(1, 2)))
    pools = [_pool(r, i) for i in range(r.randint(1, 2))]
    profile = {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": f"consolidation-{seed}"},
        "provider": "eks",
        "autoscaler": "karpenter",
        "cluster": {"region": REGION, "zones": zones},
        "monitoring": {"enabled": False},
        "pools": pools,
    }
    scn = Scenario(seed, profile, zones, spot_to_spot=r.random() < 0.3)
    for model in _models(parse_profile(profile, source=f"case {seed}")):
        # offerings of everyday sizes (Karpenter launches them for bursts of small pods)
        options = [o for o in model.options if o.node.allocatable.get("cpu", 0) <= 16000 and not o.type.has_gpu]
        if not options:
            continue
        for _ in range(r.randint(1, 6)):
            opt = r.choice(options)
            name = f"{model.pool.name}-n{len(scn.nodes)}"
            scn.nodes.append({"name": name, "nodePool": model.pool.name, "instanceType": opt.type.name,
                              "zone": opt.zone, "capacityType": opt.capacity_type})
            cpu_left = opt.node.allocatable.get("cpu", 0) - 300  # room for what the node itself runs
            mem_left = opt.node.allocatable.get("memory", 0) - GIB // 2
            for k in range(r.choice((0, 1, 1, 2, 2, 3, 4))):
                cpu, mem = r.choice(CPUS), r.choice(MEMORY)
                if _qty_milli(cpu) > cpu_left or _qty_bytes(mem) > mem_left:
                    continue
                cpu_left -= _qty_milli(cpu)
                mem_left -= _qty_bytes(mem)
                scn.pods.append(_pod(r, f"{name}-p{k}", name, cpu, mem))
    return scn


def _pod(r: random.Random, name: str, node: str, cpu: str, mem: str) -> dict[str, Any]:
    """A ReplicaSet's pod (one in ten bare), sometimes do-not-disrupt, sometimes with a priority."""
    owner = "ReplicaSet" if r.random() < 0.9 else None
    guard = {"karpenter.sh/do-not-disrupt": "true"} if r.random() < 0.05 else None
    doc = pod(name, node, cpu, mem, owner=owner, labels={"app": f"app-{r.randint(0, 5)}"}, annotations=guard)
    if r.random() < 0.15:
        doc["spec"]["priority"] = r.choice((-100, 1000, 100000))
    return doc


def oracle_input(scn: Scenario) -> dict[str, Any]:
    profile = parse_profile(scn.profile, source=f"case {scn.seed}")
    return payload(
        [nodepool(profile, p) for p in profile.pools],
        scn.nodes,
        scn.pods,
        types=catalog_types(zones=scn.zones),
        spot_to_spot=scn.spot_to_spot,
    )


def run_kgpu(
    scn: Scenario,
    order: Callable[[str], Any] | None = None,
    pools_first: Callable[[int], Sequence[str]] | None = None,
) -> dict[str, Any]:
    profile = parse_profile(scn.profile, source=f"case {scn.seed}")
    catalog = aws_catalog(REGION)
    prov = provisioner_for(profile, catalog)
    karpenter = next(part for part in prov.parts if isinstance(part, Karpenter))
    ctx = Context(Scheduler([]), profile, catalog, [])
    pods = parse_documents(scn.pods, f"case {scn.seed}").pods
    by_node: dict[str, list[Any]] = collections.defaultdict(list)
    for p in pods:
        by_node[p.node_name].append(p)
    nodes = [
        KarpenterNode(n["name"], n["nodePool"], n["instanceType"], n["zone"], n["capacityType"], by_node[n["name"]])
        for n in scn.nodes
    ]
    # replacements named as the oracle names them (<pool>-r<round>): Karpenter tries existing nodes by name
    return consolidate_nodes(
        karpenter,
        ctx,
        nodes,
        spot_to_spot=scn.spot_to_spot,
        order=order,
        naming=lambda pool, n: f"{pool}-r{n}",
        pools_first=pools_first,
    )


def steady(nodes: list[dict[str, Any]], *, oracle: bool) -> collections.Counter[tuple[str, str, str]]:
    if oracle:
        return collections.Counter((n["nodePool"], n["instanceType"], n["capacityType"]) for n in nodes)
    return collections.Counter((n["pool"], n["instance_type"], n["capacity_type"]) for n in nodes)


@dataclass
class Outcome:
    seed: int
    agree: bool
    klass: str | None
    detail: str
    commands: tuple[int, int]  # kgpu's and Karpenter's


def compare(scn: Scenario, binary: Path) -> Outcome:
    kg = run_kgpu(scn)
    orc = run_oracle(binary, oracle_input(scn))
    k, o = steady(kg.get("new_nodes", []), oracle=False), steady(orc["nodes"] or [], oracle=True)
    commands = (len(kg.get("steps", [])), len(orc["rounds"] or []))
    if k == o:
        return Outcome(scn.seed, True, None, "", commands)
    klass = known_class(scn, kg, orc, binary)
    detail = (
        f"case {scn.seed}: kgpu {sorted(k.elements())} in {commands[0]} commands "
        f"{[(s['method'], s['decision'], [n['name'] for n in s['nodes']]) for s in kg.get('steps', [])]}; "
        f"karpenter {sorted(o.elements())} in {commands[1]} "
        f"{[(r['method'], r['decision'], r['candidates']) for r in orc['rounds'] or []]}"
    )
    return Outcome(scn.seed, False, klass, detail, commands)


KNOWN = {
    # Karpenter sorts candidates of equal disruption cost with an unstable sort over cluster state's node map,
    # and single-node consolidation interleaves NodePools in Go map order (both random from one run to the
    # next); kgpu takes names in order. The class holds when that order decides the steady state: Karpenter
    # run again on the same input reaches kgpu's, or kgpu with names in another order reaches Karpenter's.
    "tie-order": "the order of equal-cost candidates, or of NodePools, decides the steady state",
}
# How many other orders kgpu tries, and how often Karpenter runs again, before a disagreement is unexplained:
# Karpenter's order is random, so a tie-order case can take several runs to show (4 runs missed one at seed 7311)
RERUNS = 12
ORDERS = 16


def known_class(scn: Scenario, kg: dict[str, Any], orc: dict[str, Any], binary: Path) -> str:
    """The documented cause of a disagreement, or ``unexplained``."""
    want = steady(kg.get("new_nodes", []), oracle=False)
    got = steady(orc["nodes"] or [], oracle=True)
    # kgpu breaking ties as Karpenter did in this run: the nodes it disrupted, in the order it did, first
    # (the order decides nothing but ties: candidates are sorted by disruption cost first), and the
    # NodePools in the order its single-node commands met them
    pool_of = {n["name"]: n["nodePool"] for n in scn.nodes}
    rank: dict[str, int] = {}
    for r in orc["rounds"] or []:
        pool_of.update({rep["name"]: rep["nodePool"] for rep in r["replacements"] or []})
        for name in r["candidates"]:
            rank.setdefault(name, len(rank))
            if r["method"] == "single":
                rank.setdefault(pool_of.get(name, ""), len(rank))

    def guided(name: str) -> tuple[int, str]:
        return (rank.get(name, len(rank)), name)

    if steady(run_kgpu(scn, guided).get("new_nodes", []), oracle=False) == got:
        return "tie-order"
    # the same, with single-node consolidation's NodePool order drawn again at every command, as Go's map
    # order is at every reconcile: in command n, the NodePool of Karpenter's n-th candidate first
    firsts = {
        i: [pool_of.get(r["candidates"][0], "")]
        for i, r in enumerate(orc["rounds"] or [], 1)
        if r["method"] == "single" and r["candidates"]
    }
    if steady(run_kgpu(scn, guided, lambda n: firsts.get(n, [])).get("new_nodes", []), oracle=False) == got:
        return "tie-order"
    for k in range(ORDERS):
        shuffle = random.Random(f"{scn.seed}-{k}")
        keys: dict[str, float] = {}

        def order(name: str, keys: dict[str, float] = keys, shuffle: random.Random = shuffle) -> float:
            return keys.setdefault(name, shuffle.random())

        if steady(run_kgpu(scn, order).get("new_nodes", []), oracle=False) == got:
            return "tie-order"
    doc = oracle_input(scn)
    for _ in range(RERUNS):
        if steady(run_oracle(binary, doc)["nodes"] or [], oracle=True) == want:
            return "tie-order"
    return "unexplained"

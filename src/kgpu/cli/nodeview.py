"""The node view of ``plan`` and ``simulate``: what each node (or group of alike nodes) has allocated.

Like eks-node-viewer, one bar per node for GPU, CPU and memory, each the pods' requests over the node's
allocatable, nodes grouped by pool (Karpenter NodePool, node group, or the profile's static pool). Nodes of
a pool with the same instance type, capacity type and the same bars share one line (``gpu-1 (x15)``), so a
5,000-node cluster stays readable. Colour (when on) says how well a node is used: green from 80 %,
yellow from 30 %, red below, since an idle GPU node costs as much as a busy one.

The rows are plain data, drawn twice: as text bars here and as SVG in the HTML report (``cli.report``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.cli.output import style, table

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"
POOL_LABELS = ("karpenter.sh/nodepool", "eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name")
TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
CAPACITY_LABELS = ("karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType")
BAR_WIDTH = 10
NO_POOL = "(no pool)"


@dataclass(frozen=True)
class Usage:
    used: int
    total: int

    @property
    def fraction(self) -> float:
        if self.total <= 0:
            return 0.0
        return min(1.0, self.used / self.total)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.used + other.used, self.total + other.total)


@dataclass
class NodeGroup:
    """One line of the view: ``count`` alike nodes of a pool (the first one's name shown)."""

    pool: str
    name: str
    instance_type: str
    capacity_type: str
    new: bool
    gpu: Usage
    cpu: Usage
    memory: Usage
    pods: int
    hourly_price: float | None
    count: int = 1

    @property
    def label(self) -> str:
        return self.name if self.count == 1 else f"{self.name} (x{self.count})"


@dataclass
class Pool:
    name: str
    groups: list[NodeGroup] = field(default_factory=list)

    @property
    def nodes(self) -> int:
        return sum(g.count for g in self.groups)

    def total(self, attr: str) -> Usage:
        out = Usage(0, 0)
        for g in self.groups:
            u: Usage = getattr(g, attr)
            out = out + Usage(u.used * g.count, u.total * g.count)
        return out

    @property
    def hourly_price(self) -> float | None:
        prices = [g.hourly_price * g.count for g in self.groups if g.hourly_price is not None]
        return round(sum(prices), 4) if prices else None


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _cells(u: Usage) -> int:
    return round(u.fraction * BAR_WIDTH)


def pools(
    nodes: Sequence[Any], new_nodes: Sequence[Any] = (), pool_of: Mapping[str, str] | None = None
) -> list[Pool]:
    """Group the simulation's nodes (``NodeState``) into pools of alike lines, pools in first-seen order.

    ``new_nodes`` (provisioned ``NewNode``) give pool, instance type, capacity type and price of the nodes
    the simulation created; ``pool_of`` names the pool of nodes no label places (the profile's static pools).
    """
    new = {n.name: n for n in new_nodes}
    pool_of = pool_of or {}
    out: dict[str, Pool] = {}
    index: dict[tuple[Any, ...], NodeGroup] = {}
    for state in nodes:
        node = state.node
        made = new.get(node.name)
        labels = node.labels
        pool = (
            (made.pool if made else "")
            or _first(labels, POOL_LABELS)
            or pool_of.get(node.name, "")
            or NO_POOL
        )
        itype = (made.instance_type if made else "") or _first(labels, TYPE_LABELS)
        capacity = (made.capacity_type if made else "") or _first(labels, CAPACITY_LABELS).lower()
        alloc = node.allocatable
        req = state.requested
        gpu = Usage(req.get(GPU, 0), alloc.get(GPU, 0))
        cpu = Usage(req.get(CPU, 0), alloc.get(CPU, 0))
        mem = Usage(req.get(MEMORY, 0), alloc.get(MEMORY, 0))
        price = made.hourly_price if made else None
        key = (pool, itype, capacity, made is not None, gpu, _cells(cpu), _cells(mem), state.pod_count, price)
        group = index.get(key)
        if group is not None:
            group.count += 1
            continue
        group = NodeGroup(
            pool, node.name, itype, capacity, made is not None, gpu, cpu, mem, state.pod_count, price
        )
        index[key] = group
        out.setdefault(pool, Pool(pool)).groups.append(group)
    return list(out.values())


def profile_pools(profile: Any) -> dict[str, str]:
    """Node name -> pool for the profile's static nodes (they carry no pool label)."""
    return {n.name: p.name for p in profile.pools for n in getattr(p, "nodes", None) or ()}


def color_for(fraction: float) -> str:
    if fraction >= 0.8:
        return "green"
    if fraction >= 0.3:
        return "yellow"
    return "red"


def bar(u: Usage, *, count: bool = False) -> str:
    """``██████░░░░ 60%`` (``1/1`` for GPUs); blank for a resource the node does not have."""
    if u.total <= 0:
        return ""
    filled = _cells(u)
    text = "█" * filled + "░" * (BAR_WIDTH - filled)
    figure = f"{u.used}/{u.total}" if count else f"{round(u.fraction * 100)}%"
    return f"{style(text, fg=color_for(u.fraction))} {figure}"


def _money(v: float | None) -> str:
    return "" if v is None else f"${v:,.4f}/h"


def render(view: list[Pool], *, title: str = "Nodes by pool (requests / allocatable)") -> str:
    rows: list[tuple[str, ...]] = []
    for pool in view:
        rows.append(
            (
                style(pool.name, bold=True),
                f"{pool.nodes} node(s)",
                bar(pool.total("gpu"), count=True),
                bar(pool.total("cpu")),
                bar(pool.total("memory")),
                _money(pool.hourly_price),
            )
        )
        for g in pool.groups:
            kind = " ".join(x for x in (g.instance_type, g.capacity_type, "new" if g.new else "") if x)
            rows.append(
                (
                    f"  {g.label}",
                    kind,
                    bar(g.gpu, count=True),
                    bar(g.cpu),
                    bar(g.memory),
                    _money(None if g.hourly_price is None else g.hourly_price),
                )
            )
    return table(("POOL / NODE", "TYPE", "GPU", "CPU", "MEMORY", "PRICE EACH"), rows, title=title)


def cost_bars(items: Sequence[tuple[str, float | None]], *, width: int = 30) -> list[str]:
    """One bar per (label, $/h), the longest for the most expensive; ``-`` where there is no price."""
    top = max((v for _, v in items if v), default=0.0)
    label_w = max((len(k) for k, _ in items), default=0)
    lines = []
    for label, value in items:
        if value is None:
            lines.append(f"{label.ljust(label_w)}  -")
            continue
        cells = max(1, round(value / top * width)) if top and value > 0 else 0
        lines.append(
            f"{label.ljust(label_w)}  {style('█' * cells, fg='cyan')}{' ' * (width - cells)}  ${value:,.4f}/h"
        )
    return lines

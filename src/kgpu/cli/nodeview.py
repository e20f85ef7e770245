"""The node view of ``plan`` and ``simulate``: what each node (or group of alike nodes) has allocated.

Like eks-node-viewer, one bar per node for GPU, CPU and memory, each the pods' requests over the node's
allocatable, nodes grouped by pool (Karpenter NodePool, node group, or the profile's static pool). Nodes of
a pool with the same instance type, capacity type and the same bars share one line (``gpu-1 (x15)``), so a
5,000-node cluster stays readable. Colour (when on) says how well a node is used: green from 80 %,
yellow from 30 %, red below, since an idle GPU node costs as much as a busy one; a legend under the view
says so, and what the marks mean.

Every node is priced, as eks-node-viewer does: new nodes at the price they were bought at, existing ones
from their instance-type, capacity-type and region labels over the AWS catalog; a node the catalog cannot
price (on-prem, a type or region it lacks) is marked ``n/a``, and a pool total counts them.

The default view fits 80 columns (five-cell bars, node names shortened with ``…``, ``od`` for on-demand,
``+`` before a new node); ``-o wide`` draws the full one.

A node whose GPUs the NVIDIA device plugin shares or partitions (time-slicing, MPS, MIG) counts its devices
in the GPU bar (``nvidia.com/gpu`` times the replicas, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``), and
gets a line per device resource under it: its slices used over advertised and how many are idle
(``1 idle   gpu shared x4   3/4``, ``mig-1g.5gb 5/16``), read from the node's allocatable and GPU Feature
Discovery's labels (``nvidia.com/gpu.replicas``, ``.sharing-strategy``, ``.product``), so existing nodes
show theirs as new ones do. ``shared_cost`` is the cost split of those nodes (the plan's ``shared_gpus``):
what the pods pay for their share of the GPUs, and the idle slices' cost.

The rows are plain data, drawn twice: as text bars here and as SVG in the HTML report (``cli.report``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.cli.output import headers_wanted, style, table
from kgpu.model.gpus import AMD_GPU, WHOLE, classify, is_gpu, sharing_of
from kgpu.model.nvidia import GPU, SHARED_SUFFIX

CPU = "cpu"
MEMORY = "memory"
POOL_LABELS = ("karpenter.sh/nodepool", "eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name")
TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
CAPACITY_LABELS = ("karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
BAR_WIDTH = 10
COMPACT_BAR = 5
COLUMNS = 80
NO_POOL = "(no pool)"
UNPRICED = "n/a"


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


@dataclass(frozen=True)
class Slice:
    """One device resource of a shared or partitioned GPU node: ``gpu shared x4``, ``mig-1g.5gb``."""

    resource: str  # nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.5gb, ...
    usage: Usage
    kind: str  # "shared x4", "mps x2", "mig 1g.5gb" (single strategy), "" (a MIG device, not replicated)

    @property
    def label(self) -> str:
        """``gpu shared x4``, ``gpu.shared x10`` (renamed: the name says shared), ``mig-1g.5gb``."""
        short = self.resource.removeprefix("nvidia.com/")
        kind = self.kind.removeprefix("shared ") if short.endswith(SHARED_SUFFIX) else self.kind
        return f"{short} {kind}".strip()

    def within(self, width: int) -> str:
        """The label in ``width`` columns: the resource's name shortened with ``…``, its kind kept whole."""
        text = self.label
        if len(text) <= width:
            return text
        name, _, kind = text.partition(" ")
        return f"{_cut(name, max(4, width - len(kind) - 1))} {kind}".strip()

    @property
    def idle(self) -> int:
        return max(0, self.usage.total - self.usage.used)


def label_is_whole(s: Slice) -> bool:
    """A DRA slice of full GPUs only: drawn as the plain GPU bar."""
    return s.resource == "dra:gpu"


def slices(allocatable: Mapping[str, int], requested: Mapping[str, int], labels: Mapping[str, str]
           ) -> tuple[Slice, ...]:
    """The device resources of a node that shares or partitions its GPUs (none for whole GPUs), as the GPU
    inventory (``kgpu.model.gpus``) classifies them from the node's allocatable and GFD's labels."""
    devices = sorted(k for k, v in allocatable.items() if v and is_gpu(k))
    out = []
    partitioned = False
    for name in devices:
        what, replicas, profile = classify(name, labels)
        kind = ""
        if replicas > 1:
            kind = f"{'mps' if sharing_of(name, labels) == 'mps' else 'shared'} x{replicas}"
        if what != WHOLE or name.endswith(SHARED_SUFFIX):
            partitioned = True
        if name == GPU and profile:  # MIG single: every MIG device is nvidia.com/gpu
            kind = " ".join(x for x in (f"mig {profile}", kind) if x)
        out.append(Slice(name, Usage(requested.get(name, 0), allocatable[name]), kind))
    return tuple(out) if partitioned else ()


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
    slices: tuple[Slice, ...] = ()

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

    @property
    def unpriced(self) -> int:
        """Nodes of the pool without a price."""
        return sum(g.count for g in self.groups if g.hourly_price is None)


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _cells(u: Usage) -> int:
    return round(u.fraction * BAR_WIDTH)


PriceOf = Callable[[str, str, Mapping[str, str]], "float | None"]


def region_of(labels: Mapping[str, str]) -> str:
    """A node's region: its region label, else its zone's name less the zone letter (us-west-2a)."""
    region = _first(labels, REGION_LABELS)
    if region:
        return region
    zone = _first(labels, ZONE_LABELS)
    return zone.rstrip("abcdefghijklmnopqrstuvwxyz") if zone and zone[-1].isalpha() else ""


def catalog_price(
    instance_type: str, capacity: str, labels: Mapping[str, str], catalog: Any = None
) -> float | None:
    """What an existing node costs per hour: its type's price in its region from the AWS catalog (or
    ``catalog``: the profile's, with its override rows), spot (the region's median) or on-demand as its
    capacity-type label says (on-demand when it has none)."""
    region = region_of(labels)
    if not instance_type or not region:
        return None
    from kgpu.catalog import aws_catalog
    from kgpu.errors import InputError

    try:
        pricing = (catalog or aws_catalog()).pricing(instance_type, region)
    except InputError:  # a type the catalog does not know
        return None
    if pricing is None:
        return None
    return pricing.spot if capacity == "spot" else pricing.on_demand


def pools(
    nodes: Sequence[Any],
    new_nodes: Sequence[Any] = (),
    pool_of: Mapping[str, str] | None = None,
    price_of: PriceOf | None = catalog_price,
    dra_gpus: Mapping[str, Mapping[str, tuple[int, int]]] | None = None,
) -> list[Pool]:
    """Group the simulation's nodes (``NodeState``) into pools of alike lines, pools in first-seen order.

    ``new_nodes`` (provisioned ``NewNode``) give pool, instance type, capacity type and price of the nodes
    the simulation created; ``pool_of`` names the pool of nodes no label places (the profile's static pools);
    ``price_of`` prices the others (default: the AWS catalog, from the node's labels); ``dra_gpus`` are the
    GPUs NVIDIA's DRA driver publishes per node, by kind, (in use, published) (``SimulationResult.dra_gpus``).
    """
    new = {n.name: n for n in new_nodes}
    pool_of = pool_of or {}
    prices: dict[tuple[str, str, str], float | None] = {}
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
        shared = slices(alloc, req, labels)
        dra = (dra_gpus or {}).get(node.name)
        if dra:  # the driver's devices, each kind a slice of the bar (MIG devices with their profile)
            shared = shared + tuple(Slice(label, Usage(u, t), "") for label, (u, t) in sorted(dra.items()))
            if len(shared) == 1 and label_is_whole(shared[0]):
                gpu, shared = shared[0].usage, ()
            else:
                gpu = Usage(sum(x.usage.used for x in shared), sum(x.usage.total for x in shared))
        elif shared:  # the GPU bar counts every device the plugin advertises
            gpu = Usage(sum(x.usage.used for x in shared), sum(x.usage.total for x in shared))
        else:  # whole GPUs: NVIDIA's, or AMD's (g4ad) where the node advertises those
            gpu = Usage(req.get(GPU, 0) + req.get(AMD_GPU, 0), alloc.get(GPU, 0) + alloc.get(AMD_GPU, 0))
        cpu = Usage(req.get(CPU, 0), alloc.get(CPU, 0))
        mem = Usage(req.get(MEMORY, 0), alloc.get(MEMORY, 0))
        if made is not None:
            price = made.hourly_price
        elif price_of is None:
            price = None
        else:
            key3 = (itype, capacity, region_of(labels))
            if key3 not in prices:
                prices[key3] = price_of(itype, capacity, labels)
            price = prices[key3]
        key = (pool, itype, capacity, made is not None, gpu, _cells(cpu), _cells(mem), state.pod_count, price,
               shared)
        group = index.get(key)
        if group is not None:
            group.count += 1
            continue
        group = NodeGroup(
            pool, node.name, itype, capacity, made is not None, gpu, cpu, mem, state.pod_count, price,
            slices=shared,
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


def bar(u: Usage, *, count: bool = False, width: int = BAR_WIDTH) -> str:
    """``██████░░░░ 60%`` (``1/1`` for GPUs); blank for a resource the node does not have."""
    if u.total <= 0:
        return ""
    filled = int(u.fraction * width + 0.5)  # half up: 50 % of five cells is three, not round()'s two
    text = "█" * filled + "░" * (width - filled)
    figure = f"{u.used}/{u.total}" if count else f"{round(u.fraction * 100)}%"
    return f"{style(text, fg=color_for(u.fraction))} {figure}"


def _money(v: float | None) -> str:
    return "" if v is None else f"${v:,.4f}/h"


def _short_money(v: float | None) -> str:
    if v is None:
        return UNPRICED
    return f"${v:,.2f}" if v >= 100 else f"${v:.3f}"


def _pool_nodes(pool: Pool) -> str:
    """``15 node(s)``, and how many of them have no price (the pool's total leaves them out)."""
    text = f"{pool.nodes} node(s)"
    return f"{text}, {pool.unpriced} {UNPRICED}" if pool.unpriced and pool.hourly_price is not None else text


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


SLICES_LEGEND = "N idle: a shared or MIG node's free devices; shared xR: R replicas per device"


def legend(*, compact: bool = True, shared: bool = False) -> list[str]:
    """What the colours and marks of the view mean (two lines, within 80 columns; a third for slices)."""
    marks = "+ new node, (xN) N alike nodes, od on-demand" if compact else "(xN) N alike nodes"
    return [
        "Bars: requests / allocatable; "
        + ", ".join(style(f"{w} {r}", fg=c) for w, r, c in (("green", "≥ 80 %", "green"), ("yellow", "≥ 30 %", "yellow"), ("red", "< 30 %", "red")))
        + " used",
        f"{marks}; {UNPRICED}: no price known",
        *([SLICES_LEGEND] if shared else []),
    ]


def render(
    view: list[Pool], *, title: str = "Nodes by pool (requests / allocatable)", compact: bool = True,
    priced: bool = True,
) -> str:
    """The view as a table and its legend: within 80 columns by default; ``compact=False`` for -o wide.
    ``priced=False``: no line on where prices come from (a plan's cost block under the view names them)."""
    from kgpu.catalog.prices import caption

    width = COMPACT_BAR if compact else BAR_WIDTH
    money = _short_money if compact else (lambda v: _money(v) or UNPRICED)
    rows: list[list[str]] = []
    names: list[tuple[int, str, NodeGroup]] = []  # rows whose first cell is a node group's label
    sliced: list[int] = []  # rows of a shared node's device resources
    slice_of: dict[int, Slice] = {}
    for pool in view:
        rows.append(
            [
                style(pool.name, bold=True),
                _pool_nodes(pool),
                bar(pool.total("gpu"), count=True, width=width),
                bar(pool.total("cpu"), width=width),
                bar(pool.total("memory"), width=width),
                money(pool.hourly_price),
            ]
        )
        for g in pool.groups:
            if compact:
                capacity = "od" if g.capacity_type in ("on-demand", "on_demand") else g.capacity_type
                kind = " ".join(x for x in (g.instance_type, capacity) if x)
                mark = "+" if g.new else " "
            else:
                kind = " ".join(x for x in (g.instance_type, g.capacity_type, "new" if g.new else "") if x)
                mark = ""
            names.append((len(rows), mark, g))
            rows.append(
                [
                    f" {mark}{g.label}",
                    kind,
                    bar(g.gpu, count=True, width=width),
                    bar(g.cpu, width=width),
                    bar(g.memory, width=width),
                    money(g.hourly_price),
                ]
            )
            for x in g.slices:  # each device resource of a shared node: its slices and how many are idle
                sliced.append(len(rows))
                slice_of[len(rows)] = x
                rows.append([f"   {x.idle} idle", x.label, bar(x.usage, count=True, width=width), "", "", ""])
    headers = ["POOL / NODE", "TYPE", "GPU", "CPU", "MEMORY", "$/H EACH" if compact else "PRICE EACH"]
    if compact:
        # the name column takes what the others leave of 80 columns (never under its header); long device
        # resource names (mig-1g.10gb.shared x10) give way first
        floor = max(10, _visible(headers[0]))  # the header is never cut
        others = sum(max(_visible(r[i]) for r in [headers, *rows]) + 2 for i in range(1, len(headers)))
        if sliced and others > COLUMNS - floor:
            kind_w = max(_visible(r[1]) for i, r in enumerate([headers, *rows]) if i - 1 not in sliced)
            cut = max(kind_w, 12, max(_visible(rows[i][1]) for i in sliced) - (others - COLUMNS + floor))
            for i in sliced:
                rows[i][1] = slice_of[i].within(cut)
            others = sum(max(_visible(r[i]) for r in [headers, *rows]) + 2 for i in range(1, len(headers)))
        room = max(floor, COLUMNS - others)
        for i, mark, g in names:  # shorten the node's name, keep its (xN)
            if _visible(rows[i][0]) > room:
                suffix = "" if g.count == 1 else f" (x{g.count})"
                rows[i][0] = f" {mark}{_cut(g.name, room - 2 - len(suffix))}{suffix}"
        for r in rows:
            if _visible(r[0]) > room:
                r[0] = _cut(click_unstyle(r[0]), room)
    text = table(headers, rows, title=title)
    shared = any(g.slices for p in view for g in p.groups)
    lines = [text, *legend(compact=compact, shared=shared), *([caption()] if priced else [])]
    return "\n".join(lines) if headers_wanted() else text


def _visible(text: str) -> int:
    return len(click_unstyle(text))


def click_unstyle(text: str) -> str:
    import click

    return click.unstyle(text) if "\x1b" in text else text


def cost_bars(
    items: Sequence[tuple[str, float | None]],
    *,
    width: int = 30,
    notes: Mapping[str, str] | None = None,
) -> list[str]:
    """One bar per (label, $/h), the longest for the most expensive, with the monthly figure.

    A label in ``notes`` (a template that cannot run every pod, or has nodes without a price) gets its note
    and no bar: its figure is not the cost of the same thing, and a short bar would read as cheapest."""
    from kgpu.catalog.prices import monthly

    notes = notes or {}
    top = max((v for k, v in items if v and k not in notes), default=0.0)
    label_w = max((len(k) for k, _ in items), default=0)
    lines = []
    for label, value in items:
        if label in notes:
            seen = "" if value is None else f" (${value:,.4f}/h counted)"
            lines.append(f"{label.ljust(label_w)}  {style('no bar: ' + notes[label], fg='yellow')}{seen}")
            continue
        if value is None:
            lines.append(f"{label.ljust(label_w)}  -")
            continue
        cells = max(1, round(value / top * width)) if top and value > 0 else 0
        lines.append(
            f"{label.ljust(label_w)}  {style('█' * cells, fg='cyan')}{' ' * (width - cells)}  "
            f"${value:,.4f}/h (${monthly(value):,.2f}/mo)"
        )
    return lines


SHARED_TITLE = "Shared GPU cost (pods pay their share of a GPU; free slices are idle)"


SHARED_HEADERS = ("CONFIG", "NODES", "GPUS", "SLICES", "PODS $/H", "IDLE $/H", "IDLE")
POD_HEADERS = ("POD", "NODE", "CONFIG", "GPU $/H")


def shared_cost_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """Per device-plugin config (``SHARED_HEADERS``): nodes, physical GPUs, slices used over advertised,
    what the pods pay per hour, the idle slices' cost and its share of the nodes' price. Nodes without a
    price (existing ones the catalog cannot price) count their slices, not their cost."""
    groups: dict[str, dict[str, Any]] = {}
    for e in entries:
        g = groups.setdefault(e["config"], {"nodes": 0, "gpus": 0, "used": 0, "advertised": 0,
                                            "paid": 0.0, "idle": 0.0, "price": 0.0, "unpriced": 0})
        g["nodes"] += 1
        g["gpus"] += e["gpus"]
        g["used"] += sum(d["used"] for d in e["devices"].values())
        g["advertised"] += sum(d["advertised"] for d in e["devices"].values())
        if "pods" not in e:
            g["unpriced"] += 1
            continue
        g["paid"] += sum(e["pods"].values())
        g["idle"] += e["idle"]
        g["price"] += e["hourly_price"]
    rows: list[tuple[str, ...]] = []
    for name, g in groups.items():
        priced = g["nodes"] > g["unpriced"]
        share = f"{round(100 * g['idle'] / g['price'])}%" if priced and g["price"] > 0 else UNPRICED
        nodes = f"{g['nodes']}" + (f" ({g['unpriced']} {UNPRICED})" if g["unpriced"] and priced else "")
        rows.append((
            name, nodes, str(g["gpus"]), f"{g['used']}/{g['advertised']}",
            f"${g['paid']:,.4f}" if priced else UNPRICED,
            f"${g['idle']:,.4f}" if priced else UNPRICED,
            share,
        ))
    return rows


def shared_pod_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """One row per pod on a shared node (``POD_HEADERS``: its GPU share's cost), and one per node for its
    idle slices."""
    rows: list[tuple[str, ...]] = []
    for e in entries:
        for pod, cost in (e.get("pods") or {}).items():
            rows.append((pod, e["node"], e["config"], f"${cost:,.4f}/h"))
        idle = sum(d["advertised"] - d["used"] for d in e["devices"].values())
        rows.append((f"({idle} idle slice(s))", e["node"], e["config"],
                     f"${e['idle']:,.4f}/h" if "idle" in e else UNPRICED))
    return rows


def shared_cost(entries: Sequence[Mapping[str, Any]], *, wide: bool = False) -> list[str]:
    """The cost split of the plan's ``shared_gpus``: per device-plugin config, or with ``wide`` per pod.
    [] when no node shares its GPUs; a blank line and the titled table otherwise."""
    if not entries:
        return []
    if wide:
        return ["", table(POD_HEADERS, shared_pod_rows(entries), title=SHARED_TITLE)]
    return ["", table(SHARED_HEADERS, shared_cost_rows(entries), title=SHARED_TITLE)]


def consolidated(view: Mapping[str, Any] | None) -> list[str]:
    """The second, labelled view of Karpenter's nodes: where its disruption controller takes the launched
    nodes (``karpenter_consolidated``): each command it runs and the steady state, or one line saying that it
    keeps the launch and why. [] when Karpenter launched nothing."""
    if not view:
        return []
    from collections import Counter

    from kgpu.catalog.prices import monthly

    steps = view.get("steps") or []
    if not steps:
        kept = view.get("kept") or ["no cheaper way to hold their pods"]
        return ["", "Consolidation: Karpenter keeps the nodes above", *(f"  {why}" for why in kept)]

    def node(n: Mapping[str, Any]) -> str:
        price = n.get("hourly_price")
        return f"{n.get('name', '')} {n['instance_type']} {n.get('capacity_type', '')}".strip() + (
            f" ${price:,.4f}/h" if price is not None else ""
        )

    out = [
        "",
        "After consolidation (Karpenter's disruption controller, one command at a time, each "
        f"{view.get('validation', '15s')} after the last; nodes are candidates consolidateAfter "
        f"{view.get('after', '')} after their last pod change)",
    ]
    for i, step in enumerate(steps, 1):
        gone = ", ".join(node(n) for n in step["nodes"])
        rep = step.get("replacement")
        what = f"replace {gone} with {node(rep)}" if rep else f"delete {gone}"
        out.append(f"  {i}. {step['method']}: {what} (saves ${step['hourly_saving']:,.4f}/h)")
    types = Counter(
        f"{n['instance_type']} {n.get('capacity_type', '')}".strip() for n in view.get("new_nodes", [])
    )
    shape = ", ".join(f"{k} (x{v})" if v > 1 else k for k, v in sorted(types.items()))
    hourly, saving = view["hourly_cost"], view["saving"]
    out += [
        f"  steady state     ${hourly:,.4f}/h (${monthly(hourly):,.2f}/mo): {shape}",
        f"  saves            ${saving:,.4f}/h (${monthly(saving):,.2f}/mo) against the launch's "
        f"${view['launch_hourly_cost']:,.4f}/h",
    ]
    return out

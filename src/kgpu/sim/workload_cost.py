"""Cost per workload and per namespace: each workload's share of the nodes its pods run on, and the idle rest.

The split extends the one shared GPUs use (``kgpu.sim.sharing.gpu_cost_split``) to every node, new and existing:

- **A GPU node** (its instance type has GPUs, GPU Feature Discovery counts some, or it advertises GPU
  resources or publishes DRA GPUs) is bought for its GPUs, so its whole price is its GPUs' price. A GPU costs
  ``price / G`` (``G``: the node's physical GPUs). A pod pays, per GPU resource it requests, ``units x u`` of a
  GPU, where ``u`` is the share of one physical GPU a unit is: 1 for a whole GPU, ``1/R`` for a time-sliced or
  MPS replica, a MIG device by its memory slices (``kgpu.catalog.mig.memory_share``), the replica of a MIG
  device both. ``u`` comes from the profile's device-plugin config for the node (as ``shared_gpus`` reads it),
  else from the node's GFD labels. A DRA device of NVIDIA's driver is ``1/D`` of the node (``D``: the devices
  its ResourceSlices publish). Pods that ask no GPU pay nothing there.
- **Any other node** is divided by its dominant requested resource: of CPU and memory, the one its pods
  request the largest fraction of (CPU on a tie). A pod pays ``price x its request / allocatable`` of it.
- **Idle** is the rest: the price less what the pods pay (free GPUs and slices, free CPU or memory).

Where requests exceed what a node offers (a snapshot's node that shrank), the pods split the whole price in
proportion and nothing is idle. The figures are exact: each node's price is taken in micro-dollars and
apportioned to its workloads and its idle part by largest remainders, so that the workloads' figures plus the
idle figure are the priced nodes' total to the micro-dollar, and every namespace is the sum of its workloads.

A workload is a pod's controller as ``kubectl`` shows it: a ReplicaSet's Deployment (from the objects read,
or the ``pod-template-hash`` in the ReplicaSet's name), a Job's CronJob (from the objects read), otherwise
the controller itself (StatefulSet, Job, DaemonSet, RayCluster, ...); a pod without one is its own workload.
Pods on a node without a price are counted (``unpriced_pods``) and pay nothing; pods that run nowhere are
``pending``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kgpu.model.gpus import WHOLE, classify, is_gpu
from kgpu.model.nvidia import LABEL_COUNT, LABEL_PRODUCT
from kgpu.model.objects import CPU, MEMORY, Node, Pod
from kgpu.model.sharing import config_for, configs

if TYPE_CHECKING:
    from kgpu.model.profile import Profile

MICRO = 1_000_000  # figures are apportioned in micro-dollars
DRA_DRIVER = "gpu.nvidia.com"
TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU_NAME_LABEL = "karpenter.k8s.aws/instance-gpu-name"
GPU_LABEL_PREFIXES = ("nvidia.com/", "karpenter.k8s.aws/instance-gpu")  # what a GPU split reads of the labels

Workload = tuple[str, str, str]  # (namespace, kind, name)
PriceOf = Callable[[Node], "float | None"]


def workload_of(pod: Pod, owned: Mapping[tuple[str, str, str], tuple[str, str, str]]) -> Workload:
    """The workload ``pod`` belongs to (module docstring), as (namespace, kind, name)."""
    ns, kind, name = pod.namespace, pod.owner_kind, pod.owner_name
    if not kind:
        return ns, "Pod", pod.name
    parent = owned.get((kind, ns, name))
    if kind == "ReplicaSet":
        if parent is not None and parent[0] == "Deployment":
            return ns, "Deployment", parent[1]
        hash_ = pod.labels.get("pod-template-hash", "")
        if hash_ and name.endswith(f"-{hash_}"):
            return ns, "Deployment", name[: -len(hash_) - 1]
    elif kind == "Job" and parent is not None and parent[0] == "CronJob":
        return ns, "CronJob", parent[1]
    return ns, kind, name


@dataclass(slots=True)
class Share:
    """One workload's (or namespace's) figures, in micro-dollars per hour."""

    pods: int = 0
    pending: int = 0
    unpriced_pods: int = 0
    nodes: set[str] = field(default_factory=set)
    gpus: Fraction = Fraction(0)  # physical GPUs' worth of what its pods hold on GPU nodes
    new: int = 0  # micro-dollars per hour on nodes the simulation created
    existing: int = 0  # ... on nodes that were there

    @property
    def total(self) -> int:
        return self.new + self.existing

    def add(self, other: Share) -> None:
        self.pods += other.pods
        self.pending += other.pending
        self.unpriced_pods += other.unpriced_pods
        self.nodes |= other.nodes
        self.gpus += other.gpus
        self.new += other.new
        self.existing += other.existing


@dataclass(slots=True)
class WorkloadCost:
    """The split of every priced node: per workload, the idle rest, and the nodes' totals (micro-dollars)."""

    workloads: dict[Workload, Share] = field(default_factory=dict)
    idle_new: int = 0
    idle_existing: int = 0
    nodes_new: int = 0  # the priced new nodes' total
    nodes_existing: int = 0
    priced_nodes: int = 0
    unpriced_nodes: int = 0
    gpu_nodes: int = 0

    def namespaces(self) -> dict[str, tuple[int, Share]]:
        """Per namespace: (its workloads, their figures summed)."""
        out: dict[str, tuple[int, Share]] = {}
        for (ns, _, _), share in self.workloads.items():
            count, acc = out.get(ns, (0, Share()))
            acc.add(share)
            out[ns] = (count + 1, acc)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The JSON (``workload_cost`` of plan and simulate): dollars per hour to the micro-dollar, per month
        at 730 h; workloads and namespaces most expensive first."""
        workloads = [
            {"namespace": ns, "kind": kind, "name": name, **_figures(s)}
            for (ns, kind, name), s in sorted(self.workloads.items(), key=lambda kv: (-kv[1].total, kv[0]))
        ]
        namespaces = [
            {"namespace": ns, "workloads": n, **_figures(s)}
            for ns, (n, s) in sorted(self.namespaces().items(), key=lambda kv: (-kv[1][1].total, kv[0]))
        ]
        return {
            "split": "gpu-first",
            "workloads": workloads,
            "namespaces": namespaces,
            "idle": _money(self.idle_new, self.idle_existing),
            "nodes": {
                **_money(self.nodes_new, self.nodes_existing),
                "priced": self.priced_nodes,
                "unpriced": self.unpriced_nodes,
                "gpu": self.gpu_nodes,
            },
        }


def _dollars(micros: int) -> float:
    return round(micros / MICRO, 6)


def _money(new: int, existing: int) -> dict[str, Any]:
    from kgpu.catalog.prices import monthly

    total = _dollars(new + existing)
    return {
        "hourly": total,
        "monthly": monthly(total),
        "new_nodes_hourly": _dollars(new),
        "existing_nodes_hourly": _dollars(existing),
    }


def _figures(s: Share) -> dict[str, Any]:
    return {
        "pods": s.pods,
        "pending": s.pending,
        "unpriced_pods": s.unpriced_pods,
        "nodes": len(s.nodes),
        "gpus": round(float(s.gpus), 4),
        **_money(s.new, s.existing),
    }


@dataclass(frozen=True, slots=True)
class GpuSplit:
    """How a GPU node's price is divided: ``gpus`` physical GPUs, ``shares`` the share of one GPU a unit of
    each resource is, ``dra`` the share of the node one DRA device is (0: none published)."""

    gpus: Fraction
    shares: Mapping[str, Fraction]
    dra: Fraction = Fraction(0)


def _model_of(node: Node, catalog: Any) -> tuple[str, int]:
    """(GPU model, physical GPUs) from the node's instance type in the catalog, else its labels."""
    itype = node.labels.get(TYPE_LABEL)
    if catalog is not None and itype:
        from kgpu.errors import InputError

        try:
            t = catalog.get(itype)
        except InputError:  # a type the catalog does not know: the labels say
            t = None
        if t is not None and t.gpu_count:
            return t.gpu_display_name or t.gpu_name, t.gpu_count
    count = node.labels.get(LABEL_COUNT, "")
    model = node.labels.get(GPU_NAME_LABEL, "") or _mig_model(node.labels.get(LABEL_PRODUCT, ""))
    return model, int(count) if count.isdigit() else 0


def _mig_model(product: str) -> str:
    """The catalog's MIG GPU model for GFD's product (``NVIDIA-A100-SXM4-40GB``, ``...-MIG-1g.5gb``)."""
    from kgpu.catalog.mig import mig_gpus
    from kgpu.catalog.mig import product as gfd_product

    base = product.split("-MIG-", 1)[0].removesuffix("-SHARED")
    if not base:
        return ""
    return next((g for g in mig_gpus() if gfd_product(g) == base), "")


def _label_share(resource: str, labels: Mapping[str, str], model: str) -> Fraction | None:
    """A unit's share of a GPU read from GFD's labels; None for a MIG device of a model kgpu does not know."""
    kind, replicas, profile = classify(resource, labels)
    if kind == WHOLE:
        return Fraction(1)
    if not profile:
        return Fraction(1, max(replicas, 1))
    from kgpu.catalog.mig import memory_share

    try:
        used, per_gpu = memory_share(model, profile)
    except ValueError:
        return None
    return Fraction(used, per_gpu * max(replicas, 1))


def gpu_split(
    node: Node, catalog: Any = None, table: Mapping[str, Any] | None = None, dra_devices: int = 0
) -> GpuSplit | None:
    """The GPU split of ``node`` (module docstring), None when it is not a GPU node.

    ``table``: the profile's device-plugin configs (``kgpu.model.sharing.configs``); ``dra_devices``: the
    devices NVIDIA's DRA driver publishes for it."""
    model, count = _model_of(node, catalog)
    advertised = {r: n for r, n in node.allocatable.items() if is_gpu(r) and n > 0}
    if not advertised:
        if dra_devices:
            return GpuSplit(Fraction(max(count, 1)), {}, Fraction(1, dra_devices))
        return GpuSplit(Fraction(count), {}) if count else None
    cfg = config_for(table, node.labels) if table else None
    shares: dict[str, Fraction] = {}
    unknown: list[str] = []
    for r in advertised:
        share: Fraction | None = None
        if cfg is not None and (cfg.shared or cfg.mig_config) and model:
            try:
                share = cfg.unit_share(model, r)
            except ValueError:
                share = None
        if share is None:
            share = _label_share(r, node.labels, model)
        if share is None:
            unknown.append(r)
        else:
            shares[r] = share
    known = sum((advertised[r] * s for r, s in shares.items()), Fraction(0))
    if unknown:  # MIG slices of an unknown model: equal parts of what the known ones leave of the GPUs
        units = sum(advertised[r] for r in unknown)
        rest = Fraction(count) - known
        each = rest / units if rest > 0 else Fraction(1)
        shares.update(dict.fromkeys(unknown, each))
        known += each * units
    # never fewer GPUs than the advertised units stand for: pods plus idle stay the price
    return GpuSplit(max(Fraction(count), known), shares)


def split(
    states: Sequence[Any],
    new_nodes: Sequence[Any],
    price_of: PriceOf,
    *,
    owned: Mapping[tuple[str, str, str], tuple[str, str, str]] | None = None,
    profile: Profile | None = None,
    catalog: Any = None,
    pending: Sequence[Pod] = (),
    devices: Mapping[str, int] | None = None,
    dra_gpus: Mapping[str, Mapping[str, tuple[int, int]]] | None = None,
) -> WorkloadCost:
    """Every node of ``states`` (``NodeState``: node, pods) split among its pods' workloads and idle.

    ``new_nodes`` (``NewNode``) give the new nodes' prices, ``price_of`` the others' (None: no price);
    ``owned`` the controllers of the workloads read (``Objects.owned``); ``profile`` and ``catalog`` the
    device-plugin configs and the GPUs of instance types; ``pending`` the pods that run nowhere; ``devices``
    per pod key the DRA devices of NVIDIA's driver allocated to it, ``dra_gpus`` per node the DRA GPUs
    published (``SimulationResult.dra_gpus``)."""
    owned = owned or {}
    table = configs(profile) if profile is not None else None
    devices = devices or {}
    new = {n.name: n for n in new_nodes}
    out = WorkloadCost()
    owners: dict[tuple[str, str, str, str], Workload] = {}  # the same controller's pods: one look-up
    splits: dict[tuple[Any, ...], GpuSplit | None] = {}  # alike GPU nodes: one split

    def owner(pod: Pod) -> Workload:
        if not pod.owner_kind:
            return pod.namespace, "Pod", pod.name
        key = (pod.namespace, pod.owner_kind, pod.owner_name, pod.labels.get("pod-template-hash", ""))
        hit = owners.get(key)
        if hit is None:
            hit = owners[key] = workload_of(pod, owned)
        return hit

    for pod in pending:
        out.workloads.setdefault(owner(pod), Share()).pending += 1
    for st in states:
        node: Node = st.node
        made = new.get(node.name)
        price = made.hourly_price if made is not None else price_of(node)
        published = sum(t for _, t in (dra_gpus or {}).get(node.name, {}).values())
        alike = (
            node.labels.get(TYPE_LABEL, ""),
            published,
            tuple(sorted((k, v) for k, v in node.allocatable.items() if is_gpu(k))),
            tuple(sorted((k, v) for k, v in node.labels.items() if k.startswith(GPU_LABEL_PREFIXES))),
        )
        if alike not in splits:
            splits[alike] = gpu_split(node, catalog, table, published)
        gpu = splits[alike]
        if gpu is not None:
            out.gpu_nodes += 1
        dominant, alloc = ("", 0) if gpu is not None else _dominant(st)
        # per workload, in whole numbers: GPU units per resource and DRA devices, or the dominant resource
        units: dict[Workload, dict[str, int]] = {}
        for pod in st.pods:
            key = owner(pod)
            share = out.workloads.get(key)
            if share is None:
                share = out.workloads[key] = Share()
            share.pods += 1
            share.nodes.add(node.name)
            if price is None:
                share.unpriced_pods += 1
            mine = units.get(key)
            if mine is None:
                mine = units[key] = {}
            if gpu is not None:
                for r, n in pod.spec.requests:
                    if r in gpu.shares:
                        mine[r] = mine.get(r, 0) + n
                if gpu.dra and pod.key in devices:
                    mine[DRA_DRIVER] = mine.get(DRA_DRIVER, 0) + devices[pod.key]
            elif alloc:
                for r, n in pod.spec.requests:
                    if r == dominant:
                        mine[r] = mine.get(r, 0) + n
        # each workload's exact share of the node, and its GPUs' worth
        parts: dict[Workload, Fraction] = {}
        for key, mine in units.items():
            if not mine:
                continue
            if gpu is not None:
                held = sum((gpu.shares[r] * n for r, n in mine.items() if r != DRA_DRIVER), Fraction(0))
                held += gpu.dra * gpu.gpus * mine.get(DRA_DRIVER, 0)
                out.workloads[key].gpus += held
                parts[key] = held / gpu.gpus
            else:
                parts[key] = Fraction(mine[dominant], alloc)
        if price is None:
            out.unpriced_nodes += 1
            continue
        out.priced_nodes += 1
        micros = round(price * MICRO)
        amounts, idle = apportion(micros, parts)
        attr = "new" if made is not None else "existing"
        for key, amount in amounts.items():
            share = out.workloads[key]
            setattr(share, attr, getattr(share, attr) + amount)
        if made is not None:
            out.idle_new += idle
            out.nodes_new += micros
        else:
            out.idle_existing += idle
            out.nodes_existing += micros
    return out


def _dominant(st: Any) -> tuple[str, int]:
    """The node's dominant requested resource (CPU or memory, the larger fraction of allocatable; CPU on a
    tie) and its allocatable; ("", 0) when the node offers neither."""
    best, best_alloc, best_frac = "", 0, Fraction(-1)
    for name in (CPU, MEMORY):
        alloc = st.node.allocatable.get(name, 0)
        if alloc <= 0:
            continue
        frac = Fraction(st.requested.get(name, 0), alloc)
        if frac > best_frac:
            best, best_alloc, best_frac = name, alloc, frac
    return best, best_alloc


def apportion(total: int, parts: Mapping[Workload, Fraction]) -> tuple[dict[Workload, int], int]:
    """``total`` (integer micro-dollars) divided by the shares ``parts`` (fractions of the node, summing to at
    most 1; above 1 they are scaled to 1) by largest remainders; the second value is the idle rest. The
    amounts and the rest add up to ``total`` exactly; a share never gets more than one unit above its exact
    figure, and ties go to the workload named first."""
    if not parts:
        return {}, total
    values = list(parts.values())
    whole = values[0] if len(values) == 1 else sum(values, Fraction(0))
    if whole > 1:
        parts = {k: v / whole for k, v in parts.items()}
    floors: dict[Workload, int] = {}
    rests: dict[Workload, Fraction] = {}  # each exact figure less its floor, where not 0
    for k, v in parts.items():
        floors[k], rest = divmod(total * v.numerator, v.denominator)
        if rest:
            rests[k] = Fraction(rest, v.denominator)
    if not rests:  # every figure whole: the idle rest is whole too
        return floors, total - sum(floors.values())
    spread = sum(rests.values(), Fraction(0))
    left = -(-spread.numerator // spread.denominator)  # ceil: the units the remainders share with idle
    idle = total - sum(floors.values()) - left
    idle_rest = left - spread
    if left:
        candidates: list[tuple[Fraction, int, Workload | None]] = [(r, 0, k) for k, r in rests.items()]
        candidates.append((idle_rest, 1, None))
        order = sorted(candidates, key=lambda t: (-t[0], t[1], t[2] or ("", "", "")))
        for _, _, who in order[:left]:
            if who is None:
                idle += 1
            else:
                floors[who] += 1
    return floors, idle

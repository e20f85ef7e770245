"""The shared vocabulary of capacity that grows: what every provisioner (Karpenter, cluster-autoscaler, TKE
super nodes) and scale-to-zero read and write during one provisioning pass.

``Context`` (the scheduler, the profile, the DaemonSets, the new nodes so far), ``NewNode``, the labels the
provisioners put on nodes, pool taints, limits and zones, Karpenter's queue order, and the profile checks
that make sure every name a pool uses is known. The provisioners import this module; ``kgpu.sim.provisioners.provision``
chooses them and imports them all, so nothing imports back (``make lint`` checks it).

DaemonSet overhead on new nodes: the DaemonSets given to the provisioner (the input's), plus the ones the
profile deploys on GPU pools where the input has none of that name: the NVIDIA device plugin (not on
Bottlerocket NVIDIA images, which embed it) and the GPU exporter when monitoring is on. Their requests are
the fixed set below (documented in docs/simulate.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kgpu.catalog import Catalog, InstanceType, aws_catalog
from kgpu.errors import InputError
from kgpu.model.objects import (
    CPU,
    MEMORY,
    DaemonSet,
    Node,
    NodeSelector,
    Pod,
    PodSpecInfo,
    Requirement,
    Term,
    Toleration,
    resources,
)
from kgpu.model.objects import Taint as NodeTaint
from kgpu.model.profile import Pool, PoolKind, Profile, Provider
from kgpu.model.quantity import format_bytes, format_cpu, milli_value, parse_quantity, value
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler
from kgpu.sim.simulate import daemon_pods

MIB = 1024**2
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_EKSCTL_GROUP = "alpha.eksctl.io/nodegroup-name"
LABEL_EKSCTL_CLUSTER = "alpha.eksctl.io/cluster-name"
LABEL_EKS_GROUP = "eks.amazonaws.com/nodegroup"
LABEL_EKS_CAPACITY = "eks.amazonaws.com/capacityType"

# Fixed requests of the DaemonSets the profile deploys on GPU nodes (docs/simulate.md).
DEVICE_PLUGIN_REQUESTS = {CPU: 50, MEMORY: 100 * MIB}
EXPORTER_REQUESTS = {CPU: 100, MEMORY: 128 * MIB}


@dataclass(slots=True)
class NewNode:
    """A node the simulation created, and the workload pods it was created for."""

    name: str
    pool: str
    instance_type: str
    capacity_type: str
    zone: str
    hourly_price: float | None
    kind: str = "karpenter"
    on_demand_price: float | None = None
    gpus: int = 0
    pods: list[Pod] = field(default_factory=list)
    note: str = ""
    batch: int = 1  # Karpenter's provisioning batch that launched it (a later one: pods its first Solve left)

    def placement_fields(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "instance_type": self.instance_type,
            "capacity_type": self.capacity_type,
            "zone": self.zone,
        }

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "pool": self.pool,
            "instance_type": self.instance_type,
            "capacity_type": self.capacity_type,
            "zone": self.zone,
            "hourly_price": self.hourly_price,
            "pods": [p.key for p in self.pods],
        }
        if self.note:
            out["note"] = self.note
        return out


class PoolProvisioner(Protocol):
    """One autoscaler's share of the profile. ``provision`` fills ``outcome`` (pod key -> NewNode or
    explanation) for the pods it can help, and returns the explanations for those it cannot."""

    name: str

    def provision(self, pending: Sequence[Pod], ctx: Context) -> dict[str, str]: ...


@dataclass
class Context:
    """What the pool provisioners share during one provisioning pass."""

    scheduler: Scheduler
    profile: Profile
    catalog: Catalog | None
    daemonsets: list[DaemonSet]
    outcome: dict[str, Any] = field(default_factory=dict)
    new_nodes: list[NewNode] = field(default_factory=list)
    by_node: dict[str, NewNode] = field(default_factory=dict)
    launched: dict[str, int] = field(default_factory=dict)  # new nodes so far, by pool
    dra: Any = None  # kgpu.sim.scheduler.plugins.dynamicresources.DRA when the simulation allocates claims: new nodes of DRA pools publish slices
    dra_devices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # pod key -> devices allocated

    def node_name(self, base: str) -> str:
        """``<base>-<n>``: one more than the new nodes of pool ``base``, past names already taken."""
        n = self.launched.get(base, 0) + 1
        while f"{base}-{n}" in self.scheduler.by_name:
            n += 1
        return f"{base}-{n}"

    def launch(self, node: Node, new: NewNode) -> NodeState:
        """Add the node to the scheduler with the DaemonSet pods that would run on it. A node of a
        ``gpuAllocation: dra`` pool advertises no nvidia.com/gpu (the device plugin is not on it) and
        publishes the ResourceSlices NVIDIA's DRA driver would (kgpu.sim.provisioners.dra_nodes)."""
        pool = next((p for p in self.profile.pools if p.name == new.pool), None)
        if pool is not None and pool.gpu_allocation == "dra":
            from kgpu.sim.provisioners.dra_nodes import publish_node

            publish_node(self, node, pool, new.instance_type)
        st = self.scheduler.add_node(node)
        for ds in self.daemonsets:
            for pod in daemon_pods(ds, [node]):
                self.scheduler.bind(pod, st)
        self.new_nodes.append(new)
        self.by_node[node.name] = new
        self.launched[new.pool] = self.launched.get(new.pool, 0) + 1
        return st

    def overhead(self, node: Node) -> dict[str, int]:
        """Requests of the daemon pods that would run on ``node`` (pods counted under ``pods``)."""
        total: dict[str, int] = {}
        for ds in self.daemonsets:
            for pod in daemon_pods(ds, [node]):
                for k, v in pod.spec.requests:
                    total[k] = total.get(k, 0) + v
                total["pods"] = total.get("pods", 0) + 1
        return total

    def placed(self, pod: Pod, st: NodeState) -> None:
        new = self.by_node.get(st.name)
        if new is not None:
            new.pods.append(pod)
            self.outcome[pod.key] = new

    def place_existing(self, run: list[Pod]) -> list[Pod]:
        """Place a run of identical pods on nodes that exist (or this pass created) until one does not
        fit; return the pods still waiting. Identical pods that failed once fail again, so stop there."""
        for n, pod in enumerate(run):
            decision = self.scheduler.place(pod)
            if decision.node is None:
                return run[n:]
            self.placed(pod, decision.node)
        return []


def format_resources(requests: Mapping[str, int]) -> str:
    """Karpenter's resources.String: a JSON object of quantities, e.g. {"cpu":"210m","pods":"5"}."""
    out: dict[str, str] = {}
    for k in sorted(requests):
        v = requests[k]
        if not v:
            continue
        out[k] = (
            format_cpu(v) if k == CPU else format_bytes(v) if k in (MEMORY, "ephemeral-storage") else str(v)
        )
    return json.dumps(out, separators=(",", ":"))


def node_taints(pool: Pool) -> tuple[NodeTaint, ...]:
    return tuple(NodeTaint(t.key, t.value, str(t.effect)) for t in pool.taints)


def pool_zones(profile: Profile, pool: Pool) -> list[str]:
    return list(pool.zones or profile.cluster.zones)


def zone_suffix(zone: str) -> str:
    """``us-west-2a`` -> ``a``; ``ap-guangzhou-3`` -> ``3`` (as eksctl group names use it)."""
    head = zone.rstrip("abcdefghijklmnopqrstuvwxyz")
    return zone[len(head) :] or zone.rsplit("-", 1)[-1]


def pool_limits(pool: Pool) -> dict[str, int]:
    """Karpenter limits as integers (cpu in millicores), by resource; field path in errors."""
    out: dict[str, int] = {}
    for key, raw in pool.limits.items():
        q = parse_quantity(raw, where=f"pools[{pool.name}].limits.{key}")
        out[key] = milli_value(q) if key == CPU else value(q)
    return out


def _gpu_selector(profile: Profile, pools: Iterable[Pool]) -> NodeSelector | None:
    """Node affinity that matches nodes of the given pools, by the label their provisioner sets."""
    karpenter = sorted(p.name for p in pools if p.kind == PoolKind.KARPENTER)
    groups: list[str] = []
    for p in pools:
        if p.kind == PoolKind.NODE_GROUP:
            groups.extend(group_names(profile, p))
    terms = []
    if karpenter:
        terms.append(Term((Requirement(LABEL_NODEPOOL, "In", tuple(karpenter)),)))
    if groups:
        terms.append(Term((Requirement(LABEL_EKSCTL_GROUP, "In", tuple(sorted(groups))),)))
        terms.append(Term((Requirement(LABEL_EKS_GROUP, "In", tuple(sorted(groups))),)))
    return NodeSelector(tuple(terms)) if terms else None


def group_names(profile: Profile, pool: Pool) -> list[str]:
    if pool.kind != PoolKind.NODE_GROUP or not pool.per_zone:
        return [pool.name]
    return [f"{pool.name}-{zone_suffix(z)}" for z in pool_zones(profile, pool)]


def _fixed_daemonset(
    namespace: str, name: str, requests: Mapping[str, int], selector: NodeSelector
) -> DaemonSet:
    spec = PodSpecInfo(
        requests=resources(requests),
        nonzero_cpu=requests.get(CPU, 0),
        nonzero_memory=requests.get(MEMORY, 0),
        affinity=selector,
        tolerations=(Toleration("", "Exists"),),
    )
    return DaemonSet(namespace, name, spec, {"app.kubernetes.io/managed-by": "kgpu"}, source="<profile>")


def profile_daemonsets(profile: Profile, given: Sequence[DaemonSet] = ()) -> list[DaemonSet]:
    """The device plugin and GPU exporter DaemonSets the profile deploys on its GPU node pools."""
    names = " ".join(ds.name for ds in given)
    gpu = [p for p in profile.gpu_pools if p.kind in (PoolKind.KARPENTER, PoolKind.NODE_GROUP)]
    out: list[DaemonSet] = []
    plugin_pools = [
        p
        for p in gpu
        if (p.device_plugin == "daemonset" or (p.device_plugin == "auto" and not p.device_plugin_builtin))
        and p.gpu_allocation != "dra"
    ]
    selector = _gpu_selector(profile, plugin_pools)
    if selector is not None and "device-plugin" not in names:
        out.append(
            _fixed_daemonset(
                "kube-system", "nvidia-device-plugin-daemonset", DEVICE_PLUGIN_REQUESTS, selector
            )
        )
    selector = _gpu_selector(profile, gpu)
    if profile.monitoring.enabled and selector is not None and "exporter" not in names:
        out.append(
            _fixed_daemonset(profile.monitoring.namespace, "kgpu-exporter", EXPORTER_REQUESTS, selector)
        )
    return out


def catalog_for(profile: Profile) -> Catalog | None:
    """The instance catalog of the profile's cloud; None where there is none (TKE, on-prem). The profile's
    ``catalog.instanceTypes`` rows (the CLI has added its ``catalog.file`` and ``--catalog`` rows) are
    merged in: a type outside the catalog (seed 001's t3.micro) is then known to render, plan and
    simulate alike. Bad rows raise InputError naming the row and column."""
    if profile.provider != Provider.EKS:
        return None
    rows = profile.catalog.instance_types
    if not rows:
        return aws_catalog(profile.cluster.region)
    return _catalog_with(profile.cluster.region, json.dumps(rows, sort_keys=True))


_OVERRIDDEN: dict[tuple[str, str], Catalog] = {}


def _catalog_with(region: str, rows: str) -> Catalog:
    """One merged catalog per (region, rows): plan and render ask for it per pool and per pod."""
    key = (region, rows)
    found = _OVERRIDDEN.get(key)
    if found is None:
        if len(_OVERRIDDEN) > 16:
            _OVERRIDDEN.clear()
        found = _OVERRIDDEN[key] = aws_catalog(region, json.loads(rows))
    return found


def _known(catalog: Catalog, name: str) -> bool:
    try:
        catalog.get(name)
    except InputError:
        return False
    return True


def first_known_type(catalog: Catalog, pool: Pool) -> str:
    """The instance type a node group is sized by: its first one the catalog knows."""
    return next((t for t in pool.instance_types if _known(catalog, t)), pool.instance_types[0])


def validate(profile: Profile, catalog: Catalog | None) -> list[str]:
    """Names the catalog must know: GPU names and instance types of pools, TKE GPU types.

    Unknown names are InputErrors with the field path and the closest names; a node group's unknown
    instance type is only a warning while it has a known one (the group is sized by that).
    """
    warnings: list[str] = []
    for i, pool in enumerate(profile.pools):
        if catalog is not None and pool.kind in (PoolKind.KARPENTER, PoolKind.NODE_GROUP):
            req = pool.shorthand
            known = catalog.gpu_names()
            for j, name in enumerate(req.gpu_names if req else []):
                if name.lower() not in known:
                    close = catalog.closest_gpu_names(name)
                    hint = (
                        f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(known))}"
                    )
                    raise InputError(
                        f"unknown GPU {name!r}", where=f"pools[{i}].requirements.gpuNames[{j}]", hint=hint
                    )
            known_types = [t for t in pool.instance_types if _known(catalog, t)]
            for j, name in enumerate(pool.instance_types):
                if name in known_types:
                    continue
                try:
                    catalog.get(name)
                except InputError as exc:
                    if pool.kind == PoolKind.KARPENTER or not known_types:
                        raise exc.within(f"pools[{i}].instanceTypes[{j}]") from None
                    where = "" if "is not supported" in exc.message else " in the catalog"
                    warnings.append(
                        f"pools[{i}].instanceTypes[{j}]: {exc.message}{where} ({exc.hint}); "
                        f"node group {pool.name} is sized by {known_types[0]}"
                    )
            if pool.kind == PoolKind.NODE_GROUP and len(known_types) > 1 and str(profile.autoscaler) == "cluster-autoscaler":
                warnings += _mixed_sizes(i, pool, [catalog.get(t) for t in known_types])
        if pool.kind == PoolKind.KARPENTER:
            from kgpu.model.nodepool import CATALOG_MISSING_LABELS, normalize

            for r in pool.karpenter_requirements():
                key = normalize(str(r["key"]))
                if key in CATALOG_MISSING_LABELS:
                    warnings.append(
                        f"pools[{i}] ({pool.name}): requirement {key} {r['operator']} is not applied: the instance "
                        "catalog has no values for that label"
                    )
        if pool.kind == PoolKind.TKE_SUPERNODE:
            from kgpu.catalog.tke import TkeMatchError, tke_gpu_type

            for j, name in enumerate(pool.gpu_types):
                try:
                    tke_gpu_type(name)
                except (InputError, TkeMatchError) as exc:
                    text = exc.line() if isinstance(exc, InputError) else exc.message
                    raise InputError(text, where=f"pools[{i}].gpuTypes[{j}]") from None
        if pool.sharing is not None:  # MIG configs and profiles against the pool's GPUs
            from kgpu.sim.sharing import check_pool

            check_pool(i, pool, catalog)
        try:
            pool_limits(pool)
        except InputError as exc:
            raise InputError(exc.message, where=f"pools[{i}].limits", hint=exc.hint) from None
    return warnings


def catalog_coverage(profile: Profile, catalog: Catalog | None) -> list[str]:
    """What a plan's launches leave out: per Karpenter pool of an EKS profile, the EC2 types its
    requirements reach that the priced catalog has no offering of in the region. Karpenter may launch
    those (where AWS offers them in the region); kgpu chooses among the rest. A plan's warning, not a
    rendering problem."""
    if catalog is None or profile.provider != Provider.EKS:
        return []
    out: list[str] = []
    for i, pool in enumerate(profile.pools):
        if pool.kind == PoolKind.KARPENTER:
            out += _uncatalogued(i, pool, catalog, profile.cluster.region)
    return out


def _uncatalogued(i: int, pool: Pool, catalog: Catalog, region: str) -> list[str]:
    from kgpu.sim.provisioners.karpenter.requirements import pool_requirements, uncatalogued

    have = {t.name for t in catalog.types() if catalog.offerings(t.name, region)}
    missing = uncatalogued(pool_requirements(pool), have)
    if not missing:
        return []
    gpus = [n for n in missing if n.split(".", 1)[0][:1] in ("g", "p")]
    shown = ", ".join((gpus + [n for n in missing if n not in gpus])[:6])
    return [
        f"pools[{i}] ({pool.name}): its requirements also allow {len(missing)} instance type(s) the catalog has "
        f"no {region} price for ({shown}{', ...' if len(missing) > 6 else ''}): Karpenter may launch them where "
        f"AWS offers them, kgpu only chooses among the {len(have)} it prices; add rows for them with "
        "`--catalog FILE` to plan with them"
    ]


def _mixed_sizes(i: int, pool: Pool, types: Sequence[InstanceType]) -> list[str]:
    """A node group's instance types of different sizes (seed 001's spot-ng: m4.2xlarge with m4.4xlarge):
    cluster-autoscaler builds the group's node template from one type (its first) and sizes every node by it."""
    first = types[0]

    def size(t: InstanceType) -> str:
        return f"{t.name} {t.vcpus} vCPU {t.memory_mib / 1024:g} GiB" + (f" {t.gpu_count} GPU" if t.gpu_count else "")

    other = [t for t in types[1:] if (t.vcpus, t.memory_mib, t.gpu_count) != (first.vcpus, first.memory_mib, first.gpu_count)]
    if not other:
        return []
    return [
        f"pools[{i}].instanceTypes: node group {pool.name} mixes sizes ({size(first)}; "
        + "; ".join(size(t) for t in other)
        + f"): cluster-autoscaler sizes every node of the group by its first type, {first.name}: a pod bigger than "
        f"{first.name} never scales it up, and bigger nodes are counted as {first.name}; keep one size per group"
    ]


def karpenter_order(pending: Sequence[Pod]) -> list[Pod]:
    """Karpenter's queue: CPU then memory requests, descending, then creation time and UID, for which
    kgpu takes the input order of each workload's first pod (its controller, else its labels), keeping a
    workload's pods together: two Deployments with the same requests keep their own places in the queue."""
    first: dict[tuple[object, ...], int] = {}
    keys: list[tuple[int, int, int]] = []
    for i, pod in enumerate(pending):
        owner = pod.owner_uid or pod.owner_name
        group = (pod.spec, owner) if owner else (pod.spec, "", *sorted(pod.labels.items()))
        at = first.setdefault(group, i)
        keys.append((-pod.spec.request(CPU), -pod.spec.request(MEMORY), at))
    order = sorted(range(len(pending)), key=keys.__getitem__)
    return [pending[i] for i in order]


def runs(pods: Sequence[Pod]) -> list[list[Pod]]:
    """Consecutive pods with the same spec and annotations (TKE reads annotations)."""
    out: list[list[Pod]] = []
    for pod in pods:
        if (out and out[-1][0].spec is pod.spec and out[-1][0].annotations == pod.annotations) or (
            out and out[-1][0].spec == pod.spec and out[-1][0].annotations == pod.annotations
        ):
            out[-1].append(pod)
        else:
            out.append([pod])
    return out

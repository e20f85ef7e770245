"""Shared GPUs in the simulation: node capacity from the sharing config, the admission failure, the cost split.

Three views of one node (``kgpu.model.sharing`` has the device plugin's rules):

- the node itself: its allocatable holds what the plugin advertises (``nvidia.com/gpu: N x R``,
  ``nvidia.com/gpu.shared``, ``nvidia.com/mig-<profile>``), and GFD's labels; kube-scheduler places against
  that. New nodes of a shared pool get it here; existing nodes keep the allocatable their kubelet reports, as
  kube-scheduler does even where ``nvidia.com/mig.config.state`` is not ``success``: a pod it binds there
  carries the ``mig-repartition`` warning (the kubelet refuses it while the MIG manager has the plugin paused).
- Karpenter: the instance type's physical GPUs, unless a NodeOverlay matches (kgpu renders one for each
  shared Karpenter pool unless ``sharing.nodeOverlay: false``); then the overlay's capacity merged over the
  type's (``cloudprovider.InstanceType.ApplyCapacityOverlay``).
- cluster-autoscaler from zero: the type's GPUs and the ``node-template/resources/<name>`` ASG tags
  (``kgpu.sim.provisioners.cluster_autoscaler.template_from_tags``), which kgpu renders for shared node groups.

A pod asking more than one shared device of a config with ``failRequestsGreaterThanOne`` binds and then
fails at the kubelet: it keeps its placement and carries the ``shared-gpu-admission`` warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kgpu.catalog.instance import InstanceType
from kgpu.catalog.mig import mig_gpus
from kgpu.errors import InputError
from kgpu.model.gpus import SHARED, NodeGpus, closest_offered, node_gpus
from kgpu.model.nvidia import GPU, LABEL_MIG_STATE, LABEL_PLUGIN_CONFIG, MIG_PREFIX, SHARED_SUFFIX
from kgpu.model.objects import Node
from kgpu.model.sharing import (
    DeviceConfig,
    apply,
    config_for,
    configs,
    default_config,
    is_gpu_resource,
    mig_resource,
    pool_config,
    without_gpus,
)
from kgpu.sim.unmodelled import Unmodelled

if TYPE_CHECKING:  # the profile's models are pydantic's: imported where a profile is read, not here
    from kgpu.model.profile import Pool, Profile

ADMISSION = "shared-gpu-admission"
REPARTITION = "mig-repartition"
MIG_READY = "success"


def new_node(pool: Pool, itype: InstanceType, allocatable: Mapping[str, int], labels: Mapping[str, str]
             ) -> tuple[dict[str, int], dict[str, str]]:
    """The allocatable and labels a new node of ``pool`` has once the plugin and GFD run on it."""
    if not itype.gpu_count or itype.gpu_resource != GPU:
        return dict(allocatable), dict(labels)
    return pool_node(pool, itype.gpu_display_name or itype.gpu_name, itype.gpu_count, allocatable, labels)


def pool_node(pool: Pool, gpu: str, gpus: int, allocatable: Mapping[str, int], labels: Mapping[str, str]
              ) -> tuple[dict[str, int], dict[str, str]]:
    """``new_node`` for a node of ``gpus`` GPUs named ``gpu`` (static nodes give them in the profile)."""
    cfg = pool_config(pool)
    if cfg is None or not gpus:
        return dict(allocatable), dict(labels)
    try:
        alloc = apply(allocatable, cfg, gpu, gpus)
        gfd = cfg.gfd_labels(gpu, gpus)
    except ValueError:  # the MIG config does not fit this GPU: mig-parted fails, no GPUs
        return without_gpus(allocatable), {**labels, LABEL_MIG_STATE: "failed"}
    out = {**labels, **gfd}
    if cfg.mig_config is not None:
        out[LABEL_MIG_STATE] = MIG_READY
    return alloc, out


def karpenter_view(pool: Pool, itype: InstanceType, allocatable: dict[str, int]) -> dict[str, int]:
    """What Karpenter believes a node of ``itype`` in ``pool`` holds: the type's, with the NodeOverlay's
    capacity merged over it when the pool has one."""
    if pool.sharing is None or not pool.sharing.node_overlay or not itype.gpu_count:
        return allocatable
    overlay = overlay_capacity(pool, itype)
    return {**allocatable, **overlay} if overlay else allocatable


def overlay_capacity(pool: Pool, itype: InstanceType) -> dict[str, int]:
    """The NodeOverlay capacity for ``itype`` in ``pool`` ({} when nothing changes)."""
    cfg = pool_config(pool)
    if cfg is None or not itype.gpu_count:
        return {}
    try:
        shared = cfg.advertised(itype.gpu_display_name or itype.gpu_name, itype.gpu_count)
    except ValueError:
        return {}
    if shared == {itype.gpu_resource: itype.gpu_count}:
        return {}
    # the physical resource a MIG or renamed config takes away is 0, so Karpenter stops counting it
    out = dict(shared)
    if itype.gpu_resource not in out:
        out[itype.gpu_resource] = 0
    return out


def pool_types(pool: Pool, catalog: Any) -> list[InstanceType]:
    """The GPU instance types a Karpenter or node-group pool may launch: its instance types, or the catalog
    types its requirements allow."""
    if catalog is None or pool.kind == "static":
        return []
    from kgpu.sim.provisioners.karpenter.requirements import matches, pool_requirements, well_known

    types: list[InstanceType] = []
    if pool.instance_types:
        for name in pool.instance_types:
            try:
                types.append(catalog.get(name))
            except InputError:
                continue
    else:
        skip = ("topology.kubernetes.io/zone", "karpenter.sh/capacity-type")
        reqs = [r for r in well_known(pool_requirements(pool)) if r.key not in skip]
        region = catalog.region if isinstance(getattr(catalog, "region", None), str) else "us-west-2"
        for t in catalog.types():
            if t.gpu_count and all(matches(r, t.labels(region, "", "on-demand")) for r in reqs):
                types.append(t)
    return [t for t in types if t.gpu_count]


def pool_gpus(pool: Pool, catalog: Any) -> list[tuple[str, str]]:
    """(GPU model, where it comes from) for every GPU the pool's nodes may have: its types' (the first type
    of each GPU model) or its static nodes' ``gpuName``."""
    if pool.kind == "static":
        return sorted({(n.gpu_name, f"node {n.name}") for n in pool.nodes if n.gpus and n.gpu_name})
    seen: dict[str, str] = {}
    for t in pool_types(pool, catalog):
        seen.setdefault(t.gpu_display_name or t.gpu_name, t.name)
    return sorted(seen.items())


def check_pool(index: int, pool: Pool, catalog: Any) -> None:
    """A MIG config or profile the pool's GPUs do not have is an InputError naming both."""
    s = pool.sharing
    if s is None or s.mig is None:
        return
    cfg = pool_config(pool)
    assert cfg is not None
    if pool.kind == "static" and s.mig.config != "all-disabled":
        for j, n in enumerate(pool.nodes):
            if n.gpus and not n.gpu_name:  # else the layout is unknown and the node silently has no GPUs
                raise InputError(
                    f"node {n.name}: MIG config {s.mig.config} needs the node's GPU model "
                    f"(one of {', '.join(mig_gpus())})",
                    where=f"pools[{index}].nodes[{j}].gpuName",
                )
    mixed = s.mig.strategy == "mixed"
    for gpu, where in pool_gpus(pool, catalog):
        try:
            layout = cfg.mig_devices(gpu) if s.mig.config != "all-disabled" else {}
        except ValueError as exc:
            raise InputError(f"{exc} ({where})", where=f"pools[{index}].sharing.mig.config") from None
        replicated = s.time_slicing or s.mps
        for j, r in enumerate(replicated.resources if replicated and mixed else []):
            if r.name.startswith(MIG_PREFIX) and r.name not in {mig_resource(p) for p in layout}:
                field = "timeSlicing" if s.time_slicing else "mps"
                raise InputError(
                    f"{r.name} is not a MIG device of config {s.mig.config} on {gpu} ({where}); it makes "
                    + (", ".join(mig_resource(p) for p in layout) or "none"),
                    where=f"pools[{index}].sharing.{field}.resources[{j}].name",
                )


def overlay_groups(pool: Pool, catalog: Any) -> list[tuple[dict[str, int], list[str]]]:
    """The pool's GPU instance types grouped by the NodeOverlay capacity they need, for ``kgpu render``."""
    if pool.sharing is None:
        return []
    groups: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for t in pool_types(pool, catalog):
        cap = overlay_capacity(pool, t)
        if cap:
            groups.setdefault(tuple(sorted(cap.items())), []).append(t.name)
    return [(dict(k), sorted(v)) for k, v in sorted(groups.items(), key=lambda kv: sorted(kv[1]))]


RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resources/"


def resource_tags(pool: Pool, itype: InstanceType) -> dict[str, str]:
    """The cluster-autoscaler ``node-template/resources/<name>`` ASG tags that make a shared node group's
    template from zero hold what its nodes will advertise (kgpu renders them; ``asgTags`` may override)."""
    return {RESOURCE_TAG + k: str(v) for k, v in sorted(overlay_capacity(pool, itype).items())}


def existing_node_warnings(placements: Sequence[Any], nodes: Mapping[str, Node], existing: set[str]) -> list[str]:
    """Warnings for pods kube-scheduler binds to existing nodes that the kubelet will refuse, read from the
    node's own labels (``kgpu.model.gpus``): a node whose MIG config the MIG manager is still applying (or failed
    to apply), where the device plugin is stopped, and an MPS node (``failRequestsGreaterThanOne`` is MPS's
    default) for a container asking more than one replica. kube-scheduler places by the node's allocatable
    alone, and so does kgpu; the pod keeps its placement and carries the warning."""
    flagged: dict[str, NodeGpus] = {}
    for name in existing:
        node = nodes.get(name)
        if node is None:
            continue
        gpus = node_gpus(node.labels, node.allocatable)
        if gpus.repartitioning or gpus.mig_failed or (gpus.sharing == "mps" and SHARED in gpus.kinds):
            flagged[name] = gpus
    if not flagged:
        return []
    lines: list[str] = []
    for p in placements:
        inv = flagged.get(p.node) if p.phase == "Scheduled" else None
        if inv is None or any(w.code == ADMISSION for w in p.warnings):
            continue
        gpu = {k: v for k, v in p.pod.spec.requests if is_gpu_resource(k)}
        if not gpu:
            continue
        if inv.repartitioning or inv.mig_failed:
            code = REPARTITION
            error = (f"node {p.node}'s MIG config {inv.mig_config or '?'} is {inv.mig_state or 'being applied'} "
                     + ("(the MIG manager failed to apply it)" if inv.mig_failed else
                        "(the MIG manager is repartitioning, the device plugin paused)")
                     + ": kube-scheduler binds by the node's allocatable, and the kubelet rejects the pod "
                     "(UnexpectedAdmissionError) while the plugin has no such devices")
        else:
            code = ADMISSION
            cfg = DeviceConfig(name=nodes[p.node].labels.get(LABEL_PLUGIN_CONFIG, "default"), strategy="mps",
                               replicas={r.name.removesuffix(SHARED_SUFFIX): r.replicas for r in inv.resources
                                         if r.kind == SHARED},
                               rename=any(r.name.endswith(SHARED_SUFFIX) for r in inv.resources), fail_gt_one=True)
            found = cfg.admission_error(gpu)
            if found is None:
                continue
            error = found + " (MPS's default; the node's config is not in the input)"
        p.warnings = (*p.warnings, Unmodelled(code, error))
        lines.append(f"{p.pod.key} on {p.node}: {error}")
    return lines


def cluster_hints(placements: Sequence[Any], nodes: Sequence[Node]) -> list[str]:
    """Unschedulable pods asking a GPU resource no existing node offers: what the nodes offer, and the one
    the pod most likely means (``kgpu.model.gpus.closest_offered``)."""
    first: dict[str, str] = {}  # each GPU resource unschedulable pods ask -> the first pod asking it
    for p in placements:
        if p.phase == "Unschedulable":
            for name, _ in p.pod.spec.requests:
                if is_gpu_resource(name):
                    first.setdefault(name, p.pod.key)
    if not first:
        return []
    offered: set[str] = set()
    for n in nodes:
        offered.update(node_gpus(n.labels, n.allocatable).names())
    shown = ", ".join(sorted(offered)) or "no GPU resource"
    out = []
    for name, pod in first.items():
        if name not in offered:
            hint = closest_offered(name, offered)
            out.append(f"{pod} asks {name}, which no node offers (they offer {shown})"
                       + (f": did you mean {hint}?" if hint else ""))
    return out


def shared_profile(profile: Profile) -> bool:
    """Whether any of the profile's configs shares or partitions GPUs."""
    return any(p.sharing for p in profile.pools) or profile.device_plugin.strategy != "none"


def admission_warnings(placements: Sequence[Any], nodes: Mapping[str, Node], profile: Profile | None) -> list[str]:
    """Add the ``shared-gpu-admission`` warning to placed pods the device plugin will refuse; the lines for
    the result's warnings."""
    if profile is None or not shared_profile(profile):
        return []
    cache: dict[str, DeviceConfig | None] = {}
    table = configs(profile)
    lines: list[str] = []
    for p in placements:
        if p.node is None or p.phase not in ("Scheduled", "Provisioned"):
            continue
        gpu = {k: v for k, v in p.pod.spec.requests if is_gpu_resource(k)}
        if not gpu or max(gpu.values()) < 2:
            continue
        node = nodes.get(p.node)
        if node is None:
            continue
        if p.node not in cache:
            cache[p.node] = config_for(table, node.labels)
        cfg = cache[p.node]
        error = cfg.admission_error(gpu) if cfg else None
        if error is None:
            continue
        p.warnings = (*p.warnings, Unmodelled(ADMISSION, error))
        lines.append(f"{p.pod.key} on {p.node}: {error}")
    return lines


def gpu_cost_split(
    node_price: float, gpus: int, pods: Sequence[tuple[str, Mapping[str, int]]], shares: Mapping[str, Fraction]
) -> tuple[dict[str, Fraction], Fraction]:
    """Each pod's share of a node's GPU cost and the idle rest: the node's price is its GPUs' (a GPU node is
    bought for them), a GPU costs ``price / gpus``, a pod pays ``units x unit share`` of a GPU per resource.
    Exact: the pods' costs plus idle equal the price. Each distinct request is priced once (a float price is a
    fraction of large terms) and the idle rest comes from the summed shares (small fractions)."""
    price = Fraction(node_price)
    if gpus <= 0:
        return {}, price
    zero = Fraction(0)
    share_of: dict[tuple[tuple[str, int], ...], Fraction] = {}  # per distinct requests
    cost_of: dict[tuple[tuple[str, int], ...], Fraction] = {}
    count: dict[tuple[tuple[str, int], ...], int] = {}
    out: dict[str, Fraction] = {}
    for key, requests in pods:
        kind = tuple(requests.items())
        cost = cost_of.get(kind)
        if cost is None:
            share = share_of[kind] = sum((shares.get(r, zero) * n for r, n in kind), zero)
            cost = cost_of[kind] = price * share / gpus
        count[kind] = count.get(kind, 0) + 1
        out[key] = out[key] + cost if key in out else cost
    total = sum((share_of[k] * n for k, n in count.items()), zero)
    return out, price - price * total / gpus


def resource_hints(placements: Sequence[Any], profile: Profile, catalog: Any) -> list[str]:
    """Pods that cannot run because they ask a GPU resource no config advertises under that name: the old
    name of a renamed one, a MIG profile no pool's mig-parted config makes (a typo, or the wrong GPU), a
    MIG profile's resource where the ``single`` strategy advertises it as ``nvidia.com/gpu``, or
    ``nvidia.com/gpu`` where the ``mixed`` strategy advertises only ``nvidia.com/mig-<profile>``."""
    from difflib import get_close_matches

    made: set[str] = set()
    renamed: list[str] = []
    single: dict[str, list[str]] = {}  # nvidia.com/mig-<profile> -> pools whose single strategy makes it
    mixed: list[str] = []
    for pool in profile.pools:
        cfg = pool_config(pool)
        if cfg is None:
            if pool.is_gpu:
                made.add(GPU)
            continue
        for gpu in _pool_gpu_names(pool, catalog):
            try:
                made.update(cfg.advertised(gpu, 1))
                layout = cfg.mig_devices(gpu)
            except ValueError:
                continue
            if cfg.mig_strategy == "single":
                for p in layout:
                    single.setdefault(mig_resource(p), []).append(pool.name)
            elif layout and pool.name not in mixed:
                mixed.append(pool.name)
        if cfg.rename:
            renamed.append(pool.name)
    default = default_config(profile)
    if default is not None and not default.rename:
        made.add(GPU)
    out: list[str] = []
    seen: set[str] = set()
    for p in placements:
        if p.phase != "Unschedulable":
            continue
        for name, _ in p.pod.spec.requests:
            if (not is_gpu_resource(name) and not name.startswith(GPU + ".")) or name in made or name in seen:
                continue
            if name == GPU and renamed:
                seen.add(name)
                out.append(
                    f"{p.pod.key} asks {GPU}, but pool(s) {', '.join(renamed)} advertise {GPU}{SHARED_SUFFIX} "
                    "(renameByDefault): ask for that, or drop renameByDefault"
                )
            elif name == GPU and mixed:
                seen.add(name)
                out.append(
                    f"{p.pod.key} asks {GPU}, but pool(s) {', '.join(mixed)} use the mixed MIG strategy and "
                    f"advertise {MIG_PREFIX}<profile> only: ask for one of "
                    + ", ".join(sorted(r for r in made if r.startswith(MIG_PREFIX)))
                )
            elif name in single:
                seen.add(name)
                pools = sorted(set(single[name]))
                out.append(
                    f"{p.pod.key} asks {name}, but pool(s) {', '.join(pools)} use the single MIG strategy, "
                    f"which advertises every MIG device as {GPU}: ask for {GPU}, or use the mixed strategy"
                )
            elif name.startswith(MIG_PREFIX):
                seen.add(name)
                close = get_close_matches(name, sorted(r for r in made if r.startswith(MIG_PREFIX)), n=2)
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                out.append(f"{p.pod.key} asks {name}: no pool's MIG config makes it{hint}")
    return out


def _pool_gpu_names(pool: Pool, catalog: Any) -> list[str]:
    """GPU models of a pool's nodes, for what its config advertises (catalog types, else static nodes)."""
    return [gpu for gpu, _ in pool_gpus(pool, catalog)]


def overlay_warnings(profile: Profile, new_nodes: Sequence[Any]) -> list[str]:
    """Shared Karpenter pools without a NodeOverlay that launched nodes: Karpenter sized them by physical
    GPUs, so it launched more nodes than the pods need (kubernetes-sigs/karpenter#729)."""
    out: list[str] = []
    for pool in profile.pools:
        if pool.sharing is None or pool.sharing.node_overlay or pool.kind != "karpenter":
            continue
        mine = [n for n in new_nodes if n.pool == pool.name]
        if not mine:
            continue
        out.append(
            f"pool {pool.name}: Karpenter counts each node's physical GPUs (no NodeOverlay), but the device plugin "
            f"advertises its {pool.sharing.strategy if pool.sharing.strategy != 'none' else 'MIG'} devices: "
            f"{len(mine)} node(s) launched for pods that fewer would hold, or none for renamed and MIG resources; "
            "set sharing.nodeOverlay: true and render the NodeOverlay (kgpu render --target karpenter)"
        )
    return out


def shared_nodes_report(states: Sequence[Any], new_nodes: Mapping[str, Any], profile: Profile | None,
                        catalog: Any = None) -> list[dict[str, Any]]:
    """Per node on a shared config: devices used over advertised, each pod's GPU cost and the idle cost."""
    if profile is None:
        return []
    out: list[dict[str, Any]] = []
    table = configs(profile)
    for st in states:
        node = st.node
        cfg = config_for(table, node.labels)
        if cfg is None or not (cfg.shared or cfg.mig_config):
            continue
        new = new_nodes.get(node.name)
        gpu, gpus = _gpu_of(node, new, catalog)
        if not gpus:
            continue
        try:
            shares = {r: cfg.unit_share(gpu, r) for r in node.allocatable if is_gpu_resource(r)}
        except ValueError:
            continue
        pods = [(p.key, {k: v for k, v in p.spec.requests if k in shares}) for p in st.pods]
        pods = [(k, r) for k, r in pods if r]
        used = {r: sum(req.get(r, 0) for _, req in pods) for r in shares}
        price = new.hourly_price if new is not None and new.hourly_price is not None else None
        entry: dict[str, Any] = {
            "node": node.name,
            "config": cfg.name,
            "gpus": gpus,
            "devices": {r: {"used": used[r], "advertised": node.allocatable.get(r, 0)} for r in sorted(shares)},
        }
        if price is not None:
            costs, idle = gpu_cost_split(price, gpus, pods, shares)
            entry["hourly_price"] = price
            entry["pods"] = {k: round(float(v), 6) for k, v in costs.items()}
            entry["idle"] = round(float(idle), 6)
        out.append(entry)
    return out


def _gpu_of(node: Node, new: Any, catalog: Any) -> tuple[str, int]:
    """(GPU model, physical GPUs) of a node: from its instance type in the catalog, else GFD's count."""
    itype = node.labels.get("node.kubernetes.io/instance-type")
    if catalog is not None and itype:
        try:
            t = catalog.get(itype)
        except InputError:  # a type the catalog does not know: GFD's labels say
            t = None
        if t is not None and t.gpu_count:
            return t.gpu_display_name or t.gpu_name, t.gpu_count
    count = node.labels.get("nvidia.com/gpu.count", "")
    return node.labels.get("karpenter.k8s.aws/instance-gpu-name", ""), int(count) if count.isdigit() else 0

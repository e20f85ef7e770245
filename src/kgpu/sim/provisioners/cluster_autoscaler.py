"""cluster-autoscaler node groups (eksctl node groups, one ASG each).

cluster-autoscaler decides a scale-up by simulating the pod on a *template node* of each group. With
nodes in the group it copies a real one; scaling from zero it has only the ASG: the instance type (cpu,
memory, GPUs, and the labels instance-type, arch, os, region, zone) plus the
``k8s.io/cluster-autoscaler/node-template/label/<key>``, ``.../taint/<key>`` (``value:Effect``) and
``.../resources/<name>`` tags. A label the nodes will carry but no tag declares is invisible from zero:
a pod selecting it does not trigger scale-up (seed 001's warning), and kgpu says which tag is missing.

Which tags a group has follows ``kgpu render``: under cluster-autoscaler kgpu writes the node-template tags
from the pool's labels and taints itself, or eksctl derives them (``propagateAsgTags``, managed groups);
``asgTags`` entries are added last and win. Of the labels eksctl and EKS add to nodes on their own, kgpu
tags ``alpha.eksctl.io/nodegroup-name`` on every unmanaged group (so pods may select a group by it);
``eks.amazonaws.com/nodegroup`` of managed groups is never tagged.

Groups: one per pool, or one per zone (``perZone``, named ``<pool>-<zone suffix>``), between minSize and
maxSize. The expander is **least-waste** (the one kgpu renders): the group whose new nodes leave the smallest
unused fraction of CPU and memory, ties by price, then name. Scale-ups are spread over similar groups (the
per-zone siblings of the chosen one) as ``--balance-similar-node-groups`` does. Messages use
cluster-autoscaler's NotTriggerScaleUp wording: "pod didn't trigger scale-up: 3 node(s) didn't match Pod's
node affinity/selector, 1 max node group size reached".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kgpu.catalog import Catalog, InstanceType
from kgpu.model.objects import CPU, MEMORY, Node, Pod, PodSpecInfo, Taint
from kgpu.model.predicates import ERR_NODE_AFFINITY, affinity_matches, filter_reasons
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.sim.provisioners.pools import (
    LABEL_EKS_CAPACITY,
    LABEL_EKS_GROUP,
    LABEL_EKSCTL_CLUSTER,
    LABEL_EKSCTL_GROUP,
    Context,
    NewNode,
    first_known_type,
    group_names,
    karpenter_order,
    node_taints,
    pool_zones,
    runs,
)
from kgpu.sim.sharing import new_node, resource_tags

TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
LABEL_TAG = TAG_PREFIX + "label/"
TAINT_TAG = TAG_PREFIX + "taint/"
RESOURCE_TAG = TAG_PREFIX + "resources/"
MAX_SIZE_REACHED = "max node group size reached"
NOT_TRIGGERED = "pod didn't trigger scale-up"
EXPANDER = "least-waste"
SCALE_DOWN_UNNEEDED_TIME = "10m"  # --scale-down-unneeded-time default
UNBOUNDED_MAX = 1000
_GENERIC = (
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
)


def asg_tags(profile: Profile, pool: Pool) -> dict[str, str]:
    """The node-template tags the group's ASG carries (kgpu-rendered or propagated, then asgTags)."""
    tags = {f"{LABEL_TAG}{k}": v for k, v in pool.labels.items()}
    for t in pool.taints:
        tags[f"{TAINT_TAG}{t.key}"] = f"{t.value}:{t.effect}"
    tags.update(pool.asg_tags)
    return tags


def template_from_tags(tags: dict[str, str]) -> tuple[dict[str, str], tuple[Taint, ...], dict[str, int]]:
    """Labels, taints and resources cluster-autoscaler reads from ASG tags (malformed taints ignored)."""
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    res: dict[str, int] = {}
    for key, val in tags.items():
        if key.startswith(LABEL_TAG):
            labels[key[len(LABEL_TAG) :]] = val
        elif key.startswith(TAINT_TAG):
            value, sep, effect = val.rpartition(":")
            if sep and effect in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                taints.append(Taint(key[len(TAINT_TAG) :], value, effect))
        elif key.startswith(RESOURCE_TAG) and val.isdigit():
            res[key[len(RESOURCE_TAG) :]] = int(val)
    return labels, tuple(taints), res


def capacity_type(pool: Pool) -> str:
    return "spot" if "spot" in pool.capacity_types else "on-demand"


def group_node(
    profile: Profile, pool: Pool, group: str, zone: str, name: str, catalog: Catalog
) -> tuple[Node, InstanceType, float | None, float | None]:
    """A real node of the group: type labels, the pool's labels and taints, eksctl's own labels; with prices."""
    itype = catalog.get(first_known_type(catalog, pool))
    cap = capacity_type(pool)
    region = profile.cluster.region
    type_labels = itype.labels(region, zone, cap)
    labels = {
        k: type_labels[k]
        for k in _GENERIC
        if k in type_labels and (zone or k != "topology.kubernetes.io/zone")
    }
    labels.update(pool.labels)
    labels["kubernetes.io/hostname"] = name
    if pool.managed:
        labels[LABEL_EKS_GROUP] = group
        labels[LABEL_EKS_CAPACITY] = "SPOT" if cap == "spot" else "ON_DEMAND"
    else:
        labels[LABEL_EKSCTL_GROUP] = group
        labels[LABEL_EKSCTL_CLUSTER] = profile.cluster.name
    price = on_demand = None
    for off in catalog.offerings(itype.name, region):
        if zone and off.zone != zone:
            continue
        if off.capacity_type == cap and price is None:
            price = off.price
        if off.capacity_type == "on-demand" and on_demand is None:
            on_demand = off.price
    alloc, labels = new_node(pool, itype, itype.allocatable(), labels)  # what the plugin advertises
    return (
        Node(name, labels, alloc, node_taints(pool), source="<profile>"),
        itype,
        price,
        on_demand,
    )


@dataclass
class Group:
    name: str
    pool: Pool
    zones: list[str]
    size: int
    max_size: int
    template_tags: dict[str, str]
    nodes: list[Node] = field(default_factory=list)

    def zone(self) -> str:
        return self.zones[self.size % len(self.zones)] if self.zones else ""


class ClusterAutoscaler:
    """The profile's node groups under cluster-autoscaler."""

    name = "cluster-autoscaler"

    def __init__(self, profile: Profile, catalog: Catalog) -> None:
        self.profile = profile
        self.catalog = catalog

    def groups(self, ctx: Context) -> list[Group]:
        out = []
        for pool in self.profile.pools:
            if pool.kind != PoolKind.NODE_GROUP:
                continue
            zones = pool_zones(self.profile, pool)
            names = group_names(self.profile, pool)
            for i, name in enumerate(names):
                gz = [zones[i]] if pool.per_zone and zones else zones
                nodes = [
                    st.node
                    for st in ctx.scheduler.states
                    if name in (st.node.labels.get(LABEL_EKSCTL_GROUP), st.node.labels.get(LABEL_EKS_GROUP))
                ]
                max_size = pool.max_size if pool.max_size is not None else UNBOUNDED_MAX
                tags = asg_tags(self.profile, pool)
                if not pool.managed:  # kgpu render tags every unmanaged group with eksctl's group-name label
                    tags = {f"{LABEL_TAG}{LABEL_EKSCTL_GROUP}": name, **tags}
                if pool.sharing is not None:  # the resources tags kgpu renders for shared groups
                    itype = self.catalog.get(first_known_type(self.catalog, pool))
                    tags = {**resource_tags(pool, itype), **tags}
                out.append(Group(name, pool, gz, len(nodes), max_size, tags, nodes))
        return out

    def template(self, g: Group, ctx: Context) -> tuple[Node, Node]:
        """(template node cluster-autoscaler simulates on, the node the group would really launch)."""
        real, itype, _, _ = group_node(
            self.profile, g.pool, g.name, g.zone(), f"template-node-for-{g.name}", self.catalog
        )
        if g.nodes:
            return g.nodes[0], real
        labels, taints, res = template_from_tags(g.template_tags)
        generic = {k: real.labels[k] for k in _GENERIC if k in real.labels}
        alloc = itype.allocatable()  # from zero: the type's physical GPUs, then the resources tags
        alloc.update(res)
        return Node(real.name, {**generic, **labels}, alloc, taints), real

    def provision(self, pending: Sequence[Pod], ctx: Context) -> dict[str, str]:
        groups = self.groups(ctx)
        notes: dict[str, str] = {}
        for run in runs(karpenter_order(pending)):
            todo = ctx.place_existing(run)
            for _ in range(len(groups) + 2):
                if not todo:
                    break
                chosen, message = self._scale_up(todo, groups, ctx)
                if chosen == 0:
                    for pod in todo:
                        notes[pod.key] = message
                    break
                left = ctx.place_existing(todo)
                if len(left) == len(todo):
                    text = (
                        f"cluster-autoscaler: scaled up from the node template, but the new node(s) do not take the "
                        f"pod: the ASG's node-template tags do not describe the nodes the group launches; {message}"
                    )
                    for pod in todo:
                        notes[pod.key] = text
                    break
                todo = left
        return notes

    def _scale_up(self, todo: list[Pod], groups: list[Group], ctx: Context) -> tuple[int, str]:
        spec = todo[0].spec
        reasons: Counter[str] = Counter()
        hints: list[str] = []
        options: list[tuple[float, float, str, Group, int]] = []
        for g in groups:
            if g.size >= g.max_size:
                reasons[MAX_SIZE_REACHED] += 1
                continue
            tpl, real = self.template(g, ctx)
            over = ctx.overhead(tpl)
            found = filter_reasons(spec, tpl, over, over.get("pods", 0))
            if found:
                for r in found:
                    reasons[r] += 1
                if (
                    found == [ERR_NODE_AFFINITY]
                    and not g.nodes
                    and affinity_matches(spec, real.labels, real.name)
                ):
                    missing = sorted(
                        k
                        for k in {k for k, _ in spec.node_selector} | _affinity_keys(spec)
                        if k not in tpl.labels
                    )
                    tags = ", ".join(f"{LABEL_TAG}{k}" for k in missing) or "node-template label"
                    hints.append(
                        f"node group {g.name} would label its nodes as the pod selects, but its ASG has no {tags} "
                        "tag, so cluster-autoscaler cannot see the label when scaling from zero"
                    )
                continue
            per_node = _pods_per_node(spec.requests, tpl.allocatable, over)
            if per_node <= 0:
                reasons["Insufficient resources"] += 1
                continue
            nodes = math.ceil(len(todo) / per_node)
            waste = _waste(spec.request(CPU), spec.request(MEMORY), len(todo), nodes, tpl.allocatable)
            price = group_node(self.profile, g.pool, g.name, g.zone(), "x", self.catalog)[2] or 0.0
            options.append((waste, price, g.name, g, nodes))
        if not options:
            text = f"cluster-autoscaler: {NOT_TRIGGERED}: " + ", ".join(
                sorted(f"{n} {r}" for r, n in reasons.items())
            )
            if hints:
                text += " (" + "; ".join(hints) + ")"
            return 0, text
        options.sort(key=lambda o: (o[0], o[1], o[2]))
        best, needed = options[0][3], options[0][4]
        similar = [o[3] for o in options if o[3].pool.name == best.pool.name]
        created = 0
        for _ in range(needed):
            room = [g for g in similar if g.size < g.max_size]
            if not room:
                break
            g = min(room, key=lambda x: (x.size, x.name))
            self._launch(g, ctx)
            created += 1
        return created, ""

    def provision_dra(self, pending: Sequence[Pod], ctx: Context) -> dict[str, str]:
        """Pods with resource claims (kgpu.sim.provisioners.dra_pools), one at a time: the group's template node must pass
        the filters and allocate the claims; a group with nodes copies a node's ResourceSlices (kgpu: the
        pool's generated slices, devices free), an empty one has none from the AWS provider."""
        from kgpu.sim.scheduler.plugins.dra_place import place

        groups = self.groups(ctx)
        notes: dict[str, str] = {}
        for pod in pending:
            for _ in range(len(groups) + 1):
                out = place(ctx.dra, ctx.scheduler, pod)
                if out.node is not None:
                    ctx.placed(pod, out.node)
                    ctx.dra_devices[pod.key] = out.devices
                    notes.pop(pod.key, None)
                    break
                verdict = ctx.dra.prefilter(pod)
                if verdict.message:  # no claim to simulate: nothing to scale for
                    notes[pod.key] = f"cluster-autoscaler: {NOT_TRIGGERED}: {verdict.message}"
                    break
                if pod.key in notes:  # scaled up, and the new node does not take it either
                    notes[pod.key] = (
                        "cluster-autoscaler: scaled up from the node template, but the new node does not take the "
                        f"pod: {out.reason}"
                    )
                    break
                g, text = self._dra_option(pod, verdict.claims, groups, ctx)
                notes[pod.key] = text
                if g is None:
                    break
                self._launch(g, ctx)
        return notes

    def _dra_option(self, pod: Pod, claims: Sequence[object], groups: list[Group], ctx: Context) -> tuple[Group | None, str]:
        from kgpu.sim.provisioners.dra_nodes import publish_template
        from kgpu.sim.scheduler.plugins.dynamicresources import CANNOT_ALLOCATE, AllocationError

        reasons: Counter[str] = Counter()
        hints: list[str] = []
        options: list[tuple[float, str, Group]] = []
        for g in groups:
            if g.size >= g.max_size:
                reasons[MAX_SIZE_REACHED] += 1
                continue
            tpl, _ = self.template(g, ctx)
            over = ctx.overhead(tpl)
            found = filter_reasons(pod.spec, tpl, over, over.get("pods", 0))
            if found:
                reasons.update(found)
                continue
            if g.pool.gpu_allocation != "dra" or not g.nodes:
                reasons[CANNOT_ALLOCATE] += 1
                if g.pool.gpu_allocation == "dra":
                    hints.append(
                        f"node group {g.name} has no nodes: the template cluster-autoscaler's AWS provider makes for an "
                        "empty group carries no ResourceSlices (kubernetes/autoscaler#10277), so a pod with resource "
                        f"claims never scales it from zero; keep minSize: 1 so there is a node to copy them from"
                    )
                continue
            itype = self.catalog.get(first_known_type(self.catalog, g.pool))
            name = f"template-node-for-{g.name}"
            publish_template(ctx.dra, name, g.pool, itype)
            try:
                why, _ = ctx.dra.filter(pod, claims, Node(name, tpl.labels, tpl.allocatable, tpl.taints))
            except AllocationError as exc:
                why = str(exc)
            if why:
                reasons[why] += 1
                continue
            price = group_node(self.profile, g.pool, g.name, g.zone(), "x", self.catalog)[2] or 0.0
            options.append((price, g.name, g))
        if not options:
            text = f"cluster-autoscaler: {NOT_TRIGGERED}: " + ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
            if hints:
                text += " (" + "; ".join(hints) + ")"
            return None, text
        options.sort(key=lambda o: (o[0], o[1]))
        return options[0][2], ""

    def _launch(self, g: Group, ctx: Context) -> None:
        name = ctx.node_name(g.name)
        zone = g.zone()
        node, itype, price, on_demand = group_node(self.profile, g.pool, g.name, zone, name, self.catalog)
        new = NewNode(
            name,
            g.pool.name,
            itype.name,
            capacity_type(g.pool),
            zone,
            price,
            kind="cluster-autoscaler",
            on_demand_price=on_demand,
            gpus=itype.gpu_count,
        )
        ctx.launch(node, new)
        g.size += 1
        g.nodes.append(node)


def _affinity_keys(spec: PodSpecInfo) -> set[str]:
    if spec.affinity is None:
        return set()
    return {r.key for t in spec.affinity.terms for r in t.match_expressions}


def _pods_per_node(
    requests: tuple[tuple[str, int], ...], alloc: Mapping[str, int], over: Mapping[str, int]
) -> int:
    k = alloc.get("pods", 0) - over.get("pods", 0)
    for name, amount in requests:
        if amount:
            k = min(k, (alloc.get(name, 0) - over.get(name, 0)) // amount)
    return max(k, 0)


def _waste(cpu: int, memory: int, pods: int, nodes: int, alloc: Mapping[str, int]) -> float:
    """least-waste's score: the unused fraction of CPU and of memory on the new nodes, averaged."""
    total_cpu = nodes * (alloc.get(CPU, 0) or 1)
    total_mem = nodes * (alloc.get(MEMORY, 0) or 1)
    return ((total_cpu - pods * cpu) / total_cpu + (total_mem - pods * memory) / total_mem) / 2

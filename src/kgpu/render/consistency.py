"""Do the rendered pieces agree? Checked on the rendered documents, before anything is written.

Errors (``kgpu render`` refuses, exit 1):

- a workload template that would not schedule on the pool it is meant for (``kgpu.dev/pool``);
- a device-plugin DaemonSet that would not run on a GPU pool's nodes (an untolerated taint, an affinity
  that misses them), or that would run on a pool whose AMI has the plugin built in;
- a cluster-autoscaler node group (min size 0) whose ASG lacks the ``node-template/label`` tag for a label
  a workload selects: cluster-autoscaler cannot know that a new node would match, and never scales it up.

Warnings: a Karpenter pool of GPU instance types without a taint (any pod may land on a GPU node and keep
it up), a Bottlerocket NVIDIA pool with the DaemonSet forced on, a node group whose ASG does not describe
its taints, a malformed explicit ``node-template/taint`` tag, a cluster-autoscaler node group mixing
instance types with different GPU counts (it scales from zero on its first type's template, so a pod asking
for more GPUs than that never scales it up), a Kueue GPU quota (a team's nominal, or the teams' sum in one
flavor) beyond what the pool can ever launch.

Instance types and GPU names go through the same catalog check as ``kgpu plan``
(:func:`kgpu.sim.provisioners.provision.validate`): an unknown or retired type is the same input error (exit 2) in both,
and a node group's unknown type beside known ones the same warning.

Placement uses the scheduler's own predicates (:mod:`kgpu.model.predicates`) against one representative
node per pool (:func:`pool_nodes`), built from what the pool's provisioner puts on its nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgpu.errors import InputError
from kgpu.model.load import parse_documents
from kgpu.model.objects import GPU, Node, Pod, Taint
from kgpu.model.predicates import first_untolerated, static_reasons, untolerated_taint_detail
from kgpu.model.profile import Autoscaler, Pool, PoolKind, Profile
from kgpu.model.profile_nodes import AmiFamily
from kgpu.render import (
    EKS_MANAGED_GROUP_LABEL,
    EKSCTL_GROUP_LABEL,
    KARPENTER_POOL_LABEL,
    POOL_ANNOTATION,
    group_names,
    node_labels,
    pool_zones,
    uses_device_plugin_daemonset,
)
from kgpu.render.eksctl import LABEL_TAG, TAINT_TAG, effective_asg_tags
from kgpu.sim.provisioners.provision import catalog_for, first_known_type
from kgpu.sim.provisioners.provision import validate as validate_catalog
from kgpu.sim.scheduler.scheduler import Scheduler

ERROR = "error"
WARNING = "warning"
_TAINT_TAG_VALUE = re.compile(r"^[^:]*:(NoSchedule|PreferNoSchedule|NoExecute)$")
_BIG = 1 << 50


@dataclass(frozen=True)
class Problem:
    level: str
    subject: str  # "pool gpu", "Job gpu-train-gpu", "node group gpu-spot-ng-a"
    field: str
    message: str

    def line(self) -> str:
        where = f"{self.subject}: {self.field}" if self.field else self.subject
        return f"{self.level}: {where}: {self.message}"


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.level == ERROR]


def warnings(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.level == WARNING]


# --- representative nodes -------------------------------------------------------------------------------


def pool_nodes(profile: Profile, pool: Pool) -> list[Node]:
    """One node per distinct label set the pool's nodes carry (per group, per static node)."""
    base = node_labels(pool)
    taints = tuple(Taint(t.key, t.value, str(t.effect)) for t in pool.taints)

    def node(name: str, extra: Mapping[str, str], gpus: int) -> Node:
        labels = {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name, **base, **extra}
        alloc = {"cpu": _BIG, "memory": _BIG, "pods": 110, "ephemeral-storage": _BIG}
        if gpus:
            alloc[GPU] = gpus
        return Node(name, labels, alloc, taints, source=f"pool {pool.name}")

    gpus = 64 if pool.is_gpu else 0
    arch = pool.shorthand.arch[0] if pool.shorthand and pool.shorthand.arch else "amd64"
    if pool.kind == PoolKind.KARPENTER:
        extra = {KARPENTER_POOL_LABEL: pool.name, "kubernetes.io/arch": arch}
        if pool.capacity_types:
            extra["karpenter.sh/capacity-type"] = str(pool.capacity_types[0])
        return [node(f"{pool.name}-node", extra, gpus)]
    if pool.kind == PoolKind.NODE_GROUP:
        key = EKS_MANAGED_GROUP_LABEL if pool.managed else EKSCTL_GROUP_LABEL
        zones = pool_zones(profile, pool) if pool.per_zone else [""]
        out = []
        for name, zone in zip(group_names(profile, pool), zones, strict=False):
            extra = {key: name, "kubernetes.io/arch": arch}
            if zone:
                extra["topology.kubernetes.io/zone"] = zone
            out.append(node(f"{name}-node", extra, gpus))
        return out
    if pool.kind == PoolKind.STATIC:
        return [node(n.name, n.labels, n.gpus) for n in pool.nodes]
    return [node(f"{pool.name}-node", {}, gpus)]


def _owner(pod: Pod) -> str:
    if pod.owner_kind:
        return f"{pod.owner_kind} {pod.owner_name}"
    return f"Pod {pod.name}"


# --- checks ---------------------------------------------------------------------------------------------


def _workload_pods(stack: Mapping[str, list[dict[str, Any]]]) -> list[Pod]:
    docs = [d for t in ("workloads", "kuberay") for d in stack.get(t, [])]
    return parse_documents(docs, "rendered workloads").pods


def _check_workloads(profile: Profile, pods: list[Pod]) -> list[Problem]:
    """Each rendered workload pod must be placeable by kube-scheduler on its intended pool's nodes."""
    out: list[Problem] = []
    seen: set[str] = set()
    names = {p.name for p in profile.pools}
    for pod in pods:
        target = pod.annotations.get(POOL_ANNOTATION)
        owner = _owner(pod)
        if not target or owner in seen:
            continue
        seen.add(owner)
        if target not in names:
            out.append(Problem(ERROR, owner, f"annotations.{POOL_ANNOTATION}", f"no pool named {target!r}"))
            continue
        # Ask the simulator: kube-scheduler's placement of this pod on the pool's nodes.
        nodes = pool_nodes(profile, profile.pool(target))
        decision = Scheduler(nodes).place(pod)
        if nodes and decision.node is None:
            # kube-scheduler's reason no longer names the taint; say which one.
            taints = sorted(
                {
                    untolerated_taint_detail(t)
                    for n in nodes
                    if (t := first_untolerated(n.taints, pod.spec.tolerations)) is not None
                }
            )
            out.append(
                Problem(
                    ERROR,
                    owner,
                    "spec.template.spec",
                    f"would not schedule on pool {target}: {decision.reason}"
                    + (f" ({', '.join(taints)})" if taints else ""),
                )
            )
    return out


def _check_device_plugin(profile: Profile, stack: Mapping[str, list[dict[str, Any]]]) -> list[Problem]:
    out: list[Problem] = []
    for pool in profile.gpu_pools:
        if pool.ami_family == AmiFamily.BOTTLEROCKET_NVIDIA and pool.device_plugin == "daemonset":
            out.append(
                Problem(
                    WARNING,
                    f"pool {pool.name}",
                    "devicePlugin",
                    "Bottlerocket NVIDIA has the device plugin built in; forcing the DaemonSet on runs two plugins",
                )
            )
    if "device-plugin" in stack:
        plugin = stack["device-plugin"]
    elif "device-plugin-chart" in stack:
        # the chart's DaemonSet gets the same tolerations and affinity from the values as kgpu's has
        from kgpu.render.deviceplugin import render as render_plugin

        plugin = render_plugin(profile)
    else:
        return out
    daemonsets = parse_documents(plugin, "rendered device plugin").daemonsets
    if not daemonsets:
        return out
    ds = daemonsets[0]
    subject = f"DaemonSet {ds.namespace}/{ds.name}"
    for pool in profile.gpu_pools:
        if pool.kind == PoolKind.TKE_SUPERNODE:
            continue
        runs = [static_reasons(ds.template, n, detail=True) for n in pool_nodes(profile, pool)]
        if uses_device_plugin_daemonset(pool):
            for reasons in runs:
                if reasons:
                    out.append(
                        Problem(
                            ERROR,
                            subject,
                            "spec.template.spec",
                            f"would not run on pool {pool.name}'s nodes: {'; '.join(reasons)}"
                            " (their nvidia.com/gpu would never be advertised)",
                        )
                    )
                    break
        elif pool.gpu_allocation == "dra" and any(r is None for r in runs):
            out.append(
                Problem(
                    ERROR,
                    subject,
                    "spec.template.spec.affinity",
                    f"would run on pool {pool.name}, whose GPUs NVIDIA's DRA driver publishes (both would hand out the same GPUs)",
                )
            )
        elif pool.device_plugin_builtin and any(r is None for r in runs):
            out.append(
                Problem(
                    ERROR,
                    subject,
                    "spec.template.spec.affinity",
                    f"would run on pool {pool.name}, whose Bottlerocket NVIDIA AMI has the device plugin built in",
                )
            )
    return out


def _check_autoscaler_tags(
    profile: Profile, stack: Mapping[str, list[dict[str, Any]]], pods: list[Pod]
) -> list[Problem]:
    out: list[Problem] = []
    if profile.autoscaler != Autoscaler.CLUSTER_AUTOSCALER:
        return out
    for pool in profile.pools:
        if pool.kind != PoolKind.NODE_GROUP:
            continue
        for key, value in sorted(pool.asg_tags.items()):
            if not key.startswith(TAINT_TAG):
                continue
            taint_key = key[len(TAINT_TAG) :]
            if not _TAINT_TAG_VALUE.match(value):
                out.append(
                    Problem(
                        WARNING,
                        f"pool {pool.name}",
                        f"asgTags.{key}",
                        f"{value!r} is malformed: cluster-autoscaler expects '<value>:<effect>' "
                        "(e.g. 'true:NoSchedule') and ignores this tag",
                    )
                )
            if taint_key not in {t.key for t in pool.taints}:
                out.append(
                    Problem(
                        WARNING,
                        f"pool {pool.name}",
                        f"asgTags.{key}",
                        f"describes taint {taint_key!r}, which the pool does not have "
                        f"(taints: {', '.join(t.key for t in pool.taints) or 'none'})",
                    )
                )
    configs = [d for d in stack.get("eksctl", []) if d.get("kind") == "ClusterConfig"]
    groups = {
        g["name"]: g
        for c in configs
        for section in ("nodeGroups", "managedNodeGroups")
        for g in c.get(section) or []
    }
    if not groups:
        return out
    selectors: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for pod in pods:
        target = pod.annotations.get(POOL_ANNOTATION)
        if target and pod.spec.node_selector:
            selectors.setdefault(target, []).append((_owner(pod), dict(pod.spec.node_selector)))
    for pool in profile.pools:
        if pool.kind != PoolKind.NODE_GROUP or pool.min_size > 0:
            continue
        for name in group_names(profile, pool):
            group = groups.get(name)
            if group is None:
                continue
            tags = effective_asg_tags(group)
            reported: set[str] = set()
            for owner, selector in selectors.get(pool.name, []):
                for key, value in selector.items():
                    if key == EKS_MANAGED_GROUP_LABEL or key in reported:
                        continue
                    if tags.get(LABEL_TAG + key) != value:
                        reported.add(key)
                        out.append(
                            Problem(
                                ERROR,
                                f"node group {name}",
                                "tags",
                                f"missing {LABEL_TAG}{key}: {value!r} for the nodeSelector of {owner}: "
                                "cluster-autoscaler cannot scale this group up from zero for it",
                            )
                        )
            for taint in pool.taints:
                if TAINT_TAG + taint.key not in tags:
                    out.append(
                        Problem(
                            WARNING,
                            f"node group {name}",
                            "tags",
                            f"no {TAINT_TAG}{taint.key} tag: from zero, cluster-autoscaler assumes its nodes are "
                            "untainted and may scale it up for pods that cannot run there",
                        )
                    )
    return out


def _check_karpenter_taints(profile: Profile) -> list[Problem]:
    return [
        Problem(
            WARNING,
            f"pool {p.name}",
            "taints",
            "Karpenter pool of GPU instance types without a taint: any pod may land on (and keep up) a GPU node",
        )
        for p in profile.pools
        if p.kind == PoolKind.KARPENTER and p.is_gpu and not p.taints
    ]


def _check_catalog(profile: Profile) -> list[Problem]:
    """plan's catalog check: unknown names raise InputError; the warnings it returns become Problems."""
    catalog = catalog_for(profile)
    out = [
        Problem(WARNING, "profile", line.split(": ", 1)[0], line.split(": ", 1)[-1])
        for line in validate_catalog(profile, catalog)
    ]
    if catalog is None or profile.autoscaler != Autoscaler.CLUSTER_AUTOSCALER:
        return out
    for i, pool in enumerate(profile.pools):
        if pool.kind != PoolKind.NODE_GROUP:
            continue
        counts: dict[int, list[str]] = {}
        for name in pool.instance_types:
            try:
                counts.setdefault(catalog.get(name).gpu_count, []).append(name)
            except InputError:  # unknown: validate_catalog already reported it
                continue
        if len(counts) > 1:
            first = first_known_type(catalog, pool)
            mix = "; ".join(f"{n} GPU(s): {', '.join(names)}" for n, names in sorted(counts.items()))
            out.append(
                Problem(
                    WARNING,
                    f"pool {pool.name}",
                    f"pools[{i}].instanceTypes",
                    f"mixes GPU counts ({mix}): cluster-autoscaler scales a group from zero on its first type's "
                    f"template ({first}, {catalog.get(first).gpu_count} GPU(s)), so a pod asking for more never "
                    "scales it up; use one node group per GPU count",
                )
            )
    return out


def _check_spot_interruptions(profile: Profile) -> list[Problem]:
    """A spot pool whose interruptions nothing handles loses its pods without a drain on every reclaim."""
    if profile.spot_interruptions.enabled:
        return []
    from kgpu.render.addons import spot_karpenter_pools, spot_self_managed_groups

    return [
        Problem(
            WARNING,
            f"pool {name}",
            "spotInterruptions.enabled",
            f"spot capacity without interruption handling ({how}): pods are not drained on the two-minute "
            "warning; enable spotInterruptions",
        )
        for names, how in (
            (spot_karpenter_pools(profile), "Karpenter's interruption queue"),
            (spot_self_managed_groups(profile), "aws-node-termination-handler"),
        )
        for name in names
    ]


def _pool_max_gpus(profile: Profile, pool: Pool) -> int | None:
    """The most GPUs one node of the pool can have, where the profile says (instance types, static nodes)."""
    if pool.kind == PoolKind.STATIC:
        return max(n.gpus for n in pool.nodes)
    catalog = catalog_for(profile)
    if catalog is None or not pool.instance_types:
        if pool.shorthand and pool.shorthand.gpu_count and pool.shorthand.gpu_count.max is not None:
            return pool.shorthand.gpu_count.max
        return None
    counts = []
    for name in pool.instance_types:
        try:
            counts.append(catalog.get(name).gpu_count)
        except InputError:
            continue
    return max(counts) if counts else None


def _check_ray_workers(profile: Profile) -> list[Problem]:
    """A Ray GPU worker asking for more GPUs than any node of its pool has never schedules."""
    if profile.kuberay is None:
        return []
    want = profile.kuberay.gpus_per_worker
    out = []
    for pool in profile.gpu_pools:
        if pool.kind == PoolKind.TKE_SUPERNODE:
            continue
        most = _pool_max_gpus(profile, pool)
        if most is not None and most < want:
            out.append(
                Problem(
                    ERROR,
                    f"pool {pool.name}",
                    "kuberay.gpusPerWorker",
                    f"{want} GPU(s) per Ray worker, but the pool's largest node has {most}: the worker group "
                    "would never schedule",
                )
            )
    return out


def _check_ray_head_pool(profile: Profile, stack: Mapping[str, list[dict[str, Any]]]) -> list[Problem]:
    """``kuberay.headPool`` set to a GPU pool (seed 004: "通常，避免在 Ray head 上运行 GPU 工作负载"): the head takes
    room on the pool's nodes. The RayCluster is planned on the profile with every worker group at its
    maxReplicas (node groups scaled to their maxSize, Karpenter within its limits): a worker that can never be
    placed is an error with the scheduler's reason; when all fit, a warning that the head keeps a GPU node up."""
    cfg = profile.kuberay
    if cfg is None or not cfg.head_pool or not profile.pool(cfg.head_pool).is_gpu:
        return []
    head = profile.pool(cfg.head_pool)
    docs = []
    for doc in stack.get("kuberay", []):
        if doc.get("kind") != "RayCluster":
            continue
        doc = dict(doc)
        spec = dict(doc.get("spec") or {})
        spec["workerGroupSpecs"] = [
            {**g, "replicas": g.get("maxReplicas", g.get("replicas", 0))} for g in spec.get("workerGroupSpecs") or []
        ]
        doc["spec"] = spec
        docs.append(doc)
    if not docs:
        return []
    from kgpu.sim.plan import plan
    from kgpu.sim.simulate import UNSCHEDULABLE

    field = "kuberay.headPool"
    subject = f"pool {head.name}"
    result = plan(profile, parse_documents(docs, "rendered RayCluster"))
    stuck = [p for p in result.simulation.placements if p.phase == UNSCHEDULABLE and "head" not in p.pod.name]
    if stuck:
        return [
            Problem(
                ERROR,
                subject,
                field,
                f"the Ray head runs on GPU pool {head.name}, and {len(stuck)} Ray GPU worker(s) at maxReplicas can "
                f"never be placed: {stuck[0].pod.name}: {stuck[0].reason}; put the head on a CPU pool",
            )
        ]
    return [
        Problem(
            WARNING,
            subject,
            field,
            f"the Ray head runs on GPU pool {head.name}: it keeps a GPU node up and takes room from the GPU "
            "workers (the guide keeps the head on a CPU node group); put the head on a CPU pool",
        )
    ]


def _check_kueue_quotas(profile: Profile) -> list[Problem]:
    """A team's nominal GPU quota in a pool's flavor, or the teams' sum there, beyond what the pool can ever
    launch (:func:`kgpu.render.kueue.pool_capacity`): Kueue admits jobs on quota alone, so they would wait
    for nodes that never come. Borrowing limits are not counted: borrowing is bounded by others' quota."""
    if profile.queues is None:
        return []
    from kgpu.render.kueue import pool_capacity

    out: list[Problem] = []
    for pool in profile.pools:
        cap = pool_capacity(profile, pool)
        if cap.gpu is None:
            continue
        total = 0
        over = False
        for i, team in enumerate(profile.queues.teams):
            for j, quota in enumerate(team.quotas):
                if quota.pool != pool.name:
                    continue
                nominal = quota.gpu.amounts(GPU)[0]
                total += nominal
                if nominal > cap.gpu:
                    over = True
                    out.append(
                        Problem(
                            WARNING,
                            f"team {team.name}",
                            f"queues.teams[{i}].quotas[{j}].gpu",
                            f"nominal quota {nominal} {GPU} in flavor {pool.name}, but the pool can launch at most "
                            f"{cap.gpu} ({cap.source}): Kueue would admit jobs whose pods never find a node",
                        )
                    )
        if total > cap.gpu and not over:  # one team over the pool says it already
            out.append(
                Problem(
                    WARNING,
                    f"pool {pool.name}",
                    "queues.teams",
                    f"the teams' nominal quotas in flavor {pool.name} add up to {total} {GPU}, more than the "
                    f"{cap.gpu} the pool can launch ({cap.source}): admitted jobs would wait for nodes",
                )
            )
    return out


def check(profile: Profile, stack: Mapping[str, list[dict[str, Any]]]) -> list[Problem]:
    """Every problem and warning, errors first, each naming its pool/workload and field."""
    pods = _workload_pods(stack)
    problems = (
        _check_catalog(profile)
        + _check_spot_interruptions(profile)
        + _check_ray_workers(profile)
        + _check_ray_head_pool(profile, stack)
        + _check_workloads(profile, pods)
        + _check_device_plugin(profile, stack)
        + _check_autoscaler_tags(profile, stack, pods)
        + _check_karpenter_taints(profile)
        + _check_kueue_quotas(profile)
    )
    return errors(problems) + warnings(problems)

"""Kueue (kueue.x-k8s.io/v1beta2, Kueue v0.15.0) from the profile's ``queues``: teams sharing the pools.

What it renders, with the Go types it follows (``apis/kueue/v1beta2/*_types.go``):

- one **ResourceFlavor per pool**, named after it. ``nodeLabels`` are the labels the pool's nodes carry: the
  profile's ``labels`` plus the label its provisioner sets on every node (``karpenter.sh/nodepool`` for a
  Karpenter pool, ``alpha.eksctl.io/nodegroup-name`` / ``eks.amazonaws.com/nodegroup`` for a node group not
  split per zone), so Kueue's node selector pins an admitted pod to that pool and not to another pool with
  the same labels. ``nodeTaints`` are the pool's taints: Kueue assigns the flavor only to pods that tolerate
  them (``pkg/scheduler/flavorassigner/flavorassigner.go``), as kube-scheduler would place them.
  ``tolerations`` (the pool's taints, added to the admitted pods) only with ``queues.injectTolerations``:
  Kueue checks ``nodeTaints`` against the pod's tolerations *and* the flavor's, so injecting them lets any
  pod onto a tainted pool, which is what the taint was for.
- one **Cohort** per cohort the teams name (by default one for all), so unused quota is lent between teams.
- one **ClusterQueue per team**: a single resource group covering ``cpu``, ``memory`` and
  ``nvidia.com/gpu`` (one group, so a pod's CPU and GPUs come from the same flavor and its node selector
  names one pool), with every pool as a flavor in the profile's pool order (Kueue tries them in that order).
  A pool the team lists gets its quotas (cpu/memory default to what the pool can launch); a pool it does not
  list gets 0, so the team only borrows there. Only the namespaces the team names may use it
  (``namespaceSelector`` on ``kubernetes.io/metadata.name``, the label the API server puts on every
  namespace).
- a **LocalQueue** per team and namespace (``kueue.x-k8s.io/queue-name`` on a job names it), the
  namespaces themselves, and the **WorkloadPriorityClasses**.
- for **cluster-autoscaler node groups**: an AdmissionCheck run by Kueue's ProvisioningRequest controller
  (``kueue.x-k8s.io/provisioning-request``) with its ProvisioningRequestConfig (class
  ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``, GPUs managed), named in each ClusterQueue's
  ``admissionChecksStrategy`` for those pools' flavors: Kueue then starts a job only once cluster-autoscaler
  has scaled the node groups up for all of it. Karpenter needs no check: it launches for pending pods.

:func:`pool_capacity` is what a pool can ever launch (Karpenter ``limits``; node groups ``maxSize`` times
the largest instance type of the catalog; static nodes summed); the default cpu/memory quotas and the
render consistency finding on GPU quotas (``kgpu.render.consistency``) both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kgpu.errors import InputError
from kgpu.model.profile import Autoscaler, Pool, PoolKind, Profile
from kgpu.model.profile_queues import PoolQuota, Queues, Quota, Team
from kgpu.render import (
    EKS_MANAGED_GROUP_LABEL,
    EKSCTL_GROUP_LABEL,
    GPU_RESOURCE,
    KARPENTER_POOL_LABEL,
    MANAGED_BY,
    group_names,
    node_labels,
    taints,
    tolerations,
)

API = "kueue.x-k8s.io/v1beta2"
GROUP = "kueue.x-k8s.io"
RESOURCES = ("cpu", "memory", GPU_RESOURCE)  # coveredResources; each flavor lists them in this order
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"  # ProvisioningRequestControllerName
PROVISIONING_NAME = "kgpu-provisioning"
MAX_NODE_LABELS = 8  # ResourceFlavor spec.nodeLabels maxProperties, nodeTaints/tolerations maxItems
KUEUE_VERSION = "v0.15.0"


@dataclass(frozen=True, slots=True)
class PoolCapacity:
    """The most a pool can ever launch: GPUs, CPU (millicores) and memory (bytes); None where unbounded or
    unknown. ``text`` holds the quantities as the quota defaults print them; ``source`` says where they come
    from, for messages."""

    gpu: int | None
    cpu: int | None
    memory: int | None
    text: dict[str, str]
    source: str


def applies(profile: Profile) -> bool:
    return profile.queues is not None


def _karpenter_capacity(pool: Pool) -> PoolCapacity:
    from kgpu.model.quantity import resource_amount

    amounts: dict[str, int | None] = {}
    text: dict[str, str] = {}
    for resource in RESOURCES:
        raw = pool.limits.get(resource)
        amounts[resource] = None if raw is None else resource_amount(raw, milli=resource == "cpu")
        if raw is not None:
            text[resource] = str(raw)
    return PoolCapacity(
        amounts[GPU_RESOURCE], amounts["cpu"], amounts["memory"], text, f"NodePool {pool.name} limits"
    )


def _node_group_capacity(profile: Profile, pool: Pool) -> PoolCapacity:
    from kgpu.sim.provisioners.provision import catalog_for

    # the maxSize kgpu's eksctl config gives each of the pool's groups (kgpu.render.eksctl)
    max_size = pool.max_size if pool.max_size is not None else max(pool.min_size, pool.desired_size or 0, 1)
    nodes = max_size * len(group_names(profile, pool))
    catalog = catalog_for(profile)
    rows = []
    for name in pool.instance_types if catalog is not None else []:
        try:
            rows.append(catalog.get(name))  # type: ignore[union-attr]
        except InputError:
            continue
    groups = f"{len(group_names(profile, pool))} node group(s) at maxSize {max_size}"
    if not rows:
        return PoolCapacity(None, None, None, {}, groups)
    most = max(rows, key=lambda r: (r.gpu_count, r.vcpus, r.memory_mib))
    gpus = nodes * max(r.gpu_count for r in rows)
    vcpus = nodes * max(r.vcpus for r in rows)
    mib = nodes * max(r.memory_mib for r in rows)
    text = {GPU_RESOURCE: str(gpus), "cpu": str(vcpus), "memory": f"{mib}Mi"}
    return PoolCapacity(gpus, vcpus * 1000, mib * 2**20, text, f"{groups} x {most.name}")


def _static_capacity(pool: Pool) -> PoolCapacity:
    from kgpu.model.quantity import resource_amount

    gpus = sum(n.gpus for n in pool.nodes)
    text = {GPU_RESOURCE: str(gpus)}
    cpu = memory = None
    if pool.nodes and all(n.cpu for n in pool.nodes):
        cpu = sum(resource_amount(n.cpu, milli=True) for n in pool.nodes)
        text["cpu"] = f"{cpu}m"
    if pool.nodes and all(n.memory for n in pool.nodes):
        memory = sum(resource_amount(n.memory) for n in pool.nodes)
        text["memory"] = str(memory)
    return PoolCapacity(gpus, cpu, memory, text, f"the pool's {len(pool.nodes)} static node(s)")


def pool_capacity(profile: Profile, pool: Pool) -> PoolCapacity:
    """What the pool can ever launch, where the profile bounds it."""
    if pool.kind == PoolKind.KARPENTER:
        return _karpenter_capacity(pool)
    if pool.kind == PoolKind.NODE_GROUP:
        return _node_group_capacity(profile, pool)
    if pool.kind == PoolKind.STATIC:
        return _static_capacity(pool)
    return PoolCapacity(None, None, None, {}, f"pool {pool.name}")


# --- flavors --------------------------------------------------------------------------------------------


def flavor_node_labels(profile: Profile, pool: Pool) -> dict[str, str]:
    """The pool's node labels plus its provisioner's per-pool label (where one label names the pool)."""
    labels = node_labels(pool)
    if pool.kind == PoolKind.KARPENTER:
        labels[KARPENTER_POOL_LABEL] = pool.name
    elif pool.kind == PoolKind.NODE_GROUP and not pool.per_zone:
        labels[EKS_MANAGED_GROUP_LABEL if pool.managed else EKSCTL_GROUP_LABEL] = pool.name
    return dict(sorted(labels.items()))


def resource_flavor(profile: Profile, pool: Pool, queues: Queues) -> dict[str, Any]:
    index = profile.pools.index(pool)
    labels = flavor_node_labels(profile, pool)
    if len(labels) > MAX_NODE_LABELS:
        raise InputError(
            f"pool {pool.name}'s nodes carry {len(labels)} labels, and a Kueue ResourceFlavor takes at most "
            f"{MAX_NODE_LABELS} nodeLabels",
            where=f"pools[{index}].labels",
        )
    if len(pool.taints) > MAX_NODE_LABELS:
        raise InputError(
            f"a Kueue ResourceFlavor takes at most {MAX_NODE_LABELS} nodeTaints",
            where=f"pools[{index}].taints",
        )
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if pool.taints:
        spec["nodeTaints"] = taints(pool)
        if queues.inject_tolerations:
            spec["tolerations"] = tolerations(pool)
    return {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": pool.name, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


# --- cluster queues -------------------------------------------------------------------------------------


def provisioned_pools(profile: Profile) -> list[Pool]:
    """Pools whose nodes cluster-autoscaler adds: their flavors take the ProvisioningRequest check."""
    if profile.autoscaler != Autoscaler.CLUSTER_AUTOSCALER:
        return []
    return [p for p in profile.pools if p.kind == PoolKind.NODE_GROUP]


def _quota(quota: Quota, resource: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": resource, "nominalQuota": quota.nominal}
    if quota.borrowing_limit is not None:
        out["borrowingLimit"] = quota.borrowing_limit
    if quota.lending_limit is not None:
        out["lendingLimit"] = quota.lending_limit
    return out


def _resource_quotas(
    profile: Profile, team_index: int, pool: Pool, given: PoolQuota | None
) -> list[dict[str, Any]]:
    if given is None:
        return [{"name": r, "nominalQuota": 0} for r in RESOURCES]
    out = []
    team = profile.queues.teams[team_index]  # type: ignore[union-attr]
    for resource in RESOURCES:
        quota = given.gpu if resource == GPU_RESOURCE else getattr(given, resource)
        if quota is None:
            capacity = pool_capacity(profile, pool)
            default = capacity.text.get(resource)
            if default is None:
                j = team.quotas.index(given)
                raise InputError(
                    f"pool {pool.name} sets no {resource} limit to default the team's quota to; give one",
                    where=f"queues.teams[{team_index}].quotas[{j}].{resource}",
                )
            quota = Quota(nominal=default)
        out.append(_quota(quota, resource))
    return out


def cluster_queue(profile: Profile, team_index: int, team: Team) -> dict[str, Any]:
    queues = profile.queues
    assert queues is not None
    given = {q.pool: q for q in team.quotas}
    flavors = [
        {"name": pool.name, "resources": _resource_quotas(profile, team_index, pool, given.get(pool.name))}
        for pool in profile.pools
    ]
    spec: dict[str, Any] = {
        "cohortName": queues.cohort_of(team),
        "namespaceSelector": {
            "matchExpressions": [
                {"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(team.namespaces)}
            ]
        },
        "queueingStrategy": queues.queueing_strategy,
        "preemption": {
            "reclaimWithinCohort": queues.preemption.reclaim_within_cohort,
            "withinClusterQueue": queues.preemption.within_cluster_queue,
        },
        "resourceGroups": [{"coveredResources": list(RESOURCES), "flavors": flavors}],
    }
    checked = provisioned_pools(profile)
    if checked:
        spec["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": PROVISIONING_NAME, "onFlavors": [p.name for p in checked]}]
        }
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": team.name, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def _provisioning(profile: Profile, queues: Queues) -> list[dict[str, Any]]:
    if not provisioned_pools(profile):
        return []
    meta = {"name": PROVISIONING_NAME, "labels": dict(MANAGED_BY)}
    return [
        {
            "apiVersion": API,
            "kind": "ProvisioningRequestConfig",
            "metadata": dict(meta),
            "spec": {"provisioningClassName": queues.provisioning_class, "managedResources": [GPU_RESOURCE]},
        },
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": dict(meta),
            "spec": {
                "controllerName": PROVISIONING_CONTROLLER,
                "parameters": {
                    "apiGroup": GROUP,
                    "kind": "ProvisioningRequestConfig",
                    "name": PROVISIONING_NAME,
                },
            },
        },
    ]


def _rendered_elsewhere(profile: Profile) -> set[str]:
    """Namespaces another target already renders (rbac, monitoring, storage): not rendered twice."""
    return {profile.monitoring.namespace} | {v.namespace for v in profile.storage.volumes}


def render(profile: Profile) -> list[dict[str, Any]]:
    queues = profile.queues
    if queues is None:
        return []
    docs: list[dict[str, Any]] = []
    elsewhere = _rendered_elsewhere(profile)
    namespaces = sorted({ns for t in queues.teams for ns in t.namespaces} - elsewhere)
    for ns in namespaces:
        labels = {NAMESPACE_LABEL: ns, **MANAGED_BY}
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    for pc in queues.priority_classes:
        wpc: dict[str, Any] = {
            "apiVersion": API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": pc.name, "labels": dict(MANAGED_BY)},
            "value": pc.value,
        }
        if pc.description:
            wpc["description"] = pc.description
        docs.append(wpc)
    docs += [resource_flavor(profile, pool, queues) for pool in profile.pools]
    docs += _provisioning(profile, queues)
    for cohort in sorted({queues.cohort_of(t) for t in queues.teams}):
        docs.append(
            {
                "apiVersion": API,
                "kind": "Cohort",
                "metadata": {"name": cohort, "labels": dict(MANAGED_BY)},
                "spec": {},
            }
        )
    docs += [cluster_queue(profile, i, team) for i, team in enumerate(queues.teams)]
    for team in queues.teams:
        for ns in team.namespaces:
            docs.append(
                {
                    "apiVersion": API,
                    "kind": "LocalQueue",
                    "metadata": {"name": team.queue_name, "namespace": ns, "labels": dict(MANAGED_BY)},
                    "spec": {"clusterQueue": team.name},
                }
            )
    return docs


def notes(profile: Profile) -> list[str]:
    lines = [
        f"Needs Kueue {KUEUE_VERSION}: kubectl apply --server-side -f "
        f"https://github.com/kubernetes-sigs/kueue/releases/download/{KUEUE_VERSION}/manifests.yaml",
        "Jobs name their team's LocalQueue: metadata.labels kueue.x-k8s.io/queue-name: <team>; "
        "check admission with kgpu queue -c <this file> -w <jobs> --profile <profile>.",
    ]
    if provisioned_pools(profile):
        lines.append(
            "The ProvisioningRequest check needs cluster-autoscaler 1.30.1 or later run with "
            "--enable-provisioning-requests=true (chart: extraArgs.enable-provisioning-requests: true)."
        )
    return lines

"""Kueue in front of the GPU nodes (docs/queue.md): queues that admit nothing, quota no node can hold, and
jobs that wait for quota or, once admitted, for nodes.

Read from the snapshot's Kueue objects (kueue.x-k8s.io, as ``kgpu snapshot`` saves them with the Namespaces)
and settled as Kueue's scheduler would (``kgpu.sim.queue.admission.settle``), so a ClusterQueue's state and a
pending Workload's reason are Kueue's own words:

- ``kueue-clusterqueue-inactive``: the ClusterQueue's Active condition as Kueue writes it (a missing
  ResourceFlavor or AdmissionCheck, a stop policy): nothing queued there is admitted;
- ``kueue-localqueue-no-clusterqueue``: a LocalQueue whose ``spec.clusterQueue`` names no ClusterQueue (its
  Workloads get "ClusterQueue x doesn't exist"); ``kueue-queue-name-unknown``: Workloads (``spec.queueName``)
  and pods (``kueue.x-k8s.io/queue-name``) that name a LocalQueue their namespace does not have;
- ``kueue-flavor-no-nodes``: GPU quota in a ResourceFlavor whose ``nodeLabels`` no node with that GPU
  resource carries, and no Karpenter NodePool could give: one could when an instance type of kgpu's catalog
  that its requirements allow (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``, as
  Karpenter's scheduling.Requirements) has GPUs of that vendor and the instance-type labels the flavor
  names, and neither its template labels nor its requirements pin a flavor label to another value (labels
  none of them mention, such as GPU Feature Discovery's, are its nodes' to add; a NodeClass of another
  provider, or an instance type the catalog lacks, is judged on its labels and requirements alone). Kueue
  admits the job and its pods stay Pending;
- ``kueue-quota-beyond-capacity``: a flavor's nominal GPU quota, summed over ClusterQueues and Cohorts, above
  what the nodes it selects offer plus what the NodePools that could launch more may still add
  (``spec.limits``); only where every such NodePool has a GPU limit;
- ``kueue-pending-on-quota`` (info): Workloads Kueue keeps pending, per ClusterQueue, with one of its messages;
  ``kueue-pending-on-nodes``: pods of admitted Workloads (``kueue.x-k8s.io/podset``, which the job
  integrations set on admission: pkg/controller/jobframework/reconciler.go) the scheduler cannot place:
  quota is there, nodes are not;
- ``kueue-preemption-loop``: Workloads Kueue preempted 3 or more times (``status.schedulingStats.evictions``,
  reason Preempted, as pkg/workload/workload.go counts them; ``status.requeueState.count`` counts only
  PodsReady-timeout evictions), per ClusterQueue, or the loop ``settle`` detects.

One finding per object, or per queue and namespace (thousands of Workloads make a few lines); a cluster
without Kueue gets none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kgpu.doctor.common import names
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding
from kgpu.doctor.state import ClusterState
from kgpu.model.gpus import is_gpu

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PODSET_LABEL = "kueue.x-k8s.io/podset"
LOOP_COUNT = 3


def _gpu(resource: str) -> bool:
    return is_gpu(resource)


def _kueue(state: ClusterState) -> Any:
    """The typed Kueue objects and their settled state, once per state; None without a ClusterQueue."""
    cached = getattr(state, "_kueue_settled", None)
    if cached is not None:
        return cached or None
    objects = state.kueue
    if not any(o.get("kind") == "ClusterQueue" for o in objects):
        state._kueue_settled = ()
        return None
    from kgpu.errors import InputError
    from kgpu.model.kueue import read_kueue
    from kgpu.sim.queue.admission import settle

    try:
        got: Any = (read_kueue(objects, state.source), settle(objects, source=state.source))
    except InputError as exc:  # the rest of the snapshot stays usable: said once, as a finding
        got = exc
    state._kueue_settled = got
    return got


def check_queues(state: ClusterState) -> Iterator[Finding]:
    got = _kueue(state)
    if got is None:
        return
    if isinstance(got, Exception):
        yield Finding(
            "kueue-unreadable",
            WARNING,
            "Kueue",
            f"Kueue's objects cannot be read as Kueue reads them: {got}; no Kueue check ran",
            "kubectl get clusterqueues,localqueues,resourceflavors,cohorts -o yaml   # fix the object named",
        )
        return
    kueue, settled = got
    yield from _inactive(settled)
    yield from _local_queues(state, kueue, settled)
    if state.nodes or state.nodepools:  # an input of Kueue's objects alone says nothing of the nodes
        yield from _flavors(state, kueue)
    yield from _pending(state, settled)
    yield from _loops(state, settled)


def _inactive(settled: Any) -> Iterator[Finding]:
    for name, usage in sorted(settled.cluster_queues.items()):
        if usage.active:
            continue
        waiting = f"; {usage.pending} Workload(s) wait there" if usage.pending else ""
        yield Finding(
            "kueue-clusterqueue-inactive",
            ERROR,
            f"ClusterQueue/{name}",
            f"inactive ({usage.reason}): {usage.message}{waiting}",
            f"kubectl get clusterqueue {name} -o yaml   # create the ResourceFlavors and AdmissionChecks it "
            "names (kubectl get resourceflavors,admissionchecks), or fix the names in spec.resourceGroups",
        )


def _local_queues(state: ClusterState, kueue: Any, settled: Any) -> Iterator[Finding]:
    waiting: dict[tuple[str, str], list[str]] = {}  # (namespace, LocalQueue) -> its Workloads, not finished
    for wl in kueue.workloads:
        if wl.key in settled.workloads and not settled.workloads[wl.key].admitted:
            waiting.setdefault((wl.namespace, wl.queue_name), []).append(wl.name)
    for (ns, name), lq in sorted(kueue.local_queues.items()):
        if lq.cluster_queue not in kueue.cluster_queues:
            held = waiting.get((ns, name), [])
            yield Finding(
                "kueue-localqueue-no-clusterqueue",
                ERROR,
                f"LocalQueue/{ns}/{name}",
                f"points to ClusterQueue {lq.cluster_queue}, which does not exist: its Workloads stay pending "
                f'("ClusterQueue {lq.cluster_queue} doesn\'t exist")'
                + (f"; {len(held)} wait there ({names(sorted(held), 3)})" if held else ""),
                f"kubectl patch localqueue -n {ns} {name} --type merge -p "
                f'\'{{"spec":{{"clusterQueue":"<one of: {names(sorted(kueue.cluster_queues), 3)}>"}}}}\'',
            )
    unknown: dict[tuple[str, str], tuple[list[str], list[str]]] = {}  # -> (Workloads, pods)
    for (ns, queue), wls in waiting.items():
        if (ns, queue) not in kueue.local_queues:
            unknown.setdefault((ns, queue), ([], []))[0].extend(wls)
    for pod in state.pods:
        named = pod.labels.get(QUEUE_LABEL)
        if named and not pod.terminated and (pod.namespace, named) not in kueue.local_queues:
            unknown.setdefault((pod.namespace, named), ([], []))[1].append(pod.name)
    for (ns, queue), (wls, pods) in sorted(unknown.items()):
        here = sorted(n for n_ns, n in kueue.local_queues if n_ns == ns)
        who = [f"{len(wls)} Workload(s) ({names(sorted(wls), 3)})"] if wls else []
        who += [f"{len(pods)} pod(s) ({names(sorted(pods), 3)})"] if pods else []
        yield Finding(
            "kueue-queue-name-unknown",
            WARNING,
            f"Namespace/{ns}",
            f"{' and '.join(who)} name LocalQueue {queue}, which namespace {ns} does not have"
            + (f" (it has {names(here, 3)})" if here else " (it has no LocalQueue)")
            + f': Kueue never admits them ("LocalQueue {queue} doesn\'t exist")',
            f"kubectl get localqueues -n {ns}   # set the job's {QUEUE_LABEL} label to one of them, "
            f"or create LocalQueue {queue}",
        )


def _quota_by_flavor(kueue: Any) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """(flavor, GPU resource) -> (nominal quota summed over ClusterQueues and Cohorts, who gives it)."""
    out: dict[tuple[str, str], tuple[int, list[str]]] = {}
    owners = [(f"ClusterQueue {n}", cq.resource_groups) for n, cq in kueue.cluster_queues.items()]
    owners += [(f"Cohort {n}", c.resource_groups) for n, c in kueue.cohorts.items()]
    for who, groups in owners:
        for group in groups:
            for fq in group.flavors:
                for resource, quota in fq.resources:
                    if _gpu(resource) and quota.nominal > 0:
                        total, by = out.get((fq.name, resource), (0, []))
                        out[(fq.name, resource)] = (total + quota.nominal, [*by, who])
    return out


def _map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# Labels a node gets from its offering (zone, capacity type), not from its instance type: a flavor's or a
# requirement's value for them is checked against the NodePool alone.
_OFFERING_LABELS = {
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "karpenter.sh/capacity-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
}
_AWS_NODECLASS_GROUP = "karpenter.k8s.aws"


def _allows(req: Mapping[str, Any], value: str | None) -> bool:
    """A Karpenter requirement (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``) against a
    label's value, None when the node lacks the label (``NotIn`` and ``DoesNotExist`` allow that)."""
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            have, bound = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if op == "Gt" else have < bound
    return True


def _requirements(pool: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    reqs = _map(_map(_map(pool.get("spec")).get("template")).get("spec")).get("requirements")
    return [r for r in reqs if isinstance(r, dict)] if isinstance(reqs, list) else []


def _type_labels(pool: Mapping[str, Any], vendor: str) -> list[dict[str, str]] | None:
    """The instance-type labels of the catalog's types this NodePool may launch with ``vendor``'s GPUs;
    None when the catalog cannot say (a NodeClass of another provider, an instance type or family the
    catalog does not list): then only the NodePool's labels and requirements are judged."""
    spec = _map(pool.get("spec"))
    group = _map(_map(_map(spec.get("template")).get("spec")).get("nodeClassRef")).get("group")
    if group != _AWS_NODECLASS_GROUP:
        return None
    from kgpu.catalog.aws import aws_catalog

    types = aws_catalog().types()
    known = {"node.kubernetes.io/instance-type": {t.name for t in types}}
    known["karpenter.k8s.aws/instance-family"] = {t.family for t in types}
    reqs = _requirements(pool)
    for req in reqs:
        key = str(req.get("key"))
        if (
            key in known
            and req.get("operator") == "In"
            and not set(map(str, req.get("values") or [])) <= known[key]
        ):
            return None
    out = []
    for t in types:
        if not t.has_gpu or t.gpu_manufacturer != vendor:
            continue
        labels = {k: v for k, v in t.labels("", "", "").items() if k not in _OFFERING_LABELS}
        if all(_allows(r, labels.get(str(r.get("key")))) for r in reqs if r.get("key") in labels):
            out.append(labels)
    return out


def _nodepool_could(
    pool: Mapping[str, Any], labels: Mapping[str, str], types: list[dict[str, str]] | None
) -> bool:
    """Whether a NodePool could launch a node with these labels that offers ``resource``: an instance type
    its requirements allow has such GPUs and the labels it sets (``node.kubernetes.io/instance-type``,
    ``karpenter.k8s.aws/instance-gpu-name``, ...), and nothing in its template pins a key to other values
    (labels neither mentions, such as GPU Feature Discovery's, are its nodes' to add)."""
    template = _map(_map(pool.get("spec")).get("template"))
    fixed = dict(_map(_map(template.get("metadata")).get("labels")))
    name = _map(pool.get("metadata")).get("name")
    if isinstance(name, str):
        fixed["karpenter.sh/nodepool"] = name
    reqs = _requirements(pool)
    for key, value in labels.items():
        if key in fixed and fixed[key] != value:
            return False
        if not all(_allows(r, value) for r in reqs if r.get("key") == key):
            return False
    if types is None:
        return True
    return any(all(t.get(k, v) == v for k, v in labels.items()) for t in types)


def _pool_gpu_limit(pool: Mapping[str, Any], resource: str) -> int | None:
    from kgpu.errors import InputError
    from kgpu.model.quantity import resource_amount

    raw = _map(_map(pool.get("spec")).get("limits")).get(resource)
    if raw is None:
        return None
    try:
        return resource_amount(raw)
    except InputError:  # the NodePool's own check says what is wrong; here it is no bound
        return None


def _pool_name(pool: Mapping[str, Any]) -> str:
    return str(_map(pool.get("metadata")).get("name") or "")


def _flavors(state: ClusterState, kueue: Any) -> Iterator[Finding]:
    launchable: dict[tuple[int, str], list[dict[str, str]] | None] = {}  # (NodePool, GPU vendor) -> types
    for (flavor_name, resource), (quota, owners) in sorted(_quota_by_flavor(kueue).items()):
        flavor = kueue.flavors.get(flavor_name)
        if flavor is None:
            continue  # the ClusterQueue is inactive: said above
        labels = dict(flavor.node_labels)
        nodes = [
            n
            for n in state.nodes
            if n.model.alloc(resource) > 0 and all(n.labels.get(k) == v for k, v in labels.items())
        ]
        vendor = "amd" if resource.startswith("amd.com/") else "nvidia"
        pools = []
        for i, pool in enumerate(state.nodepools):
            if (i, vendor) not in launchable:
                launchable[(i, vendor)] = _type_labels(pool, vendor)
            if _nodepool_could(pool, labels, launchable[(i, vendor)]):
                pools.append(pool)
        selects = ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "no labels: every node"
        if not nodes and not pools:
            yield Finding(
                "kueue-flavor-no-nodes",
                WARNING,
                f"ResourceFlavor/{flavor_name}",
                f"{quota} {resource} of quota ({names(owners, 3)}) in a flavor whose nodeLabels ({selects}) no node "
                f"offering {resource} carries"
                + (", and no NodePool can launch one" if state.nodepools else "")
                + ": Kueue admits jobs there and their pods stay Pending",
                f"kubectl get nodes -l {','.join(f'{k}={v}' for k, v in sorted(labels.items()))} "
                f"-o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.{resource.replace('.', chr(92) + '.')}"
                "   # fix the flavor's nodeLabels to the labels the GPU nodes carry",
            )
            continue
        have = sum(n.model.alloc(resource) for n in nodes)
        limits = [_pool_gpu_limit(p, resource) for p in pools]
        if any(limit is None for limit in limits):
            continue  # a NodePool without a GPU limit may launch any number
        launched = {n.labels.get("karpenter.sh/nodepool") for n in nodes}
        more = sum(
            max(
                0,
                (limit or 0)
                - sum(
                    n.model.alloc(resource)
                    for n in nodes
                    if n.labels.get("karpenter.sh/nodepool") == _pool_name(p)
                ),
            )
            for p, limit in zip(pools, limits, strict=True)
        )
        if quota > have + more:
            pools_said = (
                f" plus {more} the NodePools {names(sorted(_pool_name(p) for p in pools), 3)} "
                "may still launch (spec.limits)"
                if pools
                else ""
            )
            yield Finding(
                "kueue-quota-beyond-capacity",
                WARNING,
                f"ResourceFlavor/{flavor_name}",
                f"nominal quota of {quota} {resource} ({names(owners, 3)}) but the {len(nodes)} node(s) it selects "
                f"offer {have}{pools_said}: Kueue admits up to {quota} and the pods beyond {have + more} stay "
                "Pending"
                + (f" (nodes of {names(sorted(x for x in launched if x), 3)})" if any(launched) else ""),
                "lower the nominalQuota to what the nodes can hold, or raise the NodePools' nvidia.com/gpu limits",
            )


def _pending(state: ClusterState, settled: Any) -> Iterator[Finding]:
    by_cq: dict[str, list[tuple[tuple[str, str], str]]] = {}
    for key, out in sorted(settled.workloads.items()):
        if not out.admitted and out.cluster_queue and not out.evicted:
            by_cq.setdefault(out.cluster_queue, []).append((key, out.message))
    for cq, waiting in sorted(by_cq.items()):
        said = next((m for _, m in waiting if m), "")
        yield Finding(
            "kueue-pending-on-quota",
            INFO,
            f"ClusterQueue/{cq}",
            f"{len(waiting)} Workload(s) wait for quota ({names(sorted('/'.join(k) for k, _ in waiting), 3)})"
            + (f"; Kueue says: {said}" if said else ""),
            f"kgpu queue -c <snapshot> --job {'/'.join(waiting[0][0])}   # when it starts, and what would let it start now",
        )
    stuck: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for pod in state.pods:
        if not pod.pending or PODSET_LABEL not in pod.labels:
            continue
        cond = next(
            (
                c
                for c in (pod.raw.get("status") or {}).get("conditions") or []
                if isinstance(c, dict) and c.get("type") == "PodScheduled"
            ),
            None,
        )
        if cond is None or cond.get("status") != "False" or cond.get("reason") != "Unschedulable":
            continue
        stuck.setdefault(pod.namespace, []).append(pod.name)
        reasons.setdefault(pod.namespace, str(cond.get("message") or ""))
    for ns, pods in sorted(stuck.items()):
        yield Finding(
            "kueue-pending-on-nodes",
            WARNING,
            f"Namespace/{ns}",
            f"{len(pods)} pod(s) of admitted Workloads ({names(sorted(pods), 3)}) cannot be scheduled: Kueue reserved "
            f"the quota, the nodes cannot hold them"
            + (f"; the scheduler says: {reasons[ns]}" if reasons[ns] else ""),
            "kgpu simulate -c <snapshot>   # why, in the scheduler's words, and what a NodePool would launch; "
            "check the flavor's nodeLabels and taints against the GPU nodes",
        )


def _preemptions(obj: Mapping[str, Any]) -> int:
    """How often Kueue preempted this Workload: ``status.schedulingStats.evictions`` counts evictions per
    reason (pkg/workload/workload.go workloadEvictionStateInc); ``requeueState.count`` counts only the
    PodsReady-timeout ones (pkg/controller/core/workload_controller.go)."""
    stats = _map(_map(obj.get("status")).get("schedulingStats")).get("evictions")
    return sum(
        e["count"]
        for e in (stats if isinstance(stats, list) else [])
        if isinstance(e, dict) and e.get("reason") == "Preempted" and isinstance(e.get("count"), int)
    )


def _loops(state: ClusterState, settled: Any) -> Iterator[Finding]:
    by_cq: dict[str, list[tuple[int, str, str]]] = {}  # ClusterQueue -> (preemptions, ns/name, last message)
    for obj in state.kueue:
        if obj.get("kind") != "Workload":
            continue
        count = _preemptions(obj)
        if count < LOOP_COUNT:
            continue
        meta = _map(obj.get("metadata"))
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        out = settled.workloads.get((ns, name))
        if out is None:  # finished
            continue
        conditions = _map(obj.get("status")).get("conditions")
        said = next(
            (
                str(c.get("message") or "")
                for c in (conditions if isinstance(conditions, list) else [])
                if isinstance(c, dict) and c.get("type") in ("Preempted", "Evicted") and c.get("message")
            ),
            "",
        )
        where = f"ClusterQueue/{out.cluster_queue}" if out.cluster_queue else f"Namespace/{ns}"
        by_cq.setdefault(where, []).append((count, f"{ns}/{name}", said))
    for where, looping in sorted(by_cq.items()):
        looping.sort(key=lambda x: (-x[0], x[1]))
        said = next((m for _, _, m in looping if m), "")
        yield Finding(
            "kueue-preemption-loop",
            WARNING,
            where,
            f"{len(looping)} Workload(s) preempted {LOOP_COUNT} or more times "
            f"({names([f'{n} {c}x' for c, n, _ in looping], 3)}; status.schedulingStats.evictions)"
            + (f"; Kueue says: {said[:300]}" if said else ""),
            "kgpu queue -c <snapshot>   # who preempts them; give them a higher WorkloadPriorityClass, or make the "
            "preemptors' ClusterQueue stop borrowing (borrowWithinCohort, reclaimWithinCohort)",
        )
    for warning in settled.warnings:
        if warning.startswith("preemption loop"):
            yield Finding("kueue-preemption-loop", WARNING, "Kueue", warning, "kgpu queue -c <snapshot>")


CHECKS = {
    "kueue-unreadable": check_queues,
    "kueue-clusterqueue-inactive": check_queues,
    "kueue-localqueue-no-clusterqueue": check_queues,
    "kueue-queue-name-unknown": check_queues,
    "kueue-flavor-no-nodes": check_queues,
    "kueue-quota-beyond-capacity": check_queues,
    "kueue-pending-on-quota": check_queues,
    "kueue-pending-on-nodes": check_queues,
    "kueue-preemption-loop": check_queues,
}

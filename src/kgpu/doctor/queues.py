"""Kueue in front of the GPU nodes (docs/queue.md): queues that admit nothing, quota no node can hold, and
jobs that wait for quota or, once admitted, for nodes.

Read from the snapshot's Kueue objects (kueue.x-k8s.io, as ``kgpu snapshot`` saves them with the Namespaces)
and settled as Kueue's scheduler would (``kgpu.sim.queue.admission.settle``), so a ClusterQueue's state and a
pending Workload's reason are Kueue's own words:

- ``kueue-clusterqueue-inactive``: the ClusterQueue's Active condition as Kueue writes it (a missing
  ResourceFlavor or AdmissionCheck, a stop policy): nothing queued there is admitted;
- ``kueue-localqueue-no-clusterqueue``: a LocalQueue whose ``spec.clusterQueue`` names no ClusterQueue (its
  Workloads get "ClusterQueue x doesn't exist"); ``kueue-queue-name-unknown``: pods that name, in
  ``kueue.x-k8s.io/queue-name``, a LocalQueue their namespace does not have;
- ``kueue-flavor-no-nodes``: GPU quota in a ResourceFlavor whose ``nodeLabels`` no node with that GPU
  resource carries, and no Karpenter NodePool could give (a NodePool contradicts a label when its template
  labels or requirements pin the key to other values); Kueue admits the job and its pods stay Pending;
- ``kueue-quota-beyond-capacity``: a flavor's nominal GPU quota, summed over ClusterQueues and Cohorts, above
  what the nodes it selects offer plus what the NodePools that could launch more may still add
  (``spec.limits``); only where every such NodePool has a GPU limit;
- ``kueue-pending-on-quota`` (info): Workloads Kueue keeps pending, per ClusterQueue, with one of its messages;
  ``kueue-pending-on-nodes``: pods of admitted Workloads (``kueue.x-k8s.io/podset``) the scheduler cannot
  place: quota is there, nodes are not;
- ``kueue-preemption-loop``: Workloads preempted again and again (``status.requeueState.count`` of 3 or
  more with an Evicted condition, or the loop ``settle`` detects).

One finding per object, grouped by doctor's output as the others; a cluster without Kueue gets none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kgpu.doctor.common import names
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding
from kgpu.doctor.state import ClusterState

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PODSET_LABEL = "kueue.x-k8s.io/podset"
GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "amd.com/gpu")
LOOP_COUNT = 3


def _gpu(resource: str) -> bool:
    return resource.startswith(GPU_PREFIXES)


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
    yield from _local_queues(state, kueue)
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


def _local_queues(state: ClusterState, kueue: Any) -> Iterator[Finding]:
    for (ns, name), lq in sorted(kueue.local_queues.items()):
        if lq.cluster_queue not in kueue.cluster_queues:
            yield Finding(
                "kueue-localqueue-no-clusterqueue",
                ERROR,
                f"LocalQueue/{ns}/{name}",
                f"points to ClusterQueue {lq.cluster_queue}, which does not exist: its Workloads stay pending "
                f'("ClusterQueue {lq.cluster_queue} doesn\'t exist")',
                f"kubectl patch localqueue -n {ns} {name} --type merge -p "
                f'\'{{"spec":{{"clusterQueue":"<one of: {names(sorted(kueue.cluster_queues), 3)}>"}}}}\'',
            )
    unknown: dict[tuple[str, str], list[str]] = {}
    for pod in state.pods:
        queue = pod.labels.get(QUEUE_LABEL)
        if queue and not pod.terminated and (pod.namespace, queue) not in kueue.local_queues:
            unknown.setdefault((pod.namespace, queue), []).append(pod.name)
    for (ns, queue), pods in sorted(unknown.items()):
        here = sorted(n for n_ns, n in kueue.local_queues if n_ns == ns)
        yield Finding(
            "kueue-queue-name-unknown",
            WARNING,
            f"Namespace/{ns}",
            f"{len(pods)} pod(s) ({names(sorted(pods), 3)}) name LocalQueue {queue} in {QUEUE_LABEL}, which "
            f"namespace {ns} does not have"
            + (f" (it has {names(here, 3)})" if here else " (it has no LocalQueue)")
            + ": Kueue never admits them",
            f"kubectl get localqueues -n {ns}   # set {QUEUE_LABEL} to one of them, or create LocalQueue {queue}",
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


def _nodepool_could(pool: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a NodePool could launch a node with these labels: nothing in its template pins a key to other
    values (labels it does not mention, such as GPU Feature Discovery's, are its nodes' to add)."""
    template = _map(_map(pool.get("spec")).get("template"))
    fixed = dict(_map(_map(template.get("metadata")).get("labels")))
    name = _map(pool.get("metadata")).get("name")
    if isinstance(name, str):
        fixed["karpenter.sh/nodepool"] = name
    requirements = _map(template.get("spec")).get("requirements")
    for key, value in labels.items():
        if key in fixed and fixed[key] != value:
            return False
        for req in requirements if isinstance(requirements, list) else []:
            if not isinstance(req, dict) or req.get("key") != key:
                continue
            values = [str(v) for v in req.get("values") or []]
            op = req.get("operator")
            if (
                (op == "In" and value not in values)
                or (op == "NotIn" and value in values)
                or op == "DoesNotExist"
            ):
                return False
    return True


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
        pools = [p for p in state.nodepools if _nodepool_could(p, labels)]
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


def _loops(state: ClusterState, settled: Any) -> Iterator[Finding]:
    for obj in state.kueue:
        if obj.get("kind") != "Workload":
            continue
        status = _map(obj.get("status"))
        count = _map(status.get("requeueState")).get("count")
        conditions = status.get("conditions")
        evicted = (
            next(
                (c for c in conditions if isinstance(c, dict) and c.get("type") == "Evicted"),
                None,
            )
            if isinstance(conditions, list)
            else None
        )
        if not isinstance(count, int) or count < LOOP_COUNT or evicted is None:
            continue
        meta = _map(obj.get("metadata"))
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        yield Finding(
            "kueue-preemption-loop",
            WARNING,
            f"Workload/{ns}/{name}",
            f"requeued {count} times after eviction (last: {evicted.get('reason', '')}: "
            f"{str(evicted.get('message', ''))[:200]})",
            "kgpu queue -c <snapshot>   # who preempts it; give it a higher WorkloadPriorityClass, or make the "
            "preemptor's ClusterQueue stop borrowing (borrowWithinCohort, reclaimWithinCohort)",
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

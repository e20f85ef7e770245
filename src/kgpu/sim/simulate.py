"""One simulation: a cluster snapshot, pods to place, and (optionally) capacity that can grow.

The queue is what kube-scheduler's PrioritySort gives: higher priority first, then arrival order. Arrival
order is: DaemonSet pods (they run before anything else on a node), pending pods found in the cluster
files, then the workload's pods in file order.

A pod that fits nowhere goes through PostFilter (``kgpu.sim.scheduler.plugins.defaultpreemption``): it may evict pods of lower
priority and take their node. Evicted pods are reported ``Preempted``; those a controller owns come back
as new pending pods, queued behind every pending pod of their priority or higher (the controller creates
them now). Only what preemption cannot place is handed to the provisioner: kube-scheduler preempts before
the autoscalers see a pod as unschedulable, and Karpenter leaves nominated pods alone.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as _replace_pod
from typing import Any, Protocol

from kgpu.model.inputs import Objects, resolve_priorities
from kgpu.model.objects import DaemonSet, Node, NodeSelector, Pod, PodSpecInfo, Requirement, Term, Toleration
from kgpu.model.predicates import static_reasons
from kgpu.sim.scheduler.plugins.defaultpreemption import (
    NOT_HELPFUL,
    PREFILTER_STOPPED,
    Outcome,
    Preemption,
    postfilter_words,
)
from kgpu.sim.scheduler.scheduler import Decision, NodeState, Scheduler
from kgpu.sim.sharing import (
    admission_warnings,
    cluster_hints,
    existing_node_warnings,
    overlay_warnings,
    resource_hints,
    shared_nodes_report,
    shared_profile,
)
from kgpu.sim.unmodelled import ANY, KARPENTER, Detector, Unmodelled

SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
PROVISIONED = "Provisioned"
PREEMPTED = "Preempted"

# Tolerations the DaemonSet controller adds to every daemon pod (pkg/controller/daemon/util:
# AddOrUpdateDaemonPodTolerations): it must run on not-ready, unreachable, pressured and cordoned nodes.
DAEMON_TOLERATIONS = (
    Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
)


@dataclass(slots=True)
class Placement:
    pod: Pod
    phase: str
    node: str | None = None
    reason: str | None = None
    new_node: Any = None  # set by provisioning: the NewNode the pod landed on
    preempted_by: str | None = None  # Preempted: the pod (namespace/name) that evicted it
    victims: list[str] = field(default_factory=list)  # the pods this one evicted to run (namespace/name)
    recreated: bool = False  # a new pod its controller created for a preempted one
    warnings: tuple[Unmodelled, ...] = ()  # what its outcome may depend on that kgpu does not model
    devices: list[dict[str, Any]] = field(default_factory=list)  # DRA: the devices allocated for its claims

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.pod.namespace,
            "name": self.pod.name,
            "phase": self.phase,
            "node": self.node,
            "reason": self.reason,
        }
        if self.new_node is not None:
            out.update(self.new_node.placement_fields())
        if self.preempted_by is not None:
            out["preempted_by"] = self.preempted_by
        if self.victims:
            out["preempted"] = list(self.victims)
        if self.recreated:
            out["recreated"] = True
        if self.devices:
            out["devices"] = list(self.devices)
        out["warnings"] = [w.as_dict() for w in self.warnings]
        return out


@dataclass
class SimulationResult:
    placements: list[Placement]
    nodes: list[NodeState]
    new_nodes: list[Any] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # NVIDIA's DRA GPUs per node and kind (dra:gpu, dra:mig-<profile>): (in use, published); the node view's
    # GPU bar (kgpu.model.gpus names the kinds)
    dra_gpus: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)

    @property
    def unschedulable(self) -> list[Placement]:
        return [p for p in self.placements if p.phase == UNSCHEDULABLE]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scheduled": sum(1 for p in self.placements if p.phase == SCHEDULED),
            "unschedulable": sum(1 for p in self.placements if p.phase == UNSCHEDULABLE),
        }
        preempted = sum(1 for p in self.placements if p.phase == PREEMPTED)
        if preempted:
            out["preempted"] = preempted
        if self.new_nodes or "hourly_cost" in self.extra:
            out["provisioned"] = sum(1 for p in self.placements if p.phase == PROVISIONED)
        out.update(self.extra.get("summary", {}))
        out["with_warnings"] = sum(1 for p in self.placements if p.warnings)
        return out

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pods": [p.as_dict() for p in self.placements], "summary": self.summary()}
        if self.new_nodes:
            out["new_nodes"] = [n.as_dict() for n in self.new_nodes]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        for key, value in self.extra.items():
            if key != "summary":
                out[key] = value
        return out


class Provisioner(Protocol):
    """Capacity that grows: called with the pods kube-scheduler could not place (in queue order).

    It adds nodes to the scheduler (``Scheduler.add_node``) and returns, per pod key, the new node the
    pod is meant for, or an explanation of why no pool can help.
    """

    def provision(self, pending: Sequence[Pod], scheduler: Scheduler) -> dict[str, Any]: ...


def daemon_pods(ds: DaemonSet, nodes: Sequence[Node], present: DaemonPodIndex | None = None) -> list[Pod]:
    """One pod per node the DaemonSet controller finds eligible (taints with its added tolerations, and
    the template's node affinity/selector), pinned to its node with matchFields metadata.name; none on a
    node where a pod the DaemonSet owns is already (``present``: the pods read with the cluster)."""
    template = _daemon_template(ds.template)
    has = present.nodes_of(ds) if present is not None else frozenset()
    pods = []
    for node in nodes:
        if node.name in has or static_reasons(template, node):
            continue
        pinned = _replace(
            template,
            affinity=NodeSelector((Term((), (Requirement("metadata.name", "In", (node.name,)),)),)),
        )
        pods.append(
            Pod(ds.namespace, f"{ds.name}-{node.name}", pinned, ds.labels, ds.annotations,
                owner_kind="DaemonSet", owner_name=ds.name, source=ds.source, limits=ds.limits)
        )
    return pods


class DaemonPodIndex:
    """Where the DaemonSets' own pods already are, from the pods given (terminated ones left out: the
    controller replaces a Failed daemon pod).

    The DaemonSet controller creates a pod for an eligible node unless one it owns is there already (its
    ownerReference with ``controller: true``, kind DaemonSet). A pod is on the node it is bound to
    (spec.nodeName), or, still pending, on the node the controller pinned it to (the single-value
    ``metadata.name`` matchFields requirement it writes into the pod's node affinity). Ownership is by uid
    where both the DaemonSet and the reference carry one (a DaemonSet deleted and created again under the
    same name owns none of the old pods), else by namespace and name (hand-written manifests).

    This one rule serves a ``kubectl get nodes,pods,ds -A -o json`` List and a ``kgpu snapshot`` alike:
    both hold the pods the controller created, so neither gets them twice.
    """

    def __init__(self, pods: Iterable[Pod]) -> None:
        self._by_name: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for pod in pods:
            if pod.owner_kind != "DaemonSet" or pod.terminated:
                continue
            node = pod.node_name or _pinned_node(pod.spec)
            if node:
                self._by_name.setdefault((pod.namespace, pod.owner_name), []).append((pod.owner_uid, node))

    def nodes_of(self, ds: DaemonSet) -> frozenset[str]:
        return frozenset(
            node
            for uid, node in self._by_name.get((ds.namespace, ds.name), ())
            if not (uid and ds.uid and uid != ds.uid)
        )


WORKLOAD_CHAINS = {"ReplicaSet": "Deployment", "Job": "CronJob"}  # a workload kind -> the kind that makes it


def controller_pods(pods: Sequence[Pod], owned: Mapping[tuple[str, str, str], tuple[str, str, str]]) -> list[Pod]:
    """``pods`` less the ones kgpu made for a workload whose controller has them already.

    A workload read with the cluster (``kubectl get all -A -o json``: Deployments, their ReplicaSets and
    the pods) expands to what its controller would create, which is what it has not yet: its count less
    the pods it owns and that have not terminated. A Deployment owns the pods of its ReplicaSets (named
    ``<deployment>-<pod-template-hash>``, or owned by it in ``owned``); a Deployment or CronJob whose
    ReplicaSet or Job is in the input makes nothing itself: that ReplicaSet or Job stands for it. Ownership
    is by uid where both sides carry one, else by namespace and name, as for DaemonSets. A StatefulSet's
    pods keep their names, so the ordinals already running are the ones not made again.
    """
    made = [p for p in pods if p.created]
    if not made:
        return list(pods)
    have: dict[tuple[str, str, str], list[tuple[str, str]]] = {}  # owner -> (uid, pod key) of live pods
    for pod in pods:
        if pod.created or pod.terminated or not pod.owner_kind:
            continue
        have.setdefault((pod.owner_kind, pod.namespace, pod.owner_name), []).append((pod.owner_uid, pod.key))
        hash_ = pod.labels.get("pod-template-hash", "")
        if pod.owner_kind == "ReplicaSet":
            parent = owned.get(("ReplicaSet", pod.namespace, pod.owner_name))
            if parent is not None and parent[0] == "Deployment":
                have.setdefault(("Deployment", pod.namespace, parent[1]), []).append((parent[2], pod.key))
            elif hash_ and pod.owner_name.endswith(f"-{hash_}"):
                deployment = pod.owner_name[: -len(hash_) - 1]
                have.setdefault(("Deployment", pod.namespace, deployment), []).append(("", pod.key))
    standing = {(parent_kind, ns, parent) for (kind, ns, _), (parent_kind, parent, _) in owned.items()
                if WORKLOAD_CHAINS.get(kind) == parent_kind}
    groups: dict[tuple[str, str, str], list[Pod]] = {}
    for pod in made:
        groups.setdefault((pod.owner_kind, pod.namespace, pod.owner_name), []).append(pod)
    drop: set[int] = set()
    for key, group in groups.items():
        if key in standing:
            drop.update(id(p) for p in group)
            continue
        uid = group[0].owner_uid
        live = {k for u, k in have.get(key, ()) if not (u and uid and u != uid)}
        if not live:
            continue
        # ordinals already running first (a StatefulSet's names are its pods'), then from the end
        order = [p for p in group if p.key in live] + [p for p in reversed(group) if p.key not in live]
        drop.update(id(p) for p in order[: len(live)])
    return [p for p in pods if id(p) not in drop]


def _pinned_node(spec: PodSpecInfo) -> str:
    """The node a pending daemon pod is meant for: its one required term's ``metadata.name In [node]``."""
    if spec.affinity is None:
        return ""
    for term in spec.affinity.terms:
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
                return req.values[0]
    return ""


_DAEMON_TEMPLATES: dict[int, tuple[PodSpecInfo, PodSpecInfo]] = {}


def _daemon_template(template: PodSpecInfo) -> PodSpecInfo:
    """The template with the tolerations the DaemonSet controller adds (made once per template, not per
    node; kept by identity, the template held so its id stays its own)."""
    hit = _DAEMON_TEMPLATES.get(id(template))
    if hit is not None and hit[0] is template:
        return hit[1]
    added = tuple(t for t in DAEMON_TOLERATIONS if t not in template.tolerations)
    out = _replace(template, tolerations=template.tolerations + added)
    if len(_DAEMON_TEMPLATES) >= 256:
        _DAEMON_TEMPLATES.clear()
    _DAEMON_TEMPLATES[id(template)] = (template, out)
    return out


def _replace(spec: PodSpecInfo, **changes: Any) -> PodSpecInfo:
    from dataclasses import replace

    return replace(spec, **changes)


def queue(pods: Sequence[Pod]) -> list[Pod]:
    """PrioritySort: higher priority first; stable, so arrival order breaks ties."""
    return sorted(pods, key=lambda p: -p.priority)


def recreate(pod: Pod) -> Pod | None:
    """The pod a controller creates for an evicted one (same template; not bound), or None for a bare pod.

    Names are kept: a ReplicaSet, Job or DaemonSet would pick a new random suffix, a StatefulSet the same
    name; the output marks the new pod ``recreated``."""
    if not pod.owner_kind:
        return None
    spec = pod.spec if not pod.spec.node_name else _replace(pod.spec, node_name="")
    return _replace_pod(pod, spec=spec, phase="Pending")


def simulate(cluster: Objects, workloads: Objects | None = None, *, provisioner: Provisioner | None = None) -> SimulationResult:
    workloads = workloads or Objects()
    priority_warnings = resolve_priorities(cluster, workloads)
    nodes = cluster.nodes + workloads.nodes  # by their allocatable, as kube-scheduler (kgpu.sim.sharing)
    bound = [p for p in cluster.pods if p.node_name and not p.terminated]
    sched = Scheduler(nodes, bound)
    pending: list[Pod] = []
    # Daemon pods the cluster files hold already (a List's or a snapshot's) are not created again.
    present = DaemonPodIndex(cluster.pods + workloads.pods)
    for ds in cluster.daemonsets + workloads.daemonsets:
        pending.extend(daemon_pods(ds, nodes, present))
    # Pods made for a workload whose controller has them already (read with the cluster) are left out.
    owned = {**cluster.owned, **workloads.owned}
    cluster_pods = controller_pods(cluster.pods + workloads.pods, owned)
    work_ids = {id(p) for p in workloads.pods}
    pending.extend(p for p in cluster_pods if id(p) not in work_ids and not p.node_name and not p.terminated)
    pending.extend(p for p in cluster_pods if id(p) in work_ids and not p.terminated)
    placements: dict[int, Placement] = {}
    later: list[Pod] = []  # preempted pods of the snapshot, and the pods recreated for evicted ones
    recreated: set[int] = set()
    # PrioritySort as a heap of (-priority, arrival); a recreated pod arrives after everything queued so far.
    todo = [(-p.priority, n, p) for n, p in enumerate(pending)]
    heapq.heapify(todo)
    arrivals = len(todo)
    failed: dict[int, Pod] = {}
    postfilter = Preemption(sched, lowest=min((p.priority for p in pending), default=0))
    dra = _dra_state(cluster, workloads, pending, provisioner, nodes)
    vol = _volume_state(cluster, workloads, bound)
    while todo:
        _, _, pod = heapq.heappop(todo)
        again = id(pod) in recreated
        if dra is not None and pod.spec.claim_refs:
            # no preemption; the provisioners say what each autoscaler does with it (kgpu.sim.provisioners.dra_pools)
            if _place_with_claims(dra, sched, postfilter, pod, placements, again) and provisioner is not None:
                failed[id(pod)] = pod
            continue
        if vol is not None and pod.spec.volume_claims:
            done = _place_with_volumes(vol, sched, postfilter, pod, placements, again)
            if done is None:
                continue
            if isinstance(done, Outcome):
                outcome = done
            else:
                if done:
                    failed[id(pod)] = pod
                continue
        else:
            decision: Decision = sched.place(pod)
            if decision.node is not None:
                placements[id(pod)] = Placement(pod, SCHEDULED, decision.node.name, recreated=again)
                continue
            outcome = postfilter.preempt(pod)
            if outcome.node is None:
                reason = f"{decision.reason} {postfilter_words(outcome.message)}" if outcome.message else decision.reason
                placements[id(pod)] = Placement(pod, UNSCHEDULABLE, None, reason, recreated=again)
                failed[id(pod)] = pod
                continue
        assert outcome.node is not None
        node = outcome.node.name
        victims = [v.key for v in outcome.victims]
        placements[id(pod)] = Placement(pod, SCHEDULED, node, victims=victims, recreated=again)
        for victim in outcome.victims:
            if vol is not None:
                vol.release_pod(victim)  # its claims are free for another pod (ReadWriteOncePod)
            gone = placements.get(id(victim))
            if gone is None:  # a pod of the snapshot
                gone = placements[id(victim)] = Placement(victim, PREEMPTED)
                later.append(victim)
            new = recreate(victim)
            gone.phase, gone.node, gone.preempted_by = PREEMPTED, node, pod.key
            gone.reason = f"preempted by {pod.key} (priority {pod.priority} over {victim.priority}); " + (
                f"its {victim.owner_kind} creates it again" if new is not None else "no controller recreates it"
            )
            if new is not None:
                recreated.add(id(new))
                later.append(new)
                heapq.heappush(todo, (-new.priority, arrivals, new))
                arrivals += 1
    shown = [placements[id(p)] for p in pending] + [placements[id(p)] for p in later]
    result = SimulationResult(shown, sched.states,
                              warnings=cluster.warnings + workloads.warnings + priority_warnings)
    if provisioner is not None and failed:
        unplaced = list(failed.values())
        # Karpenter's volume topology: the provisioners see pods with their volumes' zones as node affinity
        outcome_map = provisioner.provision(unplaced if vol is None else [vol.for_provisioner(p) for p in unplaced], sched)
        result.extra.update(outcome_map.pop("extra", {}))
        result.new_nodes = outcome_map.pop("new_nodes", [])
        dra_devices = outcome_map.pop("dra_devices", {})
        for pod in unplaced:
            p = placements[id(pod)]
            info = outcome_map.get(pod.key)
            if info is None:
                continue
            if isinstance(info, str) and dra is not None and pod.spec.claim_refs:
                p.reason = f"{p.reason}; {info.partition('; ')[2]}"  # the scheduler's first words stand
                continue
            p.devices = dra_devices.get(pod.key, p.devices)
            if isinstance(info, str):
                # the provisioner's words follow the scheduler's message, which it took after adding
                # nodes: PostFilter's part is taken again over the same nodes
                base, sep, rest = info.partition("; ")
                words = postfilter.message(pod)
                p.reason = f"{base} {postfilter_words(words)}{sep}{rest}" if words else info
                continue
            p.phase, p.node, p.reason, p.new_node = PROVISIONED, info.name, None, info
        karpenter = outcome_map.get("karpenter", ())
    else:
        karpenter = ()
    annotate(result.placements, karpenter)
    _dra_warnings(dra, result)
    if dra is not None:
        result.dra_gpus = dra.gpu_usage((d["driver"], d["pool"], d["device"]) for p in result.placements
                                        for d in p.devices)
    _volume_warnings(vol, result, sched)
    profile = getattr(provisioner, "profile", None)
    existing = {n.name for n in nodes}
    result.warnings.extend(existing_node_warnings(result.placements, {n.name: n for n in nodes}, existing))
    if profile is None or not shared_profile(profile):
        result.warnings.extend(cluster_hints(result.placements, nodes))
    if profile is not None and shared_profile(profile):
        by_name = {st.node.name: st.node for st in sched.states}
        result.warnings.extend(admission_warnings(result.placements, by_name, profile))
        result.warnings.extend(overlay_warnings(profile, result.new_nodes))
        result.warnings.extend(resource_hints(result.placements, profile, getattr(provisioner, "catalog", None)))
        new_by_name = {n.name: n for n in result.new_nodes}
        report = shared_nodes_report(sched.states, new_by_name, profile, getattr(provisioner, "catalog", None))
        if report:
            result.extra["shared_gpus"] = report
    return result


def _dra_state(cluster: Objects, workloads: Objects, pending: Sequence[Pod], provisioner: Any = None,
               nodes: Sequence[Node] = ()) -> Any:
    """The DRA state (kgpu.sim.scheduler.plugins.dynamicresources) when the inputs hold DRA objects, or the profile has DRA pools (their
    DeviceClasses and nodes' slices, kgpu.sim.provisioners.dra_pools). Without any (a snapshot or files that leave them
    out), pods with claims are placed as if they had none, with the ``dra`` warning: saying that every claim
    is missing would be a guess about objects kgpu was not given."""
    given = cluster.dra + workloads.dra
    extra = provisioner.dra_documents(nodes, [d for d, _ in given]) if hasattr(provisioner, "dra_documents") else []
    if not (given or extra):
        return None
    from kgpu.model.dra import read
    from kgpu.model.dra_types import DRAObjects
    from kgpu.sim.scheduler.plugins.dynamicresources import DRA

    parts = [t for t in (cluster.dra_objects(), workloads.dra_objects()) if t is not None]
    if extra:
        parts.append(read(extra))
    state = DRA(DRAObjects.merged(parts))
    if hasattr(provisioner, "dra"):
        provisioner.dra = state
    return state


def _place_with_claims(dra: Any, sched: Scheduler, postfilter: Preemption, pod: Pod,
                       placements: dict[int, Placement], again: bool) -> bool:
    """A pod with resource claims (kgpu.sim.scheduler.plugins.dynamicresources); True when it fits nowhere. Preemption is not tried for it:
    evicting pods frees no devices kgpu's allocator would see."""
    from kgpu.sim.scheduler.plugins import dra_place as dra_mod
    out = dra_mod.place(dra, sched, pod)
    if out.node is not None:
        placements[id(pod)] = Placement(pod, SCHEDULED, out.node.name, recreated=again, devices=out.devices)
        return False
    reason = out.reason or ""
    if reason.startswith("0/"):
        n = len(sched.states)
        # DynamicResources has no PreFilterExtensions: preemption's dry run cannot free devices, and nodes
        # it rejected are UnschedulableAndUnresolvable, never candidates. Other mixes: DefaultPreemption's
        # words over the other filters (kgpu.sim.scheduler.plugins.defaultpreemption).
        # DynamicResources' rejections are UnschedulableAndUnresolvable: not potential nodes for DefaultPreemption
        words = (f"preemption: 0/{n} nodes are available: {n} {NOT_HELPFUL}." if out.unresolvable and pod.preemption_policy != "Never" else postfilter.message(pod, out.rejected))
        if words:
            reason = f"{reason} {dra_mod.postfilter_words(out)}, {words}"
    placements[id(pod)] = Placement(pod, UNSCHEDULABLE, None, reason, recreated=again)
    return True


def _volume_state(cluster: Objects, workloads: Objects, bound: Sequence[Pod]) -> Any:
    """The volume state (kgpu.sim.scheduler.plugins.volumebinding) when the inputs hold PersistentVolumeClaims, PersistentVolumes or
    StorageClasses. Without any, pods with claims are placed as if they had none, with the ``volumes``
    warning (as for DRA: saying every claim is missing would be a guess about objects kgpu was not given)."""
    if not (cluster.storage or workloads.storage):
        return None
    from kgpu.model.volumes import read
    from kgpu.sim.scheduler.plugins.volumebinding import VolumeState

    if cluster.storage and workloads.storage:  # one read: a claim takes the default class from either
        return VolumeState(read(cluster.storage + workloads.storage), bound)
    objects = cluster.storage_objects() or workloads.storage_objects()
    assert objects is not None
    return VolumeState(objects, bound)


def _place_with_volumes(vol: Any, sched: Scheduler, postfilter: Preemption, pod: Pod,
                        placements: dict[int, Placement], again: bool) -> bool | Outcome | None:
    """A pod with PersistentVolumeClaims (kgpu.sim.scheduler.plugins.volumeplace): None when it was bound,
    PostFilter's Outcome when it was bound by preempting (its victims are the caller's), else whether the
    provisioners may try it (it fit nowhere, but its claims passed PreFilter)."""
    from kgpu.sim.scheduler.plugins import volumeplace
    out = volumeplace.place(vol, sched, pod)
    if out.node is not None:
        placements[id(pod)] = Placement(pod, SCHEDULED, out.node.name, recreated=again)
        return None
    reason = out.reason or ""
    if reason.startswith("0/") and out.prefilter:
        reason = f"{reason} {PREFILTER_STOPPED}"  # PostFilter errs: the PreFilter phase stopped early
    elif reason.startswith("0/"):
        if out.unresolvable:
            words = volumeplace.postfilter(vol, postfilter, pod, out)
        else:
            outcome = postfilter.preempt(pod, out.volume_unresolvable, volumeplace.DryRun(vol, pod, out.claims))
            if outcome.node is not None:
                vol.commit(pod, out.claims, outcome.node.node)
                return outcome
            words = outcome.message
        if words:
            reason = f"{reason} {postfilter_words(words)}"
    placements[id(pod)] = Placement(pod, UNSCHEDULABLE, None, reason, recreated=again)
    return not out.prefilter


def _volume_warnings(vol: Any, result: SimulationResult, sched: Scheduler) -> None:
    """Claims of pods the provisioners placed bind on their new node; what kgpu did not model is said per pod
    (``volumes``), and without any storage object every pod with claims says so."""
    if vol is None:
        for p in result.placements:
            if p.pod.spec.volume_claims:
                names = ", ".join(p.pod.spec.volume_claims)
                text = (f"{names}: no PersistentVolumeClaim, PersistentVolume or StorageClass was given, so the "
                        "claims were not bound and their volumes' zones not applied")
                p.warnings = (*p.warnings, Unmodelled("volumes", text))
        return
    by_name = {st.node.name: st.node for st in sched.states}
    for p in result.placements:
        if p.phase == PROVISIONED and p.pod.spec.volume_claims and p.node in by_name:
            verdict = vol.prefilter(p.pod)
            if not verdict.message:
                vol.commit(p.pod, verdict.claims, by_name[p.node])
    result.warnings.extend(vol.objects.warnings)
    for p in result.placements:
        texts = vol.warnings.get(p.pod.key)
        if texts:
            p.warnings = p.warnings + tuple(Unmodelled("volumes", t) for t in texts)


def _dra_warnings(dra: Any, result: SimulationResult) -> None:
    if dra is None:
        for p in result.placements:
            if p.pod.spec.claim_refs:
                names = ", ".join(ref[0] for ref in p.pod.spec.claim_refs)
                text = (f"resourceClaims {names}: no DeviceClass, ResourceClaim or ResourceSlice was given, so "
                        "the claims' devices were not allocated")
                p.warnings = (*p.warnings, Unmodelled("dra", text))
        return
    result.warnings.extend(dra.objects.warnings)
    for p in result.placements:
        texts = dra.warnings.get(p.pod.key)
        if texts:
            p.warnings = p.warnings + tuple(Unmodelled("dra", f"CEL selector not evaluated: {t}") for t in texts)


def annotate(placements: Sequence[Placement], karpenter: Collection[str] = ()) -> None:
    """Each placement's warnings (``kgpu.sim.unmodelled``): the rules for any outcome, and Karpenter's when
    Karpenter was asked for it (``karpenter``: pod keys)."""
    detector = Detector()
    for p in placements:
        pod = p.pod
        p.warnings = detector.warnings(pod.spec, (ANY, KARPENTER) if pod.key in karpenter else (ANY,))

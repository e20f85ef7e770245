"""Every pending GPU pod, explained: kube-scheduler's reason, the cluster's own word, and what makes it run.

The snapshot's pending pods are placed by ``kgpu.sim`` on the snapshot's nodes, around the pods already bound
there (in priority order, as kube-scheduler's queue takes them), so the reason is kube-scheduler's message
("0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: true}, 2 Insufficient
nvidia.com/gpu."). It is compared with the pod's newest FailedScheduling event when the snapshot has one.

What would make it run comes from the same predicates, node by node: the toleration of the taint that keeps
it off GPU nodes, the node selector that matches no node, the NodePool (the snapshot's, or the profile's
pools with ``--profile``) that could launch a node and why it does not (Karpenter's own words from the
simulator's provisioner: taints, requirements, limits), the TKE spec a super node would give it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kgpu.catalog.tke import TkeMatchError
from kgpu.doctor.common import snippet, toleration_for
from kgpu.doctor.findings import ERROR, WARNING, Finding
from kgpu.doctor.nodepools import nodepool_profile
from kgpu.doctor.state import LABEL_NODEPOOL, TKE_PREFIX, ClusterState, Event, PodInfo
from kgpu.doctor.workloads import bigger_fix
from kgpu.model.gpus import closest_offered
from kgpu.model.inputs import Objects
from kgpu.model.objects import GPU, Node, Pod, Taint
from kgpu.model.predicates import first_untolerated, requirement_matches, static_reasons
from kgpu.sim.provisioners.tke.spec import match_pod_spec
from kgpu.sim.scheduler.plugins.defaultpreemption import (
    DRA_NO_CLAIMS,
    Preemption,
    filters_part,
    postfilter_words,
)
from kgpu.sim.simulate import PROVISIONED, SCHEDULED, Placement, simulate

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read
    from kgpu.model.profile import Profile

CHECK = "pending-gpu-pod"


# kube-scheduler up to v1.34.1 named the taint; later releases say "untolerated taint(s)" (kubernetes#134740).
_TAINT_DETAIL = re.compile(r"untolerated taint \{[^}]*\}")


# A scheduler without DRA (before v1.34, or with the feature off) leaves DynamicResources' words out.
_DRA_WORDS = f" {DRA_NO_CLAIMS}, preemption: "


def _normalise(message: str) -> str:
    return _TAINT_DETAIL.sub("untolerated taint(s)", message).replace(_DRA_WORDS, " preemption: ")


def _compare(reason: str, event: Event | None, noun: str = "the snapshot") -> str:
    if event is None:
        return f"{noun} has no FailedScheduling event for it"
    said = event.message.strip()
    # kgpu's message carries PostFilter's part as kube-scheduler's does; an event without one (an older
    # or differently configured scheduler) is compared with kgpu's message up to that part.
    if " preemption: " not in said:
        reason = filters_part(reason).strip()
    when = f" ({event.time})" if event.time else ""
    if _normalise(said) == _normalise(reason):
        return f"the cluster's FailedScheduling event{when} says the same"
    return f'the cluster\'s newest FailedScheduling event{when} says: "{said}"'


def simulate_pending(state: ClusterState, profile: Profile | None) -> tuple[dict[int, Placement], list[str]]:
    """Placements of the snapshot's pending pods (by id of the model pod), and notes on what is modelled."""
    notes: list[str] = []
    provisioner = None
    if profile is None:
        profile, notes = nodepool_profile(state)
    if profile is not None:
        from kgpu.sim.provisioners.provision import provisioner_for

        provisioner = provisioner_for(profile, daemonsets=state.objects.daemonsets)
        notes.extend(provisioner.warnings)
    objects = Objects(
        nodes=list(state.objects.nodes),
        pods=[p.model for p in state.pods if p.model is not None],
        priority_classes=state.objects.priority_classes,
        preemption_policies=state.objects.preemption_policies,
        default_preemption_policy=state.objects.default_preemption_policy,
        # claims allocated as kube-scheduler does (kgpu.doctor.dra explains them), PersistentVolumeClaims
        # placed by their volumes (kgpu.sim.scheduler.plugins.volumebinding): read once, shared (``typed``)
        dra=state.objects.dra,
        storage=state.objects.storage,
        typed=state.objects.typed,
    )
    result = simulate(objects, provisioner=provisioner)
    return {id(p.pod): p for p in result.placements}, notes


def _labels_hint(nodes: list[Node], key: str) -> str:
    values = Counter(n.labels[key] for n in nodes if key in n.labels)
    if not values:
        return f"no node has a label {key}"
    shown = ", ".join(f"{key}={v} ({c})" for v, c in values.most_common(4))
    return f"nodes have {shown}"


class _Helper:
    """Fix lines per pod class: pods that share a spec (and TKE annotations and limits) share the answer."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.memo: dict[Any, list[str]] = {}

    def fixes(self, pod: PodInfo, model: Pod) -> list[str]:
        tke = tuple(sorted((k, v) for k, v in pod.annotations.items() if k.startswith(TKE_PREFIX)))
        key = (model.spec, tke, model.limits)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = _what_would_help(self.state, pod, model)
        return list(hit)


def _what_would_help(state: ClusterState, pod: PodInfo, model: Pod) -> list[str]:
    """Fix lines for one pending GPU pod, from the predicates over the cluster's nodes."""
    spec = model.spec
    tolerant = _without_taints(spec)
    fixes: list[str] = []
    gpu_nodes = [n.model for n in state.nodes if n.gpus.units > 0 or (n.is_gpu and not n.virtual)]
    # untolerated taints on GPU nodes that otherwise match
    taints: dict[Taint, int] = {}
    for node in gpu_nodes:
        taint = first_untolerated(node.taints, spec.tolerations)
        if taint is not None and static_reasons(tolerant, node) is None:
            taints[taint] = taints.get(taint, 0) + 1
    if taints:
        tols = [toleration_for(t) for t in taints]
        fixes.append(
            f"# {sum(taints.values())} GPU node(s) have taints it does not tolerate; add to the pod template's spec:\n"
            + snippet({"tolerations": tols})
        )
    # GPU nodes it would fit but for missing GPUs: the device plugin, not the pod, is the problem
    dark = [
        n.name
        for n in state.nodes
        if n.is_gpu and not n.virtual and not n.gpus.units and not n.gpus.repartitioning
        and static_reasons(spec, n.model) is None
    ]
    if dark:
        fixes.append(
            f"# {len(dark)} GPU node(s) match the pod but advertise no GPUs ({', '.join(dark[:3])}): "
            "fix the device plugin there first (see the device-plugin-* and gpu-node-no-gpus findings)"
        )
    busy = [n.name for n in state.nodes if n.gpus.repartitioning and static_reasons(spec, n.model) is None]
    if busy:
        fixes.append(
            f"# {len(busy)} GPU node(s) that match the pod are being repartitioned by the MIG manager "
            f"({', '.join(busy[:3])}; see mig-config-state): their GPUs come back when it is done"
        )
    # selectors that match no node at all
    all_nodes = [n.model for n in state.nodes]
    for key, value in spec.node_selector:
        if not any(n.labels.get(key) == value for n in all_nodes):
            fixes.append(
                f"# nodeSelector {key}: {value!r} matches no node ({_labels_hint(gpu_nodes or all_nodes, key)}); "
                "fix the selector, or label the GPU nodes:\n"
                + (
                    f"kubectl label node {gpu_nodes[0].name} {key}={value}"
                    if gpu_nodes
                    else f"kubectl label node <gpu-node> {key}={value}"
                )
            )
    if spec.affinity is not None:
        for term in spec.affinity.terms:
            for req in term.match_expressions:
                if not any(requirement_matches(req, n.labels) for n in all_nodes):
                    fixes.append(
                        f"# required node affinity {req.key} {req.operator} {list(req.values)} matches no node "
                        f"({_labels_hint(gpu_nodes or all_nodes, req.key)})"
                    )
    # GPUs: how many it asks of each kind, and what the nodes offer
    if not _tke(pod):
        fixes.extend(_resource_fixes(state, pod))
    if _tke(pod):
        try:
            m = match_pod_spec(pod.annotations, dict(spec.requests), dict(model.limits))
            fixes.append(
                f"# TKE super node spec it needs: {m.gpu_count} x {m.gpu_type}, {m.cpu} cores, {m.memory} "
                f"({m.mode} match); schedule it on a super node:\n"
                + snippet({"nodeSelector": {"type": "virtual-kubelet"}})
            )
        except TkeMatchError as exc:
            fixes.append(f"# TKE: {exc} (see the tke-annotation-no-spec finding)")
    return fixes


def _offered(state: ClusterState) -> dict[str, int]:
    """Each GPU extended resource the nodes offer, with the most one node has."""
    out: dict[str, int] = {}
    for n in state.nodes:
        for r in n.gpus.resources:
            if r.allocatable and not r.kind.startswith("dra"):
                out[r.name] = max(out.get(r.name, 0), r.allocatable)
    return out


def _resource_fixes(state: ClusterState, pod: PodInfo) -> list[str]:
    """For each GPU resource the pod asks: none offered (and what is, with the likely meant one), or more than
    the largest node has."""
    fixes = []
    offered = _offered(state)
    for resource, want in sorted(pod.gpu_resources.items()):
        most = offered.get(resource, 0)
        if resource == GPU:
            most = max([most] + [n.expected_gpus for n in state.nodes if not n.gpus.kinds or n.gpus.kinds == ("whole",)])
        if most == 0 and not any(n.is_gpu and not n.virtual and not n.gpus.units for n in state.nodes):
            shown = ", ".join(f"{r} (up to {c} per node)" for r, c in sorted(offered.items())) or "none"
            hint = closest_offered(resource, offered)
            line = f"# no node offers {resource}; the nodes offer: {shown}"
            if hint:
                line += f"\n# did you mean {hint}? ask for it instead:\n" + snippet(
                    {"resources": {"limits": {hint: want}}})
            fixes.append(line)
        elif want > most > 0:
            line = f"# it asks {want} {resource}; the largest node offers {most}"
            fixes.append(f"{line}\n{bigger_fix(state, want)}" if resource == GPU else line)
    return fixes


def _pool_fixes(state: ClusterState, extra: str, spec_labels: tuple[tuple[str, str], ...]) -> list[str]:
    """Fixes for what the provisioner said of each NodePool: limits used up, labels it does not set."""
    out = []
    for np in state.nodepools:
        meta = np.get("metadata") if isinstance(np.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        name = str(meta.get("name") or "")
        if f'exceed limits for nodepool "{name}"' in extra:
            limits = (np.get("spec") or {}).get("limits") or {}
            shown = ", ".join(f"{k}: {v}" for k, v in limits.items())
            out.append(
                f"# NodePool {name} has reached its limits ({shown}); raise them, e.g.:\n"
                f'kubectl patch nodepool {name} --type merge -p \'{{"spec":{{"limits":{{"{GPU}":"<more>"}}}}}}\''
            )
        refused = re.search(
            rf'nodepool "{re.escape(name)}": creating node claim, resource usage exceeds limit '
            r"\(limit=(\S+), resource-name=(\S+), usage=(\S+)\)",
            extra,
        )
        if refused:
            limit, resource, usage = refused.groups()
            out.append(
                f"# NodePool {name} already has {usage} {resource} against its limit of {limit}, so Karpenter "
                f"refuses every new claim of it; raise the limit (or remove nodes), e.g.:\n"
                f'kubectl patch nodepool {name} --type merge -p \'{{"spec":{{"limits":{{"{resource}":"<more>"}}}}}}\''
            )
        if f'nodepool "{name}"' in extra and "does not have known values" in extra and spec_labels:
            out.append(
                f"# or have NodePool {name} put the label on its nodes (spec.template.metadata.labels):\n"
                + snippet({"spec": {"template": {"metadata": {"labels": dict(spec_labels)}}}})
            )
    return out


def _without_taints(spec: Any) -> Any:
    """The pod as if it tolerated everything: to ask 'would it fit but for the taint?'."""
    from dataclasses import replace

    from kgpu.model.objects import Toleration

    return replace(spec, tolerations=(Toleration("", "Exists", "", ""),))


def _tke(pod: PodInfo) -> bool:
    return any(k.startswith(TKE_PREFIX) for k in pod.annotations)


def _nodeclaim_notes(state: ClusterState) -> list[str]:
    """NodeClaims that did not launch or register: Karpenter's reason (e.g. InsufficientCapacityError)."""
    out = []
    for nc in state.nodeclaims:
        meta = nc.get("metadata") if isinstance(nc.get("metadata"), dict) else {}
        status = nc.get("status") if isinstance(nc.get("status"), dict) else {}
        assert isinstance(meta, dict) and isinstance(status, dict)
        for cond in status.get("conditions") or ():
            if not isinstance(cond, dict):
                continue
            if (
                cond.get("type") in ("Launched", "Registered", "Initialized")
                and cond.get("status") == "False"
            ):
                pool = (meta.get("labels") or {}).get(LABEL_NODEPOOL, "?")
                out.append(
                    f'NodeClaim {meta.get("name")} (NodePool "{pool}") {cond.get("type")}=False: '
                    f"{cond.get('reason', '')} {cond.get('message', '')}".rstrip()
                )
                break
    return out


def check_pending(state: ClusterState, profile: Profile | None = None) -> Iterator[Finding]:
    pending = [p for p in state.pods if p.pending and p.gpu_resources and p.model is not None]
    if not pending:
        return
    placements, notes = simulate_pending(state, profile)
    events = state.failed_scheduling()
    claim_notes = _nodeclaim_notes(state)
    existing = _Existing(state)
    helper = _Helper(state)
    source = (
        "The --profile pools"
        if profile is not None
        else (f"{state.noun.capitalize()}'s NodePools" if state.nodepools else "")
    )
    for pod in pending:
        model = pod.model
        assert model is not None
        placement = placements.get(id(model))
        if placement is None:  # pragma: no cover - every pending pod is queued
            continue
        event = events.get(pod.key)
        fixes: list[str] = []
        unmodelled = _unmodelled(placement)
        if placement.phase == SCHEDULED:
            said = _compare("", event, state.noun)
            how = ""
            if placement.victims:
                how = f" by preempting {len(placement.victims)} pod(s) of lower priority ({', '.join(placement.victims[:3])})"
            why = (
                f"What kgpu does not model for it may explain it: {unmodelled}; or capacity freed since"
                if unmodelled
                else "Capacity freed since, or what kgpu does not model (PodDisruptionBudgets), may explain it"
            )
            yield Finding(
                CHECK,
                WARNING,
                pod.ref,
                f"Pending, but kgpu's simulation places it on node {placement.node} now{how}; {said}. {why}",
                f"kubectl describe pod -n {pod.namespace} {pod.name}",
            )
            continue
        if placement.phase == PROVISIONED:
            reason = existing.reason(model)
            new = placement.new_node
            where = new.placement_fields() if new is not None else {}
            pool = where.get("pool", "?")
            itype = where.get("instance_type", "?")
            cap = where.get("capacity_type", "")
            msg = (
                f'{reason} ({_compare(reason, event, state.noun)}). {source}: pool "{pool}" can launch a '
                f"{itype} {cap} node for it, so the autoscaler should be adding one"
            )
            if claim_notes:
                msg += "; " + "; ".join(claim_notes[:3])
            if unmodelled:
                msg += f". Not modelled for it: {unmodelled}"
            fixes.append(_autoscaler_fix(profile, pool))
            fixes.extend(helper.fixes(pod, model))
            yield Finding(CHECK, ERROR, pod.ref, msg, "\n".join(fixes))
            continue
        # kube-scheduler's words are over the cluster as it is: the nodes the simulation provisioned for other
        # pending pods are not in them; what the autoscaler would do is its own sentence
        _, _, extra = (placement.reason or "").partition("; ")
        base = existing.reason(model)
        msg = f"{base} ({_compare(base, event, state.noun)})"
        if extra:
            msg += f". {source or 'Provisioning'}: {extra.rstrip('.')}"
        elif not source and not _tke(pod):
            msg += f". No NodePool in {state.noun} (and no --profile): nothing will add a node for it"
        if unmodelled:
            msg += f". Not modelled for it: {unmodelled}"
        fixes.extend(helper.fixes(pod, model))
        fixes.extend(_pool_fixes(state, extra, spec_labels=model.spec.node_selector))
        if notes:
            fixes.append("# not modelled: " + "; ".join(notes[:3]))
        if not fixes:
            fixes.append(f"kubectl describe pod -n {pod.namespace} {pod.name}")
        yield Finding(CHECK, ERROR, pod.ref, msg, "\n".join(fixes))


def _unmodelled(placement: Placement) -> str:
    """The placement's warnings (kgpu.sim.unmodelled) as one clause: 'volumes (pvc data: ...); dra (...)'."""
    return "; ".join(f"{w.code} ({w.message})" for w in placement.warnings)


def _autoscaler_fix(profile: Profile | None, pool: str) -> str:
    """Where to look when a pool could launch a node but none came: Karpenter's or cluster-autoscaler's side."""
    kind = "karpenter"
    if profile is not None:
        kind = next((str(p.kind) for p in profile.pools if p.name == pool), kind)
    if kind == "nodegroup":
        return (
            "kubectl -n kube-system logs deploy/cluster-autoscaler --tail 200 | grep -i -e scale-up -e "
            + pool
            + "\n"
            "# scaling from zero needs the ASG's node-template tags for the labels and taints the pod selects:\n"
            f"kgpu render -f kgpu.yaml --target eksctl   # compare its k8s.io/cluster-autoscaler/node-template/* tags "
            f"with: aws autoscaling describe-tags --filters Name=value,Values={pool}*"
        )
    if kind == "tke-supernode":
        return "kubectl describe pod <pod>   # TKE's event names the spec it could not buy"
    return (
        f"kubectl get nodeclaims -l karpenter.sh/nodepool={pool} -o wide\n"
        "kubectl -n kube-system logs deploy/karpenter --tail 200   # or -n karpenter"
    )


class _Existing:
    """kube-scheduler's message on the existing nodes alone (before any provisioning), built once."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.sched: Any = None
        self.postfilter: Preemption | None = None
        self.volumes: Any = None  # kgpu.sim.scheduler.plugins.volumebinding.VolumeState, for pods with claims

    def reason(self, model: Pod) -> str:
        """Filters' message, then PostFilter's (DynamicResources', preemption's), as the event carries them."""
        if self.sched is None:
            from kgpu.sim.scheduler.scheduler import Scheduler

            bound = [
                p.model for p in self.state.pods if p.model is not None and p.node_name and not p.terminated
            ]
            self.sched = Scheduler(self.state.objects.nodes, bound)
            self.postfilter = Preemption(self.sched)
        assert self.postfilter is not None
        if model.spec.volume_claims and self.state.objects.storage:
            return self._volume_reason(model)
        text: str = self.sched.explain_pod(model)
        words = self.postfilter.message(model)
        return f"{text} {postfilter_words(words)}" if words else text

    def _volume_reason(self, model: Pod) -> str:
        """A pod with claims: the volume plugins' words too (kgpu.sim.scheduler.plugins.volumebinding), as simulate words them."""
        from kgpu.sim.scheduler.plugins import volumebinding as volumes
        from kgpu.sim.scheduler.plugins import volumeplace
        from kgpu.sim.scheduler.plugins.defaultpreemption import PREFILTER_STOPPED

        if self.volumes is None:
            bound = [p.model for p in self.state.pods if p.model is not None and p.node_name and not p.terminated]
            objects = self.state.objects.storage_objects()
            assert objects is not None  # the caller asks only when there are storage objects
            self.volumes = volumes.VolumeState(objects, bound)
        out = volumeplace.explain(self.volumes, self.sched, model)
        text = out.reason or self.sched.explain_pod(model)
        if out.prefilter and text.startswith("0/"):
            return f"{text} {PREFILTER_STOPPED}"  # DynamicResources' PostFilter errs (kgpu.sim.simulate)
        assert self.postfilter is not None
        words = volumeplace.postfilter(self.volumes, self.postfilter, model, out)
        return f"{text} {postfilter_words(words)}" if words and text.startswith("0/") else text


def pending_gpu_pods(state: ClusterState) -> list[PodInfo]:
    return [p for p in state.pods if p.pending and p.gpu_resources]


CHECKS = {CHECK: check_pending}

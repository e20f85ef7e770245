"""DefaultPreemption's SelectVictimsOnNode: which pods of lower priority to evict from one node.

kube-scheduler v1.34 (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go,
SelectVictimsOnNode; behaviour transcribed, not code): every pod of lower priority is removed from a copy
of the node (and, through the PreFilter extensions' RemovePod, from the PodTopologySpread and
InterPodAffinity PreFilter state); if the pod still does not pass every filter, the node's status is the
filters' reasons, and with no such pod at all it is "No preemption victims found for incoming pod".
Otherwise the removed pods are put back one at a time, most important first (MoreImportantPod: priority,
then the older start), and each that leaves the pod fitting stays (a *reprieve*); the others are the
victims. PodDisruptionBudgets are not modelled: every pod is non-violating.

Nothing here writes the scheduler's state. NodeResourcesFit and NodePorts read a copy of the node's
requests (``_Fit``); the topology filters read the pod's PreFilter state (``kgpu.sim.scheduler.plugins.
topology.PodFilter``, live counts) less the share of the pods taken off (``Trial``, the plugins'
RemovePod and AddPod): a count changes only in the node's own domain, so the answer depends on the node's
pods and a few numbers read there (``Trial.signature``), which lets ``Preemption`` keep it per node.
The pods below a priority, sorted, and the node with all of them off (``Lower``) depend only on the node's
pods, and are kept per node version and priority for every pod that asks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kgpu.model.objects import HostPort, Node, Pod, PodSpecInfo
from kgpu.model.predicates import (
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_NODE_PORTS,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
    insufficient_resources,
    ports_conflict,
    selector_matches,
)
from kgpu.sim.scheduler.plugins.topology import PodFilter, resolve_term
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler

NO_VICTIMS = "No preemption victims found for incoming pod"


def start(pod: Pod) -> float:
    """GetPodStartTime: status.startTime, else now (later than any given time)."""
    return math.inf if pod.start_time is None else pod.start_time


class _Fit:
    """A node's requests, pod count and ports with some pods taken off, for the dry run."""

    __slots__ = ("count", "ports", "requested", "st")

    def __init__(self, st: NodeState) -> None:
        self.st = st
        self.requested = dict(st.requested)
        self.count = st.pod_count
        self.ports: list[HostPort] = list(st.ports)

    def remove(self, pod: Pod) -> None:
        req = self.requested
        for k, v in pod.spec.requests:
            req[k] = req.get(k, 0) - v
        self.count -= 1
        for port in pod.spec.host_ports:
            self.ports.remove(port)

    def add(self, pod: Pod) -> None:
        req = self.requested
        for k, v in pod.spec.requests:
            req[k] = req.get(k, 0) + v
        self.count += 1
        self.ports.extend(pod.spec.host_ports)

    def reasons(self, spec: PodSpecInfo) -> list[str]:
        """NodePorts then NodeResourcesFit, as ``scheduler.dynamic_reasons`` (the static filters pass)."""
        if spec.host_ports and ports_conflict(spec.host_ports, self.ports):
            return [ERR_NODE_PORTS]
        return insufficient_resources(spec, self.st.node.allocatable, self.requested, self.count)

    def fits(self, spec: PodSpecInfo) -> bool:
        """``not reasons(spec)``, without building them."""
        if self.count + 1 > self.st.alloc_pods:
            return False
        alloc, req = self.st.node.allocatable, self.requested
        for k, v in spec.requests:
            if v > alloc.get(k, 0) - req.get(k, 0):
                return False
        return not (spec.host_ports and ports_conflict(spec.host_ports, self.ports))


class Lower:
    """The pods of one node below a priority, for SelectVictimsOnNode: in bind order, in MoreImportantPod's
    order (higher priority first, then the earlier start; equal starts by bind order: the sort is stable),
    and the node's requests, pod count and ports with all of them off. Depends only on the node's pods:
    ``Preemption`` keeps it per node version and priority for every pod that asks."""

    __slots__ = ("count", "ordered", "pods", "ports", "requested", "st")

    def __init__(self, st: NodeState, priority: int) -> None:
        self.st = st
        self.pods = [p for p in st.pods if p.priority < priority]
        self.ordered = sorted(self.pods, key=lambda p: (-p.priority, start(p)))
        fit = _Fit(st)
        for p in self.pods:
            fit.remove(p)
        self.requested, self.count, self.ports = fit.requested, fit.count, fit.ports

    def fit(self) -> _Fit:
        """The node with every one of the pods off, to put them back one at a time."""
        fit = _Fit.__new__(_Fit)
        fit.st, fit.count = self.st, self.count
        fit.requested, fit.ports = dict(self.requested), list(self.ports)
        return fit


class Volumes(Protocol):
    """The volume plugins in the dry run (kgpu.sim.scheduler.plugins.volumeplace.DryRun); ``key`` names
    what their answers depend on."""

    key: tuple[Any, ...]

    def reasons(self, node: Node, off: Sequence[Pod]) -> tuple[str, ...]: ...

    def held(self, off: Sequence[Pod]) -> int: ...

    def uses(self, pod: Pod) -> int: ...


def _all_off(
    pod: Pod, st: NodeState, low: Lower, volumes: Volumes | None
) -> tuple[_Fit | None, int, list[str]]:
    """The node with every pod below the pod's priority off, through NodePorts and NodeResourcesFit, then the
    volume plugins: (the node's requests, VolumeRestrictions' count, []) when the pod passes, else (None, 0,
    the reasons of the first filter that fails)."""
    fit = low.fit()
    why = fit.reasons(pod.spec)
    if why:
        return None, 0, why
    if volumes is None:
        return fit, 0, []
    why = list(volumes.reasons(st.node, low.pods))
    if why:
        return None, 0, why
    return fit, volumes.held(low.pods), []


def select_victims(
    pod: Pod, st: NodeState, lower: Lower | None = None, volumes: Volumes | None = None
) -> tuple[list[Pod] | None, list[str]]:
    """SelectVictimsOnNode: (victims, []) when evicting them lets ``pod`` fit, else (None, the node's
    status reasons). ``st.pods`` is in bind order; ``lower``: its pods below the pod's priority, when kept;
    ``volumes``: the volume plugins, for a pod with claims."""
    low = lower if lower is not None else Lower(st, pod.priority)
    if not low.pods:
        return None, [NO_VICTIMS]
    fit, held, why = _all_off(pod, st, low, volumes)
    if fit is None:
        return None, why
    victims = []
    for p in low.ordered:  # no PodDisruptionBudgets: every pod is non-violating
        fit.add(p)
        use = volumes.uses(p) if volumes is not None else 0
        if not fit.fits(pod.spec) or held + use > 0:
            fit.remove(p)
            victims.append(p)
        else:
            held += use
    return victims, []


def select_victims_exact(
    pod: Pod,
    st: NodeState,
    sched: Scheduler,
    filt: PodFilter | None = None,
    lower: Lower | None = None,
    volumes: Volumes | None = None,
) -> tuple[list[Pod] | None, list[str]]:
    """``select_victims`` for a pod that PodTopologySpread or InterPodAffinity filter: the pods taken off
    leave the topology counts too (the plugins' RemovePod and AddPod, ``Trial``), read from the pod's
    PreFilter state ``filt`` (prepared now when not given) less their share, never written. The volume
    plugins run between NodeResourcesFit and the topology filters, as in the default profile."""
    low = lower if lower is not None else Lower(st, pod.priority)
    if not low.pods:
        return None, [NO_VICTIMS]
    if filt is None:
        filt = sched.topology.prepare(pod)
    spec = pod.spec
    fit, held, why = _all_off(pod, st, low, volumes)
    if fit is None:
        return None, why
    trial = Trial(filt, st)
    for p in low.pods:
        trial.remove(p)
    topo = trial.reason()
    if topo is not None:
        return None, [topo]
    victims = []
    for p in low.ordered:  # no PodDisruptionBudgets: every pod is non-violating
        fit.add(p)
        trial.add(p)
        use = volumes.uses(p) if volumes is not None else 0
        if not fit.fits(spec) or held + use > 0 or trial.reason() is not None:
            fit.remove(p)
            trial.remove(p)
            victims.append(p)
        else:
            held += use
    return victims, []


class Trial:
    """``PodFilter.reason`` on one node with some of its pods taken off, as the counters would read once
    ``Topology.unbound`` took them: the count of the node's own domain drops by the pods each counter
    counts there (and the minimum over the domains is the smaller of the old one and that count: only that
    domain changed), InterPodAffinity's pairs on the node drop by the pods matching every term (a pair at 0
    is gone, which the first-pod rule reads), and the placed pods' anti-affinity terms by the terms the pods
    taken off carry."""

    __slots__ = ("filt", "labels", "namespaces", "off", "share", "st")

    def __init__(self, filt: PodFilter, st: NodeState) -> None:
        self.filt = filt
        self.st = st
        self.labels = st.node.labels
        self.namespaces = Trial.counted(filt)
        n = len(filt.spread) + len(filt.anti) + len(filt.blocked_terms)
        if filt.affinity is not None:
            n += len(filt.affinity[0])
        # per slot (the spread entries, affinity terms, anti-affinity terms, blocking terms): counted off
        self.off = [0] * n
        self.share: dict[int, tuple[Pod, list[tuple[int, int]]]] = {}  # id(pod) -> its slots (``_share``)

    def _share(self, pod: Pod) -> list[tuple[int, int]]:
        """The slots ``pod`` counts in on this node, with how many times (SpreadCounter.add,
        AffinityCounter.add, AntiAffinityCounter.add, the anti-affinity terms Topology.bound registers)."""
        hit = self.share.get(id(pod))
        if hit is not None and hit[0] is pod:
            return hit[1]
        out: list[tuple[int, int]] = []
        namespaces = self.namespaces
        if (
            namespaces is not None
            and pod.namespace not in namespaces
            and not (self.filt.blocked_terms and pod.spec.pod_anti_affinity)
        ):
            return out  # counted by none of the counters, and carrying no term that blocks the pod
        filt, labels, idx = self.filt, self.labels, self.st.index
        slot = 0
        for entry in filt.spread:
            counter = entry[6]
            selector = counter.selector
            if (
                selector is not None
                and pod.namespace == counter.namespace
                and counter.eligible[idx] is not None
                and selector_matches(selector, pod.labels)
            ):
                out.append((slot, 1))
            slot += 1
        if filt.affinity is not None:
            terms = filt.affinity[0]
            if all(t.matches(pod) for t in terms):
                for i, t in enumerate(terms):
                    if t.topology_key in labels:
                        out.append((slot + i, 1))
            slot += len(terms)
        for anti in filt.anti:
            term = anti[3]
            if term.topology_key in labels and term.matches(pod):
                out.append((slot, 1))
            slot += 1
        if filt.blocked_terms and pod.spec.pod_anti_affinity:
            mine = [resolve_term(t, pod) for t in pod.spec.pod_anti_affinity if t.topology_key in labels]
            for t in filt.blocked_terms:
                n = mine.count(t)
                if n:
                    out.append((slot, n))
                slot += 1
        self.share[id(pod)] = (pod, out)
        return out

    def remove(self, pod: Pod) -> None:
        off = self.off
        for slot, n in self._share(pod):
            off[slot] += n

    def add(self, pod: Pod) -> None:
        off = self.off
        for slot, n in self._share(pod):
            off[slot] -= n

    @staticmethod
    def counted(filt: PodFilter) -> frozenset[str] | None:
        """The namespaces whose pods the counters of ``filt`` count (a spread constraint: the pod's own; a
        term: those it names), or None when a term's namespace selector may count any."""
        out: set[str] = {entry[6].namespace for entry in filt.spread}
        terms = list(filt.affinity[0]) if filt.affinity is not None else []
        terms += [a[3] for a in filt.anti]
        for t in terms:
            if t.namespace_selector is not None:
                return None
            out |= t.namespaces
        return frozenset(out)

    @staticmethod
    def signature(filt: PodFilter, labels: Mapping[str, str]) -> tuple[Any, ...]:
        """What ``reason`` reads of the counts on a node with these labels, whatever is taken off: the same
        signature and the same pods on the node give the same answers. A spread constraint reads its
        domain's count less the minimum, d: with o of the node's pods off, the node fails when o > d and
        self-match > maxSkew (the domain is the new minimum), else when d - o + self-match > maxSkew (o never
        exceeds the count, so without minDomains met, where the minimum is 0, o > d cannot happen)."""
        out: list[Any] = []
        for key, domains, _, min_match, _, _, _, _ in filt.spread:
            value = labels.get(key)
            out.append(domains.get(value, 0) - min_match if value is not None else None)
        if filt.affinity is not None:
            terms, counts, _ = filt.affinity
            out.append(len(counts))
            for t in terms:
                value = labels.get(t.topology_key)
                out.append(counts.get((t.topology_key, value), 0) if value is not None else None)
        for key, counts_by_value, _, _ in filt.anti:
            value = labels.get(key)
            out.append(counts_by_value.get(value, 0) if value is not None else None)
        out.append(len(filt.blocked))
        for key, placed in filt.blocked:
            value = labels.get(key)
            out.append(placed.get((key, value), 0) if value is not None else None)
        return tuple(out)

    def reason(self) -> str | None:
        filt, labels, off = self.filt, self.labels, self.off
        slot = 0
        for key, domains, self_match, min_match, max_skew, _, _, applies in filt.spread:
            value = labels.get(key)
            if value is None:
                return ERR_SPREAD_LABEL
            count = domains.get(value, 0) - off[slot]
            if applies and off[slot] and count < min_match:
                min_match = count
            if count + self_match - min_match > max_skew:
                return ERR_SPREAD
            slot += 1
        if filt.affinity is not None:
            terms, counts, _ = filt.affinity
            exist = True
            pairs: dict[tuple[str, str], int] = {}
            for i, t in enumerate(terms):
                value = labels.get(t.topology_key)
                if value is None:
                    return ERR_POD_AFFINITY
                pair = (t.topology_key, value)
                pairs[pair] = pairs.get(pair, 0) + off[slot + i]
            for pair in pairs:
                if counts.get(pair, 0) - pairs[pair] <= 0:
                    exist = False
            if not exist:
                # the first-pod rule: no pair left anywhere once these pods are off
                gone = all(c - pairs.get(pair, 0) <= 0 for pair, c in counts.items())
                if not (gone and filt.affinity_matches):
                    return ERR_POD_AFFINITY
            slot += len(terms)
        for key, counts_by_value, _, _ in filt.anti:
            value = labels.get(key)
            if value is not None and counts_by_value.get(value, 0) - off[slot] > 0:
                return ERR_POD_ANTI_AFFINITY
            slot += 1
        for key, placed in filt.blocked:
            value = labels.get(key)
            if value is not None and placed.get((key, value), 0) - off[slot] > 0:
                return ERR_EXISTING_ANTI_AFFINITY
            slot += 1
        return None

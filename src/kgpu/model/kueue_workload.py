"""Kueue's Workload, read as its scheduler reads it (sigs.k8s.io/kueue v0.15.0 pkg/workload).

A PodSet's requests are one pod's ``PodRequests`` (k8s.io/component-helpers: the larger of the containers'
sum and each init container's, restartable init containers (sidecars) added to both, pod overhead, the
pod-level requests where set), after Kueue's ``AdjustResources``: a container's limits stand in for the
requests it does not set (``UseLimitsAsMissingRequestsInPod``). kgpu's own pod reader
(``kgpu.model.podspec.spec_info``) computes exactly that; resources a pod names with a zero amount are kept
(Kueue then needs a ClusterQueue that covers them). The total a PodSet asks for is one pod's requests times
its count less the pods ``status.reclaimablePods`` gives back (``totalRequestsFromPodSets``); an admitted
Workload holds what ``status.admission.podSetAssignments`` records (``totalRequestsFromAdmission``).

v1beta2 names the priority class ``spec.priorityClassRef: {group, kind, name}``, v1beta1
``spec.priorityClassName`` with ``spec.priorityClassSource``; the scheduler only reads ``spec.priority``
(0 when unset, pkg/util/priority), which both versions must set with a class (CEL).

Refused as the API server refuses them: at most 8 PodSets, a count outside 0..2^31-1, a minCount above the
count or on two PodSets, ``pods`` requested by a container (the webhook reserves it), an admission whose
PodSet assignments do not match the PodSets or whose usage is not a multiple of the count; and, since
kgpu counts in int64 as Kueue does, a PodSet whose total would overflow it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.kueue_fields import (
    INT32_MAX,
    Obj,
    boolean,
    enum,
    integer,
    items,
    mapping,
    reference,
    string,
    time_at,
)
from kgpu.model.kueue_resources import PODS, resource_value
from kgpu.model.objects import NodeSelector, Toleration
from kgpu.model.podspec import spec_info
from kgpu.model.quantity import MAX_INT64, parse_quantity

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
FINISHED = "Finished"
EVICTED = "Evicted"
REQUEUED = "Requeued"
PREEMPTED = "Preempted"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PRIORITY_CLASS_SOURCES = ("", "kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass")


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int  # after status.reclaimablePods
    min_count: int | None
    requests: Mapping[str, int]  # one pod's, in Kueue's units
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: NodeSelector | None = None  # required node affinity
    tolerations: tuple[Toleration, ...] = ()
    topology_request: bool = False
    # ValidateResources: (container path, resource names) where a request exceeds the container's limit
    over_limits: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def total(self, count: int | None = None) -> dict[str, int]:
        n = self.count if count is None else count
        return {k: v * n for k, v in self.requests.items()}


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    flavors: Mapping[str, str]  # resource -> ResourceFlavor
    usage: Mapping[str, int]  # the PodSet's total, in Kueue's units
    count: int


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: str
    podsets: tuple[PodSetAssignment, ...]


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    time: float | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    queue_name: str
    podsets: tuple[PodSet, ...]
    priority: int = 0
    creation: float = 0.0
    uid: str = ""
    job_uid: str = ""
    priority_class: str = ""
    active: bool = True
    admission: Admission | None = None
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    source: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def condition(self, kind: str) -> Condition | None:
        return self.conditions.get(kind)

    def is_true(self, kind: str) -> bool:
        cond = self.conditions.get(kind)
        return cond is not None and cond.status == "True"


def _podset(raw: object, at: str, reclaim: Mapping[str, int]) -> PodSet:
    if not isinstance(raw, dict):
        raise InputError(f"must be a mapping, got {type(raw).__name__}", where=at)
    name = string(raw, "name", at, "main")
    if not name or len(name) > 63:
        raise InputError(f"{quote(name)}: must be 1 to 63 characters", where=f"{at}.name")
    count = integer(raw, "count", at, lo=0)
    count = 1 if count is None else count
    min_count = integer(raw, "minCount", at, lo=1)
    if min_count is not None and min_count > count:
        raise InputError("minCount should be positive and less or equal to count", where=at)
    template = mapping(raw, "template", at)
    tat = f"{at}.template.spec"
    try:
        spec = msgspec.convert(mapping(template, "spec", f"{at}.template"), wire.PodSpec)
    except msgspec.ValidationError as exc:
        message, _, path = str(exc).partition(" - at `$")
        raise InputError(message, where=tat + path.rstrip("`")) from None
    info, _ = spec_info(spec, tat)
    requests = dict(info.requests)
    over: list[tuple[str, tuple[str, ...]]] = []
    for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, c in enumerate(containers or ()):
            res = c.resources or wire.ResourceRequirements()
            req, lim = res.requests or {}, res.limits or {}
            if PODS in req:
                raise InputError(
                    "the key is reserved for internal kueue use",
                    where=f"{tat}.{kind}[{i}].resources.requests.pods",
                )
            for res_name in (*req, *lim):
                requests.setdefault(res_name, 0)  # PodRequests keeps a resource named with a zero amount
            greater = sorted(
                k for k, v in req.items() if k in lim and parse_quantity(v) > parse_quantity(lim[k])
            )
            if greater:
                over.append((f"{kind}[{i}]", tuple(greater)))
    pod_level = (spec.resources.requests or {}) if spec.resources is not None else {}
    for res_name in (*(spec.overhead or {}), *pod_level):
        requests.setdefault(res_name, 0)
    reclaimed = reclaim.get(name, 0)
    if reclaimed > count:
        raise InputError(f"reclaimablePods: should be less or equal to {count}", where=f"{at}.count")
    effective = count - reclaimed
    for res_name, amount in requests.items():
        if amount * effective > MAX_INT64:
            raise InputError(
                f"{res_name}: {amount} x {effective} pods is more than 2^63-1 (int64)", where=f"{at}.count"
            )
    return PodSet(
        name=name,
        count=effective,
        min_count=min_count,
        requests=requests,
        node_selector=info.node_selector,
        affinity=info.affinity,
        tolerations=info.tolerations,
        topology_request=_explicit_tas(raw.get("topologyRequest")),
        over_limits=tuple(over),
    )


# The fields that make a PodSet's topologyRequest a request for topology-aware scheduling
# (pkg/workload/workload.go IsExplicitlyRequestingTAS). Kueue's Job integration sets podIndexLabel (and
# subgroup labels) on every PodSet; that alone asks nothing of the topology.
_TAS_FIELDS = ("unconstrained", "required", "preferred", "podSetSliceRequiredTopology", "podSetSliceSize")


def _explicit_tas(request: object) -> bool:
    return isinstance(request, Mapping) and any(request.get(f) is not None for f in _TAS_FIELDS)


def _conditions(status: Mapping[str, Any], at: str) -> dict[str, Condition]:
    out: dict[str, Condition] = {}
    for i, raw in enumerate(items(status, "conditions", at, max_items=16)):
        cat = f"{at}.conditions[{i}]"
        if not isinstance(raw, dict):
            raise InputError(f"must be a mapping, got {type(raw).__name__}", where=cat)
        kind = string(raw, "type", cat)
        out[kind] = Condition(
            type=kind,
            status=enum(raw, "status", cat, ("True", "False", "Unknown"), "Unknown"),
            reason=string(raw, "reason", cat),
            message=string(raw, "message", cat),
            time=time_at(raw.get("lastTransitionTime"), f"{cat}.lastTransitionTime"),
        )
    return out


def _admission(
    status: Mapping[str, Any], at: str, podsets: tuple[PodSet, ...], counts: Mapping[str, int]
) -> Admission | None:
    adm = status.get("admission")
    if adm is None:
        return None
    aat = f"{at}.admission"
    adm = mapping(status, "admission", at)
    cq = reference(adm, "clusterQueue", aat, required=True)
    names = {ps.name for ps in podsets}
    assignments = []
    for i, raw in enumerate(items(adm, "podSetAssignments", aat, max_items=8)):
        pat = f"{aat}.podSetAssignments[{i}]"
        if not isinstance(raw, dict):
            raise InputError(f"must be a mapping, got {type(raw).__name__}", where=pat)
        name = string(raw, "name", pat, "main")
        if name not in names:
            raise InputError(f"Not found: {quote(name)}", where=f"{pat}.name")
        count = integer(raw, "count", pat, lo=0)
        count = counts[name] if count is None else count
        flavors = {}
        for res, flavor in mapping(raw, "flavors", pat).items():
            flavors[res] = reference({res: flavor}, res, f"{pat}.flavors", required=True)
        usage = {}
        for res, qty in mapping(raw, "resourceUsage", pat).items():
            value = resource_value(res, qty, f"{pat}.resourceUsage.{res}")
            if count > 0 and value % count:
                raise InputError(
                    f"{quote(qty)}: is not a multiple of {count}", where=f"{pat}.resourceUsage.{res}"
                )
            usage[res] = value
        assignments.append(PodSetAssignment(name, flavors, usage, count))
    return Admission(cq, tuple(assignments))


def _scaled(adm: Admission, podsets: tuple[PodSet, ...]) -> Admission:
    """totalRequestsFromAdmission: a PodSet whose pods were reclaimed since admission holds less."""
    now = {ps.name: ps.count for ps in podsets}
    out = []
    for psa in adm.podsets:
        after = now.get(psa.name, psa.count)
        if after < psa.count:
            usage = {k: (v // psa.count if psa.count else 0) * after for k, v in psa.usage.items()}
            psa = PodSetAssignment(psa.name, psa.flavors, usage, after)
        out.append(psa)
    return Admission(adm.cluster_queue, tuple(out))


def read_workload(o: Obj, source: str = "") -> Workload:
    spec, at = o.spec, o.at("spec")
    status, sat = o.status, o.at("status")
    meta = o.meta
    reclaim: dict[str, int] = {}
    for i, raw in enumerate(items(status, "reclaimablePods", sat, max_items=8)):
        rat = f"{sat}.reclaimablePods[{i}]"
        if not isinstance(raw, dict):
            raise InputError(f"must be a mapping, got {type(raw).__name__}", where=rat)
        reclaim[string(raw, "name", rat)] = integer(raw, "count", rat, lo=0) or 0
    raw_podsets = items(spec, "podSets", at, max_items=8)
    if not raw_podsets:
        raise InputError("should have at least 1 items", where=f"{at}.podSets")
    podsets = tuple(_podset(raw, f"{at}.podSets[{i}]", reclaim) for i, raw in enumerate(raw_podsets))
    if len({ps.name for ps in podsets}) != len(podsets):
        raise InputError("Duplicate value: podSet names must be unique", where=f"{at}.podSets")
    if sum(ps.min_count is not None for ps in podsets) > 1:
        raise InputError("at most one podSet can use minCount", where=f"{at}.podSets")
    unknown = set(reclaim) - {ps.name for ps in podsets}
    if unknown:
        raise InputError(f"Unsupported value: {quote(min(unknown))}", where=f"{sat}.reclaimablePods")

    priority = integer(spec, "priority", at, lo=-(2**31), hi=INT32_MAX)
    if o.version == "v1beta1":
        cls = string(spec, "priorityClassName", at)
        enum(spec, "priorityClassSource", at, PRIORITY_CLASS_SOURCES, "")
        if cls and priority is None:
            raise InputError(
                "priority should not be nil when priorityClassName is set", where=f"{at}.priority"
            )
    else:
        ref = mapping(spec, "priorityClassRef", at)
        cls = string(ref, "name", f"{at}.priorityClassRef")
        if spec.get("priorityClassRef") is not None:
            rat = f"{at}.priorityClassRef"
            group = enum(ref, "group", rat, ("kueue.x-k8s.io", "scheduling.k8s.io"), "")
            kind = enum(ref, "kind", rat, ("WorkloadPriorityClass", "PriorityClass"), "")
            if (group == "scheduling.k8s.io") != (kind == "PriorityClass"):
                raise InputError(
                    f"{quote(kind)} is not the kind of the {quote(group)} group", where=f"{rat}.kind"
                )
            if priority is None:
                raise InputError(
                    "priority should not be nil when priorityClassRef is set", where=f"{at}.priority"
                )

    conditions = _conditions(status, sat)
    counts = {ps.name: ps.count + reclaim.get(ps.name, 0) for ps in podsets}
    admission = _admission(status, sat, podsets, counts)
    reserved = conditions.get("QuotaReserved")
    if admission is not None and reserved is not None and reserved.status == "True":
        if len(admission.podsets) != len(podsets):
            raise InputError(
                "podSetAssignments must have the same number of podSets as the spec", where=f"{sat}.admission"
            )
        admission = _scaled(admission, podsets)
    created = time_at(meta.get("creationTimestamp"), o.at("metadata.creationTimestamp"))
    labels = mapping(meta, "labels", o.at("metadata"))
    job_uid = labels.get(JOB_UID_LABEL, "")
    return Workload(
        namespace=o.namespace,
        name=o.name,
        queue_name=reference(spec, "queueName", at),
        podsets=podsets,
        priority=priority or 0,
        creation=created or 0.0,
        uid=string(meta, "uid", o.at("metadata")),
        job_uid=job_uid if isinstance(job_uid, str) else "",
        priority_class=cls,
        active=boolean(spec, "active", at, True),
        admission=admission,
        conditions=conditions,
        source=source,
    )


__all__ = ["Admission", "Condition", "PodSet", "PodSetAssignment", "Workload", "read_workload"]

"""Kueue's objects as kgpu reads them (sigs.k8s.io/kueue v0.15.0, kueue.x-k8s.io v1beta1 and v1beta2).

``read_kueue`` takes Kubernetes objects as dicts (the items of ``kubectl get -o json``, any mix, ``List``
documents flattened) and returns the typed objects Kueue's scheduler works from: ResourceFlavors,
ClusterQueues, Cohorts, LocalQueues, AdmissionChecks (active or not), WorkloadPriorityClasses,
scheduling.k8s.io PriorityClasses, Namespaces (their labels, for ClusterQueue namespaceSelectors) and
Workloads. Every other object is ignored. The types and their validation live in ``kueue_queues``
(quota objects) and ``kueue_workload``; what is refused and what is read as it is, is said there.

A kueue.x-k8s.io version Kueue v0.15.0 does not serve (v1alpha1) is refused: the API server would not
have stored it. Two objects of one kind and name are refused too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.kueue_fields import GROUP, VERSIONS, Obj, boolean, integer, labels
from kgpu.model.kueue_queues import (
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    Preemption,
    Quota,
    ResourceFlavor,
    ResourceGroup,
    read_admission_check,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
    read_resource_flavor,
)
from kgpu.model.kueue_workload import Admission, Condition, PodSet, PodSetAssignment, Workload, read_workload

MAX_WORKLOADS = 300_000  # as many as the pods kgpu reads from one input (kgpu.model.load.MAX_PODS)
MAX_QUEUE_OBJECTS = 100_000  # ClusterQueues, Cohorts, LocalQueues, ResourceFlavors together

_QUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "AdmissionCheck", "WorkloadPriorityClass")


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False


@dataclass(slots=True)
class KueueObjects:
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueue] = field(default_factory=dict)
    admission_checks: dict[str, bool] = field(default_factory=dict)  # name -> active
    workload_priority_classes: dict[str, int] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] | None = None  # None: the input has no Namespace objects
    workloads: list[Workload] = field(default_factory=list)


def _flatten(objects: Iterable[Any], source: str) -> Iterable[tuple[int, Any]]:
    for i, doc in enumerate(objects):
        if (
            isinstance(doc, dict)
            and isinstance(doc.get("kind"), str)
            and doc["kind"].endswith("List")
            and "items" in doc
        ):
            inner = doc["items"]
            if not isinstance(inner, list):
                raise InputError("must be a list", where=f"{source}: item {i}: items")
            yield from enumerate(inner)
        else:
            yield i, doc


def read_kueue(objects: Iterable[Any], source: str = "") -> KueueObjects:
    """The Kueue objects (and PriorityClasses, Namespaces) among ``objects``; the rest is ignored."""
    if isinstance(objects, dict):
        objects = [objects]
    elif isinstance(objects, str | bytes) or not isinstance(objects, Iterable):
        raise InputError(f"expected a list of objects, got {type(objects).__name__}", where=source)
    out = KueueObjects()
    seen: set[tuple[str, str, str]] = set()
    queue_objects = 0
    for i, doc in _flatten(objects, source):
        if not isinstance(doc, dict):
            raise InputError(f"must be a mapping, got {type(doc).__name__}", where=f"{source}: item {i}")
        kind, api_version = doc.get("kind"), doc.get("apiVersion")
        if not isinstance(kind, str) or not isinstance(api_version, str):
            continue
        group, _, version = api_version.rpartition("/")
        if group == GROUP:
            if version not in VERSIONS:
                raise InputError(
                    f"{quote(api_version)} is not served by Kueue v0.15.0 (kueue.x-k8s.io/v1beta1, v1beta2)",
                    where=f"{source}: {kind}: apiVersion",
                )
            namespaced = kind in ("LocalQueue", "Workload")
        elif (group, version, kind) == ("scheduling.k8s.io", "v1", "PriorityClass") or (
            group,
            version,
            kind,
        ) == (
            "",
            "v1",
            "Namespace",
        ):
            namespaced = False
        else:
            continue
        if kind not in (*_QUEUE_KINDS, "LocalQueue", "Workload", "PriorityClass", "Namespace"):
            continue
        o = Obj(doc, kind, source, namespaced=namespaced)
        identity = (kind, o.namespace, o.name)
        if identity in seen:
            raise InputError(
                f"a second {kind} with this name", where=o.where, hint="object names are unique per kind"
            )
        seen.add(identity)
        if kind == "Workload":
            if len(out.workloads) >= MAX_WORKLOADS:
                raise InputError(f"more than {MAX_WORKLOADS:,} Workloads", where=source)
            out.workloads.append(read_workload(o, source))
            continue
        queue_objects += 1
        if queue_objects > MAX_QUEUE_OBJECTS:
            raise InputError(f"more than {MAX_QUEUE_OBJECTS:,} Kueue queue objects and flavors", where=source)
        _read_other(out, o)
    return out


def _value(o: Obj, hi: int) -> int:
    """A priority class's top-level ``value`` (int32)."""
    return integer(o.doc, "value", o.where + ":", lo=-(2**31), hi=hi) or 0


def _read_other(out: KueueObjects, o: Obj) -> None:
    kind = o.kind
    if kind == "ResourceFlavor":
        out.flavors[o.name] = read_resource_flavor(o)
    elif kind == "ClusterQueue":
        out.cluster_queues[o.name] = read_cluster_queue(o)
    elif kind == "Cohort":
        out.cohorts[o.name] = read_cohort(o)
    elif kind == "LocalQueue":
        lq = read_local_queue(o)
        out.local_queues[(lq.namespace, lq.name)] = lq
    elif kind == "AdmissionCheck":
        out.admission_checks[o.name] = read_admission_check(o)
    elif kind == "WorkloadPriorityClass":
        out.workload_priority_classes[o.name] = _value(o, 2**31 - 1)
    elif kind == "PriorityClass":
        # HighestUserDefinablePriority is 10^9; only the two system classes go above it.
        system = o.name in ("system-cluster-critical", "system-node-critical")
        default = boolean(o.doc, "globalDefault", o.where + ":", False)
        out.priority_classes[o.name] = PriorityClass(
            o.name, _value(o, 2**31 - 1 if system else 1_000_000_000), default
        )
    elif kind == "Namespace":
        if out.namespaces is None:
            out.namespaces = {}
        out.namespaces[o.name] = labels(o.meta.get("labels"), o.at("metadata.labels"))


__all__ = [
    "Admission",
    "ClusterQueue",
    "Cohort",
    "Condition",
    "FlavorFungibility",
    "FlavorQuotas",
    "KueueObjects",
    "LocalQueue",
    "PodSet",
    "PodSetAssignment",
    "Preemption",
    "PriorityClass",
    "Quota",
    "ResourceFlavor",
    "ResourceGroup",
    "Workload",
    "read_kueue",
]

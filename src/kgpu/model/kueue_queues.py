"""Kueue's quota objects: ResourceFlavor, ClusterQueue, Cohort, LocalQueue, read and validated.

Both served versions are read: kueue.x-k8s.io/v1beta1 spells the ClusterQueue's cohort ``spec.cohort`` and
lists admission checks in ``spec.admissionChecks``; v1beta2 (what v0.15 stores) has ``spec.cohortName`` and
only ``spec.admissionChecksStrategy`` (apis/kueue/v1beta1/clusterqueue_conversion.go). Defaults are the
CRD's (``queueingStrategy: BestEffortFIFO``, ``preemption: {}`` with every policy ``Never``,
``flavorFungibility: {}`` with ``whenCanBorrow: MayStopSearch``, ``whenCanPreempt: TryNextFlavor``,
``stopPolicy: None``), so a hand-written file and one read back from the API server mean the same.

Refused (InputError), as the API server refuses them: the CRD schema (enums, ``maxItems``: 16 resource
groups, 64 covered resources / flavors / resources each) and CEL rules (each flavor lists as many
resources as the group covers; ``borrowingLimit`` only with a cohort; ``preference`` only with both
fungibility policies ``TryNextFlavor``; ``reclaimWithinCohort: Never`` forbids a ``borrowWithinCohort``
policy), and the validating webhook (pkg/webhooks/clusterqueue_webhook.go, cohort_webhook.go,
resourceflavor_webhook.go): resource names in coveredResources order, no resource or flavor twice,
at most 256 flavors and 256 covered resources per ClusterQueue and 512 flavor-resource pairs per group,
quotas not negative, ``lendingLimit`` only with a cohort and (for a ClusterQueue) at most the nominal
quota, a valid namespaceSelector, fairSharing weights of 0 or above 1n.

Read as they are, because Kueue accepts them and reports on them: a ResourceFlavor or AdmissionCheck that
does not exist (the ClusterQueue is inactive), a cohort cycle (its ClusterQueues are left out of every
scheduling snapshot), a LocalQueue naming no ClusterQueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.kueue_fields import (
    Obj,
    enum,
    integer,
    items,
    label_selector,
    labels,
    mapping,
    reference,
    string,
    taints,
)
from kgpu.model.kueue_resources import resource_value
from kgpu.model.names import is_qualified_name
from kgpu.model.objects import LabelSelector, Taint, Toleration
from kgpu.model.podspec import _validate_toleration
from kgpu.model.quantity import parse_quantity

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
ANY = "Any"
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")


@dataclass(frozen=True, slots=True)
class Quota:
    """One resource of one flavor, in Kueue's units (cpu in millicores). ``None``: no limit set."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: tuple[tuple[str, Quota], ...]  # in coveredResources order


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]  # in the order Kueue tries them


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str]
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str = ""
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Preemption:
    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER  # policy; Never when the field is absent
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str = ""


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str = ""
    queueing_strategy: str = BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None  # None selects no namespace
    preemption: Preemption = Preemption()
    fungibility: FlavorFungibility = FlavorFungibility()
    stop_policy: str = "None"
    fair_weight: Fraction | None = None  # spec.fairSharing.weight when set
    admission_checks: tuple[str, ...] = ()
    admission_scope: bool = False  # spec.admissionScope set (admission fair sharing)
    uid: str = ""

    @property
    def flavor_names(self) -> tuple[str, ...]:
        return tuple(f.name for rg in self.resource_groups for f in rg.flavors)


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str = ""
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Fraction | None = None


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"


# --- ResourceFlavor -------------------------------------------------------------------------------------


def read_resource_flavor(o: Obj) -> ResourceFlavor:
    spec, at = o.spec, o.at("spec")
    node_labels = labels(spec.get("nodeLabels"), f"{at}.nodeLabels")
    if len(node_labels) > 8:
        raise InputError(f"Too many: {len(node_labels)}: must have at most 8 items", where=f"{at}.nodeLabels")
    tolerations = []
    for i, raw in enumerate(items(spec, "tolerations", at, max_items=8)):
        where = f"{at}.tolerations[{i}]"
        try:
            t = msgspec.convert(raw, wire.Toleration)
        except msgspec.ValidationError as exc:
            raise InputError(str(exc).partition(" - at ")[0], where=where) from None
        if t.toleration_seconds is not None and t.effect != "NoExecute":
            raise InputError(
                "effect must be 'NoExecute' when 'tolerationSeconds' is set", where=f"{where}.effect"
            )
        tolerations.append(_validate_toleration(t, where))
    topology = reference(spec, "topologyName", at)
    if topology and not node_labels:
        raise InputError("at least one nodeLabel is required when topology is set", where=f"{at}.nodeLabels")
    return ResourceFlavor(
        name=o.name,
        node_labels=node_labels,
        node_taints=taints(items(spec, "nodeTaints", at, max_items=8), f"{at}.nodeTaints"),
        tolerations=tuple(tolerations),
        topology_name=topology,
        uid=string(o.meta, "uid", o.at("metadata")),
    )


# --- resource groups ------------------------------------------------------------------------------------


def _limit(item: Mapping[str, Any], key: str, name: str, where: str) -> int | None:
    if item.get(key) is None:
        return None
    return resource_value(name, item[key], f"{where}.{key}")


def read_resource_groups(
    spec: Mapping[str, Any], at: str, *, has_parent: bool, is_cohort: bool
) -> tuple[ResourceGroup, ...]:
    """spec.resourceGroups of a ClusterQueue or Cohort, validated as the CRD and webhook do."""
    groups = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    total_flavors = total_covered = 0
    parent_word = "parent" if is_cohort else "cohort"
    for g, raw in enumerate(items(spec, "resourceGroups", at, max_items=16)):
        gat = f"{at}.resourceGroups[{g}]"
        group = _as_mapping(raw, gat)
        covered_raw = items(group, "coveredResources", gat, max_items=64)
        if not covered_raw:
            raise InputError("should have at least 1 items", where=f"{gat}.coveredResources")
        covered: list[str] = []
        for j, name in enumerate(covered_raw):
            rat = f"{gat}.coveredResources[{j}]"
            if not isinstance(name, str) or not is_qualified_name(name):
                raise InputError(f"{quote(name)}: not a valid resource name", where=rat)
            if name in seen_resources:
                raise InputError(f"Duplicate value: {quote(name)}", where=rat)
            seen_resources.add(name)
            covered.append(name)
        flavors_raw = items(group, "flavors", gat, max_items=64)
        if not flavors_raw:
            raise InputError("should have at least 1 items", where=f"{gat}.flavors")
        pairs = 0
        flavors = []
        for j, fraw in enumerate(flavors_raw):
            fat = f"{gat}.flavors[{j}]"
            fq = _as_mapping(fraw, fat)
            fname = reference(fq, "name", fat, required=True)
            if fname in seen_flavors:
                raise InputError(f"Duplicate value: {quote(fname)}", where=f"{fat}.name")
            seen_flavors.add(fname)
            res_raw = items(fq, "resources", fat, max_items=64)
            if len(res_raw) != len(covered):
                raise InputError(
                    "flavors must have the same number of resources as the coveredResources", where=gat
                )
            pairs += len(res_raw)
            quotas = []
            for k, qraw in enumerate(res_raw):
                qat = f"{fat}.resources[{k}]"
                q = _as_mapping(qraw, qat)
                rname = string(q, "name", qat)
                if rname != covered[k]:
                    raise InputError(
                        f"{quote(rname)}: must match the name in coveredResources", where=f"{qat}.name"
                    )
                if "nominalQuota" not in q:  # required by the CRD's schema
                    extra = sorted(set(q) - {"name", "nominalQuota", "borrowingLimit", "lendingLimit"})
                    raise InputError(
                        "Required value" + (f" (unknown field {', '.join(map(quote, extra))})" if extra else ""),
                        where=f"{qat}.nominalQuota",
                    )
                nominal = resource_value(rname, q["nominalQuota"], f"{qat}.nominalQuota")
                borrowing = _limit(q, "borrowingLimit", rname, qat)
                lending = _limit(q, "lendingLimit", rname, qat)
                for value, key in ((borrowing, "borrowingLimit"), (lending, "lendingLimit")):
                    if value is not None and not has_parent:
                        raise InputError(f"must be nil when {parent_word} is empty", where=f"{qat}.{key}")
                if (
                    lending is not None
                    and not is_cohort
                    and parse_quantity(q["lendingLimit"]) > parse_quantity(q.get("nominalQuota", 0))
                ):
                    raise InputError(
                        "must be less than or equal to the nominalQuota", where=f"{qat}.lendingLimit"
                    )
                quotas.append((rname, Quota(nominal, borrowing, lending)))
            flavors.append(FlavorQuotas(fname, tuple(quotas)))
        if pairs > 512:
            raise InputError(
                f"number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {pairs}",
                where=gat,
            )
        total_flavors += len(flavors)
        total_covered += len(covered)
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    if not is_cohort:
        if total_flavors > 256:
            raise InputError(
                f"total number of flavors across all resourceGroups must be ≤ 256, got {total_flavors}",
                where=f"{at}.resourceGroups",
            )
        if total_covered > 256:
            raise InputError(
                f"total number of covered resources across all resourceGroups must be ≤ 256, got {total_covered}",
                where=f"{at}.resourceGroups",
            )
    return tuple(groups)


def _as_mapping(raw: object, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InputError(f"must be a mapping, got {type(raw).__name__}", where=where)
    return raw


def _fair_weight(spec: Mapping[str, Any], at: str) -> Fraction | None:
    fair = mapping(spec, "fairSharing", at)
    if fair.get("weight") is None:
        return None
    where = f"{at}.fairSharing.weight"
    weight = parse_quantity(fair["weight"], where=where)
    if weight < 0:
        raise InputError("must be greater than or equal to 0", where=where)
    if 0 < weight <= Fraction(1, 10**9):
        raise InputError("When not 0, weight must be > 10e-9", where=where)
    return weight


# --- ClusterQueue ---------------------------------------------------------------------------------------


def read_cluster_queue(o: Obj) -> ClusterQueue:
    spec, at = o.spec, o.at("spec")
    cohort_key = "cohort" if o.version == "v1beta1" else "cohortName"
    cohort = reference(spec, cohort_key, at)
    groups = read_resource_groups(spec, at, has_parent=bool(cohort), is_cohort=False)

    pre = mapping(spec, "preemption", at)
    pat = f"{at}.preemption"
    within = enum(pre, "withinClusterQueue", pat, (NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL), NEVER)
    reclaim = enum(pre, "reclaimWithinCohort", pat, (NEVER, LOWER_PRIORITY, ANY), NEVER)
    bwc = mapping(pre, "borrowWithinCohort", pat)
    bat = f"{pat}.borrowWithinCohort"
    borrow = enum(bwc, "policy", bat, (NEVER, LOWER_PRIORITY), NEVER)
    threshold = integer(bwc, "maxPriorityThreshold", bat, lo=-(2**31))
    if reclaim == NEVER and borrow != NEVER:
        raise InputError("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never", where=pat)

    fun = mapping(spec, "flavorFungibility", at)
    fat = f"{at}.flavorFungibility"
    policies = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR)
    fungibility = FlavorFungibility(
        when_can_borrow=enum(fun, "whenCanBorrow", fat, policies, MAY_STOP_SEARCH),
        when_can_preempt=enum(fun, "whenCanPreempt", fat, policies, TRY_NEXT_FLAVOR),
        preference=enum(
            fun, "preference", fat, ("", "BorrowingOverPreemption", "PreemptionOverBorrowing"), ""
        ),
    )
    if fungibility.preference and (fungibility.when_can_borrow, fungibility.when_can_preempt) != (
        TRY_NEXT_FLAVOR,
        TRY_NEXT_FLAVOR,
    ):
        raise InputError(
            "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
            where=f"{fat}.preference",
        )

    checks: list[str] = []
    if o.version == "v1beta1":
        for i, name in enumerate(items(spec, "admissionChecks", at, max_items=64)):
            checks.append(reference({"name": name}, "name", f"{at}.admissionChecks[{i}]", required=True))
    strategy = mapping(spec, "admissionChecksStrategy", at)
    for i, rule in enumerate(
        items(strategy, "admissionChecks", f"{at}.admissionChecksStrategy", max_items=64)
    ):
        rat = f"{at}.admissionChecksStrategy.admissionChecks[{i}]"
        checks.append(reference(_as_mapping(rule, rat), "name", rat, required=True))

    return ClusterQueue(
        name=o.name,
        resource_groups=groups,
        cohort=cohort,
        queueing_strategy=enum(
            spec, "queueingStrategy", at, (STRICT_FIFO, BEST_EFFORT_FIFO), BEST_EFFORT_FIFO
        ),
        namespace_selector=label_selector(spec.get("namespaceSelector"), f"{at}.namespaceSelector"),
        preemption=Preemption(within, reclaim, borrow, threshold),
        fungibility=fungibility,
        stop_policy=enum(spec, "stopPolicy", at, STOP_POLICIES, "None"),
        fair_weight=_fair_weight(spec, at),
        admission_checks=tuple(checks),
        admission_scope=spec.get("admissionScope") is not None,
        uid=string(o.meta, "uid", o.at("metadata")),
    )


def read_cohort(o: Obj) -> Cohort:
    spec, at = o.spec, o.at("spec")
    parent = reference(spec, "parentName", at)
    return Cohort(
        name=o.name,
        parent=parent,
        resource_groups=read_resource_groups(spec, at, has_parent=bool(parent), is_cohort=True),
        fair_weight=_fair_weight(spec, at),
    )


def read_local_queue(o: Obj) -> LocalQueue:
    spec, at = o.spec, o.at("spec")
    return LocalQueue(
        namespace=o.namespace,
        name=o.name,
        cluster_queue=reference(spec, "clusterQueue", at, required=True),
        stop_policy=enum(spec, "stopPolicy", at, STOP_POLICIES, "None"),
    )


def read_admission_check(o: Obj) -> bool:
    """Whether an AdmissionCheck is active (its controller sets the ``Active`` condition True)."""
    for i, raw in enumerate(items(o.status, "conditions", o.at("status"), max_items=16)):
        cond = _as_mapping(raw, o.at(f"status.conditions[{i}]"))
        if cond.get("type") == "Active":
            return cond.get("status") == "True"
    return False

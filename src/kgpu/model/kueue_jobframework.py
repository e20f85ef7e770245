"""Kueue's job framework as the integrations share it (sigs.k8s.io/kueue v0.15.0 pkg/controller/jobframework).

The pieces every integration uses to build its Workload (kgpu.model.kueue_jobs for Job, JobSet, RayJob and
RayCluster; kgpu.model.kueue_pods for pods, pod groups, Deployments and StatefulSets): the Workload's name
(workload_names.go), ``NewWorkload`` and ``ConstructWorkload`` (interface.go, reconciler.go), the priority
(``ExtractPriority``, pkg/util/priority), ``SanitizePodSets`` (utils.go), the topology request (tas.go), the
webhooks' checks of Kueue's labels (validation.go) and the gates of ``ReconcileGenericJob`` that decide whether
an object gets a Workload at all. The module docstring of kgpu.model.kueue_jobs says how they fit together.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.fields import list_at, mapping_at
from kgpu.model.kueue_fields import Obj, mapping
from kgpu.model.kueue_rolehash import quantity_string
from kgpu.model.names import DNS1123_SUBDOMAIN_ERR_MSG, is_dns1123_label, is_dns1123_subdomain
from kgpu.model.podspec import spec_info

API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
DEFAULT_LOCAL_QUEUE = "default"
MAX_PODSETS = 8
_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH

DEFAULT_INTEGRATIONS = frozenset(
    {"batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "ray.io/raycluster"}
)
INTEGRATIONS = DEFAULT_INTEGRATIONS | {"pod", "deployment", "statefulset"}
# kind -> (API group, integration); the group enters the Workload name's hash
KINDS: dict[str, tuple[str, str]] = {
    "Job": ("batch", "batch/job"),
    "JobSet": ("jobset.x-k8s.io", "jobset.x-k8s.io/jobset"),
    "RayJob": ("ray.io", "ray.io/rayjob"),
    "RayCluster": ("ray.io", "ray.io/raycluster"),
    "Pod": ("", "pod"),
    "Deployment": ("apps", "deployment"),
    "StatefulSet": ("apps", "statefulset"),
}
# Controller owners Kueue manages through their own Workload (the integrations of its shipped configuration):
# an object they own gets none (FindAncestorJobManagedByKueue).
MANAGED_OWNERS = frozenset(
    {
        ("batch/v1", "Job"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayCluster"),
        ("kubeflow.org/v2beta1", "MPIJob"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("kubeflow.org/v1", "TFJob"),
        ("kubeflow.org/v1", "PaddleJob"),
        ("kubeflow.org/v1", "XGBoostJob"),
        ("kubeflow.org/v1", "JAXJob"),
        ("workload.codeflare.dev/v1beta2", "AppWrapper"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    }
)
JOB_MANAGED_LABELS = ("job-name", "controller-uid", "batch.kubernetes.io/controller-uid")  # cleanLabels
_TAS_ANNOTATIONS = (
    ("kueue.x-k8s.io/podset-required-topology", "required"),
    ("kueue.x-k8s.io/podset-preferred-topology", "preferred"),
)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A job that gets no Workload, and why (Kueue's reason, in its words where it has them)."""

    kind: str
    namespace: str
    name: str
    reason: str


@dataclass(slots=True)
class JobWorkloads:
    workloads: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


class NoWorkload(Exception):
    """Kueue creates no Workload for this object (the reason is the message)."""


@dataclass(slots=True)
class Context:
    """What a job's Workload depends on beyond the job: classes, default queues, Workloads already there."""

    source: str
    integrations: frozenset[str]
    manage_without_queue_name: bool
    unmanaged_namespaces: frozenset[str]
    created: str | None
    priority_classes: dict[str, tuple[int, bool, str]] = field(default_factory=dict)  # value, default, policy
    workload_priority_classes: dict[str, int] = field(default_factory=dict)
    default_queue_namespaces: set[str] = field(default_factory=set)
    workload_owner_uids: set[str] = field(default_factory=set)
    workload_names: set[tuple[str, str]] = field(default_factory=set)

    def default_priority_class(self) -> tuple[str, int, str] | None:
        """The global default PriorityClass: the lowest value when several claim it (getDefaultPriorityClass)."""
        defaults = [(v, n, p) for n, (v, d, p) in self.priority_classes.items() if d]
        if not defaults:
            return None
        value, name, policy = min(defaults)
        return name, value, policy


# --- names ------------------------------------------------------------------------------------------------------


def workload_name(owner_name: str, owner_uid: str, kind: str, group: str) -> str:
    """GetWorkloadNameForOwnerWithGVK."""
    prefixed = f"{kind.lower()}-{owner_name}"
    if len(prefixed.encode()) > _MAX_PREFIX:
        prefixed = prefixed.encode()[:_MAX_PREFIX].decode(errors="ignore")
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode()).hexdigest()
    return f"{prefixed}-{digest[:_HASH_LENGTH]}"


def stand_in_uid(kind: str, namespace: str, name: str) -> str:
    """The uid kgpu gives an object not yet created (the API server will assign a random one)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kgpu:{kind}/{namespace}/{name}"))


def timestamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- shared pieces -------------------------------------------------------------------------------------------


def _strings(o: Obj, key: str) -> dict[str, Any]:
    values = mapping(o.meta, key, o.at("metadata"))
    for k, v in values.items():
        if not isinstance(v, str):
            raise InputError(f"must be a string, got {quote(v)}", where=o.at(f"metadata.{key}[{k}]"))
    return values


def labels_of(o: Obj) -> dict[str, Any]:
    return _strings(o, "labels")


def annotations_of(o: Obj) -> dict[str, Any]:
    return _strings(o, "annotations")


def check_job_labels(o: Obj) -> None:
    """ValidateJobOnCreate: the queue name and a prebuilt Workload's name are CRD names; the maximum execution
    time a positive integer."""
    labels = labels_of(o)
    for key in (QUEUE_LABEL, PREBUILT_WORKLOAD_LABEL):
        value = labels.get(key)
        if value is not None and (not isinstance(value, str) or not is_dns1123_subdomain(value)):
            raise InputError(
                f"Invalid value: {quote(value)}: {DNS1123_SUBDOMAIN_ERR_MSG}",
                where=o.at(f"metadata.labels[{key}]"),
            )
    raw = labels.get(MAX_EXEC_TIME_LABEL)
    if raw is not None:
        try:
            seconds = int(raw)
        except (TypeError, ValueError):
            raise InputError(
                f"Invalid value: {quote(raw)}: not an integer",
                where=o.at(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"),
            ) from None
        if seconds <= 0:
            raise InputError(
                f"Invalid value: {seconds}: should be greater than 0",
                where=o.at(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"),
            )


def max_exec_time(labels: Mapping[str, Any]) -> int | None:
    """MaximumExecutionTimeSecondsForObject: the label as a positive int32, else none."""
    raw = labels.get(MAX_EXEC_TIME_LABEL)
    try:
        value = int(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if value is not None and 0 < value < 2**31 else None


def check_pod_spec(spec: object, where: str) -> None:
    """A pod template's spec as the API server validates what kgpu reads of it (kgpu.model.podspec.spec_info)."""
    try:
        parsed = msgspec.convert(mapping_at(spec, where), wire.PodSpec)
    except msgspec.ValidationError as exc:
        message, _, path = str(exc).partition(" - at `$")
        raise InputError(message, where=where + path.rstrip("`")) from None
    spec_info(parsed, where)


def sanitize(template: dict[str, Any]) -> dict[str, Any]:
    """SanitizePodSet: in each container, one env var per name, the last value at the first one's place."""
    for c in list_at(mapping_at(template.get("spec"), "spec").get("containers"), "containers"):
        env = c.get("env") if isinstance(c, dict) else None
        if isinstance(env, list) and env:
            last: dict[object, Any] = {}
            for var in env:
                name = var.get("name") if isinstance(var, dict) else None
                last[name if isinstance(name, str) else id(var)] = var
            c["env"] = list(last.values())
    return template


def topology_request(
    meta: Mapping[str, Any], *, index_label: str | None = None, sub_group: tuple[str, int] | None = None
) -> dict[str, Any] | None:
    """podSetTopologyRequestBuilder.Build (jobframework/tas.go) from a template's annotations."""
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    assert isinstance(annotations, dict)
    out: dict[str, Any] = {}
    chosen = False
    for key, name in _TAS_ANNOTATIONS:
        if key in annotations:
            out[name] = annotations[key]
            chosen = True
            break
    else:
        unconstrained = annotations.get("kueue.x-k8s.io/podset-unconstrained-topology")
        if unconstrained is not None:
            out["unconstrained"] = str(unconstrained).lower() in ("1", "t", "true")
            chosen = True
    slice_topology = annotations.get("kueue.x-k8s.io/podset-slice-required-topology")
    slice_size = annotations.get("kueue.x-k8s.io/podset-slice-size")
    if (
        not chosen
        and (slice_topology is None or slice_size is None)
        and index_label is None
        and sub_group is None
    ):
        return None
    if slice_topology is not None and slice_size is not None:
        with contextlib.suppress(ValueError):
            out["podSetSliceRequiredTopology"], out["podSetSliceSize"] = slice_topology, int(slice_size)
    if index_label is not None:
        out["podIndexLabel"] = index_label
    if sub_group is not None:
        out["subGroupIndexLabel"], out["subGroupCount"] = sub_group
    group_name = annotations.get("kueue.x-k8s.io/podset-group-name")
    if group_name is not None and ("required" in out or "preferred" in out):
        out["podSetGroupName"] = group_name
    return out


def canonical_quantities(template: dict[str, Any]) -> dict[str, Any]:
    """The template as the API server writes it back: resource quantities as resource.Quantity's string (``1`` for
    1, ``1Gi`` for 1024Mi) in containers, init containers, pod-level resources and overhead, and the structs Go
    always writes (``metadata: {}``, a container's ``resources: {}``)."""
    template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    if not isinstance(spec, dict):
        return template
    holders = [spec.get("resources")]
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or ():
            if isinstance(c, dict):
                holders.append(c.setdefault("resources", {}))
    for res in holders:
        if isinstance(res, dict):
            for key in ("requests", "limits"):
                if isinstance(res.get(key), dict):
                    res[key] = {k: quantity_string(v) for k, v in res[key].items()}
    if isinstance(spec.get("overhead"), dict):
        spec["overhead"] = {k: quantity_string(v) for k, v in spec["overhead"].items()}
    return template


def podset(name: str, template: Mapping[str, Any], count: int, tas: dict[str, Any] | None) -> dict[str, Any]:
    ps: dict[str, Any] = {
        "name": name.lower(),
        "template": canonical_quantities(sanitize(copy.deepcopy(dict(template)))),
        "count": count,
    }
    if tas is not None:
        ps["topologyRequest"] = tas
    return ps


def resolve_priority(
    ctx: Context, labels: Mapping[str, Any], podsets: list[dict[str, Any]]
) -> tuple[dict[str, str] | None, int]:
    """ExtractPriority: (priorityClassRef, priority); NoWorkload when the named class does not exist."""
    wpc = labels.get(PRIORITY_CLASS_LABEL)
    if isinstance(wpc, str) and wpc:
        if wpc not in ctx.workload_priority_classes:
            raise NoWorkload(f'workloadpriorityclasses.kueue.x-k8s.io "{wpc}" not found')
        ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": wpc}
        return ref, ctx.workload_priority_classes[wpc]
    name = ""
    for ps in podsets:  # extractPriorityFromPodSets: the first PodSet that names a class
        cls = mapping_at(ps["template"].get("spec"), "spec").get("priorityClassName")
        if isinstance(cls, str) and cls:
            name = cls
            break
    if name:
        if name not in ctx.priority_classes:
            raise NoWorkload(f'priorityclasses.scheduling.k8s.io "{name}" not found')
        return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}, ctx.priority_classes[
            name
        ][0]
    default = ctx.default_priority_class()
    if default is None:
        return None, 0
    return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": default[0]}, default[1]


def new_workload(
    ctx: Context,
    o: Obj,
    name: str,
    podsets: list[dict[str, Any]],
    *,
    uid: str,
    queue: str,
    owners: list[dict[str, Any]] | None = None,
    job_uid_label: bool = True,
    extra_annotations: Mapping[str, str] | None = None,
    priority_from: Obj | None = None,
) -> dict[str, Any]:
    """NewWorkload + ConstructWorkload + PrepareWorkloadPriority, then the CRD's validation of the result."""
    labels = labels_of(o)
    annotations = {
        k: v for k, v in annotations_of(o).items() if isinstance(k, str) and k.startswith(PROVREQ_PREFIX)
    }
    annotations.update(extra_annotations or {})
    ref, priority = resolve_priority(ctx, labels_of(priority_from or o), podsets)
    meta: dict[str, Any] = {"name": name, "namespace": o.namespace}
    if job_uid_label:
        meta["labels"] = {JOB_UID_LABEL: uid}
    if annotations:
        meta["annotations"] = annotations
    api_version = o.doc.get("apiVersion")
    meta["ownerReferences"] = (
        owners
        if owners is not None
        else [
            {
                "apiVersion": api_version,
                "kind": o.kind,
                "name": o.name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    )
    meta["finalizers"] = [RESOURCE_IN_USE]
    created = o.meta.get("creationTimestamp") or ctx.created
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"podSets": podsets, "queueName": queue}
    if ref is not None:
        spec["priorityClassRef"] = ref
    spec["priority"] = priority
    spec["active"] = True
    seconds = max_exec_time(labels)
    if seconds is not None:
        spec["maximumExecutionTimeSeconds"] = seconds
    _check_workload(name, podsets)
    return {"apiVersion": API_VERSION, "kind": "Workload", "metadata": meta, "spec": spec}


def _check_workload(name: str, podsets: list[dict[str, Any]]) -> None:
    """What the API server refuses of the Workload Kueue tries to create (the job then never gets one)."""
    invalid = f'Workload.kueue.x-k8s.io "{name}" is invalid'
    if not podsets or len(podsets) > MAX_PODSETS:
        raise NoWorkload(
            f"{invalid}: spec.podSets: must have between 1 and {MAX_PODSETS} items, got {len(podsets)}"
        )
    seen = set()
    for i, ps in enumerate(podsets):
        if not is_dns1123_label(ps["name"]):
            raise NoWorkload(f"{invalid}: spec.podSets[{i}].name: Invalid value: {quote(ps['name'])}")
        if ps["name"] in seen:
            raise NoWorkload(f"{invalid}: spec.podSets[{i}]: Duplicate value: {quote(ps['name'])}")
        seen.add(ps["name"])
        if ps["count"] > 2**31 - 1:
            raise NoWorkload(f"{invalid}: spec.podSets[{i}].count: must be at most 2147483647")


def managed_owner(o: Obj) -> str | None:
    for ref in list_at(o.meta.get("ownerReferences"), o.at("metadata.ownerReferences")):
        owner = (ref.get("apiVersion"), ref.get("kind")) if isinstance(ref, dict) else None
        if owner in MANAGED_OWNERS and ref.get("controller") is True:
            return f"{ref.get('kind')} {ref.get('name')}"
    return None


def queue_name(ctx: Context, o: Obj) -> str:
    """The queue name after the webhooks: the label, or "default" (LocalQueueDefaulting, on by default) for a new
    object without a Kueue-managed owner in a namespace that has a LocalQueue of that name."""
    name = labels_of(o).get(QUEUE_LABEL)
    if isinstance(name, str) and name:
        return name
    if not o.meta.get("uid") and o.namespace in ctx.default_queue_namespaces and managed_owner(o) is None:
        return DEFAULT_LOCAL_QUEUE
    return ""


def managed(ctx: Context, o: Obj) -> None:
    """ReconcileGenericJob's gates: raises NoWorkload when Kueue leaves the object alone."""
    if o.namespace in ctx.unmanaged_namespaces:
        raise NoWorkload(f"namespace {o.namespace} is outside managedJobsNamespaceSelector")
    owner = managed_owner(o)
    if owner is not None:
        raise NoWorkload(f"managed through its owner {owner} and that one's Workload")
    if not queue_name(ctx, o) and not ctx.manage_without_queue_name:
        raise NoWorkload(f"no {QUEUE_LABEL} label: Kueue ignores it (manageJobsWithoutQueueName is off)")
    prebuilt = labels_of(o).get(PREBUILT_WORKLOAD_LABEL)
    if prebuilt:
        raise NoWorkload(f"uses the prebuilt Workload {prebuilt}: Kueue creates none")

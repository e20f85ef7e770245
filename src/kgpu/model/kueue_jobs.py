"""The jobs users submit, as the Workloads Kueue's job integrations create for them (sigs.k8s.io/kueue v0.15.0).

Every other part of kgpu's Kueue model reads Workloads only; this module is where a batch/v1 Job, a JobSet,
a RayJob or RayCluster, a plain Pod or pod group, a Deployment or a StatefulSet becomes one, shaped as the
job reconciler writes it (kueue.x-k8s.io/v1beta2):

- name: ``GetWorkloadNameForOwnerWithGVK`` (pkg/controller/jobframework/workload_names.go): ``<kind lowercased>-
  <owner name>`` cut to 247 bytes, then ``-`` and the first 5 hex digits of SHA-1 over ``kind \\n group \\n name
  \\n uid``. A pod group's Workload is named after the group; a StatefulSet's group after the StatefulSet with an
  empty uid (statefulset_webhook.go ``GetWorkloadName``).
- ``ConstructWorkload`` / ``NewWorkload`` (reconciler.go, interface.go): the job's controller ownerReference,
  label ``kueue.x-k8s.io/job-uid``, only the ``provreq.kueue.x-k8s.io/`` annotations, finalizer
  ``kueue.x-k8s.io/resource-in-use``, ``spec.queueName`` from label ``kueue.x-k8s.io/queue-name`` (Kueue v0.15 reads
  no annotation), ``spec.maximumExecutionTimeSeconds`` from label ``kueue.x-k8s.io/max-exec-time-seconds``.
- priority (``ExtractPriority``, pkg/util/priority): a WorkloadPriorityClass named by label
  ``kueue.x-k8s.io/priority-class``, else the first PodSet's ``priorityClassName``, else the lowest global default
  PriorityClass, else 0; ``spec.priorityClassRef`` names the class. A class that does not exist leaves the job
  without a Workload (Kueue retries the reconcile forever): a skipped job, not an error.
- PodSets: each integration's ``PodSets()`` (jobs/job, jobs/jobset, jobs/rayjob, jobs/raycluster, jobs/pod), with
  ``SanitizePodSets`` (duplicate env vars: the last value kept at the first place) and, TopologyAwareScheduling being
  on by default, the ``topologyRequest`` each builds (jobframework/tas.go). PodSet names are lowercased.

Which objects get a Workload follows ``ReconcileGenericJob``: a queue name (or ``manage_jobs_without_queue_name``),
a namespace that ``managedJobsNamespaceSelector`` admits (its default excludes kube-system and Kueue's own
namespace), no Kueue-managed controller owner (a RayJob's RayCluster, a JobSet's Jobs), not finished, no running
pods outside Kueue, no Workload of its own in the input already. The integrations on by default are those of
Kueue's shipped configuration that kgpu models (batch/job, jobset, rayjob, raycluster); pod, deployment and
statefulset are opt-in there and here.

Objects without ``metadata.uid`` are new submissions: they pass the API server's defaulting and admission and
Kueue's webhooks first (Job template labels; the Job webhook's checks; for pods: requests from limits, port
protocols, the DefaultTolerationSeconds tolerations, the Priority plugin, Kueue's scheduling gates), and stand in
for the uid the API server will assign with a deterministic one (``uuid5`` of kind, namespace and name): the
Workload name's hash of such an object is kgpu's, and becomes the cluster's only once the object exists.
Objects read from a cluster are taken as stored. What a webhook rejects is an InputError naming the field.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.fields import list_at, mapping_at
from kgpu.model.inputs import BUILTIN_PRIORITY_CLASSES
from kgpu.model.kueue_fields import Obj, integer, mapping, string
from kgpu.model.kueue_jobframework import (
    DEFAULT_INTEGRATIONS,
    DEFAULT_LOCAL_QUEUE,
    INTEGRATIONS,
    JOB_MANAGED_LABELS,
    KINDS,
    MAX_PODSETS,
    MIN_PARALLELISM_ANNOTATION,
    Context,
    JobWorkloads,
    NoWorkload,
    Skipped,
    annotations_of,
    check_job_labels,
    check_pod_spec,
    managed,
    new_workload,
    podset,
    queue_name,
    stand_in_uid,
    timestamp,
    topology_request,
    workload_name,
)
from kgpu.model.kueue_pods import pod_workloads

# --- the job integrations --------------------------------------------------------------------------------------


def _job(ctx: Context, o: Obj, uid: str, new: bool) -> dict[str, Any]:
    """jobs/job: one PodSet "main" of min(parallelism, completions) pods; minCount from the annotation."""
    spec = o.spec
    template = mapping(spec, "template", o.at("spec"))
    if not template:
        raise InputError("Required value", where=o.at("spec.template"))
    check_pod_spec(template.get("spec"), o.at("spec.template.spec"))
    parallelism = integer(spec, "parallelism", o.at("spec"), lo=0)
    completions = integer(spec, "completions", o.at("spec"), lo=0)
    count = 1 if parallelism is None else parallelism
    if completions is not None and completions < count:
        count = completions
    min_count = None
    raw = annotations_of(o).get(MIN_PARALLELISM_ANNOTATION)
    if raw is not None:
        at = o.at(f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]")
        try:
            min_count = int(raw)
        except (TypeError, ValueError):
            raise InputError(f"Invalid value: {quote(raw)}: not an integer", where=at) from None
        if not 0 < min_count < count:
            raise InputError(f"Invalid value: {min_count}: should be between 0 and {count - 1}", where=at)
    template = copy.deepcopy(template)
    tmeta = template["metadata"] = dict(mapping_at(template.get("metadata"), o.at("spec.template.metadata")))
    labels = dict(mapping_at(tmeta.get("labels"), o.at("spec.template.metadata.labels")))
    if new and spec.get("manualSelector") is not True:
        labels.setdefault("batch.kubernetes.io/job-name", o.name)  # the Job strategy's generateSelector
    for key in JOB_MANAGED_LABELS:
        labels.pop(key, None)
    tmeta["labels"] = labels
    ps = podset(
        "main",
        template,
        count,
        topology_request(tmeta, index_label="batch.kubernetes.io/job-completion-index"),
    )
    if min_count is not None:
        ps["minCount"] = min_count
    return new_workload(
        ctx, o, workload_name(o.name, uid, "Job", "batch"), [ps], uid=uid, queue=queue_name(ctx, o)
    )


def _jobset(ctx: Context, o: Obj, uid: str) -> dict[str, Any]:
    """jobs/jobset: a PodSet per replicatedJob, replicas x min(parallelism, completions) pods."""
    podsets = []
    for i, raw in enumerate(list_at(o.spec.get("replicatedJobs"), o.at("spec.replicatedJobs"))):
        at = o.at(f"spec.replicatedJobs[{i}]")
        rj = mapping_at(raw, at)
        name = string(rj, "name", at)
        if not name:
            raise InputError("Required value", where=f"{at}.name")
        replicas = integer(rj, "replicas", at, lo=0)
        replicas = 1 if replicas is None else replicas  # the JobSet CRD's default
        job_spec = mapping(mapping(rj, "template", at), "spec", f"{at}.template")
        jat = f"{at}.template.spec"
        template = mapping(job_spec, "template", jat)
        if not template:
            raise InputError("Required value", where=f"{jat}.template")
        check_pod_spec(template.get("spec"), f"{jat}.template.spec")
        per = integer(job_spec, "parallelism", jat, lo=0)
        per = 1 if per is None else per
        completions = integer(job_spec, "completions", jat, lo=0)
        if completions is not None and completions < per:
            per = completions
        tas = topology_request(
            mapping_at(template.get("metadata"), f"{jat}.template.metadata"),
            index_label="batch.kubernetes.io/job-completion-index",
            sub_group=("jobset.sigs.k8s.io/job-index", replicas),
        )
        podsets.append(podset(name, template, replicas * per, tas))
    group = "jobset.x-k8s.io"
    return new_workload(
        ctx, o, workload_name(o.name, uid, "JobSet", group), podsets, uid=uid, queue=queue_name(ctx, o)
    )


def _ray_groups(o: Obj, cluster: Mapping[str, Any], at: str, checked: bool) -> list[dict[str, Any]]:
    """jobs/raycluster and jobs/rayjob: "head" (1 pod), then a PodSet per worker group of replicas x numOfHosts."""
    try:
        msgspec.convert(cluster, wire.RayClusterSpec)  # kgpu's reading of a RayCluster spec: its types
    except msgspec.ValidationError as exc:
        message, _, path = str(exc).partition(" - at `$")
        raise InputError(message, where=at + path.rstrip("`")) from None
    workers = list_at(cluster.get("workerGroupSpecs"), f"{at}.workerGroupSpecs")
    if checked:  # the RayJob / RayCluster webhooks
        if cluster.get("enableInTreeAutoscaling") is True:
            raise InputError(
                "Invalid value: true: a kueue managed job should not use autoscaling",
                where=f"{at}.enableInTreeAutoscaling",
            )
        if len(workers) > MAX_PODSETS - 1:
            raise InputError(
                f"Too many: {len(workers)}: must have at most 7 items", where=f"{at}.workerGroupSpecs"
            )
    head = mapping(mapping(cluster, "headGroupSpec", at), "template", f"{at}.headGroupSpec")
    check_pod_spec(head.get("spec"), f"{at}.headGroupSpec.template.spec")
    hat = f"{at}.headGroupSpec.template.metadata"
    podsets = [podset("head", head, 1, topology_request(mapping_at(head.get("metadata"), hat)))]
    for i, raw in enumerate(workers):
        wat = f"{at}.workerGroupSpecs[{i}]"
        group = mapping_at(raw, wat)
        name = string(group, "groupName", wat)
        if checked and name == "head":
            raise InputError('Forbidden: "head" is reserved for the head group', where=f"{wat}.groupName")
        replicas = integer(group, "replicas", wat, lo=0)
        hosts = integer(group, "numOfHosts", wat, lo=0)
        count = 0 if replicas is None else replicas  # the RayCluster CRD defaults replicas to 0
        if hosts is not None and hosts > 1:
            count *= hosts
        template = mapping(group, "template", wat)
        check_pod_spec(template.get("spec"), f"{wat}.template.spec")
        podsets.append(
            podset(
                name,
                template,
                count,
                topology_request(mapping_at(template.get("metadata"), f"{wat}.template.metadata")),
            )
        )
    return podsets


def _submitter(spec: Mapping[str, Any], cluster: Mapping[str, Any], o: Obj) -> dict[str, Any]:
    """getSubmitterTemplate: spec.submitterPodTemplate, else KubeRay's default submitter pod."""
    given = spec.get("submitterPodTemplate")
    if given is not None:
        template = mapping_at(given, o.at("spec.submitterPodTemplate"))
        check_pod_spec(template.get("spec"), o.at("spec.submitterPodTemplate.spec"))
        return template
    at = o.at("spec.rayClusterSpec.headGroupSpec.template.spec")  # read and checked with the head's PodSet
    head = mapping_at(mapping_at(cluster.get("headGroupSpec"), at).get("template"), at)
    containers = list_at(mapping_at(head.get("spec"), at).get("containers"), f"{at}.containers")
    image = containers[0].get("image", "") if containers and isinstance(containers[0], dict) else ""
    return {
        "spec": {
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": image,
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                    },
                }
            ],
            "restartPolicy": "Never",
        }
    }


def _rayjob(ctx: Context, o: Obj, uid: str, checked: bool) -> dict[str, Any]:
    spec = o.spec
    if spec.get("clusterSelector"):
        if spec.get("rayClusterSpec") is not None and checked:
            raise InputError(
                "Invalid value: a kueue managed job should not use an existing cluster",
                where=o.at("spec.clusterSelector"),
            )
        raise NoWorkload("runs on an existing RayCluster (spec.clusterSelector): Kueue does not manage it")
    if spec.get("rayClusterSpec") is None:
        raise InputError(
            "Required value: rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
            where=o.at("spec.rayClusterSpec"),
        )
    if checked and spec.get("shutdownAfterJobFinishes") is not True:
        raise InputError(
            f"Invalid value: {quote(spec.get('shutdownAfterJobFinishes', False))}: a kueue managed job should delete "
            "the cluster after finishing",
            where=o.at("spec.shutdownAfterJobFinishes"),
        )
    cluster = mapping(spec, "rayClusterSpec", o.at("spec"))
    podsets = _ray_groups(o, cluster, o.at("spec.rayClusterSpec"), checked)
    if string(spec, "submissionMode", o.at("spec"), "K8sJobMode") == "K8sJobMode":  # the CRD's default
        template = _submitter(spec, cluster, o)
        podsets.append(
            podset(
                "submitter",
                template,
                1,
                topology_request(
                    mapping_at(template.get("metadata"), o.at("spec.submitterPodTemplate.metadata"))
                ),
            )
        )
    return new_workload(
        ctx, o, workload_name(o.name, uid, "RayJob", "ray.io"), podsets, uid=uid, queue=queue_name(ctx, o)
    )


def _raycluster(ctx: Context, o: Obj, uid: str, checked: bool) -> dict[str, Any]:
    podsets = _ray_groups(o, o.spec, o.at("spec"), checked)
    return new_workload(
        ctx, o, workload_name(o.name, uid, "RayCluster", "ray.io"), podsets, uid=uid, queue=queue_name(ctx, o)
    )


# --- which objects get a Workload ---------------------------------------------------------------------------------


def _state(o: Obj) -> str | None:
    """Why a stored job needs no new Workload (finished, or pods running outside Kueue); None when it does."""
    status = o.status
    conditions = [
        c for c in list_at(status.get("conditions"), o.at("status.conditions")) if isinstance(c, dict)
    ]
    true = {str(c.get("type")) for c in conditions if c.get("status") == "True"}
    if o.kind == "Job":
        if true & {"Complete", "Failed"}:
            return f"finished ({min(true & {'Complete', 'Failed'})})"
        if isinstance(status.get("active"), int) and status["active"] > 0:
            return (
                f"running outside Kueue's quota ({status['active']} active pods; Kueue waits for them to end)"
            )
    elif o.kind == "JobSet":
        if true & {"Completed", "Failed"}:
            return f"finished ({min(true & {'Completed', 'Failed'})})"
        if any(
            isinstance(r, dict) and (r.get("active") or 0) > 0
            for r in list_at(status.get("replicatedJobsStatus"), o.at("status.replicatedJobsStatus"))
        ):
            return "running outside Kueue's quota (active Jobs; Kueue waits for them to end)"
    elif o.kind == "RayJob":
        deployment = status.get("jobDeploymentStatus") or ""
        if deployment in ("Complete", "Failed"):
            return f"finished ({deployment})"
        if deployment not in ("", "New", "Suspended"):
            return f"running outside Kueue's quota (jobDeploymentStatus {deployment})"
    elif o.kind == "RayCluster" and status.get("state") == "ready" and o.spec.get("suspend") is not True:
        return "running outside Kueue's quota (state ready)"
    return None


def _read_context(ctx: Context, docs: list[dict[str, Any]], extra: Iterable[Any]) -> None:
    for name, value in BUILTIN_PRIORITY_CLASSES.items():
        ctx.priority_classes[name] = (value, False, "PreemptLowerPriority")
    for doc in [*docs, *extra]:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind not in ("PriorityClass", "WorkloadPriorityClass", "LocalQueue", "Workload"):
            continue
        o = Obj(doc, kind, ctx.source, namespaced=kind in ("LocalQueue", "Workload"))
        if kind == "PriorityClass":
            value = integer(doc, "value", o.where + ":", lo=-(2**31), hi=2**31 - 1) or 0
            policy = string(doc, "preemptionPolicy", o.where + ":") or "PreemptLowerPriority"
            ctx.priority_classes[o.name] = (value, doc.get("globalDefault") is True, policy)
        elif kind == "WorkloadPriorityClass":
            ctx.workload_priority_classes[o.name] = (
                integer(doc, "value", o.where + ":", lo=-(2**31), hi=2**31 - 1) or 0
            )
        elif kind == "LocalQueue" and o.name == DEFAULT_LOCAL_QUEUE:
            ctx.default_queue_namespaces.add(o.namespace)
        elif kind == "Workload":
            ctx.workload_names.add((o.namespace, o.name))
            for ref in list_at(o.meta.get("ownerReferences"), o.at("metadata.ownerReferences")):
                if isinstance(ref, dict) and isinstance(ref.get("uid"), str):
                    ctx.workload_owner_uids.add(ref["uid"])


def _flatten(objects: Iterable[Any], source: str) -> list[dict[str, Any]]:
    out = []
    for i, doc in enumerate(objects):
        if not isinstance(doc, dict):
            raise InputError(f"must be a mapping, got {type(doc).__name__}", where=f"{source}: item {i}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            out.extend(_flatten(list_at(doc["items"], f"{source}: item {i}: items"), source))
        else:
            out.append(doc)
    return out


def read_jobs(
    objects: Iterable[Any],
    *,
    source: str,
    priority_classes: Iterable[Any] = (),
    integrations: Iterable[str] = DEFAULT_INTEGRATIONS,
    manage_jobs_without_queue_name: bool = False,
    kueue_namespace: str = "kueue-system",
    created: datetime | None = None,
) -> JobWorkloads:
    """The Workloads Kueue creates for the jobs among ``objects``, and the jobs it creates none for.

    ``priority_classes``: PriorityClass and WorkloadPriorityClass objects from elsewhere (the cluster's, when the
    jobs come from a file); ``created`` stamps the Workloads of objects that have no creationTimestamp yet."""
    enabled = frozenset(integrations)
    unknown = enabled - INTEGRATIONS
    if unknown:
        raise InputError(
            f"unknown integration {quote(min(unknown))}",
            where=source,
            hint=f"kgpu models {', '.join(sorted(INTEGRATIONS))}",
        )
    docs = _flatten(objects, source)
    ctx = Context(
        source,
        enabled,
        manage_jobs_without_queue_name,
        frozenset({"kube-system", kueue_namespace}),
        timestamp(created) if created is not None else None,
    )
    _read_context(ctx, docs, priority_classes)
    out = JobWorkloads()
    pods: list[Obj] = []
    for doc in docs:
        kind = doc.get("kind")
        if not isinstance(kind, str) or kind not in KINDS:
            continue
        api = doc.get("apiVersion")
        if kind in ("Pod", "Deployment", "StatefulSet") and api not in ("v1", "apps/v1"):
            continue
        o = Obj(doc, kind, source, namespaced=True)
        group, framework = KINDS[kind]
        if framework not in enabled:
            if kind in ("Job", "JobSet", "RayJob", "RayCluster"):
                out.skipped.append(
                    Skipped(kind, o.namespace, o.name, f"the {framework} integration is not enabled")
                )
            continue
        if kind in ("Pod", "Deployment", "StatefulSet"):
            pods.append(o)
            continue
        try:
            wl = _one(ctx, o, group)
        except NoWorkload as exc:
            out.skipped.append(Skipped(kind, o.namespace, o.name, str(exc)))
            continue
        out.workloads.append(wl)
    if pods:
        made, skipped = pod_workloads(ctx, pods)
        out.workloads.extend(made)
        out.skipped.extend(skipped)
    return out


def _one(ctx: Context, o: Obj, group: str) -> dict[str, Any]:
    original = copy.deepcopy(o.doc)  # queue defaulting writes into a copy, never the caller's object
    o = Obj(original, o.kind, ctx.source, namespaced=True)
    uid = o.meta.get("uid")
    new = not isinstance(uid, str) or not uid
    managed(ctx, o)
    check_job_labels(o)
    if not new:
        assert isinstance(uid, str)
        if uid in ctx.workload_owner_uids:
            raise NoWorkload("its Workload is in the input")
        state = _state(o)
        if state is not None:
            raise NoWorkload(state)
    else:
        uid = stand_in_uid(o.kind, o.namespace, o.name)
    name = workload_name(o.name, uid, o.kind, group)
    if (o.namespace, name) in ctx.workload_names:
        raise NoWorkload(f"its Workload {o.namespace}/{name} is in the input")
    if o.kind == "Job":
        return _job(ctx, o, uid, new)
    if o.kind == "JobSet":
        return _jobset(ctx, o, uid)
    if o.kind == "RayJob":
        return _rayjob(ctx, o, uid, checked=True)
    return _raycluster(ctx, o, uid, checked=True)


def workloads_for(
    objects: Iterable[Any],
    *,
    source: str,
    priority_classes: Iterable[Any] = (),
    integrations: Iterable[str] = DEFAULT_INTEGRATIONS,
    manage_jobs_without_queue_name: bool = False,
    kueue_namespace: str = "kueue-system",
    created: datetime | None = None,
) -> list[dict[str, Any]]:
    """The Workloads (as dicts) Kueue creates for the jobs among ``objects``; see ``read_jobs``."""
    return read_jobs(
        objects,
        source=source,
        priority_classes=priority_classes,
        integrations=integrations,
        manage_jobs_without_queue_name=manage_jobs_without_queue_name,
        kueue_namespace=kueue_namespace,
        created=created,
    ).workloads


__all__ = [
    "DEFAULT_INTEGRATIONS",
    "INTEGRATIONS",
    "JobWorkloads",
    "Skipped",
    "read_jobs",
    "workload_name",
    "workloads_for",
]

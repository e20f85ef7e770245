"""Kueue's pod integration: plain pods, pod groups, and the Deployments and StatefulSets it manages through them
(sigs.k8s.io/kueue v0.15.0 pkg/controller/jobs/pod, jobs/deployment, jobs/statefulset).

- A plain pod is one Workload ``pod-<name>-<hash>`` with one PodSet "main" of 1 pod whose template is the pod's
  spec alone (``constructPodSet``: no labels), the topology request indexed by
  ``kueue.x-k8s.io/pod-group-pod-index``.
- Pods labelled ``kueue.x-k8s.io/pod-group-name`` with ``kueue.x-k8s.io/pod-group-total-count`` form one Workload
  named after the group, owned (not controlled) by every pod, annotated ``kueue.x-k8s.io/is-group-workload``. Its
  PodSets are the group's roles, named by role hash (kgpu.model.kueue_rolehash) with the count of pods of that role,
  sorted by name (``constructGroupPodSets``); a group that asks for fast admission has one PodSet, the first pod's
  role with the total count (``constructGroupPodSetsFast``). A group with fewer runnable pods than its total gets no
  Workload yet; excess pods are deleted by Kueue (kgpu keeps the first ones read).
- A Deployment's webhook labels its pod template (managed, queue name, priority class) and each pod becomes a plain
  pod Workload; a StatefulSet's webhook makes its pods one fast-admission, serving pod group named
  ``GetWorkloadName(<statefulset>)`` (the name hashed with an empty uid) of ``replicas`` pods. kgpu creates the
  pods as their controllers would (``<name>-<n>``; a StatefulSet pod's hostname and subdomain), which a Deployment's
  real pods are not named (ReplicaSet hashes and random suffixes).

A new pod (no uid) is the one the API server stores after defaulting and admission, which is what Kueue's webhook
and reconciler see: requests default to limits (SetDefaults_Pod), ports to TCP and, on the host network, their
host ports to the container ports; DefaultTolerationSeconds adds the not-ready and unreachable tolerations for 300 s;
the Priority plugin sets ``priority`` and ``preemptionPolicy`` (and the default class's name); Kueue's webhook adds
its label, finalizer, the ``kueue.x-k8s.io/admission`` and (TopologyAwareScheduling) ``kueue.x-k8s.io/topology``
scheduling gates and the role-hash annotation. Pods read from a cluster are taken as they are and are Kueue's
only when labelled ``kueue.x-k8s.io/managed: "true"``.
"""

from __future__ import annotations

import copy
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.fields import list_at, mapping_at
from kgpu.model.kueue_fields import Obj, integer, mapping
from kgpu.model.kueue_jobframework import (
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    Context,
    NoWorkload,
    Skipped,
    annotations_of,
    check_job_labels,
    check_pod_spec,
    labels_of,
    managed,
    new_workload,
    podset,
    queue_name,
    stand_in_uid,
    topology_request,
    workload_name,
)
from kgpu.model.kueue_rolehash import role_hash
from kgpu.model.names import DNS1123_SUBDOMAIN_ERR_MSG, is_dns1123_subdomain

GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING = "kueue.x-k8s.io/pod-group-serving"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
SUSPENDED_BY_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
MAX_EXPANDED_PODS = 300_000  # as many pods as kgpu reads from one input (kgpu.model.load.MAX_PODS)


def _admitted(ctx: Context, pod: dict[str, Any], where: str) -> dict[str, Any]:
    """A new pod as the API server stores it after defaulting, admission and Kueue's webhook (module docstring)."""
    pod = copy.deepcopy(pod)
    check_pod_spec(pod.get("spec"), f"{where}: spec")
    meta = pod["metadata"] = dict(mapping_at(pod.get("metadata"), f"{where}: metadata"))
    spec = pod["spec"] = dict(mapping_at(pod.get("spec"), f"{where}: spec"))
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or ():
            res = c.get("resources") or {}
            if res.get("limits"):
                res["requests"] = {**res["limits"], **(res.get("requests") or {})}
                c["resources"] = res
            for port in c.get("ports") or ():
                port.setdefault("protocol", "TCP")
                if spec.get("hostNetwork") and not port.get("hostPort"):
                    port["hostPort"] = port.get("containerPort")
    tolerations = spec.get("tolerations") or []
    for key in (NOT_READY, UNREACHABLE):
        if not any(
            (t.get("key") in (key, "", None)) and t.get("effect") in ("NoExecute", "", None)
            for t in tolerations
        ):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    spec["tolerations"] = tolerations
    cls = spec.get("priorityClassName") or ""
    if cls:
        if cls not in ctx.priority_classes:
            raise NoWorkload(
                f"the Priority admission plugin refuses the pod: no PriorityClass with name {cls} was found"
            )
        value, _, policy = ctx.priority_classes[cls]
    else:
        default = ctx.default_priority_class()
        cls, value, policy = default if default is not None else ("", 0, "PreemptLowerPriority")
        if cls:
            spec["priorityClassName"] = cls
    spec["priority"] = value
    spec["preemptionPolicy"] = policy
    labels = meta.setdefault("labels", {})
    labels[MANAGED_LABEL] = "true"
    meta.setdefault("finalizers", []).append(MANAGED_LABEL)
    gates = spec.setdefault("schedulingGates", [])
    for gate in (ADMISSION_GATE, TOPOLOGY_GATE):
        if not any(g.get("name") == gate for g in gates):
            gates.append({"name": gate})
    annotations = meta.setdefault("annotations", {})
    if annotations.get(POD_INDEX_LABEL_ANNOTATION) in labels:
        labels[POD_INDEX_LABEL] = labels[annotations[POD_INDEX_LABEL_ANNOTATION]]
    annotations.setdefault(ROLE_HASH, role_hash(spec, f"{where}: spec"))
    return pod


def _controller_pods(ctx: Context, o: Obj) -> list[dict[str, Any]]:
    """The pods a new Deployment or StatefulSet creates, with what Kueue's webhook wrote into its template."""
    spec = o.spec
    replicas = integer(spec, "replicas", o.at("spec"), lo=0)
    replicas = 1 if replicas is None else replicas
    if replicas > MAX_EXPANDED_PODS:
        raise InputError(
            f"{replicas} pods are more than kgpu reads from one input", where=o.at("spec.replicas")
        )
    template = mapping(spec, "template", o.at("spec"))
    tmeta = mapping_at(template.get("metadata"), o.at("spec.template.metadata"))
    labels = dict(mapping_at(tmeta.get("labels"), o.at("spec.template.metadata.labels")))
    annotations = dict(mapping_at(tmeta.get("annotations"), o.at("spec.template.metadata.annotations")))
    labels[MANAGED_LABEL] = "true"
    queue = queue_name(ctx, o)
    if queue:
        labels[QUEUE_LABEL] = queue
    wpc = labels_of(o).get(PRIORITY_CLASS_LABEL)
    if wpc:
        labels[PRIORITY_CLASS_LABEL] = wpc
    annotations[SUSPENDED_BY_PARENT] = o.kind.lower()
    if o.kind == "StatefulSet":
        labels[GROUP_NAME_LABEL] = workload_name(o.name, "", "StatefulSet", "apps")
        annotations.update(
            {
                GROUP_TOTAL_COUNT: str(replicas),
                FAST_ADMISSION: "true",
                SERVING: "true",
                POD_INDEX_LABEL_ANNOTATION: "apps.kubernetes.io/pod-index",
            }
        )
    created = o.meta.get("creationTimestamp")
    pods = []
    for n in range(replicas):
        name = f"{o.name}-{n}"
        pod_labels = dict(labels)
        pod_spec = copy.deepcopy(mapping_at(template.get("spec"), o.at("spec.template.spec")))
        if (
            o.kind == "StatefulSet"
        ):  # the StatefulSet controller's identity (newStatefulSetPod, updateIdentity)
            pod_labels["apps.kubernetes.io/pod-index"] = str(n)
            pod_spec["hostname"] = name
            if spec.get("serviceName"):
                pod_spec["subdomain"] = spec["serviceName"]
        meta: dict[str, Any] = {
            "name": name,
            "namespace": o.namespace,
            "labels": pod_labels,
            "annotations": dict(annotations),
        }
        if created:
            meta["creationTimestamp"] = created
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec})
    return pods


def _check_group(o: Obj) -> None:
    """validatePodGroupMetadata (pod_webhook.go): the group's name and total count come together."""
    name = labels_of(o).get(GROUP_NAME_LABEL)
    total = annotations_of(o).get(GROUP_TOTAL_COUNT)
    both = f"both the '{GROUP_TOTAL_COUNT}' annotation and the '{GROUP_NAME_LABEL}' label should be set"
    if not name:
        if total is not None:
            raise InputError(f"Required value: {both}", where=o.at(f"metadata.labels[{GROUP_NAME_LABEL}]"))
        return
    if not isinstance(name, str) or not is_dns1123_subdomain(name):
        raise InputError(
            f"Invalid value: {quote(name)}: {DNS1123_SUBDOMAIN_ERR_MSG}",
            where=o.at(f"metadata.labels[{GROUP_NAME_LABEL}]"),
        )
    if total is None:
        raise InputError(f"Required value: {both}", where=o.at(f"metadata.annotations[{GROUP_TOTAL_COUNT}]"))
    if _total(o) is None:
        raise InputError(
            f"Invalid value: {quote(total)}: group total count should be greater than zero",
            where=o.at(f"metadata.annotations[{GROUP_TOTAL_COUNT}]"),
        )


def _total(o: Obj) -> int | None:
    raw = annotations_of(o).get(GROUP_TOTAL_COUNT)
    try:
        value = int(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if value is not None and value >= 1 else None


def _uid(o: Obj) -> str:
    uid = o.meta.get("uid")
    return uid if isinstance(uid, str) and uid else stand_in_uid("Pod", o.namespace, o.name)


def _podset_of(o: Obj, name: str, count: int) -> dict[str, Any]:
    """constructPodSet: the spec alone, the topology request from the pod's own annotations."""
    tas = topology_request(o.meta, index_label=POD_INDEX_LABEL)
    return podset(name, {"metadata": {}, "spec": o.spec}, count, tas)


def _hash(o: Obj) -> str:
    """getRoleHash: the annotation the webhook wrote, else computed from the spec."""
    given = annotations_of(o).get(ROLE_HASH)
    return given if isinstance(given, str) else role_hash(o.spec, o.at("spec"))


def _group_workload(ctx: Context, name: str, pods: list[Obj]) -> dict[str, Any]:
    """ConstructComposableWorkload for a pod group (pod_controller.go)."""
    first = pods[0]
    total = _total(first) or 0
    active = [p for p in pods if p.status.get("phase") != "Failed"]
    fast = FAST_ADMISSION in annotations_of(first)
    if not fast and len(active) < total:
        raise NoWorkload(f"'{name}' group has fewer runnable pods than expected")
    queue = queue_name(ctx, first)
    for p in pods:
        if p.status.get("phase") == "Failed":
            continue
        if queue_name(ctx, p) != queue:
            raise NoWorkload(
                f"pods '{first.name}' and '{p.name}' has different queue names: {queue}!={queue_name(ctx, p)}"
            )
        if _total(p) != total:
            raise NoWorkload(
                f"pods '{first.name}' and '{p.name}' has different '{GROUP_TOTAL_COUNT}' values: {total}!={_total(p)}"
            )
    active = active[:total]  # Kueue deletes the excess pods
    if fast:
        podsets = [_podset_of(active[0], _hash(active[0]), total)] if active else []
    else:
        roles: dict[str, list[Obj]] = {}
        for p in active:
            roles.setdefault(_hash(p), []).append(p)
        podsets = [_podset_of(members[0], role, len(members)) for role, members in sorted(roles.items())]
    if len(podsets) > 8:
        raise NoWorkload("pod group can't include more than 8 roles")
    owners = [{"apiVersion": "v1", "kind": "Pod", "name": p.name, "uid": _uid(p)} for p in pods]
    return new_workload(
        ctx,
        first,
        name,
        podsets,
        uid=_uid(first),
        queue=queue,
        owners=owners,
        job_uid_label=False,
        extra_annotations={IS_GROUP_WORKLOAD: "true"},
    )


def pod_workloads(ctx: Context, objects: list[Obj]) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """The Workloads of the pods, pod groups, Deployments and StatefulSets among ``objects`` (all enabled)."""
    out: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    pods: list[Obj] = []
    for o in objects:
        try:
            if o.kind == "Pod":
                pod = _read_pod(ctx, o)
                if pod is not None:
                    pods.append(pod)
                continue
            if o.meta.get("uid"):
                continue  # created already: its pods are in the input as Pods
            managed(ctx, o)
            check_job_labels(o)
            for doc in _controller_pods(ctx, o):
                p = Obj(doc, "Pod", ctx.source, namespaced=True)
                pods.append(Obj(_admitted(ctx, doc, p.where), "Pod", ctx.source, namespaced=True))
        except NoWorkload as exc:
            skipped.append(Skipped(o.kind, o.namespace, o.name, str(exc)))
    groups: dict[tuple[str, str], list[Obj]] = {}
    order: list[tuple[str, Obj | tuple[str, str]]] = []
    for p in pods:
        group = labels_of(p).get(GROUP_NAME_LABEL)
        if group:
            key = (p.namespace, group)
            if key not in groups:
                order.append(("group", key))
            groups.setdefault(key, []).append(p)
        else:
            order.append(("pod", p))
    for what, item in order:
        try:
            if what == "group":
                assert isinstance(item, tuple)
                if item in ctx.workload_names:
                    raise NoWorkload(f"its Workload {item[0]}/{item[1]} is in the input")
                out.append(_group_workload(ctx, item[1], groups[item]))
            else:
                assert isinstance(item, Obj)
                uid = _uid(item)
                name = workload_name(item.name, uid, "Pod", "")
                if uid in ctx.workload_owner_uids or (item.namespace, name) in ctx.workload_names:
                    raise NoWorkload("its Workload is in the input")
                out.append(
                    new_workload(
                        ctx,
                        item,
                        name,
                        [_podset_of(item, "main", 1)],
                        uid=uid,
                        queue=queue_name(ctx, item),
                    )
                )
        except NoWorkload as exc:
            first = groups[item][0] if isinstance(item, tuple) else item
            skipped.append(
                Skipped("Pod", first.namespace, item[1] if isinstance(item, tuple) else first.name, str(exc))
            )
    return out, skipped


def _read_pod(ctx: Context, o: Obj) -> Obj | None:
    """A pod Kueue manages, as it manages it; None for a pod it leaves alone."""
    if o.meta.get("uid"):
        if labels_of(o).get(MANAGED_LABEL) != "true":
            return None  # Skip: not created through Kueue's webhook
        phase = o.status.get("phase")
        if phase in ("Succeeded", "Failed") and not labels_of(o).get(GROUP_NAME_LABEL):
            raise NoWorkload(f"finished ({phase})")
        if not any(
            isinstance(g, dict) and g.get("name") == ADMISSION_GATE
            for g in list_at(o.spec.get("schedulingGates"), o.at("spec.schedulingGates"))
        ) and not labels_of(o).get(GROUP_NAME_LABEL):
            raise NoWorkload("running: ungated without a Workload in the input")
        return o
    if SUSPENDED_BY_PARENT not in annotations_of(o):
        try:
            managed(ctx, o)
        except NoWorkload:
            return None  # the pod webhook leaves it alone: not Kueue's
    check_job_labels(o)
    _check_group(o)
    doc = _admitted(ctx, dict(o.doc), o.where)
    queue = queue_name(ctx, o)
    if queue:
        doc["metadata"]["labels"][QUEUE_LABEL] = queue
    return Obj(doc, "Pod", ctx.source, namespaced=True)

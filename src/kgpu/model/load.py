"""Kubernetes documents -> the objects the scheduler reasons about.

Input is what users have: multi-document YAML, JSON, and the ``v1 List`` that ``kubectl get ... -o json``
prints. Workload kinds expand to the pods their controllers would create (``<controller>-<n>``); DaemonSets
are kept whole, because their pods depend on the nodes. Everything here is pure: the caller reads the files.

API-server defaulting that changes scheduling is applied, because manifests have not been through one yet:
a container's requests default to its limits, and priorityClassName resolves to a priority. A pod spec's
fields are converted and validated in ``kgpu.model.podspec``, a bound pod's spec read once per shape in
``kgpu.model.bound_spec``, and objects named in errors by ``kgpu.model.documents``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.bound_spec import _SPEC, bound_spec
from kgpu.model.documents import _describe, _identity, closest, parse_time
from kgpu.model.inputs import Objects, resolve_priorities
from kgpu.model.kinds import unknown_builtin_kind
from kgpu.model.objects import (
    DaemonSet,
    Pod,
    PodSpecInfo,
    Resources,
)
from kgpu.model.podspec import (
    PREEMPT_LOWER,
    _claim_template,
    _preemption_policy,
    node_from_wire,
    spec_info,
)
from kgpu.model.safeyaml import MAX_DEPTH, iter_yaml

POD_KINDS = {"Pod"}
REPLICATED_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"}
JOB_KINDS = {"Job", "CronJob"}
# `kgpu snapshot`'s document (docs/live.md): its items are read like a List's.
SNAPSHOT_KIND = "ClusterSnapshot"
LIST_KINDS = {"List", SNAPSHOT_KIND}
# Karpenter objects kept as read: `kgpu simulate` provisions from the NodePools (kgpu.model.nodepool).
KARPENTER_KINDS = {
    "NodePool": "karpenter.sh/v1",
    "EC2NodeClass": "karpenter.k8s.aws/v1",
    "NodeOverlay": "karpenter.sh/v1alpha1",
}
DRA_KINDS = frozenset({"DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"})  # kgpu.model.dra
STORAGE_KINDS = frozenset({"PersistentVolumeClaim", "PersistentVolume", "StorageClass"})  # kgpu.model.volumes
KUEUE_GROUP = "kueue.x-k8s.io/"  # Kueue's objects, kept as read for the quota view (kgpu.sim.queue)
KNOWN_KINDS = (
    POD_KINDS | REPLICATED_KINDS | JOB_KINDS | {"DaemonSet", "Node", "RayCluster", "PriorityClass"} | set(KARPENTER_KINDS)
    | DRA_KINDS | STORAGE_KINDS
)


# Kinds that carry no pods to place and are common beside workloads (`kubectl get all`, rendered stacks):
# skipped quietly. Any other kind is skipped with a warning naming it, a misspelt one with a suggestion.
QUIET_KINDS = {
    "APIService", "ClusterConfig", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "ControllerRevision",
    "CSIDriver", "CSINode", "CustomResourceDefinition", "Endpoints", "EndpointSlice", "Event",
    "HorizontalPodAutoscaler", "ImageCache", "Ingress", "IngressClass", "Lease", "LimitRange", "MutatingWebhookConfiguration",
    "Namespace", "NetworkPolicy", "NodeClaim",
    "PodDisruptionBudget", "PodMonitor", "PrometheusRule", "ResourceQuota", "Role", "RoleBinding",
    "RuntimeClass", "Secret", "Service", "ServiceAccount", "ServiceMonitor",
    "ValidatingWebhookConfiguration", "VolumeAttachment",
}
# Kinds kgpu knows but simulate does not apply: a warning that says so, instead of "unknown kind".
NOT_MODELLED_KINDS: dict[str, str] = {}
# Pods one input may expand to: twice Kubernetes' scalability limit of 150,000 pods per cluster (a snapshot
# of the largest cluster, with room), while expanding `replicas: 100000000` one pod at a time would spin
# for hours.
MAX_PODS = 300_000


# --- reading documents ---------------------------------------------------------------------------------


def parse_text(data: bytes, source: str) -> Objects:
    """Parse one file's bytes: JSON (object, array or List) when it starts with '{' or '[', else YAML."""
    parser = Parser(source)
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        parser.feed_json(data)
    else:
        for n, doc in enumerate(iter_yaml(data, source)):
            if doc is None:
                continue
            parser.feed_object(doc, f"document {n + 1}")
    parser.finish()
    return parser.out


def parse_documents(docs: Iterable[Any], source: str) -> Objects:
    """Parse already-loaded documents (dicts), e.g. rendered manifests."""
    parser = Parser(source)
    for n, doc in enumerate(docs):
        if doc is not None:
            parser.feed_object(doc, f"document {n + 1}")
    parser.finish()
    return parser.out


_HEAD = msgspec.json.Decoder(wire.Head)
_RAW_POD = msgspec.json.Decoder(wire.RawPod)
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "Node": msgspec.json.Decoder(wire.Node),
    "DaemonSet": msgspec.json.Decoder(wire.Workload),
    "RayCluster": msgspec.json.Decoder(wire.RayCluster),
    "PriorityClass": msgspec.json.Decoder(wire.PriorityClass),
    **{k: msgspec.json.Decoder(wire.Workload) for k in REPLICATED_KINDS | JOB_KINDS},
}
_TYPES: dict[str, type[Any]] = {
    "Pod": wire.Pod,
    "Node": wire.Node,
    "DaemonSet": wire.Workload,
    "RayCluster": wire.RayCluster,
    "PriorityClass": wire.PriorityClass,
    **{k: wire.Workload for k in REPLICATED_KINDS | JOB_KINDS},
}


class _NodeNameOnly(msgspec.Struct, rename="camel"):
    node_name: str | None = None


_NODE_NAME = msgspec.json.Decoder(_NodeNameOnly)
def _field_path(exc: msgspec.ValidationError) -> tuple[str, str]:
    """Split msgspec's 'Expected `int`, got `str` - at `$.spec.replicas`' into (field, message)."""
    text = str(exc)
    if " - at `$" in text:
        message, _, path = text.rpartition(" - at `$")
        return path.rstrip("`").lstrip("."), message
    return "", text


class Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.out = Objects()
        self._spec_cache: dict[bytes, tuple[PodSpecInfo, Resources]] = {}
        # bound pods' specs with their node name replaced by _HOLE (_bound_spec); None: read them whole
        self._shape_cache: dict[bytes, tuple[PodSpecInfo, Resources] | None] = {}
        self._pending_priority: list[tuple[Pod, str]] = []
        self._unknown: Counter[str] = Counter()
        self._listed_nodes = False
        self._listed_rays: list[tuple[wire.RayCluster, str, str]] = []

    # JSON: decode straight into Structs; pod specs stay raw so identical ones decode once.
    def feed_json(self, data: bytes) -> None:
        try:
            if data.lstrip()[:1] == b"[":
                for n, item in enumerate(msgspec.json.decode(data, type=list[msgspec.Raw])):
                    self._feed_raw(item, f"item {n}")
                return
            head = _HEAD.decode(data)
        except msgspec.DecodeError as exc:
            raise InputError(f"invalid JSON: {exc}", where=self.source) from None
        except RecursionError:
            raise InputError(f"nested deeper than the reader allows (depth limit: {MAX_DEPTH})", where=self.source) from None
        except UnicodeDecodeError as exc:  # msgspec checks strings' UTF-8 as it decodes them
            raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", where=self.source) from None
        if head.items is not msgspec.UNSET:
            if head.kind == SNAPSHOT_KIND:
                self.out.observed = True
            for n, item in enumerate(head.items or ()):
                self._feed_raw(item, f"items[{n}]")
        else:
            self._no_items(head.kind, "document 1")
            self._feed_raw(msgspec.Raw(data), "document 1")

    def _feed_raw(self, raw: msgspec.Raw, label: str) -> None:
        try:
            head = _HEAD.decode(raw)
            kind = head.kind
            if head.items is not msgspec.UNSET:
                for n, item in enumerate(head.items or ()):
                    self._feed_raw(item, f"{label}.items[{n}]")
                return
            self._no_items(kind, label)
            self._check_kind(head.api_version, kind, raw, label)
            if kind == "Pod":
                self._add_raw_pod(_RAW_POD.decode(raw), label)
                return
            if kind in KARPENTER_KINDS:
                self._add_karpenter(kind, msgspec.json.decode(raw), label)
                return
            if kind in DRA_KINDS:
                self.out.dra.append((msgspec.json.decode(raw), self.source))
                return
            if kind in STORAGE_KINDS:
                self.out.storage.append((msgspec.json.decode(raw), self.source))
                return
            decoder = _DECODERS.get(kind)
            if decoder is None:
                kueue = (head.api_version or "").startswith(KUEUE_GROUP)
                if kind == "Namespace" or kueue:
                    doc = msgspec.json.decode(raw)
                    if isinstance(doc, dict):
                        self.out.kueue.append(doc)
                    if kueue:
                        return  # read by the quota view, not ignored
                self._ignore(kind, label)
                return
            obj = decoder.decode(raw)
        except msgspec.ValidationError as exc:
            self._wire_error(exc, _identity(raw), label)
        except msgspec.DecodeError as exc:
            raise InputError(f"invalid JSON: {exc}", where=f"{self.source}: {label}") from None
        except RecursionError:
            raise InputError(
                f"nested deeper than the reader allows (depth limit: {MAX_DEPTH})", where=f"{self.source}: {label}"
            ) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text: {exc.reason}", where=f"{self.source}: {label}") from None
        self._add(kind, obj, label)

    # YAML (or any dicts): convert with the same Structs.
    def feed_object(self, doc: Any, label: str) -> None:
        if not isinstance(doc, dict):
            raise InputError(f"expected a Kubernetes object (a mapping), got {type(doc).__name__}", where=f"{self.source}: {label}")
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError("object without kind", where=f"{self.source}: {label}")
        if kind in LIST_KINDS and "items" not in doc:
            self._no_items(kind, label)
        if (kind.endswith("List") or kind == SNAPSHOT_KIND) and "items" in doc:
            items = doc["items"]
            if items is None:
                return
            if not isinstance(items, list):
                raise InputError(f"must be a list, got {type(items).__name__}", where=f"{self.source}: {label}: items")
            if kind == SNAPSHOT_KIND:
                self.out.observed = True
            for n, item in enumerate(items):
                self.feed_object(item, f"{label}.items[{n}]")
            return
        self._check_kind(doc.get("apiVersion"), kind, doc, label)
        if kind in KARPENTER_KINDS:
            self._add_karpenter(kind, doc, label)
            return
        if kind in DRA_KINDS:
            self.out.dra.append((doc, self.source))
            return
        if kind in STORAGE_KINDS:
            self.out.storage.append((doc, self.source))
            return
        typ = _TYPES.get(kind)
        if typ is None:
            api = doc.get("apiVersion")
            kueue = isinstance(api, str) and api.startswith(KUEUE_GROUP)
            if kind == "Namespace" or kueue:
                self.out.kueue.append(doc)
                if kueue:
                    return  # read by the quota view, not ignored
            self._ignore(kind, label)
            return
        try:
            obj = msgspec.convert(doc, typ, from_attributes=False)
        except msgspec.ValidationError as exc:
            self._wire_error(exc, doc, label)
        if kind == "Pod":
            self._add_pod(obj, label)
        else:
            self._add(kind, obj, label)

    def _add_karpenter(self, kind: str, doc: Any, label: str) -> None:
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise InputError("object without metadata.name", where=f"{self.source}: {kind} ({label}): metadata.name")
        where = f"{self.source}: {kind} {name}"
        api = doc.get("apiVersion")
        if api != KARPENTER_KINDS[kind]:
            self.out.warnings.append(f"{where}: apiVersion {quote(api)} ignored; kgpu reads {KARPENTER_KINDS[kind]}")
            return
        if kind == "NodePool":
            self.out.nodepools.append((doc, where))
        elif kind == "NodeOverlay":
            self.out.nodeoverlays.append((doc, self.source))  # parse_overlay names the object
        else:
            self.out.nodeclasses[name] = doc

    def _no_items(self, kind: str, label: str) -> None:
        """A List or a snapshot without an ``items`` field: ``kubectl get -o json`` and ``kgpu snapshot``
        always write one (``[]`` for an empty cluster), so the file was cut short or hand-edited. Read
        on, it would be an empty cluster that looks like a real one."""
        if kind in LIST_KINDS:
            what = "`kgpu snapshot`" if kind == SNAPSHOT_KIND else "`kubectl get -o json`"
            where = f"{self.source}: {kind}" if label == "document 1" else f"{self.source}: {label}: {kind}"
            raise InputError(
                f"missing: {what} always writes it (\"items\": [] for an empty cluster)",
                where=f"{where}: items",
                hint="was the file cut short? save it again",
            )

    def _check_kind(self, api_version: object, kind: str, doc: Any, label: str) -> None:
        """A kind its built-in API group does not serve is what the API server rejects: an input error (a
        custom resource's kind is only skipped, with a warning, in :meth:`finish`)."""
        unknown = unknown_builtin_kind(api_version, kind) if kind else None
        if unknown is not None:
            message, hint = unknown
            obj = _identity(doc) if isinstance(doc, msgspec.Raw) else doc
            raise InputError(message, where=f"{self.source}: {_describe(obj, label)}: kind", hint=hint)

    def _ignore(self, kind: str, label: str) -> None:
        if not kind:
            raise InputError("object without kind", where=f"{self.source}: {label}")
        self.out.ignored[kind] += 1
        self._unknown[kind] += kind not in QUIET_KINDS

    def _wire_error(self, exc: msgspec.ValidationError, doc: Any, label: str) -> Any:
        path, message = _field_path(exc)
        raise InputError(message, where=f"{self.source}: {_describe(doc, label)}: {path}") from None

    # --- objects -------------------------------------------------------------------------------------

    def _name(self, kind: str, meta: wire.ObjectMeta, label: str) -> str:
        if meta.name:
            return meta.name
        if meta.generate_name:
            return meta.generate_name.rstrip("-")
        raise InputError("object without metadata.name", where=f"{self.source}: {kind} ({label}): metadata.name")

    def _where(self, kind: str, meta: wire.ObjectMeta, label: str) -> str:
        ns = meta.namespace or "default"
        name = meta.name or meta.generate_name or f"({label})"
        return f"{self.source}: {kind} {name}" if kind in ("Node", "PriorityClass") else f"{self.source}: {kind} {ns}/{name}"

    def _add(self, kind: str, obj: Any, label: str) -> None:
        meta: wire.ObjectMeta = obj.metadata
        name = self._name(kind, meta, label)
        where = self._where(kind, meta, label)
        if kind == "Node":
            self.out.nodes.append(node_from_wire(obj, name, where, self.source))
            self._listed_nodes = self._listed_nodes or _listed(label)
        elif kind == "PriorityClass":
            self.out.priority_classes[name] = obj.value
            policy = _preemption_policy(obj.preemption_policy, f"{where}: preemptionPolicy") or PREEMPT_LOWER
            self.out.preemption_policies[name] = policy
            if obj.global_default:
                self.out.default_priority = obj.value
                self.out.default_preemption_policy = policy
        elif kind == "RayCluster":
            if _listed(label):  # a List is the cluster's state when it holds Nodes: known once it is read
                self._listed_rays.append((obj, name, where))
            elif not self.out.observed:
                self._expand_ray(obj, name, where)
        elif kind == "DaemonSet":
            template = obj.spec.template
            if template is None:
                raise InputError("required field missing", where=f"{where}: spec.template")
            info, limits = spec_info(template.spec, f"{where}: spec.template.spec")
            tmeta = template.metadata or wire.ObjectMeta()
            self.out.daemonsets.append(
                DaemonSet(
                    meta.namespace or "default", name, info, tmeta.labels or {}, tmeta.annotations or {}, limits,
                    self.source, meta.uid,
                )
            )
        else:
            self._expand_workload(kind, obj, name, where)

    def _expand_workload(self, kind: str, obj: wire.Workload, name: str, where: str) -> None:
        spec = obj.spec
        template: wire.PodTemplate | None
        if kind == "CronJob":
            if spec.job_template is None:
                raise InputError("required field missing", where=f"{where}: spec.jobTemplate")
            job = spec.job_template.spec
            count = _job_pods(job.parallelism, job.completions)
            template, path = job.template, "spec.jobTemplate.spec.template"
        elif kind == "Job":
            count = _job_pods(spec.parallelism, spec.completions)
            template, path = spec.template, "spec.template"
        else:
            count = 1 if spec.replicas is None else spec.replicas
            template, path = spec.template, "spec.template"
        field = "spec.replicas" if kind not in JOB_KINDS else f"{path.removesuffix('template')}parallelism"
        self._check_count(count, where, field)
        if template is None:
            raise InputError("required field missing", where=f"{where}: {path}")
        info, limits = spec_info(template.spec, f"{where}: {path}.spec")
        if spec.volume_claim_templates and kind == "StatefulSet":
            # the StatefulSet controller adds a PersistentVolumeClaim volume per template to every pod
            claims = tuple(f"template {(t.metadata or wire.ObjectMeta()).name}" for t in spec.volume_claim_templates)
            made = tuple(
                _claim_template("template", (t.metadata or wire.ObjectMeta()).name, t.spec, f"{where}: spec.volumeClaimTemplates[{i}].spec")
                for i, t in enumerate(spec.volume_claim_templates)
            )
            info = replace(info, volume_claims=info.volume_claims + claims, claim_templates=info.claim_templates + made)
        tmeta = template.metadata or wire.ObjectMeta()
        ns = obj.metadata.namespace or "default"
        for ref in obj.metadata.owner_references or ():
            if ref.controller:
                self.out.owned[(kind, ns, name)] = (ref.kind, ref.name, ref.uid)
        for n in range(count):
            pod = Pod(
                ns, f"{name}-{n}", info, tmeta.labels or {}, tmeta.annotations or {},
                owner_kind=kind, owner_name=name, source=self.source, limits=limits,
                owner_uid=obj.metadata.uid, created=True,
            )
            self._priority(pod, f"{where}: {path}.spec")
            self.out.pods.append(pod)

    def _expand_ray(self, obj: wire.RayCluster, name: str, where: str) -> None:
        ns = obj.metadata.namespace or "default"
        groups: list[tuple[str, wire.RayGroup, int, str]] = []
        if obj.spec.head_group_spec is not None:
            groups.append((f"{name}-head", obj.spec.head_group_spec, 1, "spec.headGroupSpec"))
        for i, g in enumerate(obj.spec.worker_group_specs or []):
            count = g.replicas if g.replicas is not None else (g.min_replicas or 0)
            if g.max_replicas is not None:
                count = min(count, g.max_replicas)
            groups.append((f"{name}-{g.group_name or i}-worker", g, count, f"spec.workerGroupSpecs[{i}]"))
        for prefix, g, count, path in groups:
            self._check_count(count, where, f"{path}.replicas")
            info, limits = spec_info(g.template.spec, f"{where}: {path}.template.spec")
            tmeta = g.template.metadata or wire.ObjectMeta()
            for n in range(count):
                pod = Pod(ns, f"{prefix}-{n}", info, tmeta.labels or {}, tmeta.annotations or {},
                          owner_kind="RayCluster", owner_name=name, source=self.source, limits=limits,
                          owner_uid=obj.metadata.uid, created=True)
                self._priority(pod, f"{where}: {path}.template.spec")
                self.out.pods.append(pod)

    def _add_raw_pod(self, raw: wire.RawPod, label: str) -> None:
        meta = raw.metadata
        name = self._name("Pod", meta, label)
        key = bytes(raw.spec)
        cached = self._spec_cache.get(key)
        if cached is None:
            cached = self._bound_spec(key)
        if cached is None:
            try:
                spec = _SPEC.decode(raw.spec)
            except msgspec.ValidationError as exc:
                path, message = _field_path(exc)
                raise InputError(message, where=f"{self._where('Pod', meta, label)}: spec.{path}") from None
            cached = spec_info(spec, f"{self._where('Pod', meta, label)}: spec")
            self._spec_cache[key] = cached
        self._finish_pod(meta, name, cached, raw.status, label)

    def _bound_spec(self, key: bytes) -> tuple[PodSpecInfo, Resources] | None:
        """A bound pod's spec read once per shape (``bound_spec``); None: read it whole."""
        try:
            node = _NODE_NAME.decode(key).node_name
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            return None
        return bound_spec(key, node, self._shape_cache) if node else None

    def _add_pod(self, obj: wire.Pod, label: str) -> None:
        meta = obj.metadata
        name = self._name("Pod", meta, label)
        cached = spec_info(obj.spec, f"{self._where('Pod', meta, label)}: spec")
        self._finish_pod(meta, name, cached, obj.status, label)

    def _finish_pod(
        self, meta: wire.ObjectMeta, name: str, cached: tuple[PodSpecInfo, Resources], status: wire.PodStatus | None, label: str
    ) -> None:
        info, limits = cached
        owner_kind = owner_name = owner_uid = ""
        for ref in meta.owner_references or ():
            if ref.controller:
                owner_kind, owner_name, owner_uid = ref.kind, ref.name, ref.uid
        pod = Pod(
            meta.namespace or "default", name, info, meta.labels or {}, meta.annotations or {},
            phase=(status.phase if status and status.phase else "Pending"),
            owner_kind=owner_kind, owner_name=owner_name, source=self.source, limits=limits, owner_uid=owner_uid,
        )
        if status is not None and status.resource_claim_statuses:
            pod.claim_statuses = tuple((c.name, c.resource_claim_name or "") for c in status.resource_claim_statuses)
        if status is not None and status.start_time:
            pod.start_time = parse_time(status.start_time, f"{self._where('Pod', meta, label)}: status.startTime")
        self._priority(pod, f"{self._where('Pod', meta, label)}: spec")
        self.out.pods.append(pod)

    def _priority(self, pod: Pod, where: str) -> None:
        if pod.spec.priority is not None:
            # already admitted (a snapshot): spec.preemptionPolicy is the one admission set
            pod.priority = pod.spec.priority
            pod.preemption_policy = pod.spec.preemption_policy or PREEMPT_LOWER
        else:
            self._pending_priority.append((pod, where))

    def finish(self) -> None:
        """Resolve priorityClassName once every PriorityClass of this input is known (again, with the
        other inputs, in ``resolve_priorities``)."""
        if self._listed_nodes:
            self.out.observed = True
        for obj, name, where in self._listed_rays:
            if not self.out.observed:
                self._expand_ray(obj, name, where)
        self._listed_rays.clear()
        self.out.priority_pending.extend(self._pending_priority)
        self._pending_priority.clear()
        resolve_priorities(self.out)
        for kind, n in self._unknown.items():
            if not n:
                continue
            if kind in NOT_MODELLED_KINDS:
                self.out.warnings.append(f"{self.source}: {n} {kind} object(s): {NOT_MODELLED_KINDS[kind]}")
                continue
            known = {k.lower(): k for k in KNOWN_KINDS}
            close = [known[kind.lower()]] if kind.lower() in known else closest(kind, KNOWN_KINDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            self.out.warnings.append(
                f"{self.source}: ignored {n} object(s) of unknown kind {quote(kind)}{hint}; "
                f"kgpu places Pod, {', '.join(sorted(KNOWN_KINDS - POD_KINDS))}"
            )
        self._unknown.clear()

    def _check_count(self, count: int, where: str, field: str) -> None:
        if count < 0:
            raise InputError(f"must be greater than or equal to 0, got {quote(count)}", where=f"{where}: {field}")
        if count + len(self.out.pods) > MAX_PODS:
            raise InputError(
                f"{quote(count)} pods would take this input over {MAX_PODS} pods "
                "(pod limit: twice Kubernetes' scalability limit of 150,000 pods per cluster)",
                where=f"{where}: {field}",
            )


def _listed(label: str) -> bool:
    """Whether an object was read from the items of a List or snapshot (its label says where)."""
    return label.startswith("items[") or ".items[" in label


def _job_pods(parallelism: int | None, completions: int | None) -> int:
    p = 1 if parallelism is None else parallelism
    return min(p, completions) if completions is not None else p


__all__ = [
    "DRA_KINDS",
    "MAX_PODS",
    "STORAGE_KINDS",
    "Parser",
    "bound_spec",
    "closest",
    "parse_documents",
    "parse_text",
    "parse_time",
]

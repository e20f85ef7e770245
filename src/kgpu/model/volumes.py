"""PersistentVolumeClaims, PersistentVolumes and StorageClasses, read and validated for the scheduler.

The loader keeps these objects as read (``Objects.storage``, with their file); ``read`` turns them into the
few fields kube-scheduler's volume plugins look at (k8s.io/kubernetes pkg/scheduler/framework/plugins/
volumebinding, volumezone, volumerestrictions at v1.34, and k8s.io/component-helpers storage/volume):

- a claim: its class (``spec.storageClassName``, or the beta annotation ``volume.beta.kubernetes.io/
  storage-class``, which wins), the volume it is bound to, access modes, storage request, phase, the
  ``volume.kubernetes.io/selected-node`` annotation of a claim being provisioned;
- a volume: class, capacity, access modes, ``claimRef``, ``nodeAffinity.required``, its labels (VolumeZone
  reads ``topology.kubernetes.io/zone``/``region`` and the beta failure-domain labels), phase;
- a class: provisioner, ``volumeBindingMode``, ``allowedTopologies``, and whether it is the default
  (``storageclass.kubernetes.io/is-default-class: "true"``).

API-server defaulting that changes scheduling is applied, because manifests have not been through one yet:
a class without ``volumeBindingMode`` is ``Immediate``; a claim without a class gets the default class
(the DefaultStorageClass admission plugin; the newest default class when several are marked, as it picks);
a volume without ``status.phase`` is ``Available`` unless it has a ``claimRef``, a claim without one is
``Pending``. A claim that names a volume and is Bound counts as bound (the PV controller has set
``pv.kubernetes.io/bind-completed`` on a claim it bound; a manifest written with ``volumeName`` is
pre-bound, and the controller binds it at once).

Bad objects are input errors naming the file, object and field (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.fields import list_at as _list
from kgpu.model.fields import mapping_at as _map
from kgpu.model.fields import text_at as _text
from kgpu.model.fields import texts_at as _texts
from kgpu.model.names import is_dns1123_subdomain
from kgpu.model.objects import ClaimTemplate, NodeSelector, Requirement, Term
from kgpu.model.predicates import requirement_error
from kgpu.model.quantity import resource_amount

KINDS = frozenset({"PersistentVolumeClaim", "PersistentVolume", "StorageClass"})
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
IMMEDIATE = "Immediate"
WAIT = "WaitForFirstConsumer"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(slots=True)
class Claim:
    namespace: str
    name: str
    storage_class: str  # "" when none (after defaulting)
    volume_name: str = ""
    access_modes: tuple[str, ...] = ()
    storage: int = 0
    phase: str = "Pending"
    selected_node: str = ""
    deleting: bool = False
    where: str = ""
    status_given: bool = False  # read with a status (from a cluster): its phase is what the cluster says

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(slots=True)
class Volume:
    name: str
    storage_class: str = ""
    capacity: int = 0
    access_modes: tuple[str, ...] = ()
    claim_ref: tuple[str, str] | None = None  # (namespace, name)
    node_affinity: NodeSelector | None = None
    labels: dict[str, str] = field(default_factory=dict)
    phase: str = "Available"
    deleting: bool = False
    where: str = ""


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str = IMMEDIATE
    allowed_topologies: NodeSelector | None = None  # matchLabelExpressions as In requirements; None: any
    default: bool = False
    created: str = ""  # metadata.creationTimestamp, to pick the newest default
    parameters: tuple[tuple[str, str], ...] = ()


@dataclass
class StorageObjects:
    claims: dict[tuple[str, str], Claim] = field(default_factory=dict)
    volumes: dict[str, Volume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def default_class(self) -> str:
        """The class the DefaultStorageClass admission plugin gives a claim without one ("" when none)."""
        defaults = sorted((c.created, c.name) for c in self.classes.values() if c.default)
        return max(defaults, key=lambda t: (t[0], t[1]))[1] if defaults else ""


def read(docs: list[tuple[dict[str, Any], str]]) -> StorageObjects:
    """The storage objects of ``docs`` ((object, file) pairs, in input order), validated and defaulted."""
    out = StorageObjects()
    raw_claims: list[tuple[Claim, bool]] = []
    for doc, source in docs:
        kind = doc.get("kind")
        meta = _map(doc.get("metadata"), f"{source}: {kind}: metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("object without metadata.name", where=f"{source}: {kind}: metadata.name")
        namespaced = kind == "PersistentVolumeClaim"
        ns = str(meta.get("namespace") or "default")
        where = f"{source}: {kind} {ns}/{name}" if namespaced else f"{source}: {kind} {name}"
        if not is_dns1123_subdomain(name):
            raise InputError(f"{quote(name)}: a lowercase RFC 1123 subdomain must consist of lower case "
                             "alphanumeric characters, '-' or '.'", where=f"{where}: metadata.name")
        api = doc.get("apiVersion")
        want = "storage.k8s.io/v1" if kind == "StorageClass" else "v1"
        if api != want:
            out.warnings.append(f"{where}: apiVersion {quote(api)} ignored; kgpu reads {want}")
            continue
        annotations = _map(meta.get("annotations"), f"{where}: metadata.annotations")
        deleting = bool(meta.get("deletionTimestamp"))
        if kind == "StorageClass":
            out.classes[name] = _class(name, doc, meta, annotations, where)
        elif kind == "PersistentVolume":
            out.volumes[name] = _volume(name, doc, meta, where, deleting)
        else:
            claim, has_class = _claim(ns, name, doc, annotations, where, deleting)
            raw_claims.append((claim, has_class))
    default = out.default_class()
    for claim, has_class in raw_claims:
        if not has_class:
            claim.storage_class = default
        out.claims[claim.key] = claim
    return out


def from_template(t: ClaimTemplate, namespace: str, pod_name: str, default_class: str) -> Claim:
    """The claim a StatefulSet's or the ephemeral volume controller creates for a pod (not bound yet)."""
    cls = t.storage_class if t.storage_class is not None else default_class
    return Claim(namespace, t.claim_name(pod_name), cls, access_modes=t.access_modes, storage=t.storage,
                 where=f"{t.kind} {t.name}")


def _class(name: str, doc: dict[str, Any], meta: dict[str, Any], annotations: dict[str, Any], where: str) -> StorageClass:
    provisioner = doc.get("provisioner")
    if not isinstance(provisioner, str) or not provisioner:
        raise InputError("Required value", where=f"{where}: provisioner")
    mode = doc.get("volumeBindingMode")
    if mode is None:
        mode = IMMEDIATE
    if mode not in BINDING_MODES:
        raise InputError(f"Unsupported value: {quote(mode)}: supported values: {', '.join(BINDING_MODES)}",
                         where=f"{where}: volumeBindingMode")
    terms = []
    for i, t in enumerate(_list(doc.get("allowedTopologies"), f"{where}: allowedTopologies")):
        at = f"{where}: allowedTopologies[{i}]"
        reqs = []
        for j, e in enumerate(_list(_map(t, at).get("matchLabelExpressions"), f"{at}.matchLabelExpressions")):
            e = _map(e, f"{at}.matchLabelExpressions[{j}]")
            values = _texts(e.get("values"), f"{at}.matchLabelExpressions[{j}].values")
            req = Requirement(_text(e.get("key"), f"{at}.matchLabelExpressions[{j}].key"), "In", values)
            error = requirement_error(req)
            if error:
                raise InputError(error, where=f"{at}.matchLabelExpressions[{j}]")
            reqs.append(req)
        terms.append(Term(tuple(reqs)))
    params = _map(doc.get("parameters"), f"{where}: parameters")
    return StorageClass(
        name, provisioner, mode, NodeSelector(tuple(terms)) if terms else None,
        str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true",
        str(meta.get("creationTimestamp") or ""), tuple(sorted((str(k), _text(v, f"{where}: parameters.{k}")) for k, v in params.items())),
    )


def _modes(value: Any, where: str) -> tuple[str, ...]:
    modes = tuple(_list(value, where))
    for i, m in enumerate(modes):
        if m not in ACCESS_MODES:
            raise InputError(f"Unsupported value: {quote(m)}: supported values: {', '.join(ACCESS_MODES)}",
                             where=f"{where}[{i}]")
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        raise InputError("may not use ReadWriteOncePod with other access modes", where=where)
    return modes


def _volume(name: str, doc: dict[str, Any], meta: dict[str, Any], where: str, deleting: bool) -> Volume:
    spec = _map(doc.get("spec"), f"{where}: spec")
    capacity = _map(spec.get("capacity"), f"{where}: spec.capacity")
    if "storage" not in capacity:
        raise InputError("Required value", where=f"{where}: spec.capacity.storage")
    size = resource_amount(capacity["storage"], where=f"{where}: spec.capacity.storage")
    modes = _modes(spec.get("accessModes"), f"{where}: spec.accessModes")
    if not modes:
        raise InputError("Required value", where=f"{where}: spec.accessModes")
    ref = spec.get("claimRef")
    claim_ref = None
    if ref is not None:
        ref = _map(ref, f"{where}: spec.claimRef")
        claim_ref = (_text(ref.get("namespace"), f"{where}: spec.claimRef.namespace") or "default",
                     _text(ref.get("name"), f"{where}: spec.claimRef.name"))
    affinity = None
    na = _map(spec.get("nodeAffinity"), f"{where}: spec.nodeAffinity")
    if na.get("required") is not None:
        req = _map(na["required"], f"{where}: spec.nodeAffinity.required")
        affinity = _node_selector(req, f"{where}: spec.nodeAffinity.required")
    labels = {str(k): str(v) for k, v in _map(meta.get("labels"), f"{where}: metadata.labels").items()}
    status = _map(doc.get("status"), f"{where}: status")
    phase = _text(status.get("phase"), f"{where}: status.phase") or ("Bound" if claim_ref and claim_ref[1] else "Available")
    cls = _text(spec.get("storageClassName"), f"{where}: spec.storageClassName")
    return Volume(name, cls, size, modes, claim_ref, affinity, labels, phase,
                  deleting, where)


def _claim(ns: str, name: str, doc: dict[str, Any], annotations: dict[str, Any], where: str,
           deleting: bool) -> tuple[Claim, bool]:
    spec = _map(doc.get("spec"), f"{where}: spec")
    modes = _modes(spec.get("accessModes"), f"{where}: spec.accessModes")
    if not modes:
        raise InputError("at least 1 access mode is required", where=f"{where}: spec.accessModes")
    requests = _map(_map(spec.get("resources"), f"{where}: spec.resources").get("requests"),
                    f"{where}: spec.resources.requests")
    if "storage" not in requests:
        raise InputError("Required value", where=f"{where}: spec.resources.requests.storage")
    size = resource_amount(requests["storage"], where=f"{where}: spec.resources.requests.storage")
    if BETA_CLASS_ANNOTATION in annotations:
        cls, has = str(annotations[BETA_CLASS_ANNOTATION]), True
    elif spec.get("storageClassName") is not None:
        cls, has = _text(spec["storageClassName"], f"{where}: spec.storageClassName"), True
    else:
        cls, has = "", False
    status = _map(doc.get("status"), f"{where}: status")
    volume = _text(spec.get("volumeName"), f"{where}: spec.volumeName")
    phase = _text(status.get("phase"), f"{where}: status.phase") or ("Bound" if volume else "Pending")
    return Claim(ns, name, cls, volume, modes, size, phase, str(annotations.get(SELECTED_NODE_ANNOTATION) or ""),
                 deleting, where, bool(status.get("phase"))), has


def _node_selector(sel: dict[str, Any], where: str) -> NodeSelector:
    terms = []
    items = _list(sel.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
    if not items:
        raise InputError("must have at least one node selector term", where=f"{where}.nodeSelectorTerms")
    for i, t in enumerate(items):
        at = f"{where}.nodeSelectorTerms[{i}]"
        t = _map(t, at)
        exprs = []
        for j, e in enumerate(_list(t.get("matchExpressions"), f"{at}.matchExpressions")):
            e = _map(e, f"{at}.matchExpressions[{j}]")
            req = Requirement(_text(e.get("key"), f"{at}.matchExpressions[{j}].key"),
                              _text(e.get("operator"), f"{at}.matchExpressions[{j}].operator"),
                              _texts(e.get("values"), f"{at}.matchExpressions[{j}].values"))
            error = requirement_error(req)
            if error:
                raise InputError(error, where=f"{at}.matchExpressions[{j}]")
            exprs.append(req)
        fields = []
        for j, e in enumerate(_list(t.get("matchFields"), f"{at}.matchFields")):
            e = _map(e, f"{at}.matchFields[{j}]")
            fields.append(Requirement(_text(e.get("key"), f"{at}.matchFields[{j}].key"),
                                      _text(e.get("operator"), f"{at}.matchFields[{j}].operator"),
                                      _texts(e.get("values"), f"{at}.matchFields[{j}].values")))
        terms.append(Term(tuple(exprs), tuple(fields)))
    return NodeSelector(tuple(terms))



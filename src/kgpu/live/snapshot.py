"""``kgpu snapshot``: a live cluster's scheduling-relevant objects as one JSON document.

The document (``kind: ClusterSnapshot``, see docs/live.md) holds Nodes, Pods, DaemonSets, PriorityClasses,
recent FailedScheduling / FailedCreate Events, PersistentVolumeClaims, PersistentVolumes and StorageClasses,
and, where their CRDs are installed, Karpenter NodePools,
NodeClaims and EC2NodeClasses and KubeRay RayClusters, each as ``kubectl get -o json`` prints it.
``kgpu simulate --cluster`` and ``kgpu doctor --snapshot`` read it.

The lists are read a page at a time (``limit`` / ``continue``) and each object goes on as it arrives
(:func:`collect`): ``kgpu snapshot`` encodes it into a spool file (:class:`Spool`), so the cluster is never
held whole in memory; ``kgpu doctor`` keeps the objects (:func:`take`).

Nothing secret leaves the cluster: container ``env`` values are replaced (names kept), values in params
maps whose key names a password, token or secret are replaced, and ``managedFields``, the
``last-applied-configuration`` annotation and annotations whose key names a secret are dropped or
replaced, in every object and everything nested in it (:func:`redact`, total over any JSON shape). The
server's URL is saved without userinfo.
"""

from __future__ import annotations

import heapq
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

import msgspec

from kgpu import __version__
from kgpu.errors import InputError, os_error
from kgpu.live.client import (
    CONFIGMAP,
    DAEMONSET,
    DEVICECLASS,
    EC2NODECLASS,
    EVENT,
    IMAGECACHE,
    KUEUE_RESOURCES,
    NAMESPACE,
    NODE,
    NODECLAIM,
    NODEOVERLAY,
    NODEPOOL,
    POD,
    PRIORITY_CLASS,
    PV,
    PVC,
    RAYCLUSTER,
    RESOURCECLAIM,
    RESOURCECLAIMTEMPLATE,
    RESOURCESLICE,
    STORAGECLASS,
    ApiClient,
    Forbidden,
    NotFound,
    NotServed,
    Resource,
)
from kgpu.live.kubeconfig import ClusterError, strip_userinfo
from kgpu.model.safeyaml import MAX_BYTES, check_depth

API_VERSION = "kgpu.dev/v1alpha1"
KIND = "ClusterSnapshot"
REDACTED = "<redacted>"
EVENT_REASONS = ("FailedScheduling", "FailedCreate")
PULL_REASONS = ("Pulling", "Pulled")  # of the snapshot's pods: TKE image-cache use (kgpu.doctor.image_cache)
MAX_EVENTS = 5000  # newest scheduling events kept, and newest pull events kept
# Env values kept: not secrets, and doctor's visible-devices check compares them (kgpu.doctor.visible_devices).
KEEP_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_KEY = re.compile(r"secret|token|passw|credential|api[-_.]?key|private[-_.]?key|auth|cert[-_.]?data", re.I)
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # an object name (DNS-1123 subdomain)
_PARAMS_ENDINGS = ("params", "Params", "parameters", "Parameters", "volumeAttributes")
# a secret written as key=value or key: value inside a string (a CSI volume attribute, opaque DRA parameters
# given as a string, a StorageClass parameter in a list)
_SECRET_PAIR = re.compile(
    r"((?:secret|token|passw\w*|credential\w*|api[-_.]?key|private[-_.]?key|auth\w*)[\"']?\s*[=:]\s*)"
    r"(?:\"[^\"]*\"|'[^']*'|[^\s,;&\"'}]+)",
    re.I,
)
_SPECIAL = frozenset({"metadata", "env", "status"})

# (resource, optional: its API may not be served (404), or RBAC may not grant it (403); either skips it
# with a note in metadata.absent / metadata.forbidden). -n limits the namespaced ones.
SOURCES: tuple[tuple[Resource, bool], ...] = (
    (NODE, False),
    (POD, False),
    (DAEMONSET, False),
    (PRIORITY_CLASS, False),
    (NODEPOOL, True),
    (NODECLAIM, True),
    (EC2NODECLASS, True),
    (NODEOVERLAY, True),
    (RAYCLUSTER, True),
    (DEVICECLASS, True),
    (RESOURCECLAIM, True),
    (RESOURCECLAIMTEMPLATE, True),
    (RESOURCESLICE, True),
    (IMAGECACHE, True),
    # volumes: kgpu.sim.scheduler.plugins.volumebinding places pods with claims by them (optional: an older kgpu-doctor role lacks them)
    (PVC, True),
    (PV, True),
    (STORAGECLASS, True),
    # Kueue's queues, quotas and Workloads (kgpu queue), and the Namespaces' labels its namespaceSelectors read
    (NAMESPACE, True),
    *((r, True) for r in KUEUE_RESOURCES),
)
# Read by name (get), not listed: the device plugin's config ConfigMaps (kgpu.doctor.sharing).
BY_NAME: tuple[Resource, ...] = (CONFIGMAP,)

Progress = Callable[[str, int], None]


class Items(Protocol):
    """Where the snapshot's objects go, in order, as they are read: a list in memory (:class:`ItemList`,
    ``kgpu doctor``) or JSON in a file (:class:`Spool`, ``kgpu snapshot``). A list that fails part-way
    through (an optional kind refused on a later page) is taken back to its mark."""

    def add(self, obj: dict[str, Any]) -> None: ...

    def mark(self) -> Any: ...

    def rollback(self, mark: Any) -> None: ...


class ItemList:
    """The objects in memory."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, obj: dict[str, Any]) -> None:
        self.items.append(obj)

    def mark(self) -> int:
        return len(self.items)

    def rollback(self, mark: int) -> None:
        del self.items[mark:]


def take(client: ApiClient, namespace: str | None = None, *, page_size: int = 500,
         progress: Progress | None = None, now: datetime | None = None) -> dict[str, Any]:
    """List everything the snapshot holds, in memory. ``namespace`` None means every namespace."""
    items = ItemList()
    doc = collect(client, items, namespace, page_size=page_size, progress=progress, now=now)
    doc["items"] = items.items
    return doc


def collect(client: ApiClient, items: Items, namespace: str | None = None, *, page_size: int = 500,
            progress: Progress | None = None, now: datetime | None = None) -> dict[str, Any]:
    """List everything the snapshot holds into ``items``, each object redacted as it arrives, a page at a
    time (the next one requested meanwhile); return the document without its ``items`` (its metadata says
    what was read). What is kept across
    lists is small: the pods' names (for their pull events), the DaemonSets (for the plugin's ConfigMaps)
    and the newest events."""
    counts: dict[str, int] = {}
    absent: list[str] = []

    def step(label: str) -> Callable[[int], None] | None:
        return None if progress is None else (lambda n: progress(label, n))

    forbidden: list[str] = []
    left_out: list[str] = []
    in_snapshot: set[tuple[str, str]] = set()
    daemonsets: list[dict[str, Any]] = []
    for resource, optional in SOURCES:
        mark = items.mark()
        count = 0
        try:
            for obj in client.iter_list(resource, namespace if resource.namespaced else None, page_size=page_size,
                                        progress=step(resource.plural), prefetch=True):
                redact(obj)
                odd = unreadable(obj) if resource.kind in VALIDATED_KINDS else None
                if odd is not None:  # the snapshot stays readable: the object is left out, and said
                    left_out.append(odd)
                    continue
                items.add(obj)
                count += 1
                if resource is POD:
                    in_snapshot.add(_pod_key(obj.get("metadata")))
                elif resource is DAEMONSET:
                    daemonsets.append(obj)
        except NotServed:
            if not optional:
                raise
            items.rollback(mark)
            absent.append(f"{resource.api_version} {resource.kind}")
            continue
        except Forbidden as exc:
            if not optional:
                raise
            items.rollback(mark)
            forbidden.append(exc.message)
            continue
        counts[resource.kind] = count
    configs = _plugin_configmaps(client, daemonsets, forbidden)
    for cm in configs:
        items.add(cm)
    if configs:
        counts["ConfigMap"] = len(configs)
    events = _events(client, namespace, EVENT_REASONS, page_size, step)
    pulls = _events(client, namespace, PULL_REASONS, page_size, step, keep=lambda ev: _involved(ev) in in_snapshot)
    for ev in events + pulls:
        items.add(redact(ev))
    counts["Event"] = len(events) + len(pulls)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "createdAt": stamp,
            "context": client.target.context,
            "server": client.target.server,
            "namespace": namespace,
            "kgpuVersion": __version__,
            "counts": counts,
            "absent": absent,
            "forbidden": forbidden,
            "leftOut": left_out,
        },
    }


# Kinds kgpu's readers validate as the API server would (an object it would have refused is bad input for
# simulate and doctor): one the cluster's API server served anyway is left out of the snapshot, and said.
VALIDATED_KINDS = frozenset(
    {"DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "PersistentVolumeClaim",
     "PersistentVolume", "StorageClass", "NodeOverlay"}
)


def unreadable(obj: dict[str, Any]) -> str | None:
    """Why kgpu's readers would refuse this object ("Kind ns/name: field: why"), or None."""
    from kgpu.model import dra, volumes
    from kgpu.sim.provisioners.karpenter.overlay import parse_overlay
    from kgpu.sim.scheduler.plugins.cel import Evaluator
    from kgpu.sim.scheduler.plugins.dynamicresources import all_selectors, compile_selectors

    kind = obj.get("kind")
    meta = obj.get("metadata")
    ref = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p) if isinstance(meta, dict) else ""
    try:
        if kind == "NodeOverlay":
            parse_overlay(obj)
        elif kind in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"):
            volumes.read([(obj, "the cluster")])
        else:
            # read, and its selectors checked as the API server checks them when the object is created (an
            # object kgpu's simulation would refuse must not make the snapshot unreadable)
            compile_selectors(all_selectors(dra.read([(obj, "the cluster")])), Evaluator())
    except InputError as exc:
        where = exc.where.removeprefix("the cluster: ") if exc.where else f"{kind} {ref}"
        return f"{where}: {exc.message}"
    return None


_MIN_ENVELOPE = len(b'{"items":[]}\n')  # bytes a document holds besides its items, at the least


class Spool:
    """The snapshot's ``items`` as JSON, encoded object by object as they are read, into a temporary file
    (unnamed: nothing is left behind whatever ends the process): the cluster is held on disk, never whole
    in memory. :meth:`write` then writes the document: its head (the metadata, known at the end), the items
    copied from the spool, its end. The bytes are those of ``msgspec.json.encode`` of the whole document
    (compact JSON is the concatenation of its parts), refused before anything is written when the readers
    would refuse them (size: as soon as the items alone pass it)."""

    FLUSH = 1 << 20

    def __init__(self, file: BinaryIO, where: str = "the snapshot's spool file") -> None:
        self.file = file
        self.where = where  # named in an error of the spool file (a full disk beside the output)
        self.count = 0
        self.size = 0  # bytes of the items written to the file
        self._buf = bytearray()
        self._encoder = msgspec.json.Encoder()

    def add(self, obj: dict[str, Any]) -> None:
        if self.count:
            self._buf += b","
        self._encoder.encode_into(obj, self._buf, -1)
        self.count += 1
        if self.size + len(self._buf) + _MIN_ENVELOPE > MAX_BYTES:
            raise _too_large("larger than the readers take")
        if len(self._buf) >= self.FLUSH:
            self._flush()

    def mark(self) -> tuple[int, int]:
        self._flush()
        return self.size, self.count

    def rollback(self, mark: tuple[int, int]) -> None:
        self._flush()
        self.size, self.count = mark
        try:
            self.file.seek(self.size)
            self.file.truncate()
        except OSError as exc:
            raise os_error(exc, self.where, "cannot spool the snapshot") from None

    def _flush(self) -> None:
        if not self._buf:
            return
        self.size += len(self._buf)
        try:
            self.file.write(self._buf)
        except OSError as exc:
            raise os_error(exc, self.where, "cannot spool the snapshot") from None
        self._buf.clear()

    def write(self, head: dict[str, Any], out: BinaryIO) -> None:
        """The whole document to ``out``: ``head`` (:func:`collect`'s) with the spooled items, and a newline."""
        self._flush()
        start, end = _envelope(head)
        total = len(start) + self.size + len(end) + 1
        if total > MAX_BYTES:
            raise _too_large(f"{total >> 20} MiB, more than the readers take")
        out.write(start)
        try:
            self.file.flush()
            self.file.seek(0)
        except OSError as exc:
            raise os_error(exc, self.where, "cannot spool the snapshot") from None
        shutil.copyfileobj(self.file, out, self.FLUSH)
        out.write(end + b"\n")


def _envelope(head: dict[str, Any]) -> tuple[bytes, bytes]:
    """The document's bytes before and after its items, within the readers' limits.

    Depth and integers of the items: every answer was read within the readers' limits (kgpu.live.client),
    and each object sits as deep in the snapshot (document, items, object) as in its list (list, items,
    object); redaction only replaces values. The envelope is checked here."""
    try:
        check_depth(head, "the snapshot")
    except InputError as exc:
        raise ClusterError(f"{exc.message}; the file readers would refuse it", where="the snapshot") from None
    data = msgspec.json.encode({**head, "items": []})
    assert data.endswith(b"[]}")
    return data[:-2], data[-2:]


def _too_large(what: str) -> ClusterError:
    return ClusterError(f"it would be {what} ({MAX_BYTES >> 20} MiB size limit)",
                        where="the snapshot", hint="take it per namespace with -n")


def _events(client: ApiClient, namespace: str | None, reasons: tuple[str, ...], page_size: int,
            step: Callable[[str], Callable[[int], None] | None],
            keep: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
    """The newest MAX_EVENTS events of these reasons (a field selector each) that ``keep`` keeps, newest
    first; of equal times, the one listed first. Only those are held: ``heapq.nlargest`` is
    ``sorted(reverse=True)[:n]`` (stable) over what streams by."""
    listed = (ev for reason in reasons
              for ev in client.iter_list(EVENT, namespace, page_size=page_size, field_selector=f"reason={reason}",
                                         progress=step(f"events ({reason})"), prefetch=True))
    if keep is not None:
        listed = (ev for ev in listed if keep(ev))
    return heapq.nlargest(MAX_EVENTS, listed, key=_event_time)


def _pod_key(meta: Any) -> tuple[str, str]:
    if not isinstance(meta, dict):
        return ("", "")
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


def _involved(ev: dict[str, Any]) -> tuple[str, str] | None:
    inv = ev.get("involvedObject") or ev.get("regarding")
    if not isinstance(inv, dict) or inv.get("kind") != "Pod":
        return None
    return _pod_key(inv)


def config_refs(daemonsets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, name) of the ConfigMaps the NVIDIA device plugin's DaemonSets mount (the Helm chart's
    ``config.name`` or its generated ``<release>-configs``, the GPU Operator's ``devicePlugin.config.name``):
    volumes of a DaemonSet with a container of the k8s-device-plugin image (the plugin, its
    config-manager sidecar, GFD), ``configMap`` or ``projected`` ones."""
    from kgpu.doctor.deviceplugin_workloads import is_plugin_image

    refs: list[tuple[str, str]] = []
    for ds in daemonsets:
        spec = _dig(ds, "spec", "template", "spec")
        containers = [c for key in ("containers", "initContainers") for c in _list(spec.get(key))]
        if not any(isinstance(c, dict) and isinstance(c.get("image"), str) and is_plugin_image(c["image"])
                   for c in containers):
            continue
        ns = str(_dig(ds, "metadata").get("namespace") or "default")
        for vol in _list(spec.get("volumes")):
            if not isinstance(vol, dict):
                continue
            sources = [vol] + [s for s in _list(_dig(vol, "projected").get("sources")) if isinstance(s, dict)]
            for src in sources:
                name = _dig(src, "configMap").get("name")
                if isinstance(name, str) and _NAME.fullmatch(name) and _NAME.fullmatch(ns) and (ns, name) not in refs:
                    refs.append((ns, name))
    return refs


def _plugin_configmaps(client: ApiClient, daemonsets: list[dict[str, Any]],
                       forbidden: list[str]) -> list[dict[str, Any]]:
    """The device plugin's config ConfigMaps, each read by name; one that holds no plugin config
    (``version: v1`` with flags or sharing) is not kept. No other ConfigMap is read."""
    from kgpu.doctor.sharing import plugin_configmaps
    from kgpu.doctor.state import ClusterState

    out: list[dict[str, Any]] = []
    for ns, name in config_refs(daemonsets):
        try:
            cm = client.get(CONFIGMAP, name, ns)
        except NotFound:  # the plugin waits for it (its pods are not Ready): doctor's device-plugin checks
            continue
        except Forbidden as exc:
            forbidden.append(exc.message)
            return out
        if not isinstance(cm, dict):
            continue
        try:  # as deep as it will sit in the snapshot (document, items, object), which a get does not check
            check_depth({"items": [cm]}, f"configmap {ns}/{name}")
        except InputError as exc:
            raise ClusterError(f"{exc.message}; the file readers would refuse it", where=exc.where) from None
        cm.setdefault("apiVersion", "v1")
        cm.setdefault("kind", "ConfigMap")
        if plugin_configmaps(ClusterState("snapshot", {}, configmaps=[cm])):
            out.append(redact(cm))
    return out


def _dig(obj: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _event_time(ev: dict[str, Any]) -> str:
    meta = ev.get("metadata")
    created = meta.get("creationTimestamp") if isinstance(meta, dict) else None
    return str(ev.get("lastTimestamp") or ev.get("eventTime") or created or "")


# --- redaction ---------------------------------------------------------------------------------------------


def redact(obj: Any) -> Any:
    """Strip secrets in place from one object of any shape, and from everything nested in it.

    One iterative walk over every object and list (a pod, a pod template in a Deployment, CronJob or
    RayCluster, a template in any other custom resource), whatever the types it meets:

    - ``metadata``: ``managedFields`` and the last-applied annotation dropped, annotations whose key
      names a secret replaced;
    - ``env``: each entry's ``value`` replaced (names and ``valueFrom`` kept); an ``env`` that is not a
      list of objects is replaced whole;
    - params maps (a key ending in ``params`` or ``parameters``, e.g. a RayCluster's ``rayStartParams``):
      every value whose key names a password, token or secret replaced;
    - URLs: the ``user:password@`` of any URL in a string value (a container argument, an annotation).

    ``status`` subtrees are not walked (no secret is written there, and they are the bulk of nodes).
    """
    stack: list[Any] = [obj]
    pop, push = stack.pop, stack.append
    while stack:
        value = pop()
        if type(value) is list:
            for i, v in enumerate(value):
                if type(v) is dict or type(v) is list:
                    push(v)
                elif type(v) is str and "@" in v and "://" in v:
                    value[i] = strip_userinfo(v)
            continue
        if type(value) is not dict:
            continue
        for key, child in value.items():
            kind = type(child)
            if kind is dict or kind is list:
                if key in _SPECIAL or (type(key) is str and key.endswith(_PARAMS_ENDINGS)):
                    _special(value, key, child)
                else:
                    push(child)
            elif key == "env" and child is not None and "image" in value:
                value[key] = REDACTED
            elif kind is str and type(key) is str and key.endswith(_PARAMS_ENDINGS):
                value[key] = _secret_text(child)
            elif kind is str and "@" in child and "://" in child:  # a URL's user:password
                value[key] = strip_userinfo(child)
    return obj


def _secret_text(text: str) -> str:
    """A string with the values of its ``password=...``-like pairs (and a URL's user:password) replaced."""
    if "@" in text and "://" in text:
        text = strip_userinfo(text)
    return _SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, text) if SECRET_KEY.search(text) else text


def _params(child: Any) -> None:
    """A params map, list or value of any shape: every value under a key that names a secret replaced, and
    every string's ``password=...``-like pairs."""
    stack = [child]
    while stack:
        value = stack.pop()
        items = list(value.items()) if type(value) is dict else list(enumerate(value)) if type(value) is list else []
        for name, v in items:
            if type(name) is str and SECRET_KEY.search(name) and type(v) is not dict and type(v) is not list:
                value[name] = REDACTED
            elif type(v) is str:
                value[name] = _secret_text(v)
            elif type(v) is dict or type(v) is list:
                stack.append(v)


def _special(holder: dict[str, Any], key: str, child: Any) -> None:
    """A key whose value holds secrets, or none worth walking."""
    if key == "status":
        return
    if key == "metadata":
        _metadata(child)
        push = [child]
    elif key == "env":
        holder[key] = _env(child)
        return
    else:  # a params map or list (a CSI driver's volumeAttributes, a StorageClass's parameters, opaque config)
        _params(child)
        push = [child]
    redact(push)


def _metadata(meta: Any) -> None:
    if not isinstance(meta, dict):
        return
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
        for key in list(annotations):
            if SECRET_KEY.search(str(key)):
                annotations[key] = REDACTED
    elif annotations is not None:
        meta["annotations"] = REDACTED


def _env(env: Any) -> Any:
    if not isinstance(env, list):
        return REDACTED
    for i, entry in enumerate(env):
        if isinstance(entry, dict):
            if "value" in entry and not (entry.get("name") in KEEP_ENV and type(entry["value"]) is str):
                entry["value"] = REDACTED
        else:
            env[i] = REDACTED
    return env

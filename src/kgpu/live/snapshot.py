"""``kgpu snapshot``: a live cluster's scheduling-relevant objects as one JSON document.

The document (``kind: ClusterSnapshot``, see docs/live.md) holds Nodes, Pods, DaemonSets, PriorityClasses,
recent FailedScheduling / FailedCreate Events, and, where their CRDs are installed, Karpenter NodePools,
NodeClaims and EC2NodeClasses and KubeRay RayClusters, each as ``kubectl get -o json`` prints it.
``kgpu simulate --cluster`` and ``kgpu doctor --snapshot`` read it.

Nothing secret leaves the cluster: container ``env`` values are replaced (names kept), values in params
maps whose key names a password, token or secret are replaced, and ``managedFields``, the
``last-applied-configuration`` annotation and annotations whose key names a secret are dropped or
replaced, in every object and everything nested in it (:func:`redact`, total over any JSON shape). The
server's URL is saved without userinfo.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from kgpu import __version__
from kgpu.errors import InputError
from kgpu.live.client import (
    DAEMONSET,
    EC2NODECLASS,
    EVENT,
    NODE,
    NODECLAIM,
    NODEPOOL,
    POD,
    PRIORITY_CLASS,
    RAYCLUSTER,
    ApiClient,
    NotServed,
    Resource,
)
from kgpu.live.kubeconfig import ClusterError, strip_userinfo

API_VERSION = "kgpu.dev/v1alpha1"
KIND = "ClusterSnapshot"
REDACTED = "<redacted>"
EVENT_REASONS = ("FailedScheduling", "FailedCreate")
MAX_EVENTS = 5000
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_KEY = re.compile(r"secret|token|passw|credential|api[-_.]?key|private[-_.]?key|auth|cert[-_.]?data", re.I)
_PARAMS_ENDINGS = ("params", "Params", "parameters", "Parameters")
_SPECIAL = frozenset({"metadata", "env", "status"})

# (resource, namespaced by the user's -n?, optional: its CRD may be missing)
SOURCES: tuple[tuple[Resource, bool], ...] = (
    (NODE, False),
    (POD, False),
    (DAEMONSET, False),
    (PRIORITY_CLASS, False),
    (NODEPOOL, True),
    (NODECLAIM, True),
    (EC2NODECLASS, True),
    (RAYCLUSTER, True),
)

Progress = Callable[[str, int], None]


def take(client: ApiClient, namespace: str | None = None, *, page_size: int = 500,
         progress: Progress | None = None, now: datetime | None = None) -> dict[str, Any]:
    """List everything the snapshot holds. ``namespace`` None means every namespace."""
    items: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    absent: list[str] = []

    def step(label: str) -> Callable[[int], None] | None:
        return None if progress is None else (lambda n: progress(label, n))

    for resource, optional in SOURCES:
        try:
            got = client.list(resource, namespace if resource.namespaced else None, page_size=page_size,
                              progress=step(resource.plural))
        except NotServed:
            if not optional:
                raise
            absent.append(f"{resource.api_version} {resource.kind}")
            continue
        for obj in got:
            redact(obj)
        items.extend(got)
        counts[resource.kind] = len(got)
    events: list[dict[str, Any]] = []
    for reason in EVENT_REASONS:
        events.extend(client.list(EVENT, namespace, page_size=page_size, field_selector=f"reason={reason}",
                                  progress=step(f"events ({reason})")))
    events.sort(key=_event_time, reverse=True)
    events = events[:MAX_EVENTS]
    for ev in events:
        redact(ev)
    items.extend(events)
    counts["Event"] = len(events)
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
        },
        "items": items,
    }


def encode(doc: dict[str, Any]) -> bytes:
    """The snapshot as JSON, within the limits ``doctor --snapshot`` and ``simulate --cluster`` read it with
    (size, depth, integer digits): a snapshot kgpu writes, kgpu reads."""
    from kgpu.model.safeyaml import MAX_BYTES, check_depth

    # Depth and integers: every answer was read within the readers' limits (kgpu.live.client), and each
    # object sits as deep in the snapshot (document, items, object) as in its list (list, items, object);
    # redaction only replaces values. The envelope is checked here.
    try:
        check_depth({k: v for k, v in doc.items() if k != "items"}, "the snapshot")
    except InputError as exc:
        raise ClusterError(f"{exc.message}; the file readers would refuse it", where="the snapshot") from None
    data = msgspec.json.encode(doc)
    if len(data) + 1 > MAX_BYTES:
        raise ClusterError(f"it would be {len(data) >> 20} MiB, more than the readers take "
                           f"({MAX_BYTES >> 20} MiB size limit)", where="the snapshot",
                           hint="take it per namespace with -n")
    return data


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
            elif kind is str and "@" in child and "://" in child:  # a URL's user:password
                value[key] = strip_userinfo(child)
    return obj


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
    else:  # a params map
        if type(child) is dict:
            for name, v in child.items():
                if SECRET_KEY.search(str(name)) and type(v) is not dict and type(v) is not list:
                    child[name] = REDACTED
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
            if "value" in entry:
                entry["value"] = REDACTED
        else:
            env[i] = REDACTED
    return env

"""``kgpu snapshot``: a live cluster's scheduling-relevant objects as one JSON document.

The document (``kind: ClusterSnapshot``, see docs/live.md) holds Nodes, Pods, DaemonSets, PriorityClasses,
recent FailedScheduling / FailedCreate Events, and, where their CRDs are installed, Karpenter NodePools,
NodeClaims and EC2NodeClasses and KubeRay RayClusters, each as ``kubectl get -o json`` prints it.
``kgpu simulate --cluster`` and ``kgpu doctor --snapshot`` read it.

Nothing secret leaves the cluster: container ``env`` values are replaced (names kept), and
``managedFields``, the ``last-applied-configuration`` annotation and annotations whose key names a secret
are dropped or replaced, in every object and every pod template inside it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kgpu import __version__
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

API_VERSION = "kgpu.dev/v1alpha1"
KIND = "ClusterSnapshot"
REDACTED = "<redacted>"
EVENT_REASONS = ("FailedScheduling", "FailedCreate")
MAX_EVENTS = 5000
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_KEY = re.compile(r"secret|token|passw|credential|api[-_.]?key|private[-_.]?key|auth|cert[-_.]?data", re.I)

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


def _event_time(ev: dict[str, Any]) -> str:
    return str(ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {}).get("creationTimestamp") or "")


# --- redaction ---------------------------------------------------------------------------------------------


def redact(obj: dict[str, Any]) -> dict[str, Any]:
    """Strip secrets in place from one object and every pod template it holds."""
    _metadata(obj.get("metadata"))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    kind = obj.get("kind")
    if kind == "Pod":
        _pod_spec(spec)
    elif kind == "RayCluster":
        _template(spec.get("headGroupSpec"))
        for group in spec.get("workerGroupSpecs") or []:
            _template(group)
    else:
        _template(spec)
        job = spec.get("jobTemplate")  # CronJob
        if isinstance(job, dict):
            _metadata(job.get("metadata"))
            if isinstance(job.get("spec"), dict):
                _template(job["spec"])
    return obj


def _template(holder: Any) -> None:
    if not isinstance(holder, dict):
        return
    template = holder.get("template")
    if isinstance(template, dict):
        _metadata(template.get("metadata"))
        if isinstance(template.get("spec"), dict):
            _pod_spec(template["spec"])


def _metadata(meta: Any) -> None:
    if not isinstance(meta, dict):
        return
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
        for key in list(annotations):
            if SECRET_KEY.search(key):
                annotations[key] = REDACTED


def _pod_spec(spec: dict[str, Any]) -> None:
    for section in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(section) or []:
            if not isinstance(c, dict):
                continue
            for env in c.get("env") or []:
                if isinstance(env, dict) and "value" in env:
                    env["value"] = REDACTED

"""Apply order: what others refer to goes first, what runs pods goes last.

Namespaces, then CRDs, then identities and policy (ServiceAccount, RBAC), then configuration
(ConfigMap, Secret, Service), then capacity (EC2NodeClass before the NodePool naming it), then
monitoring objects, and finally everything that creates pods, so no pod starts before its
ServiceAccount, ConfigMap, or the node pool that is to carry it. Unknown kinds sit between capacity and
workloads. The sort is stable: documents of one kind keep the renderer's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

KIND_ORDER: tuple[str, ...] = (
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "ResourceQuota",
    "LimitRange",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "EC2NodeClass",
    "NodePool",
    "ImageCache",
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
    "",  # unknown kinds
    "DaemonSet",
    "Deployment",
    "StatefulSet",
    "RayCluster",
    "Job",
    "CronJob",
    "Pod",
)
_RANK = {kind: n for n, kind in enumerate(KIND_ORDER)}


def rank(doc: dict[str, Any]) -> int:
    return _RANK.get(str(doc.get("kind", "")), _RANK[""])


def apply_order(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(docs, key=rank)

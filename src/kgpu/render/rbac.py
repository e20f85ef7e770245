"""RBAC for the live commands: read-only for ``kgpu snapshot`` / ``kgpu doctor``, and a role for ``kgpu run``.

``kgpu-doctor`` (bound to its ServiceAccount): get/list/watch on exactly what a snapshot reads: core
nodes, pods and events; apps daemonsets (is the device plugin running where it should); scheduling
priorityclasses (queue order); Karpenter nodepools and nodeclaims (karpenter.sh) and ec2nodeclasses
(karpenter.k8s.aws) and nodeoverlays (shared GPUs' capacity); KubeRay rayclusters; DRA deviceclasses,
resourceclaims, resourceclaimtemplates and resourceslices (resource.k8s.io); TKE imagecaches
(eks.cloud.tencent.com); persistentvolumeclaims, persistentvolumes and storageclasses (volume placement);
namespaces and Kueue's resourceflavors, clusterqueues, cohorts, localqueues, workloadpriorityclasses and
workloads (kueue.x-k8s.io: ``kgpu queue``).
ConfigMaps: ``get`` only, no ``list``: a snapshot reads the device plugin's config
ConfigMaps by the names its DaemonSets mount, never lists ConfigMaps. No secrets, no writes.

``kgpu-run`` (not bound: bind it to whoever runs smoke tests): create, get and delete pods and read their
logs, the only writes kgpu makes.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import Profile
from kgpu.render import MANAGED_BY

NAME = "kgpu-doctor"
VERBS = ["get", "list", "watch"]
RULES: list[tuple[str, list[str]]] = [
    ("", ["events", "namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods"]),
    ("apps", ["daemonsets"]),
    ("scheduling.k8s.io", ["priorityclasses"]),
    ("karpenter.sh", ["nodeclaims", "nodeoverlays", "nodepools"]),
    ("karpenter.k8s.aws", ["ec2nodeclasses"]),
    ("ray.io", ["rayclusters"]),
    ("resource.k8s.io", ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"]),
    ("eks.cloud.tencent.com", ["imagecaches"]),
    ("storage.k8s.io", ["storageclasses"]),
    ("kueue.x-k8s.io", ["clusterqueues", "cohorts", "localqueues", "resourceflavors", "workloadpriorityclasses",
                        "workloads"]),
]
GET_ONLY: list[tuple[str, list[str]]] = [("", ["configmaps"])]  # read by name: the device plugin's configs
RUN_NAME = "kgpu-run"
RUN_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
]


def render(profile: Profile) -> list[dict[str, Any]]:
    ns = profile.monitoring.namespace
    labels = dict(MANAGED_BY)
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": NAME, "namespace": ns, "labels": labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels},
            "rules": [
                {"apiGroups": [group], "resources": list(res), "verbs": list(VERBS)} for group, res in RULES
            ]
            + [{"apiGroups": [group], "resources": list(res), "verbs": ["get"]} for group, res in GET_ONLY],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": RUN_NAME, "labels": labels},
            "rules": RUN_RULES,
        },
    ]

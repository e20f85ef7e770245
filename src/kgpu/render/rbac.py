"""Read-only RBAC for ``kgpu doctor``: exactly the objects it reads, get/list/watch, nothing else.

Core nodes, pods and events; apps daemonsets (is the device plugin running where it should); Karpenter
nodepools and nodeclaims (karpenter.sh) and ec2nodeclasses (karpenter.k8s.aws). No secrets, no writes.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import Profile
from kgpu.render import MANAGED_BY

NAME = "kgpu-doctor"
VERBS = ["get", "list", "watch"]
RULES: list[tuple[str, list[str]]] = [
    ("", ["events", "nodes", "pods"]),
    ("apps", ["daemonsets"]),
    ("karpenter.sh", ["nodeclaims", "nodepools"]),
    ("karpenter.k8s.aws", ["ec2nodeclasses"]),
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
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        },
    ]

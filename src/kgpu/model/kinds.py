"""The kinds each built-in API group serves, to tell a misspelt kind from a custom resource.

An object of a kind its API group does not serve (``apiVersion: v1, kind: pod``; ``apps/v1 Deplyment``;
``v1 Deployment``) is what the API server rejects ("no matches for kind ... in version ..."), so reading it
is an input error, with the kind the user most likely meant. A kind in any other group (a CRD: ray.io,
monitoring.coreos.com, karpenter.sh ...) may well exist in the cluster: kgpu skips it with a warning.

The table is a fact of the Kubernetes API: every kind carrying ``x-kubernetes-group-version-kind`` in the
OpenAPI definitions of Kubernetes v1.30 to v1.37 (the union, so a file written for any of them reads),
grouped by API group; ``*List`` kinds are accepted for every kind listed.
"""

from __future__ import annotations

import difflib

from kgpu.errors import quote

BUILTIN_KINDS: dict[str, frozenset[str]] = {
    group: frozenset(kinds.split())
    for group, kinds in {
        "": "Binding ComponentStatus ConfigMap Endpoints Event LimitRange List Namespace Node PersistentVolume "
        "PersistentVolumeClaim Pod PodTemplate ReplicationController ResourceQuota Secret Service ServiceAccount",
        "admissionregistration.k8s.io": "MutatingAdmissionPolicy MutatingAdmissionPolicyBinding "
        "MutatingWebhookConfiguration ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding "
        "ValidatingWebhookConfiguration",
        "apiextensions.k8s.io": "CustomResourceDefinition",
        "apiregistration.k8s.io": "APIService",
        "apps": "ControllerRevision DaemonSet Deployment ReplicaSet StatefulSet",
        "authentication.k8s.io": "SelfSubjectReview TokenRequest TokenReview",
        "authorization.k8s.io": "LocalSubjectAccessReview SelfSubjectAccessReview SelfSubjectRulesReview "
        "SubjectAccessReview",
        "autoscaling": "HorizontalPodAutoscaler Scale",
        "batch": "CronJob Job",
        "certificates.k8s.io": "CertificateSigningRequest ClusterTrustBundle PodCertificateRequest",
        "coordination.k8s.io": "Lease LeaseCandidate",
        "discovery.k8s.io": "EndpointSlice",
        "events.k8s.io": "Event",
        "flowcontrol.apiserver.k8s.io": "FlowSchema PriorityLevelConfiguration",
        "internal.apiserver.k8s.io": "StorageVersion",
        "lifecycle.k8s.io": "Eviction EvictionRequest",
        "networking.k8s.io": "IPAddress Ingress IngressClass NetworkPolicy ServiceCIDR",
        "node.k8s.io": "RuntimeClass",
        "policy": "Eviction PodDisruptionBudget",
        "rbac.authorization.k8s.io": "ClusterRole ClusterRoleBinding Role RoleBinding",
        "resource.k8s.io": "DeviceClass DeviceTaintRule PodSchedulingContext ResourceClaim ResourceClaimParameters "
        "ResourceClaimTemplate ResourceClass ResourceClassParameters ResourcePoolStatusRequest ResourceSlice",
        "scheduling.k8s.io": "CompositePodGroup PodGroup PriorityClass Workload",
        "storage.k8s.io": "CSIDriver CSINode CSIStorageCapacity StorageClass VolumeAttachment VolumeAttributesClass",
        "storagemigration.k8s.io": "StorageVersionMigration",
    }.items()
}

_GROUP_OF: dict[str, list[str]] = {}
for _group, _kinds in sorted(BUILTIN_KINDS.items()):
    for _kind in _kinds:
        _GROUP_OF.setdefault(_kind, []).append(_group)


_NO_V1 = {"internal.apiserver.k8s.io", "lifecycle.k8s.io", "storagemigration.k8s.io"}


def _spelling(group: str) -> str:
    if not group:
        return "apiVersion v1"
    return f"API group {group}" if group in _NO_V1 else f"apiVersion {group}/v1"


def api_group(api_version: str) -> str:
    """'apps/v1' -> 'apps'; 'v1' (the core group) -> ''."""
    return api_version.rpartition("/")[0]


def served(group: str, kind: str) -> bool:
    kinds = BUILTIN_KINDS[group]
    return kind in kinds or (kind.endswith("List") and kind[: -len("List")] in kinds)


def unknown_builtin_kind(api_version: object, kind: str) -> tuple[str, str] | None:
    """(message, hint) when ``api_version`` names a built-in group that does not serve ``kind``, as the API
    server words it; None for a served kind, a custom resource's group, or no apiVersion at all."""
    if not isinstance(api_version, str) or not api_version:
        return None
    group = api_group(api_version)
    if group not in BUILTIN_KINDS or served(group, kind):
        return None
    message = f"no matches for kind {quote(kind)} in version {quote(api_version)}"
    folded = {k.lower(): k for k in BUILTIN_KINDS[group]}
    if kind.lower() in folded:  # `kind: pod`: kinds are case-sensitive
        return message, f"did you mean {folded[kind.lower()]}?"
    elsewhere = _GROUP_OF.get(kind)
    if elsewhere:  # `apiVersion: v1, kind: Deployment`
        groups = " or ".join(_spelling(g) for g in elsewhere)
        return message, f"{kind} is served by {groups}"
    close = difflib.get_close_matches(kind, sorted(BUILTIN_KINDS[group]), n=1, cutoff=0.6)
    if close:
        return message, f"did you mean {close[0]}?"
    close = difflib.get_close_matches(kind, sorted(_GROUP_OF), n=1, cutoff=0.6)
    if close:  # `apiVersion: v1, kind: Deplyment`: both wrong
        return message, f"did you mean {close[0]} ({_spelling(_GROUP_OF[close[0]][0])})?"
    return message, ""

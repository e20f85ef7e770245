"""The profile's persistent volumes (``storage.volumes``) as the CSI drivers take them: a StorageClass and a
PersistentVolumeClaim per volume, the drivers' EKS add-ons with their IAM (in eksctl's ClusterConfig), or
the commands that install them where eksctl does not own the cluster's config (Karpenter profiles).

Parameters are the drivers' own (kubernetes-sigs/aws-ebs-csi-driver docs/parameters.md,
kubernetes-sigs/aws-efs-csi-driver dynamic provisioning, kubernetes-sigs/aws-fsx-csi-driver dynamic
provisioning examples):

- EBS (``ebs.csi.aws.com``): ``type``, ``iops``, ``throughput``, ``encrypted``, ``kmsKeyId``,
  ``csi.storage.k8s.io/fstype``; ``volumeBindingMode: WaitForFirstConsumer`` so the volume is created in
  the zone of the node its first pod lands on (an EBS volume attaches only in its own zone), and
  ``allowedTopologies`` on ``topology.kubernetes.io/zone`` when the profile pins the volume's zone.
- EFS (``efs.csi.aws.com``): ``provisioningMode: efs-ap`` (an access point per claim on the file system
  ``fileSystemId``), ``directoryPerms``, ``basePath``; every zone reaches it, so binding is Immediate.
- FSx for Lustre (``fsx.csi.aws.com``): ``subnetId``, ``securityGroupIds`` (comma-separated),
  ``deploymentType``, ``perUnitStorageThroughput``, ``s3ImportPath``/``s3ExportPath``,
  ``dataCompressionType``; ``mountOptions: [flock]``. Creating the file system takes minutes: the claim
  is Immediate so it starts before the training pods come.

Claims keep ``reclaimPolicy: Retain`` by default: datasets and checkpoints outlive the claim and every
spot node (seed 001).
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import PoolKind, Profile
from kgpu.model.storage import claim, storage_class

# EKS add-on name, its controller's service account, and the managed policy its role needs
ADDONS = {
    "ebs": ("aws-ebs-csi-driver", "ebs-csi-controller-sa", "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"),
    "efs": ("aws-efs-csi-driver", "efs-csi-controller-sa", "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"),
    "fsx-lustre": ("aws-fsx-csi-driver", "fsx-csi-controller-sa", "arn:aws:iam::aws:policy/AmazonFSxFullAccess"),
}
# eksctl's wellKnownPolicies for the add-ons that have one (eksctl.io/v1alpha5 WellKnownPolicies)
WELL_KNOWN = {"ebs": "ebsCSIController", "efs": "efsCSIController"}


def applies(profile: Profile) -> bool:
    return bool(profile.storage.volumes)


def render(profile: Profile) -> list[dict[str, Any]]:
    """StorageClasses, the claims' namespaces (other than default) and the claims."""
    volumes = profile.storage.volumes
    namespaces = sorted({v.namespace for v in volumes} - {"default", "kube-system"})
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    docs += [storage_class(v) for v in volumes]
    docs += [claim(v) for v in volumes]
    return docs


def eksctl_addons(profile: Profile) -> list[dict[str, Any]]:
    """The CSI drivers' EKS add-ons for eksctl's ClusterConfig ``addons`` (IRSA: the config sets withOIDC)."""
    out = []
    for kind in ("ebs", "efs", "fsx-lustre"):
        if kind not in profile.storage.types:
            continue
        name, _, policy = ADDONS[kind]
        addon: dict[str, Any] = {"name": name}
        if kind in WELL_KNOWN:
            addon["wellKnownPolicies"] = {WELL_KNOWN[kind]: True}
        else:
            addon["attachPolicyARNs"] = [policy]
        out.append(addon)
    return out


def notes(profile: Profile) -> list[str]:
    """How the CSI drivers get installed, for the storage file's header."""
    types = [t for t in ("ebs", "efs", "fsx-lustre") if t in profile.storage.types]
    if any(p.kind == PoolKind.NODE_GROUP for p in profile.pools):
        names = ", ".join(ADDONS[t][0] for t in types)
        lines = [f"The CSI drivers ({names}) are EKS add-ons in eksctl.yaml (addons, with their IAM roles)."]
    else:
        c = profile.cluster.name
        lines = ["Install the CSI drivers first (EKS add-ons, IAM roles for their controllers):"]
        for t in types:
            addon, sa, policy = ADDONS[t]
            role = f"AmazonEKS_{addon.removeprefix('aws-').removesuffix('-csi-driver').upper()}_CSI_DriverRole"
            lines += [
                f"  eksctl create iamserviceaccount --cluster {c} --namespace kube-system --name {sa} "
                f"--role-name {role} --role-only --attach-policy-arn {policy} --approve",
                f"  eksctl create addon --cluster {c} --name {addon} "
                f"--service-account-role-arn arn:aws:iam::<account-id>:role/{role}",
            ]
    if "fsx-lustre" in types:
        lines.append("An FSx for Lustre claim creates a file system: it takes 5 to 10 minutes to bind.")
    if "efs" in types:
        lines.append("EFS: the file system needs a mount target in every node subnet (NFS, TCP 2049, from the nodes).")
    lines.append("Pods mount a volume by its claim: volumes: [{name: data, persistentVolumeClaim: {claimName: <name>}}].")
    return lines

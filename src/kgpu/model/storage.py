"""The profile's ``storage`` section: persistent volumes for datasets, checkpoints and logs (seed 001: "use
dedicated volumes for datasets, training progress (checkpoints) and logs; they must be persistent and
survive instance termination").

Each volume is one PersistentVolumeClaim of its own StorageClass, provisioned by the AWS CSI driver of its
type (``kgpu.render.storage`` renders them; ``kgpu plan`` places the pods that mount them with the volume's
zone, ``kgpu.sim.scheduler.plugins.volumebinding``):

- ``ebs``: an EBS volume (gp3 by default) through the EBS CSI driver. Zonal: it binds WaitForFirstConsumer,
  in the zone of the node its first pod lands on, or in ``zone`` when given (``allowedTopologies``).
  ReadWriteOnce (one node at a time).
- ``efs``: an access point on an existing EFS file system (``fileSystemId``) through the EFS CSI driver's
  dynamic provisioning (``provisioningMode: efs-ap``). Every zone reaches it; ReadWriteMany.
- ``fsx-lustre``: a new FSx for Lustre file system through the FSx CSI driver, in ``subnetId`` with
  ``securityGroupIds``. Nodes of every zone of the VPC mount it; ReadWriteMany.

The limits checked are AWS's published ones (EBS volume types: docs.aws.amazon.com/ebs/latest/userguide/
ebs-volume-types.html; FSx for Lustre storage capacity: docs.aws.amazon.com/fsx/latest/LustreGuide/
managing-storage-capacity.html), so a profile that AWS would refuse fails here, naming the field.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from kgpu.errors import InputError
from kgpu.model.names import (
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    DNS1123_SUBDOMAIN_PATTERN,
)
from kgpu.model.quantity import parse_quantity

GIB = 1024**3
# gp3: 1 GiB - 64 TiB, 3,000 - 80,000 IOPS (at most 500 per GiB), 125 - 2,000 MiB/s (at most 0.25 MiB/s per IOPS)
EBS_SIZE_GIB = {"gp3": (1, 65536), "gp2": (1, 16384), "io1": (4, 16384), "io2": (4, 65536), "st1": (125, 16384),
                "sc1": (125, 16384)}
GP3_IOPS = (3000, 80000)
GP3_THROUGHPUT = (125, 2000)
FSX_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
DEFAULT_MODES = {"ebs": "ReadWriteOnce", "efs": "ReadWriteMany", "fsx-lustre": "ReadWriteMany"}
PROVISIONERS = {"ebs": "ebs.csi.aws.com", "efs": "efs.csi.aws.com", "fsx-lustre": "fsx.csi.aws.com"}
ZONE = "topology.kubernetes.io/zone"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True, allow_inf_nan=False
    )


class StorageVolume(_Model):
    """One persistent volume: a PersistentVolumeClaim ``name`` in ``namespace`` of its own StorageClass."""

    name: str = Field(pattern=DNS1123_LABEL_PATTERN, max_length=DNS1123_LABEL_MAX_LENGTH,
                      description="the PersistentVolumeClaim's name (pods mount it by claimName)")
    type: Literal["ebs", "efs", "fsx-lustre"]
    namespace: str = Field(default="default", pattern=DNS1123_LABEL_PATTERN, max_length=DNS1123_LABEL_MAX_LENGTH)
    size: str = Field(default="100Gi", description="the claim's request; EFS is elastic (the value is nominal); "
                      "FSx for Lustre: 1200Gi or a multiple of 2400Gi")
    access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany"] | None = Field(
        default=None, description="default: ReadWriteOnce for ebs, ReadWriteMany for efs and fsx-lustre")
    storage_class_name: str | None = Field(
        default=None, pattern=DNS1123_SUBDOMAIN_PATTERN, max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        description="default: kgpu-<name>")
    reclaim_policy: Literal["Retain", "Delete"] = Field(
        default="Retain", description="Retain keeps datasets and checkpoints when the claim is deleted")
    # ebs
    zone: str | None = Field(default=None, description="ebs: the zone the volume is created in (allowedTopologies); "
                             "default: the zone of the node its first pod lands on")
    volume_type: Literal["gp3", "gp2", "io1", "io2", "st1", "sc1"] = Field(default="gp3", description="ebs")
    iops: int | None = Field(default=None, ge=100, description="ebs gp3/io1/io2")
    throughput: int | None = Field(default=None, ge=1, description="ebs gp3, MiB/s")
    encrypted: bool = Field(default=True, description="ebs")
    kms_key_id: str | None = Field(default=None, min_length=1, description="ebs: a KMS key ARN")
    fs_type: Literal["ext4", "xfs"] = Field(default="ext4", description="ebs: the file system the driver makes")
    # efs
    file_system_id: str | None = Field(default=None, pattern=r"^fs-[0-9a-f]{8,17}$", description="efs: required")
    directory_perms: str = Field(default="700", pattern=r"^[0-7]{3,4}$", description="efs: access point directories")
    base_path: str | None = Field(default=None, pattern=r"^/", description="efs: where access points are created")
    # fsx-lustre
    subnet_id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-f]{8,17}$", description="fsx-lustre: required")
    security_group_ids: list[str] = Field(default_factory=list, description="fsx-lustre: required (sg-...)")
    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = Field(
        default="SCRATCH_2", description="fsx-lustre")
    per_unit_storage_throughput: int | None = Field(
        default=None, description="fsx-lustre PERSISTENT_1 (50, 100, 200) and PERSISTENT_2 (125, 250, 500, 1000), MB/s/TiB")
    s3_import_path: str | None = Field(default=None, pattern=r"^s3://", description="fsx-lustre: a data repository")
    s3_export_path: str | None = Field(default=None, pattern=r"^s3://", description="fsx-lustre")
    data_compression_type: Literal["NONE", "LZ4"] | None = Field(default=None, description="fsx-lustre")

    @property
    def class_name(self) -> str:
        return self.storage_class_name or f"kgpu-{self.name}"

    @property
    def mode(self) -> str:
        return self.access_mode or DEFAULT_MODES[self.type]

    @property
    def gib(self) -> int:
        return int(parse_quantity(self.size) / GIB)

    @model_validator(mode="after")
    def _fields(self) -> StorageVolume:
        try:
            size = parse_quantity(self.size, where="size")
        except InputError as exc:
            raise ValueError(f"size: {exc.message}") from None
        if size <= 0:
            raise ValueError(f"size: {self.size!r} must be positive")
        own = {"ebs": {"zone", "iops", "throughput", "kms_key_id", "volume_type", "encrypted", "fs_type"},
               "efs": {"file_system_id", "directory_perms", "base_path"},
               "fsx-lustre": {"subnet_id", "security_group_ids", "deployment_type", "per_unit_storage_throughput",
                              "s3_import_path", "s3_export_path", "data_compression_type"}}
        for kind, names in own.items():
            if kind == self.type:
                continue
            wrong = sorted(to_camel(n) for n in names if n in self.model_fields_set)
            if wrong:
                raise ValueError(f"{wrong[0]}: only for type {kind}, this volume is {self.type}")
        if self.type == "ebs":
            self._ebs(size)
        elif self.type == "efs":
            if self.file_system_id is None:
                raise ValueError("fileSystemId: required for an efs volume (the EFS CSI driver makes access points "
                                 "on an existing file system: aws efs create-file-system)")
        else:
            self._fsx(size)
        if self.type == "ebs" and self.mode in ("ReadWriteMany", "ReadOnlyMany"):
            raise ValueError(f"accessMode: an EBS volume attaches to one node ({self.mode} needs efs or fsx-lustre)")
        return self

    def _ebs(self, size: Fraction) -> None:
        gib = size / GIB
        low, high = EBS_SIZE_GIB[self.volume_type]
        if not low <= gib <= high:
            raise ValueError(f"size: {self.volume_type} volumes are {low}Gi to {high}Gi, got {self.size}")
        if self.volume_type in ("gp2", "st1", "sc1") and self.iops is not None:
            raise ValueError(f"iops: {self.volume_type} volumes have no provisioned IOPS")
        if self.volume_type != "gp3" and self.throughput is not None:
            raise ValueError("throughput: only gp3 volumes take a provisioned throughput")
        if self.volume_type == "gp3":
            iops = self.iops if self.iops is not None else GP3_IOPS[0]
            if not GP3_IOPS[0] <= iops <= GP3_IOPS[1]:
                raise ValueError(f"iops: gp3 takes {GP3_IOPS[0]} to {GP3_IOPS[1]}, got {iops}")
            if self.iops is not None and iops > 500 * gib and iops > GP3_IOPS[0]:
                raise ValueError(f"iops: gp3 allows at most 500 IOPS per GiB ({int(500 * gib)} for {self.size})")
            if self.throughput is not None:
                if not GP3_THROUGHPUT[0] <= self.throughput <= GP3_THROUGHPUT[1]:
                    raise ValueError(f"throughput: gp3 takes {GP3_THROUGHPUT[0]} to {GP3_THROUGHPUT[1]} MiB/s, "
                                     f"got {self.throughput}")
                if self.throughput > iops / 4:
                    raise ValueError(f"throughput: gp3 allows at most 0.25 MiB/s per provisioned IOPS "
                                     f"({iops // 4} MiB/s at {iops} IOPS)")
        if self.volume_type in ("io1", "io2") and self.iops is None:
            raise ValueError(f"iops: required for {self.volume_type} volumes")

    def _fsx(self, size: Fraction) -> None:
        if self.subnet_id is None:
            raise ValueError("subnetId: required for an fsx-lustre volume (the file system's subnet)")
        if not self.security_group_ids:
            raise ValueError("securityGroupIds: required for an fsx-lustre volume (allow TCP 988 and 1018-1023 "
                             "from the nodes)")
        for i, sg in enumerate(self.security_group_ids):
            if not sg.startswith("sg-") or len(sg) < 11:
                raise ValueError(f"securityGroupIds[{i}]: {sg!r} is not a security group id (sg-...)")
        gib = size / GIB
        if self.deployment_type == "SCRATCH_1":
            ok = gib in (1200, 2400) or (gib > 0 and gib % 3600 == 0)
            rule = "1200Gi, 2400Gi or a multiple of 3600Gi"
        else:
            ok = gib == 1200 or (gib > 0 and gib % 2400 == 0)
            rule = "1200Gi or a multiple of 2400Gi"
        if not ok:
            raise ValueError(f"size: FSx for Lustre {self.deployment_type} takes {rule}, got {self.size}")
        allowed = FSX_THROUGHPUT.get(self.deployment_type)
        if allowed is None and self.per_unit_storage_throughput is not None:
            raise ValueError(f"perUnitStorageThroughput: only for PERSISTENT_1 and PERSISTENT_2, not {self.deployment_type}")
        if allowed is not None:
            if self.per_unit_storage_throughput is None:
                raise ValueError(f"perUnitStorageThroughput: required for {self.deployment_type} "
                                 f"(one of {', '.join(map(str, allowed))})")
            if self.per_unit_storage_throughput not in allowed:
                raise ValueError(f"perUnitStorageThroughput: {self.deployment_type} takes one of "
                                 f"{', '.join(map(str, allowed))}, got {self.per_unit_storage_throughput}")


class Storage(_Model):
    """Persistent volumes for datasets, checkpoints and logs (kgpu render --target storage)."""

    volumes: list[StorageVolume] = Field(default_factory=list, max_length=100)

    def check(self, provider: str, zones: list[str]) -> str | None:
        """What is wrong with the section in this profile (its provider and zones), or None."""
        names = [(v.namespace, v.name) for v in self.volumes]
        twice = sorted({f"{ns}/{n}" for ns, n in names if names.count((ns, n)) > 1})
        if twice:
            return f"storage.volumes: claim names must be unique per namespace, repeated: {', '.join(twice)}"
        classes = [v.class_name for v in self.volumes]
        shared = sorted({c for c in classes if classes.count(c) > 1})
        if shared:
            return f"storage.volumes: storageClassName must be unique (one class per volume), repeated: {', '.join(shared)}"
        for i, v in enumerate(self.volumes):
            if provider != "eks":
                return f"storage.volumes[{i}].type: {v.type} volumes need provider: eks, not {provider}"
            if v.zone is not None and zones and v.zone not in zones:
                return f"storage.volumes[{i}].zone: {v.zone!r} is not in cluster.zones {zones}"
        return None

    @property
    def types(self) -> set[str]:
        return {v.type for v in self.volumes}


# --- the objects (kgpu.render.storage writes them; kgpu plan simulates with them) -------------------------


def storage_class(v: StorageVolume) -> dict[str, Any]:
    params: dict[str, str] = {}
    doc: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": v.class_name, "labels": {"app.kubernetes.io/managed-by": "kgpu"}},
        "provisioner": PROVISIONERS[v.type],
        "parameters": params,
        "reclaimPolicy": v.reclaim_policy,
    }
    if v.type == "ebs":
        params["type"] = v.volume_type
        if v.iops is not None:
            params["iops"] = str(v.iops)
        if v.throughput is not None:
            params["throughput"] = str(v.throughput)
        params["encrypted"] = "true" if v.encrypted else "false"
        if v.kms_key_id:
            params["kmsKeyId"] = v.kms_key_id
        params["csi.storage.k8s.io/fstype"] = v.fs_type
        doc["volumeBindingMode"] = "WaitForFirstConsumer"
        doc["allowVolumeExpansion"] = True
        if v.zone:
            doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": [v.zone]}]}]
    elif v.type == "efs":
        params["provisioningMode"] = "efs-ap"
        params["fileSystemId"] = v.file_system_id or ""
        params["directoryPerms"] = v.directory_perms
        if v.base_path:
            params["basePath"] = v.base_path
        doc["volumeBindingMode"] = "Immediate"
    else:
        params["subnetId"] = v.subnet_id or ""
        params["securityGroupIds"] = ",".join(v.security_group_ids)
        params["deploymentType"] = v.deployment_type
        if v.per_unit_storage_throughput is not None:
            params["perUnitStorageThroughput"] = str(v.per_unit_storage_throughput)
        if v.s3_import_path:
            params["s3ImportPath"] = v.s3_import_path
        if v.s3_export_path:
            params["s3ExportPath"] = v.s3_export_path
        if v.data_compression_type:
            params["dataCompressionType"] = v.data_compression_type
        doc["mountOptions"] = ["flock"]
        doc["volumeBindingMode"] = "Immediate"
    return doc


def claim(v: StorageVolume) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": v.name, "namespace": v.namespace, "labels": {"app.kubernetes.io/managed-by": "kgpu"}},
        "spec": {
            "accessModes": [v.mode],
            "storageClassName": v.class_name,
            "resources": {"requests": {"storage": v.size}},
        },
    }

"""A profile pool's nodes (``kgpu.model.profile_pool``): how they come to exist, which instance types they may
be, what they carry, and the nodes a static pool lists.

- ``PoolKind``: a Karpenter NodePool, an eksctl node group scaled by cluster-autoscaler, TKE super nodes,
  or nodes that exist and do not scale.
- Instance-type requirements, in kgpu's shorthand (``Requirements``: gpuNames, families, ranges) or as
  Karpenter's own NodePool requirements (``NodeRequirement``, checked as Karpenter's CRD checks them,
  ``kgpu.model.nodepool``); ``PoolRequirements`` tells them apart by shape.
- What a node carries and how it goes: taints, capacity type, Karpenter's consolidation, and the
  EC2NodeClass's AMI, subnet and security-group selector terms.
- ``StaticNode``: a node that exists (on-prem host, fixed node), with the address Prometheus scrapes its
  exporter at.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from kgpu.errors import quote
from kgpu.model.names import is_label_value
from kgpu.model.nodepool import requirement_error
from kgpu.model.profile_base import _check_label_key, _check_quantities, _Model

# The port kgpu's exporter listens on (nvidia_gpu_exporter's), on the host's network on-prem.
EXPORTER_PORT = 9835


class PoolKind(StrEnum):
    """How a pool's nodes come to exist."""

    KARPENTER = "karpenter"  # a Karpenter NodePool + EC2NodeClass: instance type chosen per pending pods
    NODE_GROUP = "nodegroup"  # an eksctl node group (ASG) scaled by cluster-autoscaler
    TKE_SUPERNODE = "tke-supernode"  # TKE super nodes: every pod buys its own GPU spec
    STATIC = "static"  # nodes that exist and do not scale (on-prem, or a fixed group)


class Effect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class CapacityType(StrEnum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"


class AmiFamily(StrEnum):
    AL2023 = "AL2023"  # EKS-optimized accelerated AL2023 (NVIDIA driver + toolkit; device plugin needed)
    AL2 = "AL2"
    BOTTLEROCKET = "Bottlerocket"
    BOTTLEROCKET_NVIDIA = "BottlerocketNvidia"  # device plugin built in: never deploy the DaemonSet there
    UBUNTU = "Ubuntu"
    CUSTOM = "Custom"


class Taint(_Model):
    key: str
    value: str = ""
    effect: Effect

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        return _check_label_key(v)

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        if not is_label_value(v):
            raise ValueError(f"{quote(v)} is not a valid taint value")
        return v

    def as_k8s(self) -> dict[str, str]:
        out = {"key": self.key, "effect": str(self.effect)}
        if self.value:
            out["value"] = self.value
        return out

    def toleration(self) -> dict[str, str]:
        """The narrowest toleration for this taint (Equal on key, value and effect)."""
        if self.value:
            return {"key": self.key, "operator": "Equal", "value": self.value, "effect": str(self.effect)}
        return {"key": self.key, "operator": "Exists", "effect": str(self.effect)}


class Range(_Model):
    min: int | None = Field(strict=True, default=None, ge=0)
    max: int | None = Field(strict=True, default=None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self


class Requirements(_Model):
    """Instance-type selection in Karpenter's terms (karpenter.k8s.aws/instance-* labels)."""

    gpu_names: list[str] = Field(
        default_factory=list, description="e.g. t4, a10g, l4, v100 (instance-gpu-name)"
    )
    gpu_count: Range | None = None
    gpu_memory_gib: Range | None = Field(default=None, alias="gpuMemoryGiB", description="per GPU, GiB")
    families: list[str] = Field(default_factory=list, description="e.g. g4dn, g5, p3 (instance-family)")
    categories: list[str] = Field(default_factory=list, description="e.g. g, p, m, c (instance-category)")
    generation: Range | None = None
    cpu: Range | None = Field(default=None, description="vCPUs (instance-cpu)")
    arch: list[Literal["amd64", "arm64"]] = Field(default_factory=lambda: ["amd64"])  # type: ignore[arg-type]


class NodeRequirement(_Model):
    """One Karpenter NodePool requirement (``spec.template.spec.requirements[]``): any label key, operators
    In/NotIn/Exists/DoesNotExist/Gt/Lt (and the CRD's Gte/Lte), and ``minValues``: a node claim must keep at
    least that many distinct values of the key among its instance types."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    values: list[str] = Field(default_factory=list)
    min_values: int | None = Field(strict=True, default=None, ge=1, le=50)

    @model_validator(mode="after")
    def _karpenter(self) -> NodeRequirement:
        error = requirement_error(self.key, self.operator, self.values, self.min_values)
        if error:
            raise ValueError(error)
        return self

    def as_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        if self.min_values is not None:
            out["minValues"] = self.min_values
        return out


def _requirements_form(value: Any) -> str:
    return "native" if isinstance(value, list) else "shorthand"


# A pool's requirements: the shorthand mapping (gpuNames, families, ...) or Karpenter's own list.
PoolRequirements = Annotated[
    Annotated[Requirements, Tag("shorthand")] | Annotated[list[NodeRequirement], Tag("native")],
    Discriminator(_requirements_form),
]
_UNION_TAGS = ("shorthand", "native")


class Consolidation(_Model):
    policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = "WhenEmptyOrUnderutilized"
    after: str = Field(default="30s", pattern=r"^(Never|([0-9]+(s|m|h))+)$")


class StaticNode(_Model):
    """A node that exists (on-prem host, or a fixed node)."""

    name: str
    instance_type: str | None = None
    cpu: str | None = Field(default=None, description="allocatable CPU, e.g. '32' or '31500m'")
    memory: str | None = Field(default=None, description="allocatable memory, e.g. '128Gi'")
    gpus: int = Field(strict=True, default=0, ge=0)
    gpu_name: str | None = None
    address: str | None = Field(
        default=None,
        description=f"host or host:{EXPORTER_PORT}: where Prometheus scrapes the node's exporter",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    hourly_price: float | None = Field(default=None, ge=0)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is None:
            return v
        host, sep, port = v.rpartition(":")
        if not sep or "]" in port:  # no port (an IPv6 literal in brackets has colons inside)
            return f"{v}:{EXPORTER_PORT}"
        if port != str(EXPORTER_PORT) or not host:
            raise ValueError(
                f"{quote(v)}: the exporter DaemonSet listens on the host's port {EXPORTER_PORT} (hostNetwork); "
                f"use {host or 'HOST'}:{EXPORTER_PORT}"
            )
        return v

    @model_validator(mode="after")
    def _quantities(self) -> StaticNode:
        _check_quantities({k: v for k, v in (("cpu", self.cpu), ("memory", self.memory)) if v is not None})
        return self


class AmiSelectorTerm(_Model):
    """One EC2NodeClass ``amiSelectorTerms`` entry: an alias (``al2023@latest``), an AMI id, a name pattern
    (with an optional owner: ``amazon``, ``self`` or an account id) or tags."""

    alias: str | None = Field(default=None, pattern=r"^[a-z0-9]+@(latest|v[0-9]+)$")
    id: str | None = Field(default=None, pattern=r"^ami-[0-9a-z]+$")
    name: str | None = Field(default=None, min_length=1)
    owner: str | None = Field(default=None, min_length=1)
    tags: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one(self) -> AmiSelectorTerm:
        given = [k for k in ("alias", "id", "name") if getattr(self, k)] + (["tags"] if self.tags else [])
        if not given:
            raise ValueError("an AMI selector term needs alias, id, name or tags")
        if len(given) > 1 and ("alias" in given or "id" in given):
            raise ValueError(f"{' and '.join(given)}: alias and id each stand alone in a term")
        if self.owner and not (self.name or self.tags):
            raise ValueError("owner goes with name or tags")
        return self


class SelectorTerm(_Model):
    """A subnet or security-group selector term: an id, a name (security groups) or tags."""

    id: str | None = Field(default=None, pattern=r"^(subnet|sg)-[0-9a-z]+$")
    name: str | None = Field(default=None, min_length=1)
    tags: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one(self) -> SelectorTerm:
        if not (self.id or self.name or self.tags):
            raise ValueError("a selector term needs id, name or tags")
        if self.id and (self.name or self.tags):
            raise ValueError("id stands alone in a selector term")
        return self

"""The cluster profile (``kgpu.yaml``): one declarative description of a GPU cluster's capacity.

Everything else is derived from it: the manifests ``kgpu render`` writes, the capacity ``kgpu simulate``
provisions from, the cost ``kgpu plan`` reports. It is a pydantic model so that ``kgpu profile schema`` can
print its JSON Schema and every error names its field path
(``pools[1].taints[0].effect: 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute``).

Field names are camelCase in YAML (like the Kubernetes objects users already write) and snake_case in
Python. Unknown fields are errors: a typo must not silently drop a taint.
"""

from __future__ import annotations

import re
from enum import StrEnum
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kgpu.errors import InputError, quote
from kgpu.model.names import (
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    DNS1123_SUBDOMAIN_PATTERN,
    is_label_value,
    is_qualified_name,
)
from kgpu.model.nodepool import limit_key_error, normalize, requirement_error
from kgpu.model.safeyaml import load_document
from kgpu.model.sharing import LABEL_MIG_CONFIG, LABEL_PLUGIN_CONFIG
from kgpu.model.storage import Storage

API_VERSION = "kgpu.dev/v1alpha1"
# The taint TKE puts on every super node (https://cloud.tencent.com/document/product/457/54754).
TKE_SUPERNODE_TAINT = "eks.tke.cloud.tencent.com/eklet"
# The port kgpu's exporter listens on (nvidia_gpu_exporter's), on the host's network on-prem.
EXPORTER_PORT = 9835
TEMPLATES = ("eks-karpenter", "eks-eksctl", "onprem", "tke-supernode", "kuberay")
DEFAULT_TEMPLATE = "eks-karpenter"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=True,
        allow_inf_nan=False,  # `hourlyPrice: .inf` is a typo, not a price
    )


# Node counts a profile may ask for: Kubernetes' scalability limit is 5,000 nodes per cluster, and plan
# creates a group's desired nodes one by one.
MAX_NODES = 5000


def _check_quantities(values: dict[str, Any]) -> None:
    """Resource quantities (a pool's limits, a static node's cpu/memory) as apimachinery parses them."""
    from kgpu.model.quantity import resource_amount

    for name, raw in values.items():
        try:
            resource_amount(raw, milli=name == "cpu")
        except InputError as exc:
            raise ValueError(f"{name}: {exc.message}") from None


class Provider(StrEnum):
    EKS = "eks"
    TKE = "tke"
    GENERIC = "generic"


class Autoscaler(StrEnum):
    KARPENTER = "karpenter"
    CLUSTER_AUTOSCALER = "cluster-autoscaler"
    NONE = "none"


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


_POLICY_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::([0-9]{12}|aws):policy/[\w+=,.@/-]+$")


def _check_label_key(key: str) -> str:
    if not is_qualified_name(key):
        raise ValueError(f"{quote(key)} is not a valid label key")
    return key


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
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

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
    min_values: int | None = Field(default=None, ge=1, le=50)

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
    gpus: int = Field(default=0, ge=0)
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


# --- shared GPUs (NVIDIA device plugin sharing, MIG manager) ---------------------------------------------

_SHARED_RESOURCE = re.compile(r"^(nvidia\.com/)?(gpu|mig-[0-9]+g\.[0-9]+gb(\.[a-z]+)*)$")


class ReplicatedResource(_Model):
    """One ``sharing.timeSlicing.resources[]`` / ``sharing.mps.resources[]`` entry of the plugin's config."""

    name: str = Field(description="nvidia.com/gpu, or nvidia.com/mig-<profile> under the mixed MIG strategy")
    replicas: int = Field(description="replicas of each device; the plugin refuses fewer than 2")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SHARED_RESOURCE.match(v):
            raise ValueError(f"{quote(v)} is not a GPU resource (nvidia.com/gpu or nvidia.com/mig-<profile>)")
        return v if v.startswith("nvidia.com/") else f"nvidia.com/{v}"

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, v: int) -> int:
        if v < 2:
            raise ValueError(f"{v}: the device plugin needs replicas >= 2 (\"number of replicas must be >= 2\")")
        return v


class ReplicatedResources(_Model):
    """``sharing.timeSlicing`` or ``sharing.mps`` as the device plugin's config v1 spells it."""

    rename_by_default: bool = Field(
        default=False, description="advertise <name>.shared (nvidia.com/gpu.shared) instead of <name>"
    )
    fail_requests_greater_than_one: bool | None = Field(
        default=None,
        description="a container asking more than 1 shared device fails admission; default false for "
        "time-slicing, true for MPS",
    )
    resources: list[ReplicatedResource] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ReplicatedResources:
        names = [r.name for r in self.resources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"resources: {', '.join(dupes)} listed twice")
        return self


class MigSharing(_Model):
    """MIG on the pool's GPUs: the device plugin's strategy and the MIG manager's mig-parted config."""

    strategy: Literal["single", "mixed"] = Field(
        description="single: every MIG device is nvidia.com/gpu; mixed: nvidia.com/mig-<profile> per profile"
    )
    config: str = Field(
        description="the GPU Operator's mig-parted config (nvidia.com/mig.config label): all-disabled, "
        "all-1g.10gb, all-balanced, ...",
    )

    @field_validator("config")
    @classmethod
    def _config(cls, v: str) -> str:
        from kgpu.catalog.mig import config_names

        known = config_names()
        if v not in known:
            import difflib

            close = difflib.get_close_matches(v, known, n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ValueError(f"{quote(v)} is not a config of the GPU Operator's default-mig-parted-config{hint}")
        return v


class Sharing(_Model):
    """How the pool's GPUs are shared: the device plugin's ``sharing`` (time-slicing or MPS: one per node)
    and MIG. The pool's nodes carry ``nvidia.com/device-plugin.config: <configName>`` (and
    ``nvidia.com/mig.config`` with MIG), so every autoscaler and the plugin see the same config."""

    time_slicing: ReplicatedResources | None = None
    mps: ReplicatedResources | None = None
    mig: MigSharing | None = None
    config_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$",
        max_length=63,
        description="the key of the plugin ConfigMap (and value of nvidia.com/device-plugin.config); "
        "default: the pool's name",
    )
    node_overlay: bool = Field(
        default=True,
        description="Karpenter pools: render a NodeOverlay so Karpenter sizes nodes by the shared capacity "
        "(false: Karpenter believes the physical GPUs, as it does without one)",
    )

    @model_validator(mode="after")
    def _one(self) -> Sharing:
        if self.time_slicing and self.mps:
            raise ValueError("timeSlicing and mps: the device plugin runs one sharing strategy per node")
        if self.mps and self.mig:
            raise ValueError("mps with mig: the device plugin does not share MIG devices with MPS")
        if not (self.time_slicing or self.mps or self.mig):
            raise ValueError("sharing needs timeSlicing, mps or mig")
        replicated = self.time_slicing or self.mps
        mixed = self.mig is not None and self.mig.strategy == "mixed"
        for i, r in enumerate(replicated.resources if replicated else []):
            if r.name != "nvidia.com/gpu" and not mixed:
                field = "timeSlicing" if self.time_slicing else "mps"
                raise ValueError(
                    f"{field}.resources[{i}].name: {r.name} exists only under the mixed MIG strategy "
                    "(mig.strategy: mixed); share nvidia.com/gpu"
                )
        if self.mig and self.mig.strategy == "single":
            from kgpu.catalog.mig import mig_gpus, mig_layout

            for gpu in mig_gpus():
                try:
                    layout = mig_layout(self.mig.config, gpu)
                except ValueError:
                    continue
                if len(layout) > 1:
                    raise ValueError(
                        f"mig: config {self.mig.config} makes {', '.join(layout)} on one GPU; the single "
                        "strategy needs one profile per node (GFD labels it MIG-INVALID); use strategy: mixed"
                    )
        return self

    @property
    def strategy(self) -> str:
        """The plugin's sharing strategy: time-slicing, mps or none (MIG alone)."""
        return "time-slicing" if self.time_slicing else "mps" if self.mps else "none"


class TkePricing(_Model):
    """A TKE super-node pool's pay-as-you-go prices as the user read them (console price calculator): kgpu
    packages none (docs/tke.md). USD per hour: kgpu's totals are in USD, convert a CNY price first."""

    currency: Literal["USD"] = "USD"
    date: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", description="when the prices were read, YYYY-MM-DD")
    source: str = Field(min_length=1, description="where they were read: a URL, or e.g. 'console, ap-guangzhou'")
    cpu_core_hour: float = Field(ge=0, description="per CPU core of the spec")
    memory_gib_hour: float = Field(ge=0, alias="memoryGiBHour", description="per GiB of the spec's memory")
    gpu_hour: dict[str, float] = Field(
        min_length=1, description="per GPU card by annotation value (T4, V100, ...); a vGPU type (1/4*T4) per slice"
    )

    @field_validator("gpu_hour")
    @classmethod
    def _gpu_types(cls, v: dict[str, float]) -> dict[str, float]:
        from kgpu.catalog.tke import TkeMatchError, tke_gpu_type

        for name, price in v.items():
            try:
                canonical = tke_gpu_type(name).name
            except TkeMatchError as exc:
                raise ValueError(exc.message) from None
            if canonical != name:
                raise ValueError(f"{quote(name)}: give the annotation value {quote(canonical)}")
            if not price >= 0:
                raise ValueError(f"{quote(name)}: {price} is not a price (>= 0)")
        return v


class VerifyPods(_Model):
    """The names of a GPU pool's two verification pods (``kgpu render --with-workloads``): seed 000 runs them
    as ``gpu-standard-test`` (asks for nvidia.com/gpu) and ``gpu-test-pod`` (selects the GPU nodes)."""

    by_request: str | None = Field(
        default=None,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        description="the pod that asks for one nvidia.com/gpu; default gpu-verify-<pool>",
    )
    by_selector: str | None = Field(
        default=None,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        description="the pod that only selects the pool's nodes (nvidia-smi); default gpu-verify-selector-<pool>",
    )

    @model_validator(mode="after")
    def _distinct(self) -> VerifyPods:
        if self.by_request is not None and self.by_request == self.by_selector:
            raise ValueError(f"byRequest and bySelector are both {quote(self.by_request)}: two pods need two names")
        return self


class Pool(_Model):
    name: str = Field(pattern=DNS1123_LABEL_PATTERN, max_length=DNS1123_LABEL_MAX_LENGTH)
    kind: PoolKind
    instance_types: list[str] = Field(
        default_factory=list, description="explicit list (node groups), or a filter"
    )
    requirements: PoolRequirements | None = Field(
        default=None,
        description="shorthand (gpuNames, families, categories, generation, cpu, arch, ...) or Karpenter's "
        "native NodePool requirements: a list of {key, operator, values, minValues}",
    )
    capacity_types: list[CapacityType] = Field(default_factory=lambda: [CapacityType.ON_DEMAND])
    min_size: int = Field(default=0, ge=0, le=MAX_NODES)
    max_size: int | None = Field(default=None, ge=0)
    desired_size: int | None = Field(default=None, ge=0, le=MAX_NODES)
    limits: dict[str, str | int] = Field(
        default_factory=dict, description="Karpenter limits: cpu, memory, nvidia.com/gpu"
    )
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    ami_family: AmiFamily = AmiFamily.AL2023
    zones: list[str] = Field(default_factory=list, description="subset of the cluster's zones; empty = all")
    per_zone: bool = Field(default=False, description="node groups: one group per zone (seed 001's advice)")
    consolidation: Consolidation = Field(default_factory=Consolidation)
    weight: int | None = Field(default=None, ge=1, le=100)
    volume_size_gib: int = Field(default=100, ge=1, alias="volumeSizeGiB")
    managed: bool = Field(default=False, description="eksctl managedNodeGroups instead of nodeGroups")
    propagate_asg_tags: bool = Field(
        default=False, description="eksctl adds node-template tags from labels/taints"
    )
    asg_tags: dict[str, str] = Field(
        default_factory=dict, description="explicit ASG tags (k8s.io/cluster-autoscaler/...)"
    )
    gpu_types: list[str] = Field(
        default_factory=list, description="TKE super node: GPU types in priority order"
    )
    image_cache: str = Field(
        default="auto",
        pattern=r"^(auto|none|imc-[a-z0-9]+)$",
        description="TKE super node: image cache for the rendered GPU workloads: auto (match a cache by image, "
        "with an ImageCache resource and the guide's disk size), an imc-... id from the console, or none",
    )
    cache_images: list[Annotated[str, Field(pattern=r"^[^\s]{1,512}$")]] = Field(
        default_factory=list,
        max_length=64,
        description="TKE super node: your own images for the ImageCache (imageCache: auto) instead of the example "
        "workloads' images, e.g. pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime",
    )
    cache_size_gib: int | None = Field(
        default=None,
        ge=20,
        le=2048,
        alias="cacheSizeGiB",
        description="TKE super node: the ImageCache's imageCacheSize and the pods' disk size; default: seed 003's "
        "table for the images' sizes (5 GiB for an image kgpu does not know)",
    )
    prices: TkePricing | None = Field(
        default=None,
        description="TKE super node: pay-as-you-go prices (date, source, cpuCoreHour, memoryGiBHour, gpuHour "
        "per type), so plan prices each pod's spec; kgpu packages none",
    )
    auto_schedule: bool = Field(
        default=True,
        description="TKE super node: pods that fit no other node go here whatever the super node's taint "
        "(TKE's eks-config AUTO_SCALE_EKS, on by default); false: only pods that tolerate it",
    )
    nodes: list[StaticNode] = Field(default_factory=list, description="static pools: the nodes")
    device_plugin: Literal["auto", "daemonset", "none"] = Field(
        default="auto",
        description="auto: DaemonSet unless the AMI has the plugin built in (BottlerocketNvidia)",
    )
    gpu_allocation: Literal["device-plugin", "dra"] = Field(
        default="device-plugin",
        description="how pods get the pool's GPUs: device-plugin (nvidia.com/gpu limits) or dra (NVIDIA's DRA "
        "driver publishes ResourceSlices and pods claim gpu.nvidia.com devices; the device plugin stays off "
        "the pool); docs/render.md",
    )
    sharing: Sharing | None = Field(
        default=None,
        description="shared GPUs: timeSlicing or mps (renameByDefault, failRequestsGreaterThanOne, "
        "resources[{name, replicas}]) and mig (strategy, config); docs/profile.md",
    )
    ami_selector_terms: list[AmiSelectorTerm] = Field(
        default_factory=list,
        description="Karpenter: EC2NodeClass amiSelectorTerms (alias, id, name + owner, tags); default: the "
        "amiFamily's alias (al2023@latest, bottlerocket@latest)",
    )
    role: str | None = Field(
        default=None,
        min_length=1,
        description="Karpenter: node IAM role; default KarpenterNodeRole-<cluster>",
    )
    instance_profile: str | None = Field(
        default=None, min_length=1, description="Karpenter: an existing instance profile instead of role"
    )
    subnet_selector_terms: list[SelectorTerm] = Field(
        default_factory=list, description="Karpenter: default tags karpenter.sh/discovery: <cluster>"
    )
    security_group_selector_terms: list[SelectorTerm] = Field(
        default_factory=list, description="Karpenter: default tags karpenter.sh/discovery: <cluster>"
    )
    user_data: str | None = Field(
        default=None, description="Karpenter: EC2NodeClass userData (required for amiFamily Custom/Ubuntu)"
    )
    verify_pods: VerifyPods | None = Field(
        default=None,
        description="GPU pools: names of the two verification pods (byRequest, bySelector); seed 000: "
        "gpu-standard-test, gpu-test-pod",
    )
    node_class_name: str | None = Field(
        default=None,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        description="Karpenter: the EC2NodeClass's name (seed 000: nodeclass-gpu); default: the pool's name",
    )
    iam_policy_arns: list[str] = Field(
        default_factory=list,
        alias="iamPolicyARNs",
        description="extra managed policies for the pool's node role (e.g. AmazonSSMManagedInstanceCore); "
        "eksctl: added to the default node policies; Karpenter: attach commands for the role",
    )
    iam_addon_policies: list[
        Literal[
            "autoScaler",
            "ebs",
            "efs",
            "fsx",
            "albIngress",
            "awsLoadBalancerController",
            "cloudWatch",
            "externalDNS",
            "certManager",
            "imageBuilder",
            "xRay",
            "appMesh",
            "appMeshPreview",
        ]
    ] = Field(
        default_factory=lambda: ["cloudWatch", "ebs"],  # type: ignore[arg-type]
        description="eksctl withAddonPolicies (autoScaler is added under cluster-autoscaler)",
    )

    @field_validator("iam_policy_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not _POLICY_ARN.match(arn):
                raise ValueError(
                    f"{arn!r} is not an IAM policy ARN (arn:aws:iam::<account>|aws:policy/<name>)"
                )
        return v

    @field_validator("limits")
    @classmethod
    def _limits(cls, v: dict[str, str | int]) -> dict[str, str | int]:
        for key in v:
            error = limit_key_error(key)
            if error:
                raise ValueError(error)
        _check_quantities(v)
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            _check_label_key(key)
            if not is_label_value(value):
                raise ValueError(f"{quote(value)} is not a valid label value (label {quote(key)})")
        return v

    @model_validator(mode="before")
    @classmethod
    def _sharing_labels(cls, data: Any) -> Any:
        """A shared pool's nodes carry the labels that select their plugin and mig-parted configs."""
        if not isinstance(data, dict) or not isinstance(data.get("sharing"), dict):
            return data
        sharing = data["sharing"]
        labels = data.get("labels")
        if labels is not None and not isinstance(labels, dict):
            return data
        labels = dict(labels or {})
        name = sharing.get("configName", sharing.get("config_name")) or data.get("name")
        if isinstance(name, str) and name:
            labels.setdefault(LABEL_PLUGIN_CONFIG, name)
        mig = sharing.get("mig")
        if isinstance(mig, dict) and isinstance(mig.get("config"), str):
            labels.setdefault(LABEL_MIG_CONFIG, mig["config"])
        return {**data, "labels": labels}

    def verify_pod_names(self) -> tuple[str, str]:
        """(by request, by selector): the names of the pool's verification pods."""
        v = self.verify_pods
        return (
            (v.by_request if v and v.by_request else None) or f"gpu-verify-{self.name}",
            (v.by_selector if v and v.by_selector else None) or f"gpu-verify-selector-{self.name}",
        )

    @property
    def node_class(self) -> str:
        """The name of the pool's EC2NodeClass (Karpenter pools)."""
        return self.node_class_name or self.name

    @model_validator(mode="after")
    def _sizes(self) -> Pool:
        if self.max_size is not None and self.min_size > self.max_size:
            raise ValueError(f"minSize {self.min_size} is greater than maxSize {self.max_size}")
        if self.kind == PoolKind.NODE_GROUP and not self.instance_types:
            raise ValueError("a nodegroup pool needs instanceTypes")
        if self.kind == PoolKind.STATIC and not self.nodes:
            raise ValueError("a static pool needs nodes")
        if self.kind == PoolKind.TKE_SUPERNODE and not self.gpu_types:
            raise ValueError("a tke-supernode pool needs gpuTypes (priority order, e.g. [T4, V100])")
        if self.node_class_name is not None and self.kind != PoolKind.KARPENTER:
            raise ValueError("nodeClassName: only a karpenter pool has an EC2NodeClass")
        if self.prices is not None and self.kind != PoolKind.TKE_SUPERNODE:
            raise ValueError("prices: only a tke-supernode pool takes prices (other pools are priced by the catalog)")
        if self.role and self.instance_profile:
            raise ValueError("role and instanceProfile: give one (Karpenter takes exactly one)")
        if (
            self.kind == PoolKind.KARPENTER
            and self.ami_family in (AmiFamily.CUSTOM, AmiFamily.UBUNTU)
            and not any(t.alias for t in self.ami_selector_terms)
            and not self.user_data
        ):
            raise ValueError(
                f"amiFamily {self.ami_family} needs userData: Karpenter adds no bootstrap to a Custom AMI, so its "
                "nodes would never join the cluster (or select an alias in amiSelectorTerms)"
            )
        if self.sharing is not None:
            if self.kind == PoolKind.TKE_SUPERNODE:
                raise ValueError("sharing: TKE super nodes sell fractional GPUs as specs, not by the device plugin")
            key = self.labels.get(LABEL_PLUGIN_CONFIG)
            if self.sharing.config_name and key != self.sharing.config_name:
                raise ValueError(
                    f"sharing.configName {self.sharing.config_name} but labels.{LABEL_PLUGIN_CONFIG} is {key}"
                )
            mig = self.sharing.mig
            if mig and self.labels.get(LABEL_MIG_CONFIG) != mig.config:
                raise ValueError(
                    f"sharing.mig.config {mig.config} but labels.{LABEL_MIG_CONFIG} is "
                    f"{self.labels.get(LABEL_MIG_CONFIG)}"
                )
        if self.gpu_allocation == "dra":
            _check_dra_pool(self)
        aliases = [t for t in self.ami_selector_terms if t.alias]
        if aliases and len(self.ami_selector_terms) > 1:
            raise ValueError("amiSelectorTerms: an alias term must be the only term")
        return self

    @property
    def shorthand(self) -> Requirements | None:
        """The requirements in kgpu's shorthand form, None when absent or native."""
        return self.requirements if isinstance(self.requirements, Requirements) else None

    @property
    def native(self) -> list[NodeRequirement]:
        """Karpenter's own requirements, when the pool gives them as a list."""
        return self.requirements if isinstance(self.requirements, list) else []

    def karpenter_requirements(self) -> list[dict[str, Any]]:
        """The pool's NodePool requirements, as ``kgpu render`` writes them and ``kgpu simulate`` reads them.

        Shorthand: ranges become ``Gt``/``Lt`` on Karpenter's integer labels (``instance-generation`` min 5 ->
        ``Gt 4``; ``instance-gpu-memory`` is MiB, the profile speaks GiB per GPU; a minimum of 0 emits nothing,
        as the CRD wants non-negative integers); the shorthand's ``arch`` defaults to amd64, and os is linux.
        A pool without requirements has no arch requirement, as a NodePool without one has none in
        Karpenter (arm64 types such as g5g are candidates). Native requirements are written as given, after
        the shorthand fields that also apply (capacity types, instance types, zones). A capacity-type
        requirement in the native list replaces the default ``capacityTypes``.
        """
        req = self.shorthand
        native = [r.as_k8s() for r in self.native]
        native_keys = {_normalized(r.key) for r in self.native}
        out: list[dict[str, Any]] = []
        if req is not None:
            out += _in("kubernetes.io/arch", list(req.arch))
        if self.requirements is None or req is not None:
            out += _in("kubernetes.io/os", ["linux"])
        if "karpenter.sh/capacity-type" not in native_keys or "capacity_types" in self.model_fields_set:
            out += _in("karpenter.sh/capacity-type", [str(c) for c in self.capacity_types])
        out += _in("node.kubernetes.io/instance-type", self.instance_types)
        if req:
            out += _in("karpenter.k8s.aws/instance-category", req.categories)
            out += _in("karpenter.k8s.aws/instance-family", req.families)
            out += _range("karpenter.k8s.aws/instance-generation", req.generation)
            out += _range("karpenter.k8s.aws/instance-cpu", req.cpu)
            out += _in("karpenter.k8s.aws/instance-gpu-name", [n.lower() for n in req.gpu_names])
            out += _range("karpenter.k8s.aws/instance-gpu-count", req.gpu_count)
            out += _range("karpenter.k8s.aws/instance-gpu-memory", req.gpu_memory_gib, scale=1024)
        out += _in("topology.kubernetes.io/zone", self.zones)
        return out + native

    @property
    def is_gpu(self) -> bool:
        """Whether the pool is meant for GPU nodes (by its instance types, requirements, nodes or kind)."""
        if self.kind == PoolKind.TKE_SUPERNODE:
            return True
        if self.kind == PoolKind.STATIC:
            return any(n.gpus for n in self.nodes)
        if any(_native_gpu(r) for r in self.native):
            return True
        req = self.shorthand
        if req and (req.gpu_names or (req.gpu_count and (req.gpu_count.min or 0) > 0)):
            return True
        if req and req.categories and set(req.categories) <= {"g", "p", "gr", "inf", "trn", "dl"}:
            return True
        families = (req.families if req else []) + [t.split(".")[0] for t in self.instance_types]
        return any(f.startswith(_GPU_FAMILY_PREFIXES) for f in families)

    @property
    def plugin_config_key(self) -> str | None:
        """The device-plugin ConfigMap key the pool's nodes select (shared pools only)."""
        return self.labels.get(LABEL_PLUGIN_CONFIG) if self.sharing is not None else None

    @property
    def device_plugin_builtin(self) -> bool:
        return self.ami_family == AmiFamily.BOTTLEROCKET_NVIDIA


def _check_dra_pool(pool: Pool) -> None:
    """A pool whose GPUs NVIDIA's DRA driver publishes: nothing else may advertise them."""
    if pool.kind == PoolKind.TKE_SUPERNODE:
        raise ValueError("gpuAllocation: dra: TKE super nodes sell GPUs as specs; they run no DRA driver")
    if pool.device_plugin == "daemonset":
        raise ValueError(
            "gpuAllocation: dra with devicePlugin: daemonset: the device plugin and the DRA driver would both "
            "advertise the same GPUs; leave devicePlugin at auto"
        )
    if pool.device_plugin_builtin:
        raise ValueError(
            "gpuAllocation: dra on amiFamily BottlerocketNvidia: its AMI runs the device plugin built in, which "
            "would advertise the GPUs the DRA driver publishes; use AL2023"
        )
    if pool.sharing is not None:
        raise ValueError(
            "gpuAllocation: dra with sharing: it configures the device plugin; with DRA, pods share a GPU by sharing "
            f"a ResourceClaim, and MIG devices (DeviceClass mig.nvidia.com) come from the label {LABEL_MIG_CONFIG} the "
            "GPU Operator's MIG manager applies (set it in labels)"
        )


def _normalized(key: str) -> str:
    return normalize(key)


def _native_gpu(r: NodeRequirement) -> bool:
    """A native requirement that only GPU instance types meet."""
    key = _normalized(r.key)
    gpu_keys = ("karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer")
    if key in gpu_keys:
        return r.operator in ("In", "Exists")
    if key in ("karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory"):
        return r.operator in ("Gt", "Gte") or (r.operator == "In" and "0" not in r.values)
    if key == "karpenter.k8s.aws/instance-category" and r.operator == "In":
        return set(r.values) <= {"g", "p", "gr"}
    if key == "karpenter.k8s.aws/instance-family" and r.operator == "In":
        return all(v.startswith(_GPU_FAMILY_PREFIXES) for v in r.values)
    return False


_GPU_FAMILY_PREFIXES = ("g3", "g4", "g5", "g6", "gr6", "p2", "p3", "p4", "p5", "p6")


def _range(key: str, rng: Range | None, scale: int = 1) -> list[dict[str, Any]]:
    if rng is None:
        return []
    out: list[dict[str, Any]] = []
    if rng.min:
        out.append({"key": key, "operator": "Gt", "values": [str(rng.min * scale - 1)]})
    if rng.max is not None:
        out.append({"key": key, "operator": "Lt", "values": [str(rng.max * scale + 1)]})
    return out


def _in(key: str, values: list[str]) -> list[dict[str, Any]]:
    return [{"key": key, "operator": "In", "values": list(values)}] if values else []


class Cluster(_Model):
    name: str = Field(default="gpu-cluster", pattern=r"^[a-zA-Z][-a-zA-Z0-9]*$")
    region: str = "us-west-2"
    zones: list[str] = Field(default_factory=list)
    kubernetes_version: str = Field(default="1.33", pattern=r"^1\.[0-9]+$")


class DevicePlugin(_Model):
    version: str = Field(default="v0.20.0", pattern=r"^v0\.[0-9]+\.[0-9]+$")
    strategy: Literal["none", "time-slicing", "mig"] = "none"
    time_slicing_replicas: int = Field(default=4, ge=2)
    mig_strategy: Literal["single", "mixed"] = "single"
    install: Literal["manifest", "helm"] = Field(
        default="manifest",
        description="manifest: kgpu's DaemonSet (target device-plugin); helm: values for NVIDIA's "
        "nvidia-device-plugin chart instead (target device-plugin-chart), as seed 002 recommends",
    )


class DraDriver(_Model):
    """NVIDIA's DRA driver (NVIDIA/k8s-dra-driver-gpu, chart nvidia-dra-driver-gpu) for pools with
    ``gpuAllocation: dra``: kgpu renders the chart's values (target dra-driver-chart) and its DeviceClasses."""

    version: str = Field(
        default="25.8.1", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$", description="the chart's version (its appVersion)"
    )
    namespace: str = Field(
        default="nvidia-dra-driver-gpu",
        pattern=DNS1123_LABEL_PATTERN,
        max_length=DNS1123_LABEL_MAX_LENGTH,
        description="the Helm release's namespace (the chart refuses default)",
    )
    nvidia_driver_root: str = Field(
        default="/",
        pattern=r"^/[^\s]*$",
        description="where the host's NVIDIA driver lives: / when installed on the host (EKS GPU AMIs, on-prem "
        "bootstrap), /run/nvidia/driver under the GPU Operator's driver container",
    )
    compute_domains: bool = Field(
        default=False,
        description="also run the ComputeDomain side (IMEX channels for multi-node NVLink, GB200); GPUs alone "
        "need only the gpus kubelet plugin",
    )


class Monitoring(_Model):
    enabled: bool = True
    namespace: str = "kgpu-system"
    exporter_image: str = Field(
        default="ghcr.io/kgpu/kgpu:0.1.0",
        min_length=1,
        description="the image the exporter DaemonSet runs; `make image` builds it from the Dockerfile",
    )
    exporter_run_as_root: bool = Field(
        default=False,
        description="run the exporter as uid 0: needed for pod labels from the kubelet's root-only pod-resources socket",
    )
    job_name: str = Field(
        default="kgpu-exporter",
        pattern=r"^[a-zA-Z_][a-zA-Z0-9_.:-]*$",
        description="Prometheus job of the exporter's series; the alert rules select it (seed 002 uses gpu-exporter)",
    )
    prometheus_operator: bool = Field(default=True, description="also render ServiceMonitor/PrometheusRule")
    grafana_datasource_uid: str = Field(
        default="prometheus",
        pattern=r"^[a-zA-Z0-9_-]{1,40}$",
        description="uid of the Grafana Prometheus data source the dashboards use (kube-prometheus-stack's: prometheus)",
    )
    prometheus_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="render a Grafana data source (uid grafanaDatasourceUid) for the Prometheus at this URL",
    )


class KubeRay(_Model):
    """A RayCluster (ray.io/v1) on the profile's pools: CPU head, one worker group per GPU pool."""

    ray_version: str = Field(default="2.46.0", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    image: str = Field(default="rayproject/ray:2.46.0", description="head image; workers use <image>-gpu")
    head_pool: str | None = Field(
        default=None, description="pool of the head pod; default: first non-GPU pool"
    )
    gpus_per_worker: int = Field(default=1, ge=1)
    enable_in_tree_autoscaling: bool = False
    operator_version: str = Field(
        default="1.7.0",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="kuberay-operator Helm chart and image version (kgpu render --target kuberay-operator)",
    )


class SpotInterruptions(_Model):
    """How spot interruptions reach the cluster: Karpenter's interruption queue (SQS + EventBridge rules)
    for Karpenter pools, aws-node-termination-handler for eksctl node groups."""

    enabled: bool = True
    queue_name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,80}$",
        description="Karpenter's SQS interruption queue; default: the cluster name (Karpenter's getting-started stack)",
    )


class Metadata(_Model):
    name: str = Field(pattern=DNS1123_LABEL_PATTERN)
    description: str = ""


class CatalogOverrides(_Model):
    """Instance types outside kgpu's catalog (seed 001's quick start: t3.micro), or corrected rows: the
    columns of ``kgpu catalog --file`` (instance_type, region, vcpus, memory_gib, gpu_count, gpu_name,
    gpu_memory_gib, ondemand_usd_per_hour, spot_usd_per_hour_min/median, zones, max_pods)."""

    file: str | None = Field(
        default=None,
        min_length=1,
        description="a CSV or YAML file of rows, relative to the profile (kgpu render/plan/simulate --catalog FILE adds one)",
    )
    instance_types: list[dict[str, str | int | float]] = Field(
        default_factory=list, max_length=10000, description="rows given inline, merged before the file's"
    )


class Profile(_Model):
    api_version: Literal["kgpu.dev/v1alpha1"] = "kgpu.dev/v1alpha1"
    kind: Literal["ClusterProfile"] = "ClusterProfile"
    metadata: Metadata
    provider: Provider
    cluster: Cluster = Field(default_factory=Cluster)
    autoscaler: Autoscaler
    pools: list[Pool] = Field(min_length=1)
    device_plugin: DevicePlugin = Field(default_factory=DevicePlugin)
    monitoring: Monitoring = Field(default_factory=Monitoring)
    dra_driver: DraDriver = Field(
        default_factory=DraDriver,
        description="NVIDIA's DRA driver, for pools with gpuAllocation: dra (chart version, namespace, driver root)",
    )
    kuberay: KubeRay | None = Field(
        default=None, description="render a RayCluster (kgpu render --target kuberay)"
    )
    spot_interruptions: SpotInterruptions = Field(default_factory=SpotInterruptions)
    workloads: list[str] = Field(
        default_factory=list, description="workload manifest files, relative to the profile; used by plan"
    )
    catalog: CatalogOverrides = Field(
        default_factory=CatalogOverrides,
        description="instance types the built-in catalog lacks or gets wrong, for render, plan and simulate",
    )
    storage: Storage = Field(
        default_factory=Storage,
        description="persistent volumes for datasets, checkpoints and logs: EBS, EFS, FSx for Lustre (kgpu render --target storage)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        names = [p.name for p in self.pools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"pool names must be unique, repeated: {', '.join(dupes)}")
        pods = [n for p in self.pools for n in p.verify_pod_names()]
        twice = sorted({n for n in pods if pods.count(n) > 1})
        if twice:
            raise ValueError(f"verifyPods: pod names must be unique across pools, repeated: {', '.join(twice)}")
        classes = [p.node_class for p in self.pools if p.kind == PoolKind.KARPENTER]
        shared = sorted({c for c in classes if classes.count(c) > 1})
        if shared:
            raise ValueError(
                f"EC2NodeClass names must be unique (nodeClassName, else the pool's name), repeated: "
                f"{', '.join(shared)}: kgpu renders one EC2NodeClass per Karpenter pool"
            )
        for i, pool in enumerate(self.pools):
            unknown = [z for z in pool.zones if self.cluster.zones and z not in self.cluster.zones]
            if unknown:
                raise ValueError(f"pools[{i}].zones: {unknown} not in cluster.zones {self.cluster.zones}")
            if pool.kind == PoolKind.KARPENTER and self.autoscaler != Autoscaler.KARPENTER:
                raise ValueError(f"pools[{i}]: a karpenter pool needs autoscaler: karpenter")
            if pool.kind == PoolKind.TKE_SUPERNODE and self.provider != Provider.TKE:
                raise ValueError(f"pools[{i}]: a tke-supernode pool needs provider: tke")
        keys: dict[str, Pool] = {}
        for i, pool in enumerate(self.pools):
            key = pool.plugin_config_key
            if key is None:
                continue
            other = keys.setdefault(key, pool)
            if other is not pool and other.sharing != pool.sharing:
                raise ValueError(
                    f"pools[{i}].sharing: config {key} is also pool {other.name}'s, with other settings; "
                    "give one of them its own configName"
                )
            if key == "default":
                raise ValueError(f"pools[{i}].sharing.configName: 'default' is the plugin's own default config")
        gpu = self.gpu_pools
        if self.monitoring.enabled and gpu and all(p.kind == PoolKind.TKE_SUPERNODE for p in gpu):
            raise ValueError(
                "monitoring.enabled: TKE super nodes run no DaemonSets, so the GPU exporter has no node to run "
                "on; set monitoring.enabled: false"
            )
        dra = [i for i, p in enumerate(self.pools) if p.gpu_allocation == "dra"]
        if dra and tuple(int(x) for x in self.cluster.kubernetes_version.split(".")) < (1, 34):
            raise ValueError(
                f"pools[{dra[0]}].gpuAllocation: dra needs cluster.kubernetesVersion 1.34 or later (resource.k8s.io/v1, "
                f"DRA GA), not {self.cluster.kubernetes_version}"
            )
        if dra and self.provider == Provider.TKE:
            raise ValueError(f"pools[{dra[0]}].gpuAllocation: dra: TKE clusters are not set up for NVIDIA's DRA driver by kgpu")
        storage = self.storage.check(self.provider, self.cluster.zones)
        if storage:
            raise ValueError(storage)
        if self.kuberay and self.kuberay.head_pool and self.kuberay.head_pool not in names:
            raise ValueError(
                f"kuberay.headPool: {quote(self.kuberay.head_pool)} is not a pool ({', '.join(names)})"
            )
        return self

    @property
    def gpu_pools(self) -> list[Pool]:
        return [p for p in self.pools if p.is_gpu]

    @property
    def dra_pools(self) -> list[Pool]:
        """GPU pools whose GPUs NVIDIA's DRA driver publishes (``gpuAllocation: dra``)."""
        return [p for p in self.pools if p.gpu_allocation == "dra" and p.is_gpu]

    def pool(self, name: str) -> Pool:
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(name)


# --- loading -------------------------------------------------------------------------------------------


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if part in _UNION_TAGS:  # the requirements union's member names are not fields
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def _message(err: Any) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    given = err.get("input")
    if kind in ("literal_error", "enum"):
        expected = ctx.get("expected", "")
        options = re.findall(r"'([^']*)'", expected)
        return f"{quote(given)} is not one of {', '.join(options)}"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field missing"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def _explained(exc: ValidationError) -> list[tuple[Any, str]]:
    """Each error with its text, a misspelt field first and named with the required sibling it stands for
    (it is why that one is missing)."""
    import difflib

    errors = exc.errors(include_url=False)
    out = [(e, _message(e)) for e in errors]
    for i, (e, text) in enumerate(out):
        if e.get("type") != "extra_forbidden":
            continue
        loc = tuple(e["loc"])
        missing = [str(m["loc"][-1]) for m in errors
                   if m.get("type") == "missing" and tuple(m["loc"][:-1]) == loc[:-1]]
        close = difflib.get_close_matches(str(loc[-1]), missing, n=1)
        if close:
            out.pop(i)
            out.insert(0, (e, f"{text}; did you mean {close[0]}?"))
            break
    return out


def format_validation_error(exc: ValidationError, source: str) -> InputError:
    """The first error (:func:`_explained`'s order) as one line with its field path; the next three named
    after it with theirs, any beyond counted."""
    explained = _explained(exc)
    first, message = explained[0]
    path = _loc(tuple(first["loc"]))
    others = [f"{_loc(tuple(e['loc'])) or 'the profile'}: {text}" for e, text in explained[1:4]]
    rest = len(explained) - 1 - len(others)
    more = f" (and {'; '.join(others)}{f'; and {rest} more' if rest else ''})" if others else ""
    where = f"{source}: {path}" if path else source
    return InputError(message + more, where=where)


def all_validation_errors(exc: ValidationError) -> list[str]:
    return [f"{_loc(tuple(e['loc']))}: {text}" for e, text in _explained(exc)]


def parse_profile(data: object, *, source: str = "kgpu.yaml") -> Profile:
    if not isinstance(data, dict):
        raise InputError(
            "a profile is a mapping (apiVersion, kind, metadata, provider, pools, ...)", where=source
        )
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(exc, source) from None


def load_profile_text(text: str, *, source: str = "kgpu.yaml") -> Profile:
    return parse_profile(load_document(text, source), source=source)


def template_text(name: str) -> str:
    """The commented YAML of a built-in template (package data)."""
    if name not in TEMPLATES:
        import difflib

        close = difflib.get_close_matches(name, TEMPLATES, n=2)
        hint = f"did you mean {' or '.join(close)}?" if close else f"one of {', '.join(TEMPLATES)}"
        raise InputError(f"unknown template {quote(name)}", hint=hint)
    return (resources.files("kgpu.model") / "templates" / f"{name}.yaml").read_text(encoding="utf-8")


def builtin_profile(name: str = DEFAULT_TEMPLATE) -> Profile:
    return load_profile_text(template_text(name), source=f"<built-in template {name}>")


def profile_json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kgpu cluster profile"
    return schema


# --- Karpenter objects as pools ------------------------------------------------------------------------

# Where a profile pool's fields come from in a NodePool, for errors that name the object's own field.
_NODEPOOL_FIELDS = {
    "name": "metadata.name",
    "requirements": "spec.template.spec.requirements",
    "labels": "spec.template.metadata.labels",
    "taints": "spec.template.spec.taints",
    "limits": "spec.limits",
    "weight": "spec.weight",
    "consolidation": "spec.disruption",
    "amiFamily": "spec.template.spec.nodeClassRef",
    "userData": "spec.template.spec.nodeClassRef",
}
DEFAULT_REGION = "us-west-2"


def profile_with_nodepools(
    nodepools: list[tuple[dict[str, Any], str]],
    nodeclasses: dict[str, dict[str, Any]],
    base: Profile | None = None,
    region: str | None = None,
) -> tuple[Profile, list[str]]:
    """``base`` (or an EKS/Karpenter profile for ``region``) with one Karpenter pool per NodePool object;
    a NodePool named like a profile pool replaces it (the cluster's object is what Karpenter runs). Bad
    NodePools are InputErrors naming the object and its field. Returns the profile and notes."""
    from kgpu.model.nodepool import pool_from_nodepool

    notes: list[str] = []
    pools: list[Pool] = []
    seen: dict[str, str] = {}
    for obj, where in nodepools:
        data, more = pool_from_nodepool(obj, nodeclasses, where)
        notes.extend(more)
        try:
            pool = Pool.model_validate(data)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = tuple(err["loc"])
            head = str(loc[0]) if loc else ""
            path = _NODEPOOL_FIELDS.get(to_camel(head), head)
            rest = _loc(loc[1:])
            if rest:
                path = (
                    f"{_NODEPOOL_FIELDS.get(to_camel(head), head)}{'' if rest.startswith('[') else '.'}{rest}"
                )
            raise InputError(_message(err), where=f"{where}: {path}" if path else where) from None
        if pool.name in seen:
            raise InputError(f"NodePool {quote(pool.name)} is also in {seen[pool.name]}", where=where)
        seen[pool.name] = where
        pools.append(pool)
    if base is not None:
        if base.provider != Provider.EKS or base.autoscaler != Autoscaler.KARPENTER:
            raise InputError(
                "NodePools in the input need a profile with provider: eks and autoscaler: karpenter",
                where=nodepools[0][1],
            )
        replaced = [p.name for p in base.pools if p.name in seen]
        notes.extend(f"{seen[n]}: replaces the profile's pool {quote(n)}" for n in replaced)
        kept = [p for p in base.pools if p.name not in seen]
        return base.model_copy(update={"pools": kept + pools}), notes
    profile = Profile(
        metadata=Metadata(name="nodepools"),
        provider=Provider.EKS,
        autoscaler=Autoscaler.KARPENTER,
        cluster=Cluster(region=region or DEFAULT_REGION),
        pools=pools,
        monitoring=Monitoring(enabled=False),
    )
    return profile, notes

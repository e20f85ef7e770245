"""A profile pool (``pools[]``): one group of nodes with one way to come to exist, and the checks that bind
its fields together.

A pool is a Karpenter NodePool with its EC2NodeClass, an eksctl node group, TKE super nodes or static
nodes (``kgpu.model.profile_nodes``), optionally with shared GPUs (``kgpu.model.profile_sharing``) or GPUs
that NVIDIA's DRA driver publishes (``gpuAllocation: dra``). Its methods answer what every renderer and the
simulator ask of a pool: its NodePool requirements (``karpenter_requirements``), whether it is a GPU pool,
the device-plugin config its nodes select, the names of its verification pods.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from kgpu.errors import quote
from kgpu.model.names import (
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    DNS1123_SUBDOMAIN_PATTERN,
    is_label_value,
)
from kgpu.model.nodepool import limit_key_error, normalize
from kgpu.model.nvidia import LABEL_MIG_CONFIG, LABEL_PLUGIN_CONFIG
from kgpu.model.profile_base import _check_label_key, _check_quantities, _Model
from kgpu.model.profile_nodes import (
    AmiFamily,
    AmiSelectorTerm,
    CapacityType,
    Consolidation,
    NodeRequirement,
    PoolKind,
    PoolRequirements,
    Range,
    Requirements,
    SelectorTerm,
    StaticNode,
    Taint,
)
from kgpu.model.profile_sharing import Sharing

# Node counts a profile may ask for: Kubernetes' scalability limit is 5,000 nodes per cluster, and plan
# creates a group's desired nodes one by one.
MAX_NODES = 5000


_POLICY_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::([0-9]{12}|aws):policy/[\w+=,.@/-]+$")


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
    min_size: int = Field(strict=True, default=0, ge=0, le=MAX_NODES)
    max_size: int | None = Field(strict=True, default=None, ge=0)
    desired_size: int | None = Field(strict=True, default=None, ge=0, le=MAX_NODES)
    limits: dict[str, str | int] = Field(
        default_factory=dict, description="Karpenter limits: cpu, memory, nvidia.com/gpu"
    )
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    ami_family: AmiFamily = AmiFamily.AL2023
    zones: list[str] = Field(default_factory=list, description="subset of the cluster's zones; empty = all")
    per_zone: bool = Field(default=False, description="node groups: one group per zone (seed 001's advice)")
    consolidation: Consolidation = Field(default_factory=Consolidation)
    weight: int | None = Field(strict=True, default=None, ge=1, le=100)
    volume_size_gib: int = Field(strict=True, default=100, ge=1, alias="volumeSizeGiB")
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
        strict=True,
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

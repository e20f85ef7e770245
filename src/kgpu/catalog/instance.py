"""Instance types and offerings, with the labels and allocatable Karpenter gives their nodes.

The numbers follow the Karpenter AWS provider, read in ``aws/karpenter-provider-aws``:

- ``pkg/apis/v1/labels.go``: the ``karpenter.k8s.aws/instance-*`` label names.
- ``pkg/providers/instancetype/zz_generated.bandwidth.go``: ``instance-network-bandwidth`` (Mbps), packaged
  as ``data/aws-network-bandwidth.csv`` for the catalog's types; no label where the figure is unknown.
- ``website/content/en/docs/reference/instance-types.md`` (generated from the EC2 API): ``instance-hypervisor``,
  ``-cpu-manufacturer``, ``-cpu-sustained-clock-speed-mhz``, ``-ebs-bandwidth``, ``-local-nvme`` and
  ``-encryption-in-transit-supported``, packaged as ``data/aws-instance-labels.csv``. As ``computeRequirements``
  sets them: a metal type's hypervisor is the empty string; no ``local-nvme`` label without local NVMe, and
  none of these labels for a type the file does not list (a catalog override).
- ``instance-capability-flex``: ``true`` when the family (the name before the dot) contains ``-flex``
  (``c7i-flex``, ``m7i-flex``), else ``false`` (``computeRequirements``).
- ``instance-tenancy`` (provider v1.10 and later): an instance type offers ``default`` and ``dedicated``
  tenancy and a claim launches with ``default`` unless its requirements allow only ``dedicated``. The
  catalog's prices are those of default tenancy, so a type's node is labelled ``default`` and a
  requirement that allows only ``dedicated`` leaves no type.
- ``pkg/providers/instancetype/types.go``: ``computeRequirements`` (label values: category and generation
  from the name's ``^[a-z]+ ... [0-9]+`` parts, family and size split at the dot, cpu in vCPUs, memory in MiB,
  GPU name and manufacturer in lower-kebab-case, GPU memory in MiB of one GPU), ``computeCapacity``,
  ``memory`` (minus the VM overhead ``ceil(bytes * vmMemoryOverheadPercent / 1024 / 1024)`` MiB, and minus
  64 MiB of CMA on arm64), ``pods``, ``ENILimitedPods``, ``kubeReservedResources`` and
  ``evictionThreshold``.
- ``pkg/providers/amifamily``: the default AMI family (AL2023) uses ENI-limited pod density and ENI-limited
  memory overhead, and its root volume is ``DefaultEBS`` (20Gi).
- The chart default ``settings.vmMemoryOverheadPercent`` is 0.075.

So for a node launched with Karpenter's defaults (no ``kubelet`` block in the EC2NodeClass)::

    capacity.cpu        = vCPUs * 1000m
    capacity.memory     = M - ceil(M * 0.075) MiB,  M = memory MiB (- 64 on arm64)
    capacity.pods       = ENI-limited max pods (eni-max-pods.csv; 110 when the type is not listed),
                          or the EC2NodeClass kubelet.maxPods when set (``kubelet_max_pods``)
    capacity.ephemeral  = 20Gi
    kube-reserved.cpu   = 6% of the 1st core + 1% of the 2nd + 0.5% of the 3rd-4th + 0.25% above 4
                          (each band truncated to whole millicores)
    kube-reserved.mem   = (11 * ENI-limited max pods + 255) MiB
    kube-reserved.eph   = 1Gi
    eviction.memory     = 100Mi              (memory.available)
    eviction.ephemeral  = ceil(20Gi / 100 * 10)  (nodefs.available 10%)
    allocatable         = capacity - kube-reserved - eviction

Floating-point steps use the same operations in the same order as the Go code, so the ceilings agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2

VM_MEMORY_OVERHEAD_PERCENT = 0.075
ROOT_VOLUME_BYTES = 20 * GIB
DEFAULT_MAX_PODS = 110
ARM64_CMA_MIB = 64
KUBE_RESERVED_EPHEMERAL_BYTES = 1 * GIB
EVICTION_MEMORY_BYTES = 100 * MIB
EVICTION_NODEFS_PERCENT = 10

# (start, end, fraction) millicore bands of kube-reserved CPU (types.go kubeReservedResources).
_CPU_RESERVED_BANDS: tuple[tuple[int, int, float], ...] = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)

_NAME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+)([a-z-]*)\.([a-z0-9-]+)$")

CAPACITY_TYPES = ("spot", "on-demand")

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
_AWS = "karpenter.k8s.aws/"
LABEL_FAMILY = _AWS + "instance-family"
LABEL_CATEGORY = _AWS + "instance-category"
LABEL_GENERATION = _AWS + "instance-generation"
LABEL_SIZE = _AWS + "instance-size"
LABEL_CPU = _AWS + "instance-cpu"
LABEL_MEMORY = _AWS + "instance-memory"
LABEL_GPU_NAME = _AWS + "instance-gpu-name"
LABEL_GPU_MANUFACTURER = _AWS + "instance-gpu-manufacturer"
LABEL_GPU_COUNT = _AWS + "instance-gpu-count"
LABEL_GPU_MEMORY = _AWS + "instance-gpu-memory"
LABEL_NETWORK_BANDWIDTH = _AWS + "instance-network-bandwidth"
LABEL_HYPERVISOR = _AWS + "instance-hypervisor"
LABEL_CPU_MANUFACTURER = _AWS + "instance-cpu-manufacturer"
LABEL_CPU_CLOCK = _AWS + "instance-cpu-sustained-clock-speed-mhz"
LABEL_EBS_BANDWIDTH = _AWS + "instance-ebs-bandwidth"
LABEL_LOCAL_NVME = _AWS + "instance-local-nvme"
LABEL_ENCRYPTION_IN_TRANSIT = _AWS + "instance-encryption-in-transit-supported"
LABEL_CAPABILITY_FLEX = _AWS + "instance-capability-flex"
LABEL_TENANCY = _AWS + "instance-tenancy"
TENANCY_DEFAULT = "default"

RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"


@dataclass(frozen=True, slots=True)
class NameParts:
    family: str
    category: str
    generation: int
    size: str
    arch: str


def parse_instance_name(name: str) -> NameParts | None:
    """Split an EC2 type name the way Karpenter labels it; None when it is not ``family.size``.

    The architecture is not in the name, but Graviton families carry a ``g`` among the letters after the
    generation (``g5g``, ``m6g``, ``c7gn``); every other family in the catalog is x86_64.
    """
    m = _NAME.match(name)
    if m is None:
        return None
    category, _, generation, attributes, size = m.groups()
    family = name.split(".", 1)[0]
    arch = "arm64" if "g" in attributes else "amd64"
    return NameParts(family=family, category=category, generation=int(generation), size=size, arch=arch)


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """kube-reserved CPU for ``vcpus`` cores, by the GKE-style band ladder Karpenter uses."""
    cpu = vcpus * 1000
    total = 0
    for start, end, fraction in _CPU_RESERVED_BANDS:
        if cpu >= start:
            span = (min(cpu, end)) - start
            total += int(span * fraction)
    return total


@dataclass(frozen=True, slots=True)
class Offering:
    """One way to buy an instance type: a zone and a capacity type, at an hourly price in USD.

    ``zone`` is the approximate zone name (see the data README); ``zone_id`` is exact.
    """

    region: str
    zone: str
    capacity_type: str
    price: float
    zone_id: str = ""


@dataclass(frozen=True, slots=True)
class InstanceType:
    """An instance type as Karpenter sees it. Memory sizes are MiB, as in the EC2 API.

    ``gpu_name`` is in Karpenter label form (``t4``, ``a10g``, ``v100``); ``gpu_display_name`` keeps the
    catalog's accelerator name (``A100-80GB``) for people.
    """

    name: str
    family: str
    category: str
    generation: int
    size: str
    arch: str
    vcpus: int
    memory_mib: int
    gpu_name: str = ""
    gpu_manufacturer: str = ""
    gpu_count: int = 0
    gpu_memory_mib: int = 0
    gpu_display_name: str = ""
    max_pods: int = DEFAULT_MAX_PODS
    kubelet_max_pods: int | None = None
    network_bandwidth_mbps: int = 0  # 0: unknown, no label (as Karpenter for types it has no figure for)
    # Provider labels from data/aws-instance-labels.csv, label value by label name ("" is a value: the
    # hypervisor of a metal type); empty for a type the file does not list.
    provider_labels: tuple[tuple[str, str], ...] = ()

    @property
    def pods(self) -> int:
        """Pod capacity: the kubelet ``maxPods`` when one is set, else the ENI-limited ``max_pods``.

        kube-reserved memory keeps using ``max_pods``: the AL2023 family sizes it from the ENI limit
        (``UsesENILimitedMemoryOverhead``) whatever ``maxPods`` says.
        """
        return self.kubelet_max_pods if self.kubelet_max_pods is not None else self.max_pods

    @property
    def capability_flex(self) -> bool:
        """Whether the type is of a flex family (``c7i-flex.large``): the provider's ``-flex`` test on the
        part of the name before the dot."""
        return "-flex" in self.name.split(".", 1)[0]

    @property
    def has_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def gpu_resource(self) -> str:
        """The extended resource the device plugin advertises, "" without GPUs."""
        if not self.has_gpu:
            return ""
        return RESOURCE_AMD_GPU if self.gpu_manufacturer == "amd" else RESOURCE_NVIDIA_GPU

    def labels(self, region: str, zone: str, capacity_type: str) -> dict[str, str]:
        """The well-known labels Karpenter puts on a node of this type (GPU labels only with GPUs)."""
        labels = {
            LABEL_INSTANCE_TYPE: self.name,
            LABEL_REGION: region,
            LABEL_ZONE: zone,
            LABEL_ARCH: self.arch,
            LABEL_OS: "linux",
            LABEL_CAPACITY_TYPE: capacity_type,
            LABEL_FAMILY: self.family,
            LABEL_CATEGORY: self.category,
            LABEL_GENERATION: str(self.generation),
            LABEL_SIZE: self.size,
            LABEL_CPU: str(self.vcpus),
            LABEL_MEMORY: str(self.memory_mib),
            LABEL_CAPABILITY_FLEX: "true" if self.capability_flex else "false",
            LABEL_TENANCY: TENANCY_DEFAULT,
            # the deprecated aliases the kubelet and the cloud provider still set on EKS nodes, and that
            # Karpenter translates (NormalizedLabels)
            "beta.kubernetes.io/instance-type": self.name,
            "beta.kubernetes.io/arch": self.arch,
            "beta.kubernetes.io/os": "linux",
            "failure-domain.beta.kubernetes.io/zone": zone,
            "failure-domain.beta.kubernetes.io/region": region,
        }
        if self.network_bandwidth_mbps:
            labels[LABEL_NETWORK_BANDWIDTH] = str(self.network_bandwidth_mbps)
        labels.update(self.provider_labels)
        if self.has_gpu:
            labels[LABEL_GPU_NAME] = self.gpu_name
            labels[LABEL_GPU_MANUFACTURER] = self.gpu_manufacturer
            labels[LABEL_GPU_COUNT] = str(self.gpu_count)
            labels[LABEL_GPU_MEMORY] = str(self.gpu_memory_mib)
        return labels

    def capacity(self) -> dict[str, int]:
        """Node capacity: cpu in millicores, memory and ephemeral-storage in bytes, pods, GPUs."""
        mib = self.memory_mib - (ARM64_CMA_MIB if self.arch == "arm64" else 0)
        overhead_mib = math.ceil(float(mib * MIB) * VM_MEMORY_OVERHEAD_PERCENT / 1024 / 1024)
        capacity = {
            "cpu": self.vcpus * 1000,
            "memory": (mib - overhead_mib) * MIB,
            "pods": self.pods,
            "ephemeral-storage": ROOT_VOLUME_BYTES,
        }
        if self.has_gpu:
            capacity[self.gpu_resource] = self.gpu_count
        return capacity

    def overhead(self) -> dict[str, int]:
        """kube-reserved plus eviction thresholds (no system-reserved by default)."""
        eviction_ephemeral = math.ceil(float(ROOT_VOLUME_BYTES) / 100 * EVICTION_NODEFS_PERCENT)
        return {
            "cpu": kube_reserved_cpu_millis(self.vcpus),
            "memory": (11 * self.max_pods + 255) * MIB + EVICTION_MEMORY_BYTES,
            "ephemeral-storage": KUBE_RESERVED_EPHEMERAL_BYTES + eviction_ephemeral,
        }

    def allocatable(self) -> dict[str, int]:
        """What pods can request on a node of this type: capacity minus overhead, never below zero.

        The kubelet clamps each allocatable quantity at zero; a type only an override row describes, with
        110 pods of kube-reserved memory on 1 GiB, would otherwise advertise negative memory.
        """
        overhead = self.overhead()
        return {key: max(0, value - overhead.get(key, 0)) for key, value in self.capacity().items()}

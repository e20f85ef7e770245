"""One GPU inventory per node: what a node offers, however its GPUs are advertised.

Every verb that describes GPUs (doctor's node and pending checks, ``top``) reads them from here, so a new way of
advertising GPUs is taught in one place. A node advertises its GPUs in one or more of these ways:

- **whole** devices: ``nvidia.com/gpu``, one per physical GPU (the NVIDIA device plugin, no sharing, no MIG),
  or ``amd.com/gpu`` (AMD's device plugin; its node labeller's ``amd.com/gpu.product-name`` names the model);
- **shared** replicas: time-slicing or MPS with ``R`` replicas advertises ``count x R`` units, as
  ``nvidia.com/gpu`` (GFD's product then ends ``-SHARED``) or, with ``renameByDefault``, as
  ``nvidia.com/gpu.shared``; under MIG ``mixed`` each MIG resource is replicated the same way;
- **MIG** slices: the ``single`` strategy advertises every MIG device as ``nvidia.com/gpu`` (GFD's product
  ``<GPU>-MIG-<profile>``), ``mixed`` one resource per profile, ``nvidia.com/mig-<profile>``;
- **DRA** devices: NVIDIA's DRA driver publishes full GPUs (``type`` gpu) and MIG devices (``type`` mig, with
  their ``parentUUID``) in the node's ResourceSlices (driver ``gpu.nvidia.com``) instead of extended resources.

The node's GPU state comes from the labels the GPU Operator, GPU Feature Discovery and the MIG manager write:
``nvidia.com/gpu.product``, ``nvidia.com/gpu.count``, ``nvidia.com/gpu.memory`` (MiB),
``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy`` (per MIG resource under ``mixed``:
``nvidia.com/mig-<profile>.replicas``), ``nvidia.com/mig.strategy``, ``nvidia.com/mig.config`` and its
``nvidia.com/mig.config.state`` (``pending``/``rebooting`` while the MIG manager repartitions, ``success``,
``failed``), and the Operator's ``nvidia.com/gpu.deploy.device-plugin`` (``paused-for-mig-change`` while the MIG
manager has stopped the plugin to repartition).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kgpu.catalog.instance import RESOURCE_AMD_GPU
from kgpu.model.nvidia import (
    GPU,
    LABEL_COUNT,
    LABEL_MIG_CONFIG,
    LABEL_MIG_STATE,
    LABEL_MIG_STRATEGY,
    LABEL_PLUGIN_CONFIG,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    MIG_PREFIX,
    SHARED_SUFFIX,
)
from kgpu.model.sharing import is_gpu_resource

AMD_GPU = RESOURCE_AMD_GPU  # AMD's device plugin (ROCm/k8s-device-plugin): one per GPU, never shared
LABEL_AMD_PRODUCT = "amd.com/gpu.product-name"  # AMD's node labeller


def is_gpu(resource: str) -> bool:
    """Whether an extended resource is GPUs of some kind: NVIDIA's (whole, shared, MIG) or AMD's. The one list
    of GPU resource names every verb reads."""
    return resource == AMD_GPU or is_gpu_resource(resource)


WHOLE = "whole"
SHARED = "shared"
MIG = "mig"
DRA_GPU = "dra-gpu"
DRA_MIG = "dra-mig"
KINDS = (WHOLE, SHARED, MIG, DRA_GPU, DRA_MIG)

DRA_DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver (kgpu.catalog.dra.DRIVER)
LABEL_MEMORY = "nvidia.com/gpu.memory"
LABEL_DEPLOY_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
PAUSED_PREFIX = "paused"  # the MIG manager's paused-for-mig-change
REPARTITIONING = ("pending", "rebooting")


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One device of a ResourceSlice, as far as the inventory reads it."""

    driver: str
    name: str
    type: str  # the driver's type attribute: gpu | mig | "" (another driver's device)
    product: str = ""
    parent: str = ""  # a MIG device's parentUUID
    uuid: str = ""
    profile: str = ""  # a MIG device's profile (1g.10gb)

    @property
    def label(self) -> str:
        """How tables name the kind of device: dra:gpu, dra:mig-1g.10gb; "" for another driver's device."""
        if self.driver != DRA_DRIVER:
            return ""
        if self.type == "gpu":
            return "dra:gpu"
        if self.type == "mig":
            return f"dra:mig-{self.profile}" if self.profile else "dra:mig"
        return ""


@dataclass(frozen=True, slots=True)
class GpuResource:
    """One way the node offers GPUs: an extended resource, or a DRA device type."""

    name: str  # nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb, or gpu.nvidia.com (DRA)
    kind: str  # whole | shared | mig | dra-gpu | dra-mig
    allocatable: int
    capacity: int | None = None  # None: absent from status.capacity (or a DRA device)
    replicas: int = 1  # units per physical device (shared)
    profile: str = ""  # MIG profile (3g.40gb)

    @property
    def label(self) -> str:
        """How a table names it: the resource without the nvidia.com/ prefix (AMD's in full), DRA devices by
        their type."""
        if self.kind.startswith("dra"):
            return DraDevice(self.name, "", "gpu" if self.kind == DRA_GPU else "mig", profile=self.profile).label
        return self.name.removeprefix("nvidia.com/")


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """Everything a node offers of GPUs, and its GPU state (see the module docstring)."""

    resources: tuple[GpuResource, ...] = ()
    product: str = ""  # GFD's nvidia.com/gpu.product, or the DRA devices' productName
    count: int = 0  # physical GPUs: GFD's count label, or the DRA driver's full and MIG parent GPUs
    memory_mib: int = 0
    sharing: str = "none"  # none | time-slicing | mps
    mig_strategy: str = "none"  # none | single | mixed
    mig_config: str = ""
    mig_state: str = ""  # "" | pending | rebooting | success | failed
    plugin_deploy: str = ""  # the GPU Operator's nvidia.com/gpu.deploy.device-plugin value

    @property
    def units(self) -> int:
        """Allocatable GPU units of every kind (a replica, a MIG slice, a DRA device counts one)."""
        return sum(r.allocatable for r in self.resources)

    @property
    def registered(self) -> bool:
        """Whether a device plugin ever registered a GPU resource here (in capacity, even at 0)."""
        return any(r.capacity is not None for r in self.resources if not r.kind.startswith("dra"))

    @property
    def capacity_units(self) -> int:
        return sum(r.capacity or 0 for r in self.resources if not r.kind.startswith("dra"))

    @property
    def dra(self) -> bool:
        return any(r.kind.startswith("dra") for r in self.resources)

    @property
    def kinds(self) -> tuple[str, ...]:
        present = {r.kind for r in self.resources if r.allocatable or r.capacity}
        return tuple(k for k in KINDS if k in present)

    @property
    def kind(self) -> str:
        """One word for the table: whole, shared (time-slicing x4), mig (mixed), dra, or several joined."""
        words = []
        for k in self.kinds:
            if k == SHARED:
                reps = max((r.replicas for r in self.resources if r.kind == SHARED), default=1)
                words.append(f"{self.sharing if self.sharing != 'none' else 'shared'} x{reps}")
            elif k == MIG:
                words.append(f"mig {self.mig_strategy}" if self.mig_strategy in ("single", "mixed") else "mig")
            elif k.startswith("dra"):
                if "dra" not in words:
                    words.append("dra")
            else:
                words.append(k)
        return "+".join(words) if words else "-"

    @property
    def repartitioning(self) -> bool:
        """The MIG manager is applying a MIG config (the plugin paused meanwhile): no GPUs, on purpose."""
        return self.mig_state in REPARTITIONING or self.plugin_deploy.startswith(PAUSED_PREFIX)

    @property
    def mig_failed(self) -> bool:
        return self.mig_state == "failed"

    def whole_equivalent(self) -> int | None:
        """Physical GPUs the node's resources stand for, where that is known: whole and shared replicas of the
        device plugin, and the GPUs NVIDIA's DRA driver publishes (full and MIG parents, ``count``); None when
        the device plugin advertises MIG slices (a GPU's slices depend on its layout)."""
        total = self.count if self.dra else 0
        for r in self.resources:
            if r.kind == MIG:
                return None
            if r.kind == WHOLE:
                total += r.allocatable
            elif r.kind == SHARED:
                total += r.allocatable // max(r.replicas, 1)
        return total

    def allocatable(self, name: str) -> int:
        return sum(r.allocatable for r in self.resources if r.name == name)

    def names(self) -> tuple[str, ...]:
        """The extended resources offered (allocatable > 0)."""
        return tuple(r.name for r in self.resources if r.allocatable > 0 and not r.kind.startswith("dra"))


def _int(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0


def _replicas(labels: Mapping[str, str], resource: str) -> int:
    """GFD's replicas label of a resource (nvidia.com/gpu.replicas, nvidia.com/mig-1g.10gb.replicas)."""
    base = resource.removesuffix(SHARED_SUFFIX)
    return max(_int(labels.get(LABEL_REPLICAS if base == GPU else f"{base}.replicas")), 1)


def sharing_of(resource: str, labels: Mapping[str, str]) -> str:
    """GFD's sharing strategy of a resource (time-slicing, mps; "none"): nvidia.com/gpu.sharing-strategy, or
    nvidia.com/mig-<profile>.sharing-strategy under MIG mixed."""
    base = resource.removesuffix(SHARED_SUFFIX)
    return labels.get(LABEL_SHARING if base == GPU else f"{base}.sharing-strategy", "none") or "none"


def classify(resource: str, labels: Mapping[str, str]) -> tuple[str, int, str]:
    """The kind of a GPU extended resource on a node with these labels: (kind, replicas, MIG profile)."""
    reps = _replicas(labels, resource)
    base = resource.removesuffix(SHARED_SUFFIX)
    if base.startswith(MIG_PREFIX):
        return (SHARED if reps > 1 else MIG), reps, base.removeprefix(MIG_PREFIX)
    product = labels.get(LABEL_PRODUCT, "")
    if labels.get(LABEL_MIG_STRATEGY) == "single" and "-MIG-" in product:
        return (SHARED if reps > 1 else MIG), reps, product.rsplit("-MIG-", 1)[1]
    if resource.endswith(SHARED_SUFFIX) or reps > 1:
        return SHARED, reps, ""
    return WHOLE, 1, ""


def node_gpus(
    labels: Mapping[str, str],
    allocatable: Mapping[str, int],
    capacity: Mapping[str, int] | None = None,
    devices: Iterable[DraDevice] = (),
) -> NodeGpus:
    """The inventory of one node from its labels, ``status.allocatable`` / ``status.capacity`` (GPU resources in
    whole units) and the devices its ResourceSlices publish."""
    resources: list[GpuResource] = []
    names = sorted({n for n in allocatable if is_gpu(n)} | {n for n in capacity or () if is_gpu(n)})
    for name in names:
        kind, reps, profile = classify(name, labels)
        cap = capacity.get(name) if capacity is not None else None
        resources.append(GpuResource(name, kind, max(allocatable.get(name, 0), 0), cap, reps, profile))
    products = []
    gpus: set[str] = set()
    dra: dict[tuple[str, str], int] = {}
    for d in devices:
        if d.driver != DRA_DRIVER or d.type not in ("gpu", "mig"):
            continue
        key = (DRA_GPU, "") if d.type == "gpu" else (DRA_MIG, d.profile)
        dra[key] = dra.get(key, 0) + 1
        gpus.add(d.uuid or d.name if d.type == "gpu" else d.parent or d.name)
        if d.product:
            products.append(d.product)
    for (kind, profile), n in sorted(dra.items()):
        resources.append(GpuResource(DRA_DRIVER, kind, n, None, 1, profile))
    product = (
        labels.get(LABEL_PRODUCT, "")
        or (max(set(products), key=products.count) if products else "")
        or (labels.get(LABEL_AMD_PRODUCT, "") if any(r.name == AMD_GPU for r in resources) else "")
    )
    mig_strategy = labels.get(LABEL_MIG_STRATEGY, "none")
    return NodeGpus(
        resources=tuple(resources),
        product=product,
        count=_int(labels.get(LABEL_COUNT)) or len(gpus),
        memory_mib=_int(labels.get(LABEL_MEMORY)),
        sharing=labels.get(LABEL_SHARING, "none") or "none",
        mig_strategy=mig_strategy if mig_strategy in ("single", "mixed") else "none",
        mig_config=labels.get(LABEL_MIG_CONFIG, ""),
        mig_state=labels.get(LABEL_MIG_STATE, ""),
        plugin_deploy=labels.get(LABEL_DEPLOY_PLUGIN, ""),
    )


def slice_devices(s: object) -> list[DraDevice]:
    """The devices of one typed ResourceSlice (``kgpu.model.dra.ResourceSlice``), in its order."""
    driver = getattr(s, "driver", "")
    out = []
    for d in getattr(s, "devices", ()):
        attrs = d.attributes

        def attr(key: str, attrs: Mapping[str, object] = attrs) -> str:
            value = attrs.get(f"{driver}/{key}", attrs.get(key))
            return value if isinstance(value, str) else ""

        out.append(DraDevice(driver, d.name, attr("type"), attr("productName"), attr("parentUUID"), attr("uuid"),
                             attr("profile")))
    return out


def dra_devices(slices: Iterable[object]) -> dict[str, list[DraDevice]]:
    """DRA devices by node name, from typed ResourceSlices published for a single node (``nodeName``)."""
    out: dict[str, list[DraDevice]] = {}
    for s in slices:
        node = getattr(s, "node_name", "")
        if node:
            out.setdefault(node, []).extend(slice_devices(s))
    return out


def closest_offered(resource: str, offered: Iterable[str]) -> str:
    """The offered GPU resource a pod asking ``resource`` most likely means ("" when none): the renamed or plain
    form of a shared GPU, or the MIG profile with the same compute slices on a GPU with other memory (an
    A100-40GB's mig-2g.10gb is an A100-80GB's mig-2g.20gb)."""
    names = set(offered)
    base = resource.removesuffix(SHARED_SUFFIX)
    for other in (base, base + SHARED_SUFFIX):
        if other != resource and other in names:
            return other
    if base.startswith(MIG_PREFIX):
        slices = base.removeprefix(MIG_PREFIX).split(".", 1)[0]
        same = sorted(o for o in names if o.startswith(MIG_PREFIX)
                      and o.removesuffix(SHARED_SUFFIX).removeprefix(MIG_PREFIX).split(".", 1)[0] == slices)
        if same:
            return same[0]
    return ""


LABEL_NODEPOOL = "karpenter.sh/nodepool"


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def overlay_scope(overlays: Iterable[Mapping[str, Any]]) -> tuple[set[str], bool]:
    """The NodePools NodeOverlays with capacity name (``karpenter.sh/nodepool In [...]``), and whether one has
    no such requirement (it may match every pool)."""
    named: set[str] = set()
    every = False
    for ov in overlays:
        spec = _dig(ov, "spec")
        if not isinstance(spec, Mapping) or not spec.get("capacity"):
            continue
        reqs = [r for r in spec.get("requirements") or [] if isinstance(r, Mapping)]
        pool_reqs = [r for r in reqs if r.get("key") == LABEL_NODEPOOL]
        if not pool_reqs:
            every = True
        for r in pool_reqs:
            if r.get("operator") == "In" and isinstance(r.get("values"), list):
                named.update(str(v) for v in r["values"])
    return named, every


def unsized_shared_nodepools(nodepools: Iterable[Mapping[str, Any]], overlays: Iterable[Mapping[str, Any]]
                             ) -> list[tuple[str, str]]:
    """Karpenter NodePools whose template selects a device-plugin config (``nvidia.com/device-plugin.config`` or
    a MIG config) that no NodeOverlay with capacity covers: (name, the label that selects it). Karpenter sizes
    their nodes by physical GPUs, so it launches a node per GPU pod where each advertises several."""
    named, every = overlay_scope(overlays)
    if every:
        return []
    out = []
    for np in nodepools:
        name = str(_dig(np, "metadata", "name") or "")
        labels = _dig(np, "spec", "template", "metadata", "labels")
        if not name or name in named or not isinstance(labels, Mapping):
            continue
        for key in (LABEL_PLUGIN_CONFIG, LABEL_MIG_CONFIG):
            if key in labels:
                out.append((name, f"{key}={labels[key]}"))
                break
    return out

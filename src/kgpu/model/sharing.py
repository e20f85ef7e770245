"""Shared GPUs as the NVIDIA device plugin, GPU Feature Discovery and the MIG manager make them.

One ``DeviceConfig`` is one key of the plugin's ConfigMap, resolved: the sharing strategy (time-slicing or
MPS, one per node), the replicas per resource, ``renameByDefault``, ``failRequestsGreaterThanOne`` (MPS
defaults it to true: ``api/config/v1/config.go``), the MIG strategy, and the mig-parted config the node's
``nvidia.com/mig.config`` label selects. From it and the node's GPUs (model, count):

- ``advertised``: what the node's allocatable holds. MIG first (``single``: every MIG device is
  ``nvidia.com/gpu``; ``mixed``: ``nvidia.com/mig-<profile>``, ``+`` written ``.``), then replication: each
  listed resource is advertised ``count x replicas`` times, as ``<name>.shared`` when renamed
  (``DefaultSharedRename``). 8 GPUs x 10 replicas renamed = 80 ``nvidia.com/gpu.shared``.
- ``gfd_labels``: ``nvidia.com/gpu.{count,product,replicas,sharing-strategy}`` (per MIG resource under
  ``mixed``), the product with ``-MIG-<profile>`` and, shared and not renamed, ``-SHARED``
  (``internal/lm/resource.go``), ``nvidia.com/mig.strategy``.
- ``admission_error``: the kubelet's answer to a container asking more than one replica when
  ``failRequestsGreaterThanOne`` is set: the plugin's Allocate fails (``internal/rm/rm.go``
  ``ValidateRequest``: "maximum request size for shared resources is 1"), and the pod, already bound, ends
  ``UnexpectedAdmissionError``.
- ``unit_share``: the physical share of a GPU one unit of a resource is (1/R of a time-sliced GPU; a MIG
  device by its memory slices of 8), which the cost split prices.

Per-resource ``rename`` and ``devices`` are ignored upstream (``disableResoureRenaming``), so they are not
in kgpu's profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kgpu.catalog.mig import MIG_DISABLED, memory_share, mig_layout, product
from kgpu.model.nvidia import (
    GPU,
    LABEL_COUNT,
    LABEL_MIG_STRATEGY,
    LABEL_PLUGIN_CONFIG,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    MIG_PREFIX,
    SHARED_SUFFIX,
)

if TYPE_CHECKING:  # the profile's models are pydantic's: imported where a profile is read, not here
    from kgpu.model.profile import Pool, Profile

# GFD's product names (the NVML device name, spaces as dashes) for GPUs without MIG in kgpu's catalog.
_PRODUCTS = {
    "T4": "Tesla-T4",
    "T4g": "NVIDIA-T4G",
    "A10G": "NVIDIA-A10G",
    "L4": "NVIDIA-L4",
    "L40S": "NVIDIA-L40S",
    "V100": "Tesla-V100-SXM2-16GB",
    "V100-32GB": "Tesla-V100-SXM2-32GB",
}


def gpu_product(gpu: str) -> str:
    """The ``nvidia.com/gpu.product`` GFD writes for a catalog GPU name (best known form)."""
    return product(gpu) or _PRODUCTS.get(gpu) or ("NVIDIA-" + gpu.replace(" ", "-") if gpu else "")


def mig_resource(profile: str) -> str:
    """``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me`` (the mixed strategy's resource name)."""
    return MIG_PREFIX + profile.replace("+", ".")


def is_gpu_resource(name: str) -> bool:
    return name == GPU or name.startswith(MIG_PREFIX) or name == GPU + SHARED_SUFFIX


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """One device-plugin config, resolved (see the module docstring)."""

    name: str = "default"
    strategy: str = "none"  # none | time-slicing | mps
    replicas: Mapping[str, int] = field(default_factory=dict)
    rename: bool = False
    fail_gt_one: bool = False
    mig_strategy: str = "none"  # none | single | mixed
    mig_config: str | None = None  # None: the layout is not known (no nvidia.com/mig.config)

    @property
    def shared(self) -> bool:
        return self.strategy != "none" and any(r > 1 for r in self.replicas.values())

    def as_plugin_config(self) -> dict[str, Any]:
        """The plugin's config file (``version: v1``) for this key, as ``kgpu render`` writes it."""
        out: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": self.mig_strategy}}
        if self.strategy != "none":
            body: dict[str, Any] = {}
            if self.rename:
                body["renameByDefault"] = True
            if self.strategy == "mps" and not self.fail_gt_one:
                body["failRequestsGreaterThanOne"] = False
            elif self.strategy == "time-slicing" and self.fail_gt_one:
                body["failRequestsGreaterThanOne"] = True
            body["resources"] = [{"name": k, "replicas": v} for k, v in self.replicas.items()]
            out["sharing"] = {"timeSlicing" if self.strategy == "time-slicing" else "mps": body}
        return out

    def mig_devices(self, gpu: str) -> dict[str, int]:
        """MIG devices per GPU; {} without MIG (or an unknown layout). Raises MigConfigError."""
        if self.mig_strategy == "none" or self.mig_config in (None, MIG_DISABLED):
            return {}
        return mig_layout(self.mig_config, gpu)

    def _base(self, gpu: str, gpus: int) -> dict[str, int]:
        """Devices before replication: resource -> count."""
        if self.mig_strategy == "none" or self.mig_config is None or self.mig_config == MIG_DISABLED:
            return {GPU: gpus}
        layout = mig_layout(self.mig_config, gpu)
        if self.mig_strategy == "single":
            if len(layout) > 1:  # mig-strategy-invalid: GFD labels count 0, the plugin advertises none
                return {GPU: 0}
            return {GPU: gpus * sum(layout.values())}
        return {mig_resource(p): gpus * n for p, n in layout.items()}

    def advertised(self, gpu: str, gpus: int) -> dict[str, int]:
        """What the node's allocatable holds for its GPUs (see the module docstring)."""
        out: dict[str, int] = {}
        for name, count in self._base(gpu, gpus).items():
            r = self.replicas.get(name, 1) if self.strategy != "none" else 1
            key = name + SHARED_SUFFIX if r > 1 and self.rename else name
            out[key] = out.get(key, 0) + count * r
        return out

    def unit_share(self, gpu: str, resource: str) -> Fraction:
        """The share of one physical GPU one unit of ``resource`` is on this config's nodes."""
        name = resource.removesuffix(SHARED_SUFFIX)
        r = self.replicas.get(name, 1) if self.strategy != "none" else 1
        share = Fraction(1)
        if name.startswith(MIG_PREFIX):
            profile = _profile_of(name, gpu)
            share = Fraction(*memory_share(gpu, profile)) if profile else Fraction(1)
        elif self.mig_strategy == "single":
            layout = self.mig_devices(gpu)
            if len(layout) == 1:
                share = Fraction(*memory_share(gpu, next(iter(layout))))
        return share / r

    def admission_error(self, requests: Mapping[str, int]) -> str | None:
        """The device plugin's refusal of a container's requests, or None."""
        if not self.fail_gt_one or not self.shared:
            return None
        for name, count in requests.items():
            base = name.removesuffix(SHARED_SUFFIX)
            if count > 1 and self.replicas.get(base, 1) > 1:
                return (
                    f"asks {count} {name}: the device plugin's {self.strategy} config {self.name} has "
                    "failRequestsGreaterThanOne, so the kubelet rejects the pod after it binds "
                    "(UnexpectedAdmissionError: maximum request size for shared resources is 1)"
                )
        return None

    def gfd_labels(self, gpu: str, gpus: int) -> dict[str, str]:
        """The labels GPU Feature Discovery puts on a node of this config (the GPU part), as
        ``internal/lm/mig-strategy.go`` and ``resource.go`` make them: MIG-enabled GPUs keep their whole-GPU
        labels without sharing (``replicas: 0``); the ``single`` strategy's MIG labels replace them, the
        ``mixed`` strategy adds ``nvidia.com/mig-<profile>.*``. Raises MigConfigError (the MIG manager fails)."""
        model = gpu_product(gpu)
        out: dict[str, str] = {}
        if self.mig_strategy != "none":
            out[LABEL_MIG_STRATEGY] = self.mig_strategy
        if self.mig_strategy == "none" or self.mig_config in (None, MIG_DISABLED):
            out.update(self._resource_labels(GPU, gpus, model))
            return out
        layout = self.mig_devices(gpu)
        out.update({LABEL_PRODUCT: model, LABEL_COUNT: str(gpus), LABEL_REPLICAS: "0", LABEL_SHARING: "none"})
        if self.mig_strategy == "single":
            if len(layout) != 1:  # empty (all-enabled) or several profiles: mig-strategy-invalid
                out.update({LABEL_PRODUCT: f"{model}-MIG-INVALID", LABEL_COUNT: "0", LABEL_REPLICAS: "0",
                            LABEL_SHARING: ""})
            else:
                (profile, n), = layout.items()
                out.update(self._resource_labels(GPU, gpus * n, model, "MIG", profile))
        else:
            for profile, n in layout.items():
                out.update(self._resource_labels(mig_resource(profile), gpus * n, model, "MIG", profile))
        return out

    def _resource_labels(self, resource: str, count: int, *parts: str) -> dict[str, str]:
        r = self.replicas.get(resource, 1) if self.strategy != "none" else 1
        product_name = "-".join(p for p in parts if p)
        if r > 1 and not self.rename:
            product_name += "-SHARED"
        return {
            f"{resource}.product": product_name,
            f"{resource}.count": str(count),
            f"{resource}.replicas": str(r),
            f"{resource}.sharing-strategy": self.strategy if r > 1 else "none",
        }


def _profile_of(resource: str, gpu: str) -> str | None:
    from kgpu.catalog.mig import mig_profiles

    want = resource.removeprefix(MIG_PREFIX)
    for name in mig_profiles(gpu):
        if name.replace("+", ".") == want:
            return name
    return None


def pool_config(pool: Pool) -> DeviceConfig | None:
    """A shared pool's config; None for a pool without ``sharing``."""
    s = pool.sharing
    if s is None:
        return None
    rep = s.time_slicing or s.mps
    fail = False
    if rep is not None:
        fail = rep.fail_requests_greater_than_one if rep.fail_requests_greater_than_one is not None else bool(s.mps)
    return DeviceConfig(
        name=pool.plugin_config_key or pool.name,
        strategy=s.strategy,
        replicas={r.name: r.replicas for r in rep.resources} if rep else {},
        rename=bool(rep and rep.rename_by_default),
        fail_gt_one=fail,
        mig_strategy=s.mig.strategy if s.mig else "none",
        mig_config=s.mig.config if s.mig else None,
    )


def default_config(profile: Profile) -> DeviceConfig | None:
    """The plugin's default config (``devicePlugin.strategy``): what nodes without a config label get."""
    dp = profile.device_plugin
    if dp.strategy == "time-slicing":
        return DeviceConfig(strategy="time-slicing", replicas={GPU: dp.time_slicing_replicas})
    if dp.strategy == "mig":
        return DeviceConfig(mig_strategy=dp.mig_strategy)
    return None


def configs(profile: Profile) -> dict[str, DeviceConfig]:
    """Every config of the profile's plugin ConfigMap by key (``default`` when the profile has one)."""
    out: dict[str, DeviceConfig] = {}
    default = default_config(profile)
    if default is not None:
        out["default"] = default
    for pool in profile.pools:
        cfg = pool_config(pool)
        if cfg is not None:
            out[cfg.name] = cfg
    return out


def node_config(profile: Profile | None, labels: Mapping[str, str]) -> DeviceConfig | None:
    """The config a node with these labels runs: its ``nvidia.com/device-plugin.config`` key, else the
    default; None when the profile knows neither (the node's own allocatable is then what it is)."""
    if profile is None:
        return None
    return config_for(configs(profile), labels)


def config_for(table: Mapping[str, DeviceConfig], labels: Mapping[str, str]) -> DeviceConfig | None:
    """``node_config`` over a ``configs`` table already built (one per report, not one per node)."""
    key = labels.get(LABEL_PLUGIN_CONFIG)
    return table.get(key) if key is not None else table.get("default")


def pool_gpu_names(pool: Pool) -> list[str]:
    """GPU names the pool's sharing can be checked against without a catalog (static nodes)."""
    if pool.kind == "static":  # PoolKind.STATIC
        return sorted({n.gpu_name for n in pool.nodes if n.gpus and n.gpu_name})
    return []


def without_gpus(allocatable: Mapping[str, int]) -> dict[str, int]:
    """Allocatable with every NVIDIA GPU resource at 0: a node whose MIG config is not applied yet."""
    return {k: (0 if is_gpu_resource(k) or k.startswith(GPU + ".") else v) for k, v in allocatable.items()}


def apply(allocatable: Mapping[str, int], cfg: DeviceConfig, gpu: str, gpus: int) -> dict[str, int]:
    """``allocatable`` with its physical ``nvidia.com/gpu`` replaced by what ``cfg`` advertises."""
    out = {k: v for k, v in allocatable.items() if not is_gpu_resource(k)}
    for k, v in cfg.advertised(gpu, gpus).items():
        out[k] = v
    return out

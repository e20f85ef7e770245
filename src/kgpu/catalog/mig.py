"""MIG profiles per GPU model and the GPU Operator's mig-parted configs, as data (``data/mig.SOURCES.md``).

A GPU model is named as ``aws-instances.csv`` names accelerators (``A100``, ``A100-80GB``, ``H100``, ``H200``,
``B200``). A config name is one the MIG manager's ``nvidia.com/mig.config`` label selects in the GPU
Operator's ``default-mig-parted-config``: ``all-disabled``, ``all-enabled``, ``all-balanced`` (per GPU, from
``mig-configs.csv``) or ``all-<profile>`` with ``+`` written ``.``, the profile at its most instances.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache

from kgpu.catalog._resources import read_text

MIG_DISABLED = "all-disabled"
MIG_ENABLED = "all-enabled"
COMPUTE_SLICES = 7
MEMORY_SLICES = 8


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one GPU model."""

    gpu: str
    product: str
    name: str  # 1g.10gb, 1g.10gb+me
    compute_slices: int
    memory_slices: int
    max_count: int

    @property
    def config_name(self) -> str:
        """``all-<profile>`` with ``+`` written ``.`` (the ConfigMap's key for this profile alone)."""
        return "all-" + self.name.replace("+", ".")


@cache
def _profiles() -> dict[str, dict[str, MigProfile]]:
    out: dict[str, dict[str, MigProfile]] = {}
    for row in csv.DictReader(io.StringIO(read_text("mig-profiles.csv"))):
        p = MigProfile(
            row["gpu"],
            row["product"],
            row["profile"],
            int(row["compute_slices"]),
            int(row["memory_slices"]),
            int(row["max_count"]),
        )
        out.setdefault(p.gpu, {})[p.name] = p
    return out


@cache
def _configs() -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for row in csv.DictReader(io.StringIO(read_text("mig-configs.csv"))):
        out.setdefault(row["config"], {}).setdefault(row["gpu"], {})[row["profile"]] = int(row["count"])
    return out


@cache
def _device_ids() -> dict[str, str]:
    return {row["gpu"]: row["device_id"] for row in csv.DictReader(io.StringIO(read_text("mig-gpus.csv")))}


def _canonical(gpu: str) -> str:
    """A catalog accelerator name (``A100-80GB``) or a Karpenter label value (``a100``) as the table's key;
    the label ``a100`` is the 40GB part unless the name says 80GB."""
    for name in _profiles():
        if name.lower() == gpu.lower():
            return name
    return gpu


def mig_gpus() -> list[str]:
    """GPU models that support MIG."""
    return sorted(_profiles())


def supports_mig(gpu: str) -> bool:
    return _canonical(gpu) in _profiles()


def mig_profiles(gpu: str) -> dict[str, MigProfile]:
    """The GPU's MIG profiles by name; empty when it has no MIG."""
    return dict(_profiles().get(_canonical(gpu), {}))


def product(gpu: str) -> str:
    """GFD's ``nvidia.com/gpu.product`` for a MIG-capable GPU model; "" when unknown."""
    table = _profiles().get(_canonical(gpu))
    return next(iter(table.values())).product if table else ""


def device_id(gpu: str) -> str:
    """The GPU model's PCI device ID as mig-parted's ``device-filter`` writes it (``0x233010DE``); "" when
    unknown."""
    return _device_ids().get(_canonical(gpu), "")


def config_names() -> list[str]:
    """Every config name of the GPU Operator's default mig-parted ConfigMap that kgpu knows."""
    names = {MIG_DISABLED, MIG_ENABLED, *_configs()}
    for table in _profiles().values():
        names.update(p.config_name for p in table.values())
    return sorted(names)


def profile_of_config(config: str) -> str | None:
    """The profile ``all-<profile>`` stands for (``all-1g.10gb.me`` -> ``1g.10gb+me``), None for the others."""
    for table in _profiles().values():
        for p in table.values():
            if p.config_name == config:
                return p.name
    return None


class MigConfigError(ValueError):
    """A config the GPU cannot take; the message names both."""


def mig_layout(config: str, gpu: str) -> dict[str, int]:
    """MIG devices per GPU (profile -> count) that ``config`` gives a ``gpu``; {} when MIG is disabled.

    Raises MigConfigError when the GPU has no MIG, or the config is unknown or names a profile the GPU
    does not have (mig-parted fails there and the node's ``nvidia.com/mig.config.state`` becomes ``failed``).
    """
    if config == MIG_DISABLED:
        return {}
    key = _canonical(gpu)
    table = _profiles().get(key)
    if table is None:
        raise MigConfigError(f"GPU {gpu} has no MIG (MIG GPUs: {', '.join(mig_gpus())})")
    if config == MIG_ENABLED:
        return {}
    explicit = _configs().get(config)
    if explicit is not None:
        layout = explicit.get(key)
        if layout is None:
            raise MigConfigError(f"mig-parted config {config} has no entry for {gpu}")
        return dict(layout)
    profile = profile_of_config(config)
    if profile is None:
        raise MigConfigError(f"unknown mig-parted config {config!r}")
    found = table.get(profile)
    if found is None:
        raise MigConfigError(
            f"MIG profile {profile} (config {config}) is not available on {gpu}; {gpu} has "
            + ", ".join(table)
        )
    return {profile: found.max_count}


def memory_share(gpu: str, profile: str) -> tuple[int, int]:
    """A MIG device's share of its GPU as (memory slices, slices per GPU): what kgpu prices it by."""
    p = mig_profiles(gpu).get(profile)
    if p is None:
        raise MigConfigError(f"MIG profile {profile} is not available on {gpu}")
    return p.memory_slices, MEMORY_SLICES

"""A profile pool's shared GPUs (``sharing``): the NVIDIA device plugin's time-slicing or MPS (one strategy
per node) and MIG, with the GPU Operator MIG manager's mig-parted config.

The fields are the device plugin's config v1 (``api/config/v1/config.go``: ``sharing.timeSlicing``,
``sharing.mps``, ``resources[{name, replicas}]``, ``renameByDefault``, ``failRequestsGreaterThanOne``), and
the checks are the plugin's (replicas >= 2, one strategy per node, no MPS on MIG devices), and GFD's: the
single MIG strategy takes a config with one profile per GPU, or GFD labels the node MIG-INVALID. What a
node with such a config advertises is ``kgpu.model.sharing``'s.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kgpu.errors import quote
from kgpu.model.nvidia import GPU
from kgpu.model.profile_base import _Model

_SHARED_RESOURCE = re.compile(r"^(nvidia\.com/)?(gpu|mig-[0-9]+g\.[0-9]+gb(\.[a-z]+)*)$")


class ReplicatedResource(_Model):
    """One ``sharing.timeSlicing.resources[]`` / ``sharing.mps.resources[]`` entry of the plugin's config."""

    name: str = Field(description="nvidia.com/gpu, or nvidia.com/mig-<profile> under the mixed MIG strategy")
    replicas: int = Field(strict=True, description="replicas of each device; the plugin refuses fewer than 2")

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
            if r.name != GPU and not mixed:
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

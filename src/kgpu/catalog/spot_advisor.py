"""Spot interruption frequency per GPU instance type, and GPU families current AMIs and drivers do not run.

Seed 001: "some GPU-powered EC2 Spot instances have a relatively high interruption frequency (>20% for some
GPU instance types); check the Spot Instance Advisor". The advisor's bands are data
(``data/aws-spot-advisor.csv``, a dated snapshot, see ``aws-spot-advisor.SOURCES.md``). Seed 001 also lists
p2 types, which the EKS GPU AMIs and NVIDIA's current drivers no longer support
(``data/aws-unsupported-gpu.csv``).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import lru_cache

from kgpu.catalog._resources import read_text

BANDS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
HIGHEST = ">20%"
SNAPSHOT_DATE = "2025-06-28"
SOURCE = "Spot Instance Advisor (spot-advisor-data.json)"


@dataclass(frozen=True, slots=True)
class SpotAdvice:
    instance_type: str
    region: str
    interruption: str  # one of BANDS
    savings_pct: int

    @property
    def above_20(self) -> bool:
        return self.interruption == HIGHEST


@lru_cache(maxsize=1)
def _advice() -> dict[tuple[str, str], SpotAdvice]:
    out: dict[tuple[str, str], SpotAdvice] = {}
    for row in csv.DictReader(io.StringIO(read_text("aws-spot-advisor.csv"))):
        band = row["interruption"]
        if band not in BANDS:
            raise ValueError(f"aws-spot-advisor.csv: unknown band {band!r}")
        out[(row["instance_type"], row["region"])] = SpotAdvice(
            row["instance_type"], row["region"], band, int(row["savings_pct"])
        )
    return out


def spot_advice(instance_type: str, region: str) -> SpotAdvice | None:
    """The advisor's band for a type in a region (Linux); None where the snapshot has none."""
    return _advice().get((instance_type, region))


@dataclass(frozen=True, slots=True)
class Unsupported:
    family: str
    gpu: str
    architecture: str
    reason: str

    def message(self, instance_type: str) -> str:
        return f"instance type {instance_type!r} ({self.gpu}, {self.architecture}) is not supported: {self.reason}"


@lru_cache(maxsize=1)
def _unsupported() -> dict[str, Unsupported]:
    rows = csv.DictReader(io.StringIO(read_text("aws-unsupported-gpu.csv")))
    return {r["family"]: Unsupported(r["family"], r["gpu"], r["architecture"], r["reason"]) for r in rows}


def unsupported(instance_type: str) -> Unsupported | None:
    """Why a GPU type's family cannot run GPU pods on EKS today (p2, g3); None for every other type."""
    return _unsupported().get(instance_type.split(".", 1)[0])

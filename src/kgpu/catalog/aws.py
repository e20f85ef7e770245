"""The AWS catalog: EC2 instance types, their per-region prices and offerings.

Data: ``data/aws-instances.csv`` (one row per type and region), ``data/aws-gpus.json`` (GPU label facts) and
``data/eni-max-pods.csv``; ``data/README.md`` names the sources. The files are parsed once per process and
each region's catalog is cached, so ``aws_catalog()`` is cheap enough to call per plan.

User overrides arrive as already-parsed rows (dicts with the CSV's columns, plus an optional ``max_pods``):
the CLI reads the file, this module only merges. Merge rules:

- a row whose ``instance_type`` and ``region`` exist replaces the given fields of that row;
- a row without ``region`` applies to every region the type is listed in;
- a row for a known type in a new region adds the region, copying the type's hardware;
- a row for an unknown type adds it and must give ``region``, ``vcpus`` and ``memory_gib``;
- hardware fields (vCPUs, memory, GPUs, ``max_pods``) describe the type, so they apply in every region;
  prices and zones are per region.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from kgpu.catalog._resources import read_text
from kgpu.catalog.instance import (
    DEFAULT_MAX_PODS,
    LABEL_CPU_CLOCK,
    LABEL_CPU_MANUFACTURER,
    LABEL_EBS_BANDWIDTH,
    LABEL_ENCRYPTION_IN_TRANSIT,
    LABEL_HYPERVISOR,
    LABEL_LOCAL_NVME,
    InstanceType,
    Offering,
    parse_instance_name,
)
from kgpu.catalog.spot_advisor import unsupported
from kgpu.errors import InputError, quote

COLUMNS: tuple[str, ...] = (
    "instance_type",
    "region",
    "gpu_name",
    "gpu_count",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "ondemand_usd_per_hour",
    "spot_usd_per_hour_min",
    "spot_usd_per_hour_median",
    "zones",
)
OVERRIDE_COLUMNS: tuple[str, ...] = (*COLUMNS, "max_pods")
_HARDWARE = ("gpu_name", "gpu_count", "gpu_memory_gib", "vcpus", "memory_gib", "max_pods")
_INTS = ("gpu_count", "vcpus", "max_pods")
_FLOATS = (
    "gpu_memory_gib",
    "memory_gib",
    "ondemand_usd_per_hour",
    "spot_usd_per_hour_min",
    "spot_usd_per_hour_median",
)
_ZONE_ID = re.compile(r"^([a-z]+[0-9]+)-az([0-9]+)$")

Row = dict[str, str]


@dataclass(frozen=True, slots=True)
class RegionPricing:
    """Prices of one type in one region (USD per hour); None where the catalog has no price."""

    instance_type: str
    region: str
    on_demand: float | None
    spot: float | None  # median over the region's zones
    spot_min: float | None
    zones: tuple[str, ...]
    zone_ids: tuple[str, ...]

    @property
    def cheapest(self) -> float | None:
        prices = [p for p in (self.spot, self.on_demand) if p is not None]
        return min(prices) if prices else None


@dataclass(frozen=True, slots=True)
class _GpuFact:
    name: str
    manufacturer: str
    memory_mib: int


@lru_cache(maxsize=1)
def _base_rows() -> tuple[Row, ...]:
    return tuple(dict(row) for row in csv.DictReader(io.StringIO(read_text("aws-instances.csv"))))


@lru_cache(maxsize=1)
def _gpu_facts() -> dict[str, _GpuFact]:
    data = json.loads(read_text("aws-gpus.json"))
    return {
        key: _GpuFact(str(v["name"]), str(v["manufacturer"]), int(v["memory_mib"]))
        for key, v in data["gpus"].items()
    }


@lru_cache(maxsize=1)
def _eni_max_pods() -> dict[str, int]:
    reader = csv.DictReader(io.StringIO(read_text("eni-max-pods.csv")))
    return {row["instance_type"]: int(row["max_pods"]) for row in reader}


@lru_cache(maxsize=1)
def _network_bandwidth() -> dict[str, int]:
    reader = csv.DictReader(io.StringIO(read_text("aws-network-bandwidth.csv")))
    return {row["instance_type"]: int(row["network_bandwidth_mbps"]) for row in reader}


# aws-instance-labels.csv column -> label; an empty cell is no label, except the hypervisor (metal: "")
_PROVIDER_COLUMNS = (
    ("hypervisor", LABEL_HYPERVISOR),
    ("cpu_manufacturer", LABEL_CPU_MANUFACTURER),
    ("cpu_sustained_clock_speed_mhz", LABEL_CPU_CLOCK),
    ("ebs_bandwidth_mbps", LABEL_EBS_BANDWIDTH),
    ("local_nvme_gib", LABEL_LOCAL_NVME),
    ("encryption_in_transit_supported", LABEL_ENCRYPTION_IN_TRANSIT),
)


@lru_cache(maxsize=1)
def _provider_labels() -> dict[str, tuple[tuple[str, str], ...]]:
    reader = csv.DictReader(io.StringIO(read_text("aws-instance-labels.csv")))
    return {
        row["instance_type"]: tuple(
            (label, row[column])
            for column, label in _PROVIDER_COLUMNS
            if row[column] or label == LABEL_HYPERVISOR
        )
        for row in reader
    }


def _closest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    pool = sorted(set(candidates))
    lowered = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]


def _suggest(name: str, candidates: Iterable[str]) -> str:
    close = _closest(name, candidates)
    return f"did you mean {', '.join(close)}?" if close else ""


def _lower_kebab(text: str) -> str:
    return text.strip().lower().replace(" ", "-")


def _zone_sort_key(zone_id: str) -> tuple[str, int, str]:
    m = _ZONE_ID.match(zone_id)
    return (m.group(1), int(m.group(2)), zone_id) if m else ("~", 0, zone_id)


def _zone_names(rows: Sequence[Row]) -> dict[tuple[str, str], str]:
    """(region, zone ID) -> zone name, lettering each region's known zone IDs in ID order."""
    ids: dict[str, set[str]] = {}
    for row in rows:
        for token in _split_zones(row.get("zones", "")):
            if _ZONE_ID.match(token):
                ids.setdefault(row["region"], set()).add(token)
    names: dict[tuple[str, str], str] = {}
    for region, zone_ids in ids.items():
        for n, zone_id in enumerate(sorted(zone_ids, key=_zone_sort_key)):
            names[(region, zone_id)] = f"{region}{chr(ord('a') + n)}" if n < 26 else f"{region}-{zone_id}"
    return names


def _split_zones(text: str) -> list[str]:
    return [z.strip() for z in text.split(";") if z.strip()]


def _float(text: str) -> float | None:
    return float(text) if text.strip() else None


def _build_type(row: Row, max_pods: Mapping[str, int]) -> InstanceType:
    name = row["instance_type"]
    parts = parse_instance_name(name)
    if parts is None:  # validated for overrides; the packaged CSV only has well-formed names
        raise InputError(f"invalid instance type name {quote(name)}", hint="expected <family>.<size>")
    gpu_count = int(row.get("gpu_count") or 0)
    gpu_name = gpu_manufacturer = display = ""
    gpu_memory_mib = 0
    if gpu_count > 0:
        display = row.get("gpu_name", "").strip()
        fact = _gpu_facts().get(display)
        gib = _float(row.get("gpu_memory_gib", "")) or 0.0
        if fact is not None:
            gpu_name, gpu_manufacturer, gpu_memory_mib = fact.name, fact.manufacturer, fact.memory_mib
            # The CSV rounds GiB to 2 decimals (+-5.12 MiB); a larger gap means an override changed it.
            if gib and abs(gib * 1024 - fact.memory_mib) > 6:
                gpu_memory_mib = round(gib * 1024)
        else:
            gpu_name, gpu_manufacturer, gpu_memory_mib = _lower_kebab(display), "nvidia", round(gib * 1024)
    return InstanceType(
        name=name,
        family=parts.family,
        category=parts.category,
        generation=parts.generation,
        size=parts.size,
        arch=parts.arch,
        vcpus=int(row["vcpus"]),
        memory_mib=round(float(row["memory_gib"]) * 1024),
        gpu_name=gpu_name,
        gpu_manufacturer=gpu_manufacturer,
        gpu_count=gpu_count,
        gpu_memory_mib=gpu_memory_mib,
        gpu_display_name=display,
        max_pods=max_pods.get(name, DEFAULT_MAX_PODS),
        network_bandwidth_mbps=_network_bandwidth().get(name, 0),
        provider_labels=_provider_labels().get(name, ()),
    )


class Catalog:
    """Instance types and their prices, optionally seen from one region.

    Build it with :func:`aws_catalog`. With a region, :meth:`types` lists only the types sold there and
    :meth:`offerings` defaults to it.
    """

    def __init__(
        self,
        types: Mapping[str, InstanceType],
        pricing: Mapping[tuple[str, str], RegionPricing],
        region: str | None = None,
    ) -> None:
        self._types = dict(types)
        self._pricing = dict(pricing)
        self.region = region
        self.regions = tuple(sorted({r for _, r in self._pricing}))
        in_region = {t for t, r in self._pricing if region is None or r == region}
        self._visible = tuple(sorted(name for name in self._types if name in in_region))

    def types(self) -> list[InstanceType]:
        """Every type (in the catalog's region, when it has one), by name."""
        return [self._types[name] for name in self._visible]

    def get(self, name: str) -> InstanceType:
        """The type called ``name``; an unknown name is an InputError that suggests close names."""
        found = self._types.get(name)
        if found is None:
            gone = unsupported(name)
            if gone is not None:  # seed 001's p2 types: say why, not just "unknown"
                raise InputError(
                    gone.message(name), hint="use p3 or g4dn (V100, T4) or newer, which those AMIs support"
                )
            hint = _suggest(name, self._types)
            add = "if kgpu's catalog lacks it, add it under the profile's catalog: or with --catalog FILE (docs/profile.md)"
            raise InputError(f"unknown instance type {quote(name)}", hint=f"{hint} {add}" if hint else add)
        return found

    def pricing(self, type_name: str, region: str | None = None) -> RegionPricing | None:
        """Prices of ``type_name`` in ``region`` (default: the catalog's), None where it is not sold."""
        self.get(type_name)
        where = region or self.region
        if where is None:
            raise InputError("a region is needed for prices", hint=f"one of {', '.join(self.regions)}")
        return self._pricing.get((type_name, where))

    def offerings(self, type_name: str, region: str | None = None) -> list[Offering]:
        """Every (zone, capacity type) a type can be bought in, with its price.

        ``region`` defaults to the catalog's region; with neither, all regions. Spot offerings use the
        region's median spot price. Types sold nowhere in the region have none.
        """
        self.get(type_name)
        where = region or self.region
        regions = [where] if where is not None else list(self.regions)
        offerings: list[Offering] = []
        for reg in regions:
            pricing = self._pricing.get((type_name, reg))
            if pricing is None:
                continue
            for zone, zone_id in zip(pricing.zones, pricing.zone_ids, strict=True):
                if pricing.spot is not None:
                    offerings.append(Offering(reg, zone, "spot", pricing.spot, zone_id))
                if pricing.on_demand is not None:
                    offerings.append(Offering(reg, zone, "on-demand", pricing.on_demand, zone_id))
        return offerings

    def gpu_names(self) -> set[str]:
        """GPU names in Karpenter label form (``t4``, ``a10g``) of the visible types."""
        return {t.gpu_name for t in self.types() if t.has_gpu}

    def closest_gpu_names(self, name: str) -> list[str]:
        """Up to three GPU names that look like ``name`` (case-insensitive), best first."""
        return _closest(name, self._gpu_aliases())

    def types_with_gpu(self, name: str) -> list[InstanceType]:
        """Types whose GPU is ``name``: the label form (``a100``) or the catalog's name (``A100-80GB``),
        either case. An unknown GPU is an InputError naming the closest valid names."""
        wanted = name.strip().lower()
        found = [
            t
            for t in self.types()
            if t.has_gpu and wanted in (t.gpu_name.lower(), t.gpu_display_name.lower())
        ]
        if not found:
            close = self.closest_gpu_names(name)
            hint = (
                f"did you mean {', '.join(close)}?"
                if close
                else f"known: {', '.join(sorted(self.gpu_names()))}"
            )
            raise InputError(f"unknown GPU {quote(name)}", hint=hint)
        return found

    def _gpu_aliases(self) -> set[str]:
        names = self.gpu_names()
        names.update(t.gpu_display_name for t in self.types() if t.has_gpu and t.gpu_display_name)
        return names


def _pricing_of(row: Row, zone_names: Mapping[tuple[str, str], str]) -> RegionPricing:
    region = row["region"]
    zones: list[str] = []
    zone_ids: list[str] = []
    for token in sorted(_split_zones(row.get("zones", "")), key=_zone_sort_key):
        if _ZONE_ID.match(token):
            zones.append(zone_names[(region, token)])
            zone_ids.append(token)
        else:  # an override may give zone names directly
            zones.append(token)
            zone_ids.append("")
    return RegionPricing(
        instance_type=row["instance_type"],
        region=region,
        on_demand=_float(row.get("ondemand_usd_per_hour", "")),
        spot=_float(row.get("spot_usd_per_hour_median", "")),
        spot_min=_float(row.get("spot_usd_per_hour_min", "")),
        zones=tuple(zones),
        zone_ids=tuple(zone_ids),
    )


def _build(rows: Sequence[Row], max_pods: Mapping[str, int], region: str | None) -> Catalog:
    if region is not None:
        regions = {row["region"] for row in rows}
        if region not in regions:
            raise InputError(
                f"unknown region {quote(region)}",
                hint=_suggest(region, regions) or f"known: {', '.join(sorted(regions))}",
            )
    types: dict[str, InstanceType] = {}
    for row in rows:
        if row["instance_type"] not in types:
            types[row["instance_type"]] = _build_type(row, max_pods)
    zone_names = _zone_names(rows)
    pricing = {(row["instance_type"], row["region"]): _pricing_of(row, zone_names) for row in rows}
    return Catalog(types, pricing, region)


@lru_cache(maxsize=32)
def _cached_catalog(region: str | None) -> Catalog:
    return _build(_base_rows(), _eni_max_pods(), region)


def aws_catalog(region: str | None = None, overrides: list[dict[str, Any]] | None = None) -> Catalog:
    """The AWS catalog, seen from ``region`` (all regions when None), with user ``overrides`` merged in.

    Without overrides the result is cached per region. Bad override rows raise InputError naming the row
    and column (the caller adds the file name with ``InputError.within``).
    """
    if not overrides:
        return _cached_catalog(region)
    rows, max_pods = merge_overrides(_base_rows(), _eni_max_pods(), overrides)
    return _build(rows, max_pods, region)


_WHOLE = re.compile(r"[0-9]{1,12}")  # ASCII digits only: '²'.isdigit() is True, and int('²') fails
_MAX_ROW_VALUE = 10**9  # far above any real vCPU count, GiB, pod count or price; keeps arithmetic finite


def _clean(index: int, raw: Mapping[str, Any]) -> Row:
    """One override row, validated, as CSV-style strings; only the columns it gives."""
    where = f"row {index}"
    if not isinstance(raw, Mapping):
        raise InputError(f"expected a mapping of column to value, got {type(raw).__name__}", where=where)
    out: Row = {}
    for key, value in raw.items():
        column = str(key).strip()
        if column not in OVERRIDE_COLUMNS:
            raise InputError(
                f"unknown column {quote(column)}",
                where=where,
                hint=_suggest(column, OVERRIDE_COLUMNS) or f"columns: {', '.join(OVERRIDE_COLUMNS)}",
            )
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        field = f"{where}: {column}"
        if column in _INTS:
            text = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
            if not _WHOLE.fullmatch(text) or int(text) > _MAX_ROW_VALUE:
                raise InputError(f"expected a whole number >= 0 and <= {_MAX_ROW_VALUE}, got {quote(value)}", where=field)
            out[column] = str(int(text))
        elif column in _FLOATS:
            try:
                number = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else math.nan
            except (TypeError, ValueError, OverflowError):
                number = math.nan
            if not math.isfinite(number) or not 0 <= number <= _MAX_ROW_VALUE:
                raise InputError(f"expected a number >= 0 and <= {_MAX_ROW_VALUE}, got {quote(value)}", where=field)
            out[column] = repr(number)
        elif column == "zones":
            if isinstance(value, list | tuple):
                out[column] = ";".join(str(z).strip() for z in value)
            else:
                out[column] = str(value)
        else:
            out[column] = str(value).strip()
    if "instance_type" not in out:
        raise InputError("missing instance_type", where=where)
    return out


def merge_overrides(
    base: Sequence[Mapping[str, str]], max_pods: Mapping[str, int], overrides: Sequence[Mapping[str, Any]]
) -> tuple[list[Row], dict[str, int]]:
    """Merge user override rows into catalog rows (rules in the module docstring)."""
    rows = [dict(row) for row in base]
    pods = dict(max_pods)
    for index, raw in enumerate(overrides, start=1):
        override = _clean(index, raw)
        name = override["instance_type"]
        where = f"row {index} ({name})"
        hardware = {k: v for k, v in override.items() if k in _HARDWARE and k != "max_pods"}
        if "max_pods" in override:
            pods[name] = int(override["max_pods"])
        existing = [row for row in rows if row["instance_type"] == name]
        region = override.get("region")
        if existing:
            for row in existing:
                row.update(hardware)
            targets = [row for row in existing if region is None or row["region"] == region]
            if not targets:
                assert region is not None
                new = {column: "" for column in COLUMNS}
                new.update({k: existing[0][k] for k in _HARDWARE if k in existing[0]})
                new.update(override)
                new.pop("max_pods", None)
                rows.append(new)
            else:
                for row in targets:
                    row.update({k: v for k, v in override.items() if k != "max_pods"})
            continue
        if parse_instance_name(name) is None:
            raise InputError(
                f"invalid instance type name {quote(name)}",
                where=where,
                hint="expected <family>.<size>, e.g. g5.xlarge",
            )
        missing = [c for c in ("region", "vcpus", "memory_gib") if c not in override]
        if missing:
            raise InputError(f"a new instance type needs {', '.join(missing)}", where=where)
        if int(override.get("gpu_count", "0")) > 0 and not override.get("gpu_name"):
            raise InputError("a type with GPUs needs gpu_name", where=where)
        new = {column: "" for column in COLUMNS}
        new.update({k: v for k, v in override.items() if k != "max_pods"})
        rows.append(new)
    return rows, pods


def with_max_pods(instance_type: InstanceType, max_pods: int) -> InstanceType:
    """The same type under an EC2NodeClass ``kubelet.maxPods``: pod capacity changes, kube-reserved does not."""
    return replace(instance_type, kubelet_max_pods=max_pods)

"""Tencent TKE super-node GPU specs and the matching rules, over plain numbers.

On a TKE super node each pod buys its own GPU spec: a GPU type (annotation
``eks.tke.cloud.tencent.com/gpu-type``, a priority list such as ``T4,V100``), a GPU count, CPU cores and
memory. The specs are data (``data/tke-gpu-specs.json``, from the TKE guide kgpu keeps as seed 003); this
module only decides which spec a request gets. Reading annotations and pod resources is ``kgpu.sim.provisioners.tke.spec``.

Two modes, as the guide describes them:

- explicit (方式 A): GPU count, cores and GiB are given and must be exactly a supported spec: the count has
  a row, the cores are one of its options, the GiB lie in its range (whole GiB).
- automatic (方式 B): the request is rounded up to the *smallest* spec of the first type in the priority
  list that can hold it. Smallest means fewest GPUs, then fewest cores, then least memory: within a row the
  cores are the smallest option >= the request and the memory is the request rounded up to whole GiB (at
  least the row's minimum). A type with no fitting spec passes to the next type in the list; in a list of
  several types, a type without a row of exactly the GPU count also passes to the next one that has it
  (``T4,V100`` with 2 GPUs gets V100 2 cards), and only when none has it is the count rounded up.

Errors are :class:`TkeMatchError` with a stable ``code``; the message carries the wording of the guide's
error table (异常处理) so users recognise what TKE would say.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kgpu.catalog._resources import read_text
from kgpu.errors import KgpuError, quote

GIB = 1024**3

# Error codes, one per row of the guide's error table that applies to spec matching.
INVALID_ANNOTATION = "invalid_annotation"  # Annotation 错误: InvalidParameter.Param
INVALID_MEMORY_FORMAT = "invalid_memory_format"  # 内存单位错误: Invalid memory format
UNSUPPORTED_GPU_TYPE = "unsupported_gpu_type"  # 规格不匹配: GPU 型号不支持 (FailedScheduling)
NO_MATCHING_SPEC = "no_matching_spec"  # CPU/内存不匹配: No matching instance type

SEED_WORDING = {
    INVALID_ANNOTATION: "InvalidParameter.Param",
    INVALID_MEMORY_FORMAT: "Invalid memory format",
    UNSUPPORTED_GPU_TYPE: "FailedScheduling: 0/1 nodes are available",
    NO_MATCHING_SPEC: "No matching instance type",
}


class TkeMatchError(KgpuError):
    """A pod's TKE GPU spec cannot be honoured. A result for the user to fix, not a crash."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def _error(code: str, detail: str) -> TkeMatchError:
    return TkeMatchError(code, f"{SEED_WORDING[code]}: {detail}")


@dataclass(frozen=True, slots=True)
class TkeSpecRow:
    """One GPU count of a type: the CPU core options and the inclusive memory range in GiB."""

    gpus: int
    cpu_options: tuple[int, ...]
    memory_min_gib: int
    memory_max_gib: int

    def holds(self, gpus: int, cpu_millis: int, memory_gib: int) -> tuple[int, int] | None:
        """(cores, GiB) of the smallest spec of this row that holds the request, None when none does."""
        if self.gpus < gpus:
            return None
        cores = next((c for c in self.cpu_options if c * 1000 >= cpu_millis), None)
        if cores is None or memory_gib > self.memory_max_gib:
            return None
        return cores, max(memory_gib, self.memory_min_gib)


@dataclass(frozen=True, slots=True)
class TkeGpuType:
    """A GPU type, by its annotation value. ``specs`` is empty where the guide gives no table."""

    name: str
    model: str
    gpu_memory_gib: int
    cuda: str
    specs: tuple[TkeSpecRow, ...]
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TkeSpec:
    """The spec a pod gets: GPU type, GPU count, CPU cores, memory GiB."""

    gpu_type: str
    gpus: int
    cpu: int
    memory_gib: int


def _row(raw: dict[str, Any]) -> TkeSpecRow:
    low, high = raw["memory_gib"]
    return TkeSpecRow(int(raw["gpus"]), tuple(sorted(int(c) for c in raw["cpu"])), int(low), int(high))


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, TkeGpuType], dict[str, Any]]:
    data = json.loads(read_text("tke-gpu-specs.json"))
    types: dict[str, TkeGpuType] = {}
    for raw in data["types"]:
        specs = tuple(sorted((_row(r) for r in raw["specs"]), key=lambda r: r.gpus))
        types[raw["name"]] = TkeGpuType(
            name=raw["name"],
            model=raw["model"],
            gpu_memory_gib=int(raw["gpu_memory_gib"]),
            cuda=str(raw["cuda"]),
            specs=specs,
            aliases=tuple(raw.get("aliases", ())),
        )
    return types, dict(data.get("rules", {}))


def tke_gpu_types() -> dict[str, TkeGpuType]:
    """Every TKE GPU type by annotation value, in the guide's order."""
    return dict(_load()[0])


def default_gpu_count() -> int:
    """GPU count when a pod names none (the guide: gpu-count 默认值为 1)."""
    return int(_load()[1].get("default_gpu_count", 1))


def tke_gpu_type(name: str) -> TkeGpuType:
    """The type whose annotation value (or alias) is ``name``, exactly as TKE compares it."""
    types = _load()[0]
    if name in types:
        return types[name]
    for gpu_type in types.values():
        if name in gpu_type.aliases:
            return gpu_type
    raise _error(UNSUPPORTED_GPU_TYPE, f"GPU type {quote(name)} is not supported (GPU 型号不支持){_hint(name)}")


def _hint(name: str) -> str:
    types = _load()[0]
    by_model = [t.name for t in types.values() if name and name.lower() in t.model.lower().split()]
    lowered = {t.lower(): t for t in types}
    close = by_model or [
        lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    ]
    if close:
        return "; did you mean " + ", ".join(f"{c!r} ({types[c].model})" for c in close) + "?"
    return "; supported: " + ", ".join(types)


def parse_gpu_types(value: str) -> list[TkeGpuType]:
    """The gpu-type annotation: a comma-separated priority list of annotation values."""
    names = [part.strip() for part in value.split(",")]
    if not value.strip() or any(not n for n in names):
        raise _error(
            INVALID_ANNOTATION,
            f"eks.tke.cloud.tencent.com/gpu-type {quote(value)} must be GPU types separated by commas, e.g. 'T4,V100'",
        )
    return [tke_gpu_type(n) for n in names]


def _describe(gpus: int, cpu: str, memory: str) -> str:
    return f"{gpus} GPU(s), {cpu} cores, {memory}"


def match_explicit(gpu_types: Sequence[str], gpus: int, cpu: int, memory_gib: int) -> TkeSpec:
    """方式 A: the first type in the list that offers exactly this spec."""
    types = [tke_gpu_type(name) for name in gpu_types]
    if not types:
        raise _error(
            INVALID_ANNOTATION, "eks.tke.cloud.tencent.com/gpu-type is required (必须显式声明 GPU 型号)"
        )
    problems: list[str] = []
    for gpu_type in types:
        row = next((r for r in gpu_type.specs if r.gpus == gpus), None)
        if row is None:
            counts = ", ".join(str(r.gpus) for r in gpu_type.specs) or "none published"
            problems.append(f"{gpu_type.name} has no {gpus}-GPU spec (GPU counts: {counts})")
        elif cpu not in row.cpu_options:
            options = ", ".join(str(c) for c in row.cpu_options)
            problems.append(f"{gpu_type.name} {gpus}-GPU offers {options} cores, not {cpu}")
        elif not row.memory_min_gib <= memory_gib <= row.memory_max_gib:
            problems.append(
                f"{gpu_type.name} {gpus}-GPU offers {row.memory_min_gib}-{row.memory_max_gib}Gi, not {memory_gib}Gi"
            )
        else:
            return TkeSpec(gpu_type.name, gpus, cpu, memory_gib)
    raise _error(NO_MATCHING_SPEC, "; ".join(problems) + " (must match a supported spec exactly)")


def match_auto(gpu_types: Sequence[str], gpus: int, cpu_millis: int, memory_bytes: int) -> TkeSpec:
    """方式 B: the smallest spec of the first type in the list that holds the request."""
    types = [tke_gpu_type(name) for name in gpu_types]
    if not types:
        raise _error(
            INVALID_ANNOTATION, "eks.tke.cloud.tencent.com/gpu-type is required (必须显式声明 GPU 型号)"
        )
    wanted_gpus = gpus if gpus > 0 else default_gpu_count()
    memory_gib = math.ceil(max(memory_bytes, 0) / GIB)
    # A priority list first looks for a type with a row of exactly the GPU count ('T4,V100' with 2 GPUs:
    # T4 has no 2-card row, V100 has: V100 2 cards, as the guide's "不可用时使用 V100" reads); only when no
    # listed type has the count is the request rounded up to more cards of the first type that holds it.
    passes = (True, False) if len(types) > 1 else (False,)
    for exact in passes:
        for gpu_type in types:
            best = _smallest(gpu_type, wanted_gpus, max(cpu_millis, 0), memory_gib, exact)
            if best is not None:
                return best
    cores = f"{cpu_millis / 1000:g}"
    tried = "; ".join(_largest(t) for t in types)
    raise _error(
        NO_MATCHING_SPEC,
        f"no spec of {','.join(t.name for t in types)} holds {_describe(wanted_gpus, cores, f'{memory_gib}Gi')} ({tried})",
    )


def _smallest(gpu_type: TkeGpuType, gpus: int, cpu_millis: int, memory_gib: int, exact: bool) -> TkeSpec | None:
    """The smallest spec of one type that holds the request (with ``exact``: among rows of exactly ``gpus``)."""
    best: TkeSpec | None = None
    for row in gpu_type.specs:
        if exact and row.gpus != gpus:
            continue
        fit = row.holds(gpus, cpu_millis, memory_gib)
        if fit is None:
            continue
        candidate = TkeSpec(gpu_type.name, row.gpus, fit[0], fit[1])
        if best is None or (candidate.gpus, candidate.cpu, candidate.memory_gib) < (
            best.gpus,
            best.cpu,
            best.memory_gib,
        ):
            best = candidate
    return best


def _largest(gpu_type: TkeGpuType) -> str:
    if not gpu_type.specs:
        return f"{gpu_type.name} has no published spec"
    top = gpu_type.specs[-1]
    return f"{gpu_type.name} largest: {top.gpus} GPU(s), {top.cpu_options[-1]} cores, {top.memory_max_gib}Gi"


# --- prices ------------------------------------------------------------------------------------------------

VGPU_PREFIXES = ("1/4*", "1/2*")


@dataclass(frozen=True, slots=True)
class TkePrices:
    """Super-node pay-as-you-go prices, USD per hour: per GPU card (a vGPU type per slice), core and GiB.

    ``date`` and ``source`` travel with every figure: TKE prices change and differ per region.
    """

    date: str
    source: str
    cpu_core_hour: float | None = None
    memory_gib_hour: float | None = None
    gpu_hour: tuple[tuple[str, float], ...] = ()
    currency: str = "USD"

    def spec_price(self, spec: TkeSpec) -> float | None:
        """What the spec costs per hour; None when a component of it has no price."""
        gpu = dict(self.gpu_hour).get(spec.gpu_type)
        if gpu is None or self.cpu_core_hour is None or self.memory_gib_hour is None:
            return None
        return round(spec.gpus * gpu + spec.cpu * self.cpu_core_hour + spec.memory_gib * self.memory_gib_hour, 4)


@lru_cache(maxsize=1)
def packaged_prices() -> TkePrices:
    """The packaged snapshot (``data/tke-prices.json``): dated and sourced; it has no figures (docs/tke.md)."""
    raw = json.loads(read_text("tke-prices.json"))
    return TkePrices(
        date=str(raw["date"]),
        source=str(raw["source"]),
        cpu_core_hour=raw.get("cpuCoreHour"),
        memory_gib_hour=raw.get("memoryGiBHour"),
        gpu_hour=tuple((str(k), float(v)) for k, v in raw.get("gpuHour", {}).items()),
        currency=str(raw.get("currency", "USD")),
    )


def whole_card(spec: TkeSpec) -> TkeSpec | None:
    """The whole-card spec a vGPU slice spec stands in for: same count, cores and memory on the full GPU
    (``1/4*T4 1x 4C 16Gi`` -> ``T4 1x 4C 16Gi``), the comparison behind the guide's "1/4 T4 可节省 75% GPU
    成本". None for a whole-card type, or when the full GPU has no such spec."""
    if not spec.gpu_type.startswith(VGPU_PREFIXES):
        return None
    base = spec.gpu_type.split("*", 1)[1]
    try:
        return match_auto([base], spec.gpus, spec.cpu * 1000, spec.memory_gib * GIB)
    except TkeMatchError:
        return None


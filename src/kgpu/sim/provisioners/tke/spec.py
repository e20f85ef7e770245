"""Which TKE super-node GPU spec a pod gets, from its annotations and resources.

The pod side of ``kgpu.catalog.tke``: it reads the ``eks.tke.cloud.tencent.com/*`` annotations, decides the
mode and hands numbers to the catalog's matcher.

- explicit (方式 A) when ``gpu-count``, ``cpu`` and ``mem`` are all present; some but not all is an error,
  because the guide forbids mixing the two modes (方式 A 和方式 B 不可混用). ``cpu`` and ``gpu-count`` are
  whole numbers; ``mem`` must be whole ``Gi`` (``40Gi``): ``40G`` is 40*10^9 bytes, and the guide requires
  Gi (单位必须使用 Gi（不支持 G）).
- automatic (方式 B) otherwise: per resource the larger of request and limit (取 requests 与 limits 的较大值);
  GPUs from ``nvidia.com/gpu``, 1 when the pod names none (gpu-count 默认值为 1). A pod that requests no
  cpu or no memory (neither request nor limit) gets the smallest cores / memory of its GPU-count row: the
  guide's rule "the smallest spec that holds the request" with a request of zero. The match says so in
  ``unrequested`` so that it is never silent: such a pod is not limited by TKE to what it seems to ask.

Requests and limits come in already parsed: ``cpu`` in millicores, ``memory`` in bytes, ``nvidia.com/gpu`` a
count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kgpu.catalog.tke import (
    INVALID_ANNOTATION,
    INVALID_MEMORY_FORMAT,
    SEED_WORDING,
    TkeMatchError,
    match_auto,
    match_explicit,
    parse_gpu_types,
    tke_gpu_type,
)
from kgpu.model.nvidia import GPU

PREFIX = "eks.tke.cloud.tencent.com/"
GPU_TYPE = PREFIX + "gpu-type"
GPU_COUNT = PREFIX + "gpu-count"
CPU = PREFIX + "cpu"
MEM = PREFIX + "mem"
EXPLICIT_KEYS = (GPU_COUNT, CPU, MEM)
GPU_RESOURCE = GPU

_WHOLE = re.compile(r"^[0-9]+$")
_GI = re.compile(r"^([0-9]+)Gi$")


@dataclass(frozen=True, slots=True)
class TkeMatch:
    """The spec a pod gets: ``cpu`` in cores, ``memory`` like ``40Gi``, ``mode`` explicit or auto."""

    gpu_type: str
    gpu_count: int
    cpu: int
    memory: str
    mode: str
    unrequested: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        if not self.unrequested:
            return ""
        what = " and ".join(self.unrequested)
        return f"no {what} request: the smallest {what} of the {self.gpu_type} {self.gpu_count}-GPU spec"

    def as_dict(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {
            "gpu_type": self.gpu_type,
            "gpu_count": self.gpu_count,
            "cpu": self.cpu,
            "memory": self.memory,
            "mode": self.mode,
        }
        if self.note:
            out["note"] = self.note
        return out


def _annotation_error(detail: str) -> TkeMatchError:
    return TkeMatchError(INVALID_ANNOTATION, f"{SEED_WORDING[INVALID_ANNOTATION]}: {detail}")


def _whole(key: str, raw: str) -> int:
    text = raw.strip()
    if not _WHOLE.match(text) or int(text) <= 0:
        raise _annotation_error(f"{key} {raw!r} must be a whole number > 0")
    return int(text)


def _memory_gib(raw: str) -> int:
    m = _GI.match(raw.strip())
    if m is None or int(m.group(1)) <= 0:
        raise TkeMatchError(
            INVALID_MEMORY_FORMAT,
            f"{SEED_WORDING[INVALID_MEMORY_FORMAT]}: {MEM} {raw!r} must be whole Gi such as '40Gi' "
            "(单位必须使用 Gi，不支持 G)",
        )
    return int(m.group(1))


def _check_requests_fit(gpus: int, cores: int, memory_gib: int, requests: Mapping[str, int]) -> None:
    """Explicit annotations that give the pod less than its containers request: the pod would not fit on
    its own virtual node, so TKE never starts it. Same verdict as simulate's placement on that node."""
    conflicts = []
    if requests.get(GPU_RESOURCE, 0) > gpus:
        conflicts.append(f"{GPU_COUNT} '{gpus}' < the containers' nvidia.com/gpu {requests[GPU_RESOURCE]}")
    if requests.get("cpu", 0) > cores * 1000:
        conflicts.append(f"{CPU} '{cores}' < the containers' cpu request {requests['cpu'] / 1000:g}")
    if requests.get("memory", 0) > memory_gib * 1024**3:
        conflicts.append(
            f"{MEM} '{memory_gib}Gi' < the containers' memory request {requests['memory'] / 1024**3:g}Gi"
        )
    if conflicts:
        raise _annotation_error(
            "the explicit spec contradicts the pod's requests: "
            + "; ".join(conflicts)
            + " (the pod would not fit its own spec)"
        )


def match_pod_spec(
    annotations: Mapping[str, str], requests: Mapping[str, int], limits: Mapping[str, int]
) -> TkeMatch:
    """The TKE spec of a pod; :class:`TkeMatchError` when there is none."""
    raw_types = annotations.get(GPU_TYPE)
    if raw_types is None:
        raise _annotation_error(f"{GPU_TYPE} is required (必须显式声明 GPU 型号)")
    gpu_types = [t.name for t in parse_gpu_types(str(raw_types))]
    given = [key for key in EXPLICIT_KEYS if key in annotations]
    if given:
        missing = [key for key in EXPLICIT_KEYS if key not in annotations]
        if missing:
            raise _annotation_error(
                f"{', '.join(missing)} missing: gpu-count, cpu and mem must be given together "
                "(三个值必须同时指定; 方式 A 和方式 B 不可混用)"
            )
        gpus = _whole(GPU_COUNT, str(annotations[GPU_COUNT]))
        cores = _whole(CPU, str(annotations[CPU]))
        memory_gib = _memory_gib(str(annotations[MEM]))
        spec = match_explicit(gpu_types, gpus, cores, memory_gib)
        mode = "explicit"
        _check_requests_fit(spec.gpus, spec.cpu, spec.memory_gib, requests)
        unrequested: tuple[str, ...] = ()
    else:
        cpu = max(requests.get("cpu", 0), limits.get("cpu", 0))
        memory = max(requests.get("memory", 0), limits.get("memory", 0))
        spec = match_auto(
            gpu_types, max(requests.get(GPU_RESOURCE, 0), limits.get(GPU_RESOURCE, 0)), cpu, memory
        )
        mode = "auto"
        unrequested = tuple(name for name, value in (("cpu", cpu), ("memory", memory)) if not value)
    return TkeMatch(spec.gpu_type, spec.gpus, spec.cpu, f"{spec.memory_gib}Gi", mode, unrequested)


_CUDA_TAG = re.compile(r"^(\d+)\.(\d+)")  # nvidia/cuda:11.4.0-base-ubuntu20.04
_CUDA_IN_TAG = re.compile(r"cuda[-_]?(\d+)\.(\d+)")  # pytorch:2.0.1-cuda11.7-cudnn8-runtime


def image_cuda(image: str) -> tuple[int, int] | None:
    """The CUDA version an image is built for, when its name says so (CUDA base images, -cudaX.Y tags)."""
    name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    found = _CUDA_TAG.match(tag) if name.endswith("/cuda") else _CUDA_IN_TAG.search(tag)
    return (int(found.group(1)), int(found.group(2))) if found else None


def cuda_warning(gpu_type: str, images: list[str]) -> str:
    """Seed 003's "CUDA driver version is insufficient": an image built for a newer CUDA than the spec's
    driver runs (V100/T4/A10: 11.4 with driver 470; T4 vGPU: 11.0 with driver 450). A newer major version
    fails; a newer minor version of the same major runs through CUDA's minor-version compatibility, except
    for PTX JIT. Empty when every image fits or says nothing."""
    spec = tuple(int(x) for x in tke_gpu_type(gpu_type).cuda.split(".")[:2])
    out = []
    for image in images:
        cuda = image_cuda(image)
        if cuda is None or cuda <= spec:
            continue
        have = f"{spec[0]}.{spec[1]}"
        if cuda[0] > spec[0]:
            out.append(
                f"CUDA driver version is insufficient: {image} is built for CUDA {cuda[0]}.{cuda[1]}, "
                f"{gpu_type} runs CUDA {have}; use an image for CUDA {spec[0]}.x"
            )
        else:
            out.append(
                f"{image} is built for CUDA {cuda[0]}.{cuda[1]}, {gpu_type} runs CUDA {have}: it runs by CUDA "
                "minor-version compatibility, but PTX JIT compilation fails"
            )
    return "; ".join(out)

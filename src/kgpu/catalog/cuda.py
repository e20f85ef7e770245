"""CUDA runtime versions of container images, and the NVIDIA driver each one needs.

Two facts tables (``data/cuda-min-driver.csv``, ``data/cuda-images.json``; sources in
``data/cuda.SOURCES.md``) and the reading of image references:

- a tag that names the runtime: ``nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04`` (any registry's
  ``.../cuda`` repository), ``pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime``,
  ``nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda10.2`` (``cudaX.Y`` anywhere in the tag);
- ``tensorflow/tensorflow:2.15.0-gpu``: TensorFlow's tested build configuration (a tag without ``gpu`` is
  the CPU build, no CUDA);
- NGC framework containers ``nvcr.io/nvidia/<framework>:YY.MM-...``: the monthly release's CUDA.

Anything else (``latest``, digests only, unknown repositories) has no known CUDA version: None, never a guess.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from dataclasses import dataclass
from typing import Any

from kgpu.catalog._resources import read_text

DriverVersion = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CudaRelease:
    """One CUDA toolkit release line of NVIDIA's table: ``min_driver`` is the GA release's minimum."""

    version: tuple[int, int]
    min_driver: DriverVersion
    min_driver_latest_update: DriverVersion

    @property
    def name(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


@dataclass(frozen=True, slots=True)
class ImageCuda:
    """The CUDA runtime an image carries, and how kgpu knows (``source``: tag, tensorflow, pytorch, ngc)."""

    image: str
    version: tuple[int, int]
    source: str

    @property
    def name(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def parse_driver(text: str) -> DriverVersion | None:
    """'550.54.15' -> (550, 54, 15); None for anything that is not dotted numbers."""
    parts = text.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def format_driver(version: DriverVersion) -> str:
    return ".".join(f"{p:02d}" if i == 2 and p < 10 else str(p) for i, p in enumerate(version))


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


@functools.cache
def cuda_releases() -> dict[tuple[int, int], CudaRelease]:
    """NVIDIA's table, by (major, minor)."""
    out: dict[tuple[int, int], CudaRelease] = {}
    for row in csv.DictReader(io.StringIO(read_text("cuda-min-driver.csv"))):
        ga = parse_driver(row["min_linux_driver_ga"])
        latest = parse_driver(row["min_linux_driver_latest_update"])
        if ga is None or latest is None:  # pragma: no cover - the packaged file is checked by tests
            raise ValueError(f"cuda-min-driver.csv: bad row {row}")
        release = CudaRelease(_version(row["cuda_version"]), ga, latest)
        out[release.version] = release
    return out


@functools.cache
def _images() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_text("cuda-images.json"))
    return data


def compat_floor(major: int) -> DriverVersion | None:
    """The oldest driver a runtime of this major version runs on (minor-version compatibility)."""
    floor = _images()["compat_floor"].get(str(major))
    return parse_driver(floor) if floor else None


def min_driver(version: tuple[int, int]) -> CudaRelease | None:
    """The table's row for ``version``; a version between rows (12.7) takes the next older row."""
    releases = cuda_releases()
    if version in releases:
        return releases[version]
    older = [v for v in releases if v <= version and v[0] == version[0]]
    return releases[max(older)] if older else None


def driver_cuda(driver: DriverVersion) -> tuple[int, int] | None:
    """The newest CUDA version whose minimum (GA) driver ``driver`` meets: what ``nvidia-smi`` shows."""
    fits = [r.version for r in cuda_releases().values() if driver >= r.min_driver]
    return max(fits) if fits else None


_CUDA_IN_TAG = re.compile(r"(?:^|[^a-z0-9])cuda[-_]?([0-9]{1,2})\.([0-9]{1,2})")
_LEADING_VERSION = re.compile(r"^v?([0-9]{1,2})\.([0-9]{1,2})(?:\.[0-9]+)?(?:$|[-_])")
_NGC_RELEASE = re.compile(r"^([0-9]{2}\.[0-9]{2})(?:$|[-_.])")


def split_image(image: str) -> tuple[str, str]:
    """'nvcr.io/nvidia/pytorch:24.05-py3@sha256:..' -> ('nvcr.io/nvidia/pytorch', '24.05-py3')."""
    ref = image.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1 :]
    return ref, ""


def _repository_path(repo: str) -> str:
    """Drop a registry host: 'docker.io/library/tensorflow/x' keeps 'tensorflow/x'."""
    parts = repo.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        if parts[0] in ("docker.io", "index.docker.io", "registry-1.docker.io"):
            parts = parts[1:]
            if parts and parts[0] == "library":
                parts = parts[1:]
            return "/".join(parts)
        return "/".join(parts)
    return repo


def image_cuda(image: str) -> ImageCuda | None:
    """The CUDA runtime of ``image``, when its reference says it (see the module docstring)."""
    repo, tag = split_image(image.strip())
    if not tag:
        return None
    lowered = tag.lower()
    path = _repository_path(repo.lower())
    m = _CUDA_IN_TAG.search(lowered)
    if m:
        return ImageCuda(image, (int(m.group(1)), int(m.group(2))), "tag")
    name = path.rsplit("/", 1)[-1]
    facts = _images()
    if name == "cuda" or path.endswith("/cuda"):
        m = _LEADING_VERSION.match(lowered)
        if m:
            return ImageCuda(image, (int(m.group(1)), int(m.group(2))), "tag")
        return None
    if path.startswith("nvcr.io/nvidia/") and name in facts["ngc_images"]:
        m = _NGC_RELEASE.match(lowered)
        found = facts["ngc"].get(m.group(1)) if m else None
        return ImageCuda(image, _version(found), "ngc") if found else None
    if path in ("tensorflow/tensorflow", "tensorflow"):
        if "gpu" not in lowered:
            return None
        m = _LEADING_VERSION.match(lowered)
        found = facts["tensorflow"].get(f"{m.group(1)}.{m.group(2)}") if m else None
        return ImageCuda(image, _version(found), "tensorflow") if found else None
    if path in ("pytorch/pytorch",):
        m = _LEADING_VERSION.match(lowered)
        found = facts["pytorch"].get(f"{m.group(1)}.{m.group(2)}") if m else None
        return ImageCuda(image, _version(found), "pytorch") if found else None
    return None


ComputeCapability = tuple[int, int]


@dataclass(frozen=True, slots=True)
class CudaArch:
    """The compute capabilities one CUDA release can compile real kernels (``sm_XY``) for."""

    version: tuple[int, int]
    lowest: ComputeCapability
    highest: ComputeCapability


@functools.cache
def cuda_archs() -> dict[tuple[int, int], CudaArch]:
    """``data/cuda-arch.csv`` by CUDA (major, minor); sources in ``data/cuda.SOURCES.md``."""
    out: dict[tuple[int, int], CudaArch] = {}
    for row in csv.DictReader(io.StringIO(read_text("cuda-arch.csv"))):
        arch = CudaArch(
            _version(row["cuda_version"]),
            _version(row["min_compute_capability"]),
            _version(row["max_compute_capability"]),
        )
        out[arch.version] = arch
    return out


def cuda_arch(version: tuple[int, int]) -> CudaArch | None:
    """The row for ``version``; between rows the one before (same major); after the last row None (a newer
    release may target newer GPUs: not judged)."""
    archs = cuda_archs()
    if version in archs:
        return archs[version]
    if version > max(archs):
        return None
    older = [v for v in archs if v <= version and v[0] == version[0]]
    return archs[max(older)] if older else None


def first_cuda_for(cc: ComputeCapability) -> tuple[int, int] | None:
    """The first CUDA release with a real target for compute capability ``cc`` (sm_89 -> 11.8)."""
    fits = [a.version for a in cuda_archs().values() if a.lowest <= cc <= a.highest]
    return min(fits) if fits else None

"""The packaged CUDA facts: NVIDIA's minimum-driver table and the CUDA version read from image references."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kgpu.catalog.cuda import (
    compat_floor,
    cuda_releases,
    driver_cuda,
    format_driver,
    image_cuda,
    min_driver,
    parse_driver,
)

REFERENCE = Path("/work/shared/reference/cuda-min-driver.csv")
PACKAGED = (
    Path(__file__).resolve().parent.parent / "src" / "kgpu" / "catalog" / "data" / "cuda-min-driver.csv"
)


def test_table_rows_and_types():
    releases = cuda_releases()
    assert releases[(12, 4)].min_driver == (550, 54, 14)
    assert releases[(12, 4)].min_driver_latest_update == (550, 54, 15)
    assert releases[(11, 0)].min_driver == (450, 36, 6)
    assert releases[(10, 2)].min_driver == (440, 33)
    assert (12, 7) not in releases  # there was no CUDA 12.7
    assert min_driver((12, 7)) == releases[(12, 6)]
    assert min_driver((7, 5)) is None


def test_packaged_table_keeps_every_row_of_nvidia_table():
    """Rows 11.0 and later are NVIDIA's table unchanged (the packaged file adds only older releases)."""
    rows = list(csv.DictReader(PACKAGED.read_text().splitlines()))
    modern = [r for r in rows if int(r["cuda_version"].split(".")[0]) >= 11]
    assert [r["cuda_version"] for r in modern][:3] == ["11.0", "11.1", "11.2"]
    if REFERENCE.exists():  # the team's reference copy, when this checkout has the shared tree
        assert modern == list(csv.DictReader(REFERENCE.read_text().splitlines()))


def test_driver_versions():
    assert parse_driver("550.54.15") == (550, 54, 15)
    assert parse_driver("470.x") is None
    assert format_driver((450, 36, 6)) == "450.36.06"
    assert driver_cuda((535, 104, 5)) == (12, 2)
    assert driver_cuda((470, 182, 3)) == (11, 4)
    assert compat_floor(12) == (525, 60, 13)
    assert compat_floor(10) is None


@pytest.mark.parametrize(
    ("image", "version", "source"),
    [
        ("nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", (12, 4), "tag"),
        ("docker.io/nvidia/cuda:11.8.0-base-ubuntu22.04", (11, 8), "tag"),
        ("nvcr.io/nvidia/cuda:12.2.0-devel-ubuntu22.04@sha256:" + "a" * 64, (12, 2), "tag"),
        ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", (12, 1), "tag"),
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda10.2", (10, 2), "tag"),
        ("tensorflow/tensorflow:2.15.0-gpu", (12, 2), "tensorflow"),
        ("tensorflow/tensorflow:2.11.0-gpu-jupyter", (11, 2), "tensorflow"),
        ("nvcr.io/nvidia/pytorch:24.05-py3", (12, 4), "ngc"),
        ("nvcr.io/nvidia/tritonserver:23.10-py3", (12, 2), "ngc"),
        ("pytorch/pytorch:2.5.1", (12, 4), "pytorch"),
    ],
)
def test_image_cuda(image, version, source):
    found = image_cuda(image)
    assert found is not None
    assert (found.version, found.source) == (version, source)


@pytest.mark.parametrize(
    "image",
    [
        "tensorflow/tensorflow:2.15.0",
        "nvidia/cuda:latest",
        "nginx:1.27",
        "rayproject/ray:2.46.0-gpu",
        "nvcr.io/nvidia/pytorch:99.01-py3",
        "registry.local:5000/cuda",
        "pytorch/pytorch:latest",
    ],
)
def test_image_without_known_cuda(image):
    assert image_cuda(image) is None

"""The GPU's architecture against the image's CUDA: kernels the GPU has no code for.

Seed 002 runs a ``nvidia/cuda:10.0-cudnn7-devel-centos7`` image on RTX 4090 hosts. CUDA 10.0 compiles real
kernels up to compute capability 7.5 (Turing); an RTX 4090 is 8.9 (Ada). A cubin for X.y runs only on X.z
(same major, z >= y), so the image's own kernels and its cuDNN/cuBLAS run there only if they carry PTX that
the driver JIT-compiles (slowly, at first start); what carries none fails with "no kernel image is available
for execution on the device". The driver check (``cuda-driver-insufficient``) cannot see this: a new
driver runs an old runtime fine.

The GPU's compute capability comes from GPU Feature Discovery's ``nvidia.com/gpu.compute.major`` /
``.minor`` labels; the image's CUDA from its reference (:func:`kgpu.catalog.cuda.image_cuda`); what each
CUDA release targets from ``catalog/data/cuda-arch.csv`` (NVIDIA's CUDA Toolkit Release Notes). A GPU of a
newer major than the release's newest target is a warning (PTX may save it; the guide's own
``cuda-sample:vectoradd-cuda10.2`` carries PTX and passes); a GPU older than the release's oldest target
(a CUDA 13 image on a V100) has no code at all: an error. Nodes without the labels are not judged
(``cuda-driver-unknown`` already says GFD is missing).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kgpu.catalog.cuda import ComputeCapability, ImageCuda, cuda_arch, first_cuda_for, image_cuda
from kgpu.doctor.findings import ERROR, WARNING, Finding
from kgpu.doctor.state import ClusterState

MAJOR = "nvidia.com/gpu.compute.major"
MINOR = "nvidia.com/gpu.compute.minor"


def node_compute_capability(labels: Mapping[str, str]) -> ComputeCapability | None:
    """GFD's compute capability of the node's GPUs; None without (valid) labels."""
    major, minor = labels.get(MAJOR, ""), labels.get(MINOR, "")
    if not (major.isdigit() and minor.isdigit()) or len(major) > 3 or len(minor) > 3:
        return None
    return int(major), int(minor)


def _cc(cc: ComputeCapability) -> str:
    return f"{cc[0]}.{cc[1]}"


def check_cuda_arch(state: ClusterState) -> Iterator[Finding]:
    cache: dict[str, ImageCuda | None] = {}
    for pod in state.pods:
        if pod.gpus <= 0 or not pod.node_name or pod.terminated:
            continue
        node = state.node_by_name.get(pod.node_name)
        if node is None or node.virtual:
            continue
        cc = node_compute_capability(node.labels)
        if cc is None:
            continue
        product = node.labels.get("nvidia.com/gpu.product", "")
        gpu = f"{product} (compute capability {_cc(cc)})" if product else f"compute capability {_cc(cc)}"
        for image in pod.images:
            if image not in cache:
                cache[image] = image_cuda(image)
            img = cache[image]
            arch = cuda_arch(img.version) if img is not None else None
            if img is None or arch is None:
                continue
            first = first_cuda_for(cc)
            use = f"CUDA >= {first[0]}.{first[1]}" if first else "a CUDA release that targets it"
            if cc < arch.lowest:
                yield Finding(
                    "cuda-arch-unsupported",
                    ERROR,
                    pod.ref,
                    f"image {image} (CUDA {img.name}) on node {node.name}: its GPU is {gpu}, and CUDA {img.name} "
                    f"builds no code below compute capability {_cc(arch.lowest)}: the kernels fail with "
                    '"no kernel image is available for execution on the device"',
                    f"# use an image built with CUDA <= {_last_cuda_for(cc)} for this GPU, or run the pod on "
                    f"newer GPUs (nodeSelector on {MAJOR})",
                )
            elif cc[0] > arch.highest[0]:
                yield Finding(
                    "cuda-arch-unsupported",
                    WARNING,
                    pod.ref,
                    f"image {image} (CUDA {img.name}) on node {node.name}: its GPU is {gpu}, newer than anything "
                    f"CUDA {img.name} compiles for (up to {_cc(arch.highest)}): only code shipped as PTX runs, "
                    "JIT-compiled by the driver at first start; kernels and libraries (cuDNN, cuBLAS) without "
                    'it fail with "no kernel image is available for execution on the device"',
                    f"# rebuild the image on {use} (the first release with sm_{cc[0]}{cc[1]}: "
                    f"FROM nvidia/cuda:{first[0]}.{first[1]}.0-...), or run it on GPUs of compute capability "
                    f"{arch.highest[0]}.x"
                    if first
                    else f"# rebuild the image on {use}",
                )


def _last_cuda_for(cc: ComputeCapability) -> str:
    from kgpu.catalog.cuda import cuda_archs

    fits = [a.version for a in cuda_archs().values() if a.lowest <= cc <= a.highest]
    return f"{max(fits)[0]}.{max(fits)[1]}" if fits else "an older release"


CHECKS = {"cuda-arch-unsupported": check_cuda_arch}

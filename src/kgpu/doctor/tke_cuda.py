"""CUDA in the image against the driver of the TKE super-node spec a running pod got.

A super node has no GPU Feature Discovery labels, so ``kgpu.doctor.cuda`` cannot read its driver. The guide
(seed 003, "确保 CUDA 版本匹配") gives it per GPU type instead: V100 / T4 / A10 run CUDA 11.4 (driver 470),
the T4 vGPU slices CUDA 11.0 (driver 450), L20 / L40 CUDA 12.7 (``tke-gpu-specs.json``). For each pod on a
super node (``type: virtual-kubelet`` or instance type ``eklet``) with a ``gpu-type`` annotation, kgpu
finds the spec as ``kgpu tke match`` does and compares the CUDA version its images name
(``nvidia/cuda:11.4.0-...``, ``...-cuda11.7-...``): a newer major version is the guide's "CUDA driver
version is insufficient" (error); a newer minor version of the same major runs by minor-version
compatibility, except PTX JIT (warning). With a priority list the type is the one the spec matching picks
(the first that holds the pod); the finding names it.
"""

from __future__ import annotations

from collections.abc import Iterator

from kgpu.catalog.tke import TkeMatchError, tke_gpu_type
from kgpu.doctor.findings import ERROR, WARNING, Finding
from kgpu.doctor.state import ClusterState
from kgpu.sim.provisioners.tke.spec import GPU_TYPE, image_cuda, match_pod_spec


def check_supernode_cuda(state: ClusterState) -> Iterator[Finding]:
    for pod in state.pods:
        node = state.node_by_name.get(pod.node_name)
        if node is None or not node.virtual or GPU_TYPE not in pod.annotations or pod.model is None:
            continue
        try:
            match = match_pod_spec(dict(pod.annotations), dict(pod.model.spec.requests), dict(pod.model.limits))
        except TkeMatchError:
            continue  # the workloads check reports a spec that does not exist
        have = tke_gpu_type(match.gpu_type).cuda
        spec = tuple(int(x) for x in have.split(".")[:2])
        listed = str(pod.annotations[GPU_TYPE])
        which = match.gpu_type if listed == match.gpu_type else f"{match.gpu_type} (from '{listed}')"
        for image in pod.images:
            cuda = image_cuda(image)
            if cuda is None or cuda <= spec:
                continue
            wanted = f"{cuda[0]}.{cuda[1]}"
            if cuda[0] > spec[0]:
                yield Finding(
                    "tke-cuda-driver",
                    ERROR,
                    pod.ref,
                    f"CUDA driver version is insufficient: {image} is built for CUDA {wanted}; the super node's "
                    f"{which} spec runs CUDA {have} (seed 003's table), so the CUDA runtime fails to start",
                    f"use an image for CUDA {spec[0]}.x (e.g. nvidia/cuda:{have}.0-runtime-ubuntu20.04), or a GPU "
                    "type whose driver is newer (L20: CUDA 12.7)",
                )
            else:
                yield Finding(
                    "tke-cuda-driver",
                    WARNING,
                    pod.ref,
                    f"{image} is built for CUDA {wanted}; the super node's {which} spec runs CUDA {have}: it runs "
                    "by CUDA minor-version compatibility, but PTX JIT compilation fails",
                    f"use an image for CUDA {have} or older",
                )


CHECKS = {"tke-cuda-driver": check_supernode_cuda}

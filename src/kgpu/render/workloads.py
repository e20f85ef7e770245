"""Workload templates per GPU pool: a training Job, an inference Deployment + Service, two verification pods.

Each template carries exactly what its pool needs to schedule there: a toleration for every taint, a
nodeSelector on the pool's labels, ``nvidia.com/gpu`` limits, and on TKE super nodes the
``eks.tke.cloud.tencent.com/*`` annotations. Every pod template is annotated ``kgpu.dev/pool: <pool>`` so
the consistency check knows where it is meant to land.

The two verification pods prove different links of the chain: ``gpu-verify-<pool>`` (seed 000's
``gpu-standard-test``; the pool's ``verifyPods`` names them) asks for one ``nvidia.com/gpu`` (driver +
runtime + device plugin), ``gpu-verify-selector-<pool>`` (seed 000's ``gpu-test-pod``) only selects the
pool's nodes and runs ``nvidia-smi`` with the image's ``NVIDIA_VISIBLE_DEVICES=all`` (driver + runtime, no
device plugin). When the second passes and the first stays Pending, the device plugin is the problem.

TKE (seed 003): the training Job uses an explicit spec (gpu-count/cpu/mem annotations; 1 GPU, 8 cores,
32 GiB is a valid spec for both T4 and V100), the inference Deployment lets TKE round its requests up to a
spec. Both use the image cache: ``use-image-cache: auto`` with a pod disk from the guide's disk-size table
(:func:`tke_disk_size_gib`) and an ``ImageCache`` resource that pre-builds the cache, or the pool's
``imageCache: imc-...`` id of a cache made in the console (no ImageCache, no disk annotation), or none. TKE's GPUs run driver 470,
so TKE templates use CUDA 11 images.
"""

from __future__ import annotations

import json
import math
from typing import Any

from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.render import GPU_RESOURCE, MANAGED_BY, POOL_ANNOTATION, pool_selector, tolerations

TKE = "eks.tke.cloud.tencent.com/"
IMAGE_CACHE_API = "eks.cloud.tencent.com/v1"

# (training, inference, vectoradd, nvidia-smi) images; TKE super node GPUs run driver 470 (CUDA <= 11.4).
IMAGES = {
    "default": (
        "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        "nvcr.io/nvidia/tritonserver:24.08-py3",
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "nvidia/cuda:12.4.1-base-ubuntu22.04",
    ),
    "tke": (
        "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime",
        "nvcr.io/nvidia/tritonserver:21.08-py3",
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04",
        "nvidia/cuda:11.4.3-base-ubuntu20.04",
    ),
}
# Approximate unpacked sizes (GiB), the input of the TKE disk-size formula.
IMAGE_SIZES_GIB = {
    "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime": 5.0,
    "nvcr.io/nvidia/tritonserver:21.08-py3": 11.0,
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04": 1.0,
    "nvidia/cuda:11.4.3-base-ubuntu20.04": 0.2,
}
TKE_TRAIN_SPEC = {"gpu-count": "1", "cpu": "8", "mem": "32Gi"}


# Seed 003's disk-size table for the image cache (镜像大小 -> 推荐磁盘大小), GiB: below 2 -> 50, 2-5 -> 100,
# 5-10 -> 200, above 10 -> 300 or more. Its ~5 GB PyTorch example uses 200, so 5 counts as the 5-10 row.
DISK_TABLE_GIB = ((2.0, 50), (5.0, 100), (10.0, 200))
DISK_LARGE_GIB = 300


def tke_disk_size_gib(image_size_gib: float) -> int:
    """Seed 003's disk-size table; above 10 GiB of images, 300 GiB or the guide's formula (images x 1.5 +
    50 GiB workspace, rounded up to 10 GiB) when that is larger."""
    if image_size_gib < 0:
        raise ValueError("image size must not be negative")
    for below, disk in DISK_TABLE_GIB:
        if image_size_gib < below or (below == 10.0 and image_size_gib <= below):
            return disk
    return max(DISK_LARGE_GIB, int(math.ceil((image_size_gib * 1.5 + 50) / 10) * 10))


def _is_tke(pool: Pool) -> bool:
    return pool.kind == PoolKind.TKE_SUPERNODE


def _images(pool: Pool) -> tuple[str, str, str, str]:
    return IMAGES["tke" if _is_tke(pool) else "default"]


def tke_cache_images(pool: Pool) -> list[str]:
    """The images the pool's ImageCache holds: the profile's ``cacheImages`` (the user's own), else the
    example workloads' images."""
    if pool.cache_images:
        return list(pool.cache_images)
    train, infer, _, _ = _images(pool)
    return [train, infer]


def tke_disk_size(pool: Pool) -> int:
    """The cache's size and the pods' disk: the profile's ``cacheSizeGiB``, else seed 003's table."""
    if pool.cache_size_gib is not None:
        return pool.cache_size_gib
    return tke_disk_size_gib(sum(IMAGE_SIZES_GIB.get(i, 5.0) for i in tke_cache_images(pool)))


def _annotations(pool: Pool, *, explicit_spec: bool = False, cache: bool = False) -> dict[str, str]:
    ann = {POOL_ANNOTATION: pool.name}
    if _is_tke(pool):
        ann[TKE + "gpu-type"] = ",".join(pool.gpu_types)
        if explicit_spec:
            for key, value in TKE_TRAIN_SPEC.items():
                ann[TKE + key] = value
        if cache and pool.image_cache == "auto":
            ann[TKE + "use-image-cache"] = "auto"
            ann[TKE + "pod-resource"] = json.dumps({"disk": {"size": tke_disk_size(pool)}})
        elif cache and pool.image_cache.startswith("imc-"):
            ann[TKE + "use-image-cache"] = pool.image_cache  # a cache made in the console (方式二)
    return dict(sorted(ann.items()))


def _labels(app: str, pool: Pool) -> dict[str, str]:
    return {"app.kubernetes.io/name": app, **MANAGED_BY, POOL_ANNOTATION: pool.name}


def _resources(cpu: str | None, memory: str | None, gpus: int) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
        limits["memory"] = memory
    if gpus:
        requests[GPU_RESOURCE] = gpus
        limits[GPU_RESOURCE] = gpus
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _pod_spec(
    pool: Pool, containers: list[dict[str, Any]], *, select: bool = True, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    selector = pool_selector(pool)
    if select and selector:
        spec["nodeSelector"] = selector
    tols = tolerations(pool)
    if tols:
        spec["tolerations"] = tols
    spec.update(extra)
    spec["containers"] = containers
    return spec


def training_job(pool: Pool) -> dict[str, Any]:
    name = f"gpu-train-{pool.name}"
    image = _images(pool)[0]
    if _is_tke(pool):
        res = _resources(TKE_TRAIN_SPEC["cpu"], TKE_TRAIN_SPEC["mem"], 1)
        res["limits"]["cpu"] = TKE_TRAIN_SPEC["cpu"]
    else:
        res = _resources("2", "8Gi", 1)
    script = (
        "import torch; assert torch.cuda.is_available(), 'no CUDA device'; "
        "x = torch.randn(4096, 4096, device='cuda'); print(torch.cuda.get_device_name(0), (x @ x).sum().item())"
    )
    container = {
        "name": "train",
        "image": image,
        "command": ["python", "-c", script],
        "resources": res,
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    spec = _pod_spec(
        pool,
        [container],
        restartPolicy="Never",
        volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": _labels("gpu-train", pool)},
        "spec": {
            "backoffLimit": 2,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {
                    "labels": _labels("gpu-train", pool),
                    "annotations": _annotations(pool, explicit_spec=True, cache=True),
                },
                "spec": spec,
            },
        },
    }


def inference(pool: Pool) -> list[dict[str, Any]]:
    name = f"gpu-infer-{pool.name}"
    labels = _labels("gpu-infer", pool)
    selector = {"app.kubernetes.io/name": "gpu-infer", POOL_ANNOTATION: pool.name}
    res = _resources("4", "16Gi", 1) if _is_tke(pool) else _resources("1", "4Gi", 1)

    def probe(path: str, **extra: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": 10, **extra}

    container = {
        "name": "server",
        "image": _images(pool)[1],
        "command": ["tritonserver"],
        "args": ["--model-repository=/models", "--model-control-mode=explicit"],
        "ports": [
            {"name": "http", "containerPort": 8000},
            {"name": "grpc", "containerPort": 8001},
            {"name": "metrics", "containerPort": 8002},
        ],
        "startupProbe": probe("/v2/health/live", failureThreshold=30),
        "livenessProbe": probe("/v2/health/live", failureThreshold=3),
        "readinessProbe": probe("/v2/health/ready", failureThreshold=3),
        "resources": res,
        "volumeMounts": [{"name": "models", "mountPath": "/models"}],
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": selector,
            "ports": [
                {"name": "http", "port": 8000, "targetPort": "http"},
                {"name": "grpc", "port": 8001, "targetPort": "grpc"},
                {"name": "metrics", "port": 8002, "targetPort": "metrics"},
            ],
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels, "annotations": _annotations(pool, cache=True)},
                "spec": _pod_spec(pool, [container], volumes=[{"name": "models", "emptyDir": {}}]),
            },
        },
    }
    return [service, deployment]


def verification_pods(pool: Pool) -> list[dict[str, Any]]:
    _, _, vectoradd, smi = _images(pool)
    request_name, selector_name = pool.verify_pod_names()  # the pool's verifyPods, else gpu-verify-*
    by_request = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": request_name,
            "labels": _labels("gpu-verify", pool),
            "annotations": _annotations(pool),
        },
        "spec": _pod_spec(
            pool,
            [{"name": "vectoradd", "image": vectoradd, "resources": _resources(None, None, 1)}],
            select=False,
            restartPolicy="Never",
        ),
    }
    # On super nodes a pod gets a GPU only by asking for one; elsewhere the selector pod bypasses the plugin.
    smi_resources = _resources(None, None, 1) if _is_tke(pool) else {}
    smi_container: dict[str, Any] = {"name": "nvidia-smi", "image": smi, "command": ["nvidia-smi"]}
    if smi_resources:
        smi_container["resources"] = smi_resources
    by_selector = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": selector_name,
            "labels": _labels("gpu-verify-selector", pool),
            "annotations": _annotations(pool),
        },
        "spec": _pod_spec(pool, [smi_container], restartPolicy="Never"),
    }
    return [by_request, by_selector]


def image_cache(pool: Pool) -> dict[str, Any]:
    return {
        "apiVersion": IMAGE_CACHE_API,
        "kind": "ImageCache",
        "metadata": {"name": f"gpu-images-{pool.name}", "labels": dict(MANAGED_BY)},
        "spec": {
            "images": tke_cache_images(pool),
            "imageCacheSize": tke_disk_size(pool),
            "retentionDays": 30,
            "autoCreateEip": False,
        },
    }


def render(profile: Profile) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for pool in profile.gpu_pools:
        if _is_tke(pool) and pool.image_cache == "auto":
            docs.append(image_cache(pool))
        docs.append(training_job(pool))
        docs.extend(inference(pool))
        docs.extend(verification_pods(pool))
    from kgpu.render.dra import claim_workloads  # DRA pools claim their GPUs

    return claim_workloads(profile, docs)

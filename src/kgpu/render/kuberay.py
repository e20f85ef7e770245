"""A KubeRay RayCluster (ray.io/v1): CPU head, one GPU worker group per GPU pool.

The head gets ``num-cpus: "0"`` so Ray schedules no tasks on it (it should not compete with the GCS and
dashboard), and lands on the head pool (``kuberay.headPool``, else the first non-GPU pool). Each worker group
tolerates its pool's taints, selects its labels, advertises ``num-gpus`` to Ray and asks Kubernetes for the
same number of ``nvidia.com/gpu``; its min/max replicas are the pool's min/max size. Requests equal limits
(Ray sizes its resources from limits). The KubeRay operator itself is not rendered: install its Helm chart.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import Pool, Profile
from kgpu.render import GPU_RESOURCE, MANAGED_BY, POOL_ANNOTATION, pool_selector, tolerations

API = "ray.io/v1"


def head_pool(profile: Profile) -> Pool | None:
    cfg = profile.kuberay
    if cfg and cfg.head_pool:
        return profile.pool(cfg.head_pool)
    return next((p for p in profile.pools if not p.is_gpu), None)


def _placement(pool: Pool | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if pool is None:
        return out
    selector = pool_selector(pool)
    if selector:
        out["nodeSelector"] = selector
    tols = tolerations(pool)
    if tols:
        out["tolerations"] = tols
    return out


def _gpu_image(image: str) -> str:
    return image if image.endswith("-gpu") else f"{image}-gpu"


def render(profile: Profile) -> list[dict[str, Any]]:
    cfg = profile.kuberay
    if cfg is None:
        return []
    head = head_pool(profile)
    head_spec: dict[str, Any] = {
        **_placement(head),
        "containers": [
            {
                "name": "ray-head",
                "image": cfg.image,
                "ports": [
                    {"name": "gcs", "containerPort": 6379},
                    {"name": "dashboard", "containerPort": 8265},
                    {"name": "client", "containerPort": 10001},
                ],
                "resources": {
                    "requests": {"cpu": "2", "memory": "8Gi"},
                    "limits": {"cpu": "2", "memory": "8Gi"},
                },
            }
        ],
    }
    head_meta: dict[str, Any] = {"labels": dict(MANAGED_BY)}
    if head is not None:
        head_meta["annotations"] = {POOL_ANNOTATION: head.name}
    workers: list[dict[str, Any]] = []
    for pool in profile.gpu_pools:
        gpus = cfg.gpus_per_worker
        resources = {"cpu": "3", "memory": "12Gi", GPU_RESOURCE: gpus}
        max_replicas = pool.max_size if pool.max_size is not None else max(pool.min_size, 1)
        workers.append(
            {
                "groupName": f"gpu-{pool.name}",
                "replicas": min(max(pool.desired_size or pool.min_size, pool.min_size), max_replicas),
                "minReplicas": pool.min_size,
                "maxReplicas": max_replicas,
                "rayStartParams": {"num-gpus": str(gpus)},
                "template": {
                    "metadata": {"labels": dict(MANAGED_BY), "annotations": {POOL_ANNOTATION: pool.name}},
                    "spec": {
                        **_placement(pool),
                        "containers": [
                            {
                                "name": "ray-worker",
                                "image": _gpu_image(cfg.image),
                                "resources": {"requests": dict(resources), "limits": dict(resources)},
                            }
                        ],
                    },
                },
            }
        )
    spec: dict[str, Any] = {"rayVersion": cfg.ray_version}
    if cfg.enable_in_tree_autoscaling:
        spec["enableInTreeAutoscaling"] = True
    spec["headGroupSpec"] = {
        "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
        "template": {"metadata": head_meta, "spec": head_spec},
    }
    spec["workerGroupSpecs"] = workers
    from kgpu.render.dra import claim_workloads  # DRA pools' workers claim their GPUs

    return claim_workloads(profile, [
        {
            "apiVersion": API,
            "kind": "RayCluster",
            "metadata": {"name": f"{profile.metadata.name}-ray", "labels": dict(MANAGED_BY)},
            "spec": spec,
        }
    ])

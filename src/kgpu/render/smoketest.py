"""The GPU smoke-test pods ``kgpu run`` creates: what every seed runs by hand to prove the chain works.

Pure: a test (or an image and command), a GPU count and optionally a profile's GPU pool in, Pod manifests
out. With a pool the pod carries exactly what that pool needs to land there (its taints tolerated, its
labels selected, TKE annotations), as the workload templates do (``kgpu.render.workloads``). Without one
it tolerates the common GPU taint ``nvidia.com/gpu`` so it runs on the nodes the guides build.

Verdicts (``passed``): vector-add prints ``Test PASSED`` (cuda-samples), nvidia-smi exits 0, torch prints
the result of ``torch.cuda.is_available()``; a user image passes when it exits 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kgpu.model.profile import Pool, PoolKind
from kgpu.render import GPU_RESOURCE, MANAGED_BY, POOL_ANNOTATION, pool_selector, tolerations
from kgpu.render.workloads import IMAGES

TKE = "eks.tke.cloud.tencent.com/"
RUN_LABEL = "kgpu.dev/run"
TORCH_CHECK = (
    "import torch; ok = torch.cuda.is_available(); "
    "print('torch.cuda.is_available():', ok, torch.cuda.device_count() if ok else 0); "
    "raise SystemExit(0 if ok else 1)"
)


@dataclass(frozen=True)
class SmokeTest:
    name: str
    image: str
    command: tuple[str, ...] = ()
    marker: str = ""  # a line the log must contain to pass, besides exit code 0

    def passed(self, exit_code: int | None, log: str) -> bool:
        return exit_code == 0 and (not self.marker or self.marker in log)


def builtin(name: str, *, tke: bool = False) -> SmokeTest:
    _, _, vectoradd, smi = IMAGES["tke" if tke else "default"]
    if name == "vector-add":
        return SmokeTest(name, vectoradd, marker="Test PASSED")
    if name == "nvidia-smi":
        return SmokeTest(name, smi, ("nvidia-smi",))
    if name == "torch":
        image = "pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime" if tke else "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
        return SmokeTest(name, image, ("python", "-c", TORCH_CHECK), marker="torch.cuda.is_available(): True")
    raise ValueError(f"unknown test {name!r}")


TESTS = ("vector-add", "nvidia-smi", "torch")


def smoke_pod(test: SmokeTest, *, name: str, namespace: str, gpus: int = 1, pool: Pool | None = None,
              gpu_types: tuple[str, ...] = (), run_id: str = "") -> dict[str, Any]:
    """One Pod that runs ``test`` once (restartPolicy Never) on ``gpus`` GPUs."""
    container: dict[str, Any] = {"name": "test", "image": test.image}
    if test.command:
        container["command"] = list(test.command)
    if gpus:
        container["resources"] = {"limits": {GPU_RESOURCE: gpus}}
    annotations: dict[str, str] = {}
    spec: dict[str, Any] = {"restartPolicy": "Never"}
    if pool is not None:
        annotations[POOL_ANNOTATION] = pool.name
        selector = pool_selector(pool)
        if selector and pool.kind != PoolKind.TKE_SUPERNODE:
            spec["nodeSelector"] = selector
        tols = tolerations(pool)
        if tols:
            spec["tolerations"] = tols
    else:
        spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    types = gpu_types or (tuple(pool.gpu_types) if pool is not None and pool.kind == PoolKind.TKE_SUPERNODE else ())
    if pool is not None and pool.kind == PoolKind.TKE_SUPERNODE:
        # A super node sells a GPU spec per pod: the type annotation picks it, the limit sizes it.
        if types:
            annotations[TKE + "gpu-type"] = ",".join(types)
    elif types:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": list(types)}]},
            {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In",
                                   "values": sorted({t.lower() for t in types})}]},
        ]}}}
    spec["containers"] = [container]
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/name": "kgpu-run", **MANAGED_BY, "kgpu.dev/test": test.name,
                   **({RUN_LABEL: run_id} if run_id else {})},
    }
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}

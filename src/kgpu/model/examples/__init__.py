"""The example workloads ``kgpu plan`` places when given none: copies of the seeds' workloads.

- ``000-pytorch-training.yaml``, ``000-tensorflow-serving.yaml``: seed 000 (EKS + Karpenter GPU pool);
- ``001-cuda-vector-add.yaml``: seed 001 (10 replicas selecting ``nvidia.com/gpu=true`` nodes);
- ``002-vector-add-pod.yaml``: seed 002 (the on-prem verification pod);
- ``004-raycluster.yaml``: seed 004 (KubeRay: CPU head, one GPU worker tolerating ray.io/node-type=worker);
- ``tke/003-supernode-gpu-pods.yaml``: seed 003 (TKE super nodes: the guide's examples 1-8, its image-cache
  pods and its complete inference service). They only make sense on a TKE profile, so they live apart and
  are the default workloads of TKE profiles instead of the others.
"""

from __future__ import annotations

from importlib import resources

from kgpu.model.load import Objects, parse_text


def example_files(provider: str | None = None) -> list[tuple[str, bytes]]:
    """(name, bytes) of the example manifests for a provider (``tke``: the TKE ones), in name order."""
    root = resources.files(__name__)
    if provider == "tke":
        root = root / "tke"
    names = sorted(p.name for p in root.iterdir() if p.name.endswith(".yaml"))
    return [(name, (root / name).read_bytes()) for name in names]


def example_workloads(provider: str | None = None) -> Objects:
    """The examples parsed, each labelled ``<examples>/<file>`` in messages."""
    out = Objects()
    for name, data in example_files(provider):
        out.extend(parse_text(data, f"<examples>/{name}"))
    return out

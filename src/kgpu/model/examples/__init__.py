"""The example workloads ``kgpu plan`` places when given none: copies of the seeds' workloads.

- ``000-pytorch-training.yaml``, ``000-tensorflow-serving.yaml``: seed 000 (EKS + Karpenter GPU pool);
- ``001-cuda-vector-add.yaml``: seed 001 (10 replicas selecting ``nvidia.com/gpu=true`` nodes);
- ``002-vector-add-pod.yaml``: seed 002 (the on-prem verification pod);
- ``004-raycluster.yaml``: seed 004 (KubeRay: CPU head, one GPU worker tolerating ray.io/node-type=worker).
"""

from __future__ import annotations

from importlib import resources

from kgpu.model.load import Objects, parse_text


def example_files() -> list[tuple[str, bytes]]:
    """(name, bytes) of every example manifest, in name order."""
    root = resources.files(__name__)
    names = sorted(p.name for p in root.iterdir() if p.name.endswith(".yaml"))
    return [(name, (root / name).read_bytes()) for name in names]


def example_workloads() -> Objects:
    """The examples parsed, each labelled ``<examples>/<file>`` in messages."""
    out = Objects()
    for name, data in example_files():
        out.extend(parse_text(data, f"<examples>/{name}"))
    return out

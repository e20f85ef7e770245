"""The example workloads ``kgpu plan`` places when given none: copies of the seeds' workloads.

- ``000-pytorch-training.yaml``, ``000-tensorflow-serving.yaml``: seed 000 (EKS + Karpenter GPU pool);
- ``001-cuda-vector-add.yaml``: seed 001 (10 replicas selecting ``nvidia.com/gpu=true`` nodes);
- ``002-vector-add-pod.yaml``: seed 002 (the on-prem verification pod);
- ``004-raycluster.yaml``: seed 004 (KubeRay: CPU head, one GPU worker tolerating ray.io/node-type=worker);
- ``tke/003-supernode-gpu-pods.yaml``: seed 003 (TKE super nodes: the guide's examples 1, 2, 2b, 4, 5, 7, 8,
  its image-cache pods and its complete inference service). They only make sense on a TKE profile, so they
  live apart. ``tke/contradicting/`` holds examples 3 and 6, which contradict the guide's own spec tables
  and stay Pending (docs/tke.md): test fixtures, not default workloads.

A profile planned without workloads gets the examples of the guide its template follows (:func:`seed_of`),
so ``kgpu init -t T && kgpu plan`` shows T's own guide working; the guide is read from the profile's shape
(provider, pool kinds, a ``kuberay`` section), not its name, so a renamed profile keeps its examples.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from kgpu.model.inputs import Objects
from kgpu.model.load import parse_text

if TYPE_CHECKING:
    from kgpu.model.profile import Profile

# The seed each built-in template follows, and the file-name prefix of that seed's examples.
SEEDS = {"eks-karpenter": "000", "eks-eksctl": "001", "onprem": "002", "tke-supernode": "003", "kuberay": "004"}


def seed_of(profile: Profile) -> str:
    """The seed whose guide a profile follows: TKE super nodes 003, a KubeRay section 004, Karpenter pools
    000, eksctl node groups 001, anything else (static hosts) 002."""
    kinds = {str(p.kind) for p in profile.pools}
    if str(profile.provider) == "tke" or "tke-supernode" in kinds:
        return "003"
    if profile.kuberay is not None:
        return "004"
    if "karpenter" in kinds:
        return "000"
    if "nodegroup" in kinds:
        return "001"
    return "002"


def example_files(provider: str | None = None, *, seed: str | None = None) -> list[tuple[str, bytes]]:
    """(name, bytes) of the example manifests, in name order: a provider's (``tke``: the TKE ones; else
    every other seed's), or one seed's (``000`` ... ``004``; ``003-contradicting`` for TKE examples 3 and 6)."""
    root = resources.files(__name__)
    prefix = ""
    if seed == "003-contradicting":
        root = root / "tke" / "contradicting"
    elif provider == "tke" or seed == "003":
        root = root / "tke"
    elif seed is not None:
        prefix = f"{seed}-"
    names = sorted(p.name for p in root.iterdir() if p.name.endswith(".yaml") and p.name.startswith(prefix))
    return [(name, (root / name).read_bytes()) for name in names]


def example_workloads(provider: str | None = None, *, seed: str | None = None) -> Objects:
    """The examples parsed, each labelled ``<examples>/<file>`` in messages."""
    out = Objects()
    for name, data in example_files(provider, seed=seed):
        out.extend(parse_text(data, f"<examples>/{name}"))
    return out


def profile_examples(profile: Profile) -> Objects:
    """The examples of the guide ``profile`` follows: the default workloads of ``kgpu plan``."""
    return example_workloads(seed=seed_of(profile))

"""Shared-GPU cost: a pod pays its physical share of the GPUs it holds (1/R of a time-sliced GPU, a MIG
device by its memory slices of 8); the idle slices are idle cost; pods plus idle are the node's price."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from kgpu.model.load import parse_documents
from kgpu.model.profile import parse_profile
from kgpu.model.sharing import DeviceConfig
from kgpu.sim.plan import plan
from kgpu.sim.sharing import gpu_cost_split
from test_sharing import gpu_pod, karpenter_pool, profile_dict, time_slicing

CONFIGS = [
    ("A10G", DeviceConfig(strategy="time-slicing", replicas={"nvidia.com/gpu": 4})),
    ("A10G", DeviceConfig(strategy="time-slicing", replicas={"nvidia.com/gpu": 10}, rename=True)),
    ("H100", DeviceConfig(mig_strategy="mixed", mig_config="all-balanced")),
    ("A100", DeviceConfig(mig_strategy="single", mig_config="all-1g.5gb")),
    ("H200", DeviceConfig(strategy="time-slicing", replicas={"nvidia.com/mig-1g.18gb": 3}, mig_strategy="mixed",
                          mig_config="all-1g.18gb")),
]


@given(
    which=st.integers(0, len(CONFIGS) - 1),
    gpus=st.integers(1, 8),
    price=st.floats(0.01, 200.0, allow_nan=False),
    fill=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12),
)
def test_pods_plus_idle_is_the_node_price(which: int, gpus: int, price: float, fill: list[float]) -> None:
    """Any packing of a node's advertised devices: the pods' GPU cost plus idle is exactly its price, idle
    is never negative, and a node full of pods has no idle cost."""
    gpu, cfg = CONFIGS[which]
    advertised = cfg.advertised(gpu, gpus)
    shares = {r: cfg.unit_share(gpu, r) for r in advertised}
    left = dict(advertised)
    pods: list[tuple[str, dict[str, int]]] = []
    for i, f in enumerate(fill):
        for r in sorted(left):
            n = int(left[r] * f)
            if n:
                pods.append((f"p{i}-{r}", {r: n}))
                left[r] -= n
    costs, idle = gpu_cost_split(price, gpus, pods, shares)
    assert sum(costs.values(), Fraction(0)) + idle == Fraction(price)
    assert idle >= 0
    # pods pay their devices' physical share; the rest (free devices, memory slices no MIG device takes) is idle
    held = sum((shares[r] * (advertised[r] - left[r]) for r in advertised), Fraction(0))
    assert idle == Fraction(price) - Fraction(price) / gpus * held
    assert idle >= Fraction(price) / gpus * sum((shares[r] * n for r, n in left.items()), Fraction(0))


def test_a_full_node_has_no_idle_cost() -> None:
    gpu, cfg = CONFIGS[2]
    advertised = cfg.advertised(gpu, 8)
    shares = {r: cfg.unit_share(gpu, r) for r in advertised}
    costs, idle = gpu_cost_split(98.32, 8, [(r, {r: n}) for r, n in advertised.items()], shares)
    assert idle == 0
    # all-balanced: 1g.10gb x2 (2 slices), 2g.20gb (2), 3g.40gb (4) of 8 memory slices
    assert costs["nvidia.com/mig-3g.40gb"] == Fraction(98.32) / 2


def test_plan_reports_each_pod_share_and_idle() -> None:
    """3 single-GPU pods on a g5.xlarge shared 4 ways: each pays 1/4 of the node, a quarter is idle."""
    prof = parse_profile(profile_dict(karpenter_pool("infer", ["g5.xlarge"], time_slicing(4))))
    work = parse_documents([gpu_pod(f"p{i}") for i in range(3)], "w.yaml")
    result = plan(prof, work).simulation
    (entry,) = result.extra["shared_gpus"]
    price = entry["hourly_price"]
    assert entry["devices"] == {"nvidia.com/gpu": {"used": 3, "advertised": 4}}
    assert set(entry["pods"]) == {"default/p0", "default/p1", "default/p2"}
    for cost in entry["pods"].values():
        assert abs(cost - price / 4) < 1e-6
    assert abs(entry["idle"] - price / 4) < 1e-6

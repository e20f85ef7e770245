"""Test builder for catalog instance types: fake types without touching the packaged data."""

from __future__ import annotations

from kgpu.catalog.instance import DEFAULT_MAX_PODS, InstanceType, parse_instance_name


def make_instance_type(
    name: str = "g9.xlarge",
    *,
    vcpus: int = 4,
    memory_mib: int = 16384,
    gpus: int = 0,
    gpu_name: str = "t4",
    gpu_manufacturer: str = "nvidia",
    gpu_memory_mib: int = 16384,
    max_pods: int = DEFAULT_MAX_PODS,
    arch: str | None = None,
) -> InstanceType:
    """An InstanceType named like an EC2 type (family, category, generation and size come from the name).

    GPU fields are only set when ``gpus`` > 0, as in the real catalog.
    """
    parts = parse_instance_name(name)
    if parts is None:
        raise ValueError(f"not an EC2-style type name: {name!r}")
    return InstanceType(
        name=name,
        family=parts.family,
        category=parts.category,
        generation=parts.generation,
        size=parts.size,
        arch=arch or parts.arch,
        vcpus=vcpus,
        memory_mib=memory_mib,
        gpu_name=gpu_name if gpus else "",
        gpu_manufacturer=gpu_manufacturer if gpus else "",
        gpu_count=gpus,
        gpu_memory_mib=gpu_memory_mib if gpus else 0,
        gpu_display_name=gpu_name.upper() if gpus else "",
        max_pods=max_pods,
    )

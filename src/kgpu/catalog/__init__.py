"""Facts as data: instance types, GPU specs, prices, TKE spec tables.

The lowest layer: it imports only the standard library and ``kgpu.errors``, and reads only its own data
files (``kgpu/catalog/data``, see its README for sources). One module per provider: ``aws`` (EC2 types
with Karpenter's labels and allocatable) and ``tke`` (Tencent TKE super-node GPU specs).
"""

from __future__ import annotations

from kgpu.catalog.aws import Catalog, RegionPricing, aws_catalog, merge_overrides, with_max_pods
from kgpu.catalog.instance import InstanceType, Offering

__all__ = [
    "Catalog",
    "InstanceType",
    "Offering",
    "RegionPricing",
    "aws_catalog",
    "merge_overrides",
    "with_max_pods",
]

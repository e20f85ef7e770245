"""kgpu's AWS catalog as the instance types of the Karpenter oracle (cmd/karpenter-oracle's input).

Both sides of the differential test see the same types: the oracle's capacity and kube-reserved are kgpu's
``InstanceType.capacity()`` and ``overhead()`` (so Karpenter's allocatable is kgpu's), its requirements are
the labels kgpu puts on a node of the type, and its offerings are the catalog's (zone, capacity type, price)
in the cluster's zones (on EKS the EC2NodeClass's subnets decide the zones a type is offered in).

As the AWS provider's ``computeRequirements`` does, a type carries ``DoesNotExist`` for every
``karpenter.k8s.aws/*`` label it has no value for (GPU labels without GPUs, ``instance-local-nvme`` without
local NVMe, ...), and every such label is registered as well known.

Run as a script to print the JSON: ``python conformance/tests/karpenter_types.py [REGION [ZONE...]]``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from kgpu.catalog import Catalog, aws_catalog
from kgpu.catalog.instance import (
    LABEL_CAPACITY_TYPE,
    LABEL_GPU_COUNT,
    LABEL_GPU_MANUFACTURER,
    LABEL_GPU_MEMORY,
    LABEL_GPU_NAME,
    LABEL_ZONE,
)
from kgpu.model.nodepool import NORMALIZED_LABELS

GPU_LABELS = (LABEL_GPU_NAME, LABEL_GPU_MANUFACTURER, LABEL_GPU_COUNT, LABEL_GPU_MEMORY)
AWS_PREFIX = "karpenter.k8s.aws/"


def _quantity(key: str, v: int) -> str:
    return f"{v}m" if key == "cpu" else str(v)


def _resources(values: dict[str, int]) -> dict[str, str]:
    return {k: _quantity(k, v) for k, v in sorted(values.items()) if v}


def region_zones(catalog: Catalog, region: str) -> list[str]:
    return sorted({o.zone for t in catalog.types() for o in catalog.offerings(t.name, region)})


def instance_types(catalog: Catalog, region: str, zones: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every type sold in ``region`` (in ``zones`` when given), as the oracle's ``instanceTypes``."""
    out: list[dict[str, Any]] = []
    provider = well_known_labels(catalog, region)
    allowed = set(zones)
    for t in catalog.types():
        offerings = [
            {"zone": o.zone, "capacityType": o.capacity_type, "price": o.price}
            for o in catalog.offerings(t.name, region)
            if not allowed or o.zone in allowed
        ]
        if not offerings:
            continue
        labels = t.labels(region, offerings[0]["zone"], offerings[0]["capacityType"])
        reqs: list[dict[str, Any]] = [
            {"key": k, "operator": "In", "values": [v]}
            for k, v in sorted(labels.items())
            if k not in (LABEL_ZONE, LABEL_CAPACITY_TYPE) and k not in NORMALIZED_LABELS
        ]  # the deprecated aliases are node labels, not instance-type requirements
        reqs.extend({"key": k, "operator": "DoesNotExist"} for k in provider if k not in labels)
        out.append(
            {
                "name": t.name,
                "capacity": _resources(t.capacity()),
                "kubeReserved": _resources(t.overhead()),
                "requirements": reqs,
                "offerings": offerings,
            }
        )
    return out


def well_known_labels(catalog: Catalog, region: str) -> list[str]:
    """The provider's labels (``karpenter.k8s.aws/*``) the catalog's types carry."""
    keys: set[str] = set(GPU_LABELS)
    for t in catalog.types():
        keys.update(k for k in t.labels(region, "", "") if k.startswith(AWS_PREFIX))
    return sorted(keys)


def main(argv: Sequence[str]) -> int:
    region = argv[0] if argv else "us-west-2"
    catalog = aws_catalog(region)
    doc = {
        "instanceTypes": instance_types(catalog, region, argv[1:]),
        "wellKnownLabels": well_known_labels(catalog, region),
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

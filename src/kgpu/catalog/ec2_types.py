"""Every EC2 instance type Karpenter's AWS provider knows, with the labels it gives the type's nodes.

Data: ``data/aws-karpenter-types.csv``, from the provider's generated instance-type reference (``data/README.md``
names it): 1,363 types, Linux. No prices and no regions: kgpu's priced catalog (``kgpu.catalog.aws``) is a
subset, and this table is how ``kgpu plan`` tells when a NodePool's requirements reach types that subset
lacks (``kgpu.sim.provisioners.karpenter.requirements.uncatalogued``).
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache

from kgpu.catalog._resources import read_text

_PREFIX = "karpenter.k8s.aws/instance-"


@lru_cache(maxsize=1)
def ec2_type_labels() -> dict[str, dict[str, str]]:
    """Each type's labels (``kubernetes.io/arch``, ``kubernetes.io/os``, ``node.kubernetes.io/instance-type``
    and the ``karpenter.k8s.aws/instance-*`` ones it has), by type name."""
    out: dict[str, dict[str, str]] = {}
    for row in csv.DictReader(io.StringIO(read_text("aws-karpenter-types.csv"))):
        name = row.pop("instance_type")
        labels = {
            "kubernetes.io/arch": row.pop("arch"),
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": name,
        }
        labels.update((_PREFIX + key, value) for key, value in row.items() if value)
        out[name] = labels
    return out

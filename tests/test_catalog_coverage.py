"""Every EC2 type Karpenter's AWS provider knows (``kgpu.catalog.ec2_types``, from its generated instance-type
reference) against kgpu's priced catalog: the labels agree wherever both have a type, and a Karpenter pool whose
requirements reach types the priced catalog lacks in the region gets a plan warning naming them."""

from __future__ import annotations

from typing import Any

import pytest

from kgpu.catalog import aws_catalog
from kgpu.catalog.ec2_types import ec2_type_labels
from kgpu.model.profile import parse_profile
from kgpu.sim.provisioners.provision import provisioner_for

REGION = "us-west-2"


def test_the_table_reaches_types_the_priced_catalog_lacks() -> None:
    types = ec2_type_labels()
    assert len(types) > 1000
    for name in ("m7i.16xlarge", "p5e.48xlarge", "p6-b200.48xlarge", "g6f.xlarge"):
        assert name in types, name
    assert types["p6-b200.48xlarge"]["karpenter.k8s.aws/instance-gpu-name"] == "b200"
    assert types["m7i.16xlarge"]["karpenter.k8s.aws/instance-cpu"] == "64"
    assert types["g5g.xlarge"]["kubernetes.io/arch"] == "arm64"


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"])
def test_labels_agree_with_the_priced_catalog(region: str) -> None:
    """Each priced type's Karpenter labels (CPU, memory, GPU name/count/memory, family, generation, size,
    network and EBS bandwidth, NVMe, ...) are the reference's, value for value."""
    ec2 = ec2_type_labels()
    catalog = aws_catalog(region)
    compared = 0
    for t in catalog.types():
        offerings = catalog.offerings(t.name, region)
        theirs = ec2.get(t.name)
        if not offerings or theirs is None:  # p3 left the provider's reference
            continue
        mine = t.labels(region, offerings[0].zone, offerings[0].capacity_type)
        for key, value in theirs.items():
            assert mine.get(key, value) == value, (t.name, key, mine.get(key), value)
            compared += 1
    assert compared > 500


def profile(*pools: dict[str, Any]) -> Any:
    return parse_profile(
        {
            "metadata": {"name": "t"},
            "provider": "eks",
            "autoscaler": "karpenter",
            "cluster": {"region": REGION, "zones": ["us-west-2a", "us-west-2b"]},
            "monitoring": {"enabled": False},
            "pools": list(pools),
        }
    )


def warnings_of(*pools: dict[str, Any]) -> list[str]:
    return [w for w in provisioner_for(profile(*pools)).warnings if "no us-west-2 price" in w]


def test_a_pool_reaching_unpriced_types_is_warned() -> None:
    found = warnings_of({"name": "web", "kind": "karpenter", "requirements": {"families": ["m7i"]}})
    assert len(found) == 1
    text = found[0]
    assert text.startswith("pools[0] (web): its requirements also allow ")
    assert "m7i.16xlarge" in text or ", ..." in text
    count = int(text.split("also allow ", 1)[1].split(" ", 1)[0])
    have = {t.name for t in aws_catalog(REGION).types() if aws_catalog(REGION).offerings(t.name, REGION)}
    m7i = [n for n in ec2_type_labels() if n.startswith("m7i.")]
    assert count == len([n for n in m7i if n not in have])  # metal included: the family is all it asks


def test_a_pool_within_the_catalog_is_not_warned() -> None:
    assert warnings_of({"name": "one", "kind": "karpenter", "instanceTypes": ["m5.large"]}) == []
    native = {
        "name": "native",
        "kind": "karpenter",
        "requirements": [
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["g5.xlarge", "g5.2xlarge"],
            }
        ],
    }
    assert warnings_of(native) == []


def test_gpu_types_are_named_first() -> None:
    pool = {
        "name": "all",
        "kind": "karpenter",
        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
    }
    (text,) = warnings_of(pool)
    shown = text.split(" price for (", 1)[1].split("):", 1)[0].split(", ")
    assert all(name.split(".", 1)[0][0] in "gp" for name in shown[:6] if name != "..."), shown

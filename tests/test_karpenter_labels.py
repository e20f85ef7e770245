"""The AWS provider's labels as Karpenter reads them: the ``topology.ebs.csi.aws.com/zone`` alias
(aws/karpenter-provider-aws ``pkg/operator/operator.go`` adds it to ``NormalizedLabels``), the
``instance-capability-flex`` and ``instance-tenancy`` instance-type labels (``pkg/apis/v1/labels.go``,
``pkg/providers/instancetype/types.go``), and the architecture of a NodePool without requirements (no
default in Karpenter)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from builders_catalog import make_instance_type
from kgpu.catalog import aws_catalog
from kgpu.model.nodepool import LABEL_ZONE, normalize, pool_from_nodepool
from kgpu.model.objects import NodeSelector, Pod, Requirement, Term
from kgpu.render.karpenter import nodepool
from kgpu.sim.simulate import PROVISIONED, UNSCHEDULABLE
from test_provision_karpenter import GENERAL, GPU_TOL, catalog, make_pod, placed, profile, sim

AWS = "karpenter.k8s.aws/"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"
FLEX = AWS + "instance-capability-flex"
TENANCY = AWS + "instance-tenancy"

# the flex type is the cheapest, so a requirement that keeps it out shows in the launch
FLEX_CAT = catalog(
    (make_instance_type("c7i-flex.large", vcpus=2, memory_mib=4096), 0.08, 0.03),
    (make_instance_type("m5.large", vcpus=2, memory_mib=8192), 0.096, 0.04),
    (make_instance_type("m5.xlarge", vcpus=4, memory_mib=16384), 0.192, 0.08),
)
# an arm64 GPU type cheaper than the amd64 one
ARM_CAT = catalog(
    (make_instance_type("m5.large", vcpus=2, memory_mib=8192), 0.096, 0.04),
    (make_instance_type("g5g.xlarge", vcpus=4, memory_mib=8192, gpus=1, gpu_name="t4g"), 0.42, None),
    (make_instance_type("g4dn.xlarge", vcpus=4, memory_mib=16384, gpus=1, gpu_name="t4"), 0.526, None),
)


def native(*reqs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "native", "kind": "karpenter", "requirements": list(reqs), **extra}


def with_affinity(pod: Pod, *reqs: Requirement) -> Pod:
    return replace(pod, spec=replace(pod.spec, affinity=NodeSelector((Term(tuple(reqs)),))))


# --- topology.ebs.csi.aws.com/zone ------------------------------------------------------------------------


def test_ebs_zone_key_is_normalized_to_the_zone() -> None:
    assert normalize(EBS_ZONE) == LABEL_ZONE


def test_pod_selecting_the_ebs_zone_is_launched_in_that_zone() -> None:
    """A pod's node selector on the EBS CSI driver's zone key: Karpenter compares it as the zone, so it
    launches in us-west-2b (not refused with "does not have known values"), and the node carries the key
    (the driver's node plugin sets it), so kube-scheduler binds the pod there."""
    result = sim(profile(GENERAL), make_pod("a", selector={EBS_ZONE: "us-west-2b"}))
    p = placed(result, "a")
    assert p["phase"] == PROVISIONED, p["reason"]
    assert p["zone"] == "us-west-2b"
    node = next(st for st in result.nodes if st.name == p["node"])
    assert node.node.labels[EBS_ZONE] == "us-west-2b"
    assert node.node.labels[LABEL_ZONE] == "us-west-2b"


def test_pv_style_node_affinity_on_the_ebs_zone() -> None:
    """The required node affinity an EBS volume writes (``topology.ebs.csi.aws.com/zone In [zone]``), as a
    pod's own affinity; and NotIn on the key keeps that zone out, as NotIn on the zone does."""
    pod = with_affinity(make_pod("a"), Requirement(EBS_ZONE, "In", ("us-west-2b",)))
    assert placed(sim(profile(GENERAL), pod), "a")["zone"] == "us-west-2b"
    pod = with_affinity(make_pod("b"), Requirement(EBS_ZONE, "NotIn", ("us-west-2a",)))
    assert placed(sim(profile(GENERAL), pod), "b")["zone"] == "us-west-2b"


def test_pod_selecting_an_ebs_zone_the_pool_does_not_offer_is_refused_with_the_zones() -> None:
    p = placed(sim(profile(GENERAL), make_pod("a", selector={EBS_ZONE: "us-east-1a"})), "a")
    assert p["phase"] == UNSCHEDULABLE
    assert "does not have known values" not in p["reason"]
    assert "us-east-1a" in p["reason"]


def test_nodepool_requirement_on_the_ebs_zone_narrows_the_zones() -> None:
    """A NodePool requirement on the alias is a zone requirement (not a custom label the nodes get)."""
    pool = native({"key": EBS_ZONE, "operator": "In", "values": ["us-west-2b"]})
    result = sim(profile(pool), make_pod("a"), make_pod("b", cpu=1500))
    assert {n.zone for n in result.new_nodes} == {"us-west-2b"}
    pod = make_pod("c", selector={LABEL_ZONE: "us-west-2a"})
    assert placed(sim(profile(pool), pod), "c")["phase"] == UNSCHEDULABLE


def test_real_nodepool_with_the_ebs_zone_requirement() -> None:
    """A NodePool object read from the cluster: the requirement on the alias narrows the zones too."""
    obj = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "ebs"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": EBS_ZONE, "operator": "In", "values": ["us-west-2b"]}],
                }
            }
        },
    }
    pool, _ = pool_from_nodepool(obj, {}, "w.yaml: NodePool ebs")
    result = sim(profile(pool), make_pod("a"))
    assert placed(result, "a")["zone"] == "us-west-2b"


# --- instance-capability-flex ---------------------------------------------------------------------------


def test_flex_label_of_each_type() -> None:
    """true only for the ``-flex`` families, false on every other type (the packaged catalog has none)."""
    for name in ("c7i-flex.large", "m7i-flex.2xlarge"):
        assert make_instance_type(name).labels("r", "z", "spot")[FLEX] == "true"
    for t in aws_catalog("us-west-2").types():
        labels = t.labels("us-west-2", "us-west-2a", "spot")
        assert labels[FLEX] == "false", t.name
        assert labels[TENANCY] == "default", t.name


def test_pod_selecting_flex_false_keeps_the_non_flex_types() -> None:
    """``instance-capability-flex: "false"`` is well known with a value on every type: the pod gets the
    cheapest non-flex type, not "does not have known values"; ``"true"`` gets the flex type."""
    pool = {"name": "general", "kind": "karpenter", "capacityTypes": ["on-demand"]}
    p = placed(sim(profile(pool), make_pod("a", selector={FLEX: "false"}), cat=FLEX_CAT), "a")
    assert p["phase"] == PROVISIONED, p["reason"]
    assert p["instance_type"] == "m5.large"
    p = placed(sim(profile(pool), make_pod("b", selector={FLEX: "true"}), cat=FLEX_CAT), "b")
    assert p["instance_type"] == "c7i-flex.large"
    assert placed(sim(profile(pool), make_pod("c"), cat=FLEX_CAT), "c")["instance_type"] == "c7i-flex.large"


def test_nodepool_flex_requirement() -> None:
    """``instance-capability-flex In [false]`` in a NodePool keeps every non-flex type (a valid well-known
    key, not a restricted one); ``NotIn [false]`` keeps only the flex types."""
    keep = native(
        {"key": FLEX, "operator": "In", "values": ["false"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    )
    p = placed(sim(profile(keep), make_pod("a"), cat=FLEX_CAT), "a")
    assert p["instance_type"] == "m5.large"
    big = placed(sim(profile(keep), make_pod("b", cpu=3000), cat=FLEX_CAT), "b")
    assert big["instance_type"] == "m5.xlarge"
    only = native(
        {"key": FLEX, "operator": "NotIn", "values": ["false"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    )
    assert placed(sim(profile(only), make_pod("c"), cat=FLEX_CAT), "c")["instance_type"] == "c7i-flex.large"
    assert placed(sim(profile(only), make_pod("d", cpu=3000), cat=FLEX_CAT), "d")["phase"] == UNSCHEDULABLE


# --- instance-tenancy -----------------------------------------------------------------------------------


def test_nodepool_tenancy_default_keeps_every_type() -> None:
    """``instance-tenancy In [default]`` keeps every type: the same launches as without it."""
    pool = native(
        {"key": TENANCY, "operator": "In", "values": ["default"]},
        {"key": AWS + "instance-category", "operator": "In", "values": ["m"]},
    )
    plain = native({"key": AWS + "instance-category", "operator": "In", "values": ["m"]})
    pods = [make_pod("a"), make_pod("b", cpu=3000), make_pod("c", cpu=6000)]
    got = sim(profile(pool), *pods)
    want = sim(profile(plain), *pods)
    assert all(p.phase == PROVISIONED for p in got.placements)
    assert sorted(n.instance_type for n in got.new_nodes) == sorted(n.instance_type for n in want.new_nodes)


def test_pod_selecting_tenancy() -> None:
    """A pod selecting ``default`` tenancy is launched for; ``dedicated`` is not offered (the catalog's
    prices are default tenancy's), so the pod is refused with the values the types have."""
    p = placed(sim(profile(GENERAL), make_pod("a", selector={TENANCY: "default"})), "a")
    assert p["phase"] == PROVISIONED, p["reason"]
    assert (p["instance_type"], p["capacity_type"]) == ("m5.large", "spot")
    p = placed(sim(profile(GENERAL), make_pod("b", selector={TENANCY: "dedicated"})), "b")
    assert p["phase"] == UNSCHEDULABLE
    assert f"{TENANCY} In [default]" in p["reason"]


def test_rendered_nodepool_with_the_provider_labels_is_valid() -> None:
    """The NodePool ``kgpu render`` writes for requirements on these keys passes the NodePool CRD's rules."""
    from kgpu.render.validate import validate_document

    pool = native(
        {"key": FLEX, "operator": "In", "values": ["false"]},
        {"key": TENANCY, "operator": "In", "values": ["default"]},
        {"key": EBS_ZONE, "operator": "In", "values": ["us-west-2a"]},
    )
    prof = profile(pool)
    assert validate_document(nodepool(prof, prof.pools[0])) == ([], None)


# --- architecture of a pool without requirements ---------------------------------------------------------


GPU_ANY_ARCH = {
    "name": "gpu",
    "kind": "karpenter",
    "capacityTypes": ["on-demand"],
    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
}


def test_pool_without_requirements_has_no_arch_requirement() -> None:
    """A NodePool without requirements has no arch default in Karpenter: the rendered NodePool names no
    ``kubernetes.io/arch`` and the plan takes the cheaper arm64 GPU type, as Karpenter would."""
    prof = profile(GPU_ANY_ARCH)
    keys = [r["key"] for r in nodepool(prof, prof.pools[0])["spec"]["template"]["spec"]["requirements"]]
    assert "kubernetes.io/arch" not in keys
    pod = make_pod("a", gpus=1, tolerations=GPU_TOL)
    p = placed(sim(prof, pod, cat=ARM_CAT), "a")
    assert (p["phase"], p["instance_type"]) == (PROVISIONED, "g5g.xlarge")


@pytest.mark.parametrize(
    ("requirements", "expect"),
    [
        ({"gpuCount": {"min": 1}}, "g4dn.xlarge"),  # the shorthand's arch defaults to amd64, rendered
        ({"gpuCount": {"min": 1}, "arch": ["amd64", "arm64"]}, "g5g.xlarge"),
    ],
)
def test_shorthand_arch_is_rendered_and_applied(requirements: dict[str, Any], expect: str) -> None:
    prof = profile({**GPU_ANY_ARCH, "requirements": requirements})
    reqs = nodepool(prof, prof.pools[0])["spec"]["template"]["spec"]["requirements"]
    arch = next(r["values"] for r in reqs if r["key"] == "kubernetes.io/arch")
    assert arch == requirements.get("arch", ["amd64"])
    p = placed(sim(prof, make_pod("a", gpus=1, tolerations=GPU_TOL), cat=ARM_CAT), "a")
    assert p["instance_type"] == expect

"""The AWS catalog: Karpenter labels and allocatable, GPU names, suggestions, offerings, overrides."""

from __future__ import annotations

import pytest

from builders_catalog import make_instance_type
from kgpu.catalog import aws_catalog
from kgpu.catalog.instance import kube_reserved_cpu_millis, parse_instance_name
from kgpu.errors import InputError

MIB = 1024**2
GIB = 1024**3


@pytest.fixture(scope="module")
def catalog():
    return aws_catalog("us-west-2")


# --- labels -------------------------------------------------------------------------------------------


def test_labels_g4dn_xlarge(catalog):
    """All of Karpenter's well-known labels of a 1x T4 type, GPU labels included."""
    labels = catalog.get("g4dn.xlarge").labels("us-west-2", "us-west-2a", "spot")
    assert labels == {
        "node.kubernetes.io/instance-type": "g4dn.xlarge",
        "topology.kubernetes.io/region": "us-west-2",
        "topology.kubernetes.io/zone": "us-west-2a",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.sh/capacity-type": "spot",
        "karpenter.k8s.aws/instance-family": "g4dn",
        "karpenter.k8s.aws/instance-category": "g",
        "karpenter.k8s.aws/instance-generation": "4",
        "karpenter.k8s.aws/instance-size": "xlarge",
        "karpenter.k8s.aws/instance-cpu": "4",
        "karpenter.k8s.aws/instance-memory": "16384",
        "karpenter.k8s.aws/instance-gpu-name": "t4",
        "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
        "karpenter.k8s.aws/instance-gpu-count": "1",
        "karpenter.k8s.aws/instance-gpu-memory": "16384",
        "karpenter.k8s.aws/instance-network-bandwidth": "5000",
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
        "karpenter.k8s.aws/instance-capability-flex": "false",
        "karpenter.k8s.aws/instance-tenancy": "default",
        "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
        "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "2500",
        "karpenter.k8s.aws/instance-ebs-bandwidth": "3500",
        "karpenter.k8s.aws/instance-local-nvme": "125",
        "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
        # the deprecated aliases EKS nodes still carry (Karpenter's NormalizedLabels)
        "beta.kubernetes.io/instance-type": "g4dn.xlarge",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/zone": "us-west-2a",
        "failure-domain.beta.kubernetes.io/region": "us-west-2",
    }


def test_every_type_has_its_network_bandwidth(catalog):
    """instance-network-bandwidth (Mbps) from the AWS provider's InstanceTypeBandwidthMegabits: every type of
    the packaged catalog has one; spot checks of the table."""
    for t in catalog.types():
        assert t.network_bandwidth_mbps > 0, t.name
    assert (
        catalog.get("c6i.large").labels("us-west-2", "us-west-2a", "spot")[
            "karpenter.k8s.aws/instance-network-bandwidth"
        ]
        == "781"
    )
    assert catalog.get("p5.48xlarge").network_bandwidth_mbps == 3200000
    assert catalog.get("t3.large").network_bandwidth_mbps == 512


def test_every_type_has_the_providers_hardware_labels(catalog):
    """aws-instance-labels.csv (Karpenter's generated instance-type reference) covers every packaged type:
    each has a hypervisor label (empty only on metal, as Karpenter's computeRequirements sets it), a CPU
    manufacturer and EBS bandwidth; local NVMe only where the type has instance storage."""
    aws = "karpenter.k8s.aws/"
    for t in catalog.types():
        labels = t.labels("us-west-2", "us-west-2a", "spot")
        assert (labels[aws + "instance-hypervisor"] == "") == (t.size == "metal"), t.name
        assert labels[aws + "instance-cpu-manufacturer"] in {"intel", "amd", "aws"}, t.name
        assert int(labels[aws + "instance-ebs-bandwidth"]) > 0, t.name
        assert labels[aws + "instance-encryption-in-transit-supported"] in {"true", "false"}, t.name

    def label(name: str, key: str) -> str | None:
        return catalog.get(name).labels("us-east-1", "us-east-1a", "spot").get(aws + key)

    assert label("g5g.xlarge", "instance-cpu-manufacturer") == "aws"
    assert label("g5.48xlarge", "instance-local-nvme") == "7600"
    assert label("m5.large", "instance-local-nvme") is None
    assert label("p3.2xlarge", "instance-hypervisor") == "xen"


def test_labels_g5_and_p3(catalog):
    """A10G memory is the EC2 MiB value (22888), V100 types count their GPUs, category/generation parse."""
    g5 = catalog.get("g5.xlarge").labels("us-west-2", "us-west-2b", "on-demand")
    assert g5["karpenter.k8s.aws/instance-gpu-name"] == "a10g"
    assert g5["karpenter.k8s.aws/instance-gpu-memory"] == "22888"
    assert g5["karpenter.sh/capacity-type"] == "on-demand"
    p3 = catalog.get("p3.8xlarge").labels("us-west-2", "us-west-2a", "spot")
    assert p3["karpenter.k8s.aws/instance-category"] == "p"
    assert p3["karpenter.k8s.aws/instance-generation"] == "3"
    assert p3["karpenter.k8s.aws/instance-gpu-count"] == "4"
    assert p3["karpenter.k8s.aws/instance-gpu-name"] == "v100"
    assert p3["karpenter.k8s.aws/instance-memory"] == str(244 * 1024)


def test_labels_cpu_type_has_no_gpu_labels(catalog):
    """GPU labels exist only on GPU types."""
    labels = catalog.get("m5.xlarge").labels("us-west-2", "us-west-2a", "on-demand")
    assert not [k for k in labels if "gpu" in k]
    assert labels["karpenter.k8s.aws/instance-family"] == "m5"


def test_name_parsing_like_karpenter():
    """Category is the leading letters (gr6 -> gr), arm64 for Graviton families (g5g)."""
    gr6 = parse_instance_name("gr6.4xlarge")
    assert gr6 is not None and (gr6.category, gr6.generation, gr6.arch) == ("gr", 6, "amd64")
    g5g = parse_instance_name("g5g.xlarge")
    assert g5g is not None and g5g.arch == "arm64"
    p5en = parse_instance_name("p5en.48xlarge")
    assert p5en is not None and (p5en.family, p5en.size, p5en.arch) == ("p5en", "48xlarge", "amd64")
    assert parse_instance_name("not-a-type") is None


# --- allocatable --------------------------------------------------------------------------------------
#
# Formula (kgpu.catalog.instance docstring; Karpenter types.go):
#   capacity.memory = M - ceil(M * 0.075) MiB;  kube-reserved memory = 11*maxPods + 255 MiB;  eviction 100Mi
#   kube-reserved cpu = 60m (1st core) + 10m (2nd) + 10m (3rd-4th) + 0.25% of the rest
#   ephemeral = 20Gi - 1Gi kube-reserved - ceil(20Gi * 10%) = 17Gi


def test_kube_reserved_cpu_ladder():
    """4 cores: 60+10+10 = 80m; 32 cores: 80 + 28000*0.0025 = 150m; 96 cores: 80 + 230 = 310m; 1 core: 60m."""
    assert kube_reserved_cpu_millis(1) == 60
    assert kube_reserved_cpu_millis(4) == 80
    assert kube_reserved_cpu_millis(32) == 150
    assert kube_reserved_cpu_millis(96) == 310


def test_allocatable_g4dn_xlarge(catalog):
    """4 vCPU, 16384 MiB, 29 ENI-limited pods.

    memory: 16384 - ceil(1228.8) = 15155 MiB capacity; 15155 - (11*29+255 = 574) - 100 = 14481 MiB.
    cpu: 4000 - 80 = 3920m.
    """
    it = catalog.get("g4dn.xlarge")
    assert it.capacity() == {
        "cpu": 4000,
        "memory": 15155 * MIB,
        "pods": 29,
        "ephemeral-storage": 20 * GIB,
        "nvidia.com/gpu": 1,
    }
    assert it.allocatable() == {
        "cpu": 3920,
        "memory": 14481 * MIB,
        "pods": 29,
        "ephemeral-storage": 17 * GIB,
        "nvidia.com/gpu": 1,
    }


def test_allocatable_g5_xlarge(catalog):
    """58 pods: memory 15155 - (11*58+255 = 893) - 100 = 14162 MiB; cpu 3920m."""
    alloc = catalog.get("g5.xlarge").allocatable()
    assert alloc["memory"] == 14162 * MIB
    assert alloc["cpu"] == 3920
    assert alloc["pods"] == 58
    assert alloc["nvidia.com/gpu"] == 1


def test_allocatable_p3_8xlarge(catalog):
    """32 vCPU, 244 GiB = 249856 MiB, 234 pods.

    memory: 249856 - ceil(18739.2) = 231116 MiB; 231116 - (11*234+255 = 2829) - 100 = 228187 MiB.
    cpu: 32000 - (80 + 70) = 31850m.
    """
    alloc = catalog.get("p3.8xlarge").allocatable()
    assert alloc == {
        "cpu": 31850,
        "memory": 228187 * MIB,
        "pods": 234,
        "ephemeral-storage": 17 * GIB,
        "nvidia.com/gpu": 4,
    }


def test_allocatable_m5_xlarge_has_no_gpu(catalog):
    """Same arithmetic as g5.xlarge (4 vCPU, 16 GiB, 58 pods), and no GPU resource."""
    alloc = catalog.get("m5.xlarge").allocatable()
    assert alloc == {"cpu": 3920, "memory": 14162 * MIB, "pods": 58, "ephemeral-storage": 17 * GIB}


def test_arm64_loses_cma_memory(catalog):
    """g5g.xlarge: (8192 - 64) = 8128 MiB, - ceil(609.6) = 7518 MiB capacity."""
    assert catalog.get("g5g.xlarge").capacity()["memory"] == 7518 * MIB


def test_amd_gpu_resource(catalog):
    """Radeon types advertise amd.com/gpu, with Karpenter's lower-kebab GPU name."""
    it = catalog.get("g4ad.xlarge")
    assert it.gpu_name == "radeon-pro-v520" and it.gpu_manufacturer == "amd"
    assert it.allocatable()["amd.com/gpu"] == 1
    assert "nvidia.com/gpu" not in it.allocatable()


def test_builder_types_use_the_same_formula():
    """A fake type with 110 pods: memory 16384 - 1229 - (11*110+255 = 1465) - 100 = 13590 MiB."""
    fake = make_instance_type("g9.xlarge", vcpus=4, memory_mib=16384, gpus=2, gpu_name="h100")
    assert fake.category == "g" and fake.generation == 9
    assert fake.allocatable()["memory"] == 13590 * MIB
    assert fake.allocatable()["nvidia.com/gpu"] == 2
    assert fake.labels("r", "z", "spot")["karpenter.k8s.aws/instance-gpu-name"] == "h100"


# --- GPU names and suggestions ------------------------------------------------------------------------


def test_gpu_names_are_label_form(catalog):
    """EC2 names, lower-case: the memory variants of A100/V100 share the EC2 name."""
    assert {"t4", "a10g", "v100", "h100", "l4", "l40s", "a100"} <= catalog.gpu_names()
    assert catalog.get("p4de.24xlarge").gpu_name == "a100"
    assert catalog.get("p4de.24xlarge").gpu_memory_mib == 81920
    assert catalog.get("p4de.24xlarge").gpu_display_name == "A100-80GB"
    assert catalog.get("p3dn.24xlarge").gpu_memory_mib == 32768


def test_types_with_gpu_is_case_insensitive(catalog):
    """T4, t4 and the catalog's own names (A100-80GB) all work."""
    t4 = {t.name for t in catalog.types_with_gpu("T4")}
    assert t4 == {t.name for t in catalog.types_with_gpu("t4")}
    assert t4 and all(name.startswith("g4dn.") for name in t4)
    assert {t.name for t in catalog.types_with_gpu("A100-80GB")} == {"p4de.24xlarge"}
    assert {t.name for t in catalog.types_with_gpu("a100")} == {"p4d.24xlarge", "p4de.24xlarge"}


def test_unknown_gpu_suggests_closest(catalog):
    """An unknown GPU is bad input that names close valid names."""
    assert catalog.closest_gpu_names("A10")[0] == "a10g"
    with pytest.raises(InputError) as err:
        catalog.types_with_gpu("A10")
    assert "a10g" in err.value.line()


def test_unknown_type_suggests_closest(catalog):
    with pytest.raises(InputError) as err:
        catalog.get("g4dn.xlarg")
    assert "g4dn.xlarge" in err.value.hint


# --- regions, zones, offerings ------------------------------------------------------------------------


def test_region_filters_types():
    """g6 is not sold in eu-west-1 in the snapshot; g4dn is."""
    eu = {t.name for t in aws_catalog("eu-west-1").types()}
    assert "g4dn.xlarge" in eu and "g6.xlarge" not in eu
    assert "g6.xlarge" in {t.name for t in aws_catalog().types()}


def test_unknown_region_is_input_error():
    with pytest.raises(InputError) as err:
        aws_catalog("us-west-3")
    assert "us-west-2" in err.value.line()


def test_zone_ids_map_to_names_in_id_order(catalog):
    """usw2-az1 -> us-west-2a ...; ap-northeast-1 has az1, az2, az4 -> a, b, c (approximation)."""
    offers = catalog.offerings("g4dn.xlarge")
    pairs = {(o.zone, o.zone_id) for o in offers}
    assert ("us-west-2a", "usw2-az1") in pairs and ("us-west-2c", "usw2-az3") in pairs
    tokyo = aws_catalog("ap-northeast-1").offerings("g4dn.xlarge")
    assert {(o.zone, o.zone_id) for o in tokyo} >= {("ap-northeast-1c", "apne1-az4")}


def test_offerings_use_median_spot_and_on_demand(catalog):
    """Every zone gets a spot offering at the median spot price and an on-demand one."""
    offers = catalog.offerings("g4dn.xlarge", "us-west-2")
    spot = {o.price for o in offers if o.capacity_type == "spot"}
    on_demand = {o.price for o in offers if o.capacity_type == "on-demand"}
    pricing = catalog.pricing("g4dn.xlarge")
    assert pricing is not None
    assert spot == {pricing.spot} and on_demand == {pricing.on_demand}
    assert pricing.spot_min is not None and pricing.spot_min <= pricing.spot
    assert len(offers) == 2 * len(pricing.zones)


def test_type_without_on_demand_price_has_only_spot(catalog):
    """p5e.48xlarge has no on-demand price in the snapshot."""
    offers = catalog.offerings("p5e.48xlarge")
    assert offers and {o.capacity_type for o in offers} == {"spot"}


def test_catalog_is_cached():
    """The simulator calls aws_catalog per plan: the same region returns the same cached object."""
    assert aws_catalog("us-east-1") is aws_catalog("us-east-1")


# --- overrides ----------------------------------------------------------------------------------------


def test_override_price_in_one_region():
    cat = aws_catalog(
        "us-east-1", [{"instance_type": "g4dn.xlarge", "region": "us-east-1", "ondemand_usd_per_hour": 0.1}]
    )
    assert cat.pricing("g4dn.xlarge").on_demand == 0.1
    assert cat.pricing("g4dn.xlarge", "us-west-2").on_demand == 0.526
    assert aws_catalog("us-east-1").pricing("g4dn.xlarge").on_demand == 0.526  # base untouched


def test_override_without_region_applies_everywhere():
    cat = aws_catalog(None, [{"instance_type": "g5.xlarge", "spot_usd_per_hour_median": "0.05"}])
    assert {cat.pricing("g5.xlarge", r).spot for r in ("us-east-1", "us-west-2", "eu-west-1")} == {0.05}


def test_override_adds_a_new_type():
    """A new type needs region, vcpus and memory_gib; zones may be names; max_pods sets pods."""
    cat = aws_catalog(
        "us-east-1",
        [
            {
                "instance_type": "g7.2xlarge",
                "region": "us-east-1",
                "vcpus": 8,
                "memory_gib": 32,
                "gpu_name": "L4",
                "gpu_count": 1,
                "gpu_memory_gib": 22.35,
                "ondemand_usd_per_hour": 1.0,
                "zones": ["us-east-1a", "us-east-1b"],
                "max_pods": 50,
            }
        ],
    )
    it = cat.get("g7.2xlarge")
    assert (it.gpu_name, it.gpu_memory_mib, it.max_pods) == ("l4", 22888, 50)
    assert [o.zone for o in cat.offerings("g7.2xlarge")] == ["us-east-1a", "us-east-1b"]


def test_override_adds_a_region_to_a_known_type():
    cat = aws_catalog(
        None, [{"instance_type": "g6.xlarge", "region": "eu-west-1", "ondemand_usd_per_hour": 1.5}]
    )
    assert cat.pricing("g6.xlarge", "eu-west-1").on_demand == 1.5
    assert "g6.xlarge" in {
        t.name
        for t in aws_catalog("eu-west-1", [{"instance_type": "g6.xlarge", "region": "eu-west-1"}]).types()
    }


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"instance_type": "g7.2xlarge", "region": "us-east-1"}, "needs vcpus, memory_gib"),
        ({"instance_type": "g4dn.xlarge", "ondemand_price": 1}, "did you mean ondemand_usd_per_hour"),
        ({"instance_type": "g4dn.xlarge", "vcpus": "four"}, "row 1: vcpus"),
        ({"instance_type": "g4dn.xlarge", "spot_usd_per_hour_median": -1}, "number >= 0"),
        ({"region": "us-east-1"}, "missing instance_type"),
        (
            {"instance_type": "bogus", "region": "us-east-1", "vcpus": 1, "memory_gib": 1},
            "invalid instance type",
        ),
    ],
)
def test_bad_override_rows(row, fragment):
    with pytest.raises(InputError) as err:
        aws_catalog("us-east-1", [row])
    assert fragment in err.value.line()


def test_kubelet_max_pods_changes_pod_capacity_only(catalog):
    """maxPods 110 on g4dn.xlarge: pods 110, but kube-reserved memory still uses the ENI limit (29)."""
    from kgpu.catalog import with_max_pods

    base = catalog.get("g4dn.xlarge")
    tuned = with_max_pods(base, 110)
    assert tuned.allocatable()["pods"] == 110
    assert tuned.allocatable()["memory"] == base.allocatable()["memory"] == 14481 * MIB


def test_override_type_gets_awss_eni_max_pods_without_giving_them():
    """t3.micro (seed 001's quick start) is not in the catalog; its ENI limit (4) comes from AWS's table, so an
    override row without max_pods still gets the kube-reserved memory a real t3.micro node has."""
    row = {
        "instance_type": "t3.micro",
        "region": "us-west-2",
        "vcpus": "2",
        "memory_gib": "1",
        "ondemand_usd_per_hour": "0.0104",
        "zones": "usw2-az1",
    }
    t3 = aws_catalog("us-west-2", overrides=[row]).get("t3.micro")
    assert t3.max_pods == 4
    assert t3.allocatable()["pods"] == 4
    # 1024 MiB - ceil(7.5 %) = 947 MiB capacity; kube-reserved (11 * 4 + 255) MiB + 100Mi eviction
    assert t3.allocatable()["memory"] == (947 - 299 - 100) * 1024 * 1024


def test_allocatable_never_negative_for_a_tiny_unlisted_type():
    """A type AWS's ENI table does not list gets 110 pods, whose kube-reserved memory exceeds 1 GiB: the kubelet
    clamps allocatable at zero rather than advertising a negative quantity."""
    row = {
        "instance_type": "x9z.micro",
        "region": "us-west-2",
        "vcpus": "2",
        "memory_gib": "1",
        "ondemand_usd_per_hour": "0.01",
        "zones": "usw2-az1",
    }
    tiny = aws_catalog("us-west-2", overrides=[row]).get("x9z.micro")
    assert tiny.max_pods == 110
    assert tiny.allocatable()["memory"] == 0
    assert all(value >= 0 for value in tiny.allocatable().values())

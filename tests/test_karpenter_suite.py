"""Cases from Karpenter's own suites (sigs.k8s.io/karpenter v1.8: pkg/controllers/provisioning/suite_test.go
and scheduling/suite_test.go, named in each docstring) on kgpu's Karpenter provisioning, with the test
catalog of ``test_provision_karpenter`` in place of Karpenter's fake instance types."""

from __future__ import annotations

from typing import Any

from builders import pod_dict
from kgpu.model.load import parse_documents
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import PROVISIONED, SimulationResult, simulate
from test_provision_karpenter import CAT, GENERAL, profile

ZONE = "topology.kubernetes.io/zone"
TYPE = "node.kubernetes.io/instance-type"
ON_DEMAND = {**GENERAL, "capacityTypes": ["on-demand"]}


def run(pool: dict[str, Any], *pods: dict[str, Any]) -> SimulationResult:
    work = parse_documents(list(pods), "w.yaml")
    return simulate(parse_documents([], "cluster"), work, provisioner=provisioner_for(profile(pool), CAT))


def test_multidimensional_selectors_preferences_and_requirements_combine() -> None:
    """scheduling/suite_test.go "should combine multidimensional node selectors, preferences and
    requirements": a node selector on zone and type, required In on both keys (wider), and NotIn preferences
    on both: the node is in the selected zone, of the selected type."""
    pod = pod_dict(
        "a",
        cpu="500m",
        node_selector={ZONE: "us-west-2b", TYPE: "m5.xlarge"},
        affinity_terms=[
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
                    {"key": TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]},
                ]
            }
        ],
        preferred=[
            {
                "weight": 1,
                "preference": {
                    "matchExpressions": [
                        {"key": ZONE, "operator": "NotIn", "values": ["unknown"]},
                        {"key": TYPE, "operator": "NotIn", "values": ["unknown"]},
                    ]
                },
            }
        ],
    )
    p = run(ON_DEMAND, pod).placements[0].as_dict()
    assert p["phase"] == PROVISIONED
    assert (p["zone"], p["instance_type"]) == ("us-west-2b", "m5.xlarge")


def test_amd_gpu_requests_launch_radeon_types() -> None:
    """The AWS provider's instancetype suite "should launch instances for amd.com/gpu resource requests":
    over the real catalog, a pod asking two amd.com/gpu gets the smallest g4ad type with two Radeon Pro
    V520s (g4ad.8xlarge, not the cheaper g4ad.xlarge), and a pod asking nvidia.com/gpu in the same pool a
    g4dn type, though g4ad.xlarge is cheaper."""
    from kgpu.catalog import aws_catalog

    pool = {"name": "gpu", "kind": "karpenter", "requirements": {"families": ["g4ad", "g4dn"]},
            "capacityTypes": ["on-demand"], "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}
    tol = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    amd = pod_dict("amd", cpu="1", tolerations=tol)
    amd["spec"]["containers"][0]["resources"]["limits"] = {"amd.com/gpu": "2"}
    nvidia = pod_dict("nvidia", cpu="1", gpus=1, tolerations=tol)
    prov = provisioner_for(profile(pool), aws_catalog("us-west-2"))
    result = simulate(parse_documents([], "cluster"), parse_documents([amd, nvidia], "w.yaml"), provisioner=prov)
    got = {p.pod.name: p.as_dict() for p in result.placements}
    assert (got["amd"]["phase"], got["amd"]["instance_type"]) == (PROVISIONED, "g4ad.8xlarge")
    assert got["nvidia"]["phase"] == PROVISIONED and got["nvidia"]["instance_type"].startswith("g4dn.")

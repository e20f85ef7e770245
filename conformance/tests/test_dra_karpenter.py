"""Karpenter and pods with resource claims: the real provisioning scheduler (karpenter-oracle, Karpenter's
`Solve` at the pinned version, options as they ship) against kgpu's Karpenter for a `gpuAllocation: dra`
NodePool. Karpenter's `--ignore-dra-requests` is on by default: a pod whose containers claim devices gets
its DRA error and no NodeClaim; kgpu must say the same words and launch only for the other pods."""

from __future__ import annotations

from typing import Any

from karpenter_diff import run_kgpu, run_oracle
from karpenter_gen import Scenario

from conftest import binary
from kgpu.sim.provisioners.dra_pools import KARPENTER_DRA_ERROR


def _profile() -> dict[str, Any]:
    return {
        "apiVersion": "kgpu.dev/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "dra"},
        "provider": "eks", "autoscaler": "karpenter",
        "cluster": {"name": "dra", "region": "us-west-2", "zones": ["us-west-2a"], "kubernetesVersion": "1.34"},
        "pools": [{"name": "gpu", "kind": "karpenter", "gpuAllocation": "dra", "instanceTypes": ["g5.xlarge", "g5.2xlarge"],
                   "capacityTypes": ["on-demand"],
                   "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}],
        "monitoring": {"enabled": False},
    }


def _pod(name: str, claims: bool) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    spec: dict[str, Any] = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu24.04", "resources": res}],
    }
    if claims:
        res["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": spec}


def test_karpenter_skips_pods_with_claims_in_its_own_words() -> None:
    scn = Scenario(1, _profile(), pods=[_pod("train", True), _pod("web", False)])
    orc = run_oracle(binary("karpenter", "karpenter-oracle"), scn)
    assert orc["podErrors"].get("default/train") == KARPENTER_DRA_ERROR
    assert [c["pods"] for c in orc["nodeClaims"]] == [["default/web"]]
    kg = run_kgpu(scn)
    assert f"karpenter: Failed to schedule pod, {KARPENTER_DRA_ERROR}" in kg.errors.get("default/train", "")
    assert [sorted(n.pods) for n in kg.nodes] == [["default/web"]]

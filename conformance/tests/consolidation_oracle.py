"""Run ``consolidation-oracle`` (Karpenter's disruption controller, in-process) and build its input.

``run_oracle`` runs the binary over one payload (see the doc comment of
``conformance/karpenter/cmd/consolidation-oracle/main.go`` for the input and output); ``catalog_types`` gives
the payload's ``instanceTypes`` and ``wellKnownLabels`` from kgpu's catalog exactly as the Karpenter
differential does (``karpenter_types``); the other helpers build NodePools, nodes, pods and PDBs by hand.

The oracle launches each replacement NodeClaim with the rule of ``karpenter_diff.launch_choice`` (every
round's replacement carries its claim in that function's input format, so a test can check that the two
agree).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from karpenter_gen import REGION
from karpenter_types import instance_types, well_known_labels

from kgpu.catalog import aws_catalog

ORACLE = ("karpenter", "consolidation-oracle")  # conftest.binary(*ORACLE)


def run_oracle(binary: Path, payload: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    """The oracle's output for ``payload`` (fed on stdin); RuntimeError with its stderr when it fails."""
    proc = subprocess.run(
        [str(binary)], input=json.dumps(payload), capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"consolidation-oracle exit {proc.returncode}: {proc.stderr.strip()}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def catalog_types(region: str = REGION, zones: Sequence[str] = ()) -> dict[str, Any]:
    """``instanceTypes`` and ``wellKnownLabels`` from kgpu's AWS catalog (``karpenter_types``)."""
    catalog = aws_catalog(region)
    return {
        "instanceTypes": instance_types(catalog, region, zones),
        "wellKnownLabels": well_known_labels(catalog, region),
    }


def nodepool(
    name: str,
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    consolidate_after: str = "0s",
    budgets: list[dict[str, Any]] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    capacity_types: Sequence[str] | None = None,
    instance_types: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool; ``capacity_types`` and ``instance_types`` add ``In`` requirements."""
    reqs = list(requirements or [])
    if capacity_types:
        reqs.append({"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)})
    if instance_types:
        reqs.append(
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(instance_types)}
        )
    disruption: dict[str, Any] = {"consolidationPolicy": policy, "consolidateAfter": consolidate_after}
    if budgets is not None:
        disruption["budgets"] = budgets
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": reqs,
                }
            },
            "disruption": disruption,
        },
    }


def node(
    name: str, pool: str, instance_type: str, zone: str, capacity_type: str = "on-demand"
) -> dict[str, Any]:
    return {
        "name": name,
        "nodePool": pool,
        "instanceType": instance_type,
        "zone": zone,
        "capacityType": capacity_type,
    }


def pod(
    name: str,
    node_name: str,
    cpu: str = "500m",
    memory: str = "512Mi",
    *,
    owner: str | None = "ReplicaSet",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A pod bound to ``node_name``; ``owner`` the kind of its controller (apps/v1), None for a bare pod."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": f"uid-{name}-owner",
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def pdb(
    name: str,
    match_labels: dict[str, str],
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget without status (the oracle computes it from the input pods)."""
    spec: dict[str, Any] = {"selector": {"matchLabels": match_labels}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def payload(
    node_pools: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    types: dict[str, Any],
    daemon_sets: list[dict[str, Any]] | None = None,
    pdbs: list[dict[str, Any]] | None = None,
    spot_to_spot: bool = False,
    max_rounds: int | None = None,
) -> dict[str, Any]:
    """The oracle's input; ``types`` is ``catalog_types(...)``."""
    doc: dict[str, Any] = {
        "nodePools": node_pools,
        **types,
        "daemonSets": daemon_sets or [],
        "nodes": nodes,
        "pods": pods,
        "pdbs": pdbs or [],
        "featureGates": {"spotToSpotConsolidation": spot_to_spot},
    }
    if max_rounds is not None:
        doc["maxRounds"] = max_rounds
    return doc

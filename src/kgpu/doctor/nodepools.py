"""The snapshot's Karpenter NodePools as pools of a profile, so the simulator's Karpenter can answer
"would a NodePool launch a node for this pod, and if not, why" in Karpenter's words.

The mapping covers what NodePools use for GPU capacity: requirements with ``In`` on the instance type,
family, category, GPU name, capacity type, architecture and zone, ``Gt``/``Lt`` on generation, vCPUs and GPU
count, a single-valued ``In`` on any other key (Karpenter sets that label on the node), the template's labels
and taints, ``limits`` and ``weight``. What it cannot express (``NotIn``, ``Exists``, multi-valued custom
keys, ``minValues``) is listed in the notes, never silently dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kgpu.catalog.aws import aws_catalog
from kgpu.doctor.state import ClusterState

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read
    from kgpu.model.profile import Profile

DEFAULT_REGION = "us-west-2"

_IN_FIELDS = {
    "karpenter.k8s.aws/instance-family": "families",
    "karpenter.k8s.aws/instance-category": "categories",
    "karpenter.k8s.aws/instance-gpu-name": "gpuNames",
    "kubernetes.io/arch": "arch",
}
_RANGE_FIELDS = {
    "karpenter.k8s.aws/instance-generation": "generation",
    "karpenter.k8s.aws/instance-cpu": "cpu",
    "karpenter.k8s.aws/instance-gpu-count": "gpuCount",
}
_NODE_LABELS_KARPENTER_SETS = {"kubernetes.io/os"}


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def nodepool_pool(np: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One NodePool as a profile pool document, and what of it is not modelled."""
    meta, spec = _dict(np.get("metadata")), _dict(np.get("spec"))
    name = str(meta.get("name") or "")
    tmpl = _dict(spec.get("template"))
    tspec = _dict(tmpl.get("spec"))
    notes: list[str] = []
    pool: dict[str, Any] = {"name": name, "kind": "karpenter", "capacityTypes": ["on-demand"]}
    labels = {str(k): str(v) for k, v in _dict(_dict(tmpl.get("metadata")).get("labels")).items()}
    requirements: dict[str, Any] = {}
    for req in tspec.get("requirements") or ():
        if not isinstance(req, dict):
            continue
        key, op = str(req.get("key") or ""), str(req.get("operator") or "")
        values = [str(v) for v in req.get("values") or ()]
        if op == "In" and key == "karpenter.sh/capacity-type":
            pool["capacityTypes"] = values
        elif op == "In" and key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"):
            pool["instanceTypes"] = values
        elif op == "In" and key == "topology.kubernetes.io/zone":
            pool["zones"] = values
        elif op == "In" and key in _IN_FIELDS:
            requirements[_IN_FIELDS[key]] = values
        elif op in ("Gt", "Lt") and key in _RANGE_FIELDS and values and values[0].lstrip("-").isdigit():
            rng = requirements.setdefault(_RANGE_FIELDS[key], {})
            n = int(values[0])
            if op == "Gt":
                rng["min"] = n + 1
            else:
                rng["max"] = max(n - 1, 0)
        elif op == "In" and len(values) == 1 and key not in _NODE_LABELS_KARPENTER_SETS:
            labels[key] = values[0]
        elif op == "In" and key in _NODE_LABELS_KARPENTER_SETS:
            continue
        else:
            notes.append(f'NodePool "{name}": requirement {key} {op} {values} is not modelled')
        if req.get("minValues"):
            notes.append(f'NodePool "{name}": minValues on {key} is not modelled')
    if requirements:
        requirements.setdefault("arch", ["amd64", "arm64"])
        pool["requirements"] = requirements
    else:
        pool["requirements"] = {"arch": ["amd64", "arm64"]}
    if labels:
        pool["labels"] = labels
    taints = []
    for t in tspec.get("taints") or ():
        if isinstance(t, dict):
            taint = {"key": t.get("key"), "effect": t.get("effect")}
            if t.get("value"):
                taint["value"] = t.get("value")
            taints.append(taint)
    if taints:
        pool["taints"] = taints
    limits = _dict(spec.get("limits"))
    if limits:
        pool["limits"] = {str(k): v for k, v in limits.items()}
    if isinstance(spec.get("weight"), int):
        pool["weight"] = spec["weight"]
    return pool, notes


def nodepool_profile(state: ClusterState) -> tuple[Profile | None, list[str]]:
    """A profile whose pools are the snapshot's NodePools (None when there are none that parse)."""
    if not state.nodepools:
        return None, []
    from pydantic import ValidationError

    from kgpu.model.profile import parse_profile

    region = state.region or DEFAULT_REGION
    notes: list[str] = []
    priced = aws_catalog().regions
    if region not in priced:
        # A real region the price catalog lacks: the cluster is fine, only the offerings and prices there are
        # unknown. Pending pods are still explained against the nodes the cluster has.
        notes.append(
            f"region {region!r} (the nodes' topology.kubernetes.io/region) is not in kgpu's price catalog: "
            f"the NodePools' offerings and prices there are unknown, so they are left out of the simulation "
            f"(priced regions: {', '.join(priced)})"
        )
        return None, notes
    if not state.region:
        notes.append(
            f"no node has a topology.kubernetes.io/region label: NodePools priced in {DEFAULT_REGION}"
        )
    pools = []
    for np in state.nodepools:
        pool, pool_notes = nodepool_pool(np)
        notes.extend(pool_notes)
        try:
            parse_profile(_doc(region, [pool]), source="snapshot")
        except Exception as exc:  # InputError from pydantic validation: this NodePool is left out
            notes.append(f'NodePool "{pool["name"]}" is not modelled: {exc}')
            continue
        pools.append(pool)
    if not pools:
        return None, notes
    try:
        return parse_profile(_doc(region, pools), source="snapshot"), notes
    except (ValidationError, ValueError) as exc:
        notes.append(f"NodePools not modelled: {exc}")
        return None, notes


def _doc(region: str, pools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "snapshot"},
        "provider": "eks",
        "cluster": {"region": region},
        "autoscaler": "karpenter",
        "pools": pools,
    }

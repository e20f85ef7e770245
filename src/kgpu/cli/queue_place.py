"""Where an admitted Workload's pods land: Kueue admits on quota alone, kube-scheduler then needs nodes.

For each Workload Kueue admits (now, in :func:`kgpu.sim.queue.admission.settle`), its pods are made from the
PodSets' templates, ``count`` each, with what Kueue injects when it unsuspends the job (pkg/podset
``FromAssignment`` / ``Merge`` in sigs.k8s.io/kueue v0.15.0): the assigned flavors' ``nodeLabels`` join the
pod's nodeSelector and their ``tolerations`` its tolerations (the flavors' ``nodeTaints`` are not tolerated:
they only steer Kueue's flavor choice). The pods are then placed with the cluster's running pods by kgpu's
simulation, and with ``--profile`` what its pools launch and cost. So an admitted workload is "placed",
"quota admits, nodes cannot" (kube-scheduler's message), or partly placed (a gang whose pods would not all
start).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from kgpu.errors import InputError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_PODS = 200_000  # pods made from admitted PodSets: beyond it the placement is refused, not attempted
_MANAGED = {"Job", "JobSet", "RayJob", "RayCluster", "MPIJob", "PyTorchJob", "TFJob"}


def _flavor_injections(objects: Sequence[dict[str, Any]]) -> dict[str, tuple[dict[str, str], list[Any]]]:
    out: dict[str, tuple[dict[str, str], list[Any]]] = {}
    for o in objects:
        if o.get("kind") != "ResourceFlavor" or not str(o.get("apiVersion", "")).startswith(
            "kueue.x-k8s.io/"
        ):
            continue
        name = (o.get("metadata") or {}).get("name")
        spec = o.get("spec") or {}
        labels = spec.get("nodeLabels") or {}
        tolerations = spec.get("tolerations") or []
        if isinstance(name, str) and isinstance(labels, dict) and isinstance(tolerations, list):
            out[name] = ({str(k): str(v) for k, v in labels.items()}, list(tolerations))
    return out


def workload_pods(
    workload: dict[str, Any],
    flavors: dict[str, dict[str, str]],
    injections: dict[str, tuple[dict[str, str], list[Any]]],
) -> list[dict[str, Any]]:
    """The pods of one admitted Workload as Kueue starts them (module docstring)."""
    meta = workload.get("metadata") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name") or ""
    pods: list[dict[str, Any]] = []
    for ps in (workload.get("spec") or {}).get("podSets") or []:
        template = copy.deepcopy(ps.get("template") or {})
        spec = template.get("spec") or {}
        selector = dict(spec.get("nodeSelector") or {})
        tolerations = list(spec.get("tolerations") or [])
        for flavor in sorted(set(flavors.get(ps.get("name"), {}).values())):
            labels, tols = injections.get(flavor, ({}, []))
            selector.update(labels)
            tolerations += [t for t in tols if t not in tolerations]
        if selector:
            spec["nodeSelector"] = selector
        if tolerations:
            spec["tolerations"] = tolerations
        count = int(ps.get("count") or 0)
        for i in range(count):
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{ps.get('name')}-{i}",
                        "namespace": ns,
                        "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                    },
                    "spec": copy.deepcopy(spec),
                }
            )
    return pods


def place(
    cluster: Sequence[dict[str, Any]],
    workloads: dict[tuple[str, str], dict[str, Any]],
    flavors: dict[tuple[str, str], dict[str, dict[str, str]]],
    *,
    source: str,
    profile: str | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per admitted Workload: its pods placed on the cluster (and the profile's pools): ``status`` placed,
    partly-placed or unschedulable, ``scheduled``/``pods`` counts, ``nodes``, ``new_nodes`` and the first
    unschedulable pod's message in kube-scheduler's words."""
    from kgpu.model.load import parse_documents
    from kgpu.sim.simulate import PROVISIONED, SCHEDULED, simulate

    injections = _flavor_injections(cluster)
    made: list[dict[str, Any]] = []
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    for key, wl in workloads.items():
        for pod in workload_pods(wl, flavors.get(key, {}), injections):
            owner[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = key
            made.append(pod)
            if len(made) > MAX_PODS:
                raise InputError(
                    f"the admitted Workloads make more than {MAX_PODS:,} pods (pod limit)", where=source
                )
    # the jobs Kueue manages run as the Workloads' pods above, not as the loader would expand them
    base = [
        o
        for o in cluster
        if not (o.get("kind") in _MANAGED and QUEUE_LABEL in ((o.get("metadata") or {}).get("labels") or {}))
        and o.get("kind") != "Workload"
    ]
    objects = parse_documents(base, source)
    work = parse_documents(made, "the admitted Workloads' pods")
    provisioner = None
    if profile is not None:
        from kgpu.cli.profile_io import load_profile_file
        from kgpu.sim.provisioners.provision import provisioner_for

        provisioner = provisioner_for(load_profile_file(profile, None), daemonsets=objects.daemonsets)
    result = simulate(objects, work, provisioner=provisioner)
    out: dict[tuple[str, str], dict[str, Any]] = {
        k: {
            "status": "placed",
            "pods": 0,
            "scheduled": 0,
            "nodes": [],
            "new_nodes": [],
            "hourly_cost": None,
            "message": "",
        }
        for k in workloads
    }
    bought: dict[tuple[str, str], dict[str, float | None]] = {k: {} for k in workloads}
    for p in result.placements:
        found = owner.get((p.pod.namespace, p.pod.name))
        if found is None:
            continue
        key = found
        row = out[key]
        row["pods"] += 1
        if p.phase in (SCHEDULED, PROVISIONED):
            row["scheduled"] += 1
            where = p.node or (getattr(p.new_node, "name", None) if p.new_node is not None else None)
            if p.new_node is not None:
                label = f"{p.new_node.instance_type} {p.new_node.capacity_type}".strip()
                if p.new_node.name not in bought[key]:
                    bought[key][p.new_node.name] = p.new_node.hourly_price
                    row["new_nodes"].append(label)
            elif where and where not in row["nodes"]:
                row["nodes"].append(where)
        elif not row["message"]:
            row["message"] = p.reason or ""
    for key, row in out.items():
        prices = list(bought[key].values())
        if prices and all(v is not None for v in prices):
            row["hourly_cost"] = round(sum(v for v in prices if v is not None), 4)
        if row["pods"] and row["scheduled"] == 0:
            row["status"] = "unschedulable"
        elif row["scheduled"] < row["pods"]:
            row["status"] = "partly-placed"
    return out

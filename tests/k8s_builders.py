"""Small builders of Kubernetes object dicts for the upstream-transcription tests.

Upstream tests build ``v1.Pod`` / ``v1.Node`` objects with helpers (``st.MakePod()``, ``nodeWithTaints``,
``newResourcePod`` ...). These builders produce the equivalent manifests as dicts, which then go through
``kgpu.model.load.parse_documents`` so that API defaulting and validation apply as they would to a real pod.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.load import parse_documents
from kgpu.model.objects import Node, Pod, PodSpecInfo


def container(
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    *,
    name: str = "c",
    restart_policy: str | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "img"}
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = dict(requests)
    if limits is not None:
        res["limits"] = dict(limits)
    if res:
        c["resources"] = res
    if restart_policy is not None:
        c["restartPolicy"] = restart_policy
    return c


def sidecar(requests: dict[str, Any] | None = None, *, name: str = "sidecar") -> dict[str, Any]:
    """A restartable init container (restartPolicy: Always)."""
    return container(requests, name=name, restart_policy="Always")


def toleration(
    key: str | None = None, operator: str | None = None, value: str | None = None, effect: str | None = None
) -> dict[str, Any]:
    t: dict[str, Any] = {}
    for k, v in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
        if v is not None:
            t[k] = v
    return t


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def requirement(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        r["values"] = list(values)
    return r


def term(
    match_expressions: list[dict[str, Any]] | None = None, match_fields: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if match_expressions is not None:
        t["matchExpressions"] = match_expressions
    if match_fields is not None:
        t["matchFields"] = match_fields
    return t


def required_affinity(terms: list[dict[str, Any]] | None) -> dict[str, Any]:
    """affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution with these terms (None: nil terms)."""
    selector: dict[str, Any] = {}
    if terms is not None:
        selector["nodeSelectorTerms"] = terms
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}}


def pod(
    name: str = "pod",
    *,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    overhead: dict[str, Any] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers or [])}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    if overhead is not None:
        spec["overhead"] = overhead
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if affinity is not None:
        spec["affinity"] = affinity
    if tolerations is not None:
        spec["tolerations"] = tolerations
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def node(
    name: str = "node",
    *,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, Any] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    if labels is not None:
        doc["metadata"]["labels"] = dict(labels)
    spec: dict[str, Any] = {}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    if spec:
        doc["spec"] = spec
    doc["status"] = {"allocatable": dict(allocatable or {})}
    return doc


def load_pod(doc: dict[str, Any]) -> Pod:
    objs = parse_documents([doc], "test")
    assert len(objs.pods) == 1
    return objs.pods[0]


def spec_of(doc: dict[str, Any]) -> PodSpecInfo:
    return load_pod(doc).spec


def load_node(doc: dict[str, Any]) -> Node:
    objs = parse_documents([doc], "test")
    assert len(objs.nodes) == 1
    return objs.nodes[0]

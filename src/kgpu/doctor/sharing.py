"""Shared GPUs on a live cluster or snapshot: time-slicing, MPS and MIG as the node labels and the objects say.

- ``sharing-config-missing``: a node's ``nvidia.com/device-plugin.config`` names a key the plugin's ConfigMap
  (found in the input: a ConfigMap whose keys hold ``version: v1`` plugin configs) does not have; the
  plugin's config-manager then fails and the node advertises no GPUs.
- ``mig-config-state``: ``nvidia.com/mig.config.state`` is not ``success``: the MIG manager is still
  repartitioning (``pending``, ``rebooting``) or failed; the node has no GPUs to allocate meanwhile.
- ``mig-strategy-labels``: GFD's labels contradict the MIG strategy (``single`` with ``-MIG-INVALID``: MIG
  devices of several profiles, so the plugin advertises none; ``mixed`` with a ``-MIG-`` ``gpu.product``).
- ``shared-request-gt-one``: a pod asks more than one device of a shared resource on a node that shares it:
  with MPS (``failRequestsGreaterThanOne`` by default) it fails admission (``UnexpectedAdmissionError``);
  with time-slicing it fails when the config sets the flag, and otherwise gets no more GPU than one replica.
  Pods that already failed that way are errors.
- ``nodepool-overlay``: a Karpenter NodePool whose nodes are shared (its template labels select a plugin
  config, or its nodes report replicas or MIG devices) with no NodeOverlay in the input for it: Karpenter
  sizes those nodes by physical GPUs (kubernetes-sigs/karpenter#729).
- ``shared-memory-isolation`` (info): time-slicing and MPS nodes with GPU pods; time-slicing gives no memory
  isolation between the replicas' processes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kgpu.doctor.common import names, snippet
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding, obj_ref
from kgpu.doctor.state import LABEL_NODEPOOL, ClusterState, NodeInfo
from kgpu.model.gpus import MIG, SHARED, overlay_scope
from kgpu.model.nvidia import (
    LABEL_MIG_STATE,
    LABEL_MIG_STRATEGY,
    LABEL_PLUGIN_CONFIG,
    LABEL_PRODUCT,
    SHARED_SUFFIX,
)
from kgpu.model.safeyaml import load_document

ADMISSION_WORDS = "maximum request size for shared resources is 1"


def plugin_configmaps(state: ClusterState) -> list[dict[str, Any]]:
    """ConfigMaps of the input whose data are device-plugin configs (``version: v1`` with flags or sharing)."""
    out = []
    for cm in state.configmaps:
        data = cm.get("data")
        if not isinstance(data, dict) or not data:
            continue
        for text in data.values():
            try:
                doc = load_document(str(text), "configmap")
            except Exception:
                continue
            if isinstance(doc, dict) and doc.get("version") == "v1" and ("flags" in doc or "sharing" in doc):
                out.append(cm)
                break
    return out


def check_config_key(state: ClusterState) -> Iterator[Finding]:
    maps = plugin_configmaps(state)
    if not maps:
        return
    keys = {str(k) for cm in maps for k in (cm.get("data") or {})}
    where = ", ".join(f"{(cm.get('metadata') or {}).get('namespace', '')}/{(cm.get('metadata') or {}).get('name', '')}"
                      for cm in maps)
    missing: dict[str, list[str]] = {}
    for node in state.nodes:
        key = node.labels.get(LABEL_PLUGIN_CONFIG)
        if key is not None and key not in keys:
            missing.setdefault(key, []).append(node.name)
    for key, nodes in sorted(missing.items()):
        for name in nodes:
            yield Finding(
                "sharing-config-missing",
                ERROR,
                obj_ref("Node", name),
                f"label {LABEL_PLUGIN_CONFIG}={key} names no key of the device-plugin ConfigMap ({where}: "
                f"{', '.join(sorted(keys))}); the plugin's config-manager fails on this node and it advertises "
                f"no GPUs ({len(nodes)} node(s) with this label)",
                f"add the key {key} to the ConfigMap, or relabel: kubectl label node {name} "
                f"{LABEL_PLUGIN_CONFIG}={sorted(keys)[0]} --overwrite",
            )


def check_mig_state(state: ClusterState) -> Iterator[Finding]:
    for node in state.nodes:
        value = node.labels.get(LABEL_MIG_STATE)
        if value is None or value == "success":
            continue
        config = node.labels.get("nvidia.com/mig.config", "?")
        failed = value == "failed"
        yield Finding(
            "mig-config-state",
            ERROR if failed else WARNING,
            obj_ref("Node", node.name),
            f"{LABEL_MIG_STATE} is {value} for mig-parted config {config}: "
            + ("the MIG manager could not apply it (a profile this GPU lacks, or GPUs in use)" if failed
               else "the MIG manager is still repartitioning")
            + "; the node has no GPUs to allocate until it is success",
            "kubectl logs -n gpu-operator -l app=nvidia-mig-manager --tail=50   # then fix "
            f"nvidia.com/mig.config on node {node.name} (kubectl label node {node.name} "
            "nvidia.com/mig.config=all-disabled --overwrite undoes it)",
        )


def check_mig_labels(state: ClusterState) -> Iterator[Finding]:
    for node in state.nodes:
        strategy = node.labels.get(LABEL_MIG_STRATEGY)
        product = node.labels.get(LABEL_PRODUCT, "")
        if strategy == "single" and product.endswith("-MIG-INVALID"):
            yield Finding(
                "mig-strategy-labels",
                ERROR,
                obj_ref("Node", node.name),
                f"mig.strategy single but the GPUs hold MIG devices of several profiles ({LABEL_PRODUCT}={product}): "
                "the device plugin advertises none",
                "use a config of one profile (nvidia.com/mig.config=all-1g.10gb, ...) or the mixed strategy",
            )
        elif strategy == "mixed" and "-MIG-" in product:
            yield Finding(
                "mig-strategy-labels",
                WARNING,
                obj_ref("Node", node.name),
                f"mig.strategy mixed but {LABEL_PRODUCT}={product} is a MIG device (the single strategy's labels): "
                "GFD and the device plugin run different strategies",
                "set the same migStrategy for the device plugin and GPU Feature Discovery",
            )


def _replicas(node: NodeInfo) -> dict[str, tuple[int, str]]:
    """Shared resources of a node from GFD's labels: resource -> (replicas, sharing strategy)."""
    out: dict[str, tuple[int, str]] = {}
    for key, value in node.labels.items():
        if key.endswith(".replicas") and key.startswith("nvidia.com/") and value.isdigit() and int(value) > 1:
            resource = key.removesuffix(".replicas")
            out[resource] = (int(value), node.labels.get(f"{resource}.sharing-strategy", "time-slicing"))
    return out


def check_shared_requests(state: ClusterState) -> Iterator[Finding]:
    for pod in state.pods:
        ref = obj_ref("Pod", pod.name, pod.namespace)
        raw_status = pod.raw.get("status")
        status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
        if status.get("reason") == "UnexpectedAdmissionError" and ADMISSION_WORDS in str(status.get("message", "")):
            yield Finding(
                "shared-request-gt-one",
                ERROR,
                ref,
                f"failed admission on {pod.node_name or 'its node'}: {status.get('message')}",
                "ask for 1 shared GPU per container (resources.limits), or use a pool of whole GPUs",
            )
            continue
        node = state.node_by_name.get(pod.node_name) if pod.node_name else None
        if node is None or pod.terminated:
            continue
        shared = _replicas(node)
        if not shared:
            continue
        for resource, count in pod.gpu_resources.items():
            base = resource.removesuffix(SHARED_SUFFIX)
            if count < 2 or base not in shared:
                continue
            replicas, strategy = shared[base]
            mps = strategy == "mps"
            yield Finding(
                "shared-request-gt-one",
                ERROR if mps else WARNING,
                ref,
                f"asks {count} {resource} on node {node.name}, which shares each GPU {replicas} ways ({strategy}): "
                + ("MPS fails requests greater than one (failRequestsGreaterThanOne), so the kubelet rejects it "
                   "(UnexpectedAdmissionError)" if mps else
                   "with failRequestsGreaterThanOne it fails admission; without, it gets replicas, not more GPU"),
                snippet({"resources": {"limits": {resource: 1}}}),
            )


def _template_labels(nodepool: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = nodepool.get("spec") or {}
    template = spec.get("template") if isinstance(spec, dict) else {}
    meta = template.get("metadata") if isinstance(template, dict) else {}
    labels = meta.get("labels") if isinstance(meta, dict) else {}
    return labels if isinstance(labels, dict) else {}


def check_nodepool_overlay(state: ClusterState) -> Iterator[Finding]:
    if not state.nodepools:
        return
    named, every = overlay_scope(state.nodeoverlays)
    if every:
        return
    for np in state.nodepools:
        name = str((np.get("metadata") or {}).get("name", ""))
        if not name or name in named:
            continue
        labels = _template_labels(np)
        nodes = [n for n in state.nodes if n.labels.get(LABEL_NODEPOOL) == name]
        shared_nodes = [n.name for n in nodes if {SHARED, MIG} & set(n.gpus.kinds)]
        if LABEL_PLUGIN_CONFIG not in labels and "nvidia.com/mig.config" not in labels and not shared_nodes:
            continue
        why = (f"its nodes {names(shared_nodes)} advertise shared or MIG devices" if shared_nodes
               else f"its template labels select a shared device-plugin config ({LABEL_PLUGIN_CONFIG}="
               f"{labels.get(LABEL_PLUGIN_CONFIG, '?')})")
        overlay = {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": f"{name}-gpu-sharing"},
            "spec": {
                "requirements": [{"key": LABEL_NODEPOOL, "operator": "In", "values": [name]}],
                "capacity": {"nvidia.com/gpu": "<GPUs x replicas>"},
            },
        }
        yield Finding(
            "nodepool-overlay",
            WARNING,
            obj_ref("NodePool", name),
            f"{why}, but no NodeOverlay covers the NodePool: Karpenter sizes its nodes by physical GPUs, so it "
            "launches a node per GPU pod and cannot place pods asking renamed or MIG resources",
            snippet(overlay) + "\n# and the Karpenter chart: --set settings.featureGates.nodeOverlay=true "
            "(kgpu render writes both from a profile with sharing)",
        )


def check_memory_isolation(state: ClusterState) -> Iterator[Finding]:
    for node in state.nodes:
        shared = _replicas(node)
        if not any(strategy == "time-slicing" for _, strategy in shared.values()):
            continue
        pods = [p for p in state.pods_by_node.get(node.name, []) if p.gpu_resources]
        if len(pods) < 2:
            continue
        yield Finding(
            "shared-memory-isolation",
            INFO,
            obj_ref("Node", node.name),
            f"{len(pods)} GPU pods time-share its GPUs ({names([f'{p.namespace}/{p.name}' for p in pods])}): "
            "time-slicing isolates neither memory nor faults; one pod can take the GPU's memory from the others",
            "cap each process's memory in the workload (e.g. PYTORCH_CUDA_ALLOC_CONF, vLLM --gpu-memory-utilization), "
            "or use MIG for isolation",
        )


CHECKS = {
    "sharing-config-missing": check_config_key,
    "mig-config-state": check_mig_state,
    "mig-strategy-labels": check_mig_labels,
    "shared-request-gt-one": check_shared_requests,
    "nodepool-overlay": check_nodepool_overlay,
    "shared-memory-isolation": check_memory_isolation,
}

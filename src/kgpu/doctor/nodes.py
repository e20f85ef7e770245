"""GPU nodes: advertised GPUs, taints, and what runs on them (with the hourly price of waste).

A GPU node is one whose instance type has GPUs in kgpu's catalog, that GPU Feature Discovery / Node Feature
Discovery labels as having an NVIDIA GPU, or that advertises ``nvidia.com/gpu`` capacity. TKE super nodes
(virtual kubelets) are left out of the per-node checks: they have no host to configure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kgpu.catalog import aws_catalog
from kgpu.doctor.common import names, snippet
from kgpu.doctor.deviceplugin import plugin_log_command
from kgpu.doctor.findings import ERROR, INFO, WARNING, Finding
from kgpu.doctor.state import (
    LABEL_EKS_NODEGROUP,
    LABEL_EKSCTL_NODEGROUP,
    LABEL_GFD_PRESENT,
    LABEL_NFD_NVIDIA_PCI,
    LABEL_NODEPOOL,
    ClusterState,
    NodeInfo,
    PodInfo,
    uses_dra_driver,
)
from kgpu.errors import InputError
from kgpu.model.gpus import AMD_GPU, DRA_DRIVER
from kgpu.model.objects import Taint, Toleration
from kgpu.model.predicates import tolerates

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
CAPACITY_LABELS = (
    "karpenter.sh/capacity-type",
    "eks.amazonaws.com/capacityType",
    "lifecycle",
    "node-lifecycle",
)


def capacity_type(node: NodeInfo) -> str:
    """spot or on-demand, from Karpenter's, EKS managed groups' or eksctl's (seed 001: lifecycle) labels."""
    for key in CAPACITY_LABELS:
        value = node.labels.get(key, "").lower()
        if value:
            return "spot" if "spot" in value else "on-demand"
    return "on-demand"


def hourly_price(node: NodeInfo, region: str) -> float | None:
    """The catalog's price of the node's instance type in its region (spot: the region's median)."""
    if node.catalog_type is None:
        return None
    where = node.labels.get("topology.kubernetes.io/region") or region
    if not where:
        return None
    try:
        pricing = aws_catalog().pricing(node.catalog_type.name, where)
    except InputError:
        return None
    if pricing is None:
        return None
    if capacity_type(node) == "spot" and pricing.spot is not None:
        return pricing.spot
    return pricing.on_demand


def _pool_of(node: NodeInfo) -> str:
    for key, what in (
        (LABEL_NODEPOOL, "NodePool"),
        (LABEL_EKS_NODEGROUP, "node group"),
        (LABEL_EKSCTL_NODEGROUP, "node group"),
    ):
        if node.labels.get(key):
            return f"{what} {node.labels[key]}"
    return ""


def _nodes(state: ClusterState) -> list[NodeInfo]:
    return [n for n in state.gpu_nodes if not n.virtual]


def _advertised(node: NodeInfo) -> str:
    """What the node advertises of GPUs, in words: "12 nvidia.com/gpu.shared (time-slicing x4)"."""
    inv = node.gpus
    parts = [f"{r.allocatable} {r.name}" for r in inv.resources if r.allocatable and not r.kind.startswith("dra")]
    dra = sum(r.allocatable for r in inv.resources if r.kind.startswith("dra"))
    if dra:
        parts.append(f"{dra} {DRA_DRIVER} device(s)")
    return ", ".join(parts) + (f" ({inv.kind})" if inv.kind not in ("whole", "-") else "")


def check_no_gpus(state: ClusterState) -> Iterator[Finding]:
    yield from _nvidia_no_gpus(state)
    for node in amd_nodes(state):
        yield from _amd_findings(state, node)


def _nvidia_no_gpus(state: ClusterState) -> Iterator[Finding]:
    dra_cluster = uses_dra_driver(state)
    for node in _nodes(state):
        inv = node.gpus
        if not node.ready:
            yield Finding(
                "gpu-node-not-ready",
                WARNING,
                node.ref,
                f"GPU node is not Ready ({node.gpu_reason}); pods cannot start on it",
                f"kubectl describe node {node.name}",
            )
            continue
        if inv.repartitioning or inv.mig_failed:
            continue  # mig-config-state says what the MIG manager is doing (kgpu.doctor.sharing)
        if inv.units:
            physical = inv.whole_equivalent()
            if node.expected_gpus and physical is not None and physical < node.expected_gpus:
                yield Finding(
                    "gpu-node-missing-gpus",
                    WARNING,
                    node.ref,
                    f"GPU node advertises {_advertised(node)}, {physical} GPU(s), but has {node.expected_gpus} "
                    f"({node.gpu_reason if node.catalog_type else 'per its GPU count label'}): the device plugin "
                    "marked some GPUs unhealthy (XID errors, fallen off the bus)",
                    f"{plugin_log_command(state, node)} | grep -i -e unhealthy -e xid\n"
                    f"# on the host: nvidia-smi -q | grep -i -e xid -e retired; drain and reboot: kubectl drain {node.name} --ignore-daemonsets",
                )
            continue
        if node.name in state.dra_nodes and not inv.capacity_units:
            continue  # NVIDIA's DRA driver publishes its GPUs as ResourceSlices (kgpu.doctor.dra)
        if dra_cluster and not inv.registered:
            continue  # dra-driver-missing: neither the DRA driver nor a device plugin offers its GPUs
        if inv.capacity_units:
            msg = (
                f"GPU node has {inv.capacity_units} GPU(s) of capacity "
                f"({', '.join(f'{r.capacity} {r.name}' for r in inv.resources if r.capacity)}) but 0 allocatable: "
                "every GPU is marked unhealthy by the device plugin"
            )
        elif inv.registered:
            msg = f"GPU node advertises 0 allocatable {', '.join(r.name for r in inv.resources)}"
        else:
            msg = "GPU node has no GPU resource (nvidia.com/gpu, its .shared form, MIG devices) in its allocatable: no device plugin registered the GPUs"
        yield Finding(
            "gpu-node-no-gpus",
            ERROR,
            node.ref,
            f"{msg} ({node.gpu_reason}); GPU pods see Insufficient nvidia.com/gpu",
            f"kubectl get pods -A -o wide --field-selector spec.nodeName={node.name} | grep -i device-plugin\n"
            f"kubectl get node {node.name} -o jsonpath='{{.status.allocatable}}'\n"
            "# on the host: kgpu node-check (driver, container toolkit, runtime, device-plugin socket)",
        )


def check_untainted(state: ClusterState) -> Iterator[Finding]:
    for node in _nodes(state):
        if any(t.effect in ("NoSchedule", "NoExecute") for t in node.model.taints):
            continue
        pool = _pool_of(node)
        fix = f"kubectl taint nodes {node.name} nvidia.com/gpu=true:NoSchedule"
        if pool.startswith("NodePool"):
            fix += f"\n# and keep it on new nodes: in NodePool {node.labels[LABEL_NODEPOOL]} spec.template.spec.taints:\n"
            fix += snippet([GPU_TAINT])
        elif pool:
            fix += '\n# and keep it on new nodes: eksctl nodeGroups[].taints: {nvidia.com/gpu: "true:NoSchedule"}'
            fix += '\n# plus the ASG tag k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu: "true:NoSchedule"'
        yield Finding(
            "gpu-node-untainted",
            WARNING,
            node.ref,
            f"GPU node has no NoSchedule taint ({node.gpu_reason}"
            + (f", {pool}" if pool else "")
            + "): pods that need no GPU can fill it and keep the expensive node up",
            fix,
        )


def _cost(node: NodeInfo, region: str) -> tuple[str, float]:
    price = hourly_price(node, region)
    if price is None:
        return "", 0.0
    return f"; {node.instance_type} {capacity_type(node)} costs ${price:.3f}/hour", price


def check_usage(state: ClusterState) -> Iterator[Finding]:
    """Idle GPU nodes and GPU nodes whose pods use no GPU: what each wastes per hour."""
    for node in _nodes(state):
        pods = [p for p in state.pods_by_node.get(node.name, ()) if not p.is_daemon]
        if not node.ready or not (node.gpus.units or node.name in state.dra_nodes):
            continue  # gpu-node-not-ready / gpu-node-no-gpus say what is wrong with it
        text, _ = _cost(node, state.region)
        if not pods:
            pool = _pool_of(node)
            fix = f"kubectl drain {node.name} --ignore-daemonsets --delete-emptydir-data && kubectl delete node {node.name}"
            if pool.startswith("NodePool"):
                fix = _consolidation_fix(state, node)
            elif pool:
                fix = (
                    "# let cluster-autoscaler scale the group to 0: minSize 0 and the node-template tags for "
                    "its labels/taints\n" + fix
                )
            yield Finding(
                "gpu-node-idle",
                WARNING,
                node.ref,
                f"GPU node runs no workload pods (only DaemonSets){text}",
                fix,
            )
            continue
        if any(p.asks_gpu for p in pods):
            continue  # a GPU by an extended resource (whole, shared, MIG), or by a resource claim (DRA)
        shown = names([p.key for p in pods], 3)
        yield Finding(
            "gpu-node-no-gpu-pods",
            WARNING,
            node.ref,
            f"GPU node runs only pods that request no GPU ({shown}){text}: its GPUs are idle"
            + _why_they_run_here(node, pods),
            _keep_off_fix(node, pods),
        )


CONSOLIDATES_EMPTY = ("WhenEmpty", "WhenEmptyOrUnderutilized")
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def _consolidation_fix(state: ClusterState, node: NodeInfo) -> str:
    """Let Karpenter remove the empty node; when its NodePool does that already, what keeps this one."""
    name = node.labels[LABEL_NODEPOOL]
    np = next((n for n in state.nodepools if (n.get("metadata") or {}).get("name") == name), None)
    disruption = ((np or {}).get("spec") or {}).get("disruption") or {}
    policy = disruption.get("consolidationPolicy") if isinstance(disruption, dict) else None
    after = disruption.get("consolidateAfter") if isinstance(disruption, dict) else None
    if policy not in CONSOLIDATES_EMPTY or after == "Never":
        return f"# let Karpenter remove empty nodes: in NodePool {name} spec.disruption:\n" + snippet(
            {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}
        )
    lines = [
        f"# NodePool {name} removes empty nodes already (consolidationPolicy: {policy}, consolidateAfter: "
        f"{after or 'unset'}): something keeps this one"
    ]
    notes = node.raw.get("metadata", {}).get("annotations") or {}
    if isinstance(notes, dict) and str(notes.get(DO_NOT_DISRUPT, "")).lower() == "true":
        lines.append(
            f"# the node has {DO_NOT_DISRUPT}: true; remove it:\nkubectl annotate node {node.name} {DO_NOT_DISRUPT}-"
        )
    raw_budgets = disruption.get("budgets")
    budgets: list[Any] = raw_budgets if isinstance(raw_budgets, list) else []
    if any(
        isinstance(b, dict) and str(b.get("nodes")) in ("0", "0%") and not b.get("schedule") for b in budgets
    ):
        lines.append(f'# a disruption budget of NodePool {name} allows 0 nodes (budgets: nodes: "0")')
    lines.append(
        f"kubectl describe node {node.name} | grep -i -A2 disrupt   # Karpenter's DisruptionBlocked events say why"
    )
    return "\n".join(lines)


def _taints(node: NodeInfo) -> list[Taint]:
    return [t for t in node.model.taints if t.effect in ("NoSchedule", "NoExecute")]


def _tolerating(node: NodeInfo, pod: PodInfo) -> list[Toleration]:
    """The pod's tolerations that let it past the node's taints (those written in its spec)."""
    if pod.model is None:
        return []
    taints = _taints(node)
    return [t for t in pod.model.spec.tolerations if any(tolerates(t, taint) for taint in taints)]


def _catch_all(tol: Toleration) -> bool:
    return not tol.key and tol.operator == "Exists"


def _why_they_run_here(node: NodeInfo, pods: list[PodInfo]) -> str:
    taints = _taints(node)
    if not taints:
        return ""
    shown = ", ".join(str(t) for t in taints)
    catch_all = [p.key for p in pods if any(_catch_all(t) for t in _tolerating(node, p))]
    if catch_all:
        return (
            f". The node is tainted ({shown}), but {names(catch_all, 3)} tolerate every taint "
            "(a toleration with operator: Exists and no key)"
        )
    return f". The node is tainted ({shown}), but these pods tolerate the taint"


def _keep_off_fix(node: NodeInfo, pods: list[PodInfo]) -> str:
    """Taint the node; or, when it is tainted already, take away the tolerations that let the pods in."""
    if not _taints(node):
        return (
            f"kubectl taint nodes {node.name} nvidia.com/gpu=true:NoSchedule\n"
            "# then move those pods to CPU nodes: kubectl rollout restart on their controllers"
        )
    lines = []
    for pod in pods[:5]:
        tols = _tolerating(node, pod)
        if not tols:
            continue
        owner = f"{pod.owner_kind} {pod.namespace}/{pod.owner_name}" if pod.owner_name else pod.ref
        if any(_catch_all(t) for t in tols):
            lines.append(
                f"# {owner}: remove the catch-all toleration (operator: Exists, no key) from its pod template, "
                "or give it the key it is for:\n" + snippet({"tolerations": [{"operator": "Exists"}]})
            )
        else:
            keyed = [
                {
                    k: v
                    for k, v in (
                        ("key", t.key),
                        ("operator", t.operator),
                        ("value", t.value),
                        ("effect", t.effect),
                    )
                    if v
                }
                for t in tols
            ]
            lines.append(
                f"# {owner}: remove from its pod template (it needs no GPU):\n"
                + snippet({"tolerations": keyed})
            )
    lines.append("# then move those pods to CPU nodes: kubectl rollout restart on their controllers")
    return "\n".join(lines)


def idle_cost(state: ClusterState) -> float:
    """USD per hour of GPU nodes running no workload pod or none using a GPU."""
    total = 0.0
    for node in _nodes(state):
        if not node.ready or not (node.gpus.units or node.name in state.dra_nodes):
            continue
        pods = [p for p in state.pods_by_node.get(node.name, ()) if not p.is_daemon]
        if not any(p.asks_gpu for p in pods):
            total += _cost(node, state.region)[1]
    return round(total, 4)


def _gpu_hint(node: NodeInfo) -> str:
    """A label that says someone means the node for GPUs (seed 002's hand-made ``gpu-node=true``,
    ``gpu=nvidia-4090``): a hint, never proof; a name like ``gpu-node-1`` is not even that."""
    for key, value in sorted(node.labels.items()):
        if key.startswith(("kubernetes.io/", "node.kubernetes.io/", "beta.kubernetes.io/", "topology.")):
            continue
        text = f"{key}={value}".lower()
        if "gpu" in text or "nvidia" in text or "cuda" in text:
            return f"{key}={value}" if value else key
    return ""


def check_unrecognised(state: ClusterState) -> Iterator[Finding]:
    """Nodes labelled for GPUs that show none of the signs doctor reads: doctor says it cannot tell rather
    than treating them as CPU nodes silently (no GPU check looks at them)."""
    amd = {n.name for n in amd_nodes(state)}
    for node in state.nodes:
        if node.is_gpu or node.virtual or node.name in amd:
            continue  # an AMD GPU node gets AMD's checks (check_no_gpus)
        hint = _gpu_hint(node)
        if not hint:
            continue
        yield Finding(
            "gpu-node-unrecognised",
            INFO,
            node.ref,
            f"node is labelled {hint}, but kgpu cannot tell whether it is a GPU host: no GPU Feature Discovery "
            f"label ({LABEL_GFD_PRESENT}), no Node Feature Discovery PCI label ({LABEL_NFD_NVIDIA_PCI}), no "
            f"nvidia.com/gpu capacity (no device plugin ever registered GPUs), no GPU instance type, no Running "
            "pod with the nvidia runtime class; GPU checks skip it",
            "# on the host: lspci -nn | grep -i nvidia; kgpu node-check\n"
            "# then let the cluster see the GPUs: the device plugin (kgpu render --target device-plugin) or NFD:\n"
            "helm upgrade -i nfd oci://registry.k8s.io/nfd/charts/node-feature-discovery -n node-feature-discovery "
            "--create-namespace",
        )


CHECKS = {
    "gpu-node-unrecognised": check_unrecognised,
    "gpu-node-no-gpus": check_no_gpus,
    "gpu-node-missing-gpus": check_no_gpus,
    "gpu-node-not-ready": check_no_gpus,
    "gpu-node-untainted": check_untainted,
    "gpu-node-idle": check_usage,
    "gpu-node-no-gpu-pods": check_usage,
}


# --- AMD GPU nodes -----------------------------------------------------------------------------------------

# AMD's device plugin (github.com/ROCm/k8s-device-plugin): the DaemonSet its README deploys, and its image
AMD_PLUGIN_MANIFEST = "https://raw.githubusercontent.com/ROCm/k8s-device-plugin/master/k8s-ds-amdgpu-dp.yaml"
AMD_PLUGIN_IMAGE = "rocm/k8s-device-plugin"
# AMD's node labeller (k8s-node-labeller) writes amd.com/gpu.* (and, in older releases, beta.amd.com/gpu.*)
# labels; Node Feature Discovery a PCI label with AMD's vendor id, 1002, on display and processing classes
_AMD_LABEL_PREFIXES = ("amd.com/gpu.", "beta.amd.com/gpu.")
_NFD_AMD_PCI = ("feature.node.kubernetes.io/pci-0300_1002.present", "feature.node.kubernetes.io/pci-1200_1002.present",
                "feature.node.kubernetes.io/pci-0380_1002.present", "feature.node.kubernetes.io/pci-1002.present")


def amd_reason(node: NodeInfo) -> str:
    """Why a node is an AMD GPU host (its instance type, what it advertises, AMD's labeller, NFD's PCI label);
    "" when nothing says so. NVIDIA GPU nodes are doctor's other checks'."""
    ctype = node.catalog_type
    if ctype is not None and ctype.gpu_manufacturer == "amd" and ctype.gpu_count:
        return f"instance type {ctype.name} has {ctype.gpu_count} AMD GPU(s)"
    res = next((r for r in node.gpus.resources if r.name == AMD_GPU), None)
    if res is not None:
        return f"capacity {AMD_GPU}: {res.capacity if res.capacity is not None else res.allocatable}"
    for key in sorted(node.labels):
        if key.startswith(_AMD_LABEL_PREFIXES):
            return f"label {key}={node.labels[key]} (AMD's node labeller)"
        if key in _NFD_AMD_PCI and node.labels[key] == "true":
            return f"label {key}=true (an AMD PCI device, per Node Feature Discovery)"
    return ""


def amd_nodes(state: ClusterState) -> list[NodeInfo]:
    return [n for n in state.nodes if not n.is_gpu and not n.virtual and amd_reason(n)]


def _amd_plugin_pod(state: ClusterState, node: NodeInfo) -> PodInfo | None:
    for pod in state.pods_by_node.get(node.name, ()):
        if any(AMD_PLUGIN_IMAGE in image for image in pod.images):
            return pod
    return None


def _amd_findings(state: ClusterState, node: NodeInfo) -> Iterator[Finding]:
    """AMD's device plugin registers one ``amd.com/gpu`` per GPU and drops a GPU its health check (``--pulse``)
    finds bad: a node not Ready, advertising none, or fewer than its instance type has."""
    reason = amd_reason(node)
    res = next((r for r in node.gpus.resources if r.name == AMD_GPU), None)
    allocatable = res.allocatable if res is not None else 0
    capacity = res.capacity if res is not None else None
    plugin = _amd_plugin_pod(state, node)
    logs = (
        f"kubectl -n {plugin.namespace} logs {plugin.name}"
        if plugin is not None
        else f"kubectl get pods -A -o wide --field-selector spec.nodeName={node.name} | grep -i amdgpu"
    )
    host = "# on the host: lsmod | grep amdgpu; ls /dev/kfd /dev/dri; amd-smi list (the amdgpu driver and ROCm)"
    if not node.ready:
        yield Finding("gpu-node-not-ready", WARNING, node.ref,
                      f"AMD GPU node is not Ready ({reason}); pods cannot start on it",
                      f"kubectl describe node {node.name}")
        return
    if not allocatable:
        if capacity:
            msg = (f"AMD GPU node has {capacity} {AMD_GPU} of capacity but 0 allocatable: AMD's device plugin "
                   "reports every GPU unhealthy")
            fix = f"{logs}\n{host}"
        elif plugin is not None:
            msg = (f"AMD GPU node has no {AMD_GPU} in its allocatable, though AMD's device plugin pod "
                   f"{plugin.key} is on it ({plugin.phase}): it has not registered the GPUs")
            fix = f"{logs}\n{host}"
        else:
            msg = (f"AMD GPU node has no {AMD_GPU} in its allocatable and no AMD device plugin pod: nothing "
                   "registered the GPUs")
            fix = (f"kubectl create -f {AMD_PLUGIN_MANIFEST}   # or the AMD GPU Operator\n"
                   f"kubectl get ds -A | grep -i amdgpu   # one that exists but does not run on {node.name}\n{host}")
        yield Finding("gpu-node-no-gpus", ERROR, node.ref,
                      f"{msg} ({reason}); pods asking {AMD_GPU} see Insufficient {AMD_GPU}", fix)
        return
    expected = node.catalog_type.gpu_count if node.catalog_type is not None else 0
    if expected and allocatable < expected:
        yield Finding("gpu-node-missing-gpus", WARNING, node.ref,
                      f"AMD GPU node advertises {allocatable} {AMD_GPU} but has {expected} ({reason}): AMD's "
                      "device plugin left out GPUs its health check found bad",
                      f"{logs} | grep -i -e unhealthy -e health\n{host}")

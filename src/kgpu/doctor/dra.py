"""Dynamic Resource Allocation: claims that wait, and NVIDIA's DRA driver against the device plugin.

The snapshot's resource.k8s.io objects (``kgpu snapshot`` saves DeviceClasses, ResourceClaims,
ResourceClaimTemplates and ResourceSlices) are read and validated by ``kgpu.model.dra``: an object the API
server would have rejected is bad input (exit 2). What the API server accepts but leaves a pod waiting is a
finding here:

- ``dra-claim-pending``: a pending pod with resource claims, placed by ``kgpu.sim`` with the structured
  allocator over the snapshot's slices (kube-scheduler's words), and the fix the reason calls for: the
  template or claim to create, the driver to install, the device class to name, the devices in use.
- ``dra-unknown-class``: a ResourceClaimTemplate or an unallocated ResourceClaim naming a DeviceClass that
  does not exist (the API server accepts it; every pod using it waits in PreFilter).
- ``dra-driver-missing``: a GPU node that advertises no ``nvidia.com/gpu`` and publishes no
  ``gpu.nvidia.com`` ResourceSlice while the cluster uses NVIDIA's DRA driver (its DeviceClasses, its
  kubelet plugin, or claims on them): its GPUs are invisible to both paths.
- ``dra-double-advertised``: a node whose GPUs the device plugin advertises (``nvidia.com/gpu``
  allocatable) and NVIDIA's driver publishes (a ``gpu.nvidia.com`` slice of full GPUs): kube-scheduler
  counts them twice, so one GPU can go to a pod asking ``nvidia.com/gpu`` and to a claim.
- ``dra-karpenter``: a pod with claims that selects a Karpenter NodePool, or waits in a cluster whose
  capacity Karpenter provisions: Karpenter v1.x skips such pods (``--ignore-dra-requests``, on by default)
  and launches nothing for them.

Names are the chart's (NVIDIA/k8s-dra-driver-gpu v25.8.1): DaemonSet ``nvidia-dra-driver-gpu-kubelet-plugin``
(image ``nvcr.io/nvidia/k8s-dra-driver-gpu``), release namespace ``nvidia-dra-driver-gpu``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kgpu.catalog.dra import DRIVER, GPU_CLASS, MIG_CLASS
from kgpu.doctor.common import snippet
from kgpu.doctor.findings import ERROR, WARNING, Finding
from kgpu.doctor.state import LABEL_NODEPOOL, ClusterState, DaemonSetInfo, NodeInfo, PodInfo, kubelet_plugins
from kgpu.model.inputs import Objects

CHART = "nvidia-dra-driver-gpu"
INSTALL = (
    f"helm repo add nvidia https://helm.ngc.nvidia.com/nvidia && helm upgrade --install {CHART} nvidia/{CHART} "
    f"--version 25.8.1 -n {CHART} --create-namespace --set resources.gpus.enabled=true "
    "--set gpuResourcesEnabledOverride=true   # or: kgpu render --target dra-driver-chart (tolerations, affinity)"
)
KARPENTER_WORDS = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"


def _dra(state: ClusterState) -> Any:
    """The snapshot's DRA objects, read once for the whole doctor run (None without any)."""
    return state.dra()


def _claims_pods(state: ClusterState) -> list[PodInfo]:
    return [p for p in state.pods if p.model is not None and p.model.spec.claim_refs and not p.terminated]


def _nvidia_classes_used(objs: Any) -> bool:
    names = {GPU_CLASS, MIG_CLASS}
    if names & set(objs.classes):
        return True
    specs = [c.spec for c in objs.claims.values()] + [t.spec for t in objs.templates.values()]
    return any(a.device_class in names for s in specs for r in s.requests for a in r.alternatives)


def _slice_nodes(objs: Any, *, full_gpus: bool = False) -> set[str]:
    out = set()
    for s in objs.slices:
        if s.driver != DRIVER or not s.node_name:
            continue
        if full_gpus and not any(d.attributes.get(f"{DRIVER}/type") == "gpu" for d in s.devices):
            continue
        out.add(s.node_name)
    return out


# --- dra-claim-pending -----------------------------------------------------------------------------------


def check_claims_pending(state: ClusterState) -> Iterator[Finding]:
    objs = _dra(state)
    pending = [p for p in _claims_pods(state) if not p.node_name]
    if objs is None or not pending:
        return
    from kgpu.sim.simulate import SCHEDULED, simulate

    objects = Objects(
        nodes=list(state.objects.nodes), pods=[p.model for p in state.pods if p.model is not None],
        priority_classes=state.objects.priority_classes, preemption_policies=state.objects.preemption_policies,
        default_preemption_policy=state.objects.default_preemption_policy, dra=state.objects.dra,
        typed=state.objects.typed,  # the DRA objects read once (``_dra`` above read them)
    )
    from kgpu.errors import InputError

    try:
        result = simulate(objects)
    except InputError as exc:  # a selector the API server would refuse (stored by an older one): said, once
        parts = (exc.where or "").split(": ")
        yield Finding(CHECK_PENDING, ERROR, parts[1] if len(parts) > 2 else "DRA objects",
                      f"{len(pending)} pod(s) wait for their resource claims, and kgpu cannot simulate the claims: "
                      f"{parts[-1]}: {exc.message}" if len(parts) > 2 else exc.message,
                      "fix or recreate the object named, as the API server now validates it")
        return
    by_pod = {id(p.pod): p for p in result.placements}
    for info in pending:
        placed = by_pod.get(id(info.model))
        if placed is None:
            continue
        if placed.phase == SCHEDULED:
            yield Finding(CHECK_PENDING, WARNING, info.ref,
                          f"waits for its resource claims, but kgpu's allocator finds devices for it on {placed.node} "
                          f"({_devices(placed.devices)}): the scheduler has not retried it since they were freed"
                          + (", or the snapshot is older than the pod's last attempt" if not state.live else ""),
                          f"kubectl get events -n {info.namespace} --field-selector involvedObject.name={info.name}")
            continue
        reason = placed.reason or ""
        yield Finding(CHECK_PENDING, ERROR, info.ref, f"waits for its resource claims: {reason}",
                      _pending_fix(state, objs, info, reason))


def _devices(devices: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d['pool']}/{d['device']}" for d in devices) or "no device"


def _pending_fix(state: ClusterState, objs: Any, pod: PodInfo, reason: str) -> str:
    assert pod.model is not None
    if "ResourceClaim not created yet" in reason:
        missing = [t for _, c, t in pod.model.spec.claim_refs if t and f"{pod.namespace}/{t}" not in objs.templates]
        have = sorted(t.name for t in objs.templates.values() if t.namespace == pod.namespace)
        tpl = missing[0] if missing else "<template>"
        return (f"create ResourceClaimTemplate {pod.namespace}/{tpl} (the resourceclaim controller makes the pod's claim "
                f"from it), or point resourceClaimTemplateName at one that exists"
                + (f" ({', '.join(have)})" if have else " (the namespace has none)") + ":\n"
                + snippet(_template(pod.namespace, tpl)))
    if "could not find ResourceClaim" in reason:
        name = reason.split('"')[1] if '"' in reason else "<namespace>/<claim>"
        ns, _, claim = name.partition("/")
        return f"create ResourceClaim {name}, or use a resourceClaimTemplateName so each pod gets its own:\n" + snippet(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim, "namespace": ns},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}})
    if "does not exist" in reason and "device class" in reason:
        cls = reason.split("device class ", 1)[1].split(" ", 1)[0]
        if cls in (GPU_CLASS, MIG_CLASS):
            return f"the DeviceClass {cls} comes with NVIDIA's DRA driver chart: {INSTALL}"
        close = _closest(cls, sorted(objs.classes))
        if close:
            return f"deviceClassName: {close} (the request names {cls}, which no DeviceClass is)"
        return f"deviceClassName {cls} names no DeviceClass; the cluster has {', '.join(sorted(objs.classes)) or 'none'}"
    if "cannot allocate all claims" in reason or "resourceclaim not available" in reason:
        published = _slice_nodes(objs)
        if not published:
            return ("no node publishes gpu.nvidia.com devices: NVIDIA's DRA driver's kubelet plugin runs nowhere or is "
                    f"not installed ({_plugin_state(state)}); {INSTALL}")
        used = sum(1 for c in objs.claims.values() if c.allocation is not None for _ in c.allocation.devices)
        total = sum(len(s.devices) for s in objs.slices)
        return (f"{len(published)} node(s) publish {total} device(s), {used} allocated to claims: free devices (delete "
                "finished pods' claims), add nodes of a DRA pool, or loosen the claim's selectors/count; "
                f"kubectl get resourceslices -o wide; kubectl get resourceclaims -A")
    return f"kubectl describe pod -n {pod.namespace} {pod.name}; kubectl get resourceclaims -n {pod.namespace}"


def _template(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}}}


def _plugin_state(state: ClusterState) -> str:
    plugins = kubelet_plugins(state)
    if not plugins:
        return f"no {CHART}-kubelet-plugin DaemonSet"
    return "; ".join(f"{ds.ref}: {ds.status.get('numberReady', 0)} of {ds.status.get('desiredNumberScheduled', 0)} ready"
                     for ds in plugins)


# --- dra-unknown-class -----------------------------------------------------------------------------------


def check_unknown_class(state: ClusterState) -> Iterator[Finding]:
    objs = _dra(state)
    if objs is None:
        return
    used_templates = {f"{p.namespace}/{t}" for p in _claims_pods(state) for _, _, t in p.model.spec.claim_refs if t}  # type: ignore[union-attr]
    owners: list[tuple[str, str, Any, bool]] = [
        (f"ResourceClaimTemplate/{t.namespace}/{t.name}", "spec.spec.devices", t.spec, f"{t.namespace}/{t.name}" in used_templates)
        for t in objs.templates.values()
    ] + [(f"ResourceClaim/{c.namespace}/{c.name}", "spec.devices", c.spec, True)
         for c in objs.claims.values() if c.allocation is None]
    for ref, field, spec, used in owners:
        for i, req in enumerate(spec.requests):
            for alt in req.alternatives:
                if alt.device_class in objs.classes:
                    continue
                close = _closest(alt.device_class, sorted(objs.classes))
                fix = (f"{field}.requests[{i}]: deviceClassName: {close}" if close else
                       f"create DeviceClass {alt.device_class}, or name one of: {', '.join(sorted(objs.classes)) or 'none exist'}")
                if alt.device_class in (GPU_CLASS, MIG_CLASS):
                    fix = f"the DeviceClass {alt.device_class} comes with NVIDIA's DRA driver chart: {INSTALL}"
                yield Finding(CHECK_CLASS, ERROR if used else WARNING, ref,
                              f"request {alt.name} asks for device class {alt.device_class}, which does not exist: the API "
                              "server accepts it, and every pod using it waits (PreFilter: device class "
                              f"{alt.device_class} does not exist)", fix)


def _closest(name: str, known: list[str]) -> str:
    import difflib

    hit = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
    return hit[0] if hit else ""


# --- dra-driver-missing / dra-double-advertised ----------------------------------------------------------


def check_driver_missing(state: ClusterState) -> Iterator[Finding]:
    objs = _dra(state)
    plugins = kubelet_plugins(state)
    if objs is None and not plugins:
        return
    in_use = bool(plugins) or (objs is not None and (_nvidia_classes_used(objs) or _slice_nodes(objs)))
    if not in_use:
        return
    published = _slice_nodes(objs) if objs is not None else set()
    for node in state.gpu_nodes:
        if node.virtual or node.name in published or node.gpus.units > 0:
            continue
        yield Finding(CHECK_DRIVER, ERROR, node.ref,
                      f"a GPU node ({node.gpu_reason}) that publishes no {DRIVER} ResourceSlice and advertises no "
                      "nvidia.com/gpu, in a cluster that uses NVIDIA's DRA driver: no claim and no GPU request can reach its "
                      f"GPUs ({_why_no_plugin(plugins, node)})", _driver_fix(plugins, node))


def _why_no_plugin(plugins: list[DaemonSetInfo], node: NodeInfo) -> str:
    if not plugins:
        return f"no {CHART}-kubelet-plugin DaemonSet"
    out = []
    for ds in plugins:
        blocked = ds.blocked_on(node.model)
        out.append(f"{ds.ref} does not run there: {blocked[0]}" if blocked else f"{ds.ref} runs there but has published nothing yet: check its gpus container's log")
    return "; ".join(out)


def _driver_fix(plugins: list[DaemonSetInfo], node: NodeInfo) -> str:
    if not plugins:
        return INSTALL
    for ds in plugins:
        blocked = ds.blocked_on(node.model)
        if blocked is None:
            return f"kubectl logs -n {ds.namespace} ds/{ds.name} -c gpus   # NVML or driver root (nvidiaDriverRoot) errors"
        if blocked[1] is not None:
            t = blocked[1]
            tol = {"key": t.key, "operator": "Exists", "effect": t.effect}
            return (f"helm upgrade {CHART} nvidia/{CHART} -n {ds.namespace} --reuse-values -f values.yaml, with the taint "
                    f"tolerated:\n" + snippet({"kubeletPlugin": {"tolerations": [tol]}}))
    terms = [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node.name]}]}]
    pool = node.labels.get(LABEL_NODEPOOL)
    if pool:
        terms = [{"matchExpressions": [{"key": LABEL_NODEPOOL, "operator": "In", "values": [pool]}]}]
    return ("the kubelet plugin's node affinity (the chart's default wants NFD's pci-10de.present or "
            "nvidia.com/gpu.present labels) misses the node; add a term for it (helm upgrade --reuse-values -f values.yaml):\n"
            + snippet({"kubeletPlugin": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms}}}}}))


def check_double_advertised(state: ClusterState) -> Iterator[Finding]:
    objs = _dra(state)
    if objs is None:
        return
    both = _slice_nodes(objs, full_gpus=True)
    plugins = [ds.ref for ds in state.daemonsets if "device-plugin" in ds.name]
    for node in state.nodes:
        if node.name not in both or not (node.allocatable_gpus or 0) > 0:
            continue
        by = f" ({', '.join(plugins)})" if plugins else ""
        yield Finding(CHECK_DOUBLE, ERROR, node.ref,
                      f"its GPUs are advertised twice: {node.allocatable_gpus} nvidia.com/gpu by the device plugin{by} and "
                      f"as {DRIVER} devices in a ResourceSlice by NVIDIA's DRA driver; kube-scheduler counts each path on its "
                      "own, so one GPU can go to a pod asking nvidia.com/gpu and to a claim at once",
                      "keep one advertiser per node: with the GPU Operator, kubectl label node "
                      f"{node.name} nvidia.com/gpu.deploy.device-plugin=false; with a plugin DaemonSet, exclude the DRA "
                      "nodes in its node affinity (kgpu render does so for pools with gpuAllocation: dra); or keep the "
                      f"device plugin and take the node out of the DRA driver's kubeletPlugin affinity")


# --- dra-karpenter ---------------------------------------------------------------------------------------


def _selected_nodepool(pod: PodInfo) -> str:
    assert pod.model is not None
    spec = pod.model.spec
    for k, v in spec.node_selector:
        if k == LABEL_NODEPOOL:
            return v
    if spec.affinity is not None:
        for term in spec.affinity.terms:
            for r in term.match_expressions:
                if r.key == LABEL_NODEPOOL and r.operator == "In" and r.values:
                    return ", ".join(r.values)
    return ""


def check_karpenter(state: ClusterState) -> Iterator[Finding]:
    if not state.nodepools:
        return
    for pod in _claims_pods(state):
        pool = _selected_nodepool(pod)
        if not pool and pod.node_name:
            continue
        where = f"selects NodePool {pool}" if pool else "waits in a cluster whose nodes Karpenter provisions"
        fix = ("keep capacity for it that Karpenter does not have to launch: a static NodePool (spec.replicas: N, "
               "feature gate StaticCapacity=true) or a node group with nodes; Karpenter's IGNORE_DRA_REQUESTS=false makes it "
               "launch nodes without simulating the claim, which may lack the devices")
        yield Finding(CHECK_KARPENTER, WARNING if pod.node_name else ERROR, pod.ref,
                      f"has resource claims and {where}: Karpenter skips such pods (\"Failed to schedule pod, "
                      f"{KARPENTER_WORDS}\"; --ignore-dra-requests is on by default) and launches no node for it"
                      + (", so it runs only while today's node lasts" if pod.node_name else ""), fix)


CHECK_PENDING = "dra-claim-pending"
CHECK_CLASS = "dra-unknown-class"
CHECK_DRIVER = "dra-driver-missing"
CHECK_DOUBLE = "dra-double-advertised"
CHECK_KARPENTER = "dra-karpenter"

CHECKS: dict[str, Callable[[ClusterState], Iterator[Finding]]] = {
    CHECK_PENDING: check_claims_pending,
    CHECK_CLASS: check_unknown_class,
    CHECK_DRIVER: check_driver_missing,
    CHECK_DOUBLE: check_double_advertised,
    CHECK_KARPENTER: check_karpenter,
}

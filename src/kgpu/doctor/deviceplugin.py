"""The NVIDIA device plugin: present, Ready on every GPU node, tolerating their taints, not twice, current.

Without a plugin on a node, kubelet never advertises ``nvidia.com/gpu`` there and every GPU pod sees
"Insufficient nvidia.com/gpu". Two plugins on one node (a DaemonSet on Bottlerocket NVIDIA or GPU Operator
nodes, which already run one) fight over the kubelet's device-plugin socket. Where the plugin runs is read
the way the DaemonSet controller decides it: the template's node selector and affinity, and its tolerations
plus the ones the controller adds, against each node (``kgpu.model.predicates``). Which containers, pods and
DaemonSets are a plugin, and which tool manages one, is :mod:`kgpu.doctor.deviceplugin_workloads`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kgpu.doctor.common import names, snippet, toleration_for
from kgpu.doctor.deviceplugin_workloads import (
    _strings,
    _template_spec,
    builtin_plugin,
    cluster_policy,
    helm_release,
    plugin_containers,
    plugin_daemonsets,
    plugin_pods,
    plugin_version,
)
from kgpu.doctor.findings import ERROR, WARNING, Finding
from kgpu.doctor.state import (
    LABEL_KGPU_DEVICE_PLUGIN,
    LABEL_OPERATOR_DEVICE_PLUGIN,
    OPERATOR_DEPLOY_PREFIX,
    ClusterState,
    DaemonSetInfo,
    NodeInfo,
    PodInfo,
    uses_dra_driver,
)

CURRENT_VERSION = "v0.20.0"  # what `kgpu render --target device-plugin` deploys
CURRENT_IMAGE = f"nvcr.io/nvidia/k8s-device-plugin:{CURRENT_VERSION}"
OLDEST_SUPPORTED = (0, 17, 0)
RENDER_FIX = "kgpu render --profile kgpu.yaml --target device-plugin | kubectl apply -f -"
UPSTREAM_FIX = (
    "kubectl apply -f https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/"
    f"{CURRENT_VERSION}/deployments/static/nvidia-device-plugin.yml"
)


def _plugin_nodes(state: ClusterState) -> list[NodeInfo]:
    """GPU nodes that need a plugin: virtual (TKE super) nodes expose GPUs themselves; NVIDIA's DRA driver
    publishes the GPUs of the nodes it has ResourceSlices for, and in a cluster that runs the driver a node
    no plugin ever registered GPUs on is the driver's (kgpu.doctor.dra's dra-driver-missing); a node whose
    plugin the MIG manager paused to repartition is waiting on purpose (kgpu.doctor.sharing's
    mig-config-state)."""
    dra = uses_dra_driver(state)
    return [
        n
        for n in state.gpu_nodes
        if not n.virtual
        and n.name not in state.dra_nodes
        and not (dra and not n.gpus.registered)
        and not n.gpus.repartitioning
    ]


def check_missing(state: ClusterState) -> Iterator[Finding]:
    nodes = [n for n in _plugin_nodes(state) if not builtin_plugin(n)]
    if not nodes or plugin_daemonsets(state):
        return
    served = {p.node_name for p in plugin_pods(state.pods) if p.node_name}
    unserved = [n.name for n in nodes if n.name not in served]
    if not unserved:
        return
    yield Finding(
        "device-plugin-missing",
        ERROR,
        f"Node/{unserved[0]}",
        f"no NVIDIA device plugin DaemonSet in the cluster, and {len(unserved)} GPU node(s) "
        f"({names(unserved)}) run no plugin pod: nvidia.com/gpu is never advertised there and GPU pods "
        "stay Pending with Insufficient nvidia.com/gpu",
        _missing_fix(state, [state.node_by_name[n] for n in unserved]),
    )


def _missing_fix(state: ClusterState, nodes: list[NodeInfo]) -> str:
    """Install a plugin; on GPU Operator nodes (its nvidia.com/gpu.deploy.* labels), turn the Operator's on."""
    operator = [n.name for n in nodes if any(k.startswith(OPERATOR_DEPLOY_PREFIX) for k in n.labels)]
    if operator:
        return (
            f"# the GPU Operator labels these nodes ({names(operator, 3)}) but runs no device plugin: turn it on "
            "in its ClusterPolicy and read the operator's log\n"
            'kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge -p \'{"spec":{"devicePlugin":'
            '{"enabled":true}}}\'\n'
            "kubectl -n gpu-operator logs deploy/gpu-operator --tail 100"
        )
    return f"{RENDER_FIX}\n# or upstream's static manifest (add tolerations for your GPU nodes' taints):\n{UPSTREAM_FIX}"


def _managed(ds: DaemonSetInfo, what: str) -> str:
    """How to change ``what`` (tolerations, affinity) of a DaemonSet a tool manages, where an edit of the
    DaemonSet would be undone; "" when nothing manages it."""
    policy = cluster_policy(ds)
    if policy:
        return (
            f"\n# {ds.ref} is the GPU Operator's: it undoes edits of the DaemonSet; set {what} in ClusterPolicy "
            f"{policy} (spec.daemonsets.{what}): kubectl edit clusterpolicies.nvidia.com {policy}"
        )
    release = helm_release(ds)
    if release is not None:
        name, namespace = release
        return (
            f"\n# {ds.ref} is Helm release {name}'s: the next upgrade undoes an edit of the DaemonSet; put {what} in "
            f"its values and run: helm upgrade {name} nvdp/nvidia-device-plugin -n {namespace} --reuse-values "
            "-f values.yaml"
        )
    return ""


def check_untolerated(state: ClusterState) -> Iterator[Finding]:
    """A GPU node no plugin DaemonSet can run on: an untolerated taint, or a selector that leaves it out."""
    dss = plugin_daemonsets(state)
    if not dss:
        return
    served = {p.node_name for p in plugin_pods(state.pods) if p.node_name}
    for node in _plugin_nodes(state):
        if builtin_plugin(node) or node.name in served:
            continue
        blocked = [(ds, ds.blocked_on(node.model)) for ds in dss]
        if any(b is None for _, b in blocked):
            continue  # some plugin DaemonSet is meant to run here: check_not_ready reports it
        ds, why = blocked[0]
        assert why is not None
        reason, taint = why
        if taint is not None:
            tol = toleration_for(taint)
            spec = _template_spec(ds)
            has = isinstance(spec, dict) and isinstance(spec.get("tolerations"), list)
            patch = (
                f'[{{"op":"add","path":"/spec/template/spec/tolerations/-","value":{_json(tol)}}}]'
                if has
                else f'[{{"op":"add","path":"/spec/template/spec/tolerations","value":[{_json(tol)}]}}]'
            )
            yield Finding(
                "device-plugin-untolerated-taint",
                ERROR,
                node.ref,
                f"GPU node has taint {taint} that the device plugin {ds.ref} does not tolerate, so no plugin "
                "runs there and the node advertises no nvidia.com/gpu",
                f"# add to {ds.ref} spec.template.spec.tolerations:\n{snippet([tol])}\n"
                f"# e.g. kubectl -n {ds.namespace} patch daemonset {ds.name} --type json -p '{patch}'"
                + _managed(ds, "tolerations"),
            )
        else:
            yield Finding(
                "device-plugin-node-selector",
                ERROR,
                node.ref,
                f"the device plugin {ds.ref} does not select this GPU node ({reason}), so no plugin runs "
                "there and the node advertises no nvidia.com/gpu",
                _selector_fix(state, ds, node),
            )


NFD_PREFIX = "feature.node.kubernetes.io/"


def _nfd_workers(state: ClusterState) -> list[DaemonSetInfo]:
    """Node Feature Discovery's worker DaemonSets (the program nfd-worker, or its image)."""
    out = []
    for ds in state.daemonsets:
        spec = _template_spec(ds)
        containers = spec.get("containers") if isinstance(spec, dict) else None
        for c in containers if isinstance(containers, list) else ():
            if not isinstance(c, dict):
                continue
            command = _strings(c.get("command"))
            image = str(c.get("image") or "")
            if (command and command[0].rsplit("/", 1)[-1] == "nfd-worker") or (
                not command and "node-feature-discovery" in image
            ):
                out.append(ds)
                break
    return out


def _nfd_values_key(state: ClusterState, nfd: DaemonSetInfo) -> tuple[str, str]:
    """Where the NFD worker's tolerations go in the values of the chart that installed it, and the chart."""
    meta = nfd.raw.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    release = notes.get("meta.helm.sh/release-name") if isinstance(notes, dict) else None
    if release and any((r := helm_release(ds)) and r[0] == release for ds in state.daemonsets):
        return (
            "nfd.worker.tolerations",
            "nvdp/nvidia-device-plugin",
        )  # NVIDIA's device-plugin chart (subchart)
    if release and any(cluster_policy(ds) for ds in state.daemonsets if ds.namespace == nfd.namespace):
        return "node-feature-discovery.worker.tolerations", "nvidia/gpu-operator"  # the GPU Operator's chart
    return "worker.tolerations", "nfd/node-feature-discovery"


def _nfd_fix(state: ClusterState, ds: DaemonSetInfo, node: NodeInfo) -> str:
    """When the plugin selects nodes by Node Feature Discovery's labels and the node has none: why NFD has
    not labelled it ("" when that is not the case)."""
    spec = _template_spec(ds)
    wants = isinstance(spec, dict) and NFD_PREFIX in str(
        {k: spec.get(k) for k in ("nodeSelector", "affinity")}
    )
    if not wants or any(k.startswith(NFD_PREFIX) for k in node.labels):
        return ""
    workers = _nfd_workers(state)
    if not workers:
        return (
            f"# {ds.ref} selects nodes by Node Feature Discovery's labels ({NFD_PREFIX}pci-10de.present), and no "
            "NFD runs in the cluster: install it (the device-plugin chart's nfd.enabled=true), or label the node "
            "as the chart's affinity also accepts:\n"
            f"kubectl label node {node.name} nvidia.com/gpu.present=true"
        )
    for nfd in workers:
        why = nfd.blocked_on(node.model)
        if why is None:
            continue
        _, taint = why
        if taint is None:
            continue
        tol = toleration_for(taint)
        release = None
        meta = nfd.raw.get("metadata")
        notes = meta.get("annotations") if isinstance(meta, dict) else None
        if isinstance(notes, dict) and notes.get("meta.helm.sh/release-name"):
            release = (
                str(notes["meta.helm.sh/release-name"]),
                str(notes.get("meta.helm.sh/release-namespace") or nfd.namespace),
            )
        if release:
            key, chart = _nfd_values_key(state, nfd)
            how = (
                f"# in the values of Helm release {release[0]} ({key}, with the tolerations it has), then "
                f"helm upgrade {release[0]} {chart} -n {release[1]} --reuse-values -f values.yaml:\n"
            )
        else:
            how = f"# add to {nfd.ref} spec.template.spec.tolerations:\n"
        return (
            f"# {ds.ref} selects nodes by Node Feature Discovery's label {NFD_PREFIX}pci-10de.present, which the "
            f"node lacks: NFD's worker {nfd.ref} does not tolerate its taint {taint}, so it never labelled it\n"
            + how
            + snippet([tol])
        )
    return ""


def _selector_fix(state: ClusterState, ds: DaemonSetInfo, node: NodeInfo) -> str:
    nfd = _nfd_fix(state, ds, node)
    if nfd:
        return nfd
    if cluster_policy(ds):
        # the Operator selects its nodes by its own label, which it sets where NFD finds an NVIDIA PCI device
        return (
            f"# {ds.ref} is the GPU Operator's: it runs on nodes labelled {LABEL_OPERATOR_DEVICE_PLUGIN}=true, which "
            "the Operator sets where Node Feature Discovery finds an NVIDIA PCI device "
            "(feature.node.kubernetes.io/pci-10de.present=true)\n"
            f"kubectl get node {node.name} -L {LABEL_OPERATOR_DEVICE_PLUGIN},feature.node.kubernetes.io/pci-10de.present,"
            "nvidia.com/gpu.deploy.operands\n"
            f"kubectl label node {node.name} {LABEL_OPERATOR_DEVICE_PLUGIN}=true --overwrite   # if NFD is right and "
            "the label was set to false by hand"
        )
    return (
        f"# widen {ds.ref} spec.template.spec.nodeSelector / affinity to match the node's labels:\n"
        f"kubectl get node {node.name} --show-labels" + _managed(ds, "nodeSelector / affinity")
    )


def _json(d: dict[str, str]) -> str:
    return "{" + ",".join(f'"{k}":"{v}"' for k, v in d.items()) + "}"


def _waiting_reason(pod: PodInfo) -> str:
    status = pod.raw.get("status")
    if not isinstance(status, dict):
        return ""
    for cs in status.get("containerStatuses") or ():
        if not isinstance(cs, dict):
            continue
        state = cs.get("state")
        if isinstance(state, dict):
            for key in ("waiting", "terminated"):
                part = state.get(key)
                if isinstance(part, dict) and part.get("reason"):
                    msg = str(part.get("message") or "")
                    return f"{part['reason']}" + (f": {msg}" if msg else "")
    return ""


def not_ready_detail(pod: PodInfo) -> str:
    why = _waiting_reason(pod)
    return f"phase {pod.phase}" + (f", {why}" if why else "")


def check_not_ready(state: ClusterState) -> Iterator[Finding]:
    for ds in plugin_daemonsets(state):
        st = ds.status
        desired, ready = st.get("desiredNumberScheduled"), st.get("numberReady")
        if isinstance(desired, int) and isinstance(ready, int) and ready < desired:
            yield Finding(
                "device-plugin-not-ready",
                ERROR,
                ds.ref,
                f"{ready}/{desired} device plugin pods are Ready: GPU nodes without a Ready plugin advertise no "
                "nvidia.com/gpu",
                f"kubectl -n {ds.namespace} get pods -o wide -l {_selector(ds)}\n"
                f"kubectl -n {ds.namespace} logs daemonset/{ds.name}",
            )
    for pod in plugin_pods(state.pods):
        if pod.terminated or pod.ready:
            continue
        node = state.node_by_name.get(pod.node_name)
        where = (
            f"on GPU node {node.name}"
            if node is not None and node.is_gpu
            else (f"on node {pod.node_name}" if pod.node_name else "not scheduled")
        )
        yield Finding(
            "device-plugin-not-ready",
            ERROR,
            pod.ref,
            f"device plugin pod is not Ready {where} ({not_ready_detail(pod)}); the node's GPUs are not "
            "advertised until it is. Usual causes: no NVIDIA driver or container toolkit on the host, "
            "or the runtime is not nvidia",
            f"kubectl -n {pod.namespace} logs {pod.name}\n"
            f"# on the host: kgpu node-check (driver, CUDA, container toolkit, runtime config)",
        )
    # GPU nodes a plugin DaemonSet selects but where no plugin pod exists at all
    dss = plugin_daemonsets(state)
    served = {p.node_name for p in plugin_pods(state.pods) if p.node_name}
    for node in _plugin_nodes(state):
        if node.name in served or builtin_plugin(node):
            continue
        for ds in dss:
            if ds.blocked_on(node.model) is None:
                yield Finding(
                    "device-plugin-not-ready",
                    ERROR,
                    node.ref,
                    f"{ds.ref} selects this GPU node but no plugin pod runs on it",
                    f"kubectl -n {ds.namespace} describe daemonset {ds.name}\n"
                    f"kubectl get events -A --field-selector reason=FailedCreate",
                )
                break


def plugin_log_command(state: ClusterState, node: NodeInfo) -> str:
    """The command that shows the device plugin's log for one node, wherever the plugin runs there."""
    for pod in plugin_pods(state.pods_by_node.get(node.name, [])):
        container = next((str(c.get("name") or "") for c in plugin_containers(pod.raw.get("spec"))), "")
        return f"kubectl -n {pod.namespace} logs {pod.name}" + (f" -c {container}" if container else "")
    if builtin_plugin(node):
        return (
            f"# on {node.name} (Bottlerocket: the plugin is a host service):\n"
            "apiclient exec admin sheltie journalctl -u nvidia-k8s-device-plugin"
        )
    for ds in plugin_daemonsets(state):
        return f"kubectl -n {ds.namespace} logs -l {_selector(ds)} --prefix"
    return f"kubectl get pods -A -o wide --field-selector spec.nodeName={node.name}"


def _selector(ds: DaemonSetInfo) -> str:
    spec = ds.raw.get("spec")
    sel = spec.get("selector") if isinstance(spec, dict) else None
    labels = sel.get("matchLabels") if isinstance(sel, dict) else None
    if isinstance(labels, dict) and labels:
        return ",".join(f"{k}={v}" for k, v in labels.items())
    return "name=nvidia-device-plugin-ds"


def check_duplicate(state: ClusterState) -> Iterator[Finding]:
    dss = plugin_daemonsets(state)
    if not dss and not any(builtin_plugin(n) for n in state.nodes):
        return
    running: dict[str, set[str]] = {}
    for pod in plugin_pods(state.pods):
        if pod.node_name and not pod.terminated:
            owner = f"DaemonSet/{pod.namespace}/{pod.owner_name}" if pod.is_daemon else pod.ref
            running.setdefault(pod.node_name, set()).add(owner)
    for node in _plugin_nodes(state):
        sources = set(running.get(node.name, ()))
        sources.update(ds.ref for ds in dss if ds.blocked_on(node.model) is None)
        builtin = builtin_plugin(node)
        operator = node.labels.get(LABEL_OPERATOR_DEVICE_PLUGIN) == "true"
        count = len(sources) + (1 if builtin else 0)
        if count < 2:
            continue
        parts = sorted(sources)
        if builtin:
            parts.append(f"the node itself: {builtin}")
        exclude = {
            "key": LABEL_KGPU_DEVICE_PLUGIN if builtin else LABEL_OPERATOR_DEVICE_PLUGIN,
            "operator": "NotIn" if builtin else "DoesNotExist",
        }
        if builtin:
            exclude["values"] = ["builtin"]  # type: ignore[assignment]
        fix = _duplicate_fix(node, sorted(sources), {ds.ref: ds for ds in dss}, builtin, exclude)
        if operator and not builtin:
            fix += "\n# (the GPU Operator deploys its own plugin on nodes labelled nvidia.com/gpu.deploy.device-plugin=true)"
        yield Finding(
            "device-plugin-duplicate",
            ERROR,
            node.ref,
            f"{count} device plugins for one GPU node ({'; '.join(parts)}): they fight over the kubelet's "
            "device-plugin socket and the node's nvidia.com/gpu flaps or disappears",
            fix,
        )


def _duplicate_fix(
    node: NodeInfo,
    sources: list[str],
    by_ref: dict[str, DaemonSetInfo],
    builtin: str,
    exclude: dict[str, Any],
) -> str:
    """Which DaemonSet to keep off the node, and how for its maker: the GPU Operator's plugin stays, a Helm
    release is changed through its values (an edit of the DaemonSet is undone by the next upgrade)."""
    if builtin:
        extras = sources
    else:
        own = [s for s in sources if s in by_ref and cluster_policy(by_ref[s])]
        # keep the one a tool manages (the Operator, a Helm release) over one applied by hand
        managed = sorted(sources, key=lambda s: (not (s in by_ref and helm_release(by_ref[s])), s))
        extras = [s for s in sources if s not in own] if own else managed[1:]
    lines = [
        f"# keep one plugin per node: exclude the node from {', '.join(extras)}",
        *([f"kubectl label node {node.name} {LABEL_KGPU_DEVICE_PLUGIN}=builtin"] if builtin else []),
        "# in spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[*].matchExpressions add:",
        snippet([exclude]),
    ]
    for ref in extras:
        ds = by_ref.get(ref)
        if ds is None:
            continue
        release = helm_release(ds)
        policy = cluster_policy(ds)
        if release is not None:
            name, namespace = release
            lines.append(
                f"# {ref} is Helm release {name}'s: put the term in its values (affinity:) and run "
                f"helm upgrade {name} nvdp/nvidia-device-plugin -n {namespace} --reuse-values -f values.yaml"
            )
            if builtin:
                lines.append(
                    f"# or, if every node it serves runs the plugin itself: helm upgrade {name} "
                    f"nvdp/nvidia-device-plugin -n {namespace} --reuse-values --set devicePlugin.enabled=false "
                    "(GPU Feature Discovery stays)"
                )
        elif policy and builtin:
            lines.append(
                f"# {ref} is the GPU Operator's (ClusterPolicy {policy}): "
                f"kubectl label node {node.name} {LABEL_OPERATOR_DEVICE_PLUGIN}=false --overwrite"
            )
    return "\n".join(lines)


def _upgrade_fix(ds: DaemonSetInfo, container: str) -> str:
    policy = cluster_policy(ds)
    if policy:
        return (
            f"# the GPU Operator sets the image: upgrade the Operator, or set ClusterPolicy {policy} "
            "spec.devicePlugin.version\n"
            f'kubectl patch clusterpolicies.nvidia.com {policy} --type merge -p \'{{"spec":{{"devicePlugin":'
            f'{{"version":"{CURRENT_VERSION}"}}}}}}\''
        )
    release = helm_release(ds)
    if release is not None:
        name, namespace = release
        return (
            f"helm upgrade {name} nvdp/nvidia-device-plugin -n {namespace} --reuse-values "
            f"--version {CURRENT_VERSION.lstrip('v')}   # the release sets the image; kubectl set image is undone"
        )
    return f"kubectl -n {ds.namespace} set image daemonset/{ds.name} {container}={CURRENT_IMAGE}\n# or: {RENDER_FIX}"


def check_outdated(state: ClusterState) -> Iterator[Finding]:
    for ds in plugin_daemonsets(state):
        for c in plugin_containers(_template_spec(ds)):
            image = str(c["image"])
            version = plugin_version(image)
            if version is None or (version >= OLDEST_SUPPORTED and version[0] == 0):
                continue
            shown = ".".join(str(v) for v in OLDEST_SUPPORTED)
            what = "a pre-0.x release" if version[0] >= 1 else "older than"
            container = str(c.get("name") or "*")
            yield Finding(
                "device-plugin-outdated",
                WARNING,
                ds.ref,
                f"device plugin image {image} is {what} v{shown}"
                + (" (before the project's v0.x numbering)" if version[0] >= 1 else "")
                + f"; kgpu deploys {CURRENT_VERSION} (CDI, health checks, GPU Feature Discovery labels in step)",
                _upgrade_fix(ds, container),
            )


CHECKS = {
    "device-plugin-missing": check_missing,
    "device-plugin-untolerated-taint": check_untolerated,
    "device-plugin-node-selector": check_untolerated,
    "device-plugin-not-ready": check_not_ready,
    "device-plugin-duplicate": check_duplicate,
    "device-plugin-outdated": check_outdated,
}

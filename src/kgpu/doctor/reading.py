"""Reading a cluster's objects into doctor's :class:`~kgpu.doctor.state.ClusterState`: nodes (why each is a
GPU node), pods (their GPU requests as written and their scheduling model), DaemonSets, events, and the
objects other checks read as they are (NodePools, NodeOverlays, DRA, volumes, Kueue), validated as
``kgpu simulate`` validates them: one reader, one verdict. A pod whose GPU resources the API server would
reject is not bad input here: it is a finding (kgpu.doctor.state says more)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

import msgspec

from kgpu.catalog import InstanceType, aws_catalog
from kgpu.doctor.state import (
    LABEL_ACCELERATOR,
    LABEL_GFD_COUNT,
    LABEL_GFD_PRESENT,
    LABEL_INSTANCE_TYPE,
    LABEL_INSTANCE_TYPE_BETA,
    LABEL_KARPENTER_GPU_COUNT,
    LABEL_NFD_NVIDIA_PCI,
    LABEL_REGION,
    SNAPSHOT_KIND,
    ClusterState,
    ContainerGpu,
    DaemonSetInfo,
    Event,
    NodeInfo,
    PodInfo,
    _truthy,
)
from kgpu.errors import InputError
from kgpu.model import wire
from kgpu.model.gpus import AMD_GPU, dra_devices, node_gpus
from kgpu.model.load import DRA_KINDS, STORAGE_KINDS, Parser, bound_spec, parse_time
from kgpu.model.objects import GPU, Node, Pod, PodSpecInfo
from kgpu.model.podspec import spec_info
from kgpu.model.quantity import parse_quantity
from kgpu.sim.simulate import DAEMON_TOLERATIONS


def _meta(item: dict[str, Any]) -> dict[str, Any]:
    meta = item.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _int_quantity(raw: Any) -> int | None:
    if raw is None:
        return None
    try:
        q = parse_quantity(raw)
    except InputError:
        return None
    return int(q) if q.denominator == 1 else -(-q.numerator // q.denominator)


def _ready(status: dict[str, Any]) -> bool:
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


class CatalogTypes:
    """The AWS catalog, loaded on first use (a cluster without instance-type labels never needs it)."""

    def __init__(self) -> None:
        self._types: dict[str, InstanceType | None] = {}

    def get(self, name: str) -> InstanceType | None:
        if not name:
            return None
        if name not in self._types:
            try:
                self._types[name] = aws_catalog().get(name)
            except InputError:
                self._types[name] = None
        return self._types[name]


# NFD's PCI labels name the fields its deviceLabelFields configure: the vendor alone (the GPU Operator's and
# NVIDIA's chart's NFD: pci-10de.present) or NFD's default class and vendor (pci-0300_10de.present,
# pci-0302_10de.present for 3D controllers); class 12 is a processing accelerator. NVIDIA's HDMI audio
# function (class 0403) is not a GPU.
_NFD_NVIDIA_PCI = re.compile(
    r"^feature\.node\.kubernetes\.io/pci-(?:(?:03|12)[0-9a-f]{2}_)?10de(?:_[0-9a-f]{4})*\.present$"
)
# The runtime classes NVIDIA's stack installs (GPU Operator, k3s/RKE2, kgpu's docs): a Running pod with
# one of them proves the node's runtime has the nvidia handler, hence a GPU host.
NVIDIA_RUNTIME_CLASSES = frozenset({"nvidia", "nvidia-cdi", "nvidia-legacy", "nvidia-experimental"})


def gpu_node_reason(
    labels: Mapping[str, str], capacity_gpus: int | None, catalog_type: InstanceType | None
) -> str:
    """Why a node counts as a GPU node: its instance type, GFD/NFD labels, or advertised GPUs (a 0 capacity
    counts: kubelet keeps a resource a device plugin once registered, at 0 once the plugin is gone)."""
    if catalog_type is not None and catalog_type.gpu_count > 0 and catalog_type.gpu_manufacturer != "amd":
        return f"instance type {catalog_type.name} has {catalog_type.gpu_count} GPU(s)"
    if _truthy(labels.get(LABEL_GFD_PRESENT)):
        return f"label {LABEL_GFD_PRESENT}=true"
    if _truthy(labels.get(LABEL_NFD_NVIDIA_PCI)):
        return f"label {LABEL_NFD_NVIDIA_PCI}=true (an NVIDIA PCI device)"
    for key in sorted(labels):
        if (
            key.startswith("feature.node.kubernetes.io/pci-")
            and _NFD_NVIDIA_PCI.match(key)
            and _truthy(labels[key])
        ):
            return f"label {key}=true (an NVIDIA PCI device, per Node Feature Discovery)"
    if (_int_quantity(labels.get(LABEL_KARPENTER_GPU_COUNT)) or 0) > 0:
        return f"label {LABEL_KARPENTER_GPU_COUNT}={labels[LABEL_KARPENTER_GPU_COUNT]}"
    if capacity_gpus:
        return f"capacity nvidia.com/gpu: {capacity_gpus}"
    if capacity_gpus == 0:
        return "capacity nvidia.com/gpu: 0 (a device plugin registered GPUs here before)"
    if LABEL_ACCELERATOR in labels and "nvidia" in labels[LABEL_ACCELERATOR].lower():
        return f"label {LABEL_ACCELERATOR}={labels[LABEL_ACCELERATOR]}"
    return ""


def _runtime_class_reasons(state: ClusterState) -> None:
    """Nodes nothing else marks as GPU hosts, where a Running pod uses an NVIDIA runtime class."""
    for pod in state.pods:
        if pod.phase != "Running" or not pod.node_name:
            continue
        node = state.node_by_name.get(pod.node_name)
        if node is None or node.gpu_reason:
            continue
        spec = pod.raw.get("spec")
        rc = spec.get("runtimeClassName") if isinstance(spec, dict) else None
        if isinstance(rc, str) and rc in NVIDIA_RUNTIME_CLASSES:
            node.gpu_reason = f"pod {pod.namespace}/{pod.name} runs there with runtimeClassName {rc}"


def _node_info(item: dict[str, Any], model: Node, catalog: CatalogTypes) -> NodeInfo:
    labels = model.labels
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    assert isinstance(status, dict)
    capacity = status.get("capacity") if isinstance(status.get("capacity"), dict) else {}
    allocatable = status.get("allocatable") if isinstance(status.get("allocatable"), dict) else {}
    assert isinstance(capacity, dict) and isinstance(allocatable, dict)
    cap = _int_quantity(capacity.get(GPU))
    alloc = _int_quantity(allocatable.get(GPU))
    itype = labels.get(LABEL_INSTANCE_TYPE) or labels.get(LABEL_INSTANCE_TYPE_BETA) or ""
    ctype = catalog.get(itype)
    virtual = labels.get("type") == "virtual-kubelet" or itype == "eklet"
    expected = 0
    if ctype is not None and ctype.gpu_count:
        expected = ctype.gpu_count
    else:
        expected = (
            _int_quantity(labels.get(LABEL_GFD_COUNT))
            or _int_quantity(labels.get(LABEL_KARPENTER_GPU_COUNT))
            or 0
        )
    node_info = status.get("nodeInfo") if isinstance(status.get("nodeInfo"), dict) else {}
    assert isinstance(node_info, dict)
    return NodeInfo(
        name=model.name,
        raw=item,
        model=model,
        labels=labels,
        gpu_reason=gpu_node_reason(labels, cap, ctype),
        instance_type=itype,
        catalog_type=ctype,
        expected_gpus=expected,
        capacity_gpus=cap,
        allocatable_gpus=alloc,
        ready=_ready(status),
        os_image=str(node_info.get("osImage") or ""),
        virtual=virtual,
    )


def container_gpus(spec: dict[str, Any]) -> list[ContainerGpu]:
    """Each container's nvidia.com/gpu request and limit, as written (invalid quantities: None + raw)."""
    out: list[ContainerGpu] = []
    for group in ("initContainers", "containers"):
        containers = spec.get(group)
        if not isinstance(containers, list):
            continue
        for i, c in enumerate(containers):
            if not isinstance(c, dict):
                continue
            res = c.get("resources")
            if not isinstance(res, dict):
                continue
            req = res.get("requests") if isinstance(res.get("requests"), dict) else {}
            lim = res.get("limits") if isinstance(res.get("limits"), dict) else {}
            assert isinstance(req, dict) and isinstance(lim, dict)
            if GPU not in req and GPU not in lim:
                continue
            out.append(
                ContainerGpu(
                    str(c.get("name") or ""),
                    f"{group}[{i}]",
                    _fraction(req.get(GPU)),
                    _fraction(lim.get(GPU)),
                    req.get(GPU),
                    lim.get(GPU),
                )
            )
    return out


def _fraction(raw: Any) -> Fraction | None:
    if raw is None:
        return None
    try:
        return parse_quantity(raw)
    except InputError:
        return None


def _images(spec: dict[str, Any]) -> list[str]:
    out = []
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or ():
            if isinstance(c, dict) and isinstance(c.get("image"), str):
                out.append(c["image"])
    return out


def gpu_resource_problem(gpus: Iterable[ContainerGpu]) -> bool:
    """Whether the API server would reject these GPU resources (what the model loader refuses)."""
    for g in gpus:
        if g.limit is None or (g.request is not None and g.request != g.limit) or g.limit.denominator != 1:
            return True
    return False


def _daemonset_info(item: dict[str, Any], parser: Parser, label: str) -> DaemonSetInfo:
    meta = _meta(item)
    spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    tmpl = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    assert isinstance(tmpl, dict)
    pod_spec = tmpl.get("spec") if isinstance(tmpl.get("spec"), dict) else {}
    assert isinstance(pod_spec, dict)
    template: PodSpecInfo | None = None
    if not gpu_resource_problem(container_gpus(pod_spec)):
        parser.feed_object(item, label)
        info = parser.out.daemonsets[-1].template
        extra = tuple(t for t in DAEMON_TOLERATIONS if t not in info.tolerations)
        template = replace(info, tolerations=info.tolerations + extra)
    return DaemonSetInfo(
        str(meta.get("namespace") or "default"),
        str(meta.get("name") or ""),
        item,
        template,
        _images(pod_spec),
    )


def _event(item: dict[str, Any]) -> Event:
    meta = _meta(item)
    inv = item.get("involvedObject") if isinstance(item.get("involvedObject"), dict) else {}
    assert isinstance(inv, dict)
    series = item.get("series") if isinstance(item.get("series"), dict) else {}
    assert isinstance(series, dict)
    time = (
        series.get("lastObservedTime")
        or item.get("lastTimestamp")
        or item.get("eventTime")
        or item.get("firstTimestamp")
        or meta.get("creationTimestamp")
        or ""
    )
    count = item.get("count") or series.get("count") or 1
    return Event(
        str(item.get("reason") or ""),
        str(inv.get("kind") or ""),
        str(inv.get("namespace") or meta.get("namespace") or "default"),
        str(inv.get("name") or ""),
        str(item.get("message") or item.get("note") or ""),
        str(time),
        int(count) if isinstance(count, int) else 1,
    )


def cluster_state(doc: Any, source: str = "snapshot") -> ClusterState:
    """Build the state from a snapshot document; bad input raises InputError naming the field."""
    if not isinstance(doc, dict):
        raise InputError(
            f"expected a {SNAPSHOT_KIND} or a v1 List (a JSON object), got {type(doc).__name__}", where=source
        )
    kind = doc.get("kind")
    items = doc.get("items")
    if items is None and "items" in doc:  # `items: null`: no objects, as the model loader reads it
        items = []
    if not isinstance(items, list):
        if isinstance(kind, str) and kind:
            raise InputError(
                f"kind {kind} is not a {SNAPSHOT_KIND} or a List: no items", where=f"{source}: items"
            )
        raise InputError("required field missing", where=f"{source}: items")
    metadata = doc.get("metadata") if kind == SNAPSHOT_KIND and isinstance(doc.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    state = ClusterState(source, metadata)
    parser = Parser(source)
    out = parser.out
    catalog = CatalogTypes()
    pods_raw: list[tuple[dict[str, Any], str]] = []
    for n, item in enumerate(items):
        label = f"items[{n}]"
        if not isinstance(item, dict):
            raise InputError(f"expected an object, got {type(item).__name__}", where=f"{source}: {label}")
        ikind = item.get("kind")
        if not isinstance(ikind, str) or not ikind:
            raise InputError("required field missing", where=f"{source}: {label}.kind")
        if ikind == "Pod":
            pods_raw.append((item, label))
        elif ikind == "Node":
            parser.feed_object(item, label)
            state.nodes.append(_node_info(item, out.nodes[-1], catalog))
        elif ikind == "DaemonSet":
            state.daemonsets.append(_daemonset_info(item, parser, label))
        elif ikind == "PriorityClass":
            parser.feed_object(item, label)
        elif ikind == "Event":
            state.events.append(_event(item))
        elif ikind == "NodePool":
            state.nodepools.append(item)
        elif ikind == "NodeClaim":
            state.nodeclaims.append(item)
        elif ikind == "RayCluster":
            state.rayclusters.append(item)
        elif ikind == "ConfigMap":
            state.configmaps.append(item)
        elif ikind == "NodeOverlay":  # validated as simulate validates it: one reader, one verdict
            from kgpu.sim.provisioners.karpenter.overlay import parse_overlay

            parse_overlay(item, f"{source}: {label}")
            state.nodeoverlays.append(item)
        elif ikind == "ImageCache":
            state.imagecaches.append(item)
        elif ikind == "Namespace" or str(item.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            state.kueue.append(item)  # kgpu.doctor.queues
        elif ikind in STORAGE_KINDS:  # claims, volumes, classes: simulate places pods with claims by them
            parser.feed_object(item, label)
        elif ikind in DRA_KINDS:  # resource.k8s.io objects: simulate allocates claims; kgpu.doctor.dra
            parser.feed_object(item, label)
            spec = item.get("spec")
            if (
                ikind == "ResourceSlice"
                and isinstance(spec, dict)
                and spec.get("driver") == "gpu.nvidia.com"
                and isinstance(spec.get("nodeName"), str)
                and spec["nodeName"]
            ):
                state.dra_nodes.add(spec["nodeName"])
    models = _PodModels(parser, source)
    for item, label in pods_raw:
        state.pods.append(_pod_info(item, label, models))
    parser.finish()
    state.objects = out
    for node in state.nodes:
        state.node_by_name[node.name] = node
        if not state.region and node.labels.get(LABEL_REGION):
            state.region = node.labels[LABEL_REGION]
    devices = dra_devices(state.dra().slices) if state.dra_nodes else {}
    for node in state.nodes:
        node.gpus = node_gpus(
            node.labels, node.model.allocatable, node.model.capacity, devices.get(node.name, ())
        )
        # NVIDIA's GPUs make a GPU node for doctor's checks (device plugin, GFD, drivers, exporters are
        # NVIDIA's); an AMD GPU node is check_unrecognised's to name
        nvidia = [r for r in node.gpus.resources if r.name != AMD_GPU]
        if not node.gpu_reason and any(r.allocatable or r.capacity is not None for r in nvidia):
            shown = ", ".join(
                f"{r.name}: {r.capacity if r.capacity is not None else r.allocatable}" for r in nvidia
            )
            node.gpu_reason = f"capacity {shown}"
    _runtime_class_reasons(state)
    by_node = state.pods_by_node
    for pod in state.pods:
        if pod.node_name and not pod.terminated:
            by_node.setdefault(pod.node_name, []).append(pod)
    return state


# What the scheduling model reads of a pod spec (model.wire.PodSpec, Container): pods whose specs agree on
# these share one decode. A real cluster's pods differ elsewhere (the nodeName, the per-pod
# kube-api-access-xxxxx volume and its mounts), which is why the whole spec cannot be the key.
_SPEC_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "priority",
    "priorityClassName",
    "overhead",
    "schedulingGates",
    "hostNetwork",
    "resources",
    "preemptionPolicy",
    "topologySpreadConstraints",
    "resourceClaims",
    "runtimeClassName",
)
_CONTAINER_FIELDS = ("resources", "ports", "restartPolicy")
_KEY = msgspec.json.Encoder()


_CLAIM_HOLE = (
    "\x01claim-"  # stands for a claim's name in a spec's key; no claim name holds a control character
)


def _claim_back(entry: str, names: list[str]) -> str:
    """A volume_claims entry ("pvc <name>") with the claim's own name put back."""
    kind, _, name = entry.partition(" ")
    if name.startswith(_CLAIM_HOLE):
        return f"{kind} {names[int(name.removeprefix(_CLAIM_HOLE)) - 1]}"
    return entry


class _PodModels:
    """Scheduling models of pods, decoding each distinct spec once (the loader's work, memoised).

    A pod the shortcut cannot take as is (no ``spec.priority`` for admission to have resolved, odd types)
    goes through the loader unchanged, which also reports any invalid field.
    """

    def __init__(self, parser: Parser, source: str) -> None:
        self.parser = parser
        self.source = source
        self.cache: dict[bytes, tuple[PodSpecInfo, tuple[tuple[str, int], ...]]] = {}
        self.shapes: dict[
            bytes, tuple[PodSpecInfo, tuple[tuple[str, int], ...]] | None
        ] = {}  # load.bound_spec

    def _slow(self, item: dict[str, Any], label: str) -> Pod | None:
        before = len(self.parser.out.pods)
        self.parser.feed_object(item, label)
        return self.parser.out.pods[-1] if len(self.parser.out.pods) > before else None

    def model(
        self,
        item: dict[str, Any],
        meta: dict[str, Any],
        spec: dict[str, Any],
        status: dict[str, Any],
        label: str,
        owner_kind: str,
        owner_name: str,
    ) -> Pod | None:
        name, ns, node_name = meta.get("name"), meta.get("namespace") or "default", spec.get("nodeName") or ""
        priority = spec.get("priority")
        if not (isinstance(name, str) and name and isinstance(ns, str) and isinstance(node_name, str)):
            return self._slow(item, label)
        if not isinstance(priority, int) or isinstance(priority, bool):
            return self._slow(item, label)
        reduced: dict[str, Any] = {k: spec[k] for k in _SPEC_FIELDS if k in spec}
        claim_names: list[str] = []
        volumes = spec.get("volumes")
        if volumes is not None:  # only those that claim storage: the rest differ per pod and are not read
            if not isinstance(volumes, list):
                return self._slow(item, label)
            claims = []
            for v in volumes:
                if not isinstance(v, dict) or not ("persistentVolumeClaim" in v or "ephemeral" in v):
                    continue
                pvc = v.get("persistentVolumeClaim")
                if isinstance(pvc, dict) and isinstance(pvc.get("claimName"), str) and pvc["claimName"]:
                    # a StatefulSet's pods name their own claims (data-web-0, data-web-1): the claim's name
                    # stands apart from the key, so the pods of one template share one decode
                    claim_names.append(pvc["claimName"])
                    v = {
                        **v,
                        "persistentVolumeClaim": {**pvc, "claimName": f"{_CLAIM_HOLE}{len(claim_names)}"},
                    }
                claims.append(v)
            if claims:
                reduced["volumes"] = claims
        for group in ("containers", "initContainers"):
            cs = spec.get(group)
            if cs is None:
                continue
            if not isinstance(cs, list) or not all(isinstance(c, dict) for c in cs):
                return self._slow(item, label)
            reduced[group] = [{k: c[k] for k in _CONTAINER_FIELDS if k in c} for c in cs]
        if node_name:  # a bound pod: read once per shape, its node put back (load.bound_spec)
            reduced["nodeName"] = node_name
        try:
            key = _KEY.encode(reduced)
        except (TypeError, msgspec.EncodeError):
            return self._slow(item, label)
        hit = self.cache.get(key)
        if hit is None and node_name:
            hit = bound_spec(key, node_name, self.shapes)
        if hit is None:
            try:
                wire_spec = msgspec.convert(reduced, wire.PodSpec)
            except msgspec.ValidationError:
                return self._slow(item, label)  # the loader names the field
            hit = self.cache[key] = spec_info(wire_spec, f"{self.source}: Pod {ns}/{name}: spec")
        info, limits = hit
        if claim_names:
            info = replace(info, volume_claims=tuple(_claim_back(c, claim_names) for c in info.volume_claims))
        if node_name and info.node_name != node_name:
            info = replace(info, node_name=node_name)
        phase = status.get("phase")
        pod = Pod(
            ns,
            name,
            info,
            _str_map(meta.get("labels")),
            _str_map(meta.get("annotations")),
            phase=phase if isinstance(phase, str) and phase else "Pending",
            owner_kind=owner_kind,
            owner_name=owner_name,
            source=self.source,
            limits=limits,
            priority=priority,
            preemption_policy=info.preemption_policy or "PreemptLowerPriority",
        )
        start = status.get("startTime")
        if isinstance(start, str) and start:
            pod.start_time = parse_time(start, f"{self.source}: Pod {ns}/{name}: status.startTime")
        self.parser.out.pods.append(pod)
        return pod


def _str_map(x: Any) -> Mapping[str, str]:
    return x if isinstance(x, dict) else {}


def _pod_info(item: dict[str, Any], label: str, models: _PodModels) -> PodInfo:
    meta = _meta(item)
    spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    assert isinstance(spec, dict) and isinstance(status, dict)
    gpu_containers = container_gpus(spec)
    model: Pod | None = None
    gpus = 0
    if gpu_containers and gpu_resource_problem(gpu_containers):
        for g in gpu_containers:
            amount = g.limit if g.limit is not None else g.request
            if amount is not None:
                gpus += -(-amount.numerator // amount.denominator)
    owner_kind = owner_name = ""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            owner_kind, owner_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
    if model is None and not (gpu_containers and gpu_resource_problem(gpu_containers)):
        model = models.model(item, meta, spec, status, label, owner_kind, owner_name)
        gpus = model.spec.gpus if model is not None else 0
    return PodInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or meta.get("generateName") or label),
        raw=item,
        model=model,
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        owner_kind=owner_kind,
        owner_name=owner_name,
        gpus=gpus,
        gpu_containers=gpu_containers,
        images=_images(spec),
        ready=_ready(status),
        labels=_str_map(meta.get("labels")),
        annotations=_str_map(meta.get("annotations")),
    )

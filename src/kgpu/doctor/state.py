"""A cluster as doctor sees it: a snapshot document turned into indexed, typed views.

Input is the parsed JSON of ``kgpu snapshot`` (``kind: ClusterSnapshot``) or of ``kubectl get ... -o json``
(``kind: List``, no metadata). Nodes, pods and DaemonSets go through the model loader (the same typed
objects ``simulate`` uses); everything doctor reads beyond scheduling (readiness, images, labels, events,
NodePools) is read from the raw objects, once, into the small records below (the reading itself:
``kgpu.doctor.reading``).

A pod whose GPU resources the API server would reject (a request without a limit, request and limit
unequal, a fraction of a GPU) is not bad input here: it is a finding. Such a pod keeps its raw record and
is left out of the scheduling model; any other invalid object is bad input (one line, exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kgpu.catalog import InstanceType
from kgpu.model.gpus import NodeGpus, is_gpu
from kgpu.model.inputs import Objects
from kgpu.model.objects import GPU, Node, Pod, PodSpecInfo, Taint
from kgpu.model.predicates import first_untolerated, static_reasons

SNAPSHOT_KIND = "ClusterSnapshot"

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_GFD_PRESENT = "nvidia.com/gpu.present"
LABEL_GFD_COUNT = "nvidia.com/gpu.count"
LABEL_GFD_PRODUCT = "nvidia.com/gpu.product"
LABEL_NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"
LABEL_KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
LABEL_ACCELERATOR = "k8s.amazonaws.com/accelerator"
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_EKS_NODEGROUP = "eks.amazonaws.com/nodegroup"
LABEL_EKSCTL_NODEGROUP = "alpha.eksctl.io/nodegroup-name"
# GPU Operator marks the nodes whose device plugin it deploys.
LABEL_OPERATOR_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
OPERATOR_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
# kgpu's render target labels pools whose image runs the plugin itself (Bottlerocket NVIDIA).
LABEL_KGPU_DEVICE_PLUGIN = "kgpu.dev/device-plugin"

TKE_PREFIX = "eks.tke.cloud.tencent.com/"

# NVIDIA's DRA driver's kubelet plugin, by its images: the chart nvidia-dra-driver-gpu (nvcr.io/nvidia/
# k8s-dra-driver-gpu) and its successor dra-driver-nvidia-gpu (registry.k8s.io/dra-driver-nvidia/
# dra-driver-nvidia-gpu); the DaemonSet is <release>-kubelet-plugin in both charts.
DRA_DRIVER_IMAGES = ("k8s-dra-driver-gpu", "dra-driver-nvidia-gpu")


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


@dataclass(slots=True)
class NodeInfo:
    name: str
    raw: dict[str, Any]
    model: Node
    labels: Mapping[str, str]
    gpu_reason: str  # why kgpu counts it as a GPU node; "" when it is not one
    instance_type: str
    catalog_type: InstanceType | None
    expected_gpus: int  # from the catalog or GFD's count label; 0 when unknown
    capacity_gpus: int | None  # None: the resource is absent
    allocatable_gpus: int | None
    ready: bool
    os_image: str
    virtual: bool  # TKE super node / virtual kubelet: no DaemonSets run there
    gpus: NodeGpus = field(default_factory=NodeGpus)  # every GPU the node offers (kgpu.model.gpus)

    @property
    def is_gpu(self) -> bool:
        return bool(self.gpu_reason)

    @property
    def ref(self) -> str:
        return f"Node/{self.name}"


@dataclass(slots=True)
class ContainerGpu:
    """One container's nvidia.com/gpu request and limit as written (None when absent)."""

    name: str
    field: str  # "containers[0]" / "initContainers[1]"
    request: Fraction | None
    limit: Fraction | None
    raw_request: Any = None
    raw_limit: Any = None


@dataclass(slots=True)
class PodInfo:
    namespace: str
    name: str
    raw: dict[str, Any]
    model: Pod | None
    node_name: str
    phase: str
    owner_kind: str
    owner_name: str
    gpus: int  # effective request (whole GPUs; fractions rounded up)
    gpu_containers: list[ContainerGpu]
    images: list[str]
    ready: bool
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> str:
        return f"Pod/{self.namespace}/{self.name}"

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def pending(self) -> bool:
        return not self.node_name and not self.terminated

    @property
    def is_daemon(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def gpu_resources(self) -> dict[str, int]:
        """The GPU extended resources it asks (whole, shared, MIG), as the scheduler counts them."""
        if self.model is None:
            return {GPU: self.gpus} if self.gpus else {}
        return {k: v for k, v in self.model.spec.requests if v > 0 and is_gpu(k)}

    @property
    def asks_gpu(self) -> bool:
        """A GPU by an extended resource, or by a resource claim (DRA)."""
        return bool(self.gpus or self.gpu_resources) or (self.model is not None and bool(self.model.spec.claim_refs))


@dataclass(slots=True)
class DaemonSetInfo:
    """A DaemonSet, its template as the scheduler sees daemon pods (the controller's tolerations added)."""

    namespace: str
    name: str
    raw: dict[str, Any]
    template: PodSpecInfo | None  # None: GPU resources the API server rejects (a workload finding)
    images: list[str]

    @property
    def ref(self) -> str:
        return f"DaemonSet/{self.namespace}/{self.name}"

    @property
    def status(self) -> dict[str, Any]:
        st = self.raw.get("status")
        return st if isinstance(st, dict) else {}

    def blocked_on(self, node: Node) -> tuple[str, Taint | None] | None:
        """Why the DaemonSet controller runs no pod on ``node``: (kube-scheduler's reason, the untolerated
        taint if that is the reason); None when it does run one."""
        if self.template is None:
            return "its pod template is invalid", None
        reasons = static_reasons(self.template, node)
        if not reasons:
            return None
        return reasons[0], first_untolerated(node.taints, self.template.tolerations)


@dataclass(slots=True)
class Event:
    reason: str
    kind: str
    namespace: str
    name: str
    message: str
    time: str
    count: int


@dataclass
class ClusterState:
    source: str
    metadata: dict[str, Any]
    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)
    daemonsets: list[DaemonSetInfo] = field(default_factory=list)
    nodepools: list[dict[str, Any]] = field(default_factory=list)
    nodeclaims: list[dict[str, Any]] = field(default_factory=list)
    rayclusters: list[dict[str, Any]] = field(default_factory=list)
    configmaps: list[dict[str, Any]] = field(
        default_factory=list
    )  # device-plugin configs (kgpu.doctor.sharing)
    nodeoverlays: list[dict[str, Any]] = field(default_factory=list)
    imagecaches: list[dict[str, Any]] = field(default_factory=list)  # TKE's eks.cloud.tencent.com ImageCache
    events: list[Event] = field(default_factory=list)
    objects: Objects = field(default_factory=Objects)  # the scheduling model (nodes, pods, PriorityClasses)
    node_by_name: dict[str, NodeInfo] = field(default_factory=dict)
    pods_by_node: dict[str, list[PodInfo]] = field(default_factory=dict)
    region: str = ""
    dra_nodes: set[str] = field(default_factory=set)  # nodes with a ResourceSlice of NVIDIA's DRA driver
    kueue: list[dict[str, Any]] = field(default_factory=list)  # kueue.x-k8s.io objects and Namespaces
    _kueue_settled: Any = None  # kgpu.doctor.queues: read and settled once

    def dra(self) -> Any:
        """The snapshot's resource.k8s.io objects read once (``kgpu.model.dra.DRAObjects``); None without any.
        InputError for an object the API server rejects."""
        return self.objects.dra_objects()

    @property
    def live(self) -> bool:
        """Read from a live cluster (``kgpu doctor`` without --snapshot), not a file."""
        return self.source.startswith("cluster ")

    @property
    def noun(self) -> str:
        """What the findings speak of: "the cluster" (live) or "the snapshot"."""
        return "the cluster" if self.live else "the snapshot"

    @property
    def gpu_nodes(self) -> list[NodeInfo]:
        return [n for n in self.nodes if n.is_gpu]

    def failed_scheduling(self) -> dict[str, Event]:
        """The newest FailedScheduling event of each pod, by ``namespace/name``."""
        out: dict[str, Event] = {}
        for ev in self.events:
            if ev.reason == "FailedScheduling" and ev.kind == "Pod":
                key = f"{ev.namespace}/{ev.name}"
                if key not in out or ev.time >= out[key].time:
                    out[key] = ev
        return out


def kubelet_plugins(state: ClusterState) -> list[DaemonSetInfo]:
    """The DaemonSets that run NVIDIA's DRA driver's kubelet plugin."""
    return [ds for ds in state.daemonsets if "kubelet-plugin" in ds.name
            and any(name in image for image in ds.images for name in DRA_DRIVER_IMAGES)]


def uses_dra_driver(state: ClusterState) -> bool:
    """Whether the cluster runs NVIDIA's DRA driver for its GPUs: the kubelet plugin, or its ResourceSlices."""
    return bool(state.dra_nodes) or bool(kubelet_plugins(state))

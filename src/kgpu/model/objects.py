"""Typed, frozen views of the Kubernetes objects the scheduler reasons about.

They hold exactly what scheduling needs, already parsed: quantities as integers (CPU in millicores, every
other resource by Quantity.Value()), taints, tolerations and node affinity as tuples. Pods created from the
same template share one ``PodSpecInfo`` (it is hashable), which is what lets the scheduler treat identical
pods as one class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kgpu.catalog.instance import RESOURCE_NVIDIA_GPU

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL = "ephemeral-storage"
GPU = RESOURCE_NVIDIA_GPU

# Requests used for scoring when a container sets none (k8s scheduler util DefaultMilliCPURequest,
# DefaultMemoryRequest): 0.1 core and 200 MiB.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

Resources = tuple[tuple[str, int], ...]  # sorted (name, amount) pairs, zero amounts dropped


def resources(mapping: Mapping[str, int]) -> Resources:
    return tuple(sorted((k, v) for k, v in mapping.items() if v))


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class Requirement:
    """A node selector requirement (matchExpressions or matchFields)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Term:
    """A node selector term: its requirements are ANDed."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """requiredDuringSchedulingIgnoredDuringExecution: its terms are ORed."""

    terms: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """preferredDuringSchedulingIgnoredDuringExecution: a node matching ``term`` earns ``weight`` (1-100)."""

    weight: int
    term: Term


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector over pod or namespace labels: its requirements are ANDed, matchLabels already
    turned into ``In`` requirements of one value. No requirements selects everything; where a selector may
    be nil (which selects nothing) the field is ``None``."""

    requirements: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint, defaults applied: minDomains 1 when unset, nodeAffinityPolicy Honor,
    nodeTaintsPolicy Ignore. ``match_label_keys`` are resolved against each pod's own labels."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule or ScheduleAnyway
    selector: LabelSelector | None  # None: no labelSelector, which matches no pod
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term. With neither ``namespaces`` nor a namespace selector it means the pod's
    own namespace; the label keys are merged into the selector with each pod's labels, as the API server
    does when it admits the pod."""

    topology_key: str
    selector: LabelSelector | None  # None: no labelSelector, which matches no pod
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    """A claim a controller creates for a pod: a StatefulSet's ``volumeClaimTemplates`` (``<template>-<pod>``)
    or a generic ephemeral volume (``<pod>-<volume>``). ``storage_class`` None: not set (the default class)."""

    kind: str  # "template" or "ephemeral"
    name: str  # the template's or the volume's name
    storage_class: str | None = None
    access_modes: tuple[str, ...] = ()
    storage: int = 0

    def claim_name(self, pod_name: str) -> str:
        return f"{self.name}-{pod_name}" if self.kind == "template" else f"{pod_name}-{self.name}"


@dataclass(frozen=True, slots=True)
class PodSpecInfo:
    """Everything the scheduler reads from a pod spec. Hashable: identical templates share one."""

    requests: Resources  # effective requests incl. init containers, sidecars and overhead
    nonzero_cpu: int  # requests for scoring, with defaults for containers that set none
    nonzero_memory: int
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    node_name: str = ""
    host_ports: tuple[HostPort, ...] = ()
    priority: int | None = None
    priority_class: str = ""
    scheduling_gates: tuple[str, ...] = ()
    topology_spread: tuple[SpreadConstraint, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # required terms
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred: tuple[PreferredTerm, ...] = ()  # NodeAffinity scoring only
    preemption_policy: str = ""  # spec.preemptionPolicy as written ("" when absent)
    # Read only to say what kgpu does not model (kgpu.sim.unmodelled turns them into warnings). Volumes:
    # "pvc <claim>", "ephemeral <volume>", "template <name>" (a StatefulSet's volumeClaimTemplates).
    volume_claims: tuple[str, ...] = ()
    resource_claims: tuple[str, ...] = ()  # spec.resourceClaims[].name (DRA)
    runtime_class: str = ""  # spec.runtimeClassName
    # DRA: per spec.resourceClaims[] entry, (name, resourceClaimName, resourceClaimTemplateName) (kgpu.sim.scheduler.plugins.dynamicresources)
    claim_refs: tuple[tuple[str, str, str], ...] = ()
    # the claims controllers create for the pod (StatefulSet volumeClaimTemplates, ephemeral volumes), as
    # kgpu.sim.scheduler.plugins.volumebinding makes them when the input lacks them
    claim_templates: tuple[ClaimTemplate, ...] = ()

    def request(self, name: str) -> int:
        for k, v in self.requests:
            if k == name:
                return v
        return 0

    @property
    def gpus(self) -> int:
        return self.request(GPU)


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    spec: PodSpecInfo
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Pending"
    owner_kind: str = ""
    owner_name: str = ""
    source: str = ""
    limits: Resources = ()  # summed container limits (TKE spec matching reads them)
    priority: int = 0  # resolved from spec.priority or the PriorityClass
    # resolved as the Priority admission plugin does: the PriorityClass's, else the pod's, else the default
    preemption_policy: str = "PreemptLowerPriority"
    start_time: float | None = None  # status.startTime (Unix seconds) of a running pod, when given
    owner_uid: str = ""  # the controller's metadata.uid from ownerReferences, when given
    # made by kgpu from a workload (what its controller would create), not read as a Pod object
    created: bool = False
    # status.resourceClaimStatuses: (pod claim name, generated ResourceClaim name or "" when none is needed)
    claim_statuses: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def node_name(self) -> str:
        return self.spec.node_name

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    source: str = ""
    # status.capacity where the node gives it besides allocatable: what Karpenter counts against a
    # NodePool's limits for a node that exists (its StateNode.Capacity); None: allocatable is all there is
    capacity: Mapping[str, int] | None = None

    def alloc(self, name: str) -> int:
        return self.allocatable.get(name, 0)


@dataclass(slots=True)
class DaemonSet:
    namespace: str
    name: str
    template: PodSpecInfo
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    limits: Resources = ()
    source: str = ""
    uid: str = ""  # metadata.uid, when read from a cluster: its pods' ownerReferences name it

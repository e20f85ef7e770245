"""The subset of the Kubernetes JSON wire format kgpu reads, as msgspec Structs.

Decoding straight into these skips every field the scheduler does not need (status.conditions,
managedFields, volumes, env ...) in C, which is what makes reading a 50,000-pod snapshot cheap. Field names
follow the API's camelCase through ``rename="camel"``, except where the API capitalises an initialism
(``hostIP``): those are named explicitly, and tests/test_wire_names.py checks every name against the
Kubernetes OpenAPI definitions and the KubeRay CRD.
"""

from __future__ import annotations

import msgspec

QuantityValue = str | int | float


class _S(msgspec.Struct, rename="camel", omit_defaults=True):
    pass


class OwnerReference(_S):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_S):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None


class ResourceClaimRef(_S):
    """A container's ``resources.claims[]`` entry: a claim of the pod's, or one request of it (DRA)."""

    name: str = ""
    request: str = ""


class ResourceRequirements(_S):
    requests: dict[str, QuantityValue] | None = None
    limits: dict[str, QuantityValue] | None = None
    claims: list[ResourceClaimRef] | None = None


class ContainerPort(_S):
    container_port: int = 0
    host_port: int | None = None
    protocol: str | None = None
    host_ip: str | None = msgspec.field(default=None, name="hostIP")  # camel-casing would say hostIp


class Container(_S):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] | None = None
    restart_policy: str | None = None


class Toleration(_S):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class NodeSelectorRequirement(_S):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class NodeSelectorTerm(_S):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(_S):
    node_selector_terms: list[NodeSelectorTerm] | None = None


class PreferredSchedulingTerm(_S):
    weight: int = 0
    preference: NodeSelectorTerm = msgspec.field(default_factory=NodeSelectorTerm)


class NodeAffinity(_S):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class LabelSelectorRequirement(_S):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class LabelSelector(_S):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class PodAffinityTerm(_S):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(_S):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = msgspec.field(default_factory=PodAffinityTerm)


class PodAffinity(_S):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(_S):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(_S):
    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


class SchedulingGate(_S):
    name: str = ""


# Read only to say what kgpu does not model (kgpu.sim.unmodelled): which volumes claim storage, which
# resource claims (DRA) a pod makes. Every other volume source is skipped by the decoder.
class PersistentVolumeClaimVolumeSource(_S):
    claim_name: str = ""


class ClaimSpec(_S):
    """A PersistentVolumeClaim template's spec: what kgpu.sim.scheduler.plugins.volumebinding binds a claim made from it by."""

    storage_class_name: str | None = None
    access_modes: list[str] | None = None
    resources: ResourceRequirements | None = None


class ClaimTemplateSpec(_S):
    metadata: ObjectMeta | None = None
    spec: ClaimSpec | None = None


class EphemeralVolumeSource(_S):
    volume_claim_template: ClaimTemplateSpec | None = None


class Volume(_S):
    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None


class PodResourceClaim(_S):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(_S):
    name: str = ""
    resource_claim_name: str | None = None


class PodSpec(_S):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    node_name: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    overhead: dict[str, QuantityValue] | None = None
    scheduling_gates: list[SchedulingGate] | None = None
    host_network: bool | None = None
    resources: ResourceRequirements | None = None  # pod-level resources (PodLevelResources)
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    preemption_policy: str | None = None
    volumes: list[Volume] | None = None
    resource_claims: list[PodResourceClaim] | None = None
    runtime_class_name: str | None = None


class PodStatus(_S):
    phase: str | None = None
    start_time: str | None = None
    resource_claim_statuses: list[PodResourceClaimStatus] | None = None


class Pod(_S):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus | None = None


class RawPod(_S):
    """A pod whose spec stays undecoded bytes: identical specs are then decoded once."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: msgspec.Raw = msgspec.Raw(b"{}")
    status: PodStatus | None = None


class Taint(_S):
    key: str = ""
    value: str | None = None
    effect: str = ""


class NodeSpec(_S):
    taints: list[Taint] | None = None
    unschedulable: bool | None = None


class NodeStatus(_S):
    allocatable: dict[str, QuantityValue] | None = None
    capacity: dict[str, QuantityValue] | None = None


class Node(_S):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class PodTemplate(_S):
    metadata: ObjectMeta | None = None
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class JobSpec(_S):
    parallelism: int | None = None
    completions: int | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)


class JobTemplate(_S):
    metadata: ObjectMeta | None = None
    spec: JobSpec = msgspec.field(default_factory=JobSpec)


class VolumeClaimTemplate(_S):
    metadata: ObjectMeta | None = None
    spec: ClaimSpec | None = None


class WorkloadSpec(_S):
    replicas: int | None = None
    parallelism: int | None = None
    completions: int | None = None
    template: PodTemplate | None = None
    job_template: JobTemplate | None = None
    volume_claim_templates: list[VolumeClaimTemplate] | None = None  # StatefulSet


class Workload(_S):
    """Deployment, ReplicaSet, StatefulSet, Job, CronJob, DaemonSet: whatever carries a pod template."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


class RayGroup(_S):
    group_name: str = ""
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)


class RayClusterSpec(_S):
    head_group_spec: RayGroup | None = None
    worker_group_specs: list[RayGroup] | None = None


class RayCluster(_S):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: RayClusterSpec = msgspec.field(default_factory=RayClusterSpec)


class PriorityClass(_S):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool | None = None
    preemption_policy: str | None = None


class Head(_S):
    """Just enough to dispatch a document: its kind, and the items of a List."""

    api_version: str = ""
    kind: str = ""
    # UNSET: no items field at all (a List or snapshot cut short); null reads as no items
    items: list[msgspec.Raw] | msgspec.UnsetType | None = msgspec.UNSET

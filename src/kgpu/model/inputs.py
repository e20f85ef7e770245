"""What a set of input files holds, combined: the typed cluster state every verb reasons about.

``kgpu.model.load`` reads documents into an ``Objects``; inputs read apart (a cluster snapshot and workload
files) are combined with ``Objects.extend`` and their pods' priorities resolved over all of them together
(``resolve_priorities``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgpu.errors import quote
from kgpu.model.objects import DaemonSet, Node, Pod
from kgpu.model.podspec import PREEMPT_LOWER

if TYPE_CHECKING:
    from kgpu.model.dra_types import DRAObjects
    from kgpu.model.volumes import StorageObjects

BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


@dataclass
class Typed:
    """The typed forms of an input's DRA and storage objects, read at most once."""

    dra: DRAObjects | None = None
    storage: StorageObjects | None = None


@dataclass
class Objects:
    """What a set of files holds, in input order."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    priority_classes: dict[str, int] = field(default_factory=dict)
    default_priority: int = 0
    ignored: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    # Pods whose priority comes from a PriorityClass (by name, or the global default): resolved again when
    # inputs are combined, because a cluster's PriorityClasses apply to workloads read from other files.
    priority_pending: list[tuple[Pod, str]] = field(default_factory=list)
    # The cluster as the API server has it: a `kgpu snapshot` (kind ClusterSnapshot), or a List holding
    # Nodes (`kubectl get nodes,pods,ds -A -o json`). The pods controllers created are in it already, so
    # RayClusters are kept as objects but not expanded into pods; DaemonSets, from any input, get pods
    # only on eligible nodes without one of theirs (kgpu.sim.simulate.DaemonPodIndex).
    observed: bool = False
    # PriorityClass.preemptionPolicy by class name, and the global default class's (appended: positional
    # construction elsewhere keeps working)
    preemption_policies: dict[str, str] = field(default_factory=dict)
    default_preemption_policy: str = ""
    # Karpenter NodePools (with where they were read, for errors) and EC2NodeClasses by name, as read
    nodepools: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    # Karpenter NodeOverlays (karpenter.sh/v1alpha1) with where they were read (kgpu.sim.provisioners.karpenter.overlay)
    nodeoverlays: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    nodeclasses: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Workloads read that a controller owns, (kind, namespace, name) -> the controller's (kind, name, uid):
    # a Deployment's ReplicaSets, a CronJob's Jobs (kgpu.sim.simulate.controller_pods)
    owned: dict[tuple[str, str, str], tuple[str, str, str]] = field(default_factory=dict)
    # DRA objects (resource.k8s.io: DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice) as
    # read, with the file they came from; kgpu.model.dra validates them
    dra: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    # PersistentVolumeClaims, PersistentVolumes, StorageClasses as read, with their file (kgpu.model.volumes)
    storage: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    # Kueue's objects (kueue.x-k8s.io) and the Namespaces (their labels, for namespaceSelectors), as read
    kueue: list[dict[str, Any]] = field(default_factory=list)
    # ``dra`` and ``storage`` read into typed objects once (``dra_objects``, ``storage_objects``); copies of
    # this Objects made for one run (doctor's simulations: ``dataclasses.replace`` or ``typed=``) share it
    typed: Typed = field(default_factory=Typed, repr=False, compare=False)

    def dra_objects(self) -> DRAObjects | None:
        """``dra`` read and validated (``kgpu.model.dra.read``) the first time it is asked for; None when
        there is none. Readers must not change what it returns (the DRA plugin copies the claims it
        allocates)."""
        if not self.dra:
            return None
        if self.typed.dra is None:
            from kgpu.model.dra import read

            self.typed.dra = read(self.dra)
        return self.typed.dra

    def storage_objects(self) -> StorageObjects | None:
        """``storage`` read, validated and defaulted (``kgpu.model.volumes.read``) once; None when there is
        none. Readers must not change what it returns (VolumeBinding's state binds copies)."""
        if not self.storage:
            return None
        if self.typed.storage is None:
            from kgpu.model.volumes import read

            self.typed.storage = read(self.storage)
        return self.typed.storage

    def extend(self, other: Objects) -> None:
        self.typed = Typed()  # what was read no longer holds everything
        self.owned.update(other.owned)
        self.dra.extend(other.dra)
        self.kueue.extend(other.kueue)
        self.storage.extend(other.storage)
        self.nodepools.extend(other.nodepools)
        self.nodeoverlays.extend(other.nodeoverlays)
        self.nodeclasses.update(other.nodeclasses)
        self.nodes.extend(other.nodes)
        self.pods.extend(other.pods)
        self.daemonsets.extend(other.daemonsets)
        self.priority_classes.update(other.priority_classes)
        self.default_priority = other.default_priority or self.default_priority
        self.ignored.update(other.ignored)
        self.warnings.extend(other.warnings)
        self.priority_pending.extend(other.priority_pending)
        self.observed = self.observed or other.observed
        self.preemption_policies.update(other.preemption_policies)
        self.default_preemption_policy = other.default_preemption_policy or self.default_preemption_policy


def resolve_priorities(*inputs: Objects) -> list[str]:
    """spec.priority from priorityClassName as the Priority admission plugin sets it, over every input
    together (a PriorityClass read with the cluster applies to pods read from workload files).

    Returns a warning per pod whose class is found nowhere: admission would reject it; kgpu uses 0.
    """
    classes: dict[str, int] = {}
    policies: dict[str, str] = {}
    default = 0
    default_policy = ""
    for objs in inputs:
        classes.update(objs.priority_classes)
        policies.update(objs.preemption_policies)
        default = objs.default_priority or default
        default_policy = objs.default_preemption_policy or default_policy
    warnings = []
    for objs in inputs:
        for pod, where in objs.priority_pending:
            cls = pod.spec.priority_class
            # The class's preemptionPolicy replaces the pod's (admission rejects a pod that says otherwise);
            # without a class the pod's own, defaulted to PreemptLowerPriority.
            pod.preemption_policy = pod.spec.preemption_policy or PREEMPT_LOWER
            if not cls:
                pod.priority = default
                pod.preemption_policy = default_policy or pod.preemption_policy
            elif cls in classes:
                pod.priority = classes[cls]
                pod.preemption_policy = policies.get(cls) or pod.preemption_policy
            elif cls in BUILTIN_PRIORITY_CLASSES:
                pod.priority = BUILTIN_PRIORITY_CLASSES[cls]
            else:
                pod.priority = 0
                warnings.append(
                    f"{where}.priorityClassName: no PriorityClass {quote(cls)} in the input, using 0"
                )
    return warnings


def iter_pods_of_kind(objects: Objects, kinds: set[str]) -> Iterator[Pod]:
    return (p for p in objects.pods if p.owner_kind in kinds)

"""Every field of the wire Structs decodes the JSON name the API really uses.

msgspec's ``rename="camel"`` turns ``host_ip`` into ``hostIp`` while the API says ``hostIP``: a field named
wrongly is silently never read. The names are checked against the Kubernetes OpenAPI definitions shipped with
kubernetes-validate, and the KubeRay CRD the renderer validates against.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import msgspec
import pytest
import yaml

from kgpu.model import wire

SCHEMAS = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
RAY_CRD = Path(__file__).resolve().parent.parent / "src/kgpu/render/schemas/ray.io_rayclusters.yaml"

CORE = {
    wire.OwnerReference: "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
    wire.ObjectMeta: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    wire.ResourceRequirements: "io.k8s.api.core.v1.ResourceRequirements",
    wire.ResourceClaimRef: "io.k8s.api.core.v1.ResourceClaim",
    wire.ContainerPort: "io.k8s.api.core.v1.ContainerPort",
    wire.Container: "io.k8s.api.core.v1.Container",
    wire.Toleration: "io.k8s.api.core.v1.Toleration",
    wire.NodeSelectorRequirement: "io.k8s.api.core.v1.NodeSelectorRequirement",
    wire.NodeSelectorTerm: "io.k8s.api.core.v1.NodeSelectorTerm",
    wire.NodeSelector: "io.k8s.api.core.v1.NodeSelector",
    wire.PreferredSchedulingTerm: "io.k8s.api.core.v1.PreferredSchedulingTerm",
    wire.NodeAffinity: "io.k8s.api.core.v1.NodeAffinity",
    wire.Affinity: "io.k8s.api.core.v1.Affinity",
    wire.LabelSelectorRequirement: "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
    wire.LabelSelector: "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    wire.PodAffinityTerm: "io.k8s.api.core.v1.PodAffinityTerm",
    wire.WeightedPodAffinityTerm: "io.k8s.api.core.v1.WeightedPodAffinityTerm",
    wire.PodAffinity: "io.k8s.api.core.v1.PodAffinity",
    wire.TopologySpreadConstraint: "io.k8s.api.core.v1.TopologySpreadConstraint",
    wire.SchedulingGate: "io.k8s.api.core.v1.PodSchedulingGate",
    wire.PreferredSchedulingTerm: "io.k8s.api.core.v1.PreferredSchedulingTerm",
    wire.PersistentVolumeClaimVolumeSource: "io.k8s.api.core.v1.PersistentVolumeClaimVolumeSource",
    wire.EphemeralVolumeSource: "io.k8s.api.core.v1.EphemeralVolumeSource",
    wire.ClaimTemplateSpec: "io.k8s.api.core.v1.PersistentVolumeClaimTemplate",
    wire.ClaimSpec: "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
    wire.Volume: "io.k8s.api.core.v1.Volume",
    wire.PodResourceClaim: "io.k8s.api.core.v1.PodResourceClaim",
    wire.PodResourceClaimStatus: "io.k8s.api.core.v1.PodResourceClaimStatus",
    wire.VolumeClaimTemplate: "io.k8s.api.core.v1.PersistentVolumeClaim",
    wire.PodSpec: "io.k8s.api.core.v1.PodSpec",
    wire.PodStatus: "io.k8s.api.core.v1.PodStatus",
    wire.Pod: "io.k8s.api.core.v1.Pod",
    wire.RawPod: "io.k8s.api.core.v1.Pod",
    wire.Taint: "io.k8s.api.core.v1.Taint",
    wire.NodeSpec: "io.k8s.api.core.v1.NodeSpec",
    wire.NodeStatus: "io.k8s.api.core.v1.NodeStatus",
    wire.Node: "io.k8s.api.core.v1.Node",
    wire.PodTemplate: "io.k8s.api.core.v1.PodTemplateSpec",
    wire.JobSpec: "io.k8s.api.batch.v1.JobSpec",
    wire.JobTemplate: "io.k8s.api.batch.v1.JobTemplateSpec",
    wire.PriorityClass: "io.k8s.api.scheduling.v1.PriorityClass",
}
# WorkloadSpec is the union of the workload specs it stands for; Workload and Head are generic objects.
UNIONS = {
    wire.WorkloadSpec: (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "io.k8s.api.apps.v1.StatefulSetSpec",
        "io.k8s.api.apps.v1.DaemonSetSpec",
        "io.k8s.api.batch.v1.JobSpec",
        "io.k8s.api.batch.v1.CronJobSpec",
    ),
    wire.Workload: ("io.k8s.api.apps.v1.Deployment",),
    wire.Head: ("io.k8s.api.core.v1.PodList",),
}


@pytest.fixture(scope="module")
def definitions() -> dict[str, Any]:
    data = json.loads((SCHEMAS / "v1.33.0-local-strict" / "_definitions.json").read_text())
    defs: dict[str, Any] = data.get("$defs") or data["definitions"]
    return defs


def _names(struct: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(struct)}


def test_every_wire_struct_is_checked() -> None:
    structs = {
        v
        for v in vars(wire).values()
        if isinstance(v, type) and issubclass(v, msgspec.Struct) and v is not wire._S
    }
    ray = {wire.RayGroup, wire.RayClusterSpec, wire.RayCluster}
    assert structs == set(CORE) | set(UNIONS) | ray


@pytest.mark.parametrize("struct", list(CORE), ids=lambda s: s.__name__)
def test_core_names_are_the_api_names(struct: type[msgspec.Struct], definitions: dict[str, Any]) -> None:
    properties = set(definitions[CORE[struct]]["properties"])
    assert _names(struct) <= properties, sorted(_names(struct) - properties)


@pytest.mark.parametrize("struct", list(UNIONS), ids=lambda s: s.__name__)
def test_union_names_are_api_names(struct: type[msgspec.Struct], definitions: dict[str, Any]) -> None:
    properties = set().union(*(definitions[d]["properties"] for d in UNIONS[struct]))
    assert _names(struct) <= properties, sorted(_names(struct) - properties)


def test_host_ip_is_read() -> None:
    """The regression: ports[].hostIP reached no field, so host-port conflicts ignored the address."""
    port = msgspec.json.decode(
        b'{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"}', type=wire.ContainerPort
    )
    assert port.host_ip == "10.0.0.1"


def test_ray_names_are_the_crd_names() -> None:
    crd = yaml.load(RAY_CRD.read_text(), Loader=yaml.CSafeLoader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert _names(wire.RayClusterSpec) <= set(spec["properties"])
    group = spec["properties"]["workerGroupSpecs"]["items"]["properties"]
    assert _names(wire.RayGroup) <= set(group)
    head = spec["properties"]["headGroupSpec"]["properties"]
    assert _names(wire.RayGroup) - {"groupName", "replicas", "minReplicas", "maxReplicas"} <= set(head)

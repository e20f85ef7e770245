"""Inputs the API server refuses are bad input for kgpu too: exit 2, one line naming the file, the object and the
field, in the API server's words where it has them (k8s.io/kubernetes pkg/apis/core/validation for a pod's
resource claims; its decoder for a number where Kubernetes' type is a string), never taken as something else."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from test_dra import claim_pod, gpu_class, gpu_slice, nodes, template
from test_hostile_regressions import input_error, profile_text, write

CLUSTER = [*nodes("n1"), gpu_class(), gpu_slice("n1", 2), template()]


def _claims(mutate: Any) -> dict[str, Any]:
    p = claim_pod("p")
    mutate(p["spec"])
    return p


CLAIM_CASES = [
    (
        lambda s: s["resourceClaims"][0].update(resourceClaimName="shared-gpu"),
        "spec.resourceClaims[0]",
        "Invalid value: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
    ),
    (
        lambda s: s["resourceClaims"][0].pop("resourceClaimTemplateName"),
        "spec.resourceClaims[0]",
        "Invalid value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
    ),
    (
        lambda s: s["resourceClaims"].append(dict(s["resourceClaims"][0])),
        "spec.resourceClaims[1].name",
        "Duplicate value: 'gpu'",
    ),
    (
        lambda s: s["resourceClaims"][0].update(name="GPU_1"),
        "spec.resourceClaims[0].name",
        "Invalid value: 'GPU_1': a lowercase RFC 1123 label",
    ),
    (
        lambda s: s["resourceClaims"][0].update(resourceClaimTemplateName="Bad_Name"),
        "spec.resourceClaims[0].resourceClaimTemplateName",
        "a lowercase RFC 1123 subdomain",
    ),
    (
        lambda s: s["containers"][0]["resources"].update(claims=[{"name": "nope"}]),
        "spec.containers[0].resources.claims[0]",
        "Not found: 'nope': must be one of the names in pod.spec.resourceClaims: gpu",
    ),
    (
        lambda s: (s.pop("resourceClaims"), None),
        "spec.containers[0].resources.claims[0]",
        "Not found: 'gpu': must be one of the names in pod.spec.resourceClaims which is empty",
    ),
    (
        lambda s: s["containers"][0]["resources"].update(claims=[{}]),
        "spec.containers[0].resources.claims[0]",
        "Required value",
    ),
    (
        lambda s: s["containers"][0]["resources"].update(
            claims=[{"name": "gpu"}, {"name": "gpu", "request": "gpu"}]
        ),
        "spec.containers[0].resources.claims[1]",
        "Duplicate value: 'gpu'",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "words"), CLAIM_CASES, ids=[c[1] + ":" + c[2][:24] for c in CLAIM_CASES]
)
def test_a_pods_resource_claims_as_the_api_server_validates_them(
    tmp_path: Path, mutate: Any, field: str, words: str
) -> None:
    cluster = write(tmp_path / "cluster.yaml", CLUSTER)
    work = write(tmp_path / "pod.yaml", _claims(mutate))
    line = input_error(["simulate", "-c", cluster, "-w", work], "pod.yaml", words)
    assert f"{work}: Pod default/p: {field}: " in line, line


def test_valid_claims_still_place() -> None:
    from test_dra import run

    p = claim_pod("p")
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "gpu"}]
    assert run(copy.deepcopy(CLUSTER), [p])["p"].node == "n1"


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "us-east-1a"}},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
}
PVC = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data", "namespace": "default"},
    "spec": {
        "storageClassName": "gp3",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
    },
}
PV = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv1"},
    "spec": {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "gp3",
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
                        ]
                    }
                ]
            }
        },
    },
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
    },
}
TERM = "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]"
VOLUME_CASES = [
    (1, ("spec", "storageClassName"), 5, "PersistentVolumeClaim default/data: spec.storageClassName"),
    (2, ("spec", "storageClassName"), 5, "PersistentVolume pv1: spec.storageClassName"),
    (1, ("spec", "volumeName"), 7, "PersistentVolumeClaim default/data: spec.volumeName"),
    (
        2,
        ("spec", "nodeAffinity", "required", "nodeSelectorTerms", 0, "matchExpressions", 0, "values"),
        [5],
        f"PersistentVolume pv1: {TERM}.values[0]",
    ),
    (
        2,
        ("spec", "nodeAffinity", "required", "nodeSelectorTerms", 0, "matchExpressions", 0, "key"),
        5,
        f"PersistentVolume pv1: {TERM}.key",
    ),
]


@pytest.mark.parametrize(("index", "path", "value", "field"), VOLUME_CASES, ids=[c[3] for c in VOLUME_CASES])
def test_a_number_where_a_volume_field_is_a_string(
    tmp_path: Path, index: int, path: tuple[Any, ...], value: Any, field: str
) -> None:
    objs = copy.deepcopy([NODE, PVC, PV])
    at: Any = objs[index]
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    cluster = write(tmp_path / "cluster.yaml", objs)
    work = write(tmp_path / "pod.yaml", POD)
    line = input_error(
        ["simulate", "-c", cluster, "-w", work], "cluster.yaml", f"{field}: must be a string, got "
    )
    assert f"{cluster}: {field}" in line


def test_the_same_volumes_with_strings_are_taken(tmp_path: Path) -> None:
    from hostile_inputs import invoke

    cluster = write(tmp_path / "cluster.yaml", [NODE, PVC, PV])
    res = invoke(["simulate", "-c", cluster, "-w", write(tmp_path / "pod.yaml", POD)])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["pools"][0].update(weight="10"), "pools[0].weight"),
        (lambda d: d["pools"][0].update(minSize="1"), "pools[0].minSize"),
        (lambda d: d.update(draDriver={"version": "1" * 5000 + ".0.0"}), "draDriver.version"),
    ],
)
def test_a_profile_takes_numbers_as_numbers_and_bounds_versions(
    tmp_path: Path, mutate: Any, field: str
) -> None:
    data = profile_text()
    mutate(data)
    f = write(tmp_path / "kgpu.yaml", data)
    line = input_error(["profile", "validate", "-f", f], "kgpu.yaml", field)
    assert len(line) < 600

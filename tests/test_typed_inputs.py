"""An input's DRA and storage objects are read into typed form once (``Objects.dra_objects``,
``Objects.storage_objects``) and shared: by repeated simulations and by doctor's checks, which used to read the
raw objects again each. The readers must leave the shared objects as they were."""

from __future__ import annotations

from typing import Any

import pytest

import kgpu.model.dra
import kgpu.model.volumes
from kgpu.doctor import doctor_report
from kgpu.model.load import parse_documents
from kgpu.sim.simulate import simulate
from snapshot_builders import snapshot
from test_dra_doctor import N1, claim_pod, classes, dra_node, kubelet_plugin, slices, template
from test_volumes import ebs_class, nodes, pvc, trainer


def counted(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[int]:
    """Counts the calls of ``module.read`` (the readers import it when they run)."""
    calls = [0]
    real = module.read

    def read(docs: Any) -> Any:
        calls[0] += 1
        return real(docs)

    monkeypatch.setattr(module, "read", read)
    return calls


def placed(result: Any) -> dict[str, tuple[str | None, str, tuple[Any, ...]]]:
    return {p.pod.name: (p.node, p.reason, tuple(p.devices)) for p in result.placements}


def test_storage_is_read_once_and_binding_leaves_it_as_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted(monkeypatch, kgpu.model.volumes)
    objects = parse_documents(
        [
            *nodes("us-west-2a", "us-west-2b"),
            ebs_class(),
            pvc("ckpt"),
            trainer("first", "ckpt", cpu="3"),
            trainer("second", "ckpt", cpu="500m"),
        ],
        "cluster.yaml",
    )
    first, second = placed(simulate(objects)), placed(simulate(objects))
    assert first == second
    assert first["first"][0] == first["second"][0] == "n-a"  # the claim bound in n-a's zone, in both runs
    assert calls == [1]
    typed = objects.storage_objects()
    assert typed is not None
    claim = typed.claims[("ml", "ckpt")]
    assert (claim.phase, claim.volume_name) == ("Pending", "")  # the runs bound copies
    assert typed.volumes == {}  # and provisioned into copies


def dra_items() -> list[dict[str, Any]]:
    return [
        dra_node(N1),
        *slices(N1),
        kubelet_plugin(),
        *classes(),
        template(),
        claim_pod("train-0"),
        claim_pod("train-1"),
    ]


def test_dra_is_read_once_and_allocation_leaves_it_as_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted(monkeypatch, kgpu.model.dra)
    shared = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
    }
    user = claim_pod("eval-0")
    user["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
    objects = parse_documents([shared, user, *dra_items()], "cluster.json")  # eval-0 is tried first
    first, second = placed(simulate(objects)), placed(simulate(objects))
    assert first == second
    assert first["eval-0"][0] == N1 and first["eval-0"][2]  # allocated a device in both runs
    assert first["train-0"][0] is None  # one GPU: the later pods wait, in both runs alike
    assert calls == [1]
    typed = objects.dra_objects()
    assert typed is not None and typed.claims["ml/shared-gpu"].allocation is None


def test_doctor_reads_the_dra_objects_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted(monkeypatch, kgpu.model.dra)
    rep = doctor_report(snapshot(dra_items()))
    found = {f.object: f.message for f in rep.by_check("dra-claim-pending")}
    assert "1 cannot allocate all claims" in found["Pod/ml/train-1"]  # the one GPU goes to train-0
    assert "finds devices for it on" in found["Pod/ml/train-0"]
    assert calls == [1]  # the DRA checks and the pending pods' simulation share one read


def test_doctor_reads_the_storage_objects_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted(monkeypatch, kgpu.model.volumes)
    gpu_pod = trainer("train", "ckpt")  # asks a GPU no node has: its finding words the volume plugins too
    gpu_pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    rep = doctor_report(snapshot([*nodes("us-west-2a"), ebs_class(), pvc("ckpt"), gpu_pod]))
    words = [f.message for f in rep.findings if f.object == "Pod/ml/train"]
    assert any("Insufficient nvidia.com/gpu" in w for w in words)
    assert calls == [1]  # the pending pods' simulation and the explanation share one read

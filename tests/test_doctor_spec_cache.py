"""doctor's pod models decode each template once: a DaemonSet's pods (each names its node in nodeName and in
its node affinity's matchFields) and a StatefulSet's pods (each names its own claim) share one decode, and
every pod gets exactly what the loader would give it alone."""

from __future__ import annotations

from typing import Any

import pytest

from kgpu.doctor import reading as state_mod
from kgpu.doctor.reading import cluster_state
from kgpu.model.load import parse_documents
from snapshot_builders import container, daemon_pod, daemonset, node, pod, snapshot


def _stateful_pod(i: int, node_name: str | None) -> dict[str, Any]:
    c = container("db", "postgres:16", requests={"cpu": "500m", "memory": "1Gi"})
    p = pod(f"db-{i}", "data", containers=[c], node_name=node_name)
    p["spec"]["hostname"] = f"db-{i}"
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}},
                            {"name": "kube-api-access-x", "projected": {"sources": []}}]
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                         "controller": True, "uid": "u-db"}]
    return p


@pytest.fixture()
def items() -> list[dict[str, Any]]:
    nodes = [node(f"ip-10-0-1-{i}.us-west-2.compute.internal", "m5.xlarge") for i in range(40)]
    out: list[dict[str, Any]] = list(nodes)
    ds = daemonset("aws-node", "kube-system", "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.18.5",
                   tolerations=[{"operator": "Exists"}], desired=len(nodes))
    out.append(ds)
    for n in nodes:
        out.append(daemon_pod(ds, n["metadata"]["name"]))
    out += [_stateful_pod(i, nodes[i]["metadata"]["name"] if i < 20 else None) for i in range(25)]
    return out


def test_one_decode_per_template_and_each_pod_as_the_loader_reads_it(items: list[dict[str, Any]],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = state_mod.spec_info

    def counting(*args: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kw)

    monkeypatch.setattr(state_mod, "spec_info", counting)
    state = cluster_state(snapshot(items))
    assert calls <= 4  # the DaemonSet's pods, the StatefulSet's bound and pending pods (65 pods)
    alone = {(p.namespace, p.name): p for p in parse_documents(items, "alone.json").pods}
    models = [p.model for p in state.pods]
    assert len(models) == 65
    for m in models:
        assert m is not None
        ref = alone[(m.namespace, m.name)]
        assert m.spec.node_name == ref.spec.node_name
        assert m.spec.affinity == ref.spec.affinity
        assert m.spec.volume_claims == ref.spec.volume_claims
        assert m.spec.requests == ref.spec.requests
    by_name = {m.name: m for m in models if m is not None}
    assert by_name["db-3"].spec.volume_claims == ("pvc data-db-3",)
    ds = next(m for m in models if m is not None and m.owner_kind == "DaemonSet" and m.spec.node_name.endswith("-7"
                                                                                                             ".us-west-2.compute.internal"))
    assert ds.spec.affinity is not None
    assert ds.spec.affinity.terms[0].match_fields[0].values == ("ip-10-0-1-7.us-west-2.compute.internal",)

"""`kgpu simulate` on the cluster files users have: `kubectl get nodes,pods,ds -A -o json` Lists and `kgpu
snapshot`s, their DaemonSets' pods, kinds the API server would reject, empty snapshots, unpriced regions,
and a table that stays linear in the pods."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgpu.cli.main import cli
from kgpu.errors import InputError
from kgpu.model.load import parse_text
from kgpu.sim.simulate import SCHEDULED, simulate
from kubectl_cluster import GPU_NODES, SYSTEM_NODES, as_list, as_snapshot, daemon_pod_of, eks_items
from snapshot_builders import nodepool

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
DAEMONSETS = {"kube-proxy": SYSTEM_NODES + GPU_NODES, "aws-node": SYSTEM_NODES + GPU_NODES,
              "nvidia-device-plugin-daemonset": GPU_NODES}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run(doc: dict[str, Any], source: str = "cluster.json"):
    return simulate(parse_text(json.dumps(doc).encode(), source))


def daemon_pods_per_node(result) -> dict[tuple[str, str], int]:
    """(DaemonSet, node) -> pods of it on the node after the simulation: those read plus those created."""
    out: dict[tuple[str, str], int] = {}
    for state in result.nodes:
        for pod in state.pods:
            if pod.owner_kind == "DaemonSet":
                key = (pod.owner_name, state.name)
                out[key] = out.get(key, 0) + 1
    return out


def test_kubectl_list_daemon_pods_are_observed_not_created(tmp_path) -> None:
    """The cluster as `kubectl get nodes,pods,ds -A -o json` prints it: the GPU pod that fits beside the
    node's daemon pods is placed (today's bug: each daemon pod counted twice, 'Insufficient cpu')."""
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(as_list(eks_items())))
    res = invoke("simulate", "-c", str(path), "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [(p["name"], p["phase"], p["node"]) for p in data["pods"]] == [("bert-0", SCHEDULED, GPU_NODES[1])]
    result = run(as_list(eks_items()))
    assert set(daemon_pods_per_node(result).values()) == {1}
    gpu = next(s for s in result.nodes if s.name == GPU_NODES[1])
    assert gpu.requested["cpu"] == 100 + 25 + 25 + 3700  # kube-proxy, aws-node's two containers, the pod


def test_node_missing_its_daemon_pod_gets_one() -> None:
    """A node that just joined (no kube-proxy pod yet) gets one, pinned to it; the other nodes do not."""
    missing = (("kube-proxy", GPU_NODES[1]), ("aws-node", SYSTEM_NODES[0]))
    for doc in (as_list(eks_items(missing=missing)), as_snapshot(eks_items(missing=missing))):
        result = run(doc)
        created = [(p.pod.owner_name, p.node) for p in result.placements if p.pod.owner_kind == "DaemonSet"]
        assert sorted(created) == sorted(missing)
        assert set(daemon_pods_per_node(result).values()) == {1}


def test_pending_daemon_pod_pinned_to_its_node_counts_as_there() -> None:
    """A daemon pod the controller created but the scheduler has not bound yet (Pending, pinned by
    matchFields metadata.name) is not created a second time."""
    items = eks_items(missing=(("kube-proxy", GPU_NODES[1]),))
    ds = next(i for i in items if i["kind"] == "DaemonSet" and i["metadata"]["name"] == "kube-proxy")
    waiting = daemon_pod_of(ds, GPU_NODES[1])
    del waiting["spec"]["nodeName"]
    waiting["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    result = run(as_list([*items, waiting]))
    mine = [p for p in result.placements if p.pod.owner_name == "kube-proxy"]
    assert [(p.pod.name, p.node) for p in mine] == [(waiting["metadata"]["name"], GPU_NODES[1])]


def test_daemon_pods_of_a_deleted_daemonset_with_the_same_name_do_not_count() -> None:
    """Ownership is by uid where both carry one: pods of an earlier DaemonSet of the same name (another
    uid) are not the new one's."""
    items = eks_items()
    for item in items:
        refs = item["metadata"].get("ownerReferences") or []
        if refs and refs[0]["name"] == "nvidia-device-plugin-daemonset":
            refs[0]["uid"] = "0badc0de-0000-4000-8000-000000000001"
    result = run(as_list(items))
    created = sorted(p.node for p in result.placements if p.pod.owner_name == "nvidia-device-plugin-daemonset")
    assert created == sorted(GPU_NODES)


def test_hand_written_daemonset_and_pods_match_by_namespace_and_name() -> None:
    """Manifests without uids: a pod owned by the DaemonSet's namespace/name is its pod."""
    items = eks_items()
    for item in items:
        item["metadata"].pop("uid", None)
        for ref in item["metadata"].get("ownerReferences") or []:
            ref.pop("uid")
    result = run(as_list(items))
    assert [p.pod.name for p in result.placements] == ["bert-0"]


def test_terminated_daemon_pod_is_replaced() -> None:
    """A Failed daemon pod is replaced by the controller: the node gets a new one."""
    items = eks_items()
    failed = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"].startswith("aws-node-")
                  and i["spec"]["nodeName"] == SYSTEM_NODES[1])
    failed["status"]["phase"] = "Failed"
    result = run(as_list(items))
    assert [(p.pod.owner_name, p.node) for p in result.placements if p.pod.owner_kind == "DaemonSet"] == [
        ("aws-node", SYSTEM_NODES[1])
    ]


def _outcome(doc: dict[str, Any]) -> Any:
    try:
        return run(doc, "cluster").as_dict()
    except InputError as exc:
        return ("error", exc.message)


PAIRS = [(ds, n) for ds, nodes in DAEMONSETS.items() for n in nodes]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    missing=st.sets(st.sampled_from(PAIRS)),
    pending=st.integers(min_value=0, max_value=3),
    order=st.randoms(use_true_random=False),
)
def test_list_and_snapshot_of_the_same_objects_agree(missing, pending, order) -> None:
    """Any cluster of the fixture's kind, in any item order, as a List and as a ClusterSnapshot: the same
    placements, and every eligible node ends with exactly one pod of each DaemonSet."""
    items = eks_items(missing=tuple(sorted(missing)), pending=pending)
    order.shuffle(items)
    as_l, as_s = run(as_list(items)), run(as_snapshot(items))
    assert as_l.as_dict() == as_s.as_dict()
    counts = daemon_pods_per_node(as_l)
    assert counts == {(ds, n): 1 for ds, n in PAIRS}
    assert sum(1 for p in as_l.placements if p.pod.owner_kind == "DaemonSet") == len(missing)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_snapshot_fixture_reads_alike_as_list_and_snapshot(fixture) -> None:
    """doctor's cluster fixtures, each re-wrapped as the other form, simulate to the same answer."""
    doc = json.loads(fixture.read_text())
    items = doc["items"]
    assert _outcome(as_list(items)) == _outcome(as_snapshot(items))


# --- kinds the API server rejects ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "kind", "hint"),
    [
        ("v1", "pod", "did you mean Pod?"),
        ("apps/v1", "Deplyment", "did you mean Deployment?"),
        ("batch/v1", "CronJobs", "did you mean CronJob?"),
        ("v1", "Deployment", "Deployment is served by apiVersion apps/v1"),
        ("apps/v1", "Job", "Job is served by apiVersion batch/v1"),
    ],
)
def test_unknown_kind_in_a_builtin_group_is_exit_2(tmp_path, api, kind, hint) -> None:
    work = tmp_path / "train.yaml"
    work.write_text(f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: train\n  namespace: ml\nspec: {{}}\n")
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(as_list(eks_items(pending=0))))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(cluster), "-w", str(work)])
    assert res.exit_code == 2
    assert res.output.strip() == (
        f"error: {work}: {kind} ml/train: kind: no matches for kind {kind!r} in version {api!r} ({hint})"
    )


def test_unknown_kind_inside_a_kubectl_list_is_exit_2(tmp_path) -> None:
    items = eks_items(pending=0)
    bad = copy.deepcopy(next(i for i in items if i["kind"] == "Pod"))
    bad["kind"] = "pod"
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(as_list([*items, bad])))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(cluster)])
    assert res.exit_code == 2
    assert f"items[{len(items)}]" not in res.output  # named by the object, not its index
    assert f"pod kube-system/{bad['metadata']['name']}: kind: no matches for kind 'pod'" in res.output
    assert "(did you mean Pod?)" in res.output


def test_unknown_kind_of_a_custom_resource_stays_a_warning(tmp_path) -> None:
    crd = tmp_path / "monitoring.yaml"
    crd.write_text(
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitr\nmetadata: {name: dcgm, namespace: gpu}\n---\n"
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: tune, namespace: ml}\n"
    )
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(as_list(eks_items(pending=0))))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(cluster), "-w", str(crd)])
    assert res.exit_code == 0, res.output
    assert "ignored 1 object(s) of unknown kind 'ServiceMonitr'" in res.output
    assert "ignored 1 object(s) of unknown kind 'RayJob'" in res.output


# --- empty snapshots -----------------------------------------------------------------------------------


def test_snapshot_without_items_is_exit_2(tmp_path) -> None:
    doc = as_snapshot([])
    del doc["items"]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(cli, ["simulate", "--cluster", str(path)])
    assert res.exit_code == 2
    assert res.output.strip() == (
        f"error: {path}: ClusterSnapshot: items: missing: `kgpu snapshot` always writes it "
        '("items": [] for an empty cluster) (was the file cut short? save it again)'
    )
    assert "unknown kind" not in res.output


def test_list_without_items_is_exit_2(tmp_path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: v1\nkind: List\nmetadata: {resourceVersion: ''}\n")
    res = CliRunner().invoke(cli, ["simulate", "--cluster", str(path)])
    assert res.exit_code == 2
    assert "List: items: missing: `kubectl get -o json` always writes it" in res.output


def test_empty_cluster_is_valid_and_said(tmp_path) -> None:
    """A snapshot with no nodes (a Karpenter cluster scaled to zero) is a cluster: pods stay pending with
    kube-scheduler's words for it, and the warning says why."""
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(as_snapshot([])))
    work = tmp_path / "w.json"
    work.write_text(json.dumps(eks_items()[-1]))  # the pending training pod
    res = CliRunner().invoke(cli, ["simulate", "--cluster", str(path), "-w", str(work)])
    assert res.exit_code == 1
    assert "[1] no nodes available to schedule pods" in res.output
    assert f"warning: {path}: no nodes: an empty cluster" in res.output
    assert "unknown kind" not in res.output


# --- regions outside the price catalog -----------------------------------------------------------------


def test_region_outside_the_price_catalog_goes_on_with_a_warning(tmp_path) -> None:
    """Nodes in eu-central-1 (a real region kgpu has no prices for) and a NodePool: placement goes on,
    nothing is provisioned at a made-up price, and the warning names the region."""
    items = json.loads(json.dumps(eks_items(pending=2)).replace("us-west-2", "eu-central-1"))
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(as_list([*items, nodepool("gpu")])))
    res = CliRunner().invoke(cli, ["simulate", "-c", str(path), "-o", "json"])
    assert res.exit_code == 1  # one pending pod stays pending: a result, not bad input
    data = json.loads(res.stdout)
    assert [p["phase"] for p in data["pods"]] == ["Scheduled", "Unschedulable"]
    assert "new_nodes" not in data
    assert any(
        "region 'eu-central-1'" in w and "not in kgpu's price catalog" in w and "NodePool(s) gpu" in w
        for w in data["warnings"]
    )


# --- the table -----------------------------------------------------------------------------------------


class _CountingList(list):
    """A list that counts how often it is iterated."""

    iterations = 0

    def __iter__(self):
        _CountingList.iterations += 1
        return super().__iter__()


@pytest.mark.parametrize("pods", [200, 2000])
def test_table_reads_the_pods_a_fixed_number_of_times(pods) -> None:
    """Pending pods of one ReplicaSet, each with its own name: one row for them all, and the pods are
    walked a fixed number of times however many there are (the table was quadratic: a scan per row)."""
    from kgpu.cli import simulate_cmd

    rows = [
        {"namespace": "prod", "name": f"web-7d9f8b6c5-{n:05x}", "phase": "Unschedulable", "node": None,
         "reason": "0/20 nodes are available: 20 Insufficient nvidia.com/gpu.", "warnings": []}
        for n in range(pods)
    ]
    rows[0] = {**rows[0], "phase": "Scheduled", "node": "ip-192-168-0-1.us-west-2.compute.internal", "reason": None}
    data = {"pods": _CountingList(rows), "summary": {"scheduled": 1, "unschedulable": pods - 1}}
    _CountingList.iterations = 0
    with CliRunner().isolation():
        import click

        with click.Context(simulate_cmd.command):
            text = simulate_cmd.render_table(data, None, ["web-7d9f8b6c5"] * pods)
    assert _CountingList.iterations <= 3
    lines = text.splitlines()
    assert f"web-7d9f8b6c5 (x{pods - 1})" in text
    assert lines[2].split()[:3] == ["prod", "web-7d9f8b6c5-00000", "Scheduled"]
    assert "[1] 0/20 nodes are available: 20 Insufficient nvidia.com/gpu." in lines


# --- workload controllers in a List: `kubectl get all -A -o json` ----------------------------------------


def _coredns(replicas: int = 2, rs_replicas: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The coredns Deployment and its ReplicaSet as the API server returns them (pod-template-hash label,
    the ReplicaSet owned by the Deployment's uid)."""
    from snapshot_builders import uid

    template = {
        "metadata": {"labels": {"k8s-app": "kube-dns", "pod-template-hash": "789f8477df"}},
        "spec": {"containers": [{"name": "coredns", "image": "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/coredns:v1.11.3-eksbuild.2",
                                 "resources": {"requests": {"cpu": "100m", "memory": "70Mi"}}}]},
    }
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "coredns", "namespace": "kube-system", "uid": uid("Deployment", "kube-system", "coredns"),
                        "labels": {"eks.amazonaws.com/component": "coredns", "k8s-app": "kube-dns"}},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"k8s-app": "kube-dns"}}, "template": template},
           "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1}}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "coredns-789f8477df", "namespace": "kube-system",
                       "uid": uid("ReplicaSet", "kube-system", "coredns-789f8477df"),
                       "labels": {"k8s-app": "kube-dns", "pod-template-hash": "789f8477df"},
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "coredns",
                                            "uid": dep["metadata"]["uid"], "controller": True,
                                            "blockOwnerDeletion": True}]},
          "spec": {"replicas": replicas if rs_replicas is None else rs_replicas,
                   "selector": {"matchLabels": {"k8s-app": "kube-dns", "pod-template-hash": "789f8477df"}},
                   "template": template},
          "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1}}
    return dep, rs


def _cluster_with_coredns(*extra: dict[str, Any], pods: bool = True) -> list[dict[str, Any]]:
    items = [i for i in eks_items(pending=0) if pods or not i["metadata"]["name"].startswith("coredns-")]
    for item in items:
        if item["metadata"]["name"].startswith("coredns-"):
            item["metadata"]["labels"]["pod-template-hash"] = "789f8477df"
    return [*items, *extra]


def _created(result) -> list[str]:
    return [p.pod.name for p in result.placements if p.pod.created]


def test_kubectl_get_all_deployment_replicaset_and_pods_create_nothing() -> None:
    """Deployment, ReplicaSet and the two running pods: the cluster as it is, nothing to create (it was
    four new coredns pods besides the two running)."""
    dep, rs = _coredns()
    assert _created(run(as_list(_cluster_with_coredns(dep, rs)))) == []
    assert _created(run(as_list(_cluster_with_coredns(dep)))) == []  # pods matched by pod-template-hash


def test_replicaset_creates_what_it_lacks_and_stands_for_its_deployment() -> None:
    dep, rs = _coredns(replicas=3)
    assert _created(run(as_list(_cluster_with_coredns(dep, rs)))) == ["coredns-789f8477df-0"]
    dep, rs = _coredns()
    assert _created(run(as_list(_cluster_with_coredns(dep, rs, pods=False)))) == [
        "coredns-789f8477df-0", "coredns-789f8477df-1"]


def test_statefulset_creates_only_the_ordinals_not_running() -> None:
    from snapshot_builders import pod, uid

    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "etcd", "namespace": "db", "uid": uid("StatefulSet", "db", "etcd")},
           "spec": {"replicas": 3, "serviceName": "etcd", "selector": {"matchLabels": {"app": "etcd"}},
                    "template": {"metadata": {"labels": {"app": "etcd"}},
                                 "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.17"}]}}}}
    running = [pod(f"etcd-{n}", "db", node_name=SYSTEM_NODES[n], owner=("StatefulSet", "etcd"), labels={"app": "etcd"})
               for n in (0, 1)]
    running[1]["metadata"]["name"] = "etcd-2"  # ordinals 0 and 2 run; 1 is missing
    result = run(as_list([*eks_items(pending=0), sts, *running]))
    assert _created(result) == ["etcd-1"]


def test_workload_with_pods_of_another_uid_creates_them_all() -> None:
    """Pods owned by an earlier object of the same name (another uid) are not this Deployment's."""
    _, rs = _coredns()
    rs["metadata"]["uid"] = "0badc0de-0000-4000-8000-000000000002"
    assert _created(run(as_list(_cluster_with_coredns(rs)))) == ["coredns-789f8477df-0", "coredns-789f8477df-1"]

"""Preemption against the real kube-scheduler: random GPU clusters on kwok nodes, one preemptor each.

The in-process oracle (test_scheduler_oracle.py) runs the filters and scores only, so PostFilter
(DefaultPreemption) is compared here with the whole scheduler: each scenario's nodes are filled with
running pods of low priorities (bound by ``spec.nodeName``), ``kgpu snapshot`` reads the cluster,
``kgpu simulate`` says what the high-priority pod will do, and then the pod is created and the real
scheduler acts. Compared: whether it preempts, the node it takes, the pods it evicts, and when it cannot,
the FailedScheduling message word for word.

kube-scheduler breaks a tie between equally good candidate nodes by the order of its parallel dry run
(random); kgpu takes the first node by name. Such a tie (same highest victim priority, sum of
priorities and number of victims on both nodes, victims started in the same second) is counted apart, and
so is a pod that evicts nothing and lands on another node that every score rates the same (same
allocatable, taints and running pods' requests: kube-scheduler picks among equal scores at random).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster import LocalCluster, start_cluster, unscheduled_message

from conftest import binary, cases, seed

KGPU = [sys.executable, "-m", "kgpu.cli.main"]
GPU = "nvidia.com/gpu"
TAINT = {"key": GPU, "value": "true", "effect": "NoSchedule"}
PRIORITIES = {"p-low": 10, "p-mid": 20, "p-mid2": 30}
HIGH, NEVER = "p-high", "p-high-never"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    bin_dir = binary("kube", "kube-apiserver").parent.parent
    c = start_cluster(bin_dir, tmp_path_factory.mktemp("preemption"))
    try:
        for name, value in [*PRIORITIES.items(), (HIGH, 1000)]:
            c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": name}, "value": value})
        c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": NEVER},
                  "value": 1000, "preemptionPolicy": "Never"})
        yield c
    finally:
        c.stop()


def _node(name: str, gpus: int, zone: str, tainted: bool) -> dict[str, Any]:
    alloc = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi", GPU: str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "topology.kubernetes.io/zone": zone, "type": "kwok"}},
            "spec": {"taints": [TAINT] if tainted else []},
            "status": {"allocatable": alloc, "capacity": alloc}}


def _pod(ns: str, name: str, gpus: int, cpu: int, priority_class: str, *, node: str | None = None,
         tolerate: bool = True, zone: str | None = None) -> dict[str, Any]:
    requests = {"cpu": str(cpu), "memory": "1Gi"}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                        "resources": {"requests": requests | ({GPU: str(gpus)} if gpus else {}),
                                      "limits": {GPU: str(gpus)} if gpus else {}}}],
        "priorityClassName": priority_class,
        "terminationGracePeriodSeconds": 0,
    }
    if node:
        spec["nodeName"] = node
    if tolerate:
        spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    if zone:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": zone}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def scenario(r: random.Random, i: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Nodes, the running pods bound to them, and the preemptor."""
    ns = f"s{i}"
    nodes, running = [], []
    for j in range(r.randint(2, 4)):
        gpus = r.choice((1, 2, 4, 8))
        name = f"s{i}-n{j}"
        nodes.append(_node(name, gpus, r.choice(("us-west-2a", "us-west-2b")), r.random() < 0.25))
        free_gpus, free_cpu, k = gpus, 16, 0
        while free_gpus > 0 and r.random() < 0.9:
            g = min(free_gpus, r.choice((1, 1, 2, 4)))
            cpu = min(free_cpu, r.choice((1, 2, 4)))
            running.append(_pod(ns, f"{name}-r{k}", g, cpu, r.choice(list(PRIORITIES)), node=name))
            free_gpus, free_cpu, k = free_gpus - g, free_cpu - cpu, k + 1
        if r.random() < 0.3 and free_cpu >= 4:  # a CPU pod beside them
            running.append(_pod(ns, f"{name}-r{k}", 0, r.choice((2, 4, free_cpu)), r.choice(list(PRIORITIES)),
                                node=name))
    pre = _pod(ns, "preemptor", r.choice((1, 2, 4, 8)), r.choice((1, 4, 8, 14)),
               NEVER if r.random() < 0.1 else HIGH, tolerate=r.random() < 0.85,
               zone=r.choice(("us-west-2a", "us-west-2b")) if r.random() < 0.15 else None)
    return nodes, running, pre


def _kgpu(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": "", "NO_COLOR": "1"}
    return subprocess.run([*KGPU, *args], capture_output=True, text=True, timeout=180, check=False, env=env)


def _real_outcome(c: LocalCluster, ns: str) -> dict[str, Any] | None:
    pod = c.get(f"/api/v1/namespaces/{ns}/pods/preemptor")
    node = pod["spec"].get("nodeName")
    if node:
        return {"node": node}
    said = unscheduled_message(pod)
    if said and not pod.get("status", {}).get("nominatedNodeName"):
        return {"message": said}
    return None  # not looked at yet, or nominated and waiting for its victims to go


def _victim_rank(victims: list[dict[str, Any]]) -> tuple[int, int, int, list[str]]:
    prios = [PRIORITIES[v["spec"]["priorityClassName"]] for v in victims]
    return max(prios), sum(prios), len(prios), sorted({v["status"].get("startTime", "") for v in victims})


def _cleanup(c: LocalCluster, ns: str, nodes: list[dict[str, Any]]) -> None:
    for p in c.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
        with contextlib.suppress(OSError):  # gone already
            c.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}?gracePeriodSeconds=0")
    c.wait_for(f"the pods of {ns} to go", lambda: not c.get(f"/api/v1/namespaces/{ns}/pods")["items"])
    for n in nodes:
        c.request("DELETE", f"/api/v1/nodes/{n['metadata']['name']}")
    c.wait_for("the nodes to go", lambda: not c.get("/api/v1/nodes")["items"])


# What the default profile's score plugins read of a node here: NodeResourcesFit (LeastAllocated) and
# BalancedAllocation weigh cpu and memory only, TaintToleration counts PreferNoSchedule taints only (a
# NoSchedule taint filters, it does not score); an extended resource such as nvidia.com/gpu is not scored.
_SCORED = ("cpu", "memory")


def _same_load(a: str, b: str, nodes: dict[str, dict[str, Any]], before: dict[str, Any]) -> bool:
    """Nodes every score plugin rates the same for any pod: equal scored allocatable (cpu, memory) and
    PreferNoSchedule taints, and running pods with the same cpu and memory requests (the scenario's nodes
    differ in nothing else kube-scheduler scores)."""
    if a not in nodes or b not in nodes:
        return False

    def load(name: str) -> list[tuple[tuple[str, str], ...]]:
        return sorted(
            tuple(sorted((k, v) for k, v in c.get("resources", {}).get("requests", {}).items() if k in _SCORED))
            for p in before.values()
            if p["spec"].get("nodeName") == name
            for c in p["spec"]["containers"]
        )

    def scored(node: dict[str, Any]) -> tuple[Any, ...]:
        alloc = node["status"]["allocatable"]
        soft = sorted(str(t) for t in node["spec"].get("taints") or [] if t.get("effect") == "PreferNoSchedule")
        return tuple(alloc.get(k) for k in _SCORED), tuple(soft)

    return scored(nodes[a]) == scored(nodes[b]) and load(a) == load(b)


def _compare(
    where: str,
    mine: dict[str, Any],
    real: dict[str, Any],
    before: dict[str, Any],
    nodes: dict[str, dict[str, Any]] | None = None,
) -> str:
    """"" when kgpu says what kube-scheduler did, "tie" for a tie it breaks differently, else the difference."""
    ours = sorted(mine.get("preempted", []))
    if "message" in real:
        if mine["phase"] == "Scheduled":
            return f"{where}: kgpu schedules on {mine['node']} evicting {ours}; kube-scheduler: {real['message']}"
        if mine["reason"] != real["message"]:
            return f"{where}: message\n   kgpu:           {mine['reason']}\n   kube-scheduler: {real['message']}"
        return ""
    if mine["phase"] != "Scheduled":
        return (f"{where}: kgpu {mine['phase']} {mine['reason']!r}; kube-scheduler bound it to {real['node']} "
                f"evicting {real['victims']}")
    if (mine["node"], ours) == (real["node"], real["victims"]):
        return ""
    if ours and real["victims"] and mine["node"] != real["node"]:
        rank = [_victim_rank([before[v.split("/")[1]] for v in vs]) for vs in (ours, real["victims"])]
        if rank[0] == rank[1]:
            return "tie"
    if not ours and not real["victims"] and _same_load(mine["node"], real["node"], nodes or {}, before):
        return "tie"  # no eviction: kube-scheduler's selectHost picks at random among equal top scores
    return f"{where}: kgpu {mine['node']} evicting {ours}; kube-scheduler {real['node']} evicting {real['victims']}"


def run_scenario(c: LocalCluster, i: int, r: random.Random, tmp_path: Path) -> tuple[str, bool]:
    """(the verdict of ``_compare``, whether kube-scheduler evicted pods) for scenario ``i``."""
    nodes, running, pre = scenario(r, i)
    ns = f"s{i}"
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for node in nodes:
        c.create(node)
    names = {node["metadata"]["name"] for node in nodes}
    try:
        c.wait_for("kwok to make the nodes Ready", lambda: all(
            any(cond["type"] == "Ready" and cond["status"] == "True"
                for cond in x.get("status", {}).get("conditions") or [])
            for x in c.get("/api/v1/nodes")["items"] if x["metadata"]["name"] in names))
        for p in running:
            c.create(p)
        c.wait_for("the running pods to run", lambda: all(
            x.get("status", {}).get("phase") == "Running" for x in c.get(f"/api/v1/namespaces/{ns}/pods")["items"]))
        snap, workload = tmp_path / f"snap-{i}.json", tmp_path / f"pre-{i}.yaml"
        res = _kgpu("snapshot", "--kubeconfig", str(c.admin), "-o", str(snap))
        assert res.returncode == 0, res.stderr
        workload.write_text(yaml.safe_dump(pre))
        res = _kgpu("simulate", "--cluster", str(snap), "--workload", str(workload), "-o", "json")
        assert res.returncode in (0, 1), res.stderr
        ours = {f"{p['namespace']}/{p['name']}": p for p in json.loads(res.stdout)["pods"]}
        before = {p["metadata"]["name"]: p for p in c.get(f"/api/v1/namespaces/{ns}/pods")["items"]}

        c.create(pre)
        real = c.wait_for("the scheduler to bind or give up on the preemptor", lambda: _real_outcome(c, ns),
                          timeout=60)
        after = {p["metadata"]["name"] for p in c.get(f"/api/v1/namespaces/{ns}/pods")["items"]
                 if not p["metadata"].get("deletionTimestamp")}
        real["victims"] = sorted(f"{ns}/{name}" for name in before if name not in after)
        by_name = {n["metadata"]["name"]: n for n in nodes}
        verdict = _compare(f"scenario {i}", ours[f"{ns}/preemptor"], real, before, by_name)
        return verdict, bool(real["victims"])
    finally:
        _cleanup(c, ns, nodes)


def test_preemption_agrees_with_kube_scheduler(cluster: LocalCluster, tmp_path: Path) -> None:
    n = max(1, cases(300) // 10)
    r = random.Random(seed())
    verdicts: list[str] = []
    preempting = 0
    for i in range(n):
        verdict, evicted = run_scenario(cluster, i, r, tmp_path)
        verdicts.append(verdict)
        preempting += evicted
    wrong = [v for v in verdicts if v not in ("", "tie")]
    print(f"\npreemption against kube-scheduler: {n} scenarios, {preempting} with evictions; "
          f"{verdicts.count('')} agree, {verdicts.count('tie')} ties between equal candidates broken "
          f"differently, {len(wrong)} disagree")
    for w in wrong:
        print("  " + w)
    assert not wrong

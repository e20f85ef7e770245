"""The vectorised and memoised paths a cluster in trouble takes, against the plain ones they replace.

- Preemption's dry run for pods that PodTopologySpread or InterPodAffinity filter reads the pod's PreFilter
  state less the share of the pods it takes off a node, and keeps each node's answer per node version and
  the counts read there (``kgpu.sim.scheduler.plugins.victims``). The reference takes the pods off the node
  and out of the topology counters for real (``Scheduler`` state, ``Topology.unbound``), prepares the
  pod's filters again after every step, keeps nothing between pods, and finds the potential nodes node by
  node.
- Pods with PersistentVolumeClaims are filtered, ranked and explained over the scheduler's arrays and once
  per combination of the node labels the volume plugins read (``kgpu.sim.scheduler.plugins.volumeplace``).
  The reference is the scheduler without arrays: every node looked at one by one.

Both compare whole simulations (phase, node, message, preemptor, victims of every pod) on seeded random
clusters shaped like the ones in trouble: zones, hostname and zone spread, anti-affinity, pod affinity,
several priorities with low-priority pods on most nodes, claims bound in a zone or waiting for their
first consumer, pods that fit nowhere.
"""

from __future__ import annotations

import functools
import random
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from builders import node_dict, pod_dict
from kgpu.model.load import parse_documents
from kgpu.model.objects import Pod
from kgpu.model.predicates import ERR_POD_AFFINITY, ERR_SPREAD_LABEL
from kgpu.sim import simulate as simulate_module
from kgpu.sim.scheduler.plugins import defaultpreemption, victims
from kgpu.sim.scheduler.plugins.defaultpreemption import Preemption
from kgpu.sim.scheduler.plugins.topology import PodFilter
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler, dynamic_reasons, fits
from kgpu.sim.simulate import simulate

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
APPS = ["api", "web", "cache", "worker"]
NAMESPACES = ["shop", "search"]


def _owned(doc: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}
    ]
    return doc


def _term(rng: random.Random, app: str) -> dict[str, Any]:
    return {"topologyKey": rng.choice([ZONE, HOST]), "labelSelector": {"matchLabels": {"app": app}}}


def _nodes(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        name = f"ip-10-0-{i}-{rng.randint(10, 99)}.ec2.internal"
        labels = {ZONE: rng.choice(["us-east-1a", "us-east-1b", "us-east-1c"]), HOST: name}
        if rng.random() < 0.05:
            del labels[ZONE]
        out.append(
            node_dict(
                name,
                cpu=rng.choice(["2", "4", "8"]),
                memory=rng.choice(["8Gi", "16Gi"]),
                pods=rng.choice([6, 110]),
                labels=labels,
                unschedulable=rng.random() < 0.03,
            )
        )
    return out


def _running(rng: random.Random, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Low-priority batch pods on most nodes, and workload pods (labelled, some with anti-affinity), some of
    them below the pending pods' priority: victims the pending pods' constraints count."""
    out = []
    for k, node in enumerate(nodes):
        name = node["metadata"]["name"]
        for j in range(rng.randint(0, 5)):
            batch = rng.random() < 0.4
            app = "batch" if batch else rng.choice(APPS)
            doc = pod_dict(
                f"run-{k}-{j}",
                cpu=rng.choice(["250m", "500m", "1"]),
                memory=rng.choice(["512Mi", "1Gi"]),
                node_name=name,
                priority=rng.choice([-10, 100]) if batch else rng.choice([100, 1000, 10000]),
                namespace="batch" if batch else rng.choice(NAMESPACES),
                labels={"app": app},
                phase="Running",
                pod_anti_affinity=[_term(rng, app)] if not batch and rng.random() < 0.2 else None,
            )
            doc.setdefault("status", {})["startTime"] = f"2026-11-27T06:{rng.randint(0, 59):02d}:00Z"
            out.append(_owned(doc, "ReplicaSet", f"{app}-{k % 3}"))
    return out


def _pending(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Pods of a few workloads, each with its own constraints, interleaved as a queue holds them."""
    shapes = []
    for w in range(rng.randint(2, 5)):
        app = rng.choice(APPS)
        kw: dict[str, Any] = {"labels": {"app": app}, "namespace": rng.choice(NAMESPACES)}
        pick = rng.random()
        if pick < 0.4:
            kw["spread"] = [
                {
                    "maxSkew": rng.choice([1, 2]),
                    "topologyKey": rng.choice([ZONE, HOST]),
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        elif pick < 0.7:
            kw["pod_anti_affinity"] = [_term(rng, app)]
        elif pick < 0.8:
            kw["pod_affinity"] = [_term(rng, rng.choice(APPS))]
        if rng.random() < 0.3:
            kw.setdefault("spread", []).append(
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            )
        cpu = rng.choice(["500m", "1", "2", "3", "16"])
        shapes.append((f"wl-{w}-{app}", cpu, rng.choice([1000, 10000, 10000]), kw))
    out = []
    for i in range(count):
        name, cpu, prio, kw = rng.choice(shapes)
        out.append(
            _owned(pod_dict(f"{name}-{i}", cpu=cpu, memory="1Gi", priority=prio, **kw), "ReplicaSet", name)
        )
    return out


# --- preemption's dry run ------------------------------------------------------------------------------


def _victims_for_real(
    pod: Pod, st: NodeState, sched: Scheduler, filt: PodFilter | None = None, lower: Any = None
) -> tuple[list[Pod] | None, list[str]]:
    """SelectVictimsOnNode with the pods taken off the node and out of the topology counts for real, the
    pod's filters prepared again at every step, everything put back after."""
    prio = pod.priority
    potential = [p for p in st.pods if p.priority < prio]
    if not potential:
        return None, [victims.NO_VICTIMS]
    topology = sched.topology
    saved_pods, saved_ports = list(st.pods), list(st.ports)
    order = {id(p): i for i, p in enumerate(saved_pods)}
    off: list[Pod] = []

    def reasons() -> list[str]:
        why = dynamic_reasons(pod.spec, st)
        if why:
            return list(why)
        topo = topology.prepare(pod).reason(st.node)
        return [topo] if topo is not None else []

    def take(p: Pod) -> None:
        st.remove(p)
        topology.unbound(p, st)
        off.append(p)

    def put(p: Pod) -> None:
        st.add(p)
        topology.bound(p, st)
        off.remove(p)

    try:
        for p in potential:
            take(p)
        why = reasons()
        if why:
            return None, why
        potential.sort(key=lambda p: (-p.priority, victims.start(p), order[id(p)]))
        chosen = []
        for p in potential:
            put(p)
            if reasons():
                take(p)
                chosen.append(p)
        return chosen, []
    finally:
        for p in list(off):
            put(p)
        st.pods[:] = saved_pods
        st.ports[:] = saved_ports


def _potential_node_by_node(self: Preemption, pod: Pod, volumes: Any = None) -> tuple[set[int], PodFilter]:
    _, res, extra = self._potential(pod.spec)
    states = self.sched.states
    topo = self.sched.topology.prepare(pod)
    out = set(extra)
    for idx in res.nodes.tolist():
        st = states[idx]
        first_volumes = volumes is not None and volumes.reasons(st.node, ())  # a volume plugin rejects first
        if fits(pod.spec, st) and topo.reason(st.node) in (ERR_POD_AFFINITY, ERR_SPREAD_LABEL) and not first_volumes:
            continue
        out.add(idx)
    return out, topo


Doc = dict[str, Any]


def _rows(
    node_docs: list[Doc], running: list[Doc], pending: list[Doc], extra: Sequence[Doc] = ()
) -> list[tuple[Any, ...]]:
    result = simulate(
        parse_documents(node_docs + running + list(extra), "cluster"), parse_documents(pending, "work")
    )
    return [
        (p.pod.namespace, p.pod.name, p.phase, p.node, p.reason, p.preempted_by, tuple(p.victims))
        for p in result.placements
    ]


def test_exact_preemption_matches_taking_pods_off_for_real(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3301)
    cases = []
    for _ in range(40):
        node_docs = _nodes(rng, rng.randint(4, 16))
        cases.append((node_docs, _running(rng, node_docs), _pending(rng, rng.randint(10, 40))))
    fast = [_rows(*case) for case in cases]
    monkeypatch.setattr(defaultpreemption, "select_victims_exact", _victims_for_real)
    monkeypatch.setattr(Preemption, "_potential_exact", _potential_node_by_node)
    monkeypatch.setattr(
        victims.Trial, "signature", staticmethod(lambda filt, labels: object())
    )  # no node kept
    exact_preemptions = 0
    for n, case in enumerate(cases):
        slow = _rows(*case)
        assert fast[n] == slow, f"case {n}"
        exact_preemptions += sum(1 for row in slow if row[6] and not row[1].startswith("run-"))
    assert exact_preemptions > 20  # the generator does make pods on the exact path preempt


# --- pods with claims ----------------------------------------------------------------------------------


def _storage(
    rng: random.Random, nodes: list[dict[str, Any]], pending: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A WaitForFirstConsumer class; claims of their own for some pending pods (a StatefulSet's), some bound
    to a volume in a zone (some in a zone without nodes), some Available volumes; a claim two pods share."""
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": "gp3",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        }
    ]
    zones = sorted({n["metadata"]["labels"].get(ZONE) for n in nodes} - {None})
    for i, doc in enumerate(pending):
        if rng.random() < 0.5:
            continue
        ns = doc["metadata"]["namespace"]
        claim = "data-shared" if rng.random() < 0.1 else f"data-{doc['metadata']['name']}"
        doc["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        if any(o["metadata"]["name"] == claim and o["metadata"].get("namespace") == ns for o in out):
            continue
        pvc: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": ns},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "gp3",
                "resources": {"requests": {"storage": "10Gi"}},
            },
        }
        if zones and rng.random() < 0.4:
            pv = f"pvc-{i:04d}"
            pvc["spec"]["volumeName"] = pv
            pvc["status"] = {"phase": "Bound"}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": pv},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "capacity": {"storage": "10Gi"},
                        "storageClassName": "gp3",
                        "claimRef": {"kind": "PersistentVolumeClaim", "name": claim, "namespace": ns},
                        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{i:04d}"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "topology.ebs.csi.aws.com/zone",
                                                "operator": "In",
                                                "values": [rng.choice([*zones, "us-east-1d"])],
                                            }
                                        ]
                                    }
                                ]
                            }
                        },
                    },  # 1d: no node there
                    "status": {"phase": "Bound"},
                }
            )
        else:
            pvc["status"] = {"phase": "Pending"}
        out.append(pvc)
    for j in range(rng.randint(0, 3)):  # Available volumes a claim may bind where it lands
        if zones:
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"pv-free-{j}"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "capacity": {"storage": "20Gi"},
                        "storageClassName": "gp3",
                        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-free-{j}"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": ZONE, "operator": "In", "values": [rng.choice(zones)]}
                                        ]
                                    }
                                ]
                            }
                        },
                    },
                    "status": {"phase": "Available"},
                }
            )
    return out


def test_pods_with_claims_over_arrays_match_the_node_by_node_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3302)
    cases = []
    for _ in range(40):
        node_docs = _nodes(rng, rng.randint(4, 20))
        pending = _pending(rng, rng.randint(10, 40))
        storage = _storage(rng, node_docs, pending)
        cases.append((node_docs, _running(rng, node_docs), pending, storage))
    fast = [_rows(*case) for case in cases]
    monkeypatch.setattr(simulate_module, "Scheduler", functools.partial(Scheduler, array_after=sys.maxsize))
    placed = unplaced = 0
    for n, case in enumerate(cases):
        slow = _rows(*case)
        assert fast[n] == slow, f"case {n}"
        claims = {d["metadata"]["name"] for d in case[2] if d["spec"].get("volumes")}
        placed += sum(1 for row in slow if row[1] in claims and row[2] == "Scheduled")
        unplaced += sum(1 for row in slow if row[1] in claims and row[2] == "Unschedulable")
    assert placed > 50 and unplaced > 50  # both the placement and the message are compared

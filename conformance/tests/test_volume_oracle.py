"""kgpu simulate against the real kube-scheduler framework (the scheduler oracle) on clusters with storage:
PersistentVolumeClaims, PersistentVolumes and StorageClasses (``volume_scenarios``), so the real
VolumeRestrictions, VolumeBinding and VolumeZone plugins are the oracle for kgpu.sim.scheduler.plugins.volumebinding.

Held to the rules of ``test_scheduler_oracle``: the same pods schedulable, the same node for each, the same
FailedScheduling message word for word, its PostFilter part included.
Between placements the oracle binds the WaitForFirstConsumer claims of the pod it placed as the PV
controller and the provisioners would (see its main.go), so claims shared by later pods are bound.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from scenarios import generate
from test_scheduler_oracle import KNOWN, compare, oracle_evicted, run_kgpu, run_oracle
from volume_scenarios import add_volumes

from conftest import cases, seed


def test_volumes_agree_with_kube_scheduler(tmp_path: Path) -> None:
    n = cases(300)
    total: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    with_claims = 0
    known: Counter[str] = Counter()
    unexplained: list[str] = []
    for i in range(n):
        s = add_volumes(generate(seed() + i))
        d = tmp_path / f"s{i}"
        d.mkdir()
        cluster, pods = s.write(d)
        data = json.loads(cluster.read_text())
        data["items"] += s.storage
        cluster.write_text(json.dumps(data))
        theirs = run_oracle(cluster, pods)
        ours = run_kgpu(cluster, pods)
        if any(p["phase"] == "Preempted" for p in ours.values()) or oracle_evicted(theirs):
            s.features.add("preemption")
        claimed = {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
                   for p in s.pending if p["spec"].get("volumes")}
        with_claims += len(claimed & set(theirs))
        total["schedulable"] += len(theirs)
        total["placement"] += sum(1 for t in theirs.values() if t.get("node"))
        total["message"] += sum(1 for t in theirs.values() if not t.get("node"))
        for kind, detail in compare(s, ours, theirs):
            wrong[kind] += 1
            classes = [k for k in KNOWN if k in s.features]
            if classes:
                known[classes[0]] += 1
            else:
                unexplained.append(f"seed {s.seed} [{kind}] {detail}")
    print(f"\nkube-scheduler oracle with volumes: {n} scenarios, {total['schedulable']} pods, {with_claims} with claims")
    for kind in ("schedulable", "placement", "message"):
        agree = total[kind] - wrong[kind]
        rate = agree / total[kind] if total[kind] else 1.0
        print(f"    {kind:12s} {agree}/{total[kind]} agree ({rate:.2%})")
    for cls, count in known.most_common():
        print(f"  known difference: {KNOWN[cls]}: {count} pod(s)")
    for line in unexplained[:40]:
        print("  DISAGREE", line)
    assert with_claims, "no pod with claims was drawn"
    assert not unexplained, f"{len(unexplained)} unexplained disagreement(s) with kube-scheduler (printed above)"

"""kgpu's model of Kueue's scheduler (``kgpu.sim.queue.admission.settle``) against the real Kueue
(``kueue_rig``: minimalkueue from sigs.k8s.io/kueue v0.15.0 on the rig's kube-apiserver and etcd) on seeded
set-ups and workloads arriving and finishing (``kueue_scenarios``), compared step by step (``kueue_diff``).

``KGPU_CONFORMANCE_CASES / 5`` scenarios (default 60) from ``KGPU_CONFORMANCE_SEED`` on, run in lockstep
in one Kueue, up to 100 at a time. Prints the agreement per field (admitted, ClusterQueue, flavors, the
QuotaReserved message of a pending Workload, eviction) and every disagreement's class; fails on any
disagreement on admission, flavors or evictions outside the documented classes (``kueue_diff.KNOWN``,
explained in conformance/README.md), on more than 0.3 % of the messages (at least 2) outside them, and
when a field agrees in fewer than 99 %, counting as agreement a class where Kueue's own answer is random and
kgpu's is one it gives (``kueue_diff.RANDOM``: ``resource-order``). ``KGPU_KUEUE_RECORD=<dir>`` also writes
every step (the objects ``settle`` got and what Kueue reached) as ``case-<scenario>-<step>.json``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from kueue_diff import FIELDS, KNOWN, Case, Tally, compare, run
from kueue_rig import KueueRig
from kueue_scenarios import scenario

from conftest import cases, seed
from kgpu.sim.queue.admission import settle

SCENARIOS = max(1, cases(300) // 5)
SEED = seed()
BATCH = 100
FLOOR = 0.99
MESSAGE_SLACK = 0.003  # unexplained messages tolerated, of those compared


@pytest.fixture(scope="module")
def rig(kueue: KueueRig) -> KueueRig:
    return kueue


def test_known_classes_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "the real Kueue" in doc, "conformance/README.md has no paragraph on the Kueue differential"
    for name in KNOWN:
        assert f"`{name}`" in doc, f"known class {name} is not documented in conformance/README.md"


def test_differential(rig: KueueRig) -> None:
    started = time.monotonic()
    got: list[Case] = []
    for first in range(SEED, SEED + SCENARIOS, BATCH):
        got += run(rig, [scenario(n) for n in range(first, min(SEED + SCENARIOS, first + BATCH))])
    kueue_s = time.monotonic() - started
    record = os.environ.get("KGPU_KUEUE_RECORD")
    if record:
        Path(record).mkdir(parents=True, exist_ok=True)
        for case in got:
            case.dump(Path(record) / f"case-{case.scenario}-{case.step}.json")
    started = time.monotonic()
    tally = Tally()
    for case in got:
        compare(
            case, settle(case.objects, source=f"scenario {case.scenario} step {case.step}").workloads, tally
        )
    kgpu_s = time.monotonic() - started
    print(
        f"\nKueue differential, seed {SEED}, {SCENARIOS} scenarios, {len(got)} steps "
        f"(real Kueue {kueue_s:.0f}s, kgpu {kgpu_s:.1f}s):\n{tally.table()}"
    )
    unexplained = [d for d in tally.disagreements if d.klass == "unexplained"]
    for d in unexplained[:15]:
        print("  ", d)
    decisions = [d for d in unexplained if d.field != "message"]
    assert not decisions, f"{len(decisions)} unexplained disagreements on admission, flavors or evictions"
    # a pending Workload's words depend on when Kueue last tried it; a rare mix of the classes above that no
    # predicate names yet is printed and tolerated up to MESSAGE_SLACK of the messages, counted per Workload:
    # Kueue keeps an inadmissible Workload's message until it tries it again, so one such message repeats at
    # every later step of its scenario (seen at 314159265: one JobSet's, four steps)
    allowed = max(2, int(MESSAGE_SLACK * tally.total["message"]))
    workloads = {(d.case.scenario, d.workload) for d in unexplained}
    assert len(workloads) <= allowed, (
        f"{len(workloads)} Workloads with unexplained messages ({len(unexplained)} steps; at most {allowed})"
    )
    low = {f: f"{tally.within_kueue(f):.1%}" for f in FIELDS if tally.within_kueue(f) < FLOOR}
    assert not low, f"fields below {FLOOR:.0%}: {low}"

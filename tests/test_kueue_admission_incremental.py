"""The engine kept between events (kgpu.sim.queue.engine) answers as ``settle`` over the objects at each event.

Seeded random timelines (cohort trees with borrowing and lending limits, one or two flavors, BestEffortFIFO and
StrictFIFO, preemption policies, priorities, partial admission, running Workloads with runtimes, arrivals) are
replayed twice: once over the engine, which reads the objects once and skips runs of scheduling cycles
(kgpu.sim.queue.skip), and once calling ``settle`` from scratch at every event on the objects as dicts,
rewritten as Kueue writes them. At every event the Outcome of every Workload of the trees settled (admitted,
flavors, admitted counts, the QuotaReserved message, eviction, preemptor, order) must be the same, and so must
the starts. Workloads are shaped as Kueue's Job integration creates them (tests/test_kueue_model.py).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kgpu.model.kueue import read_kueue
from kgpu.sim.queue import runtimes as rt
from kgpu.sim.queue.admission import Outcome, Settled, settle
from kgpu.sim.queue.replay import replay
from kgpu.sim.queue.timeline import DictScenario, EngineScenario, Prepared
from test_kueue_admission import GPU
from test_kueue_model import (
    assignment,
    cluster_queue,
    cohort,
    container,
    flavor_quotas,
    group,
    local_queue,
    namespace,
    podset,
    quota,
    resource_flavor,
    workload,
)

T0 = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def _stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def timeline(seed: int, workloads: int = 30) -> tuple[list[dict[str, Any]], dict[tuple[str, str], float]]:
    """Objects and a runtime per Workload (keyed by namespace and job name)."""
    rng = random.Random(seed)
    flavors = ["a100", "h100"][: rng.choice([1, 2, 2])]
    objs: list[dict[str, Any]] = [resource_flavor(f) for f in flavors]
    nested = rng.random() < 0.4
    objs.append(cohort("org", "", group([GPU], *(flavor_quotas(f, quota(GPU, rng.choice([0, 4]))) for f in flavors))))
    if nested:
        objs += [cohort("research", "org"), cohort("prod", "org")]
    homes = ["org", "research", "prod"] if nested else ["org"]
    teams = [f"team-{i}" for i in range(rng.randint(2, 6))]
    for team in teams:
        home = rng.choice([*homes, *homes, ""])
        quotas = []
        for f in flavors:
            nominal = rng.choice([0, 4, 8, 8, 16])
            borrowing = rng.choice([None, None, 0, 4]) if home else None
            lending = rng.choice([None, None, nominal // 2]) if home else None
            quotas.append(
                flavor_quotas(
                    f,
                    quota("cpu", str(8 * nominal)),
                    quota("memory", f"{64 * nominal}Gi"),
                    quota(GPU, nominal, borrowing, lending),
                )
            )
        reclaim = rng.choice(["Never", "LowerPriority", "Any"])
        policy = rng.choice(["Never", "LowerPriority", "LowerPriority"]) if reclaim != "Never" else "Never"
        objs.append(
            cluster_queue(
                team,
                group(["cpu", "memory", GPU], *quotas),
                cohort=home or None,
                strategy=rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
                within=rng.choice(["Never", "LowerPriority", "LowerPriority", "LowerOrNewerEqualPriority"]),
                reclaim=reclaim,
                borrow_within={"policy": policy, "maxPriorityThreshold": 100} if policy != "Never" else None,
                fungibility={
                    "whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"]),
                    "whenCanPreempt": rng.choice(["TryNextFlavor", "TryNextFlavor", "MayStopSearch"]),
                },
            )
        )
        objs += [namespace(team), local_queue(team, "lq", team)]
    runtimes = {}
    for j in range(workloads):
        team = rng.choice(teams)
        gpus = rng.choice([1, 2, 4])
        pods = rng.choice([1, 1, 2, 4])
        created = rng.uniform(0, 3600) if rng.random() < 0.75 else rng.uniform(3600, 9000)
        ps = podset(
            pods,
            container(gpus, str(8 * gpus), f"{64 * gpus}Gi"),
            min_count=rng.choice([None, None, 1]) if pods > 1 else None,
        )
        status = None
        if created < 3600 and rng.random() < 0.3:
            flavor = rng.choice(flavors)
            status = {
                "admission": {"clusterQueue": team, "podSetAssignments": [assignment(flavor, pods, gpus)]},
                "conditions": [
                    {
                        "type": t,
                        "status": "True",
                        "reason": t,
                        "message": m,
                        "lastTransitionTime": _stamp(created + 30),
                    }
                    for t, m in (
                        ("QuotaReserved", f"Quota reserved in ClusterQueue {team}"),
                        ("Admitted", "The workload is admitted"),
                    )
                ],
            }
        name = f"train-{j}"
        objs.append(
            workload(
                team,
                name,
                "lq",
                ps,
                priority=rng.choice([0, 0, 100, 1000]),
                created=_stamp(created),
                status=status,
            )
        )
        runtimes[(team, name)] = float(rng.choice([300, 600, 900, 1800, 2400]) + j)
    return objs, runtimes


def _both(
    objs: list[dict[str, Any]], runtimes: dict[tuple[str, str], float]
) -> tuple[DictScenario, EngineScenario, list[Any], list[Any]]:
    rp = Prepared(objs, "timeline", NOW)
    rp.runtimes = rt.assign(rp.wls, {}, runtimes, {}, {})
    asked = {w.key for w in rp.wls if not w.finished and not (w.holding and w.created <= rp.now)}
    fresh: list[tuple[float, dict[tuple[str, str], Outcome]]] = []

    def from_scratch(objects: Any, source: str = "", *, now: float | None = None) -> Settled:
        s = settle(objects, source, now=now)
        fresh.append((now, s.workloads))
        return s

    kept: list[tuple[float, dict[tuple[str, str], Outcome]]] = []
    dicts = DictScenario(rp, False, from_scratch, 30 * 86400.0, 20_000)
    engine = EngineScenario(rp, read_kueue(rp.documents(), "timeline"), False, 30 * 86400.0, 20_000)
    engine.after_step = lambda t, trees: kept.append((t, engine.engine.outcomes(trees)))
    dicts.run(asked)
    engine.run(asked)
    return dicts, engine, fresh, kept


@pytest.mark.parametrize(("seed", "workloads"), [*((s, 30) for s in range(60)), *((s, 120) for s in range(60, 72))])
def test_the_engine_answers_as_settle_at_every_event(seed: int, workloads: int) -> None:
    objs, runtimes = timeline(seed, workloads)
    dicts, engine, fresh, kept = _both(objs, runtimes)
    assert len(fresh) == len(kept) > 0
    for step, ((t1, want), (t2, got)) in enumerate(zip(fresh, kept, strict=True)):
        assert t1 == t2, step
        assert got.keys() == want.keys(), step
        for key in want:
            assert got[key] == want[key], (step, key)
    assert engine.started == dicts.started
    assert engine.flavors == dicts.flavors and engine.counts == dicts.counts
    assert engine.preempted == dicts.preempted
    waiting = [k for k in engine.trees if k not in engine.started]
    assert [engine.note(k) for k in waiting] == [dicts.note(k) for k in waiting]


@pytest.mark.parametrize("seed", range(8))
def test_replay_over_the_engine_and_over_settle_agree(seed: int) -> None:
    """The public replay: kgpu's settle (the engine) and any other settle function (here settle itself,
    wrapped) give the same starts, flavors, admitted counts and notes."""
    objs, runtimes = timeline(100 + seed, workloads=40)
    ours = replay(objs, source="t", now=NOW, runtimes=runtimes)
    theirs = replay(objs, source="t", now=NOW, runtimes=runtimes, settle=lambda *a, **kw: settle(*a, **kw))
    assert {k: (s.earliest, s.flavors, s.counts, s.note, s.ahead) for k, s in ours.starts.items()} == {
        k: (s.earliest, s.flavors, s.counts, s.note, s.ahead) for k, s in theirs.starts.items()
    }
    assert ours.settles == theirs.settles and ours.events == theirs.events

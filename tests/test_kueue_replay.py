"""When will it start: the discrete-event replay over ``settle`` (kgpu.sim.queue.replay).

The event loop is tested with a small stand-in for ``settle`` (one GPU quota per ClusterQueue, BestEffortFIFO by
priority then creation, preemption of lower priorities within the ClusterQueue), so that each timeline's answer
follows from the timeline alone; the same timelines then run through kgpu's ``settle``
(kgpu.sim.queue.admission), which must give the same start times. Workloads are shaped as Kueue writes them
(kueue.x-k8s.io/v1beta2, owner references to their Jobs, conditions with transition times).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kgpu.errors import InputError
from kgpu.sim.queue.replay import Replay, replay

GPU = "nvidia.com/gpu"
T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def stamp(minutes: float) -> str:
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the stand-in for settle -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    admitted: bool
    cluster_queue: str | None
    flavors: dict[str, dict[str, str]]
    reason: str = ""
    message: str = ""
    evicted: bool = False
    evicted_reason: str = ""
    evicted_message: str = ""
    preempted_by: tuple[str, str] | None = None
    order: int | None = None


@dataclass(frozen=True)
class _Usage:
    cohort: str | None


@dataclass
class _Settled:
    workloads: dict[tuple[str, str], _Outcome]
    cluster_queues: dict[str, _Usage] = field(default_factory=dict)


def _gpus(wl: dict[str, Any]) -> int:
    total = 0
    for ps in wl["spec"]["podSets"]:
        for c in ps["template"]["spec"]["containers"]:
            total += int(c["resources"]["limits"].get(GPU, 0)) * ps["count"]
    return total


def _true(wl: dict[str, Any], kind: str) -> bool:
    return any(
        c["type"] == kind and c["status"] == "True" for c in wl.get("status", {}).get("conditions", [])
    )


def fake_settle(objects: list[dict[str, Any]], source: str = "", *, now: float | None = None) -> _Settled:
    """One flavor "gpu" per ClusterQueue with ``nominalQuota`` GPUs; admitted Workloads hold what their admission
    says; pending ones are admitted by (priority desc, creation, name) when they fit, else a lower-priority
    admitted one is preempted (the lowest, newest first) when that makes room."""
    quota = {
        o["metadata"]["name"]: int(
            o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
        )
        for o in objects
        if o["kind"] == "ClusterQueue"
    }
    cohorts = {
        o["metadata"]["name"]: o["spec"].get("cohortName") for o in objects if o["kind"] == "ClusterQueue"
    }
    lqs = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
        for o in objects
        if o["kind"] == "LocalQueue"
    }
    wls = [o for o in objects if o["kind"] == "Workload" and not _true(o, "Finished")]
    out: dict[tuple[str, str], _Outcome] = {}
    held: dict[str, list[dict[str, Any]]] = {cq: [] for cq in quota}
    used = dict.fromkeys(quota, 0)
    pending = []
    for wl in wls:
        key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
        cq = lqs.get((key[0], wl["spec"]["queueName"]))
        admission = wl.get("status", {}).get("admission")
        if admission and _true(wl, "QuotaReserved") and not _true(wl, "Evicted"):
            usage = sum(int(p["resourceUsage"].get(GPU, "0")) for p in admission["podSetAssignments"])
            used[admission["clusterQueue"]] += usage
            held[admission["clusterQueue"]].append(wl)
            flavors = {p["name"]: p["flavors"] for p in admission["podSetAssignments"]}
            out[key] = _Outcome(True, admission["clusterQueue"], flavors, "QuotaReserved")
        else:
            pending.append((-wl["spec"].get("priority", 0), wl["metadata"]["creationTimestamp"], key, wl, cq))
    order = 0
    for _, _, key, wl, cq in sorted(pending, key=lambda p: p[:3]):
        need = _gpus(wl)
        if cq is None:
            out[key] = _Outcome(False, None, {}, "Inadmissible", "LocalQueue doesn't exist")
            continue
        if used[cq] + need > quota[cq]:
            prio = wl["spec"].get("priority", 0)
            victims = sorted(
                (v for v in held[cq] if v["spec"].get("priority", 0) < prio),
                key=lambda v: (v["spec"].get("priority", 0), v["metadata"]["name"]),
            )
            freed, chosen = 0, []
            for v in victims:
                if used[cq] - freed + need <= quota[cq]:
                    break
                chosen.append(v)
                freed += _gpus(v)
            if used[cq] - freed + need > quota[cq]:
                out[key] = _Outcome(
                    False,
                    cq,
                    {},
                    "Pending",
                    f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} "
                    f"in flavor gpu, {used[cq] + need - quota[cq]} more needed",
                )
                continue
            for v in chosen:
                vkey = (v["metadata"]["namespace"], v["metadata"]["name"])
                held[cq].remove(v)
                used[cq] -= _gpus(v)
                out[vkey] = _Outcome(
                    False,
                    cq,
                    {},
                    "Preempted",
                    "Preempted to accommodate a workload",
                    True,
                    "Preempted",
                    "Preempted to accommodate a workload",
                    key,
                )
        used[cq] += need
        held[cq].append(wl)
        out[key] = _Outcome(
            True, cq, {ps["name"]: {GPU: "gpu"} for ps in wl["spec"]["podSets"]}, "QuotaReserved", order=order
        )
        order += 1
    return _Settled(out, {cq: _Usage(cohorts[cq]) for cq in quota})


# --- objects shaped as Kueue writes them ----------------------------------------------------------------------


def queues(
    gpus: int = 4, *, teams: tuple[str, ...] = ("team-a",), per_cohort: int = 0
) -> list[dict[str, Any]]:
    """A ClusterQueue and a LocalQueue per team, in cohort "gpu-teams" (or cohorts of ``per_cohort`` teams)."""
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {},
        }
    ]
    for i, team in enumerate(teams):
        cohort = f"gpu-teams-{i // per_cohort}" if per_cohort else "gpu-teams"
        out.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": team},
                "spec": {
                    "cohortName": cohort,
                    "namespaceSelector": {},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
                        }
                    ],
                },
            }
        )
        out.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": team, "namespace": team},
                "spec": {"clusterQueue": team},
            }
        )
    return out


def workload(
    name: str,
    gpus: int,
    created: float,
    *,
    team: str = "team-a",
    admitted: float | None = None,
    finished: float | None = None,
    priority: int = 0,
    max_exec: int | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    """A Job's Workload (PodSet "main" of ``gpus`` one-GPU pods); admitted/finished: minutes after T0."""
    job = owner or name
    wl: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-1a2b3",
            "namespace": team,
            "creationTimestamp": stamp(created),
            "labels": {"kueue.x-k8s.io/job-uid": f"uid-{job}"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"uid-{job}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": team,
            "priority": priority,
            "active": True,
            "podSets": [
                {
                    "name": "main",
                    "count": gpus,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "pytorch/pytorch:latest",
                                    "resources": {"limits": {GPU: "1"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    if max_exec is not None:
        wl["spec"]["maximumExecutionTimeSeconds"] = max_exec
    conditions = []
    if admitted is not None:
        conditions += [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {team}",
                "lastTransitionTime": stamp(admitted),
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": stamp(admitted),
            },
        ]
        wl["status"] = {
            "admission": {
                "clusterQueue": team,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": gpus,
                        "flavors": {GPU: "gpu"},
                        "resourceUsage": {GPU: str(gpus)},
                    }
                ],
            }
        }
    if finished is not None:
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Job finished successfully",
                "lastTransitionTime": stamp(finished),
            }
        )
    if conditions:
        wl.setdefault("status", {})["conditions"] = conditions
    return wl


def key(name: str, team: str = "team-a") -> tuple[str, str]:
    return (team, f"job-{name}-1a2b3")


def minutes(when: datetime | None) -> float | None:
    return None if when is None else (when - T0).total_seconds() / 60


def settles() -> list[Any]:
    """The stand-in, then kgpu's settle: every timeline must give the same answer with both."""
    from kgpu.sim.queue.admission import settle

    return [fake_settle, settle]


# --- timelines -------------------------------------------------------------------------------------------------


def exact_timeline() -> list[dict[str, Any]]:
    """4 GPUs. a (4) runs since 10:00 for 60 min; b (2), c (2), d (4) wait; e (2) arrives at 11:05."""
    return [
        *queues(4),
        workload("a", 4, 0, admitted=0),
        workload("b", 2, 30),
        workload("c", 2, 31),
        workload("d", 4, 32),
        workload("e", 2, 65),
    ]


EXACT_RUNTIMES = {key("a"): 3600, key("b"): 1800, ("team-a", "c"): 600, key("d"): 600, key("e"): 60}


@pytest.mark.parametrize("settle", settles())
def test_declared_runtimes_give_exact_start_times(settle: Any) -> None:
    """a ends 11:00: b and c start; e arrives 11:05 and waits; c ends 11:10: d (4) does not fit beside b, e (2)
    does (BestEffortFIFO); e ends 11:11, b 11:30: d starts. c's runtime is given by its Job's name."""
    r = replay(exact_timeline(), source="timeline", now=at(45), runtimes=EXACT_RUNTIMES, settle=settle)
    got = {k[1]: (minutes(s.earliest), minutes(s.latest)) for k, s in r.starts.items()}
    assert got == {
        "job-a-1a2b3": (0, 0),
        "job-b-1a2b3": (60, 60),
        "job-c-1a2b3": (60, 60),
        "job-e-1a2b3": (70, 70),
        "job-d-1a2b3": (90, 90),
    }
    assert r.starts[key("a")].running and not r.starts[key("d")].running
    assert r.starts[key("d")].ahead == (key("b"), key("c"), key("e"))
    assert r.starts[key("d")].flavors == {"main": {GPU: "gpu"}}
    assert r.starts[key("c")].runtime.source == "given"
    assert (r.estimated, r.limit, r.runs) == (False, None, 1)
    assert r.events == 5  # a, c, e, b finish; e arrives


def test_replay_is_deterministic_and_leaves_the_input_alone() -> None:
    objects = exact_timeline()
    before = repr(objects)
    first = replay(objects, source="t", now=at(45), runtimes=EXACT_RUNTIMES, settle=fake_settle)
    second = replay(objects, source="t", now=at(45), runtimes=EXACT_RUNTIMES, settle=fake_settle)
    assert repr(objects) == before
    assert first.starts == second.starts and first.events == second.events


@pytest.mark.parametrize("settle", settles())
def test_declared_limits_are_the_runtimes(settle: Any) -> None:
    """Kueue's maximumExecutionTimeSeconds (less what it ran) and a Job's activeDeadlineSeconds end a running
    Workload; the shorter wins; a queue's given runtime applies to the Workloads of that LocalQueue."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "b", "namespace": "team-a", "uid": "uid-b"},
        "spec": {
            "activeDeadlineSeconds": 1200,
            "suspend": False,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    objects = [
        *queues(4),
        job,
        workload("a", 2, 0, admitted=0, max_exec=3000),  # ends 10:50
        workload("b", 2, 0, admitted=5, max_exec=7200),  # activeDeadlineSeconds: ends 10:25
        workload("c", 4, 10),
    ]
    r = replay(objects, source="t", now=at(20), settle=settle)
    assert r.starts[key("a")].runtime.source == "maximumExecutionTimeSeconds"
    assert r.starts[key("b")].runtime.source == "activeDeadlineSeconds"
    assert minutes(r.starts[key("c")].earliest) == 50
    # a value given for the job, or for its LocalQueue, wins over the declared limits
    r = replay(objects, source="t", now=at(20), runtimes={key("a"): 1800}, settle=settle)
    assert minutes(r.starts[key("c")].earliest) == 30
    # 5 minutes each: both are past their runtime at 10:20, so they end now
    r = replay(objects, source="t", now=at(20), queue_runtimes={("team-a", "team-a"): 300}, settle=settle)
    assert r.starts[key("a")].runtime.source == "queue"
    assert minutes(r.starts[key("c")].earliest) == 20


@pytest.mark.parametrize("settle", settles())
def test_estimated_runtimes_give_a_range(settle: Any) -> None:
    """Three finished Workloads of the queue ran 10, 20 and 50 minutes: a (running since 10:00) ends between 10:10
    and 10:50, so b starts in that range; the spread is reported."""
    objects = [
        *queues(4),
        workload("old1", 1, -200, admitted=-200, finished=-190),
        workload("old2", 1, -150, admitted=-150, finished=-130),
        workload("old3", 1, -100, admitted=-100, finished=-50),
        workload("a", 4, 0, admitted=0),
        workload("b", 4, 2),
    ]
    r = replay(objects, source="t", now=at(5), settle=settle)
    b = r.starts[key("b")]
    assert (minutes(b.earliest), minutes(b.latest)) == (10, 50)
    assert (r.estimated, r.runs) == (True, 2)
    assert r.starts[key("a")].runtime.source == "estimate"
    spread = r.spreads["team-a/team-a"]
    assert (spread.low, spread.median, spread.high, spread.samples) == (600, 1200, 3000, 3)


@pytest.mark.parametrize("settle", settles())
def test_no_runtime_known_means_no_start_time(settle: Any) -> None:
    objects = [*queues(4), workload("a", 4, 0, admitted=0), workload("b", 1, 2)]
    r = replay(objects, source="t", now=at(5), settle=settle)
    b = r.starts[key("b")]
    assert b.earliest is None and b.latest is None
    assert r.starts[key("a")].runtime.source == "unknown"
    assert "running without a known runtime: team-a/job-a-1a2b3" in b.note
    assert "insufficient unused quota" in b.note


def test_the_horizon_and_the_event_limit_are_named() -> None:
    objects = [*queues(4), workload("a", 4, 0, admitted=0), workload("b", 4, 2)]
    r = replay(objects, source="t", now=at(5), runtimes={key("a"): 40 * 86400}, settle=fake_settle)
    assert r.starts[key("b")].earliest is None
    assert r.limit is not None and r.limit.startswith("horizon")
    assert "horizon" in r.starts[key("b")].note
    many = [*queues(1), *(workload(f"w{i}", 1, 0) for i in range(6))]
    r = replay(
        many,
        source="t",
        now=at(0),
        queue_runtimes={("team-a", "team-a"): 60},
        max_events=2,
        settle=fake_settle,
    )
    assert r.limit == "event limit: 2 events replayed"
    assert sum(s.earliest is not None for s in r.starts.values()) == 3


def test_a_preempted_workload_starts_again_later() -> None:
    """low (priority 0) runs; high (priority 100, 4 GPUs) arrives at 10:10 and preempts it; high runs 30 min, then
    low is admitted again and its start is the new one."""
    objects = [*queues(4), workload("low", 4, 0, admitted=0), workload("high", 4, 10, priority=100)]
    r = replay(
        objects,
        source="t",
        now=at(5),
        targets=[key("high"), key("low")],
        runtimes={key("low"): 3600, key("high"): 1800},
        settle=fake_settle,
    )
    assert minutes(r.starts[key("high")].earliest) == 10
    assert minutes(r.starts[key("low")].earliest) == 40


def test_bad_inputs_name_the_field() -> None:
    objects = exact_timeline()
    with pytest.raises(
        InputError, match="runtime of team-a/job-b-1a2b3: a runtime must be a number of seconds"
    ):
        replay(objects, source="t", now=at(45), runtimes={key("b"): -5}, settle=fake_settle)
    with pytest.raises(InputError, match="no Workload team-a/nope"):
        replay(objects, source="t", now=at(45), targets=[("team-a", "nope")], settle=fake_settle)
    with pytest.raises(InputError, match="time zone"):
        replay(objects, source="t", now=datetime(2026, 11, 28), settle=fake_settle)
    undated = [*queues(4), {**workload("x", 1, 0), "metadata": {"name": "x", "namespace": "team-a"}}]
    with pytest.raises(InputError, match="no timestamp in the input"):
        replay(undated, source="t", settle=fake_settle)
    broken = exact_timeline()
    broken[-1]["metadata"]["creationTimestamp"] = "yesterday"
    with pytest.raises(InputError, match=r"Workload team-a/job-e-1a2b3: metadata.creationTimestamp"):
        replay(broken, source="t", now=at(45), settle=fake_settle)


def test_now_defaults_to_the_newest_timestamp() -> None:
    r = replay(exact_timeline(), source="t", runtimes=EXACT_RUNTIMES, settle=fake_settle)
    assert r.now == at(65)  # e's creation


def _many(n: int, cqs: int, per_cohort: int) -> tuple[list[dict[str, Any]], dict[tuple[str, str], float]]:
    """``n`` Workloads of 1-4 GPUs over ``cqs`` ClusterQueues of 8 GPUs, arriving every 6 s, each with its own
    runtime (5 to 20 minutes), so that nearly every event is at its own instant."""
    teams = tuple(f"team-{i}" for i in range(cqs))
    objects = queues(8, teams=teams, per_cohort=per_cohort)
    runtimes = {}
    for i in range(n):
        team = teams[i % cqs]
        objects.append(workload(f"w{i}", 1 + i % 4, i / 10, team=team, admitted=0 if i < cqs * 2 else None))
        runtimes[key(f"w{i}", team)] = 300.0 + (i * 37) % 900
    return objects, runtimes


def test_replay_cost_is_printed() -> None:
    """Measures, never asserts: 400 Workloads over 20 ClusterQueues in 5 cohorts, with kgpu's settle; the
    replay's time is printed beside one settle over all of them."""
    from kgpu.sim.queue.admission import settle

    objects, runtimes = _many(400, 20, 4)
    begin = time.perf_counter()
    one = settle(objects, "bench")
    single = time.perf_counter() - begin
    r: Replay = replay(objects, source="bench", runtimes=runtimes, settle=settle)
    started = sum(s.earliest is not None for s in r.starts.values())
    print(
        f"\nreplay: {len(one.workloads)} Workloads, {r.events} events, {r.settles} settles in {r.seconds:.2f} s; "
        f"one settle over all of them {single * 1000:.0f} ms (replay = {r.seconds / single:.0f} settles); "
        f"{started} starts"
    )


def test_the_example_two_team_setup_admits_seed_jobs() -> None:
    """examples/queue: seed 000's training Job (team-a, production) and seed 004's RayJob (team-b, research) become
    Workloads, both are admitted at once on spot g5 GPUs, and the RayJob runs at most its activeDeadlineSeconds."""
    from pathlib import Path

    from kgpu.model.kueue_jobs import read_jobs
    from kgpu.model.safeyaml import iter_yaml
    from kgpu.sim.queue.admission import settle

    root = Path(__file__).resolve().parent.parent / "examples" / "queue"
    docs = [d for f in ("kueue.yaml", "jobs.yaml") for d in iter_yaml((root / f).read_bytes(), f) if d]
    now = at(120)
    jobs = read_jobs(docs, source="examples/queue", created=now)
    assert jobs.skipped == []
    names = {w["metadata"]["name"]: w for w in jobs.workloads}
    assert sorted(names) == ["job-pytorch-training-adb98", "rayjob-ray-gpu-training-61476"]
    ray = names["rayjob-ray-gpu-training-61476"]
    assert [(p["name"], p["count"]) for p in ray["spec"]["podSets"]] == [
        ("head", 1),
        ("gpu-group", 2),
        ("submitter", 1),
    ]
    assert (ray["spec"]["priority"], ray["spec"]["priorityClassRef"]["name"]) == (100, "research")
    r = replay([*docs, *jobs.workloads], source="examples/queue", now=now, settle=settle)
    train = r.starts[("team-a", "job-pytorch-training-adb98")]
    rayjob = r.starts[("team-b", "rayjob-ray-gpu-training-61476")]
    assert train.earliest == now and rayjob.earliest == now
    assert train.flavors == {"main": {GPU: "g5-spot"}}
    assert rayjob.flavors["gpu-group"][GPU] == "g5-spot"
    assert (rayjob.runtime.source, rayjob.runtime.low) == ("activeDeadlineSeconds", 7200.0)


def test_a_jobs_pod_index_label_is_not_a_topology_request() -> None:
    """Kueue's Job integration writes topologyRequest.podIndexLabel on every PodSet; only required, preferred,
    unconstrained or slice fields ask for topology-aware scheduling (IsExplicitlyRequestingTAS), so the
    example's Workloads draw no "not modelled" warning, while one with `required` does."""
    import copy
    from pathlib import Path

    from kgpu.model.kueue_jobs import read_jobs
    from kgpu.model.safeyaml import iter_yaml
    from kgpu.sim.queue.admission import settle

    root = Path(__file__).resolve().parent.parent / "examples" / "queue"
    docs = [d for f in ("kueue.yaml", "jobs.yaml") for d in iter_yaml((root / f).read_bytes(), f) if d]
    workloads = read_jobs(docs, source="examples/queue", created=at(0)).workloads
    assert any("podIndexLabel" in (ps.get("topologyRequest") or {}) for w in workloads for ps in w["spec"]["podSets"])
    assert not [w for w in settle([*docs, *workloads], source="x").warnings if "topology" in w]
    tas = copy.deepcopy(workloads)
    tas[0]["spec"]["podSets"][0]["topologyRequest"]["required"] = "topology.kubernetes.io/zone"
    (warning,) = [w for w in settle([*docs, *tas], source="x").warnings if "topology" in w]
    assert "1 Workload(s) request a topology" in warning

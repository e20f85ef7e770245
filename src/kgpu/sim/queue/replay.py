"""When will it start: a discrete-event replay of Kueue's queue from a snapshot's state.

The replay moves the clock from event to event and lets Kueue's scheduler decide each time, as Kueue's own
performance runner does with a real cluster (sigs.k8s.io/kueue v0.15.0 test/performance/scheduler: workloads
created at their arrival, finished by the runner after their declared runtime)::

    t = now
    loop: settle the Workloads present at t (kgpu.sim.queue.admission.settle's steady state)
          record the Workloads newly admitted (start t, flavor and admitted pods per PodSet) and those preempted
          advance t to the next event: a running Workload's end (start + runtime) or a Workload's creation
          apply every event at t: finished Workloads leave (a Finished Workload holds nothing, so it is
          dropped rather than kept with its condition), arriving ones join
    until every Workload asked about has started, or nothing is left to happen, or a limit is hit

Admission in one cohort tree never depends on another (usage, borrowing and preemption stay inside a tree), so
after the first settle an event settles only the trees of the Workloads that finished or arrived, and none at all
when those trees have nothing pending; all events of one instant are applied together (kgpu.sim.queue.timeline
has the loop). With kgpu's own ``settle`` (the default), one engine (kgpu.sim.queue.engine) is read and built
once and moved by the events, and runs of scheduling cycles that only set heads aside are decided at once
(kgpu.sim.queue.skip); each event's answer is the one ``settle`` gives over the objects as they then are. Any
other ``settle`` function is called on the objects as dicts, rewritten after each event as Kueue writes them.

Runtimes (kgpu.sim.queue.runtimes): given per job or per LocalQueue, else the declared limits (Kueue's maximum
execution time, ``activeDeadlineSeconds``), which the replay takes as the runtime, else an estimate from the
snapshot's finished Workloads. With estimates the replay runs twice, every estimated Workload at its shortest
(optimistic) and at its longest (pessimistic), and a start is the range between them. A running Workload with no
runtime at all holds its quota to the end of the replay, and who waits for it gets no start time. A running
Workload past its runtime ends at ``now``.

Cost (benchmarks/queue_bench.py; CPU seconds on 2 shared cores): reading the objects once, then per event
about the number of Workload shapes (namespace, priority, PodSets) queued in the touched tree whose
ClusterQueue has quota for a flavor-resource the event changed (kgpu.sim.queue.versions keeps the others'
nominations), not the number of Workloads. 2,000 Workloads over 30 ClusterQueues in one cohort tree on a
5,000-node snapshot (2,297 events, 1,887 started) replay in 35 s, about 150 times the json.load of the file
(69 s before nominations were kept across events; settling the objects afresh at every event took 170 s on a
smaller set-up). Most of it is the preemption and flavor checks of the shapes the cycles set aside, redone
after each event that changes their flavors' usage, as Kueue itself retries them.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kgpu.errors import InputError
from kgpu.model.kueue import read_kueue
from kgpu.sim.queue import runtimes as rt
from kgpu.sim.queue.runtimes import Key, Runtime, Spread
from kgpu.sim.queue.timeline import DictScenario, EngineScenario, Prepared, Scenario, SettleFn

DEFAULT_HORIZON = timedelta(days=30)
DEFAULT_MAX_EVENTS = 20_000  # every event may cost one settle: bounded, and named when it ends the replay
MAX_AHEAD = 100  # the Workloads ahead listed per start (all are counted)


@dataclass(frozen=True, slots=True)
class Start:
    workload: Key
    cluster_queue: str | None
    earliest: datetime | None  # None: no start within the replay (see note)
    latest: datetime | None
    running: bool  # admitted before now: earliest is when it was admitted
    flavors: dict[str, dict[str, str]]
    ahead: tuple[
        Key, ...
    ]  # admitted in the replay before it, in its ClusterQueue or cohort tree (the last 100)
    runtime: Runtime
    note: str = ""  # why it has no start time, or Kueue's last pending message
    ahead_count: int = 0  # all of them
    counts: dict[str, int] = field(
        default_factory=dict
    )  # pods admitted per PodSet (fewer under partial admission)


@dataclass(slots=True)
class Replay:
    now: datetime
    starts: dict[Key, Start]
    estimated: bool  # some runtime is an estimate: starts are ranges
    events: int  # events replayed (finishes and arrivals), in the pessimistic run when there are two
    settles: int
    limit: str | None  # the limit that ended the replay, if one did
    spreads: dict[str, Spread] = field(default_factory=dict)  # "ns/queue" or "all" -> spread used
    seconds: float = 0.0
    runs: int = 1


def replay(
    objects: Sequence[Any],
    *,
    source: str,
    now: datetime | None = None,
    runtimes: Mapping[Key, float | timedelta] | None = None,
    queue_runtimes: Mapping[Key, float | timedelta] | None = None,
    targets: Iterable[Key] | None = None,
    horizon: timedelta = DEFAULT_HORIZON,
    max_events: int = DEFAULT_MAX_EVENTS,
    settle: SettleFn | None = None,
) -> Replay:
    """Replay Kueue's queue from ``now`` and say when each Workload of interest starts (module docstring).

    ``runtimes``: seconds per (namespace, Workload or owner job name); ``queue_runtimes``: per (namespace,
    LocalQueue); ``targets``: the Workloads asked about (default: every one pending at now or arriving later)."""
    started_at = time.perf_counter()
    own = importlib.import_module("kgpu.sim.queue.admission").settle
    rp = Prepared(objects, source, now)
    spreads = rt.spreads(rp.wls)
    rp.runtimes = rt.assign(rp.wls, spreads, runtimes or {}, queue_runtimes or {}, rt.deadlines(rp.static))
    asked = (
        set(targets)
        if targets is not None
        else {w.key for w in rp.wls if not w.finished and not (w.holding and w.created <= rp.now)}
    )
    unknown = asked - rp.by_key.keys()
    if unknown:
        raise InputError(f"no Workload {'/'.join(min(unknown))} in the input", where=source)
    estimated = any(rp.runtimes[w.key].source == "estimate" for w in rp.wls if not w.finished)
    runs = scenarios(
        rp, settle if settle is not own else None, estimated, horizon.total_seconds(), max_events
    )
    for run in runs:
        run.run(asked)
    first, last = runs[0], runs[-1]
    # who is ahead: the Workloads started before, in the same cohort tree (or ClusterQueue, without a cohort)
    lines: dict[str, list[Key]] = {}
    position: dict[Key, int] = {}
    for k, _ in sorted(first.started.items(), key=lambda kv: kv[1]):
        line = lines.setdefault(first.tree(k), [])
        position[k] = len(line)
        line.append(k)
    starts = {}
    for key in sorted(asked | rp.running):
        w = rp.by_key[key]
        if key in rp.running and key not in first.preempted and key not in last.preempted:
            at = w.admitted_at if w.admitted_at is not None else rp.now
            adm = (w.doc.get("status") or {}).get("admission") or {}
            flavors = {
                str(p.get("name", "main")): dict(p.get("flavors") or {})
                for p in adm.get("podSetAssignments") or ()
            }
            counts = {
                str(p.get("name", "main")): p["count"]
                for p in adm.get("podSetAssignments") or ()
                if isinstance(p.get("count"), int)
            }
            when = datetime.fromtimestamp(at, UTC)
            starts[key] = Start(
                key, adm.get("clusterQueue"), when, when, True, flavors, (), rp.runtimes[key], counts=counts
            )
            continue
        a, b = first.started.get(key), last.started.get(key)
        cq = first.cq.get(key)
        ahead: tuple[Key, ...] = ()
        if a is not None:
            before = lines[first.tree(key)][: position[key]]
            ahead = tuple(before[-MAX_AHEAD:])
        note = ""
        if a is None or b is None:
            note = last.note(key) or first.note(key) or ""
            blocked = sorted(k for k in last.holding if not rp.runtimes[k].known)
            reason = last.limit or "nothing left to happen in the replay"
            if blocked:
                reason += f"; running without a known runtime: {', '.join('/'.join(k) for k in blocked[:5])}"
            note = f"{note} ({reason})" if note else reason
        lo = datetime.fromtimestamp(a[0], UTC) if a is not None else None
        hi = datetime.fromtimestamp(b[0], UTC) if b is not None else None
        if lo is not None and hi is not None and hi < lo:
            lo, hi = hi, lo
        starts[key] = Start(
            key,
            cq,
            lo,
            hi,
            False,
            first.flavors.get(key, {}) if a is not None else {},
            ahead,
            rp.runtimes[key],
            note,
            position.get(key, 0),
            first.counts.get(key, {}) if a is not None else {},
        )
    return Replay(
        now=datetime.fromtimestamp(rp.now, UTC),
        starts=starts,
        estimated=estimated,
        events=last.events,
        settles=sum(r.settles for r in runs),
        limit=last.limit or first.limit,
        spreads=spreads if estimated else {},
        seconds=time.perf_counter() - started_at,
        runs=len(runs),
    )


def scenarios(
    rp: Prepared, settle: SettleFn | None, estimated: bool, horizon: float, max_events: int
) -> list[Scenario]:
    """The runs of the replay: optimistic, and pessimistic with estimates; on the engine unless ``settle``."""
    ends = (False, True) if estimated else (False,)
    if settle is not None:
        return [DictScenario(rp, end, settle, horizon, max_events) for end in ends]
    k = read_kueue(rp.documents(), rp.source)
    return [EngineScenario(rp, k, end, horizon, max_events) for end in ends]


__all__ = ["Replay", "Runtime", "Spread", "Start", "replay"]

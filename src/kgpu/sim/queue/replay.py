"""When will it start: a discrete-event replay of Kueue's queue from a snapshot's state.

Built only on ``kgpu.sim.queue.admission.settle`` (the steady state Kueue's scheduler reaches over a set of
objects): the replay moves the clock from event to event and lets ``settle`` decide each time, as Kueue's own
performance runner does with a real cluster (sigs.k8s.io/kueue v0.15.0 test/performance/scheduler: workloads
created at their arrival, finished by the runner after their declared runtime)::

    t = now
    loop: settle(the objects, the Workloads present at t) at t
          record the Workloads newly admitted (start t, flavor per PodSet) and those preempted
          advance t to the next event: a running Workload's end (start + runtime) or a Workload's creation
          apply every event at t: finished Workloads leave (a Finished Workload holds nothing, so it is
          dropped rather than kept with its condition), arriving ones join
    until every Workload asked about has started, or nothing is left to happen, or a limit is hit

A Workload admitted in the replay is written into the replay's copy as Kueue writes it
(``status.admission.podSetAssignments`` with the flavors and the PodSet's total usage, conditions QuotaReserved and
Admitted True, pkg/workload/workload.go ``SetQuotaReservation``), so the next ``settle`` sees it holding quota;
a preempted one loses its admission and carries ``Evicted``, as the workload controller leaves it.

Runtimes (kgpu.sim.queue.runtimes): given per job or per LocalQueue, else the declared limits (Kueue's maximum
execution time, ``activeDeadlineSeconds``), which the replay takes as the runtime, else an estimate from the
snapshot's finished Workloads. With estimates the replay runs twice, every estimated Workload at its shortest
(optimistic) and at its longest (pessimistic), and a start is the range between them. A running Workload with no
runtime at all holds its quota to the end of the replay, and who waits for it gets no start time. A running
Workload past its runtime ends at ``now``.

Cost: ``settle`` is stateless, so every event re-reads the Workloads it is given. The replay gives it as few as
is exact: admission in one cohort tree never depends on another (usage, borrowing and preemption stay inside a
tree), so after the first, full ``settle`` an event replays only the trees of the Workloads that finished or
arrived, and none at all when those trees have nothing pending; finished Workloads are dropped, future ones held
back, and all events of one instant are applied together. Measured (2 shared cores): 2,000 Workloads over 20
ClusterQueues, one runtime each, about 1,800 distinct instants: 35 s in cohorts of 4 queues (265 times one full
settle of 134 ms), 170 s in one cohort of 20; 400 Workloads: about 1 s. The cost is O(events x Workloads of the
touched tree); an incremental ``settle`` (keeping what it read between events) would remove the re-reading.
Deterministic: at one instant the finishes are applied first, then the arrivals in name order.
"""

from __future__ import annotations

import heapq
import importlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kgpu.errors import InputError
from kgpu.model.kueue_fields import Obj
from kgpu.model.kueue_resources import quantity_string
from kgpu.model.kueue_workload import read_workload
from kgpu.sim.queue import runtimes as rt
from kgpu.sim.queue.runtimes import Entry, Key, Runtime, Spread

KUEUE_GROUP = "kueue.x-k8s.io"
DEFAULT_HORIZON = timedelta(days=30)
DEFAULT_MAX_EVENTS = 20_000  # every event may cost one settle: bounded, and named when it ends the replay
MAX_AHEAD = 100  # the Workloads ahead listed per start (all are counted)


class _Outcome(Protocol):  # kgpu.sim.queue.admission.Outcome, read only
    @property
    def admitted(self) -> bool: ...
    @property
    def cluster_queue(self) -> str | None: ...
    @property
    def flavors(self) -> Mapping[str, Mapping[str, str]]: ...
    @property
    def message(self) -> str: ...
    @property
    def evicted(self) -> bool: ...
    @property
    def evicted_reason(self) -> str: ...
    @property
    def evicted_message(self) -> str: ...
    @property
    def order(self) -> int | None: ...


class _QueueUsage(Protocol):
    @property
    def cohort(self) -> str | None: ...


class _Settled(Protocol):
    @property
    def workloads(self) -> Mapping[tuple[str, str], _Outcome]: ...
    @property
    def cluster_queues(self) -> Mapping[str, _QueueUsage]: ...


SettleFn = Callable[..., _Settled]


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


class _Scenario:
    """One run of the replay, every estimated runtime at one end of its spread."""

    def __init__(
        self, rp: _Prepared, pessimistic: bool, settle: SettleFn, horizon: float, max_events: int
    ) -> None:
        self.rp, self.pessimistic, self.settle = rp, pessimistic, settle
        self.horizon, self.max_events = horizon, max_events
        self.present: dict[Key, dict[str, Any]] = {}
        self.holding: set[Key] = set()
        self.version: dict[Key, int] = {}
        self.finishes: list[tuple[float, int, Key, int]] = []
        self.started: dict[Key, tuple[float, int]] = {}
        self.flavors: dict[Key, dict[str, dict[str, str]]] = {}
        self.cq: dict[Key, str | None] = {}
        self.notes: dict[Key, str] = {}
        self.cohorts: dict[str, str | None] = {}
        self.events = self.settles = self.order = 0
        self.limit: str | None = None
        self.preempted: set[Key] = set()
        self.trees: dict[Key, str] = {}
        self.members: dict[str, set[Key]] = {}

    def tree(self, key: Key) -> str:
        """The cohort tree a Workload's ClusterQueue is in (its ClusterQueue, without a cohort): admission in one
        tree never depends on another's, so an event replays only its own tree."""
        tree = self.trees.get(key)
        if tree is None:
            queue = self.rp.by_key[key].queue
            cq = self.cq.get(key) or self.rp.lq_cq.get((key[0], queue))
            root = _root(self.cohorts.get(cq), self.rp.parents) if cq is not None else None
            tree = f"cohort {root}" if root else f"queue {cq}" if cq else f"nowhere {key[0]}/{queue}"
            self.trees[key] = tree
        return tree

    def join(self, key: Key, doc: dict[str, Any]) -> str:
        self.present[key] = doc
        tree = self.tree(key)
        self.members.setdefault(tree, set()).add(key)
        return tree

    def leave(self, key: Key) -> str:
        self.present.pop(key, None)
        self.holding.discard(key)
        tree = self.tree(key)
        self.members.get(tree, set()).discard(key)
        return tree

    def runtime(self, key: Key) -> float | None:
        r = self.rp.runtimes[key]
        return r.high if self.pessimistic else r.low

    def admit(self, key: Key, t: float, cq: str, flavors: dict[str, dict[str, str]]) -> None:
        doc = self.present[key]
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assignments = []
        for ps in self.rp.podsets(key):
            assignments.append(
                {
                    "name": ps.name,
                    "flavors": dict(flavors.get(ps.name, {})),
                    "resourceUsage": {r: quantity_string(r, v) for r, v in ps.total().items()},
                    "count": ps.count,
                }
            )
        conds = [
            c
            for c in (doc.get("status") or {}).get("conditions") or ()
            if c.get("type") not in ("QuotaReserved", "Admitted", "Evicted")
        ]
        conds += [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {cq}",
                "lastTransitionTime": stamp,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": stamp,
            },
        ]
        status = {
            **(doc.get("status") or {}),
            "conditions": conds,
            "admission": {"clusterQueue": cq, "podSetAssignments": assignments},
        }
        self.present[key] = {**doc, "status": status}
        self.holding.add(key)
        self.schedule_end(key, t)

    def schedule_end(self, key: Key, start: float) -> None:
        runtime = self.runtime(key)
        if runtime is None:
            return
        v = self.version.get(key, 0) + 1
        self.version[key] = v
        heapq.heappush(self.finishes, (max(start + runtime, self.rp.now), len(self.finishes), key, v))

    def evict(self, key: Key, t: float, reason: str, message: str) -> None:
        doc = self.present[key]
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {k: v for k, v in (doc.get("status") or {}).items() if k != "admission"}
        conds = [
            c
            for c in status.get("conditions") or ()
            if c.get("type") not in ("QuotaReserved", "Admitted", "Evicted")
        ]
        conds += [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": reason or "Preempted",
                "message": message,
                "lastTransitionTime": stamp,
            },
            {
                "type": "Evicted",
                "status": "True",
                "reason": reason or "Preempted",
                "message": message,
                "lastTransitionTime": stamp,
            },
        ]
        self.present[key] = {**doc, "status": {**status, "conditions": conds}}
        self.holding.discard(key)
        self.version[key] = self.version.get(key, 0) + 1  # its scheduled end no longer holds
        self.started.pop(key, None)
        self.preempted.add(key)

    def step(self, t: float, trees: set[str] | None) -> None:
        keys = (
            sorted(self.present)
            if trees is None
            else sorted(k for tree in trees for k in self.members.get(tree, ()))
        )
        if all(k in self.holding for k in keys):
            return  # nothing pending: nothing to admit
        settled = self.settle(
            [*self.rp.static, *(self.present[k] for k in keys)], source=self.rp.source, now=t
        )
        self.settles += 1
        for name, usage in settled.cluster_queues.items():
            self.cohorts[name] = usage.cohort
        admitted = []
        for key, out in settled.workloads.items():
            if key not in self.present:
                continue
            self.cq[key] = out.cluster_queue
            if out.admitted and key not in self.holding:
                admitted.append((out.order or 0, key, out))
            elif out.evicted and key in self.holding:
                self.evict(key, t, out.evicted_reason, out.evicted_message)
                self.notes[key] = f"preempted at {_iso(t)}: {out.evicted_message}"
            elif not out.admitted:
                self.notes[key] = out.message
        for _, key, out in sorted(admitted, key=lambda a: (a[0], a[1])):
            assert out.cluster_queue is not None
            flavors = {ps: dict(f) for ps, f in out.flavors.items()}
            self.admit(key, t, out.cluster_queue, flavors)
            self.started[key] = (t, self.order)
            self.flavors[key] = flavors
            self.order += 1

    def run(self, targets: set[Key]) -> None:
        rp = self.rp
        for w in rp.wls:
            if w.finished or w.created > rp.now:
                continue
            self.present[w.key] = w.doc
            if w.holding:
                self.holding.add(w.key)
                self.schedule_end(w.key, w.admitted_at if w.admitted_at is not None else rp.now)
        self.step(rp.now, None)  # everything once: this also tells each ClusterQueue's cohort
        for key, doc in list(self.present.items()):
            self.join(key, doc)
        arrivals = rp.arrivals
        next_arrival = 0
        while True:
            if targets <= self.started.keys() | (rp.running - self.preempted):
                return
            while self.finishes and self.version.get(self.finishes[0][2]) != self.finishes[0][3]:
                heapq.heappop(self.finishes)
            upcoming = [self.finishes[0][0]] if self.finishes else []
            if next_arrival < len(arrivals):
                upcoming.append(arrivals[next_arrival][0])
            if not upcoming:
                return
            t = min(upcoming)
            if t - rp.now > self.horizon:
                self.limit = (
                    f"horizon: nothing is replayed beyond {timedelta(seconds=self.horizon)} after now"
                )
                return
            if self.events >= self.max_events:
                self.limit = f"event limit: {self.max_events} events replayed"
                return
            touched = set()
            while self.finishes and self.finishes[0][0] <= t:
                _, _, key, v = heapq.heappop(self.finishes)
                if self.version.get(key) != v:
                    continue
                touched.add(self.leave(key))
                self.events += 1
            while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= t:
                key = arrivals[next_arrival][1]
                touched.add(self.join(key, rp.by_key[key].doc))
                next_arrival += 1
                self.events += 1
            self.step(t, touched)


class _Prepared:
    """What every run shares: the objects, the Workloads, their runtimes."""

    def __init__(self, objects: Sequence[Any], source: str, now: datetime | None) -> None:
        self.source = source
        self.static: list[Mapping[str, Any]] = []
        self.wls: list[Entry] = []
        docs = []
        for i, doc in enumerate(objects):
            if not isinstance(doc, dict):
                raise InputError(f"must be a mapping, got {type(doc).__name__}", where=f"{source}: item {i}")
            docs.append(doc)
            api = doc.get("apiVersion")
            if doc.get("kind") == "Workload" and isinstance(api, str) and api.startswith(KUEUE_GROUP + "/"):
                self.wls.append(rt.read(doc, source))
            else:
                self.static.append(doc)
        self.by_key = {w.key: w for w in self.wls}
        if now is not None:
            if now.tzinfo is None:
                raise InputError("now must carry a time zone", where=source)
            self.now = now.timestamp()
        else:
            latest = rt.latest(docs)
            if latest is None:
                raise InputError(
                    "no timestamp in the input to replay from", where=source, hint="give the time now"
                )
            self.now = latest
        for w in self.wls:
            if w.created < 0:  # not created yet: it arrives now
                meta = {**w.doc.get("metadata", {}), "creationTimestamp": _iso(self.now)}
                w.doc = {**w.doc, "metadata": meta}
                w.created = self.now
        self.arrivals = sorted(
            (w.created, w.key) for w in self.wls if w.created > self.now and not w.finished
        )
        self.running = {w.key for w in self.wls if w.holding and not w.finished and w.created <= self.now}
        self.runtimes: dict[Key, Runtime] = {}
        self._podsets: dict[Key, Any] = {}
        self.lq_cq: dict[Key, str] = {}
        self.parents: dict[str, str] = {}
        for doc in self.static:
            about = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            body = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
            assert isinstance(about, dict) and isinstance(body, dict)
            name = about.get("name")
            if doc.get("kind") == "LocalQueue" and isinstance(body.get("clusterQueue"), str):
                self.lq_cq[(str(about.get("namespace") or "default"), str(name))] = body["clusterQueue"]
            elif (
                doc.get("kind") == "Cohort" and isinstance(body.get("parentName"), str) and body["parentName"]
            ):
                self.parents[str(name)] = body["parentName"]

    def podsets(self, key: Key) -> Any:
        if key not in self._podsets:
            w = self.by_key[key]
            self._podsets[key] = read_workload(
                Obj(w.doc, "Workload", self.source, namespaced=True), self.source
            ).podsets
        return self._podsets[key]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _root(cohort: str | None, parents: Mapping[str, str]) -> str | None:
    """The root of a cohort tree (a cycle stops the walk: Kueue marks such queues inactive)."""
    seen = set()
    while cohort is not None and cohort in parents and cohort not in seen:
        seen.add(cohort)
        cohort = parents[cohort]
    return cohort


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
    if settle is None:
        settle = importlib.import_module("kgpu.sim.queue.admission").settle
    assert settle is not None
    rp = _Prepared(objects, source, now)
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
    runs = [_Scenario(rp, False, settle, horizon.total_seconds(), max_events)]
    if estimated:
        runs.append(_Scenario(rp, True, settle, horizon.total_seconds(), max_events))
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
            when = datetime.fromtimestamp(at, UTC)
            starts[key] = Start(key, adm.get("clusterQueue"), when, when, True, flavors, (), rp.runtimes[key])
            continue
        a, b = first.started.get(key), last.started.get(key)
        cq = first.cq.get(key)
        ahead: tuple[Key, ...] = ()
        if a is not None:
            before = lines[first.tree(key)][: position[key]]
            ahead = tuple(before[-MAX_AHEAD:])
        note = ""
        if a is None or b is None:
            note = last.notes.get(key) or first.notes.get(key) or ""
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


__all__ = ["Replay", "Runtime", "Spread", "Start", "replay"]

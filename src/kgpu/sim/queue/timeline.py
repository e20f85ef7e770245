"""The event loop of the replay (kgpu.sim.queue.replay): one run of it, every estimated runtime at one end of
its spread, with Kueue's admissions decided at each event by one of two steppers:

- ``EngineScenario`` (kgpu's own ``settle``): one engine (``kgpu.sim.queue.engine.Settler``) read and built
  once; a finish gives the Workload's quota back, an arrival places the new Workload, and the engine runs
  Kueue's cycles over the cohort trees the events touched, skipping runs of cycles that only set heads aside
  (``kgpu.sim.queue.skip``). Nothing is read again.
- ``DictScenario`` (any other ``settle`` function, e.g. a stand-in in tests): the objects as dicts, rewritten
  after each event as Kueue writes them (``status.admission.podSetAssignments`` with the flavors, the admitted
  counts and their usage, conditions QuotaReserved and Admitted True, pkg/workload/workload.go
  ``SetQuotaReservation``; a preempted Workload loses its admission and carries ``Evicted``), and the
  function called again on the Workloads of the touched trees.

Both answer the same (tests/test_kueue_replay_engine.py runs both on random timelines and compares every
step): the engine's ``run`` starts each tree from what a fresh read of the rewritten objects would give.

At one instant the finishes are applied first, then the arrivals in name order; the Workloads admitted by
one settle start in the order it admitted them; a Workload evicted and admitted again within one settle
starts again at that instant (its earlier start is dropped, as for any preempted Workload).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kgpu.errors import InputError
from kgpu.model.kueue import KueueObjects
from kgpu.model.kueue_fields import Obj
from kgpu.model.kueue_resources import PODS, quantity_string
from kgpu.model.kueue_workload import PodSet, read_workload
from kgpu.sim.queue import runtimes as rt
from kgpu.sim.queue.engine import Settler
from kgpu.sim.queue.runtimes import Entry, Key, Runtime

KUEUE_GROUP = "kueue.x-k8s.io"


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
    def preempted_by(self) -> tuple[str, str] | None: ...
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


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Prepared:
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
                meta = {**w.doc.get("metadata", {}), "creationTimestamp": iso(self.now)}
                w.doc = {**w.doc, "metadata": meta}
                w.created = self.now
        self.arrivals = sorted(
            (w.created, w.key) for w in self.wls if w.created > self.now and not w.finished
        )
        self.running = {w.key for w in self.wls if w.holding and not w.finished and w.created <= self.now}
        self.runtimes: dict[Key, Runtime] = {}
        self._podsets: dict[Key, tuple[PodSet, ...]] = {}
        self.lq_cq: dict[Key, str] = {}
        self.parents: dict[str, str] = {}
        self.cohorts: dict[str, str] = {}
        for doc in self.static:
            about = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            body = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
            assert isinstance(about, dict) and isinstance(body, dict)
            name = about.get("name")
            kind = doc.get("kind")
            if kind == "LocalQueue" and isinstance(body.get("clusterQueue"), str):
                self.lq_cq[(str(about.get("namespace") or "default"), str(name))] = body["clusterQueue"]
            elif kind == "Cohort" and isinstance(body.get("parentName"), str) and body["parentName"]:
                self.parents[str(name)] = body["parentName"]
            elif kind == "ClusterQueue":
                cohort = body.get("cohortName", body.get("cohort"))
                if isinstance(cohort, str) and cohort:
                    self.cohorts[str(name)] = cohort

    def podsets(self, key: Key) -> tuple[PodSet, ...]:
        if key not in self._podsets:
            w = self.by_key[key]
            self._podsets[key] = read_workload(
                Obj(w.doc, "Workload", self.source, namespaced=True), self.source
            ).podsets
        return self._podsets[key]

    def documents(self) -> list[Mapping[str, Any]]:
        return [*self.static, *(w.doc for w in self.wls)]


def _root(cohort: str | None, parents: Mapping[str, str]) -> str | None:
    """The root of a cohort tree (a cycle stops the walk: Kueue marks such queues inactive)."""
    seen = set()
    while cohort is not None and cohort in parents and cohort not in seen:
        seen.add(cohort)
        cohort = parents[cohort]
    return cohort


class Scenario:
    """The event loop and what it records; ``step`` (settle the touched trees at t) is the stepper's."""

    def __init__(self, rp: Prepared, pessimistic: bool, horizon: float, max_events: int) -> None:
        self.rp, self.pessimistic = rp, pessimistic
        self.horizon, self.max_events = horizon, max_events
        self.holding: set[Key] = set()
        self.version: dict[Key, int] = {}
        self.finishes: list[tuple[float, int, Key, int]] = []
        self.started: dict[Key, tuple[float, int]] = {}
        self.flavors: dict[Key, dict[str, dict[str, str]]] = {}
        self.counts: dict[Key, dict[str, int]] = {}
        self.cq: dict[Key, str | None] = {}
        self.events = self.settles = self.order = 0
        self.limit: str | None = None
        self.preempted: set[Key] = set()
        self.trees: dict[Key, str] = {}
        self.evicted_note: dict[Key, tuple[int, str]] = {}  # "preempted at ...", and the settle it was in
        self.asked: set[Key] = set()
        self.waiting: set[Key] = set()  # the Workloads asked about that have not started
        # hooks for tests: called after each settle with (t, trees settled or None: all)
        self.after_step: Callable[[float, set[str] | None], None] | None = None

    # --- the stepper's part ---------------------------------------------------------------------------

    def tree(self, key: Key) -> str:
        raise NotImplementedError

    def join(self, key: Key) -> str:
        raise NotImplementedError

    def leave(self, key: Key) -> str:
        raise NotImplementedError

    def step(self, t: float, trees: set[str] | None) -> None:
        raise NotImplementedError

    def note(self, key: Key) -> str:
        raise NotImplementedError

    # --- shared bookkeeping ---------------------------------------------------------------------------

    def runtime(self, key: Key) -> float | None:
        r = self.rp.runtimes[key]
        return r.high if self.pessimistic else r.low

    def schedule_end(self, key: Key, start: float) -> None:
        runtime = self.runtime(key)
        if runtime is None:
            return
        v = self.version.get(key, 0) + 1
        self.version[key] = v
        heapq.heappush(self.finishes, (max(start + runtime, self.rp.now), len(self.finishes), key, v))

    def record_start(
        self, key: Key, t: float, cq: str, flavors: dict[str, dict[str, str]], counts: dict[str, int]
    ) -> None:
        self.holding.add(key)
        self.schedule_end(key, t)
        self.started[key] = (t, self.order)
        self.waiting.discard(key)
        self.flavors[key] = flavors
        self.counts[key] = counts
        self.cq[key] = cq
        self.order += 1

    def record_eviction(self, key: Key, t: float, message: str) -> None:
        self.holding.discard(key)
        self.version[key] = self.version.get(key, 0) + 1  # its scheduled end no longer holds
        self.started.pop(key, None)
        self.preempted.add(key)
        if key in self.asked:
            self.waiting.add(key)
        self.evicted_note[key] = (self.settles, f"preempted at {iso(t)}: {message}")

    def begin(self, keys: list[Key]) -> None:
        """The Workloads present at now, before the first settle."""
        for key in keys:
            self.join(key)

    def begun(self, keys: list[Key]) -> None:
        """After the first settle."""

    def run(self, targets: set[Key]) -> None:
        rp = self.rp
        self.asked = targets
        self.waiting = {k for k in targets if k not in rp.running}
        present = []
        for w in rp.wls:
            if w.finished or w.created > rp.now:
                continue
            present.append(w.key)
            if w.holding:
                self.holding.add(w.key)
                self.schedule_end(w.key, w.admitted_at if w.admitted_at is not None else rp.now)
        self.begin(present)
        self.step(rp.now, None)  # everything once
        self.begun(present)
        arrivals = rp.arrivals
        next_arrival = 0
        while True:
            if not self.waiting:
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
                self.holding.discard(key)
                touched.add(self.leave(key))
                self.events += 1
            while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= t:
                key = arrivals[next_arrival][1]
                touched.add(self.join(key))
                next_arrival += 1
                self.events += 1
            self.step(t, touched)


class DictScenario(Scenario):
    """The replay over a ``settle`` function called on the objects as dicts at every event."""

    def __init__(
        self, rp: Prepared, pessimistic: bool, settle: SettleFn, horizon: float, max_events: int
    ) -> None:
        super().__init__(rp, pessimistic, horizon, max_events)
        self.settle = settle
        self.present: dict[Key, dict[str, Any]] = {}
        self.notes: dict[Key, str] = {}
        self.members: dict[str, set[Key]] = {}

    def tree(self, key: Key) -> str:
        """The cohort tree a Workload's ClusterQueue is in (its ClusterQueue, without a cohort): admission in one
        tree never depends on another's, so an event replays only its own tree."""
        tree = self.trees.get(key)
        if tree is None:
            queue = self.rp.by_key[key].queue
            cq = self.cq.get(key) or self.rp.lq_cq.get((key[0], queue))
            root = _root(self.rp.cohorts.get(cq), self.rp.parents) if cq is not None else None
            tree = f"cohort {root}" if root else f"queue {cq}" if cq else f"nowhere {key[0]}/{queue}"
            self.trees[key] = tree
        return tree

    def join(self, key: Key) -> str:
        self.present[key] = self.rp.by_key[key].doc
        tree = self.tree(key)
        self.members.setdefault(tree, set()).add(key)
        return tree

    def leave(self, key: Key) -> str:
        self.present.pop(key, None)
        tree = self.tree(key)
        self.members.get(tree, set()).discard(key)
        return tree

    def note(self, key: Key) -> str:
        return self.notes.get(key, "")

    def begin(self, keys: list[Key]) -> None:
        for key in keys:
            self.present[key] = self.rp.by_key[key].doc

    def begun(self, keys: list[Key]) -> None:
        for key in keys:  # the first settle told each its ClusterQueue
            self.members.setdefault(self.tree(key), set()).add(key)

    def admit(
        self, key: Key, t: float, cq: str, flavors: dict[str, dict[str, str]], counts: dict[str, int]
    ) -> None:
        doc = self.present[key]
        stamp = iso(t)
        assignments = []
        for ps in self.rp.podsets(key):
            count = counts.get(ps.name, ps.count)
            assigned = dict(flavors.get(ps.name, {}))
            usage = {r: count if r == PODS else ps.requests.get(r, 0) * count for r in assigned}
            assignments.append(
                {
                    "name": ps.name,
                    "flavors": assigned,
                    "resourceUsage": {r: quantity_string(r, v) for r, v in usage.items()},
                    "count": count,
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
        self.record_start(key, t, cq, flavors, counts)

    def evict(self, key: Key, t: float, reason: str, message: str) -> None:
        doc = self.present[key]
        stamp = iso(t)
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
        self.record_eviction(key, t, message)
        self.notes[key] = self.evicted_note[key][1]

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
        admitted = []
        for key, out in settled.workloads.items():
            if key not in self.present:
                continue
            self.cq[key] = out.cluster_queue
            # evicted by this settle: it held quota before, or was admitted and preempted within it
            now_evicted = out.evicted and (key in self.holding or out.preempted_by is not None)
            again = out.admitted and key in self.holding and out.order is not None
            if now_evicted and (not out.admitted or again):
                self.evict(key, t, out.evicted_reason, out.evicted_message)
            elif not out.admitted:
                self.notes[key] = out.message
            if out.admitted and key not in self.holding:
                admitted.append((out.order or 0, key, out))
        for _, key, out in sorted(admitted, key=lambda a: (a[0], a[1])):
            assert out.cluster_queue is not None
            flavors = {ps: dict(f) for ps, f in out.flavors.items()}
            counts = dict(getattr(out, "counts", None) or {})
            self.admit(key, t, out.cluster_queue, flavors, counts)
        if self.after_step is not None:
            self.after_step(t, trees)


class EngineScenario(Scenario):
    """The replay over one engine kept between events (module docstring)."""

    def __init__(
        self, rp: Prepared, k: KueueObjects, pessimistic: bool, horizon: float, max_events: int
    ) -> None:
        super().__init__(rp, pessimistic, horizon, max_events)
        self.engine = Settler(k, skip=True)
        self.workloads = {wl.key: wl for wl in k.workloads}
        self.tree_settle: dict[str, int] = {}  # tree -> the last settle over it

    def tree(self, key: Key) -> str:
        return self.trees[key]

    def join(self, key: Key) -> str:
        tree = self.engine.place(self.workloads[key])
        self.trees[key] = tree
        self.cq[key] = self.engine.infos[key].cq
        return tree

    def leave(self, key: Key) -> str:
        self.engine.finish(key)
        return self.trees[key]

    def note(self, key: Key) -> str:
        tree = self.trees.get(key)
        if tree is None:
            return ""
        evicted = self.evicted_note.get(key)
        if evicted is not None and evicted[0] >= self.tree_settle.get(tree, 0):
            return evicted[1]
        info = self.engine.infos.get(key)
        if info is None or info.admitted or tree not in self.tree_settle:
            return evicted[1] if evicted is not None else ""
        return self.engine.condition(info)[1]

    def step(self, t: float, trees: set[str] | None) -> None:
        engine = self.engine
        if not engine.pending(trees if trees is not None else set(engine.present)):
            return
        ran = engine.run(trees, t)
        self.settles += 1
        for tree in trees if trees is not None else engine.present:
            self.tree_settle[tree] = self.settles
        for info in {i.key: i for i in ran.evicted}.values():
            if not info.admitted or info.key in self.holding:  # (admitted again: it starts again below)
                self.record_eviction(info.key, t, info.evicted_message)
        admitted = {i.key: i for i in ran.admitted if i.admitted}
        for info in sorted(admitted.values(), key=lambda i: (i.order or 0, i.key)):
            assert info.cq is not None
            flavors = {ps: dict(f) for ps, f in info.flavors.items()}
            self.record_start(info.key, t, info.cq, flavors, dict(info.counts))
        if self.after_step is not None:
            self.after_step(t, trees)

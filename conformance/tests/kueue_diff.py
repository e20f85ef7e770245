"""Runs seeded scenarios (``kueue_scenarios``) through the real Kueue (``kueue_rig``) step by step and gives,
per scenario and step, the objects Kueue started from and what it reached; compares that with kgpu's
``kgpu.sim.queue.admission.settle`` on exactly those objects.

Many scenarios run in lockstep in one Kueue (their names, cohorts and flavors are their own, so Kueue's
decisions for one never depend on another): create every scenario's objects and wait until its
ClusterQueues and LocalQueues are active; then per step apply every scenario's events (finishes first,
then arrivals, highest priority first), wait until Kueue settles, and read every Workload back.

What ``settle`` gets for a step: the scenario's Kueue objects and Namespaces as the API server returned
them once active, its Workloads as they were when the step's events had been applied (the previous step's
settled state, a finished one with its ``Finished`` condition, the new ones as created), leaving out the
Workloads that had finished in earlier steps. What is compared, per Workload not finished at the end:

- ``admitted``: QuotaReserved true with ``status.admission`` (and not finished);
- ``cluster queue``: the admission's ClusterQueue, else the one its LocalQueue points to;
- ``flavors``: per pod set, per resource, when both admitted it;
- ``message``: the QuotaReserved condition's reason and whole message, when both left it pending ("" when
  Kueue wrote none: a StrictFIFO queue's Workloads behind a head that does not move);
- ``eviction``: evicted (the Evicted condition true at the end, or evicted during the step and admitted
  again), the Evicted reason and message, and the preemptor (from the UID in the message).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kueue_rig import API, Key, KueueRig, condition, is_true, key
from kueue_scenarios import Event, Scenario, events

FIELDS = ("admitted", "cluster queue", "flavors", "message", "eviction")
UID = re.compile(r"\(UID: ([0-9a-f-]+),")
KINDS = ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue")


@dataclass(frozen=True)
class Real:
    """What the real Kueue reached for one Workload (the fields kgpu's ``Outcome`` has)."""

    admitted: bool
    cluster_queue: str | None
    flavors: dict[str, dict[str, str]]
    reason: str
    message: str
    evicted: bool
    evicted_reason: str
    evicted_message: str
    preempted_by: Key | None  # for an eviction during this step (from the UID in its message)
    evicted_now: bool  # evicted during this step
    alternatives: tuple[str, ...] = ()  # the messages a StrictFIFO head kept alternating between (kueue_rig)


@dataclass
class Case:
    scenario: int
    step: int
    objects: list[dict[str, Any]]
    real: dict[Key, Real]
    events: list[str] = field(default_factory=list)

    def dump(self, path: Path) -> None:
        real = {f"{ns}/{name}": asdict(r) for (ns, name), r in self.real.items()}
        path.write_text(
            json.dumps(
                {
                    "scenario": self.scenario,
                    "step": self.step,
                    "events": self.events,
                    "objects": self.objects,
                    "real": real,
                },
                indent=1,
                sort_keys=True,
            )
        )


def _prefix(scn: Scenario) -> str:
    return f"s{scn.n}-"


def _owned(scn: Scenario, obj: dict[str, Any]) -> bool:
    ns, name = key(obj)
    return (ns or name).startswith(_prefix(scn))


def _infra(rig: KueueRig, scns: list[Scenario]) -> dict[int, list[dict[str, Any]]]:
    rig.create_each([scn.infra for scn in scns])
    rig.wait_active(
        {
            "ClusterQueue": {q.name for s in scns for q in s.queues},
            "LocalQueue": {f"{q.namespace}/{q.local_queue}" for s in scns for q in s.queues},
        }
    )
    listed = [o | {"apiVersion": API, "kind": kind} for kind in KINDS for o in rig.list(kind)]
    listed += [
        o | {"apiVersion": "v1", "kind": "Namespace"} for o in rig.api("GET", "/api/v1/namespaces")["items"]
    ]
    return {s.n: [o for o in listed if _owned(s, o)] for s in scns}


def _queue_of(scn: Scenario, wl: dict[str, Any]) -> Any:
    return scn.queue_of(wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))


def _pending(wl: dict[str, Any]) -> bool:
    return not is_true(wl, "Finished") and not (
        is_true(wl, "QuotaReserved") and wl.get("status", {}).get("admission")
    )


# What the scheduler writes on a Workload it puts straight back into the queue (scheduler.go: waiting for the
# Workloads it preempted, or skipped in a cycle after another Workload took the quota): never a steady state,
# since the rig releases every eviction.
TRANSIENT = (
    "Pending the preemption of",
    "Workload no longer fits after processing another workload",
    "Workload has overlapping preemption targets with another workload",
)
# ... except one: a head that needs preemption and finds no victim reserves its ClusterQueue's quota up to the
# borrowing limit in every cycle it is tried (scheduler.go, ``resourcesToReserve`` unless
# ``preemption.CanAlwaysReclaim``), so a Workload of its cohort behind it is skipped with this message in each
# of those cycles, and keeps it for as long as nothing in the cohort changes (seen at seeds 98483821 and
# 92005831). Such a message that has stood ``STEADY`` seconds with the rest of the cluster quiet is the state
# Kueue shows, and kgpu's ``settle`` gives it too.
SKIPPED = "Workload no longer fits after processing another workload"
STEADY = 3.0


def ready_check(
    scns: list[Scenario], held: Callable[[Key], float] | None = None
) -> Callable[[dict[Key, dict[str, Any]]], str | None]:
    """Kueue has tried the head of every ClusterQueue: the pending Workload of highest priority (then oldest)
    carries a QuotaReserved condition. Not every pending Workload does: a StrictFIFO head that cannot be
    admitted goes back to the front at once, and so does a BestEffortFIFO head with flavors left to try
    (``LastAssignment.PendingFlavors``, after a search that stopped early under ``MayStopSearch``), so the
    Workloads behind it are never looked at; the quiet period of ``wait_settled`` covers the rest. And no
    pending Workload carries a message the scheduler writes only on its way to another try (``TRANSIENT``),
    save ``SKIPPED`` held ``STEADY`` seconds (``held``: how long a Workload has carried its message)."""
    by_ns = {q.namespace: s for s in scns for q in s.queues}

    def ready(snap: dict[Key, dict[str, Any]]) -> str | None:
        heads: dict[str, dict[str, Any]] = {}
        for (ns, _), wl in snap.items():
            scn = by_ns.get(ns)
            q = _queue_of(scn, wl) if scn is not None else None
            if q is None or not _pending(wl):
                continue
            message = (condition(wl, "QuotaReserved") or {}).get("message", "")
            if any(words in message for words in TRANSIENT) and not (
                held is not None and SKIPPED in message and held(key(wl)) >= STEADY
            ):
                return f"Workload {'/'.join(key(wl))} is to be tried again: {message}"
            order = (-(wl["spec"].get("priority") or 0), wl["metadata"]["creationTimestamp"])
            best = heads.get(q.name)
            if best is None or order < (
                -(best["spec"].get("priority") or 0),
                best["metadata"]["creationTimestamp"],
            ):
                heads[q.name] = wl
        for cq, wl in sorted(heads.items()):
            if condition(wl, "QuotaReserved") is None:
                return (
                    f"the head of ClusterQueue {cq}, {'/'.join(key(wl))}, has no QuotaReserved condition yet"
                )
        return None

    return ready


def real_outcome(scn: Scenario, wl: dict[str, Any], rig: KueueRig, uids: dict[str, Key]) -> Real:
    status = wl.get("status", {})
    admission = status.get("admission")
    admitted = bool(admission) and is_true(wl, "QuotaReserved")
    q = _queue_of(scn, wl)
    cq = admission["clusterQueue"] if admitted else (q.name if q is not None else None)
    flavors = (
        {ps["name"]: dict(ps.get("flavors") or {}) for ps in admission["podSetAssignments"]}
        if admitted
        else {}
    )
    qr = condition(wl, "QuotaReserved") or {}
    ev = condition(wl, "Evicted")
    now = rig.evictions.get(key(wl))
    if ev is not None and ev.get("status") == "True":
        evicted, ev_reason, ev_message = True, ev["reason"], ev["message"]
    elif now is not None:
        evicted, ev_reason, ev_message = True, now["reason"], now["message"]
    else:
        evicted, ev_reason, ev_message = False, "", ""
    m = UID.search(ev_message) if now is not None else None
    return Real(
        admitted,
        cq,
        flavors,
        qr.get("reason", ""),
        qr.get("message", ""),
        evicted,
        ev_reason,
        ev_message,
        uids.get(m.group(1)) if m else None,
        now is not None,
        tuple(sorted(rig.flapping.get(key(wl), ()))),
    )


def run(rig: KueueRig, scns: list[Scenario], *, timeout: float = 120) -> list[Case]:
    """Every scenario of ``scns`` in lockstep through the real Kueue; one Case per scenario and step."""
    infra = _infra(rig, scns)
    ready = ready_check(scns, rig.held)
    snap = rig.snapshot()
    cases: list[Case] = []
    finished_before: set[Key] = set()
    for step in range(max(s.steps for s in scns)):
        rig.evictions.clear()
        todo: dict[int, list[Event]] = {}
        for scn in scns:
            if step >= scn.steps:
                continue
            admitted: dict[str, list[Key]] = {}
            for k, wl in sorted(snap.items()):
                q = _queue_of(scn, wl) if _owned(scn, wl) else None
                if q is not None and not _pending(wl) and not is_true(wl, "Finished"):
                    admitted.setdefault(q.tree, []).append(k)
            todo[scn.n] = events(scn, admitted)
        inputs: dict[int, dict[Key, dict[str, Any]]] = {}
        for scn in scns:
            if scn.n not in todo:
                continue
            inputs[scn.n] = {k: wl for k, wl in snap.items() if _owned(scn, wl) and k not in finished_before}
            for ev in todo[scn.n]:
                if ev.finish is not None:
                    inputs[scn.n][ev.finish] = rig.finish(*ev.finish)
        order = [scn.n for scn in scns if scn.n in todo]
        created = rig.create_each([[wl for ev in todo[n] for wl in ev.arrivals] for n in order])
        for n, objs in zip(order, created, strict=True):
            inputs[n].update((key(o), o) for o in objs)
        snap = rig.wait_settled(ready, timeout=timeout)
        uids = {wl["metadata"]["uid"]: k for k, wl in snap.items()}
        for scn in scns:
            if scn.n not in inputs:
                continue
            real = {
                k: real_outcome(scn, wl, rig, uids)
                for k, wl in snap.items()
                if _owned(scn, wl) and not is_true(wl, "Finished")
            }
            described = [_describe(ev) for ev in todo[scn.n]]
            cases.append(Case(scn.n, step, infra[scn.n] + list(inputs[scn.n].values()), real, described))
        finished_before |= {k for k, wl in snap.items() if is_true(wl, "Finished")}
    return cases


def _describe(ev: Event) -> str:
    if ev.finish is not None:
        return f"{ev.tree}: {ev.finish[0]}/{ev.finish[1]} finishes"
    names = ", ".join(
        f"{w['metadata']['name']} (priority {w['spec'].get('priority', 0)})" for w in ev.arrivals
    )
    return f"{ev.tree}: {ev.arrivals[0]['metadata']['namespace']} gets {names}"


# --- comparison ----------------------------------------------------------------------------------------


@dataclass
class Disagreement:
    case: Case
    workload: Key
    field: str
    real: Any
    kgpu: Any
    klass: str = "unexplained"

    def __str__(self) -> str:
        ns, name = self.workload
        return (
            f"scenario {self.case.scenario} step {self.case.step} {ns}/{name} {self.field} [{self.klass}]: "
            f"kueue {self.real!r} kgpu {self.kgpu!r}; events: {'; '.join(self.case.events)}"
        )


QUOTA = re.compile(
    r"insufficient (?:unused )?quota for (?P<res>\S+) in flavor (?P<flavor>[^,\s]+), "
    r"(?:\S+ more needed|previously considered podsets requests \([^)]*\) \+ current podset "
    r"request \([^)]*\) > maximum capacity \([^)]*\))"
)
PODSET = re.compile(r"couldn't assign flavors to pod set (\S+): ")


FLAVOR = re.compile(r"flavor (?P<flavor>[a-z0-9][-a-z0-9.]*[a-z0-9])")


def _reasons(message: str) -> dict[str, tuple[set[str], dict[tuple[str, str], str]]] | None:
    """Per pod set: the reasons other than quota, and the quota reasons by (flavor, resource)."""
    parts = PODSET.split(message)
    if parts[0] or len(parts) < 3:
        return None
    out = {}
    for podset, text in zip(parts[1::2], parts[2::2], strict=True):
        text = text.removesuffix("; ")
        quota = {(m["flavor"], m["res"]): m.group(0) for m in QUOTA.finditer(text)}
        rest = {r for r in QUOTA.sub("", text).split(", ") if r.strip(", ")}
        out[podset] = (rest, quota)
    return out


def _groups(d: Disagreement) -> dict[str, int]:
    """Flavor -> index of its resource group in the Workload's ClusterQueue."""
    cq = d.case.real[d.workload].cluster_queue
    for obj in d.case.objects:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == cq:
            return {
                f["name"]: i
                for i, rg in enumerate(obj["spec"].get("resourceGroups") or [])
                for f in rg["flavors"]
            }
    return {}


def _by_group(
    groups: dict[str, int], rest: set[str], quota: dict[tuple[str, str], str]
) -> dict[int, tuple[set[str], dict[tuple[str, str], str]]]:
    out: dict[int, tuple[set[str], dict[tuple[str, str], str]]] = {}
    for r in rest:
        for m in FLAVOR.finditer(r):
            out.setdefault(groups.get(m["flavor"], -1), (set(), {}))[0].add(r)
    for (flavor, res), text in quota.items():
        out.setdefault(groups.get(flavor, -1), (set(), {}))[1][(flavor, res)] = text
    return out


def resource_order(d: Disagreement) -> bool:
    """Kueue walks a pod set's resources in Go map order (flavorassigner.assignFlavors, then
    findFlavorForPodSets): a resource group assigned at a later flavor adds the reasons its earlier flavors
    failed, the first resource group that cannot be assigned ends the search, and within a flavor the first
    resource that cannot fit ends that flavor's check. So which resource groups a message speaks of, and of
    two failing resources in a flavor which one it names, is random; kgpu walks them in one fixed order.
    Accepted as this class: the same pod sets and, per pod set and per resource group both messages speak
    of, the same flavors with the same other reasons, every resource both name named in the same words."""
    if d.field != "message" or d.real[0] != d.kgpu[0]:
        return False
    real, got = _reasons(d.real[1]), _reasons(d.kgpu[1])
    if real is None or got is None or real.keys() != got.keys():
        return False
    groups = _groups(d)
    for podset, (rest, quota) in real.items():
        g1, g2 = _by_group(groups, rest, quota), _by_group(groups, *got[podset])
        if -1 in g1 or -1 in g2:
            return False
        for g in g1.keys() & g2.keys():
            (rest1, quota1), (rest2, quota2) = g1[g], g2[g]
            if rest1 != rest2 or {f for f, _ in quota1} != {f for f, _ in quota2}:
                return False
            if any(quota2.get(fr, text) != text for fr, text in quota1.items()):
                return False
    return True


def _input_workload(d: Disagreement) -> dict[str, Any] | None:
    ns, name = d.workload
    for obj in d.case.objects:
        if obj["kind"] == "Workload" and key(obj) == (ns, name):
            return obj
    return None


def _admitted_now(d: Disagreement) -> bool:
    """Some Workload of the scenario took quota during the step (admitted at its end, not in its input)."""
    held = {
        key(o)
        for o in d.case.objects
        if o["kind"] == "Workload" and o.get("status", {}).get("admission") and is_true(o, "QuotaReserved")
    }
    return any(r.admitted and k not in held for k, r in d.case.real.items())


def _short_of_quota(parts: tuple[set[str], dict[tuple[str, str], str]]) -> bool:
    return bool(parts[1])


def stale_message(d: Disagreement) -> bool:
    """Kueue re-examines an inadmissible Workload only when quota may have been freed in its cohort (a
    Workload finished or was evicted, a queue changed: QueueAssociatedInadmissibleWorkloadsAfter), not when
    another Workload takes quota; its message keeps what its last try saw, which may come before other
    Workloads of the step were admitted (or before the step). ``settle`` gives what a try sees once the
    step's admissions are made. Accepted as this class: Kueue's message is the one the Workload carried
    before the step, or some Workload of the same set-up took quota during the step; the same reason; every
    pod set both name has the same other reasons and the same flavors short of quota (the amounts, and which
    resource of a flavor is short, may differ); a pod set only one names is short of quota in some flavor (it
    fitted there at the other try), or comes after the last pod set the other names (that try stopped before it)."""
    if d.field != "message" or d.real[0] != d.kgpu[0]:
        return False
    wl = _input_workload(d)
    before = condition(wl, "QuotaReserved") if wl is not None else None
    unchanged = before is not None and (before.get("reason", ""), before.get("message", "")) == d.real
    if wl is None or not (unchanged or _admitted_now(d)):
        return False
    real, got = _reasons(d.real[1]), _reasons(d.kgpu[1])
    if real is None or got is None:
        return False
    order = [ps["name"] for ps in wl["spec"].get("podSets") or []]
    if not set(real) | set(got) <= set(order):
        return False
    last_real, last_got = max(map(order.index, real)), max(map(order.index, got))
    for ps in set(real) | set(got):
        if ps in real and ps in got:
            if real[ps][0] != got[ps][0] or {f for f, _ in real[ps][1]} != {f for f, _ in got[ps][1]}:
                return False
        elif (ps in real and not (_short_of_quota(real[ps]) or order.index(ps) > last_got)) or (
            ps in got and not (_short_of_quota(got[ps]) or order.index(ps) > last_real)
        ):
            return False
    return True


def stale_decision(d: Disagreement) -> bool:
    """The decision behind a ``stale-message``: Kueue left a Workload pending with the very condition it had
    before the step (it did not try it again: nothing in the step finished or was evicted, which is what
    requeues an inadmissible Workload), while other Workloads took quota; kgpu, trying it at the settled
    state, admits it. Less unused quota can turn a try around when a Workload has several pod sets: a pod set
    that took the first flavor moves to the next one and leaves the first to a later pod set that fits only
    there (seen at 92005831: a RayJob's worker group moves to spot and its other group fits on-demand).
    Whether Kueue tries it again depends on when its last requeue happened (a run of that scenario alone
    admits it), so Kueue's answer here is one of two."""
    if d.field != "admitted" or d.real is not False or d.kgpu is not True:
        return False
    wl = _input_workload(d)
    before = condition(wl, "QuotaReserved") if wl is not None else None
    real = d.case.real[d.workload]
    if before is None or (before.get("reason", ""), before.get("message", "")) != (real.reason, real.message):
        return False
    if any(e.endswith(" finishes") for e in d.case.events) or any(r.evicted_now for r in d.case.real.values()):
        return False
    return _admitted_now(d)


def _flavor_order(d: Disagreement) -> dict[str, int]:
    cq = d.case.real[d.workload].cluster_queue
    for obj in d.case.objects:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == cq:
            return {
                f["name"]: i
                for rg in obj["spec"].get("resourceGroups") or []
                for i, f in enumerate(rg["flavors"])
            }
    return {}


def _resumed(d: Disagreement) -> bool:
    """One message is that of a search resumed at a later flavor, the other of a search from the first:
    per pod set the shorter names, its reasons are the longer's for the flavors from some position on in the
    resource group's order, and the longer's other reasons are for flavors before that position. Kueue's is
    the shorter when its last try resumed; kgpu's when Kueue's status update reset the search (kgpu
    resumes as the scheduler does)."""
    return d.real[0] == d.kgpu[0] and (
        _suffix_of(d, d.real[1], d.kgpu[1]) or _suffix_of(d, d.kgpu[1], d.real[1])
    )


def _suffix_of(d: Disagreement, short_message: str, long_message: str) -> bool:
    short, long = _reasons(short_message), _reasons(long_message)
    if short is None or long is None or not set(short) <= set(long):
        return False
    order = _flavor_order(d)
    shorter = False
    for ps, (rest, quota) in short.items():
        rest2, quota2 = long[ps]
        if not rest <= rest2 or any(quota2.get(fr) != text for fr, text in quota.items()):
            return False
        named = {m["flavor"] for r in (*rest, *quota.values()) for m in FLAVOR.finditer(r)}
        named2 = {m["flavor"] for r in (*rest2, *quota2.values()) for m in FLAVOR.finditer(r)}
        if not named or not named <= set(order) or not named2 <= set(order):
            return False
        first = min(order[f] for f in named)
        if any(order[f] >= first for f in named2 - named):
            return False
        shorter |= named2 != named
    return shorter


def status_race(d: Disagreement) -> bool:
    """A Workload with several pod sets whose first ones fit a flavor that is not their group's last while a
    later one cannot be assigned has flavors left to try (``LastAssignment.PendingFlavors``): Kueue puts it
    back at the front at once and tries the next flavors in the next cycle; but each try writes a new
    message, and the status update, coming back through the watch, replaces the queued Workload by one with
    no ``LastAssignment``, so the search starts over. Whether the update or the next cycle comes first is
    timing: the head either reaches its last flavor and leaves the queue (then the Workloads behind it are
    tried, as in kgpu) or keeps going round (its message alternating, the Workloads behind it never tried,
    with no condition). Accepted as this class: a disagreement on the message or the admission of a Workload
    in a ClusterQueue where, in this step, Kueue kept rewriting the message of a pending Workload with
    several pod sets; or a message that is kgpu's less the reasons for the flavors before some position in
    their group (a search resumed from ``LastAssignment`` that the last status update did not reset)."""
    if d.field not in ("message", "admitted"):
        return False
    if d.field == "message" and _resumed(d):
        return True
    cq = d.case.real[d.workload].cluster_queue
    pod_sets = {
        key(o): len(o["spec"].get("podSets") or []) for o in d.case.objects if o["kind"] == "Workload"
    }
    return any(
        r.cluster_queue == cq and not r.admitted and r.alternatives and pod_sets.get(k, 0) > 1
        for k, r in d.case.real.items()
    )


def combined(d: Disagreement) -> bool:
    """A message the three mechanisms above explain together: per pod set both name and per resource group
    both messages speak of, kgpu names every flavor Kueue names, with the same reasons other than quota and
    a quota reason where Kueue has one (amounts and the short resource may differ when quota moved during the
    step, as in ``stale-message``), its other flavors coming before Kueue's first (a resumed search, as in
    ``status-race``); groups only one message speaks of come from Go's map order (``resource-order``); a pod
    set only one message names is short of quota in some flavor or comes after the other's last."""
    if d.field != "message" or d.real[0] != d.kgpu[0]:
        return False
    wl = _input_workload(d)
    real, got = _reasons(d.real[1]), _reasons(d.kgpu[1])
    if wl is None or real is None or got is None:
        return False
    order = [ps["name"] for ps in wl["spec"].get("podSets") or []]
    if not set(real) | set(got) <= set(order):
        return False
    before = condition(wl, "QuotaReserved")
    moved = _admitted_now(d) or (
        before is not None and (before.get("reason", ""), before.get("message", "")) == d.real
    )
    groups, position = _groups(d), _flavor_order(d)
    last_real, last_got = max(map(order.index, real)), max(map(order.index, got))
    for ps in set(real) | set(got):
        if ps not in got:
            if not (_short_of_quota(real[ps]) or order.index(ps) > last_got):
                return False
            continue
        if ps not in real:
            if not (_short_of_quota(got[ps]) or order.index(ps) > last_real):
                return False
            continue
        g1, g2 = _by_group(groups, *real[ps]), _by_group(groups, *got[ps])
        if -1 in g1 or -1 in g2:
            return False
        for g in g1.keys() & g2.keys():
            (rest1, quota1), (rest2, quota2) = g1[g], g2[g]
            named1 = {m["flavor"] for r in rest1 for m in FLAVOR.finditer(r)} | {f for f, _ in quota1}
            named2 = {m["flavor"] for r in rest2 for m in FLAVOR.finditer(r)} | {f for f, _ in quota2}
            if not named1 <= named2 or not rest1 <= rest2:
                return False
            first = min(position.get(f, 0) for f in named1)
            if any(position.get(f, 0) >= first for f in named2 - named1):
                return False
            if {f for f, _ in quota1} != {f for f, _ in quota2 if f in named1}:
                return False
            if any(quota2.get(fr) != text for fr, text in quota1.items()) and not moved:
                return False
    return True


# Documented classes of disagreement (name -> predicate over a Disagreement); conformance/README.md
# ("Kueue") explains each.
KNOWN: dict[str, Callable[[Disagreement], bool]] = {
    "resource-order": resource_order,
    "status-race": status_race,
    "stale-message": stale_message,
    "stale-decision": stale_decision,
    "combined": combined,
}
# classes where Kueue's own answer depends on Go map order or on when its last try happened, and kgpu's is
# the one a try at the settled state gives
RANDOM = {"resource-order", "status-race", "stale-message", "stale-decision", "combined"}


@dataclass
class Tally:
    agree: Counter[str] = field(default_factory=Counter)
    total: Counter[str] = field(default_factory=Counter)
    disagreements: list[Disagreement] = field(default_factory=list)

    def add(self, case: Case, k: Key, fld: str, real: Any, got: Any) -> None:
        self.total[fld] += 1
        if real == got:
            self.agree[fld] += 1
            return
        d = Disagreement(case, k, fld, real, got)
        d.klass = next((name for name, test in KNOWN.items() if test(d)), "unexplained")
        self.disagreements.append(d)

    def share(self, fld: str) -> float:
        """Exact agreement."""
        return self.agree[fld] / self.total[fld] if self.total[fld] else 1.0

    def random(self, fld: str) -> int:
        return sum(d.field == fld and d.klass in RANDOM for d in self.disagreements)

    def within_kueue(self, fld: str) -> float:
        """Agreement with one of the outcomes Kueue gives: exact, or a class where Kueue picks at random
        between kgpu's answer and another (``RANDOM``)."""
        return (self.agree[fld] + self.random(fld)) / self.total[fld] if self.total[fld] else 1.0

    def table(self) -> str:
        lines = [f"  {'field':<14}{'agree':>8}{'of':>8}{'share':>9}  {'with Kueue picking at random':>28}"]
        for fld in FIELDS:
            lines.append(
                f"  {fld:<14}{self.agree[fld]:>8}{self.total[fld]:>8}{self.share(fld):>9.1%}  "
                f"{self.within_kueue(fld):>28.1%}"
            )
        classes = Counter(d.klass for d in self.disagreements)
        if classes:
            lines.append("  classes: " + ", ".join(f"{c} {n}" for c, n in sorted(classes.items())))
        return "\n".join(lines)


def compare(case: Case, outcomes: dict[Key, Any], tally: Tally) -> None:
    """Adds one step's comparison to ``tally``; ``outcomes``: ``settle(case.objects).workloads``."""
    for k, real in sorted(case.real.items()):
        out = outcomes.get(k)
        if out is None:
            for fld in FIELDS:
                tally.add(case, k, fld, "present", "missing")
            continue
        tally.add(case, k, "admitted", real.admitted, out.admitted)
        tally.add(case, k, "cluster queue", real.cluster_queue, out.cluster_queue)
        if real.admitted and out.admitted:
            tally.add(case, k, "flavors", real.flavors, out.flavors)
        if not real.admitted and not out.admitted:
            want = (real.reason, real.message)
            if real.alternatives and out.reason == real.reason and out.message in real.alternatives:
                want = (out.reason, out.message)  # one of the messages Kueue keeps writing for this head
            tally.add(case, k, "message", want, (out.reason, out.message))
        by = real.preempted_by if real.evicted_now else out.preempted_by  # known only for this step's
        tally.add(
            case,
            k,
            "eviction",
            (real.evicted, real.evicted_reason, real.evicted_message, by),
            (out.evicted, out.evicted_reason, out.evicted_message, out.preempted_by),
        )

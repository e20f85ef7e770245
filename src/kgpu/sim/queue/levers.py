"""What would let a pending Workload start now: changes an administrator can make, each re-simulated.

For a Workload Kueue leaves pending, kgpu changes the objects the way the administrator would and settles
them again (``kgpu.sim.queue.admission.settle``); a change is a lever only when that settle admits the
Workload. Nothing is read off the pending message:

- ``quota``: raise the ClusterQueue's nominalQuota in one of its flavors, for each resource the Workload asks
  more of than the flavor has left (its request less nominal minus used, in Kueue's units). The least raise is
  found on the settles themselves: the shortfall times 1, 2, 4, ... 256, then bisecting between the last that
  failed and the first that worked (in 16ths), rounded up to whole CPUs and GiB and settled once more. It
  counts what Workloads ahead of this one take first: they sort ahead (priority, then age) for the new quota
  too, so behind a long queue the raise is large, or beyond 256 times and not offered.
- ``borrowing``: in a cohort, drop the borrowingLimit of the resources it asks for in a flavor (it may then
  borrow whatever the cohort has unused).
- ``priority``: the lowest WorkloadPriorityClass above its own with which it is admitted (set on the job as
  the ``kueue.x-k8s.io/priority-class`` label), and the Workloads it would then preempt.

Each lever also names the other pending Workloads the change admits, and those admitted now that it would
leave pending (it takes their place). The cost is one ``settle`` of all the objects per try, at most
``MAX_TRIES`` per Workload.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kgpu.errors import InputError
from kgpu.model.kueue import KueueObjects, read_kueue
from kgpu.model.kueue_resources import CPU, quantity_string
from kgpu.sim.queue.admission import Settled, settle

Key = tuple[str, str]
MAX_TRIES = 32  # settles per Workload, all levers together
DOUBLINGS = tuple(2**i for i in range(9))  # a quota raise is tried up to 256 times the shortfall
STEPS = 16  # resolution of the least quota raise, in parts of the last doubling
GIB = 1 << 30
WORKLOAD_PRIORITY_GROUP = "kueue.x-k8s.io"


@dataclass(frozen=True, slots=True)
class Lever:
    kind: str  # quota, borrowing, priority
    change: str  # in words
    object: str  # "ClusterQueue/name", "Workload/ns/name"
    fields: dict[str, str | int | None]  # field path -> new value (None: removed)
    flavors: dict[str, dict[str, str]]  # what the Workload gets with it
    preempts: tuple[Key, ...] = ()
    also: tuple[Key, ...] = ()  # other pending Workloads the change admits too
    displaces: tuple[Key, ...] = ()  # admitted without the change, pending with it (not preempted)


def _meta(o: Mapping[str, Any]) -> Mapping[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _key(o: Mapping[str, Any]) -> Key:
    m = _meta(o)
    return str(m.get("namespace") or "default"), str(m.get("name") or "")


class _Trial:
    """Settles the objects with one object replaced, counting the tries."""

    def __init__(self, objects: Sequence[dict[str, Any]], source: str, base: Settled, key: Key) -> None:
        self.objects = list(objects)
        self.source = source
        self.base = base
        self.key = key
        self.tries = 0

    def run(self, index: int, replaced: dict[str, Any]) -> Settled | None:
        if self.tries >= MAX_TRIES:
            return None
        self.tries += 1
        objects = [*self.objects[:index], replaced, *self.objects[index + 1 :]]
        try:
            return settle(objects, source=self.source)
        except InputError:  # the change made an object the API server would refuse (a quota past int64)
            return None

    def admits(self, s: Settled | None) -> bool:
        return s is not None and s.workloads.get(self.key) is not None and s.workloads[self.key].admitted

    def lever(
        self, s: Settled, kind: str, change: str, obj: str, fields: dict[str, str | int | None]
    ) -> Lever:
        o = s.workloads[self.key]
        preempts = tuple(sorted(k for k, w in s.workloads.items() if w.preempted_by == self.key))
        before = {k for k, w in self.base.workloads.items() if w.admitted}
        after = {k for k, w in s.workloads.items() if w.admitted}
        also = tuple(sorted(after - before - {self.key}))
        displaces = tuple(sorted(before - after - set(preempts)))
        flavors = {p: dict(f) for p, f in o.flavors.items()}
        return Lever(kind, change, obj, fields, flavors, preempts, also, displaces)


def levers(objects: Sequence[dict[str, Any]], key: Key, *, source: str, base: Settled) -> list[Lever]:
    """The levers for the Workload ``key`` (module docstring); [] when it is admitted or none works."""
    outcome = base.workloads.get(key)
    if outcome is None or outcome.admitted or outcome.cluster_queue is None:
        return []
    k = read_kueue(objects, source)
    wl = next((w for w in k.workloads if w.key == key), None)
    cq = k.cluster_queues.get(outcome.cluster_queue)
    usage = base.cluster_queues.get(outcome.cluster_queue)
    if wl is None or cq is None or usage is None or not usage.active:
        return []
    index = {(str(o.get("kind")), *_key(o)): i for i, o in enumerate(objects)}
    cq_at = index.get(("ClusterQueue", "default", cq.name))
    wl_at = index.get(("Workload", *key))
    if cq_at is None or wl_at is None:
        return []
    trial = _Trial(objects, source, base, key)
    total: dict[str, int] = {}
    for ps in wl.podsets:
        for res, v in ps.total().items():
            total[res] = total.get(res, 0) + v
    out = _quota(trial, objects[cq_at], cq_at, cq, usage.resources, total)
    if cq.cohort:
        out += _borrowing(trial, objects[cq_at], cq_at, cq, total)
    out += _priority(trial, objects[wl_at], wl_at, wl.priority, k)
    return out


def _quota_entry(spec: dict[str, Any], flavor: str, resource: str) -> tuple[dict[str, Any], str] | None:
    """The ``resources[]`` entry of a flavor's quota in a ClusterQueue dict, and its field path."""
    for i, rg in enumerate(spec.get("resourceGroups") or ()):
        for j, fq in enumerate(rg.get("flavors") or ()):
            if fq.get("name") != flavor:
                continue
            for n, r in enumerate(fq.get("resources") or ()):
                if r.get("name") == resource:
                    return r, f"spec.resourceGroups[{i}].flavors[{j}].resources[{n}]"
    return None


def _raised(
    cq_doc: dict[str, Any], flavor: str, quotas: Mapping[str, Any], extra: Mapping[str, int]
) -> dict[str, Any]:
    """The ClusterQueue with its nominalQuota in ``flavor`` raised by ``extra`` per resource."""
    doc = copy.deepcopy(cq_doc)
    for res, more in extra.items():
        entry = _quota_entry(doc.get("spec") or {}, flavor, res)
        if entry is not None:
            entry[0]["nominalQuota"] = quantity_string(res, quotas[res].nominal + more)
    return doc


def _unlimited(
    cq_doc: dict[str, Any], flavor: str, resources: Sequence[str]
) -> tuple[dict[str, Any], dict[str, str | int | None]]:
    """The ClusterQueue without its borrowingLimit in ``flavor`` for ``resources``, and the fields removed."""
    doc = copy.deepcopy(cq_doc)
    fields: dict[str, str | int | None] = {}
    for res in resources:
        entry = _quota_entry(doc.get("spec") or {}, flavor, res)
        if entry is not None:
            entry[0].pop("borrowingLimit", None)
            fields[f"{entry[1]}.borrowingLimit"] = None
    return doc, fields


def _round_up(resource: str, value: int) -> int:
    unit = 1000 if resource == CPU else GIB if resource == "memory" else 1
    return -(-value // unit) * unit


def _scaled(short: Mapping[str, int], scale: Fraction, rounded: bool = False) -> dict[str, int]:
    """The shortfall times ``scale``, rounded up, in exact integers (amounts reach 2^63)."""
    out = {}
    for res, v in short.items():
        amount = -(-v * scale.numerator // scale.denominator)
        out[res] = _round_up(res, amount) if rounded else amount
    return out


def _shortfall(
    wanted: Sequence[str], quotas: Mapping[str, Any], used: Mapping[str, Any], total: Mapping[str, int]
) -> dict[str, int]:
    """Per resource, how much more the Workload asks than the flavor's nominal quota has left."""
    short = {}
    for res in wanted:
        q = quotas.get(res)
        u = used.get(res)
        left = max(0, q.nominal - (u.used if u is not None else 0)) if q is not None else 0
        if total[res] > left:
            short[res] = total[res] - left
    return short


def _least_raise(
    trial: _Trial,
    cq_doc: dict[str, Any],
    at: int,
    flavor: str,
    quotas: Mapping[str, Any],
    short: dict[str, int],
) -> tuple[dict[str, int], Settled] | None:
    """The least raise (module docstring) that admits the Workload, with the settle that shows it."""

    def attempt(extra: dict[str, int]) -> Settled | None:
        return trial.run(at, _raised(cq_doc, flavor, quotas, extra))

    top, found = Fraction(0), None
    for doubling in DOUBLINGS:
        s = attempt(_scaled(short, Fraction(doubling)))
        if trial.admits(s):
            top, found = Fraction(doubling), s
            break
    if found is None:
        return None
    low = top / 2 if top > 1 else Fraction(0)
    lo_step, hi_step = 0, STEPS  # in parts of (top - low)
    while hi_step - lo_step > 1:
        mid = (lo_step + hi_step) // 2
        s = attempt(_scaled(short, low + (top - low) * mid / STEPS))
        if s is None:
            break
        if trial.admits(s):
            hi_step, found = mid, s
        else:
            lo_step = mid
    scale = low + (top - low) * hi_step / STEPS
    best = _scaled(short, scale)
    rounded = _scaled(short, scale, True)
    if rounded != best:
        s = attempt(rounded)
        if s is not None and trial.admits(s):
            best, found = rounded, s
    assert found is not None
    return best, found


def _quota(
    trial: _Trial,
    cq_doc: dict[str, Any],
    at: int,
    cq: Any,
    used: Mapping[str, Mapping[str, Any]],
    total: Mapping[str, int],
) -> list[Lever]:
    out = []
    for rg in cq.resource_groups:
        wanted = [r for r in rg.covered if total.get(r)]
        for fq in rg.flavors if wanted else ():
            quotas = dict(fq.resources)
            short = _shortfall(wanted, quotas, used.get(fq.name, {}), total)
            got = _least_raise(trial, cq_doc, at, fq.name, quotas, short) if short else None
            if got is None:
                continue
            best, found = got
            fields: dict[str, str | int | None] = {}
            words = []
            for res, extra in sorted(best.items()):
                entry = _quota_entry(cq_doc.get("spec") or {}, fq.name, res)
                new = quantity_string(res, quotas[res].nominal + extra)
                if entry is not None:
                    fields[f"{entry[1]}.nominalQuota"] = new
                words.append(f"{res} from {quantity_string(res, quotas[res].nominal)} to {new}")
            change = f"raise ClusterQueue {cq.name}'s nominalQuota in flavor {fq.name}: {', '.join(words)}"
            out.append(trial.lever(found, "quota", change, f"ClusterQueue/{cq.name}", fields))
    return out


def _borrowing(
    trial: _Trial, cq_doc: dict[str, Any], at: int, cq: Any, total: Mapping[str, int]
) -> list[Lever]:
    out = []
    for rg in cq.resource_groups:
        for fq in rg.flavors:
            limited = [res for res, q in fq.resources if total.get(res) and q.borrowing_limit is not None]
            if not limited:
                continue
            doc, fields = _unlimited(cq_doc, fq.name, limited)
            s = trial.run(at, doc)
            if s is not None and trial.admits(s):
                change = (
                    f"remove ClusterQueue {cq.name}'s borrowingLimit for {', '.join(sorted(limited))} in flavor "
                    f"{fq.name} (it may borrow what cohort {cq.cohort} has unused)"
                )
                out.append(trial.lever(s, "borrowing", change, f"ClusterQueue/{cq.name}", fields))
    return out


def _priority(trial: _Trial, wl_doc: dict[str, Any], at: int, current: int, k: KueueObjects) -> list[Lever]:
    higher = sorted((v, n) for n, v in k.workload_priority_classes.items() if v > current)
    v1beta1 = str(wl_doc.get("apiVersion", "")).endswith("/v1beta1")
    for value, name in higher:
        doc = copy.deepcopy(wl_doc)
        spec = doc.setdefault("spec", {})
        spec["priority"] = value
        fields: dict[str, str | int | None] = {"spec.priority": value}
        if v1beta1:
            spec["priorityClassName"] = name
            spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
            fields["spec.priorityClassName"] = name
        else:
            spec["priorityClassRef"] = {
                "group": WORKLOAD_PRIORITY_GROUP,
                "kind": "WorkloadPriorityClass",
                "name": name,
            }
            fields["spec.priorityClassRef.name"] = name
        s = trial.run(at, doc)
        if s is None:
            break
        if trial.admits(s):
            ns, wl = trial.key
            change = (
                f"give {ns}/{wl} WorkloadPriorityClass {name} (value {value}; the job's label "
                f"kueue.x-k8s.io/priority-class={name})"
            )
            return [trial.lever(s, "priority", change, f"Workload/{ns}/{wl}", fields)]
    return []


__all__ = ["MAX_TRIES", "Lever", "levers"]

"""What the replay knows of each Workload in a snapshot: when it was created, whether it holds quota, and how long
it runs once admitted (kgpu.sim.queue.replay says how the replay uses it).

Runtimes, first found wins: a value given for the job (its Workload's or its controller owner's name); a value
given for its LocalQueue; else the declared limits, the shortest of Kueue's ``spec.maximumExecutionTimeSeconds``
less ``status.accumulatedPastExecutionTimeSeconds`` (v1beta1: ``accumulatedPastExexcutionTimeSeconds``; Kueue
deactivates the Workload when it is reached, pkg/controller/core/workload_controller.go) and the
``activeDeadlineSeconds`` of its Job or RayJob; else an estimate, the spread (shortest, median, longest) of
Admitted -> Finished over the snapshot's finished Workloads of the same LocalQueue (at least three), else of all
of them; else unknown.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.fields import list_at
from kgpu.model.kueue_fields import Obj, time_at

Key = tuple[str, str]
MIN_SAMPLES = 3  # finished Workloads of one LocalQueue before its own spread is used


@dataclass(frozen=True, slots=True)
class Runtime:
    """How long a Workload runs once admitted, and where that comes from."""

    # "given", "queue", "maximumExecutionTimeSeconds", "activeDeadlineSeconds", "estimate" or "unknown"
    source: str
    low: float | None = None  # seconds; equal to high unless estimated
    high: float | None = None

    @property
    def known(self) -> bool:
        return self.low is not None


@dataclass(frozen=True, slots=True)
class Spread:
    """Admitted -> Finished of the snapshot's finished Workloads, in seconds."""

    low: float
    median: float
    high: float
    samples: int


@dataclass(slots=True)
class Entry:
    key: Key
    doc: dict[str, Any]
    created: float
    queue: str
    finished: bool
    holding: bool  # admitted and holding quota at now
    admitted_at: float | None
    owner: tuple[str, str] | None  # (kind, name) of the controller owner
    max_exec: float | None


def conditions(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = doc.get("status") if isinstance(doc.get("status"), dict) else {}
    conds = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conds, list):
        return {}
    return {c["type"]: c for c in conds if isinstance(c, dict) and isinstance(c.get("type"), str)}


def read(doc: dict[str, Any], source: str) -> Entry:
    o = Obj(doc, "Workload", source, namespaced=True)
    list_at(o.status.get("conditions"), o.at("status.conditions"))
    conds = conditions(doc)

    def true_at(kind: str) -> float | None:
        c = conds.get(kind)
        if c is None or c.get("status") != "True":
            return None
        return (
            time_at(c.get("lastTransitionTime"), o.at(f"status.conditions[{kind}].lastTransitionTime")) or 0.0
        )

    created = time_at(o.meta.get("creationTimestamp"), o.at("metadata.creationTimestamp"))
    status = o.status
    reserved = true_at("QuotaReserved")
    holding = status.get("admission") is not None and reserved is not None and true_at("Evicted") is None
    spec = o.spec
    max_exec = spec.get("maximumExecutionTimeSeconds")
    past = status.get(
        "accumulatedPastExecutionTimeSeconds", status.get("accumulatedPastExexcutionTimeSeconds")
    )
    limit = None
    if isinstance(max_exec, int) and not isinstance(max_exec, bool) and max_exec > 0:
        limit = float(max_exec - (past if isinstance(past, int) and not isinstance(past, bool) else 0))
    owner = None
    for ref in list_at(o.meta.get("ownerReferences"), o.at("metadata.ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            owner = (str(ref.get("kind")), str(ref.get("name")))
    admitted = true_at("Admitted")
    queue = spec.get("queueName")
    return Entry(
        key=(o.namespace, o.name),
        doc=doc,
        created=created if created is not None else -1.0,
        queue=queue if isinstance(queue, str) else "",
        finished=true_at("Finished") is not None,
        holding=holding,
        admitted_at=admitted if admitted is not None else reserved,
        owner=owner,
        max_exec=limit,
    )


def seconds(value: object, where: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 10**10:
        raise InputError(f"a runtime must be a number of seconds >= 0, got {quote(value)}", where=where)
    return float(value)


def deadlines(objects: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], float]:
    """activeDeadlineSeconds of the Jobs and RayJobs in the input, by (namespace, kind, name)."""
    out = {}
    for doc in objects:
        kind = doc.get("kind")
        if kind not in ("Job", "RayJob"):
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
        assert isinstance(meta, dict) and isinstance(spec, dict)
        value = spec.get("activeDeadlineSeconds")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[(str(meta.get("namespace") or "default"), str(kind), str(meta.get("name")))] = float(value)
    return out


def spreads(wls: Sequence[Entry]) -> dict[str, Spread]:
    samples: dict[str, list[float]] = {}
    for w in wls:
        finished = conditions(w.doc).get("Finished")
        if not w.finished or w.admitted_at is None or finished is None:
            continue
        end = time_at(finished.get("lastTransitionTime"), f"Workload {w.key[0]}/{w.key[1]}: Finished")
        if end is None or end < w.admitted_at:
            continue
        for scope in (f"{w.key[0]}/{w.queue}", "all"):
            samples.setdefault(scope, []).append(end - w.admitted_at)
    return {
        scope: Spread(min(v), statistics.median(v), max(v), len(v))
        for scope, v in samples.items()
        if scope == "all" or len(v) >= MIN_SAMPLES
    }


def latest(objects: Iterable[Mapping[str, Any]]) -> float | None:
    """The newest timestamp in the input: creations and condition transitions."""
    newest: float | None = None
    for doc in objects:
        meta = doc.get("metadata")
        stamps = [meta.get("creationTimestamp")] if isinstance(meta, dict) else []
        stamps += [c.get("lastTransitionTime") for c in conditions(doc).values()]
        for s in stamps:
            if isinstance(s, str) and s:
                try:
                    t = datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
                except ValueError:
                    continue
                newest = t if newest is None else max(newest, t)
    return newest


def assign(
    entries: Sequence[Entry],
    spreads: dict[str, Spread],
    given: Mapping[Key, object],
    per_queue: Mapping[Key, object],
    deadlines: Mapping[tuple[str, str, str], float],
) -> dict[Key, Runtime]:
    """Each Workload's runtime (module docstring)."""
    out: dict[Key, Runtime] = {}
    for w in entries:
        ns, name = w.key
        owner = w.owner[1] if w.owner else None
        if (ns, name) in given or (owner and (ns, owner) in given):
            value = given[(ns, name)] if (ns, name) in given else given[(ns, str(owner))]
            s = seconds(value, f"runtime of {ns}/{name}")
            out[w.key] = Runtime("given", s, s)
            continue
        if (ns, w.queue) in per_queue:
            s = seconds(per_queue[(ns, w.queue)], f"runtime of LocalQueue {ns}/{w.queue}")
            out[w.key] = Runtime("queue", s, s)
            continue
        limits = []
        if w.max_exec is not None:
            limits.append((max(w.max_exec, 0.0), "maximumExecutionTimeSeconds"))
        if w.owner is not None and (ns, *w.owner) in deadlines:
            limits.append((deadlines[(ns, *w.owner)], "activeDeadlineSeconds"))
        if limits:
            s, src = min(limits)
            out[w.key] = Runtime(src, s, s)
            continue
        spread = spreads.get(f"{ns}/{w.queue}") or spreads.get("all")
        if spread is not None:
            out[w.key] = Runtime("estimate", spread.low, spread.high)
        else:
            out[w.key] = Runtime("unknown")
    return out

"""``kgpu queue``: will a queued GPU job be admitted by Kueue, with which flavor, and when.

The cluster's Kueue objects (ResourceFlavors, ClusterQueues, Cohorts, LocalQueues, priority classes and the
Workloads with their status) come from ``-c`` files (``kubectl get -o json``, a snapshot, YAML); the jobs
to submit from ``-w`` files become Workloads as Kueue's integrations create them
(:mod:`kgpu.model.kueue_jobs`). :func:`kgpu.sim.queue.admission.settle` decides admission now, in Kueue's
own words, and :func:`kgpu.sim.queue.replay.replay` when each workload starts as running ones finish.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from kgpu.cli.cluster_flags import cluster_options
from kgpu.cli.output import ExitCode, emit, examples, handle_input_errors, output_option, table
from kgpu.cli.queue_view import (
    LEVERS,
    VERDICTS,
    lines,
    quota_table,
)
from kgpu.errors import InputError, quote

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_DURATION = 10 * 365 * 86400  # ten years: beyond it a duration is a typo
SNAPSHOT_KIND = "ClusterSnapshot"
MAX_LEVER_WORKLOADS = 5  # without --job, levers are re-simulated only when at most this many are pending


def parse_duration(text: str, where: str) -> timedelta:
    """``90m``, ``4h``, ``1d12h``, ``3600s``: a positive duration of at most ten years."""
    raw = text.strip().lower()
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(raw):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not raw or pos != len(raw) or total <= 0:
        raise InputError(f"{quote(text)} is not a duration", where=where, hint="e.g. 30m, 4h, 1d12h")
    if total > MAX_DURATION:
        raise InputError(f"{quote(text)} is longer than ten years", where=where)
    return timedelta(seconds=total)


def _key(text: str, where: str) -> tuple[str, str]:
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise InputError(f"{quote(text)} is not NAMESPACE/NAME", where=where)
    return ns, name


def _flatten(docs: Iterable[Any], source: str, what: str = "document") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{what} {n + 1} is not an object", where=source)
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError("object without kind", where=f"{source}: {what} {n + 1}")
        if (kind.endswith("List") or kind == SNAPSHOT_KIND) and "items" in doc:
            items = doc["items"]
            if items is None:
                continue
            if not isinstance(items, list):
                raise InputError("items must be a list", where=f"{source}: {kind}")
            out.extend(_flatten(items, source, f"{kind} item"))
        else:
            out.append(doc)
    return out


def read_files(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Every object of the files (and folders) given, Lists and snapshots flattened, as dicts."""
    from kgpu.cli.files import manifest_files, read_bytes
    from kgpu.model.safeyaml import load_documents

    out: list[dict[str, Any]] = []
    for label, path in manifest_files(paths):
        out.extend(_flatten(load_documents(read_bytes(label, path), label), label))
    return out


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else None


def build(
    cluster: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    *,
    source: str,
    now: datetime | None,
    runtimes: dict[tuple[str, str], timedelta],
    targets: Sequence[tuple[str, str]],
    within: timedelta | None,
    profile: str | None = None,
    step: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The verb's result as a JSON-ready dict (see queue.schema.json)."""
    from kgpu.model.kueue_jobs import read_jobs
    from kgpu.sim.queue.admission import settle
    from kgpu.sim.queue.replay import replay

    submitted = read_jobs([*cluster, *jobs], source=source, created=now) if jobs else None
    if jobs and submitted is not None and not submitted.workloads and not submitted.skipped:
        raise InputError(
            "no Job, JobSet, RayJob or RayCluster (nor a pod Kueue manages) in the -w files",
            where="--workloads",
        )
    new = submitted.workloads if submitted is not None else []
    # the cluster's own jobs already have Workloads in the snapshot; only the -w files' jobs are new
    job_keys = {
        (j.get("metadata", {}).get("namespace") or "default", j.get("metadata", {}).get("name"))
        for j in jobs
        if isinstance(j.get("metadata"), dict)
    }
    new = [w for w in new if _owner_key(w) in job_keys]
    objects = [*cluster, *new]
    if now is None and not any(
        isinstance(o.get("metadata"), dict) and o["metadata"].get("creationTimestamp")
        for o in objects
        if o.get("kind") == "Workload"
    ):
        now = datetime.now(UTC)  # nothing in the input says when it is: the jobs are submitted now
    settled = settle(objects, source=source)
    workload_runtimes: dict[tuple[str, str], timedelta] = {}
    queue_runtimes: dict[tuple[str, str], timedelta] = {}
    local_queues = {
        (o.get("metadata", {}).get("namespace"), o.get("metadata", {}).get("name"))
        for o in objects
        if o.get("kind") == "LocalQueue" and isinstance(o.get("metadata"), dict)
    }
    by_job = {_owner_key(w): _key_of(w) for w in objects if w.get("kind") == "Workload"}
    for key, value in runtimes.items():
        if key in local_queues:
            queue_runtimes[key] = value
        else:
            workload_runtimes[by_job.get(key, key)] = value
    new_keys = [_key_of(w) for w in new]
    wanted = [by_job.get(t, t) for t in targets]
    unknown = [t for t, w in zip(targets, wanted, strict=True) if w not in settled.workloads]
    if unknown:
        raise InputError(f"no Workload or job {unknown[0][0]}/{unknown[0][1]} in the input", where="--job")
    if not wanted:
        wanted = sorted({*new_keys, *(k for k, o in settled.workloads.items() if not o.admitted)})
    timeline = replay(
        objects,
        source=source,
        now=now,
        runtimes=workload_runtimes,
        queue_runtimes=queue_runtimes,
        targets=wanted or None,
        settle=settle,
    )
    now = timeline.now
    from kgpu.cli.queue_place import place

    admitted = {
        k: w
        for w in objects
        if w.get("kind") == "Workload"
        for k in [_key_of(w)]
        if k in wanted and settled.workloads[k].admitted
    }
    placed = (
        place(
            cluster,
            admitted,
            {k: settled.workloads[k].flavors for k in admitted},
            source=source,
            profile=profile,
        )
        if admitted
        else {}
    )
    from kgpu.sim.queue.levers import levers

    pending = [k for k in wanted if not settled.workloads[k].admitted]
    asked = pending if targets or len(pending) <= MAX_LEVER_WORKLOADS else []
    found = {}
    for n, k in enumerate(asked, 1):
        if step is not None:
            step(f"what would let {k[0]}/{k[1]} start now ({n}/{len(asked)}, each change re-simulated)")
        found[k] = levers(objects, k, source=source, base=settled)
    left = len(pending) - len(asked)
    levers_note = (
        f"what would let a Workload start now is re-simulated for up to {MAX_LEVER_WORKLOADS} pending Workloads "
        f"(each takes about 20 settles of the whole cluster); {left} are pending: ask with --job NS/NAME"
        if left
        else ""
    )
    rows = []
    for key in wanted:
        o = settled.workloads[key]
        start = timeline.starts.get(key)
        earliest = start.earliest if start else None
        latest = start.latest if start else None
        on_time = o.admitted or (within is not None and latest is not None and latest - now <= within)
        rows.append(
            {
                "namespace": key[0],
                "name": key[1],
                "submitted": key in new_keys,
                "cluster_queue": o.cluster_queue,
                "admitted": o.admitted,
                "reason": o.reason,
                "message": o.message,
                "flavors": o.flavors,
                "evicted": o.evicted,
                "evicted_message": o.evicted_message,
                "start": {
                    "earliest": _iso(earliest),
                    "latest": _iso(latest),
                    "runtime_source": start.runtime.source if start else "unknown",
                    "note": start.note if start else "",
                },
                "ahead": [f"{a[0]}/{a[1]}" for a in (start.ahead if start else ())],
                "ahead_count": start.ahead_count if start else 0,
                "on_time": on_time,
                "placement": placed.get(key),
                "levers": [_lever_row(lv) for lv in found.get(key, ())],
            }
        )
    queues = quota_rows(settled)
    skipped = [
        {"kind": s.kind, "namespace": s.namespace, "name": s.name, "reason": s.reason}
        for s in (submitted.skipped if submitted is not None else [])
        if (s.namespace, s.name) in job_keys
    ]
    return {
        "now": _iso(now),
        "within": within.total_seconds() if within is not None else None,
        "cluster_queues": queues,
        "workloads": rows,
        "skipped_jobs": skipped,
        "replay": {"events": timeline.events, "estimated": timeline.estimated, "limit": timeline.limit},
        "warnings": list(settled.warnings)
        + ([] if settled.cluster_queues else ["no ClusterQueue in the input: Kueue admits nothing"]),
        "levers_note": levers_note,
    }


def _lever_row(lv: Any) -> dict[str, Any]:
    return {
        "kind": lv.kind,
        "change": lv.change,
        "object": lv.object,
        "fields": dict(lv.fields),
        "flavors": lv.flavors,
        "preempts": [f"{ns}/{n}" for ns, n in lv.preempts],
        "also_admits": [f"{ns}/{n}" for ns, n in lv.also],
        "displaces": [f"{ns}/{n}" for ns, n in lv.displaces],
    }


def quota_rows(settled: Any) -> list[dict[str, Any]]:
    """Per ClusterQueue, flavor and resource: nominal quota, use and borrowing (queue.schema.json's
    ``cluster_queues``), from ``settle``'s result."""
    rows = []
    for name, usage in sorted(settled.cluster_queues.items()):
        for flavor, resources in sorted(usage.resources.items()):
            for resource, r in sorted(resources.items()):
                rows.append(
                    {
                        "cluster_queue": name,
                        "cohort": usage.cohort,
                        "active": usage.active,
                        "flavor": flavor,
                        "resource": resource,
                        "nominal": r.nominal,
                        "used": r.used,
                        "borrowed": r.borrowed,
                        "admitted": usage.admitted,
                        "pending": usage.pending,
                    }
                )
    return rows


def _key_of(w: dict[str, Any]) -> tuple[str, str]:
    meta = w.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name") or ""


def _owner_key(w: dict[str, Any]) -> tuple[str, str]:
    meta = w.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    name = owners[0].get("name") if owners and isinstance(owners[0], dict) else None
    return meta.get("namespace") or "default", name or meta.get("name") or ""


def render(data: dict[str, Any]) -> str:
    from kgpu.cli.output import style

    out = [quota_table(data["cluster_queues"])]
    rows, notes, levers = lines(data)
    for row in rows:
        row[2] = style(row[2], fg="green" if row[2] == "admitted" else "yellow")
    notes = [f"  {n}" for n in notes]
    levers = [f"  {n}" for n in levers]
    out += [
        "",
        table(
            ["WORKLOAD", "CLUSTERQUEUE", "STATUS", "FLAVORS", "STARTS", "AHEAD"],
            rows,
            title=f"Workloads (starts relative to {data['now']})",
        ),
    ]
    if notes:
        out += ["", f"{VERDICTS}:", *notes]
    if levers:
        out += ["", f"{LEVERS}:", *levers]
    if data["levers_note"]:
        out.append(f"  ({data['levers_note']})")
    for s in data["skipped_jobs"]:
        out.append(f"  {s['kind']} {s['namespace']}/{s['name']}: no Workload: {s['reason']}")
    if data["replay"]["estimated"]:
        out.append(
            "\nSome runtimes are estimates from finished Workloads: starts are ranges (--runtime to give one)."
        )
    if data["replay"]["limit"]:
        out.append(f"The replay stopped at its {data['replay']['limit']}.")
    out += [f"warning: {w}" for w in data["warnings"]]
    return "\n".join(out)


@click.command(
    name="queue",
    epilog=examples(
        (
            "on the live cluster of the kubeconfig context: which pending Workloads Kueue admits now, with which "
            "flavor, and when the others start",
            "kgpu queue",
        ),
        (
            "will my job start within 4 hours (exit 0 yes, 1 no)",
            "kgpu queue -c examples/queue/kueue.yaml -w examples/queue/jobs.yaml --within 4h",
        ),
        (
            "one job, running jobs of team-a's queue taking 2h each",
            "kgpu queue -c cluster.json --job team-a/train --runtime team-a/team-a-queue=2h -o json",
        ),
    ),
)
@click.option(
    "-c",
    "--cluster",
    "cluster_paths",
    multiple=True,
    metavar="PATH",
    help="The cluster's Kueue objects and Workloads: a `kgpu snapshot`, `kubectl get -o json` "
    "output or YAML files (folders are read whole; - for standard input). Without -c: the live cluster of the "
    "kubeconfig context, read as `kgpu snapshot` reads it (nothing is written).",
)
@click.option(
    "-w",
    "--workloads",
    "job_paths",
    multiple=True,
    metavar="PATH",
    help="Jobs to submit (Job, JobSet, RayJob, RayCluster with the kueue.x-k8s.io/queue-name label): "
    "each becomes the Workload Kueue would create, arriving now.",
)
@click.option(
    "--job",
    "jobs",
    multiple=True,
    metavar="NS/NAME",
    help="Only these Workloads or jobs (default: every submitted job and every pending Workload).",
)
@click.option(
    "--runtime",
    "runtimes",
    multiple=True,
    metavar="NS/NAME=DURATION",
    help="How long a Workload, job or every Workload of a LocalQueue runs once admitted (30m, 4h, 1d); "
    "otherwise its declared limit, else the spread of the cluster's finished Workloads.",
)
@click.option(
    "--within",
    metavar="DURATION",
    default=None,
    help="Exit 0 only if every Workload shown starts within this (its latest estimate).",
)
@click.option(
    "--now",
    "now_text",
    metavar="TIME",
    default=None,
    help="The replay's start (RFC 3339); default: the newest timestamp in the input.",
)
@click.option(
    "--profile",
    metavar="FILE",
    default=None,
    help="A kgpu profile whose pools launch nodes for admitted pods that fit no existing node (and their cost).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write an HTML page: quota per ClusterQueue, the Workloads, verdicts and levers.",
)
@output_option("table", "json", "yaml")
@cluster_options(all_namespaces=False, namespace=False)
@handle_input_errors
def command(
    cluster_paths: tuple[str, ...],
    job_paths: tuple[str, ...],
    jobs: tuple[str, ...],
    runtimes: tuple[str, ...],
    within: str | None,
    now_text: str | None,
    profile: str | None,
    report: Path | None,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    request_timeout: float,
) -> None:
    """Kueue's answer for queued GPU jobs: admitted now or pending (its QuotaReserved message word for word),
    the ResourceFlavor each pod set gets, and when each starts as the running Workloads finish.

    Admission is Kueue v0.15's: flavors in order with fungibility, nominal quota, borrowing and lending in
    the cohort tree, StrictFIFO / BestEffortFIFO, priorities and preemption (docs/queue.md lists what is not
    modelled; each shows as a warning when the input uses it).

    Exit status: 0 every Workload shown is admitted (with --within: starts in time), 1 some is not, 2 bad input.
    """
    targets = [_key(j, "--job") for j in jobs]
    given: dict[tuple[str, str], timedelta] = {}
    for r in runtimes:
        key, sep, value = r.partition("=")
        if not sep:
            raise InputError(f"{quote(r)} is not NS/NAME=DURATION", where="--runtime")
        given[_key(key, "--runtime")] = parse_duration(value, "--runtime")
    limit = parse_duration(within, "--within") if within is not None else None
    now = None
    if now_text is not None:
        try:
            now = datetime.fromisoformat(now_text.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{quote(now_text)} is not an RFC 3339 time", where="--now") from None
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
    if cluster_paths:
        cluster, source = read_files(cluster_paths), ", ".join(cluster_paths)
    else:
        from kgpu.cli.cluster_flags import access_from
        from kgpu.cli.snapshot_cmd import fetch

        doc = fetch(access_from(kubeconfig, context, None, True, request_timeout))
        cluster = _flatten(doc["items"], "the cluster")
        source = f"cluster {doc['metadata']['context'] or doc['metadata']['server']}"
    submitted = read_files(job_paths) if job_paths else []
    from kgpu.cli.progress import Progress

    with Progress("Kueue: admission now and start times") as progress:
        data = build(
            cluster,
            submitted,
            source=source,
            now=now,
            runtimes=given,
            targets=targets,
            within=limit,
            profile=profile,
            step=progress.step,
        )
    if report is not None:
        from kgpu.cli.files import write_atomic
        from kgpu.cli.report import queue_report

        inputs = [f"cluster {source}"] + ([f"jobs {', '.join(job_paths)}"] if job_paths else [])
        write_atomic(report, queue_report(data, f"Queue: {source}", inputs))
        click.echo(f"wrote {report}", err=True)
    emit(data, output, render)
    ok = all(w["admitted"] or (limit is not None and w["on_time"]) for w in data["workloads"])
    if not ok:
        raise SystemExit(ExitCode.FINDINGS)

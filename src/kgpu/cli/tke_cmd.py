"""``kgpu tke``: Tencent TKE super-node helpers. ``kgpu tke match`` tells which GPU spec a pod gets."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

import click

from kgpu.cli.name_completion import complete_tke_gpu_types
from kgpu.cli.output import PATH, ExitCode, emit, examples, handle_input_errors, output_option, table
from kgpu.errors import InputError, quote
from kgpu.model.nvidia import GPU

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController")
RESOURCES = ("cpu", "memory", GPU)


@click.group(
    name="tke",
    epilog=examples(
        ("which spec a pod gets", "kgpu tke match --gpu-type T4 --gpus 1 --cpu 4 --memory 16Gi"),
        ("every pod template in a manifest", "kgpu tke match -f deploy.yaml"),
    ),
)
def command() -> None:
    """Tencent TKE super-node helpers."""


@command.command(
    name="match",
    epilog=examples(
        (
            "a T4 (else V100) pod asking for 1 GPU, 6 cores, 32Gi",
            "kgpu tke match --gpu-type T4,V100 --gpus 1 --cpu 6 --memory 32Gi",
        ),
        ("every pod template in a file, as JSON", "kgpu tke match -f deploy.yaml -o json"),
        (
            "check explicit gpu-count/cpu/mem annotations",
            "kgpu tke match --gpu-type V100 --gpus 1 --cpu 8 --memory 40Gi --explicit",
        ),
    ),
)
@click.option(
    "--file",
    "-f",
    "files",
    metavar="PATH",
    type=PATH,
    multiple=True,
    help="Pod or workload manifests (YAML/JSON, several documents, '-' for stdin); repeat for more files.",
)
@click.option(
    "--gpu-type",
    "gpu_type",
    shell_complete=complete_tke_gpu_types,
    metavar="TYPES",
    default=None,
    help="eks.tke.cloud.tencent.com/gpu-type: a priority list such as 'T4,V100'.",
)
@click.option("--gpus", "gpus", type=click.IntRange(min=0), default=None, help="GPUs (nvidia.com/gpu).")
@click.option(
    "--cpu", "cpu", metavar="QUANTITY", default=None, help="CPU: cores in auto mode may be 6 or 5500m."
)
@click.option("--memory", "memory", metavar="QUANTITY", default=None, help="Memory, e.g. 32Gi.")
@click.option(
    "--explicit",
    is_flag=True,
    default=False,
    help="Treat --gpus/--cpu/--memory as the gpu-count/cpu/mem annotations (方式 A).",
)
@output_option("table", "json", "yaml")
@handle_input_errors
def match(
    files: tuple[str, ...],
    gpu_type: str | None,
    gpus: int | None,
    cpu: str | None,
    memory: str | None,
    explicit: bool,
    output: str,
) -> None:
    """Which TKE super-node GPU spec a pod gets.

    Explicit mode (all of the gpu-count, cpu and mem annotations) must match a spec exactly; otherwise the
    larger of requests and limits is rounded up to the smallest spec of the first GPU type in the priority
    list that holds it.

    Exit status: 0 every pod matched, 1 some pod has no spec (-o json prints
    {"error": {"code", "message"}} for it), 2 bad input.
    """
    from kgpu.catalog.tke import TkeMatchError
    from kgpu.sim.provisioners.tke.spec import cuda_warning, match_pod_spec

    flags_given = (
        gpu_type is not None or gpus is not None or cpu is not None or memory is not None or explicit
    )
    if files and flags_given:
        raise click.UsageError("give either -f PATH or --gpu-type/--gpus/--cpu/--memory, not both")
    if files.count("-") > 1:
        raise click.UsageError("-f -: standard input can be read once")
    if files:
        inputs: list[Input] = []
        for file in files:  # every file, in order; each must hold a pod template
            read = list(_from_file(file))
            if not read:
                raise InputError(
                    "no Pod or pod template found",
                    where=file,
                    hint="kinds: Pod, " + ", ".join(WORKLOAD_KINDS) + ", CronJob",
                )
            if len(files) > 1:  # the same object may be in two files: say which
                read = [(f"{file}: {label}", a, r, lim, img) for label, a, r, lim, img in read]
            inputs += read
    elif gpu_type is not None:
        inputs = [_from_flags(gpu_type, gpus, cpu, memory, explicit)]
    else:
        raise click.UsageError("give -f PATH, or --gpu-type TYPES with --gpus/--cpu/--memory")

    results: list[dict[str, Any]] = []
    failed = False
    for label, pod_annotations, requests, limits, images in inputs:
        entry: dict[str, Any] = {"object": label} if label else {}
        try:
            found = match_pod_spec(pod_annotations, requests, limits)
            entry.update(found.as_dict())
            warning = cuda_warning(found.gpu_type, images)
            if warning:
                entry["warning"] = warning
        except TkeMatchError as exc:
            failed = True
            entry["error"] = exc.as_dict()
        results.append(entry)

    if output == "table":
        _emit_table(results)
    else:
        emit(results[0] if len(results) == 1 else results, output, str)
    if failed:
        sys.exit(ExitCode.FINDINGS)


def _emit_table(results: list[dict[str, Any]]) -> None:
    rows = []
    for r in results:
        if "error" in r:
            rows.append((r.get("object", "-"), "-", "-", "-", "-", f"error: {r['error']['code']}"))
        else:
            rows.append(
                (r.get("object", "-"), r["gpu_type"], r["gpu_count"], r["cpu"], r["memory"], r["mode"])
            )
    click.echo(table(["OBJECT", "GPU TYPE", "GPUS", "CPU", "MEMORY", "MODE"], rows))
    for r in results:
        if "error" in r:
            click.echo(f"{r.get('object', 'error')}: {r['error']['message']}")
        elif "warning" in r:
            click.echo(f"{r.get('object', 'warning')}: warning: {r['warning']}")


Input = tuple[str, dict[str, str], dict[str, int], dict[str, int], list[str]]


def _from_flags(
    gpu_type: str, gpus: int | None, cpu: str | None, memory: str | None, explicit: bool
) -> Input:
    from kgpu.model.quantity import resource_amount
    from kgpu.sim.provisioners.tke.spec import CPU, GPU_COUNT, GPU_TYPE, MEM

    annotations = {GPU_TYPE: gpu_type}
    if explicit:
        missing = [flag for flag, v in (("--gpus", gpus), ("--cpu", cpu), ("--memory", memory)) if v is None]
        if missing:
            raise click.UsageError(f"--explicit needs {', '.join(missing)}")
        annotations.update({GPU_COUNT: str(gpus), CPU: str(cpu), MEM: str(memory)})
        return "", annotations, {}, {}, []
    requests: dict[str, int] = {GPU: gpus or 0}
    if cpu is not None:
        requests["cpu"] = resource_amount(cpu, milli=True, where="--cpu")
    if memory is not None:
        requests["memory"] = resource_amount(memory, where="--memory")
    return "", annotations, requests, {}, []


def _from_file(path: str) -> Iterator[Input]:
    from kgpu.cli.files import read_text
    from kgpu.model.safeyaml import load_documents

    docs = load_documents(read_text(path), path)
    try:
        for n, doc in enumerate(docs):
            for label, template, field in _templates(doc, f"document {n + 1}"):
                yield _pod_input(label, template, field)
    except InputError as exc:
        raise exc.within(path) from None


def _templates(doc: Any, fallback: str) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """(object label, pod template, field path of the template) for every pod template in a document."""
    from kgpu.model.load import closest

    if not isinstance(doc, Mapping):
        raise InputError(
            f"expected a Kubernetes object (a mapping), got {type(doc).__name__}", where=fallback
        )
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError("object without kind", where=fallback)
    if kind.endswith("List") and "items" in doc:
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise InputError(f"must be a list, got {type(items).__name__}", where=f"{fallback}: items")
        for n, item in enumerate(items):
            yield from _templates(item, f"{fallback}: items[{n}]")
        return
    meta = doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = (meta.get("namespace") if isinstance(meta, Mapping) else None) or "default"
    label = f"{kind} {namespace}/{name}" if isinstance(name, str) and name else f"{kind} ({fallback})"
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError("must be a mapping", where=f"{label}: spec")
    if kind == "Pod":
        yield label, doc, ""
    elif kind in WORKLOAD_KINDS:
        yield label, _mapping(spec.get("template"), label, "spec.template"), "spec.template."
    elif kind == "CronJob":
        job = _mapping(spec.get("jobTemplate"), label, "spec.jobTemplate")
        job_spec = _mapping(job.get("spec"), label, "spec.jobTemplate.spec")
        yield (
            label,
            _mapping(job_spec.get("template"), label, "spec.jobTemplate.spec.template"),
            ("spec.jobTemplate.spec.template."),
        )
    else:
        kinds = ("Pod", *WORKLOAD_KINDS, "CronJob")
        close = [k for k in kinds if k.lower() == kind.lower()] or closest(kind, kinds, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        click.echo(f"warning: {fallback}: ignored kind {quote(kind)}{hint}", err=True)


def _mapping(value: Any, label: str, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError("missing or not a mapping", where=f"{label}: {field}")
    return value


def _pod_input(label: str, template: Mapping[str, Any], prefix: str) -> Input:
    from kgpu.model.quantity import resource_amount

    meta = template.get("metadata") or {}
    raw_annotations = (meta.get("annotations") if isinstance(meta, Mapping) else None) or {}
    if not isinstance(raw_annotations, Mapping):
        raise InputError("must be a mapping", where=f"{label}: {prefix}metadata.annotations")
    annotations: dict[str, str] = {}
    for key, val in raw_annotations.items():
        if not isinstance(val, str):
            raise InputError(
                f"annotation values must be strings, got {quote(val)}",
                where=f"{label}: {prefix}metadata.annotations[{key}]",
                hint=f"quote it: '{val}'",
            )
        annotations[str(key)] = val
    spec = _mapping(template.get("spec"), label, f"{prefix}spec")

    def amounts(containers_field: str) -> list[tuple[dict[str, int], dict[str, int]]]:
        containers = spec.get(containers_field) or []
        if not isinstance(containers, list):
            raise InputError("must be a list", where=f"{label}: {prefix}spec.{containers_field}")
        out = []
        for i, c in enumerate(containers):
            where = f"{label}: {prefix}spec.{containers_field}[{i}].resources"
            if not isinstance(c, Mapping):
                raise InputError(
                    f"must be a mapping, got {type(c).__name__}",
                    where=f"{label}: {prefix}spec.{containers_field}[{i}]",
                )
            res = c.get("resources") or {}
            if not isinstance(res, Mapping):
                raise InputError("must be a mapping", where=where)
            pair: list[dict[str, int]] = []
            for section in ("requests", "limits"):
                values = res.get(section) or {}
                if not isinstance(values, Mapping):
                    raise InputError("must be a mapping", where=f"{where}.{section}")
                parsed: dict[str, int] = {}
                for name in RESOURCES:
                    if name in values:
                        parsed[name] = resource_amount(
                            values[name], milli=name == "cpu", where=f"{where}.{section}.{name}"
                        )
                pair.append(parsed)
            requests, limits = pair
            for name, amount in limits.items():  # API-server defaulting: requests default to limits
                requests.setdefault(name, amount)
            out.append((requests, limits))
        return out

    containers = amounts("containers")
    inits = amounts("initContainers")
    totals: list[dict[str, int]] = [{}, {}]
    for side in (0, 1):  # pod request = max(sum of containers, largest init container), as kube-scheduler
        for pair in containers:
            for name, amount in pair[side].items():
                totals[side][name] = totals[side].get(name, 0) + amount
        for pair in inits:
            for name, amount in pair[side].items():
                totals[side][name] = max(totals[side].get(name, 0), amount)
    images = [
        str(c["image"]) for c in spec.get("containers") or [] if isinstance(c, Mapping) and c.get("image")
    ]
    return label, annotations, totals[0], totals[1], images

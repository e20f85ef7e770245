"""``kgpu doctor``: every known GPU failure mode of a cluster, from a snapshot, with the fix."""

from __future__ import annotations

import contextlib
import gc
import textwrap
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from kgpu.cli.cluster_flags import cluster_options
from kgpu.cli.output import (
    PATH,
    ExitCode,
    emit,
    examples,
    fail_input,
    handle_input_errors,
    headers_wanted,
    output_option,
    style,
    summary_line,
)
from kgpu.errors import InputError

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read
    from kgpu.model.profile import Profile

SEVERITY_TITLES = (("error", "Errors", "red"), ("warning", "Warnings", "yellow"), ("info", "Info", None))


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection while a snapshot is decoded and checked.

    Decoding 150 MiB of JSON allocates millions of containers that all live to the end; every automatic
    collection would walk them again (most of the decode time). Nothing here makes cycles worth collecting
    early, and the collector is back on afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_snapshot(path: str) -> tuple[dict[str, Any], str]:
    """The parsed snapshot document and its label; unreadable or invalid JSON is an InputError."""
    from kgpu.cli.files import manifest_files, read_bytes
    from kgpu.model.safeyaml import load_json

    label, file = next(manifest_files([path]))
    data = read_bytes(label, file)
    try:
        with paused_gc():
            doc = load_json(data, label)
    except InputError as exc:
        raise InputError(exc.message, where=label, hint="give the file `kgpu snapshot -f FILE` wrote") from None
    if not isinstance(doc, dict):
        raise InputError(
            f"expected a ClusterSnapshot or a v1 List (a JSON object), got {type(doc).__name__}", where=label
        )
    return doc, label


def run_doctor(doc: dict[str, Any], source_label: str, output: str, profile: Profile | None = None) -> int:
    """Check one snapshot document and print the report; returns the exit code (0, 1 findings, 2 bad input).

    Shared by ``--snapshot FILE`` and the live path (a document fetched from the cluster).
    """
    from kgpu.doctor import doctor_report

    try:
        with paused_gc():
            report = doctor_report(doc, profile, source=source_label)
    except InputError as exc:
        fail_input(exc)
    data = report.as_dict()
    emit(data, output, render_table)
    return int(ExitCode.FINDINGS if report.errors else ExitCode.OK)


def _indent(text: str, prefix: str) -> str:
    return textwrap.indent(text, prefix, lambda line: True)


def render_table(data: dict[str, Any]) -> str:
    """Findings grouped by severity, errors first; each with its object, message and fix.

    ``--no-headers`` drops the group titles and the summary line, leaving the findings.
    """
    out: list[str] = []
    findings = data["findings"]
    headers = headers_wanted()
    for severity, title, colour in SEVERITY_TITLES:
        group = [f for f in findings if f["severity"] == severity]
        if not group:
            continue
        if headers:
            out.append(style(f"{title} ({len(group)})", fg=colour, bold=True))
            out.append("")
        for f in group:
            out.append(f"  {style('[' + f['check'] + ']', fg=colour)} {f['object']}")
            text = textwrap.fill(f["message"], width=104, break_long_words=False, break_on_hyphens=False)
            out.append(_indent(text, "    "))
            if f["fix"]:
                out.append("    fix:")
                out.append(_indent(f["fix"], "      "))
            out.append("")
    if not headers:
        return "\n".join(out).rstrip("\n")
    if not findings:
        out.append(
            "No findings: device plugin, GPU nodes, pending pods, workloads, CUDA and monitoring look right."
        )
        out.append("")
    summary = {k: v for k, v in data["summary"].items() if k != "checks"}
    line = summary_line(summary)
    cost = summary.get("idle_gpu_cost_per_hour")
    if cost:
        line += f"; idle GPU nodes cost ${cost:.2f}/hour"
    out.append(line)
    return "\n".join(out)


@click.command(
    name="doctor",
    epilog=examples(
        ("the cluster of the current kubeconfig context (read-only)", "kgpu doctor"),
        ("a snapshot saved with `kgpu snapshot`, as JSON for a script", "kgpu doctor --snapshot snapshot.json -o json"),
        (
            "which pool of a profile could run the pending GPU pods",
            "kgpu doctor --snapshot snapshot.json -f kgpu.yaml",
        ),
    ),
)
@click.option(
    "--snapshot",
    "snapshot",
    metavar="FILE",
    type=PATH,
    help="Check this snapshot (`kgpu snapshot -f FILE`, or `kubectl get nodes,pods,ds,events -A -o json`) "
    "instead of the live cluster.",
)
@click.option(
    "--profile",
    "-f",
    "profile",
    metavar="PATH",
    default=None,
    type=PATH,
    help="A cluster profile (kgpu.yaml): its pools say which could run a pending GPU pod, and why not.",
)
@output_option("table", "json", "yaml")
@cluster_options()
@handle_input_errors
def command(snapshot: str | None, profile: str | None, output: str, kubeconfig: str | None, context: str | None,
            namespace: str | None, all_namespaces: bool, request_timeout: float) -> None:
    """Check a cluster for every known GPU failure mode and explain pending GPU pods.

    Device plugin (missing, not Ready, untolerated taints, installed twice, outdated), GPU nodes (no
    allocatable GPUs, untainted, idle, running only non-GPU pods), pending GPU pods (kube-scheduler's reason
    and what would make them run), GPU requests the API server rejects, CUDA images vs node drivers, GPU
    exporters. Each finding gives the YAML to add or the command to run (docs/doctor.md).

    Without --snapshot it reads the live cluster of the kubeconfig context (the same reads as
    `kgpu snapshot`, every namespace unless -n is given; it never writes).

    Exit status: 0 no error-level finding, 1 some error-level finding, 2 bad input or an API error; 130 on
    Ctrl-C, 143 on SIGTERM, 129 on SIGHUP.
    """
    prof = None
    if profile:
        from kgpu.cli.profile_io import load_profile_file

        prof = load_profile_file(profile)
    if snapshot:
        doc, label = read_snapshot(snapshot)
    else:
        from kgpu.cli.cluster_flags import access_from
        from kgpu.cli.snapshot_cmd import fetch

        doc = fetch(access_from(kubeconfig, context, namespace, all_namespaces, request_timeout))
        label = f"cluster {doc['metadata']['context'] or doc['metadata']['server']}"
    raise SystemExit(run_doctor(doc, label, output, prof))

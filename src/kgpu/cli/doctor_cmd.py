"""``kgpu doctor``: every known GPU failure mode of a cluster, from a snapshot, with the fix."""

from __future__ import annotations

import contextlib
import functools
import gc
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from kgpu.cli.cluster_flags import cluster_options
from kgpu.cli.name_completion import complete_selector
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

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read; the checks where they run
    from kgpu.doctor.findings import Finding, Group, Report
    from kgpu.model.profile import Profile

SEVERITY_TITLES = (("error", "Errors", "red"), ("warning", "Warnings", "yellow"), ("info", "Info", None))
SEVERITIES = tuple(s for s, _, _ in SEVERITY_TITLES)


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


@dataclass(frozen=True)
class Selection:
    """Which findings a run reports (``--check``, ``--severity``, ``-n``, ``-l``); the default is all."""

    checks: tuple[str, ...] = ()
    severity: str | None = None
    namespace: str | None = None
    selector: tuple[Requirement, ...] | None = None
    words: tuple[str, ...] = field(default=(), compare=False)  # the flags as given, for the table's header

    @property
    def active(self) -> bool:
        return bool(self.checks or self.severity or self.namespace is not None or self.selector is not None)

    def apply(self, report: Report, doc: dict[str, Any]) -> Report:
        if not self.active:
            return report
        nodes = None if self.selector is None else set(matching_nodes(doc, self.selector))
        return report.select(checks=self.checks, severity=self.severity, namespace=self.namespace, nodes=nodes)


def run_doctor(
    doc: dict[str, Any],
    source_label: str,
    output: str,
    profile: Profile | None = None,
    selection: Selection | None = None,
) -> int:
    """Check one snapshot document and print the report; returns the exit code (0, 1 findings, 2 bad input).

    Shared by ``--snapshot FILE`` and the live path (a document fetched from the cluster). With a
    ``selection`` the report, its summary and the exit code are those of the selected findings.
    """
    from kgpu.doctor import doctor_report

    try:
        with paused_gc():
            report = doctor_report(doc, profile, source=source_label)
    except InputError as exc:
        fail_input(exc)
    selection = selection or Selection()
    total = len(report.findings)
    report = selection.apply(report, doc)
    groups = report.groups()
    data = report.as_dict(groups)
    table = functools.partial(render_table, selection=selection, total=total, groups=groups)
    emit(data, output, table, wide=functools.partial(table, wide=True))
    return int(ExitCode.FINDINGS if report.errors else ExitCode.OK)


# --- selection --------------------------------------------------------------------------------------------

# One requirement of a label selector: (key, operator, values), operator one of = != in notin exists !.
Requirement = tuple[str, str, tuple[str, ...]]
_SET_TERM = re.compile(r"^([^\s!=(),]+)\s+(in|notin)\s*\(([^()]*)\)$")
_KEY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$")


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """kubectl's ``-l`` label selector: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``,
    ``k notin (a,b)``, joined by commas; a malformed one is a ValueError naming the term."""
    terms: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    out: list[Requirement] = []
    for raw in terms:
        term = raw.strip()
        m = _SET_TERM.match(term)
        if m:
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            out.append((m.group(1), m.group(2), values))
            continue
        for op in ("!=", "==", "="):
            key, sep, value = term.partition(op)
            if sep:
                key, value = key.strip(), value.strip()
                if not _KEY.match(key) or any(c in value for c in "=!(), "):
                    raise ValueError(f"invalid requirement {term!r}")
                out.append((key, "!=" if op == "!=" else "=", (value,)))
                break
        else:
            negated = term.startswith("!")
            key = term[1:].strip() if negated else term
            if not _KEY.match(key):
                raise ValueError(f"invalid requirement {term!r}")
            out.append((key, "!" if negated else "exists", ()))
    return tuple(out)


def _matches(labels: dict[str, str], selector: tuple[Requirement, ...]) -> bool:
    for key, op, values in selector:
        has = key in labels
        value = labels.get(key)
        ok = {
            "=": has and value in values,
            "!=": not has or value not in values,
            "in": has and value in values,
            "notin": not has or value not in values,
            "exists": has,
            "!": not has,
        }[op]
        if not ok:
            return False
    return True


def matching_nodes(doc: dict[str, Any], selector: tuple[Requirement, ...]) -> Iterator[str]:
    """Names of the document's nodes whose labels match the selector."""
    for item in doc.get("items") or ():
        if not isinstance(item, dict) or item.get("kind") != "Node":
            continue
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        if isinstance(labels, dict) and _matches({str(k): str(v) for k, v in labels.items()}, selector):
            yield str(meta.get("name", ""))


def _check_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    from kgpu.doctor import all_check_ids

    valid = all_check_ids()
    ids = tuple(dict.fromkeys(c.strip() for v in value for c in v.split(",") if c.strip()))
    unknown = [c for c in ids if c not in valid]
    if unknown:
        raise click.BadParameter(
            f"unknown check {', '.join(map(repr, unknown))}; the checks are: {', '.join(valid)}",
            ctx=ctx,
            param=param,
        )
    return ids


def _complete_checks(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from kgpu.doctor import all_check_ids

    return [c for c in all_check_ids() if c.startswith(incomplete)]


def _selector(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            parse_selector(value)
        except ValueError as exc:
            raise click.BadParameter(f"{exc} in {value!r}", ctx=ctx, param=param) from None
    return value


# --- the table --------------------------------------------------------------------------------------------

WIDTH = 104
SHOWN = 3  # objects named in a group's header line; -o wide names them all
PENDING_REASONS = 5  # distinct reasons of pending GPU pods in the summary


def _indent(text: str, prefix: str) -> str:
    return textwrap.indent(text, prefix, lambda line: True)


def _fill(text: str, indent: str, first: str | None = None) -> str:
    return textwrap.fill(
        text,
        width=WIDTH,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _plural(kind: str, n: int) -> str:
    if n == 1:
        return kind
    return kind + ("es" if kind.endswith(("s", "x", "ch", "sh")) else "s")


def _named(objects: list[str], shown: int = SHOWN) -> str:
    """'Node/a, Node/b, Node/c and 501 more'."""
    head = ", ".join(objects[:shown])
    rest = len(objects) - shown
    return f"{head} and {rest} more" if rest > 0 else head


def _counted(objects: list[str]) -> str:
    kinds = {o.partition("/")[0] for o in objects}
    kind = kinds.pop() if len(kinds) == 1 else "object"
    return f"{len(objects)} {_plural(kind, len(objects))}"


def pending_reason(message: str) -> str:
    """A pending-gpu-pod message cut to why the pod waits: kube-scheduler's filters, or kgpu's placement."""
    from kgpu.sim.scheduler.plugins.defaultpreemption import filters_part

    head = message.split(" (the snapshot has", 1)[0].split(" (the cluster's", 1)[0]
    if head.startswith("Pending, but"):
        return head.split(";", 1)[0]
    return filters_part(head).strip()


def _pending_lines(findings: list[Finding], pending_total: int) -> list[str]:
    """The pending GPU pods and why, pods with one reason on one line, the commonest reasons first."""
    from kgpu.doctor.pending import CHECK as PENDING

    pods = [f for f in findings if f.check == PENDING]
    if not pods:
        return [f"Pending GPU pods: {'none' if not pending_total else f'{pending_total}, none selected'}"]
    reasons: dict[str, list[str]] = {}
    for f in pods:
        reasons.setdefault(pending_reason(f.message), []).append(f.object)
    ordered = sorted(reasons.items(), key=lambda kv: -len(kv[1]))
    out = [f"Pending GPU pods ({len(pods)}), why (the pending-gpu-pod findings below say what would make them run):"]
    for reason, refs in ordered[:PENDING_REASONS]:
        out.append(_fill(f"{_named(refs)}: {reason}", "      ", first="  "))
    if len(ordered) > PENDING_REASONS:
        more = ordered[PENDING_REASONS:]
        out.append(f"  and {sum(len(r) for _, r in more)} more pods for {len(more)} other reasons")
    return out


def _summary_lines(
    data: dict[str, Any], findings: list[Finding], groups: list[Group], selection: Selection, total: int
) -> list[str]:
    s = data["summary"]
    checks = len(s["checks"])
    line = (
        f"{s['errors']} errors, {s['warnings']} warnings, {s['info']} info: {len(groups)} "
        f"{'group' if len(groups) == 1 else 'groups'} from {checks} {'check' if checks == 1 else 'checks'}"
    )
    out = [style(line, bold=True)]
    if selection.active:
        out.append(f"selected with {' '.join(selection.words)}: {len(findings)} of {total} findings")
    cluster = (
        f"looked at {s.get('nodes', 0)} nodes ({s.get('gpu_nodes', 0)} with GPUs), {s.get('pods', 0)} pods"
    )
    cost = s.get("idle_gpu_cost_per_hour")
    if cost:
        cluster += f"; idle GPU nodes cost ${cost:.2f}/hour"
    out.append(cluster)
    out.extend(_pending_lines(findings, int(s.get("pending_gpu_pods", 0))))
    out.append("")
    return out


def _group_lines(group: Group, colour: str | None, wide: bool) -> list[str]:
    first = group.first
    tag = style("[" + group.check + "]", fg=colour)
    if group.count == 1:
        out = [f"  {tag} {first.object}"]
    else:
        out = [f"  {tag} {_counted(group.objects)}: {_named(group.objects)}"]
    out.append(_fill(first.message, "    "))
    if not group.same_message and not wide:
        out.append("    (numbers in the message differ between them: -o wide or -o json gives each)")
    if first.fix:
        if group.count == 1:
            out.append("    fix:")
        elif group.same_fix:
            out.append(f"    fix (the same for all {group.count}):")
        else:
            out.append(f"    fix for {first.object} (for each of the others the same, with its name):")
        out.append(_indent(first.fix, "      "))
    if wide and group.count > 1:
        out.append(f"    all {group.count}:")
        for f in group.findings:
            out.append(f"      {f.object}")
            if not group.same_message:
                out.append(_fill(f.message, "        "))
    out.append("")
    return out


def render_table(
    data: dict[str, Any],
    *,
    selection: Selection | None = None,
    total: int | None = None,
    groups: list[Group] | None = None,
    wide: bool = False,
) -> str:
    """A summary (counts by severity, the pending GPU pods and why), then the findings grouped by check and
    root cause, errors first: each group counts its objects, names the first few (``-o wide``: all) and
    gives one fix.

    ``--no-headers`` drops the summary, the severity titles and the last line, leaving the groups.
    """
    from kgpu.doctor.findings import Finding, group_findings

    selection = selection or Selection()
    if groups is None:
        groups = group_findings(Finding(**f) for f in data["findings"])
    findings = [f for g in groups for f in g.findings]
    headers = headers_wanted()
    out: list[str] = []
    if headers:
        out.extend(_summary_lines(data, findings, groups, selection, len(findings) if total is None else total))
    for severity, title, colour in SEVERITY_TITLES:
        of_severity = [g for g in groups if g.severity == severity]
        if not of_severity:
            continue
        if headers:
            n = sum(g.count for g in of_severity)
            grouped = f"{len(of_severity)} {'group' if len(of_severity) == 1 else 'groups'}"
            out.append(style(f"{title} ({n}, in {grouped})", fg=colour, bold=True))
            out.append("")
        for group in of_severity:
            out.extend(_group_lines(group, colour, wide))
    if not headers:
        return "\n".join(out).rstrip("\n")
    if not findings:
        if selection.active:
            out.append(f"No findings selected ({total} in all without {' '.join(selection.words)}).")
        else:
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
@click.option(
    "--check",
    "checks",
    metavar="ID",
    multiple=True,
    callback=_check_ids,
    shell_complete=_complete_checks,
    help="Only this check's findings (repeat it, or give a comma-separated list, for several). The ids are "
    "the ones in brackets in the report and in docs/doctor.md; an unknown id lists them.",
)
@click.option(
    "--severity",
    type=click.Choice(SEVERITIES, case_sensitive=False),
    default=None,
    help="Only findings at this severity or above: error, warning (errors and warnings) or info (all, the "
    "default).",
)
@click.option(
    "-l",
    "--selector",
    shell_complete=complete_selector,
    metavar="SELECTOR",
    default=None,
    callback=_selector,
    help="Only findings about nodes whose labels match this label selector (as kubectl's: "
    "'nvidia.com/gpu.product=NVIDIA-A10G', 'pool in (a,b)', '!spot'); findings about other objects are "
    "left out.",
)
@output_option("table", "wide", "json", "yaml")
@cluster_options()
@handle_input_errors
def command(snapshot: str | None, profile: str | None, checks: tuple[str, ...], severity: str | None,
            selector: str | None, output: str, kubeconfig: str | None, context: str | None,
            namespace: str | None, all_namespaces: bool, request_timeout: float) -> None:
    """Check a cluster for every known GPU failure mode and explain pending GPU pods.

    Device plugin (missing, not Ready, untolerated taints, installed twice, outdated), GPU nodes (no
    allocatable GPUs, untainted, idle, running only non-GPU pods), pending GPU pods (kube-scheduler's reason
    and what would make them run), GPU requests the API server rejects, CUDA images vs node drivers, GPU
    exporters. Each finding gives the YAML to add or the command to run (docs/doctor.md).

    The table starts with a summary: the findings by severity and the pending GPU pods with why they wait.
    Then the findings, errors first, grouped by check and root cause (the same message but for the object's
    name and numbers): each group counts its objects, names the first three and gives one fix, that of the
    first object (for the others the same with their names). -o wide names every object of a group; -o json
    and -o yaml list every finding, and the groups.

    Select findings with --check ID (repeatable), --severity (the least severe to show), -n NS (objects in
    that namespace; cluster-scoped ones such as nodes are left out) and -l SELECTOR (nodes by label). The
    summary and the exit status are those of the findings selected.

    Without --snapshot it reads the live cluster of the kubeconfig context (the same reads as
    `kgpu snapshot`, every namespace unless -n is given; it never writes).

    Exit status: 0 no error-level finding, 1 some error-level finding, 2 bad input or an API error; 130 on
    Ctrl-C, 143 on SIGTERM, 129 on SIGHUP.
    """
    ns = None if all_namespaces else namespace
    words: list[str] = [f"--check {c}" for c in checks]
    if severity:
        severity = severity.lower()
        words.append(f"--severity {severity}")
    if ns is not None:
        words.append(f"-n {ns}")
    if selector is not None:
        words.append(f"-l {selector}")
    requirements = None if selector is None else parse_selector(selector)
    selection = Selection(checks, severity, ns, requirements, tuple(words))
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
    raise SystemExit(run_doctor(doc, label, output, prof, selection))

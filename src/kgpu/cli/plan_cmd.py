"""``kgpu plan``: where every workload lands on a profile, the nodes it needs, and what they cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kgpu.cli import nodeview
from kgpu.cli.cost_view import by_option, section, workload_cost
from kgpu.cli.output import (
    PATH,
    ExitCode,
    catalog_option,
    emit,
    examples,
    handle_input_errors,
    headers_wanted,
    output_option,
    phase,
    summary_line,
    table,
    warning_codes,
    warnings_footer,
)
from kgpu.cli.plan_compare import (
    caption,
    compare_rows,
    name_of,
    profile_row,
    profile_workload_paths,
    render_compare,
    runs_somewhere,
    unpriced_static_nodes,
    workloads_text,
)
from kgpu.cli.progress import Progress
from kgpu.cli.report import compare_report, plan_report


@click.command(
    name="plan",
    epilog=examples(
        ("the built-in EKS + Karpenter profile and the example GPU workloads", "kgpu plan"),
        (
            "your profile and your workloads, every pod on its own line, cost per namespace",
            "kgpu plan -f kgpu.yaml -w k8s/ -o wide --by namespace",
        ),
        (
            "two profiles of yours on the same workloads, cheapest first",
            "kgpu plan -f a.yaml -f b.yaml -w k8s/ --compare",
        ),
    ),
)
@click.option(
    "--profile",
    "-f",
    "profiles",
    metavar="PATH",
    type=PATH,
    multiple=True,
    help="Cluster profile. Default: ./kgpu.yaml when it exists (as render), else the built-in eks-karpenter "
    "template. Several only with --compare.",
)
@click.option(
    "--workload",
    "-w",
    "workload",
    multiple=True,
    metavar="PATH",
    type=PATH,
    help="Workload manifests. Default: the profile's `workloads`, else the examples of the guide the "
    "profile follows (no profile: every guide's examples but TKE's).",
)
@click.option(
    "--compare",
    is_flag=True,
    help="Plan the same workloads on several profiles, side by side: the -f profiles (one -f: it and every "
    "built-in template; none: every built-in template). Those that run every pod and are fully priced "
    "first, cheapest first; then those with nodes kgpu cannot price; then those where some pod cannot run; "
    "then any that could not be planned.",
)
@click.option(
    "--report",
    "report",
    metavar="FILE.html",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write one self-contained HTML page (no network): node view and cost as SVG, placements.",
)
@click.option(
    "--queue",
    "queue",
    is_flag=True,
    help="Put the jobs behind the profile's own Kueue set-up (its `queues` section, as `kgpu render` writes "
    "it): for each Job, JobSet, RayJob or RayCluster that names a LocalQueue (kueue.x-k8s.io/queue-name), "
    "Kueue's verdict, flavors and start, then where its pods land and what they cost, as `kgpu queue` "
    "prints it (exit 0 every job admitted, 1 some is not).",
)
@by_option
@catalog_option
@output_option("table", "wide", "json", "yaml", "name")
@handle_input_errors
def command(
    profiles: tuple[str, ...],
    workload: tuple[str, ...],
    compare: bool,
    report: Path | None,
    queue: bool,
    by: str,
    output: str,
    catalog: str | None,
) -> None:
    """Place the workloads on the profile's capacity, provision what is missing, and price it.

    Shows where each workload lands, the new nodes with their hourly prices, the cost (spot against
    on-demand) and each workload's share of it, and warnings: GPU pools without a taint, workloads that
    cannot run anywhere and why, empty GPU nodes that stay up.

    Exit status: 0 every pod runs, 1 some pod cannot run anywhere (with --compare: on none of the
    profiles compared), 2 bad input.
    """
    from kgpu.cli.profile_io import load_profile_file
    from kgpu.sim import plan as planner

    if compare:
        _compare(list(profiles), list(workload), report, output, catalog)
    if len(profiles) > 1:
        raise click.UsageError("give one -f PATH, or several with --compare to compare them")
    profile = profiles[0] if profiles else None
    if profile is None and Path("kgpu.yaml").is_file():
        profile = "kgpu.yaml"
    prof = load_profile_file(profile, catalog)
    if queue:
        _queue(prof, profile, list(workload), output, report)
    if output in ("table", "wide"):
        used = (
            f"{profile} ({prof.metadata.name})" if profile else f"the built-in template {prof.metadata.name}"
        )
        click.echo(f"profile: {used}", err=True)
    work = _workloads(list(workload), profile, prof)
    with Progress(f"planning {prof.metadata.name}: placing pods, provisioning nodes"):
        result = planner.plan(prof, work)
    data = plan_data(result, prof, profile, catalog)
    sim = result.simulation
    view = []
    if report is not None or (output in ("table", "wide") and headers_wanted()):
        view = nodeview.pools(
            sim.nodes,
            sim.new_nodes,
            nodeview.profile_pools(prof),
            _baseline_pricer(prof),
            dra_gpus=sim.dra_gpus,
        )
    if report is not None:
        grouped, reasons = placement_rows(data)
        inputs = [f"profile {profile}" if profile else f"the built-in template {prof.metadata.name}"]
        inputs += [f"workloads {', '.join(workload)}"] if workload else []
        inputs += [f"catalog {catalog}"] if catalog else []
        page = plan_report(data, view, grouped, reasons, warnings_footer(data["pods"]), by=by, inputs=inputs)
        _write_report(report, page)
    emit(
        data,
        output,
        lambda d: render_table(d, view, by),
        wide=lambda d: render_wide(d, view, by),
        names=lambda d: [f"pod/{p['name']}" for p in d["pods"]],
    )
    raise SystemExit(ExitCode.FINDINGS if result.unschedulable else ExitCode.OK)


def _queue(prof: Any, profile: str | None, paths: list[str], output: str, report: Path | None = None) -> None:
    """``--queue``: the profile's Kueue objects as the cluster, the jobs submitted now (kgpu.cli.queue_cmd)."""
    from datetime import UTC, datetime

    from kgpu.cli import queue_cmd
    from kgpu.errors import InputError
    from kgpu.render import kueue

    where = profile or f"the built-in template {prof.metadata.name}"
    if prof.queues is None or profile is None:
        raise InputError(
            "--queue needs a profile file with a queues section (teams and their GPU quotas)",
            where=where,
            hint="kgpu init -t kueue-two-teams writes one",
        )
    if not paths and prof.workloads:
        paths = profile_workload_paths(profile, prof)
    if not paths:
        raise InputError(
            "--queue needs the jobs to submit: -w FILES, or the profile's workloads",
            where=where,
            hint="each Job, JobSet, RayJob or RayCluster names its LocalQueue in the kueue.x-k8s.io/queue-name label",
        )
    cluster = kueue.render(prof)
    have = {o["metadata"]["name"] for o in cluster if o["kind"] == "Namespace"}
    for ns in sorted({ns for team in prof.queues.teams for ns in team.namespaces} - have):
        cluster.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            }
        )
    jobs = queue_cmd.read_files(paths)
    with Progress(f"queueing on {prof.metadata.name}: admission, start times, placement"):
        data = queue_cmd.build(
            cluster,
            jobs,
            source=f"{profile} (queues)",
            now=datetime.now(UTC).replace(microsecond=0),
            runtimes={},
            targets=[],
            within=None,
            profile=profile,
        )
    if report is not None:
        from kgpu.cli.report import queue_report

        inputs = [f"profile {profile}", f"jobs {', '.join(paths)}"]
        _write_report(report, queue_report(data, f"Queue for profile {prof.metadata.name}", inputs))
    emit(data, "table" if output in ("wide", "name") else output, queue_cmd.render)
    raise SystemExit(ExitCode.OK if all(w["admitted"] for w in data["workloads"]) else ExitCode.FINDINGS)


def _workloads(paths: list[str], profile: str | None, prof: Any) -> Any:
    """The workloads to plan: -w, else the profile's `workloads`, else (no profile file) every non-TKE
    guide's examples on the built-in profile; None: the examples of the profile's guide (kgpu.sim.plan)."""
    from kgpu.cli.files import load_objects

    if not paths and profile and prof.workloads:
        paths = profile_workload_paths(profile, prof)
    if paths:
        return load_objects(paths)
    if profile is None:
        from kgpu.model.examples import example_workloads

        # The showcase: every non-TKE guide's examples on the built-in profile (it carries the GPU labels
        # they all select). A profile file plans its own guide's examples (kgpu.sim.plan).
        return example_workloads()
    return None


def plan_data(result: Any, prof: Any, profile: str | None, catalog: str | None) -> dict[str, Any]:
    """The plan's JSON: the result, its cost with the sources of its prices, and the cost per workload."""
    from kgpu.sim.cost import price_sources, spot_possible, with_monthly
    from kgpu.sim.provisioners.pools import catalog_for

    data: dict[str, Any] = result.as_dict()
    no_new_nodes = {"spot": 0.0, "on_demand": 0.0, "all_on_demand": 0.0, "savings": 0.0}
    data["cost"] = with_monthly({**no_new_nodes, **data["cost"]})  # baseline and with_baseline too
    unpriced_own = unpriced_static_nodes(prof)
    if unpriced_own:
        data["cost"]["unpriced_baseline_nodes"] = unpriced_own
    sim = result.simulation
    overrides = [f for f in (prof.catalog.file, catalog) if f]
    data["cost"]["price_sources"] = price_sources(prof, sim.new_nodes, overrides)
    data["cost"]["spot_possible"] = spot_possible(prof, sim.new_nodes)
    data["workload_cost"] = workload_cost(sim, _baseline_pricer(prof), result.owned, prof, catalog_for(prof))
    data["profile_file"] = profile  # None: the built-in template
    return data


def _compare(
    profiles: list[str], workload: list[str], report: Path | None, output: str, catalog: str | None
) -> None:
    """--compare (kgpu.cli.plan_compare): plan every profile compared, print the rows, exit."""
    from kgpu.cli.files import load_objects
    from kgpu.cli.profile_io import load_profile_file
    from kgpu.model.examples import profile_examples
    from kgpu.model.profile import TEMPLATES
    from kgpu.sim import plan as planner

    loaded = [(path, load_profile_file(path, catalog)) for path in profiles]  # bad input first: exit 2
    paths = list(workload)
    first_path, first = loaded[0] if loaded else (None, None)
    if not paths and first is not None and first_path is not None and first.workloads:
        paths = profile_workload_paths(first_path, first)
    work = load_objects(paths) if paths else (profile_examples(first) if first is not None else None)
    described = workloads_text(paths, bool(workload), first_path)
    templates = TEMPLATES if len(loaded) < 2 else ()
    raw: list[dict[str, Any]] = []
    steps = len(loaded) + len(templates)
    with Progress("planning") as progress:
        for n, (path, prof) in enumerate(loaded, 1):
            progress.step(f"planning the workloads on {path} ({n}/{steps})")
            raw.append(profile_row(path, prof, work))
        for n, name in enumerate(templates, len(loaded) + 1):
            progress.step(f"planning the workloads on template {name} ({n}/{steps})")
            raw += planner.compare(work, (name,))
    rows = compare_rows(raw)
    compared = caption([p for p, _ in loaded], described)
    if report is not None:
        inputs = [f"profile {p}" for p, _ in loaded] + ([f"workloads {', '.join(paths)}"] if paths else [])
        _write_report(report, compare_report(rows, compared, inputs + ([f"catalog {catalog}"] if catalog else [])))
    emit(
        {"compared": compared, "workloads": described, "compare": rows},
        output,
        render_compare,
        names=lambda d: [name_of(r) for r in d["compare"]],
    )
    raise SystemExit(ExitCode.OK if runs_somewhere(rows) else ExitCode.FINDINGS)


def _baseline_pricer(prof: Any) -> nodeview.PriceOf:
    """Prices of the profile's own nodes as the plan's baseline cost counts them: a static node's
    ``hourlyPrice`` (none: n/a), a node group's nodes at its capacity type (an unmanaged spot group's nodes
    carry no capacity label); anything else from its labels."""
    from kgpu.model.profile import PoolKind
    from kgpu.render import group_names
    from kgpu.sim.provisioners.cluster_autoscaler import capacity_type

    static: dict[str, float | None] = {
        n.name: n.hourly_price for p in prof.pools if p.kind == PoolKind.STATIC for n in p.nodes
    }
    caps = {
        g: capacity_type(p) for p in prof.pools if p.kind == PoolKind.NODE_GROUP for g in group_names(prof, p)
    }

    from kgpu.sim.provisioners.pools import catalog_for

    catalog = catalog_for(prof)

    def price_of(itype: str, capacity: str, labels: Any) -> float | None:
        name = str(labels.get("kubernetes.io/hostname", ""))
        if name in static:
            return static[name]
        group = next((labels[k] for k in nodeview.POOL_LABELS if labels.get(k) in caps), None)
        return nodeview.catalog_price(itype, caps[group] if group else capacity, labels, catalog)

    return price_of


def _write_report(path: Path, html: str) -> None:
    from kgpu.cli.files import write_atomic

    write_atomic(path, html)  # refuses a directory, names the path of any file-system failure
    click.echo(f"wrote {path}", err=True)


def _money(v: Any) -> str:
    return "-" if v is None else f"${v:,.4f}/h"


def _both(v: Any) -> str:
    """``$1.4494/h ($1,058.06/mo)``: the hourly figure and the 730-hour month beside it."""
    from kgpu.catalog.prices import monthly

    return "-" if v is None else f"${v:,.4f}/h (${monthly(v):,.2f}/mo)"


def _group(pod: dict[str, Any]) -> str:
    name: str = pod["name"]
    base, _, idx = name.rpartition("-")
    return base if idx.isdigit() else name


def _where(pod: dict[str, Any]) -> str:
    if pod.get("instance_type"):
        return f"{pod['pool']}: {pod['instance_type']} {pod['capacity_type']} {pod['zone']}"
    return pod["node"] or pod.get("pool") or "-"


def render_wide(data: dict[str, Any], view: list[nodeview.Pool] | None = None, by: str = "workload") -> str:
    """Every pod on its own line, with its node's name, pool, instance type, capacity type and zone."""
    flagged = any(p.get("warnings") for p in data["pods"])
    rows = [
        (
            p["namespace"],
            p["name"],
            phase(p["phase"]),
            p["node"] or "-",
            p.get("pool") or "-",
            p.get("instance_type") or "-",
            p.get("capacity_type") or "-",
            p.get("zone") or "-",
            *((warning_codes(p) or "-",) if flagged else ()),
            p["reason"] or "",
        )
        for p in data["pods"]
    ]
    headers = ("NAMESPACE", "POD", "PHASE", "NODE", "POOL", "INSTANCE TYPE", "CAPACITY", "ZONE")
    text = table(headers + (("WARNINGS", "REASON") if flagged else ("REASON",)), rows)
    if not headers_wanted():
        return text
    out = [f"Plan for profile {data['profile']}", "", text, *warnings_footer(data["pods"]), *_new_nodes(data)]
    if view:
        out += ["", _node_view(view, data)]
    out += _cost(data) + nodeview.shared_cost(data.get("shared_gpus") or [], wide=True)
    out += section(data.get("workload_cost"), by, wide=True)
    return "\n".join(out + _scale_to_zero(data) + _footer(data))


def render_table(data: dict[str, Any], view: list[nodeview.Pool] | None = None, by: str = "workload") -> str:
    if not headers_wanted():
        return _placements(data)[0]
    text, reasons = _placements(data)
    out = [f"Plan for profile {data['profile']}", "", text, *warnings_footer(data["pods"])]
    out += ["", _node_view(view, data)] if view else _new_nodes(data)
    out += _cost(data) + nodeview.shared_cost(data.get("shared_gpus") or [])
    out += section(data.get("workload_cost"), by) + _scale_to_zero(data)
    if reasons:
        out.append("")
        out.append("Why pods cannot run")
        out.extend(f"[{n}] {r}" for r, n in reasons.items())
    out += _footer(data)
    return "\n".join(out)


def _placements(data: dict[str, Any]) -> tuple[str, dict[str, int]]:
    rows, reasons = placement_rows(data)
    flagged = any(codes for *_, codes in rows)
    coloured = [
        (ns, w, phase(ph), where, note, *((codes or "-",) if flagged else ()))
        for ns, w, ph, where, note, codes in rows
    ]
    headers = ("NAMESPACE", "WORKLOAD", "PHASE", "WHERE", "WHY") + (("WARNINGS",) if flagged else ())
    return table(headers, coloured, title="Placements"), reasons


def placement_rows(data: dict[str, Any]) -> tuple[list[tuple[str, str, str, str, str, str]], dict[str, int]]:
    """The placements grouped by workload (and warning codes, the last field), and the footnoted reasons."""
    groups: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}
    for pod in data["pods"]:
        key = (pod["namespace"], _group(pod), pod["phase"], _where(pod), warning_codes(pod))
        groups.setdefault(key, []).append(pod)
    rows: list[tuple[str, str, str, str, str, str]] = []
    reasons: dict[str, int] = {}
    for (ns, base, ph, where, codes), pods in groups.items():
        label = pods[0]["name"] if len(pods) == 1 else f"{base} (x{len(pods)})"
        note = ""
        if pods[0]["reason"]:
            note = f"[{reasons.setdefault(pods[0]['reason'], len(reasons) + 1)}]"
        rows.append((ns, label, ph, where or "-", note, codes))
    return rows, reasons


def _new_nodes(data: dict[str, Any]) -> list[str]:
    out: list[str] = []
    new_nodes = data.get("new_nodes", [])
    if new_nodes:
        out.append("")
        node_rows = [
            (
                n["name"],
                n["pool"],
                n["instance_type"],
                n["capacity_type"],
                n["zone"],
                _money(n["hourly_price"]),
                len(n["pods"]),
            )
            for n in new_nodes
        ]
        out.append(
            table(
                ("NODE", "POOL", "INSTANCE TYPE", "CAPACITY", "ZONE", "PRICE", "PODS"),
                node_rows,
                title="New nodes",
            )
        )
    return out


def _node_view(view: list[nodeview.Pool], data: dict[str, Any]) -> str:
    """The node view, without its own price line: the cost block under it names every price's source."""
    return nodeview.render(view, priced="price_sources" not in data.get("cost", {}))


def _cost(data: dict[str, Any]) -> list[str]:
    from kgpu.catalog.prices import caption, source_lines

    out: list[str] = []
    cost = data.get("cost", {})
    out.append("")
    out.append("Cost")
    if cost.get("unpriced_nodes") and not cost.get("total"):  # $0.00 would read as free
        out.append("  new nodes        n/a: none has a price")
    else:
        out.append(f"  new nodes        {_both(cost.get('total', 0.0))}")
    out += _spot_line(cost)
    if cost.get("baseline"):
        out.append(f"  baseline nodes   {_both(cost.get('baseline'))}  (node groups, static nodes)")
        out.append(f"  with baseline    {_both(cost.get('with_baseline'))}")
    if cost.get("unpriced_nodes"):
        out.append(
            f"  unpriced nodes   {cost['unpriced_nodes']} new node(s) without a price: not in the totals"
        )
    if cost.get("unpriced_baseline_nodes"):
        out.append(
            f"  unpriced nodes   {cost['unpriced_baseline_nodes']} of the profile's own node(s) without a price: "
            "not in the totals"
        )
    sources = cost.get("price_sources")
    if sources is None:  # a plan's JSON from before price sources
        out.append(f"  ({caption()})")
    else:
        out += [f"  {line}" for line in source_lines(sources)]
    from kgpu.cli import nodeview

    out += nodeview.consolidated(data.get("karpenter_consolidated"))
    return out


def _spot_line(cost: dict[str, Any]) -> list[str]:
    """Spot against on-demand for the new nodes; nothing where no pool can be spot (TKE super nodes,
    static nodes, on-demand-only node groups) or no new node is priced."""
    if not cost.get("spot_possible", True) or not cost.get("total"):
        return []
    spot, on_demand = cost.get("spot", 0.0), cost.get("on_demand", 0.0)
    if not spot:
        return [f"    on-demand {_money(on_demand)}; no new node is spot"]
    savings = cost.get("savings", 0.0)
    saves = f"spot saves {_money(savings)}" if savings > 0 else "spot saves nothing at these prices"
    return [
        f"    spot {_money(spot)}, on-demand {_money(on_demand)};"
        f" all on-demand {_money(cost.get('all_on_demand', 0.0))} ({saves})"
    ]


def _scale_to_zero(data: dict[str, Any]) -> list[str]:
    out: list[str] = []
    empty = data.get("scale_to_zero", [])
    if empty:
        out.append("")
        rows2 = [
            (e["node"], e.get("pool") or "-", e.get("removed_by") or "stays", e.get("after") or "-", e["why"])
            for e in empty
        ]
        out.append(
            table(("EMPTY GPU NODE", "POOL", "REMOVED BY", "AFTER", "WHY"), rows2, title="Scale to zero")
        )
    return out


def _footer(data: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if data.get("warnings"):
        out.append("")
        out.append("Warnings")
        out.extend(f"- {w}" for w in data["warnings"])
    out.append("")
    out.append(summary_line(data["summary"]))
    return out

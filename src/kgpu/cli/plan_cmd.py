"""``kgpu plan``: where every workload lands on a profile, the nodes it needs, and what they cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kgpu.cli import nodeview
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
    style,
    summary_line,
    table,
    warning_codes,
    warnings_footer,
)
from kgpu.cli.progress import Progress
from kgpu.cli.report import compare_report, plan_report


@click.command(
    name="plan",
    epilog=examples(
        ("the built-in EKS + Karpenter profile and the example GPU workloads", "kgpu plan"),
        (
            "your profile and your workloads, every pod on its own line",
            "kgpu plan -f kgpu.yaml -w k8s/ -o wide",
        ),
        (
            "the same workloads on every built-in template, cheapest first",
            "kgpu plan -w train.yaml --compare",
        ),
    ),
)
@click.option(
    "--profile",
    "-f",
    "profile",
    metavar="PATH",
    type=PATH,
    default=None,
    help="Cluster profile. Default: ./kgpu.yaml when it exists (as render), else the built-in eks-karpenter template.",
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
    help="Plan the same workloads on every built-in template, side by side: those that run every pod and "
    "are fully priced first, cheapest first; then those with nodes kgpu cannot price; then those where "
    "some pod cannot run; then any that could not be planned.",
)
@click.option(
    "--report",
    "report",
    metavar="FILE.html",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write one self-contained HTML page (no network): node view and cost as SVG, placements.",
)
@catalog_option
@output_option("table", "wide", "json", "yaml", "name")
@handle_input_errors
def command(
    profile: str | None,
    workload: tuple[str, ...],
    compare: bool,
    report: Path | None,
    output: str,
    catalog: str | None,
) -> None:
    """Place the workloads on the profile's capacity, provision what is missing, and price it.

    Shows where each workload lands, the new nodes with their hourly prices, the cost (spot against
    on-demand), and warnings: GPU pools without a taint, workloads that cannot run anywhere and why,
    empty GPU nodes that stay up.

    Exit status: 0 every pod runs, 1 some pod cannot run anywhere (with --compare: on some template),
    2 bad input.
    """
    from kgpu.cli.files import load_objects
    from kgpu.cli.profile_io import load_profile_file
    from kgpu.sim import plan as planner
    from kgpu.sim.cost import price_sources, spot_possible, with_monthly

    if profile is None and not compare and Path("kgpu.yaml").is_file():
        profile = "kgpu.yaml"
    prof = load_profile_file(profile, catalog)
    if not compare and output in ("table", "wide"):
        used = (
            f"{profile} ({prof.metadata.name})" if profile else f"the built-in template {prof.metadata.name}"
        )
        click.echo(f"profile: {used}", err=True)
    paths = list(workload)
    if not paths and profile and prof.workloads:
        base = Path(profile).parent
        paths = [str(base / p) for p in prof.workloads]
    work = load_objects(paths) if paths else None
    if work is None and profile is None and not compare:
        from kgpu.model.examples import example_workloads

        # No profile at all: the showcase, every non-TKE guide's examples on the built-in profile (it carries
        # the GPU labels they all select). A profile file plans its own guide's examples (kgpu.sim.plan).
        work = example_workloads()
    if compare:
        from kgpu.model.profile import TEMPLATES

        raw: list[dict[str, Any]] = []
        with Progress("planning") as progress:
            for n, name in enumerate(TEMPLATES, 1):
                progress.step(f"planning the workloads on template {name} ({n}/{len(TEMPLATES)})")
                raw += planner.compare(work, (name,))
        rows = compare_rows(raw)
        if report is not None:
            _write_report(report, compare_report(rows))
        emit(
            {"compare": rows},
            output,
            render_compare,
            names=lambda d: [f"template/{r['template']}" for r in d["compare"]],
        )
        failing = any(r.get("unschedulable") for r in rows)
        raise SystemExit(ExitCode.FINDINGS if failing else ExitCode.OK)
    with Progress(f"planning {prof.metadata.name}: placing pods, provisioning nodes"):
        result = planner.plan(prof, work)
    data = result.as_dict()
    no_new_nodes = {"spot": 0.0, "on_demand": 0.0, "all_on_demand": 0.0, "savings": 0.0}
    data["cost"] = with_monthly({**no_new_nodes, **data["cost"]})  # baseline and with_baseline too
    unpriced_own = _unpriced_static_nodes(prof)
    if unpriced_own:
        data["cost"]["unpriced_baseline_nodes"] = unpriced_own
    sim = result.simulation
    overrides = [f for f in (prof.catalog.file, catalog) if f]
    data["cost"]["price_sources"] = price_sources(prof, sim.new_nodes, overrides)
    data["cost"]["spot_possible"] = spot_possible(prof, sim.new_nodes)
    data["profile_file"] = profile  # None: the built-in template
    view = []
    if report is not None or (output in ("table", "wide") and headers_wanted()):
        view = nodeview.pools(sim.nodes, sim.new_nodes, nodeview.profile_pools(prof), _baseline_pricer(prof),
                              dra_gpus=sim.dra_gpus)
    if report is not None:
        grouped, reasons = placement_rows(data)
        _write_report(report, plan_report(data, view, grouped, reasons, warnings_footer(data["pods"])))
    emit(
        data,
        output,
        lambda d: render_table(d, view),
        wide=lambda d: render_wide(d, view),
        names=lambda d: [f"pod/{p['name']}" for p in d["pods"]],
    )
    raise SystemExit(ExitCode.FINDINGS if result.unschedulable else ExitCode.OK)


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
        g: capacity_type(p)
        for p in prof.pools
        if p.kind == PoolKind.NODE_GROUP
        for g in group_names(prof, p)
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


def render_wide(data: dict[str, Any], view: list[nodeview.Pool] | None = None) -> str:
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
    return "\n".join(out + _scale_to_zero(data) + _footer(data))


def render_table(data: dict[str, Any], view: list[nodeview.Pool] | None = None) -> str:
    if not headers_wanted():
        return _placements(data)[0]
    text, reasons = _placements(data)
    out = [f"Plan for profile {data['profile']}", "", text, *warnings_footer(data["pods"])]
    out += ["", _node_view(view, data)] if view else _new_nodes(data)
    out += _cost(data) + nodeview.shared_cost(data.get("shared_gpus") or []) + _scale_to_zero(data)
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
    out.append(f"  new nodes        {_both(cost.get('total', 0.0))}")
    out += _spot_line(cost)
    if cost.get("baseline"):
        out.append(f"  baseline nodes   {_both(cost.get('baseline'))}  (node groups, static nodes)")
        out.append(f"  with baseline    {_both(cost.get('with_baseline'))}")
    if cost.get("unpriced_nodes"):
        out.append(f"  unpriced nodes   {cost['unpriced_nodes']} new node(s) without a price: not in the totals")
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


# --compare's order: the rank of a row's status, then its cost (the help says so)
STATUS_ORDER = ("ok", "unpriced", "cannot-run", "skipped")


def _unpriced_static_nodes(prof: Any) -> int:
    """The profile's own nodes without a price (static nodes with no hourlyPrice): the baseline leaves them
    out, so a total over them is not the cluster's cost."""
    from kgpu.model.profile import PoolKind

    return sum(1 for p in prof.pools if p.kind == PoolKind.STATIC for n in p.nodes if n.hourly_price is None)


def compare_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every template's row with its ``status`` and monthly cost, in the order the help promises.

    ``status``: ``ok`` (every pod runs, every node priced), ``unpriced`` (some node, new or the template's
    own, has no price: its total is a floor, not a cost), ``cannot-run`` (some pod cannot run: its cost is
    for less than the workloads), ``skipped`` (the template could not be planned). Only ``ok`` rows are
    comparable; ``comparable_cost`` (new nodes + baseline) is null for the others.
    """
    from kgpu.catalog.prices import monthly
    from kgpu.model.profile import builtin_profile

    out = []
    for r in rows:
        row = dict(r)
        if "skipped" in row:
            row["status"] = "skipped"
            row["comparable_cost"] = None
            out.append(row)
            continue
        try:
            own = _unpriced_static_nodes(builtin_profile(row["template"]))
        except Exception:  # a template that loads for plan loads here; nothing to add otherwise
            own = 0
        row["unpriced_nodes"] = int(row.get("unpriced_nodes") or 0) + own
        total = round(row["hourly_cost"] + row["baseline_cost"], 4)
        row["total_cost"] = total
        row["total_cost_monthly"] = monthly(total)
        if row["unschedulable"]:
            row["status"] = "cannot-run"
        elif row["unpriced_nodes"]:
            row["status"] = "unpriced"
        else:
            row["status"] = "ok"
        row["comparable_cost"] = total if row["status"] == "ok" else None
        out.append(row)
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(out, key=lambda r: (rank[r["status"]], r.get("total_cost") or 0.0, r["template"]))


def _status_text(r: dict[str, Any]) -> str:
    if r["status"] == "cannot-run":
        return f"cannot run {r['unschedulable']} pod(s)"
    if r["status"] == "unpriced":
        return f"{r['unpriced_nodes']} node(s) without a price"
    return str(r["status"])


def render_compare(data: dict[str, Any]) -> str:
    from kgpu.catalog.prices import caption

    rows: list[dict[str, Any]] = data["compare"]
    body = []
    notes = []
    for r in rows:
        if r["status"] == "skipped":
            notes.append(f"{r['template']}: skipped: {r['skipped']}")
            continue
        body.append(
            (
                r["template"],
                style(_status_text(r), fg=None if r["status"] == "ok" else "red" if r["status"] == "cannot-run" else "yellow"),
                r["scheduled"],
                r["new_nodes"],
                _money(r["hourly_cost"]),
                _money(r["baseline_cost"]),
                _money(r["all_on_demand"]),
            )
        )
    text = table(
        ("TEMPLATE", "STATUS", "RUNNING", "NEW NODES", "NEW NODES COST", "BASELINE", "ALL ON-DEMAND"),
        body,
        title="Same workloads on every built-in template (comparable first, cheapest first)",
    )
    if not headers_wanted():
        return text
    planned = [r for r in rows if r["status"] != "skipped"]
    bars = nodeview.cost_bars(
        [(r["template"], r["total_cost"]) for r in planned],
        notes={r["template"]: _status_text(r) for r in planned if r["status"] != "ok"},
    )
    text += "\n\nCost per hour: new nodes + baseline (per month at 730 h)\n" + "\n".join(bars)
    text += f"\n({caption()})"
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text

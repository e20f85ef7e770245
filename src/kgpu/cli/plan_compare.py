"""``kgpu plan --compare``: the same workloads planned on several profiles, side by side.

What is compared: with no ``-f``, every built-in template; with one ``-f``, that profile and every built-in
template; with two or more, those profiles only. The workloads are the same for all: ``-w`` when given, else
the first profile's own (its ``workloads``, else the examples of the guide it follows), else (templates only)
each guide's examples as ``kgpu.sim.plan.compare`` picks them. The caption says both.

Rows are ordered as the help promises (``compare_rows``); only rows that run every pod with every node priced
are comparable. The exit status says whether the workloads can run on anything compared: 0 when some row
runs every pod, 1 when none does, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgpu.cli import nodeview
from kgpu.cli.output import headers_wanted, style, table

# --compare's order: the rank of a row's status, then its cost (the help says so)
STATUS_ORDER = ("ok", "unpriced", "cannot-run", "skipped")


def unpriced_static_nodes(prof: Any) -> int:
    """The profile's own nodes without a price (static nodes with no hourlyPrice): the baseline leaves them
    out, so a total over them is not the cluster's cost."""
    from kgpu.model.profile import PoolKind

    return sum(1 for p in prof.pools if p.kind == PoolKind.STATIC for n in p.nodes if n.hourly_price is None)


def label(row: dict[str, Any]) -> str:
    """How a row is named in tables and charts: the template, or ``file (metadata.name)``."""
    if "template" in row:
        return str(row["template"])
    return f"{row['profile_file']} ({row['profile']})"


def name_of(row: dict[str, Any]) -> str:
    """-o name: ``template/<name>`` or ``profile/<file>``."""
    return f"template/{row['template']}" if "template" in row else f"profile/{row['profile_file']}"


def profile_row(path: str, prof: Any, work: Any) -> dict[str, Any]:
    """A user profile's row: the fields ``kgpu.sim.plan.compare`` gives a template, its own unpriced static
    nodes counted in ``unpriced_nodes``."""
    from kgpu.errors import InputError
    from kgpu.sim import plan as planner

    row: dict[str, Any] = {"profile": prof.metadata.name, "profile_file": path}
    try:
        result = planner.plan(prof, work)
    except InputError as exc:
        return {**row, "skipped": exc.line()}
    summary = result.simulation.summary()
    return {
        **row,
        "scheduled": summary.get("scheduled", 0) + summary.get("provisioned", 0),
        "unschedulable": summary.get("unschedulable", 0),
        "new_nodes": len(result.simulation.new_nodes),
        "hourly_cost": result.cost.get("total", 0.0),
        "baseline_cost": result.baseline_hourly,
        "all_on_demand": result.cost.get("all_on_demand", 0.0),
        "unpriced_nodes": int(result.cost.get("unpriced_nodes", 0) or 0) + unpriced_static_nodes(prof),
    }


def compare_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row with its ``status`` and monthly cost, in the order the help promises.

    ``status``: ``ok`` (every pod runs, every node priced), ``unpriced`` (some node, new or the profile's
    own, has no price: its total is a floor, not a cost), ``cannot-run`` (some pod cannot run: its cost is
    for less than the workloads), ``skipped`` (the profile could not be planned). Only ``ok`` rows are
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
        if "template" in row:  # a user profile's row counts its own unpriced nodes already
            try:
                own = unpriced_static_nodes(builtin_profile(row["template"]))
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
    return sorted(out, key=lambda r: (rank[r["status"]], r.get("total_cost") or 0.0, label(r)))


def runs_somewhere(rows: list[dict[str, Any]]) -> bool:
    """Whether some compared profile runs every pod (the exit status is 0 then)."""
    return any(r["status"] in ("ok", "unpriced") for r in rows)


def caption(profiles: list[str], workloads: str) -> str:
    """What is compared, on what: the table's title and the JSON's ``compared``."""
    if not profiles:
        where = "every built-in template"
    elif len(profiles) == 1:
        where = f"{profiles[0]} and every built-in template"
    else:
        where = ", ".join(profiles)
    return f"{workloads} on {where}"


def workloads_text(paths: list[str], given: bool, first: str | None) -> str:
    """The workloads compared, in words: -w's paths, the first profile's `workloads`, the examples of its
    guide, or (templates only) each guide's."""
    if given:
        return ", ".join(paths)
    if first is not None and paths:
        return f"the workloads of {first} ({', '.join(paths)})"
    if first is not None:
        return f"the example workloads of {first}'s guide"
    return "each guide's example workloads (TKE's own on tke-supernode)"


def _money(v: Any) -> str:
    return "-" if v is None else f"${v:,.4f}/h"


def _status_text(r: dict[str, Any]) -> str:
    if r["status"] == "cannot-run":
        return f"cannot run {r['unschedulable']} pod(s)"
    if r["status"] == "unpriced":
        return f"{r['unpriced_nodes']} node(s) without a price"
    return str(r["status"])


def render_compare(data: dict[str, Any]) -> str:
    from kgpu.catalog.prices import caption as prices_caption

    rows: list[dict[str, Any]] = data["compare"]
    body = []
    notes = []
    for r in rows:
        if r["status"] == "skipped":
            notes.append(f"{label(r)}: skipped: {r['skipped']}")
            continue
        colour = None if r["status"] == "ok" else "red" if r["status"] == "cannot-run" else "yellow"
        body.append(
            (
                label(r),
                style(_status_text(r), fg=colour),
                r["scheduled"],
                r["new_nodes"],
                _money(r["hourly_cost"]),
                _money(r["baseline_cost"]),
                _money(r["all_on_demand"]),
            )
        )
    first = "TEMPLATE" if all("template" in r for r in rows) else "PROFILE"
    title = f"{data.get('compared') or 'Same workloads on every built-in template'} (comparable first, cheapest first)"
    text = table(
        (first, "STATUS", "RUNNING", "NEW NODES", "NEW NODES COST", "BASELINE", "ALL ON-DEMAND"),
        body,
        title=title[:1].upper() + title[1:],
    )
    if not headers_wanted():
        return text
    planned = [r for r in rows if r["status"] != "skipped"]
    bars = nodeview.cost_bars(
        [(label(r), r["total_cost"]) for r in planned],
        notes={label(r): _status_text(r) for r in planned if r["status"] != "ok"},
    )
    text += "\n\nCost per hour: new nodes + baseline (per month at 730 h)\n" + "\n".join(bars)
    text += f"\n({prices_caption()})"
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text


def profile_workload_paths(path: str, prof: Any) -> list[str]:
    """A profile's ``workloads`` entries, relative to its folder."""
    base = Path(path).parent
    return [str(base / p) for p in prof.workloads]

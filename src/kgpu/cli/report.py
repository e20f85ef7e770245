"""``kgpu plan --report plan.html``: one self-contained page with the plan's charts and placements.

No scripts, no fonts, no stylesheets or images from anywhere: inline CSS and inline SVG, so the file opens
offline, attaches to a ticket and renders the same in any browser. The charts are the terminal's: the node
view (a bar per node group for GPU, CPU and memory, grouped by pool, and on shared or MIG nodes a bar per
device resource with its idle slices) and cost bars; the cost split of shared GPUs (per config, and per pod);
the cost per workload (or namespace) with the idle part;
then the placement table, grouped by workload as in the terminal, and the warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from kgpu import __version__
from kgpu.cli.nodeview import (
    POD_HEADERS,
    SHARED_HEADERS,
    SLICES_LEGEND,
    Pool,
    Usage,
    color_for,
    consolidated,
    shared_cost_rows,
    shared_pod_rows,
)

COLORS = {"green": "#2e7d32", "yellow": "#f9a825", "red": "#c62828", "cyan": "#00838f", "empty": "#e0e0e0"}
PHASE_COLORS = {"Scheduled": "#2e7d32", "Provisioned": "#00838f", "Unschedulable": "#c62828"}

CSS = """
body { font: 14px/1.4 system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 24px; color: #212121; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.muted { color: #616161; } table { border-collapse: collapse; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eee; vertical-align: top; }
th { font-weight: 600; border-bottom: 1px solid #bdbdbd; }
svg text { font: 12px system-ui, -apple-system, 'Segoe UI', sans-serif; fill: #212121; }
svg .pool { font-weight: 600; } .num { text-align: right; } code { font-size: 12px; }
.unpriced { color: #ef6c00; } svg text.unpriced { fill: #ef6c00; }
svg { max-width: 100%; height: auto; } .scroll { overflow-x: auto; max-width: 100%; }
pre { font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
@media (max-width: 700px) { body { margin: 8px; } th, td { padding-right: 6px; } }
"""

ROW = 22
LABEL_W = 260
TYPE_W = 250  # instance type, capacity type, new, and the price each
BAR_W = 150
GAP = 70


def _bar(x: int, y: int, u: Usage, *, count: bool, css: str) -> str:
    if u.total <= 0:
        return f'<text x="{x}" y="{y + 14}" class="muted">-</text>'
    filled = round(u.fraction * BAR_W)
    color = COLORS[color_for(u.fraction)]
    figure = f"{u.used}/{u.total}" if count else f"{round(u.fraction * 100)}%"
    return (
        f'<rect x="{x}" y="{y + 3}" width="{BAR_W}" height="14" fill="{COLORS["empty"]}"/>'
        f'<rect class="{css}" x="{x}" y="{y + 3}" width="{filled}" height="14" fill="{color}"/>'
        f'<text x="{x + BAR_W + 6}" y="{y + 15}">{escape(figure)}</text>'
    )


def node_view_svg(view: Sequence[Pool]) -> str:
    """The node view as SVG: a header, then per pool its total and one line per group of alike nodes."""
    lines = sum(1 + len(p.groups) + sum(len(g.slices) for g in p.groups) for p in view)
    cols = [LABEL_W + TYPE_W + i * (BAR_W + GAP) for i in range(3)]
    width = cols[-1] + BAR_W + GAP
    height = (lines + 1) * ROW + 6
    parts = [
        f'<svg role="img" aria-label="node view" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        '<text x="0" y="15" class="pool">POOL / NODE</text>',
        f'<text x="{LABEL_W}" y="15" class="pool">TYPE</text>',
    ]
    for x, name in zip(cols, ("GPU", "CPU", "MEMORY"), strict=True):
        parts.append(f'<text x="{x}" y="15" class="pool">{name}</text>')
    y = ROW
    for pool in view:
        if pool.hourly_price is None:
            price = ", no price (n/a)"
        else:
            price = f", ${pool.hourly_price:,.4f}/h" + (f" + {pool.unpriced} n/a" if pool.unpriced else "")
        parts.append(f'<text x="0" y="{y + 15}" class="pool">{escape(pool.name)}</text>')
        parts.append(f'<text x="{LABEL_W}" y="{y + 15}">{pool.nodes} node(s){escape(price)}</text>')
        parts.append(_bar(cols[0], y, pool.total("gpu"), count=True, css="bar gpu pool-total"))
        parts.append(_bar(cols[1], y, pool.total("cpu"), count=False, css="bar cpu pool-total"))
        parts.append(_bar(cols[2], y, pool.total("memory"), count=False, css="bar memory pool-total"))
        y += ROW
        for g in pool.groups:
            kind = " ".join(x for x in (g.instance_type, g.capacity_type, "new" if g.new else "") if x)
            each = "n/a" if g.hourly_price is None else f"${g.hourly_price:,.4f}/h"
            kind = f"{kind}, {each}" if kind else each
            css = ' class="unpriced"' if g.hourly_price is None else ""
            parts.append(f'<text x="12" y="{y + 15}"{css}>{escape(g.label)}</text>')
            parts.append(f'<text x="{LABEL_W}" y="{y + 15}">{escape(kind)}</text>')
            parts.append(_bar(cols[0], y, g.gpu, count=True, css="bar gpu"))
            parts.append(_bar(cols[1], y, g.cpu, count=False, css="bar cpu"))
            parts.append(_bar(cols[2], y, g.memory, count=False, css="bar memory"))
            y += ROW
            for sl in g.slices:  # a shared or MIG node's device resources, each with its idle slices
                parts.append(f'<text x="24" y="{y + 15}" class="muted idle">{sl.idle} idle</text>')
                parts.append(f'<text x="{LABEL_W}" y="{y + 15}" class="slice">{escape(sl.label)}</text>')
                parts.append(_bar(cols[0], y, sl.usage, count=True, css="bar slice"))
                y += ROW
    parts.append("</svg>")
    return "".join(parts)


LABEL_CHARS = 44  # a longer label is cut with an ellipsis (the whole one in its tooltip)
CHAR_PX = 8  # the widest a 12px system-ui character of a label or figure draws (digits ~6.7px, 'W' ~11px)


def cost_svg(items: Sequence[tuple[str, float | None]], notes: dict[str, str] | None = None) -> str:
    """Horizontal cost bars, the longest for the most expensive, with the monthly figure; no bar where
    there is no price, nor for a label in ``notes`` (its note instead: not the cost of the same thing)."""
    from kgpu.catalog.prices import monthly

    notes = notes or {}
    top = max((v for k, v in items if v and k not in notes), default=0.0)
    figures = {
        label: f"${value:,.4f}/h (${monthly(value):,.2f}/mo)"
        for label, value in items
        if value is not None and label not in notes
    }
    # Columns sized from the text they hold (12px system-ui: at most about CHAR_PX per character), so a long
    # label or a five-figure monthly price is never cut off at the edge of the picture.
    label_w = max(120, min(LABEL_CHARS, max((len(label) for label, _ in items), default=0)) * CHAR_PX + 12)
    bar_max = 420
    tail = max(
        [len(t) * CHAR_PX for t in figures.values()]
        + [(len(n) + 8) * CHAR_PX - bar_max for n in notes.values()],
        default=0,
    )
    width = label_w + bar_max + 6 + max(tail, 60) + 8
    height = len(items) * ROW + 6
    parts = [
        f'<svg role="img" aria-label="cost" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
    ]
    for n, (label, value) in enumerate(items):
        y = n * ROW
        shown = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "\u2026"
        parts.append(f'<text x="0" y="{y + 15}"><title>{escape(label)}</title>{escape(shown)}</text>')
        if label in notes:
            parts.append(
                f'<text x="{label_w}" y="{y + 15}" class="unpriced">no bar: {escape(notes[label])}</text>'
            )
            continue
        if value is None:
            parts.append(f'<text x="{label_w}" y="{y + 15}" class="unpriced">no price</text>')
            continue
        w = max(1, round(value / top * bar_max)) if top and value > 0 else 0
        if w:
            parts.append(
                f'<rect class="bar cost" x="{label_w}" y="{y + 3}" width="{w}" height="14" fill="{COLORS["cyan"]}"/>'
            )
        parts.append(f'<text x="{label_w + w + 6}" y="{y + 15}">{escape(figures[label])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _status(r: dict[str, Any]) -> str:
    if r.get("status") == "cannot-run":
        return f"cannot run {r['unschedulable']} pod(s)"
    if r.get("status") == "unpriced":
        return f"{r['unpriced_nodes']} node(s) without a price"
    return "ok"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, css: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for c in row:
            if isinstance(c, tuple):  # (text, colour)
                cells.append(f'<td style="color:{c[1]}">{escape(str(c[0]))}</td>')
            else:
                cells.append(f"<td>{escape('' if c is None else str(c))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="scroll">{table}</div>'


def _made(inputs: Sequence[str]) -> str:
    """When the page was made and from what (a line under the title)."""
    from datetime import UTC, datetime

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"made {when}" + (f" from {', '.join(inputs)}" if inputs else "")


def _page(
    title: str, subtitle: str, sections: Sequence[tuple[str, str]], inputs: Sequence[str] | None = None
) -> str:
    body = "".join(f"<section><h2>{escape(h)}</h2>{content}</section>" for h, content in sections)
    if inputs is not None:
        subtitle = f"{subtitle}; {_made(inputs)}" if subtitle else _made(inputs)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{escape(title)}</h1><p class="muted">{escape(subtitle)}</p>{body}'
        f'<p class="muted">kgpu {escape(__version__)}</p></body></html>\n'
    )


def plan_report(
    data: dict[str, Any],
    view: Sequence[Pool],
    placements: Sequence[Sequence[str]],
    reasons: dict[str, int],
    unmodelled: Sequence[str] = (),
    *,
    by: str = "workload",
    inputs: Sequence[str] = (),
) -> str:
    """The page for one plan: ``data`` is the plan's JSON, ``placements`` the grouped rows of the table
    (the last field: warning codes), ``unmodelled`` the table's footer on them (a blank line, a title, a
    line per code); ``by``: the cost table per workload or per namespace."""
    cost = data.get("cost", {})
    summary = ", ".join(
        f"{v} {k.replace('_', ' ')}" for k, v in data["summary"].items() if isinstance(v, int)
    )
    cost_items: list[tuple[str, float | None]] = [("new nodes", cost.get("total", 0.0))]
    if cost.get("spot_possible", True):  # spot against on-demand means nothing for super nodes, static nodes
        cost_items += [
            ("of which spot", cost.get("spot", 0.0)),
            ("of which on-demand", cost.get("on_demand", 0.0)),
            ("all on-demand", cost.get("all_on_demand", 0.0)),
        ]
    if cost.get("baseline"):
        cost_items.append(("baseline nodes", cost.get("baseline")))
    flagged = any(p[5] for p in placements)
    rows = [
        (ns, w, (ph, PHASE_COLORS.get(ph, "#212121")), where, why, *((codes or "-",) if flagged else ()))
        for ns, w, ph, where, why, codes in placements
    ]
    headers = ("NAMESPACE", "WORKLOAD", "PHASE", "WHERE", "WHY") + (("WARNINGS",) if flagged else ())
    if cost.get("baseline"):
        cost_items.append(("with baseline", cost.get("with_baseline")))
    unpriced = [
        f"{n} {what} without a price in the catalog: not in the totals"
        for n, what in (
            (cost.get("unpriced_nodes"), "new node(s)"),
            (cost.get("unpriced_baseline_nodes"), "of the profile's own node(s)"),
        )
        if n
    ]
    caveat = "".join(f'<p class="unpriced">{escape(u)}</p>' for u in unpriced)
    shared = any(g.slices for p in view for g in p.groups)
    sections = [
        ("Nodes by pool (requests / allocatable)", node_view_svg(view) + _legend(shared=shared)),
        ("Cost per hour", cost_svg(cost_items) + caveat + _prices_note(cost.get("price_sources"))),
    ]
    if data.get("shared_gpus"):
        sections.append(("Shared GPU cost", shared_cost_html(data["shared_gpus"])))
    if data.get("workload_cost"):
        title = "Cost per workload" + (" (by namespace)" if by == "namespace" else "")
        sections.append((title, workload_cost_html(data["workload_cost"], by)))
    steps = consolidated(data.get("karpenter_consolidated"))
    if steps:
        sections.append((steps[1], "<pre>" + escape("\n".join(line.strip() for line in steps[2:])) + "</pre>"))
    sections.append(("Placements", _table(headers, rows, css="placements")))
    if reasons:
        items = "".join(f"<li>[{n}] {escape(r)}</li>" for r, n in reasons.items())
        sections.append(("Why pods cannot run", f"<ul>{items}</ul>"))
    if unmodelled:
        items = "".join(f"<li>{escape(line.strip())}</li>" for line in unmodelled[2:-1])
        sections.append((unmodelled[1], f"<ul>{items}</ul>"))
    if data.get("warnings"):
        items = "".join(f"<li>{escape(w)}</li>" for w in data["warnings"])
        sections.append(("Warnings", f"<ul>{items}</ul>"))
    return _page(f"Plan for profile {data['profile']}", summary, sections, inputs)


def _prices_note(sources: Sequence[dict[str, Any]] | None = None) -> str:
    """Where the prices come from: a plan's own sources (``cost.price_sources``), else the AWS snapshot."""
    from kgpu.catalog.prices import caption, source_lines

    if sources is None:
        return f'<p class="muted">{escape(caption())}</p>'
    return "".join(f'<p class="muted">{escape(line)}</p>' for line in source_lines(sources))


def shared_cost_html(entries: Sequence[dict[str, Any]]) -> str:
    """The plan's ``shared_gpus`` as two tables: per config (the terminal's), then every pod's share and
    each node's idle slices."""
    return (
        '<p class="muted">A pod pays its share of a GPU (1/R of a time-sliced one, a MIG device by its memory '
        "slices); the free slices are idle cost; pods plus idle are the node's price.</p>"
        + _table(SHARED_HEADERS, shared_cost_rows(entries), css="shared-config")
        + "<h3>Per pod</h3>"
        + _table(POD_HEADERS, shared_pod_rows(entries), css="shared-pods")
    )


def workload_cost_html(data: dict[str, Any], by: str = "workload") -> str:
    """The cost per workload (or namespace) as a table: every row, then idle and the priced nodes' total
    (``kgpu.cli.cost_view`` draws the same rows in the terminal)."""
    from kgpu.cli.cost_view import RULE, headers, rows

    unpriced = data["nodes"].get("unpriced", 0)
    note = f" {unpriced} node(s) without a price: their pods pay nothing here." if unpriced else ""
    return (
        f'<p class="muted">{escape(RULE[:1].upper() + RULE[1:])}; workloads plus idle are the priced nodes\' '
        f"cost.{escape(note)}</p>" + _table(headers(by, wide=True), rows(data, by, None), css="workload-cost")
    )


def _legend(*, shared: bool = False) -> str:
    return (
        '<p class="muted">Bars: requests / allocatable; '
        f'<span style="color:{COLORS["green"]}">green</span> from 80 % used, '
        f'<span style="color:{COLORS["yellow"]}">yellow</span> from 30 %, '
        f'<span style="color:{COLORS["red"]}">red</span> below; (xN) N alike nodes; '
        "n/a: no price in the catalog." + (f" {escape(SLICES_LEGEND)}." if shared else "") + "</p>"
    )


def compare_report(rows: Sequence[dict[str, Any]], compared: str = "", inputs: Sequence[str] = ()) -> str:
    """``rows`` as ``plan_compare.compare_rows`` orders them, each with its ``status``: only ``ok`` rows get
    a bar; the others say why not (cannot run some pod, nodes without a price). ``compared``: what is
    compared on what (the page's title)."""
    from kgpu.cli.plan_compare import label

    priced = [r for r in rows if "skipped" not in r]
    items = [(label(r), round(r["hourly_cost"] + r["baseline_cost"], 4)) for r in priced]
    notes = {label(r): _status(r) for r in priced if r.get("status", "ok") != "ok"}
    table_rows = [
        (
            label(r),
            (_status(r), "#212121" if r.get("status", "ok") == "ok" else "#c62828"),
            r["scheduled"],
            (r["unschedulable"], "#c62828" if r["unschedulable"] else "#212121"),
            r["new_nodes"],
            f"${r['hourly_cost']:,.4f}/h",
            f"${r['baseline_cost']:,.4f}/h",
            f"${r['all_on_demand']:,.4f}/h",
        )
        for r in priced
    ]
    sections = [
        ("Cost per hour: new nodes + baseline", cost_svg(items, notes) + _prices_note()),
        (
            "Templates" if all("template" in r for r in rows) else "Profiles",
            _table(
                (
                    "TEMPLATE" if all("template" in r for r in rows) else "PROFILE",
                    "STATUS",
                    "RUNNING",
                    "CANNOT RUN",
                    "NEW NODES",
                    "NEW NODES COST",
                    "BASELINE",
                    "ALL ON-DEMAND",
                ),
                table_rows,
                css="compare",
            ),
        ),
    ]
    skipped = [f"{label(r)}: {r['skipped']}" for r in rows if "skipped" in r]
    if skipped:
        sections.append(("Skipped", "<ul>" + "".join(f"<li>{escape(s)}</li>" for s in skipped) + "</ul>"))
    title = compared[:1].upper() + compared[1:] if compared else "Same workloads on every built-in template"
    return _page(title, f"{len(priced)} profile(s) planned", sections, inputs)


def queue_report(data: dict[str, Any], title: str, inputs: Sequence[str] = ()) -> str:
    """The page for ``kgpu queue`` / ``plan --queue``: quota per ClusterQueue (used against nominal, red
    when borrowing), the Workloads with their flavor and start, the verdicts and the levers."""
    from kgpu.cli.queue_view import LEVERS, QUOTA_HEADERS, QUOTA_TITLE, VERDICTS, lines, quota_cells

    quota = []
    for q in data["cluster_queues"]:
        share = f"{q['used'] / q['nominal']:.0%}" if q["nominal"] else ("-" if not q["used"] else "borrowed")
        colour = "#c62828" if q["borrowed"] else "#2e7d32" if q["used"] else "#212121"
        quota.append((*quota_cells(q), (share, colour)))
    rows, notes, levers = lines(data)
    status = {"admitted": "#2e7d32", "pending": "#ef6c00", "evicted": "#c62828"}
    workloads = [(*r[:2], (r[2], status.get(r[2], "#212121")), *r[3:]) for r in rows]
    sections = [
        (QUOTA_TITLE, _table((*QUOTA_HEADERS, "USE"), quota)),
        (
            f"Workloads (starts relative to {data['now']})",
            _table(("WORKLOAD", "CLUSTERQUEUE", "STATUS", "FLAVORS", "STARTS", "AHEAD"), workloads),
        ),
    ]
    for heading, said in ((VERDICTS, notes), (LEVERS, levers)):
        if said:
            sections.append((heading, "<ul>" + "".join(f"<li>{escape(i)}</li>" for i in said) + "</ul>"))
    if data.get("levers_note"):
        sections.append(("Levers not computed", f"<p>{escape(data['levers_note'])}</p>"))
    if data.get("warnings"):
        items = "".join(f"<li>{escape(w)}</li>" for w in data["warnings"])
        sections.append(("Warnings", f"<ul>{items}</ul>"))
    admitted = sum(w["admitted"] for w in data["workloads"])
    subtitle = f"{admitted} of {len(data['workloads'])} Workloads admitted now; {len(levers)} levers found"
    return _page(title, subtitle, sections, inputs)

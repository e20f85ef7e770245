"""The tables of ``kgpu top``: GPU nodes, then pools, drawn as the node view draws them, fitted to the terminal.

Each node is one line: its pool, GPU model and count, the kind of its GPUs, a bar of the GPUs its pods request
over those it advertises (the node view's bar and colours, ``kgpu.cli.nodeview``: green from 80 %, yellow from
30 %, red below), utilisation (``--prometheus``), its price per hour and its status. A node whose GPUs the
device plugin shares or partitions (time-slicing, MPS, MIG) or that offers several kinds of device gets a line
per device resource under it, with the node's name again, so ``--no-headers`` output can be grepped per node.

Every cell is one word (no blanks inside: ``A100-SXM4-40GB×8``, ``mig-mixed``, ``NotReady,NoGPUs``), so with
``--no-headers`` a column is the same awk field on every line; the bar and its figure are two.

Width: the table takes the terminal's (``shutil.get_terminal_size``: ``COLUMNS``, else the terminal, else 80).
When the lines are wider, long cells give way, in order: node names (down to 20 columns), GPU models (12),
pools (10), then further; names are cut in the middle, not wrapped: a DNS name keeps its first label whole
(``ip-10-0-1-17.us-w…``: the part that differs between EC2 nodes), any other name its start and its end
(``gke-ml-gpu-p…5f8e9c2a-x7k2``: GKE and AKS names differ at the end). Bars are ten cells wide when the lines
fit with them, else five. ``-o wide`` adds instance type, capacity type, free GPUs and idle cost and is never
cut, as ``kubectl -o wide``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kgpu.cli.nodeview import Usage, bar
from kgpu.cli.output import headers_wanted, style, table
from kgpu.model.gpus import AMD_GPU
from kgpu.model.nvidia import GPU

MIN_WIDTH = 40
STATUS_WORDS = {
    "ready": "Ready",
    "not_ready": "NotReady",
    "unknown": "Unknown",
    "cordoned": "Cordoned",
    "idle": "Idle",
    "no_gpus": "NoGPUs",
    "plugin_gone": "PluginGone",
    "gpus_unhealthy": "GPUsUnhealthy",
    "gpus_missing": "GPUsMissing",
    "mig_pending": "MIGPending",
    "mig_failed": "MIGFailed",
}
STATUS_MEANING = {
    "not_ready": "the node's Ready condition is False: pods cannot start on it",
    "unknown": "the node's kubelet stopped posting its status (Ready: Unknown)",
    "cordoned": "kubectl cordon: no new pods",
    "no_gpus": "a GPU instance whose node advertises no GPUs: no device plugin registered them (kubectl: <none>)",
    "plugin_gone": "the device plugin registered GPUs here once and is gone (capacity 0)",
    "gpus_unhealthy": "the device plugin marked every GPU unhealthy (capacity, 0 allocatable)",
    "gpus_missing": "fewer GPUs advertised than the instance type has: some are marked unhealthy (XID errors)",
    "mig_pending": "the MIG manager is repartitioning the GPUs (device plugin paused)",
    "mig_failed": "the MIG manager failed to apply the node's MIG config",
}
# Long cells give way in this order, each down to this many columns.
SHRINK = (
    ("node", 20),
    ("gpu", 12),
    ("pool", 8),
    ("node", 16),
    ("gpu", 10),
    ("node", 13),
    ("pool", 6),
    ("node", 8),
)


def terminal_width() -> int | None:
    """The width to fit: ``COLUMNS``, else the terminal's; None (nothing is cut) for a pipe or a file, and
    with ``--no-headers``, whose lines are for grep and awk."""
    import os
    import sys

    if not headers_wanted():
        return None
    if not os.environ.get("COLUMNS", "").strip().isdigit():
        try:
            if not sys.stdout.isatty():
                return None
        except (AttributeError, ValueError):
            return None
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def short_product(product: str) -> str:
    """GFD's product without the vendor and what the KIND column says: NVIDIA-A100-SXM4-40GB-MIG-1g.5gb -> A100-SXM4-40GB."""
    name = product.removeprefix("NVIDIA-").removeprefix("NVIDIA ").removeprefix("Tesla-")
    name = name.split("-MIG-", 1)[0].removesuffix("-SHARED")
    return name.replace(" ", "-")


def gpu_cell(row: Mapping[str, Any]) -> str:
    product = short_product(row["gpu_product"])
    if not product:
        return "-"
    return f"{product}×{row['gpu_count']}" if row["gpu_count"] else product


def kind_cell(kind: str, *, wide: bool = False) -> str:
    """The inventory's kind as one word: whole, shared-x4 (time-slicing), mps-x2, mig (-o wide: mig-mixed,
    mig-single), dra, super-node."""
    if not wide:
        kind = kind.replace("mig mixed", "mig").replace("mig single", "mig")
    return kind.replace("time-slicing", "shared").replace(" ", "-")


def status_cell(codes: Sequence[str]) -> str:
    """kubectl's way: Ready, NotReady, Ready,Cordoned; a GPU problem or Idle instead of Ready."""
    words = [STATUS_WORDS.get(c, c) for c in codes if c != "ready"]
    if "ready" in codes and (not words or words == ["Cordoned"]):
        words.insert(0, "Ready")
    return ",".join(words)


def _status_style(text: str, codes: Sequence[str]) -> str:
    from kgpu.live.top import PROBLEMS

    if PROBLEMS.intersection(codes):
        return style(text, fg="red", bold=True)
    if "idle" in codes or "cordoned" in codes:
        return style(text, fg="yellow")
    return style(text, fg="green")


def money(v: float | None, *, wide: bool = False) -> str:
    if v is None:
        return "n/a"
    if wide:
        return f"${v:,.4f}"
    return f"${v:,.2f}" if v >= 100 else f"${v:.3f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{round(v * 100)}%"


def middle(text: str, width: int) -> str:
    """``text`` in ``width`` columns: whole, or cut with ``…`` where names differ least (see the docstring)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    labels = text.split(".")
    if len(labels) > 1:  # a DNS name: whole labels from the start, else its first label cut in the middle
        if len(labels[0]) >= width:
            return middle(labels[0], width)
        kept = labels[0]
        for label in labels[1:]:
            if len(kept) + 1 + len(label) + 1 > width:
                break
            kept += "." + label
        return kept + "…"
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + (text[-tail:] if tail else "")


def _cut_gpu(text: str, width: int) -> str:
    """A GPU cell in ``width`` columns, its ×N kept."""
    if len(text) <= width:
        return text
    model, times, count = text.rpartition("×")
    if not times:
        return middle(text, width)
    return middle(model, max(1, width - len(count) - 1)) + "×" + count


def _unique_cut(names: Sequence[str], width: int) -> dict[str, str]:
    """Each name cut to ``width``; where two DNS names would read the same, both keep their start and end."""
    cut = {n: middle(n, width) for n in names}
    seen: dict[str, str] = {}
    for name, short in cut.items():
        other = seen.setdefault(short, name)
        if other != name:
            for n in (name, other):
                tail = (width - 1) // 2
                cut[n] = n[: width - 1 - tail] + "…" + n[-tail:] if len(n) > width else n
    return cut


Cell = str | tuple[str, Callable[[str], str]]  # text, or (text that may be cut, the style applied after)


def _fit(
    headers: list[str], rows: list[list[Cell]], cuttable: Mapping[str, int], width: int
) -> list[list[str]]:
    """Cut the ``cuttable`` columns (name -> index) until the lines fit ``width``: each step of SHRINK in turn,
    measured on the cells as cut (a DNS name cut at a label may come out shorter than its limit). Each
    distinct cell is cut once per step, so 5,000 nodes fit in a few milliseconds."""
    from kgpu.cli.nodeview import click_unstyle

    def text(c: Cell) -> str:
        return c[0] if isinstance(c, tuple) else c

    widths = [max([len(h)] + [len(click_unstyle(text(r[i]))) for r in rows]) for i, h in enumerate(headers)]
    distinct = {name: sorted({text(r[i]) for r in rows}) for name, i in cuttable.items()}
    cuts: dict[str, dict[str, str]] = {}

    def cut(name: str, limit: int) -> dict[str, str]:
        if name == "node":
            return _unique_cut(distinct[name], limit)
        fn = _cut_gpu if name == "gpu" else middle
        return {v: fn(v, limit) for v in distinct[name]}

    for name, floor in SHRINK:
        over = sum(widths) + 2 * (len(widths) - 1) - width
        if over <= 0:
            break
        if name not in cuttable:
            continue
        i = cuttable[name]
        new = max(floor, len(headers[i]), widths[i] - over)
        if new < widths[i]:
            cuts[name] = cut(name, new)
            widths[i] = max([len(headers[i])] + [len(v) for v in cuts[name].values()])
    index = {cuttable[name]: table for name, table in cuts.items()}
    out = []
    for r in rows:
        line = []
        for i, c in enumerate(r):
            value = text(c)
            if i in index:
                value = index[i].get(value, value)
            line.append(c[1](value) if isinstance(c, tuple) else value)
        out.append(line)
    return out


def _plain(text: str) -> str:
    return text


def _sub_rows(row: Mapping[str, Any]) -> list[tuple[str, str, Usage]]:
    """The device resources drawn under a node or pool: (label, kind word, usage), a MIG device by its profile;
    none for whole GPUs alone."""
    resources = row["resources"]
    if (
        set(resources) <= {GPU, AMD_GPU, "dra:gpu"}
        and len(resources) <= 1
        and "mig" not in row["gpu_kind"]
    ):
        return []
    out = []
    for name, v in resources.items():
        label = name.removeprefix("nvidia.com/")
        if "mig-" in label:
            kind = "dra-mig" if label.startswith("dra:") else "mig"
            label = label.split("mig-", 1)[1]
        elif label.startswith("dra:"):
            kind, label = "dra", label.removeprefix("dra:")
        else:
            kind = kind_cell(row["gpu_kind"]) if row["gpu_kind"] not in ("", "-") else "whole"
        out.append((label, kind, Usage(v["requested"], v["allocatable"])))
    return out


def node_table(data: Mapping[str, Any], *, wide: bool = False, width: int | None = None) -> str:
    """The nodes' table, fitted to ``width`` columns (default: the terminal's); ``wide`` is never cut."""
    util = bool(data.get("prometheus"))

    def build(cells: int) -> tuple[list[str], list[list[Cell]]]:
        headers = ["NODE", "POOL"]
        if wide:
            headers += ["INSTANCE-TYPE", "CAPACITY"]
        headers += ["GPU", "KIND", "GPUS"] + (["FREE"] if wide else []) + (["UTIL"] if util else [])
        headers += ["$/H", "STATUS"] + (["IDLE-$/H"] if wide else [])
        rows: list[list[Cell]] = []
        for n in data["nodes"]:
            usage = Usage(n["gpus"]["requested"], n["gpus"]["allocatable"])
            idle = "idle" in n["status"]
            price = money(n["hourly_price"], wide=wide)
            row: list[Cell] = [(n["node"], _plain), (n["pool"], _plain)]
            if wide:
                row += [n["instance_type"] or "-", n["capacity_type"] or "-"]
            row += [
                (gpu_cell(n), _plain),
                kind_cell(n["gpu_kind"], wide=wide),
                _bar(usage, cells, per_pod=n["super_node"]),
            ]
            row += [str(n["gpus"]["free"])] if wide else []
            row += [_pct(n["utilization"])] if util else []
            row += [style(price, fg="red", bold=True) if idle else price]
            row += [_status_style(status_cell(n["status"]), n["status"])]
            row += [money(n["idle_hourly_cost"], wide=True) if idle else "-"] if wide else []
            rows.append(row)
            for label, kind, u in _sub_rows(n):
                sub: list[Cell] = [(n["node"], _plain), (n["pool"], _plain)]
                sub += ["-", "-"] if wide else []
                sub += [(f"  {label}", _plain), kind, _bar(u, cells)]
                sub += [str(u.total - u.used)] if wide else []
                sub += ["-"] if util else []
                sub += ["-", "-"] + (["-"] if wide else [])
                rows.append(sub)
        return headers, rows

    headers, rows = build(10)
    cuttable = {"node": 0, "pool": 1, "gpu": headers.index("GPU")}
    if wide or width is None:
        return table(headers, _fit(headers, rows, {}, 10**6), title=_title(data))
    if _width(headers, rows) > width:
        headers, rows = build(5)
    return table(headers, _fit(headers, rows, cuttable, width), title=_title(data))


def _title(data: Mapping[str, Any]) -> str:
    return f"GPU nodes of {data.get('source') or 'the cluster'} (GPUS: requested / allocatable)"


def _width(headers: list[str], rows: list[list[Cell]]) -> int:
    from kgpu.cli.nodeview import click_unstyle

    def text(c: Cell) -> str:
        return click_unstyle(c[0] if isinstance(c, tuple) else c)

    return sum(max([len(h)] + [len(text(r[i])) for r in rows]) for i, h in enumerate(headers)) + 2 * (
        len(headers) - 1
    )


def _bar(u: Usage, cells: int, *, per_pod: bool = False) -> str:
    """The node view's bar and figure; an empty bar (0/0) where nothing is advertised, so fields line up; on TKE
    super nodes, where each pod buys its own GPUs, ``per-pod N``."""
    if per_pod:
        return f"per-pod {u.used}"
    return bar(u, count=True, width=cells) if u.total > 0 else "░" * cells + f" {u.used}/0"


def pool_table(data: Mapping[str, Any], *, wide: bool = False, width: int | None = None) -> str:
    util = bool(data.get("prometheus"))

    def build(cells: int) -> tuple[list[str], list[list[Cell]]]:
        headers = ["POOL", "SOURCE", "NODES"] + (["INSTANCE-TYPES", "CAPACITY"] if wide else [])
        headers += ["GPUS"] + (["UTIL"] if util else []) + ["$/H", "IDLE-$/H", "PROBLEMS"]
        rows: list[list[Cell]] = []
        for p in data["pools"]:
            usage = Usage(p["gpus"]["requested"], p["gpus"]["allocatable"])
            nodes = str(p["nodes"]) + (f"({p['unpriced_nodes']}n/a)" if p["unpriced_nodes"] and wide else "")
            row: list[Cell] = [(p["pool"], lambda t: style(t, bold=True)), p["source"] or "-", nodes]
            if wide:
                row += [",".join(p["instance_types"]) or "-", ",".join(p["capacity_types"]) or "-"]
            per_pod = p["super_nodes"] == p["nodes"]
            row += [_bar(usage, cells, per_pod=per_pod)] + ([_pct(p["utilization"])] if util else [])
            idle = money(p["idle_hourly_cost"], wide=wide) if p["idle_nodes"] else "-"
            row += [
                money(p["hourly_price"], wide=wide),
                style(idle, fg="red", bold=True) if p["idle_nodes"] else idle,
            ]
            row += [style(str(p["problem_nodes"]), fg="red", bold=True) if p["problem_nodes"] else "-"]
            rows.append(row)
            for label, _kind, u in _sub_rows(
                {**p, "gpu_kind": "mig" if any("mig-" in r for r in p["resources"]) else ""}
            ):
                sub: list[Cell] = [(p["pool"], _plain), f"  {label}", "-"]
                sub += ["-", "-"] if wide else []
                sub += [_bar(u, cells)] + (["-"] if util else []) + ["-", "-", "-"]
                rows.append(sub)
        return headers, rows

    headers, rows = build(10)
    if wide or width is None:
        return table(headers, _fit(headers, rows, {}, 10**6), title="GPU pools")
    if _width(headers, rows) > width:
        headers, rows = build(5)
    fitted = _fit(headers, rows, {"pool": 0, "source": 1}, width)
    return table(headers, fitted, title="GPU pools")


def footer(data: Mapping[str, Any], width: int | None = None) -> list[str]:
    """Totals, idle cost, what each problem status means, the bars' colours and where prices come from, each
    line wrapped to ``width``."""
    import textwrap

    from kgpu.catalog.prices import caption, monthly

    t = data["totals"]
    price = t["hourly_price"]
    cost = "no prices known" if price is None else f"{money(price, wide=True)}/h (${monthly(price):,.2f}/mo)"
    if t["unpriced_nodes"] and price is not None:
        cost += f", {t['unpriced_nodes']} node(s) n/a"
    virtual = [n for n in data["nodes"] if n["super_node"]]
    req = sum(n["gpus"]["requested"] for n in data["nodes"] if not n["super_node"])
    alloc = sum(n["gpus"]["allocatable"] for n in data["nodes"] if not n["super_node"])
    gpus = f"{req}/{alloc} GPUs requested"
    if virtual:
        gpus += (
            f" (and {sum(n['gpus']['requested'] for n in virtual)} by pods on {len(virtual)} super node(s))"
        )
    lines: list[tuple[str, str | None]] = [(f"Total: {t['nodes']} GPU node(s), {gpus}, {cost}", None)]
    if t["idle_nodes"]:
        idle = t["idle_hourly_cost"]
        lines.append(
            (
                f"Idle: {t['idle_nodes']} node(s) with GPUs allocatable and none requested, {money(idle, wide=True)}/h "
                f"(${monthly(idle):,.2f}/mo)",
                "red",
            )
        )
    for code, meaning in STATUS_MEANING.items():
        count = sum(code in n["status"] for n in data["nodes"])
        if count:
            lines.append((f"{STATUS_WORDS[code]}: {count} node(s): {meaning}", None))
    out = []
    for text, colour in lines:
        wrapped = (
            textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False) if width else [text]
        )
        for line in wrapped:
            out.append(style(line, fg=colour, bold=True) if colour else line)
    colours = ", ".join(
        style(f"{w} {r}", fg=w) for w, r in (("green", "≥ 80 %"), ("yellow", "≥ 30 %"), ("red", "< 30 %"))
    )
    out.append(f"Bars: GPUs requested / allocatable; {colours}")
    out.append(caption())
    return out


def render(data: Mapping[str, Any], *, wide: bool = False, width: int | None = None) -> str:
    """Nodes, pools and the footer (``--no-headers``: the nodes' rows alone, or the pools' with --pools)."""
    width = width or terminal_width()
    parts = []
    if "nodes" in data:
        parts.append(node_table(data, wide=wide, width=width) if data["nodes"] else "no GPU nodes")
        if not headers_wanted():
            return parts[0]
    if data["pools"]:
        parts.append(pool_table(data, wide=wide, width=width))
    if not headers_wanted():
        return "\n\n".join(parts)
    if data.get("nodes"):
        parts.append("\n".join(footer(data, width)))
    return "\n\n".join(parts)


def names(data: Mapping[str, Any]) -> list[str]:
    """``-o name``: ``node/NAME`` in the view's order."""
    return [f"node/{n['node']}" for n in data.get("nodes", ())]

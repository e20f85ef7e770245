"""The "Cost per workload" section of ``plan`` and ``simulate``: the split of ``kgpu.sim.workload_cost`` as a
table (top rows, the rest summed in one line, idle, total) by workload or by namespace.

Existing nodes are priced as the node view prices them (the verb's ``nodeview.PriceOf``: instance type,
capacity type and region from the node's labels), new nodes at the price the provisioner bought them at, so
the section's total is the priced nodes' cost the rest of the output shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click

from kgpu.cli import nodeview
from kgpu.cli.output import headers_wanted, table

TOP = 10  # rows shown before the rest is summed (-o wide: every row)
BY = ("workload", "namespace")
TITLE = "Cost per workload"
RULE = (
    "each pod pays its share of the nodes it runs on: a GPU node by the GPUs it holds (1/R of a shared GPU, a "
    "MIG device by its memory slices), any other node by its most-requested resource (CPU or memory); what no "
    "pod holds is idle"
)

by_option = click.option(
    "--by",
    "by",
    type=click.Choice(BY, case_sensitive=False),
    default="workload",
    show_default=True,
    help="Cost table per workload (Deployment, StatefulSet, Job, RayCluster, ...) or per namespace; "
    "-o json has both (workload_cost).",
)


def node_pricer(price_of: nodeview.PriceOf | None) -> Callable[[Any], float | None]:
    """``price_of`` (instance type, capacity type, labels) as a price per node, once per type, capacity and
    region."""
    cache: dict[tuple[str, str, str], float | None] = {}

    def price(node: Any) -> float | None:
        if price_of is None:
            return None
        labels = node.labels
        itype = next((labels[k] for k in nodeview.TYPE_LABELS if labels.get(k)), "")
        capacity = next((labels[k] for k in nodeview.CAPACITY_LABELS if labels.get(k)), "").lower()
        key = (itype, capacity, nodeview.region_of(labels))
        if key not in cache:
            cache[key] = price_of(itype, capacity, labels)
        return cache[key]

    return price


def workload_cost(
    sim: Any,
    price_of: nodeview.PriceOf | None,
    owned: Mapping[tuple[str, str, str], tuple[str, str, str]],
    profile: Any = None,
    catalog: Any = None,
) -> dict[str, Any]:
    """The ``workload_cost`` JSON of a ``SimulationResult``."""
    from kgpu.sim.simulate import UNSCHEDULABLE
    from kgpu.sim.workload_cost import DRA_DRIVER, split

    devices: dict[str, int] = {}
    for p in sim.placements:
        n = sum(1 for d in p.devices if d.get("driver") == DRA_DRIVER)
        if n:
            devices[p.pod.key] = n
    pending = [p.pod for p in sim.placements if p.phase == UNSCHEDULABLE]
    result = split(
        sim.nodes,
        sim.new_nodes,
        node_pricer(price_of),
        owned=owned,
        profile=profile,
        catalog=catalog,
        pending=pending,
        devices=devices,
        dra_gpus=sim.dra_gpus,
    )
    return result.as_dict()


def _money(v: float) -> str:
    return f"${v:,.4f}"


def _gpus(v: float | None) -> str:
    return "" if v is None else f"{v:g}" if v else "-"


def rows(data: Mapping[str, Any], by: str = "workload", top: int | None = TOP) -> list[tuple[str, ...]]:
    """The table's rows: the ``top`` most expensive (None: all), one for the rest, idle, total."""
    wide = top is None
    items = list(data.get("workloads" if by == "workload" else "namespaces") or [])
    shown, rest = (items, []) if top is None or len(items) <= top + 1 else (items[:top], items[top:])

    def cells(first: str, second: str, item: Mapping[str, Any], unknown: bool = False) -> tuple[str, ...]:
        """``unknown``: no price applies (every pod that runs is on a node without a price): "n/a", not $0."""
        head = (first, second, str(item.get("pods", "")), _gpus(item.get("gpus")))
        if unknown:
            return (*head, *(("n/a", "n/a") if wide else ()), "n/a", "n/a")
        split = (_money(item["new_nodes_hourly"]), _money(item["existing_nodes_hourly"])) if wide else ()
        return (*head, *split, _money(item["hourly"]), f"${item['monthly']:,.2f}")

    def unpriced(item: Mapping[str, Any]) -> bool:
        running = item.get("pods", 0) - item.get("pending", 0)
        return bool(running > 0 and item.get("unpriced_pods", 0) >= running)

    out = []
    for item in shown:
        label = f"{item['kind']}/{item['name']}" if by == "workload" else f"{item['workloads']} workload(s)"
        pending = f" ({item['pending']} pending)" if item.get("pending") else ""
        out.append(cells(item["namespace"], label + pending, item, unpriced(item)))
    if rest:
        summed: dict[str, Any] = {
            "pods": sum(i["pods"] for i in rest),
            "gpus": round(sum(i["gpus"] for i in rest), 4),
        }
        for key in ("hourly", "monthly", "new_nodes_hourly", "existing_nodes_hourly"):
            summed[key] = round(sum(i[key] for i in rest), 6)
        what = "workloads" if by == "workload" else "namespaces"
        out.append(cells("", f"{len(rest)} more {what}", summed))
    idle = data["idle"]
    nodes = data["nodes"]
    none_priced = not nodes["priced"]
    out.append(cells("", "idle", {**idle, "pods": "", "gpus": None}, none_priced))
    out.append(
        cells("", f"total ({nodes['priced']} priced node(s))", {**nodes, "pods": "", "gpus": None}, none_priced)
    )
    return out


def headers(by: str = "workload", *, wide: bool = False) -> tuple[str, ...]:
    first = ("NAMESPACE", "WORKLOAD" if by == "workload" else "WORKLOADS", "PODS", "GPUS")
    return (*first, *(("NEW NODES $/H", "EXISTING $/H") if wide else ()), "$/H", "$/MO")


def section(data: Mapping[str, Any] | None, by: str = "workload", *, wide: bool = False) -> list[str]:
    """The section's lines (a blank line first); nothing without a split or with --no-headers."""
    if not data or not headers_wanted() or not (data.get("workloads") or data["nodes"]["priced"]):
        return []
    title = f"{TITLE}{' (by namespace)' if by == 'namespace' else ''}"
    out = ["", table(headers(by, wide=wide), rows(data, by, None if wide else TOP), title=title)]
    import textwrap

    out += textwrap.wrap(
        f"({RULE}; docs/simulate.md#cost-per-workload)", 100, initial_indent="  ", subsequent_indent="   "
    )
    unpriced = data["nodes"].get("unpriced", 0)
    if unpriced:
        out.append(
            f"  {unpriced} node(s) without a price: their pods pay nothing here (unpriced_pods in -o json)"
        )
    return out

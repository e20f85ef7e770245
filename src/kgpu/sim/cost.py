"""Hourly cost of new nodes, spot against on-demand, and a lower bound on any feasible solution.

The lower bound is an LP relaxation solved with HiGHS (``highspy``): per pod kind, the pods may be split
fractionally over the offerings they are compatible with; per offering, a fractional node count must cover
every resource (allocatable minus DaemonSet overhead). Its optimum is below the cost of every integral
packing, so ``cost / bound`` measures how far the provisioner is from optimal. The bound is only taken when
HiGHS reports the model Optimal; otherwise (and without highspy) it is the per-resource one: for each
resource, every pod pays at least its share of the cheapest price per unit of that resource it could use;
the largest over resources. Pods no offering can host are left out of either and reported, so a bound is
never silently 0 or infeasible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Priced(Protocol):
    hourly_price: float | None
    on_demand_price: float | None
    capacity_type: str


MONEY_KEYS = ("total", "spot", "on_demand", "all_on_demand", "savings", "baseline", "with_baseline")


def with_monthly(cost: dict[str, Any]) -> dict[str, Any]:
    """``cost`` with ``<key>_monthly`` beside each hourly figure (730-hour month) and ``prices``: the price
    snapshot's source and date, so that no figure travels without its age."""
    from kgpu.catalog.prices import monthly, snapshot

    out = dict(cost)
    for key in MONEY_KEYS:
        value = cost.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{key}_monthly"] = monthly(float(value))
    out["prices"] = snapshot()
    return out


def hourly_cost(nodes: Sequence[Priced]) -> dict[str, Any]:
    """Total per hour; the spot and on-demand parts; what the same nodes cost all on-demand; unpriced count;
    each with its monthly figure, and the price snapshot's date (:func:`with_monthly`)."""
    total = spot = on_demand = all_on_demand = 0.0
    unpriced = 0
    for n in nodes:
        if n.hourly_price is None:
            unpriced += 1
            continue
        total += n.hourly_price
        if n.capacity_type == "spot":
            spot += n.hourly_price
        else:
            on_demand += n.hourly_price
        all_on_demand += n.on_demand_price if n.on_demand_price is not None else n.hourly_price
    out: dict[str, Any] = {
        "total": round(total, 4),
        "spot": round(spot, 4),
        "on_demand": round(on_demand, 4),
        "all_on_demand": round(all_on_demand, 4),
        "savings": round(all_on_demand - total, 4),
    }
    if unpriced:
        out["unpriced_nodes"] = unpriced
    return with_monthly(out)


@dataclass(frozen=True, slots=True)
class Demand:
    """``count`` identical pods needing ``vector`` (over the bound's resources); compatible offerings."""

    count: int
    vector: tuple[int, ...]
    offerings: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Bound:
    """A lower bound on the hourly cost of any packing of the demands it kept.

    ``method`` is ``lp`` (HiGHS proved the relaxation optimal) or ``per-resource`` (no highspy, or the
    solver did not reach optimality: ``status`` says what it reported). ``dropped`` are the demands no
    offering can host: they are left out, and a caller comparing a cost with the bound must say so.
    """

    value: float
    method: str
    status: str = ""
    dropped: tuple[int, ...] = ()
    dropped_pods: int = 0


def lower_bound(
    demands: Sequence[Demand], capacities: Sequence[tuple[int, ...]], prices: Sequence[float]
) -> Bound:
    """The cheapest fractional cover of the demands that some offering can host.

    The LP (highspy) is used when its model status is Optimal; otherwise, and without highspy, the
    per-resource bound, which is weaker but holds for any input.
    """
    dropped = tuple(k for k, d in enumerate(demands) if d.count > 0 and not d.offerings)
    kept = [d for d in demands if d.count > 0 and d.offerings]
    n_dropped = sum(demands[k].count for k in dropped)
    try:
        value, status = _lp_bound(kept, capacities, prices)
    except ImportError:
        value, status = None, "highspy not installed"
    if value is not None:
        return Bound(value, "lp", status, dropped, n_dropped)
    return Bound(per_resource_bound(kept, capacities, prices), "per-resource", status, dropped, n_dropped)


def per_resource_bound(
    demands: Sequence[Demand], capacities: Sequence[tuple[int, ...]], prices: Sequence[float]
) -> float:
    if not demands:
        return 0.0
    best = 0.0
    for d in range(len(demands[0].vector)):
        total = 0.0
        for dem in demands:
            need = dem.vector[d]
            if not need:
                continue
            unit = min(
                (prices[o] / capacities[o][d] for o in dem.offerings if capacities[o][d] > 0), default=0.0
            )
            total += dem.count * need * unit
        best = max(best, total)
    return best


def _lp_bound(
    demands: Sequence[Demand], capacities: Sequence[tuple[int, ...]], prices: Sequence[float]
) -> tuple[float | None, str]:
    """The LP optimum and HiGHS's model status; None unless the status is Optimal."""
    import highspy
    import numpy as np

    used = sorted({o for d in demands for o in d.offerings})
    if not used:
        return 0.0, "no demand"
    col = {o: i for i, o in enumerate(used)}
    dims = len(demands[0].vector)
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    # x_o: fractional nodes of offering o
    for o in used:
        h.addVar(0.0, inf)
        h.changeColCost(col[o], prices[o])
    n_x = len(used)
    # y_{k,o}: pods of demand k on offering o
    y_index: list[tuple[int, int, int]] = []
    for k, dem in enumerate(demands):
        for o in dem.offerings:
            h.addVar(0.0, inf)
            y_index.append((k, o, n_x + len(y_index)))
    by_demand: dict[int, list[int]] = {}
    by_offering: dict[int, list[tuple[int, int]]] = {}
    for k, o, j in y_index:
        by_demand.setdefault(k, []).append(j)
        by_offering.setdefault(o, []).append((k, j))
    for k, dem in enumerate(demands):
        idx = by_demand.get(k, [])
        h.addRow(
            float(dem.count), float(dem.count), len(idx), np.array(idx, dtype=np.int32), np.ones(len(idx))
        )
    for o, entries in by_offering.items():
        cap = capacities[o]
        for d in range(dims):
            cols = [col[o]]
            vals = [-float(cap[d])]
            for k, j in entries:
                need = demands[k].vector[d]
                if need:
                    cols.append(j)
                    vals.append(float(need))
            if len(cols) > 1:
                h.addRow(-inf, 0.0, len(cols), np.array(cols, dtype=np.int32), np.array(vals))
    h.run()
    status = h.getModelStatus()
    text = h.modelStatusToString(status)
    if status != highspy.HighsModelStatus.kOptimal:
        return None, text
    return float(h.getInfo().objective_function_value), text

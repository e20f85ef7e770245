"""Hourly cost of new nodes, spot against on-demand, and a lower bound on any feasible solution.

The lower bound is an LP relaxation solved with HiGHS (``highspy``): per pod kind, the pods may be split
fractionally over the offerings they are compatible with; per offering, a fractional node count must cover
every resource (allocatable minus DaemonSet overhead). Its optimum is below the cost of every integral
packing, so ``cost / bound`` measures how far the provisioner is from optimal. The bound is only taken when
HiGHS reports the model Optimal; otherwise (and without highspy) it is the per-resource one: for each
resource, every pod pays at least its share of the cheapest price per unit of that resource it could use;
the largest over resources. Pods no offering can host are left out of either and reported, so a bound is
never silently 0 or infeasible.

Where a plan's prices come from (:func:`price_sources`): the AWS list prices of the region, a catalog
override, a TKE super-node pool's own prices, static nodes' ``hourlyPrice``, or none; and whether spot
means anything for it (:func:`spot_possible`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kgpu.catalog import Catalog
    from kgpu.model.profile import Pool, Profile


class Priced(Protocol):
    hourly_price: float | None
    on_demand_price: float | None
    capacity_type: str


class Sourced(Protocol):
    """A new node as :func:`price_sources` reads it."""

    pool: str
    instance_type: str
    capacity_type: str
    hourly_price: float | None


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


PRICE_COLUMNS = ("ondemand_usd_per_hour", "spot_usd_per_hour_min", "spot_usd_per_hour_median")


def pool_can_be_spot(pool: Pool) -> bool:
    """Whether the pool may buy spot capacity: a node group with spot among its capacity types, a Karpenter
    NodePool whose capacity-type requirement admits spot (none at all: Karpenter buys on-demand only). TKE
    super nodes and static nodes never are."""
    from kgpu.model.profile import PoolKind

    if pool.kind == PoolKind.NODE_GROUP:
        return "spot" in [str(c) for c in pool.capacity_types]
    if pool.kind != PoolKind.KARPENTER:
        return False
    found = [r for r in pool.karpenter_requirements() if r.get("key") == "karpenter.sh/capacity-type"]
    if not found:
        return False
    for r in found:
        values = [str(v) for v in r.get("values") or []]
        op = r.get("operator")
        if (op == "In" and "spot" not in values) or (op == "NotIn" and "spot" in values) or op == "DoesNotExist":
            return False
    return True


def spot_possible(profile: Profile, new_nodes: Sequence[Sourced]) -> bool:
    """Whether spot means anything for the plan: a new node is spot, or a pool the AWS catalog prices may buy
    spot. False for TKE super nodes and static nodes alone (and for EKS pools that are on-demand only)."""
    from kgpu.model.profile import Provider

    if any(n.capacity_type == "spot" for n in new_nodes):
        return True
    return profile.provider == Provider.EKS and any(pool_can_be_spot(p) for p in profile.pools)


@dataclass
class _Source:
    kind: str
    pools: list[str] = field(default_factory=list)
    types: set[str] = field(default_factory=set)
    nodes: int = 0
    spot: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, pool: str, instance_type: str, spot: bool) -> None:
        if pool not in self.pools:
            self.pools.append(pool)
        if instance_type:
            self.types.add(instance_type)
        self.nodes += 1
        self.spot = self.spot or spot


def _pools_text(pools: Sequence[str]) -> str:
    return ("pool " if len(pools) == 1 else "pools ") + ", ".join(pools)


def _override_priced(profile: Profile, catalog: Catalog | None) -> dict[str, set[str]]:
    """Instance types whose price in the profile's region comes from a catalog override row, with the
    capacity types it prices: a row for the region (or for every region) that gives an on-demand or a spot
    price, or a type the packaged catalog does not sell there (every price it has is the row's)."""
    from kgpu.catalog import aws_catalog
    from kgpu.errors import InputError

    rows = profile.catalog.instance_types
    if catalog is None or not rows:
        return {}
    region = profile.cluster.region
    base = aws_catalog(region)
    out: dict[str, set[str]] = {}
    for row in rows:
        name = str(row.get("instance_type", "")).strip()
        row_region = str(row.get("region") or "").strip()
        if not name or row_region not in ("", region):
            continue
        given = {c for c in PRICE_COLUMNS if str(row.get(c, "")).strip()}
        try:
            sold = base.pricing(name) is not None
        except InputError:
            sold = False
        if not sold:
            out.setdefault(name, set()).update(("on-demand", "spot"))
            continue
        if "ondemand_usd_per_hour" in given:
            out.setdefault(name, set()).add("on-demand")
        if "spot_usd_per_hour_median" in given:  # what a spot node is bought at
            out.setdefault(name, set()).add("spot")
    return out


def price_sources(
    profile: Profile, new_nodes: Sequence[Sourced], override_files: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Where each figure of a plan comes from, one entry per source, for the pools with nodes in the plan
    (new nodes, node groups' baseline nodes, static nodes; none: every pool, as it would be priced).

    Kinds: ``aws-list`` (the packaged AWS list prices of the profile's region, with their date),
    ``catalog-override`` (instance types priced by override rows: ``override_files``, else the profile's
    ``catalog.instanceTypes``), ``tke-profile`` (a super-node pool's own ``prices``, with the date and
    source given there), ``profile`` (static nodes' ``hourlyPrice``), ``none`` (a pool, or some of its
    nodes, without any price: left out of the totals). Each entry has ``pools``, ``text`` (the line
    plan prints) and what applies of ``region``, ``as_of``, ``source``, ``currency``, ``instance_types``,
    ``files`` and ``nodes``.
    """
    from kgpu.catalog.prices import AS_OF, SOURCE, SPOT_NOTE, aws_list
    from kgpu.catalog.tke import packaged_prices
    from kgpu.model.profile import PoolKind, Provider
    from kgpu.sim.provisioners.pools import catalog_for, first_known_type
    from kgpu.sim.provisioners.tke.supernode import spec_of

    catalog = catalog_for(profile)
    region = profile.cluster.region
    pools = {p.name: p for p in profile.pools}
    overridden = _override_priced(profile, catalog)
    onprem = profile.provider == Provider.GENERIC
    # (pool, instance type, capacity type, priced)
    records: list[tuple[str, str, str, bool]] = [
        (n.pool, n.instance_type, n.capacity_type, n.hourly_price is not None) for n in new_nodes
    ]
    for pool in profile.pools:
        if pool.kind == PoolKind.STATIC:
            records += [(pool.name, n.instance_type or "", "", n.hourly_price is not None) for n in pool.nodes]
        elif pool.kind == PoolKind.NODE_GROUP and catalog is not None:
            size = pool.desired_size if pool.desired_size is not None else pool.min_size
            if size and pool.instance_types:
                bought = "spot" if pool_can_be_spot(pool) else "on-demand"
                records.append((pool.name, first_known_type(catalog, pool), bought, True))
    if not records:
        records = [(p.name, "", "spot" if pool_can_be_spot(p) else "", True) for p in profile.pools]

    found: dict[tuple[str, str], _Source] = {}

    def source(kind: str, key: str = "") -> _Source:
        return found.setdefault((kind, key), _Source(kind))

    for name, itype, capacity, priced in records:
        owner = pools.get(name)
        pool_kind = owner.kind if owner is not None else None
        spot = capacity == "spot"
        if owner is not None and pool_kind == PoolKind.TKE_SUPERNODE:
            if owner.prices is not None and priced:
                source("tke-profile", name).add(name, "", False)
            elif owner.prices is not None:
                spec = spec_of(itype)
                source("none", f"tke-spec:{name}").add(name, spec.gpu_type if spec else itype, False)
            else:
                source("none", f"tke:{name}").add(name, "", False)
        elif pool_kind == PoolKind.STATIC:
            if priced:
                source("profile").add(name, itype, False)
            else:
                source("none", f"static:{name}").add(name, itype, False)
        elif catalog is None:
            source("none", f"catalog:{name}").add(name, itype, spot)
        elif not priced:
            source("none", f"aws:{name}").add(name, itype, spot)
        elif capacity in overridden.get(itype, ()):
            source("catalog-override").add(name, itype, spot)
        else:
            source("aws-list").add(name, itype, spot)
            if spot and "on-demand" in overridden.get(itype, ()):  # what "all on-demand" counts it at
                over = source("catalog-override")
                over.extra.setdefault("on_demand_only", set()).add(itype)
                if name not in over.pools:
                    over.pools.append(name)

    order = {"aws-list": 0, "catalog-override": 1, "tke-profile": 2, "profile": 3, "none": 4}
    index = {name: i for i, name in enumerate(pools)}
    out: list[dict[str, Any]] = []
    for (kind, key), s in sorted(found.items(), key=lambda kv: order[kv[0][0]]):
        s.pools.sort(key=lambda n: index.get(n, len(index)))
        entry: dict[str, Any] = {"kind": kind, "pools": s.pools}
        where = _pools_text(s.pools)
        if kind == "aws-list":
            entry.update(region=region, as_of=AS_OF, source=SOURCE, currency="USD")
            entry["text"] = f"{aws_list(region)} for {where}" + (f" ({SPOT_NOTE})" if s.spot else "")
        elif kind == "catalog-override":
            files = list(override_files) or ["the profile's catalog.instanceTypes"]
            compared = sorted(s.extra.get("on_demand_only", set()) - s.types)
            types = sorted(s.types)
            entry.update(instance_types=sorted({*types, *compared}), files=files, currency="USD")
            what = ", ".join(
                ([", ".join(types)] if types else [])
                + ([f"the on-demand price of {', '.join(compared)} (all on-demand)"] if compared else [])
            )
            entry["text"] = f"catalog override from {', '.join(files)} for {what} in {where}"
        elif kind == "tke-profile":
            given = pools[key].prices
            assert given is not None
            entry.update(as_of=given.date, source=given.source, currency=given.currency)
            entry["text"] = f"TKE super node prices as given in the profile for {where} (read {given.date}, {given.source})"
        elif kind == "profile":
            entry.update(nodes=s.nodes, currency="USD")
            what = "on-prem node" if onprem else "static node"
            entry["text"] = f"{what} prices as given in the profile for {where} (hourlyPrice of {s.nodes} node(s))"
        else:
            entry["nodes"] = s.nodes
            why, _, _ = key.partition(":")
            if why == "tke":
                tke = packaged_prices()
                entry.update(as_of=tke.date, source=tke.source)
                reason = "kgpu packages no TKE super node prices; give the pool's prices (docs/tke.md)"
            elif why == "tke-spec":
                reason = f"{s.nodes} super-node pod(s) of GPU types its gpuHour leaves out ({', '.join(sorted(s.types))})"
            elif why == "static":
                what = "on-prem node(s)" if onprem else "static node(s)"
                reason = f"{s.nodes} {what} without hourlyPrice"
            elif why == "catalog":
                reason = f"no instance catalog for provider {profile.provider}"
            else:
                entry["instance_types"] = sorted(s.types)
                reason = f"{', '.join(sorted(s.types)) or 'its types'} not priced in the AWS catalog for {region}"
            entry["text"] = f"none for {where}: {reason}"
        out.append(entry)
    if overridden and not any(e["kind"] == "catalog-override" for e in out):
        files = list(override_files) or ["the profile's catalog.instanceTypes"]
        out.append(
            {
                "kind": "catalog-override",
                "pools": [],
                "instance_types": sorted(overridden),
                "files": files,
                "currency": "USD",
                "text": f"catalog override from {', '.join(files)}: no node in the plan is of its types "
                f"({', '.join(sorted(overridden))})",
            }
        )
    return out


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

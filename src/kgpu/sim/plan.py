"""The library behind ``kgpu plan``: profile + workloads -> placements, new nodes, cost, warnings.

With no cluster the profile's baseline is the cluster: static pools' nodes and node groups at their desired
size. With no workloads, the examples of the guide the profile follows (``kgpu.model.examples``: a
template plans its own guide's workloads). ``compare`` plans the same workloads on every built-in template
(with none given: every non-TKE seed's examples, and TKE's own on the TKE template); a template that does not
load (yet) is skipped with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgpu.catalog import Catalog
from kgpu.errors import InputError
from kgpu.model.examples import example_workloads, profile_examples
from kgpu.model.inputs import Objects
from kgpu.model.profile import TEMPLATES, PoolKind, Profile, builtin_profile
from kgpu.sim.provisioners.pools import catalog_for
from kgpu.sim.provisioners.provision import baseline_cost, baseline_nodes, provisioner_for
from kgpu.sim.simulate import UNSCHEDULABLE, SimulationResult, simulate


@dataclass
class PlanResult:
    profile: str
    simulation: SimulationResult
    warnings: list[str] = field(default_factory=list)
    baseline_hourly: float = 0.0
    # the controllers of the workloads read (Objects.owned), for cost per workload (kgpu.sim.workload_cost)
    owned: dict[tuple[str, str, str], tuple[str, str, str]] = field(default_factory=dict)

    @property
    def unschedulable(self) -> int:
        return len(self.simulation.unschedulable)

    @property
    def cost(self) -> dict[str, Any]:
        cost: dict[str, Any] = dict(self.simulation.extra.get("cost", {"total": 0.0}))
        cost["baseline"] = self.baseline_hourly
        cost["with_baseline"] = round(cost.get("total", 0.0) + self.baseline_hourly, 4)
        return cost

    def as_dict(self) -> dict[str, Any]:
        data = self.simulation.as_dict()
        data.pop("profile_warnings", None)
        out: dict[str, Any] = {"profile": self.profile}
        out.update(data)
        out["cost"] = self.cost
        out["warnings"] = list(self.warnings)
        return out


def profile_warnings(profile: Profile) -> list[str]:
    """What the profile alone gets wrong for GPU workloads."""
    out = []
    for pool in profile.gpu_pools:
        if not pool.taints and pool.kind != PoolKind.TKE_SUPERNODE:
            out.append(
                f"pool {pool.name}: GPU pool without a taint: CPU pods may land on its GPU nodes and keep them up; "
                "taint it (e.g. nvidia.com/gpu=true:NoSchedule) and let GPU workloads tolerate it"
            )
    return out


def workload_warnings(result: SimulationResult) -> list[str]:
    """One line per workload whose pods cannot run anywhere, with the reason of its first such pod."""
    seen: dict[tuple[str, str, str], list[str]] = {}
    for p in result.placements:
        if p.phase != UNSCHEDULABLE:
            continue
        pod = p.pod
        owner = (pod.namespace, pod.owner_kind or "Pod", pod.owner_name or pod.name)
        seen.setdefault(owner, []).append(p.reason or "")
    return [
        f"{ns}/{name} ({kind}): {len(reasons)} pod(s) cannot run anywhere: {reasons[0]}"
        for (ns, kind, name), reasons in seen.items()
    ]


def scale_to_zero_warnings(result: SimulationResult) -> list[str]:
    out = []
    for entry in result.extra.get("scale_to_zero", []):
        if entry.get("removed_by") is None:
            out.append(f"GPU node {entry['node']} is empty and stays up: {entry['why']}")
    return out


def spot_interruption_warnings(profile: Profile, result: SimulationResult) -> list[str]:
    """Seed 001: "some GPU-powered EC2 Spot instances have a relatively high interruption frequency (>20% for
    some GPU instance types)". A spot-only GPU pool whose new nodes are of types the Spot Instance Advisor puts
    above 20 % in the cluster's region (a dated snapshot: kgpu.catalog.spot_advisor)."""
    from kgpu.catalog.spot_advisor import SNAPSHOT_DATE, SOURCE, spot_advice

    region = profile.cluster.region
    out: list[str] = []
    for pool in profile.gpu_pools:
        if [str(c) for c in pool.capacity_types] != ["spot"]:
            continue
        risky: dict[str, int] = {}
        for n in result.new_nodes:
            if n.pool != pool.name or n.capacity_type != "spot" or n.kind == "tke-supernode":
                continue
            advice = spot_advice(n.instance_type, region)
            if advice is not None and advice.above_20:
                risky[n.instance_type] = risky.get(n.instance_type, 0) + 1
        if risky:
            types = ", ".join(f"{t} ({count} node(s))" for t, count in sorted(risky.items()))
            out.append(
                f"pool {pool.name}: spot only, and it picked {types}: interruption frequency >20% in {region} "
                f"({SOURCE}, {SNAPSHOT_DATE}); GPU pods there are reclaimed often: add types of lower bands "
                "(kgpu catalog shows them), spread groups over zones, or allow on-demand for work that cannot restart"
            )
    return out


def tke_price_warnings(profile: Profile, result: SimulationResult) -> list[str]:
    """TKE super-node pods without a price (kgpu packages none: the pool's ``prices`` give them), and what
    each vGPU slice type saves against the same specs on whole cards (the guide: 1/4 T4 可节省 75% GPU 成本)."""
    from kgpu.sim.provisioners.tke.supernode import pool_prices, spec_of, vgpu_saving

    out: list[str] = []
    pools = {p.name: p for p in profile.pools if p.kind == PoolKind.TKE_SUPERNODE}
    for name, pool in pools.items():
        nodes = [n for n in result.new_nodes if n.pool == name and n.kind == "tke-supernode"]
        prices = pool_prices(pool)
        unpriced = [n for n in nodes if n.hourly_price is None]
        if unpriced:
            out.append(
                f"pool {name}: {len(unpriced)} super-node pod(s) unpriced: kgpu packages no TKE prices (the guide "
                f"gives none; {prices.source}); set the pool's prices (docs/tke.md)"
            )
        slices: dict[str, list[float]] = {}
        for n in nodes:
            spec = spec_of(n.instance_type)
            saving = vgpu_saving(spec, prices) if spec is not None else None
            if spec is not None and saving is not None:
                acc = slices.setdefault(spec.gpu_type, [0, 0.0, 0.0])
                acc[0] += 1
                acc[1] += saving[0]
                acc[2] += saving[1]
        for gpu_type, (count, mine, full) in slices.items():
            whole = gpu_type.split("*", 1)[1]
            out.append(
                f"pool {name}: {int(count)} pod(s) on {gpu_type} cost ${mine:,.4f}/h; the same specs on whole "
                f"{whole} cards ${full:,.4f}/h: {gpu_type} saves ${full - mine:,.4f}/h ({(full - mine) / full:.0%}) "
                f"(prices of {prices.date}, {prices.source})"
            )
    return out


def plan(
    profile: Profile,
    workloads: Objects | None = None,
    cluster: Objects | None = None,
    *,
    catalog: Catalog | None = None,
) -> PlanResult:
    """Place ``workloads`` (default: the examples of the profile's guide) on ``cluster`` (default: the
    profile's baseline)."""
    work = workloads if workloads is not None else profile_examples(profile)
    if catalog is None:
        catalog = catalog_for(profile)
    baseline = 0.0
    if cluster is None:
        cluster = Objects()
        cluster.nodes.extend(baseline_nodes(profile, catalog))
        baseline = baseline_cost(profile, catalog)
    prov = provisioner_for(profile, catalog, daemonsets=cluster.daemonsets + work.daemonsets)
    result = simulate(cluster, _with_storage(profile, cluster, work), provisioner=prov)
    warnings = profile_warnings(profile) + list(prov.warnings) + list(result.warnings)
    warnings += scale_to_zero_warnings(result) + workload_warnings(result) + tke_price_warnings(profile, result)
    warnings += spot_interruption_warnings(profile, result)
    return PlanResult(profile.metadata.name, result, warnings, baseline, {**cluster.owned, **work.owned})


def _with_storage(profile: Profile, cluster: Objects, work: Objects) -> Objects:
    """The workloads plus the profile's StorageClasses and claims (``storage.volumes``), unless the inputs
    hold objects of the same kind and name already (what the cluster has wins)."""
    if not profile.storage.volumes:
        return work
    from kgpu.model.storage import claim, storage_class

    def key(doc: dict[str, Any]) -> tuple[str, str, str]:
        meta = doc.get("metadata") or {}
        return (str(doc.get("kind")), str(meta.get("namespace") or "default"), str(meta.get("name")))

    have = {key(d) for d, _ in cluster.storage + work.storage if isinstance(d, dict)}
    out = Objects()
    out.extend(work)
    for v in profile.storage.volumes:
        for doc in (storage_class(v), claim(v)):
            if key(doc) not in have:
                out.storage.append((doc, f"profile {profile.metadata.name}: storage.volumes {v.name}"))
    return out


def compare(workloads: Objects | None = None, templates: tuple[str, ...] = TEMPLATES) -> list[dict[str, Any]]:
    """The same workloads on every built-in template: placed, pending, new nodes and cost per template."""
    rows: list[dict[str, Any]] = []
    for name in templates:
        try:
            prof = builtin_profile(name)
            work = workloads if workloads is not None else example_workloads(str(prof.provider))
            result = plan(prof, work)
        except InputError as exc:
            rows.append({"template": name, "skipped": exc.line()})
            continue
        summary = result.simulation.summary()
        rows.append(
            {
                "template": name,
                "scheduled": summary.get("scheduled", 0) + summary.get("provisioned", 0),
                "unschedulable": summary.get("unschedulable", 0),
                "new_nodes": len(result.simulation.new_nodes),
                "hourly_cost": result.cost.get("total", 0.0),
                "baseline_cost": result.baseline_hourly,
                "all_on_demand": result.cost.get("all_on_demand", 0.0),
                "unpriced_nodes": result.cost.get("unpriced_nodes", 0),
            }
        )
    return rows

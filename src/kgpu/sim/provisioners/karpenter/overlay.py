"""Karpenter NodeOverlays (karpenter.sh/v1alpha1), as Karpenter v1.8's NodeOverlay controller and
InstanceTypeStore apply them to each NodePool's instance types (feature gate ``NodeOverlay``).

Semantics (sigs.k8s.io/karpenter v1.8.0, ``pkg/controllers/nodeoverlay``, ``cloudprovider.AdjustedPrice``):

- Overlays are evaluated by weight, descending, equal weights by name descending (``OrderByWeight``).
- An overlay selects an instance type of a NodePool when the type's requirements (its labels, the zones and
  capacity types it is offered in), the NodePool's template labels and ``karpenter.sh/nodepool`` are
  compatible with the overlay's requirements and at least one offering (zone x capacity type) is; every
  NodePool sees every instance type of its node class, whatever its own requirements.
- ``price`` (absolute) or ``priceAdjustment`` (``+0.5``, ``-10%``; never below 0) applies to the selected
  offerings; the heaviest overlay that prices an offering wins.
- ``capacity`` is merged over the type's capacity (``ApplyCapacityOverlay``) on the whole type; a lighter
  overlay evaluated later sets the resources it names again (the store overwrites, v1.8.0's behaviour).
- Two overlays of the same weight that price the same offering, or name the same capacity resource of the
  same type, conflict: the later one (by name) is not applied anywhere (``ValidationSucceeded=False``,
  reason ``Conflict``); an overlay whose capacity names cpu, memory, ephemeral-storage or pods fails
  runtime validation and is not applied either.

kgpu's own overlays (``profile_overlays``: what ``kgpu render`` writes for a shared pool with
``sharing.nodeOverlay``) are evaluated together with the given ones, as Karpenter would see them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgpu.catalog import Catalog
from kgpu.catalog.instance import InstanceType
from kgpu.errors import InputError, quote
from kgpu.model.names import is_qualified_name
from kgpu.model.nodepool import LABEL_ZONE_ID, WELL_KNOWN_LABELS, is_restricted_node_label, normalize
from kgpu.model.quantity import resource_amount
from kgpu.sim.provisioners.karpenter.requirements import PoolRequirement, matches

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read
    from kgpu.model.profile import Pool, Profile

API_VERSION = "karpenter.sh/v1alpha1"
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_CAPACITY = "karpenter.sh/capacity-type"
# v1.WellKnownResources: an overlay may not change them (NodeOverlaySpec.validateCapacity)
RESTRICTED_CAPACITY = frozenset(("cpu", "memory", "ephemeral-storage", "pods"))
OPERATORS = frozenset(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))


@dataclass(frozen=True, slots=True)
class NodeOverlay:
    name: str
    requirements: tuple[PoolRequirement, ...]
    capacity: Mapping[str, int] = field(default_factory=dict)
    price: str | None = None  # price, else priceAdjustment, as written
    weight: int | None = None


def parse_overlay(obj: Mapping[str, Any], where: str = "") -> NodeOverlay:
    """A NodeOverlay object; a bad field (what the CRD's schema makes the API server refuse, and a capacity
    no Node could have) is an InputError naming it."""
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    raw_name = meta.get("name")
    name = raw_name if isinstance(raw_name, str) else ""
    at = f"{where}: NodeOverlay {name}" if where else f"NodeOverlay {name}"
    if not name:
        raise InputError("metadata.name is required (a string)", where=f"{where}: NodeOverlay")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InputError("spec is required", where=at)
    reqs = []
    raw_reqs = spec.get("requirements")
    if not isinstance(raw_reqs, list):
        raise InputError("spec.requirements is required (a list)", where=at)
    if len(raw_reqs) > MAX_REQUIREMENTS:
        raise InputError(f"{len(raw_reqs)} requirements: the CRD allows at most {MAX_REQUIREMENTS}",
                         where=f"{at}: spec.requirements")
    for i, r in enumerate(raw_reqs):
        field_at = f"{at}: spec.requirements[{i}]"
        if not isinstance(r, Mapping) or not r.get("key"):
            raise InputError("key is required", where=field_at)
        key = r["key"]
        if not isinstance(key, str) or len(key) > 316 or not _KEY.match(key):
            raise InputError(f"key {quote(key)} does not match the CRD's pattern {_KEY.pattern} (at most 316 "
                             "characters)", where=f"{field_at}.key")
        op = str(r.get("operator") or "")
        if op not in OPERATORS:
            raise InputError(f"operator {op!r} is not one of {', '.join(sorted(OPERATORS))}", where=field_at)
        raw_values = r.get("values")
        if raw_values is not None and (not isinstance(raw_values, list)
                                       or not all(isinstance(v, str) for v in raw_values)):
            raise InputError(f"must be a list of strings, got {quote(raw_values)}", where=f"{field_at}.values")
        values = tuple(raw_values or ())
        why = _crd_requirement_error(key, op, values)
        if why:
            raise InputError(why, where=field_at)
        reqs.append(PoolRequirement(normalize(key), op, values))
    capacity: dict[str, int] = {}
    raw_capacity = spec.get("capacity")
    if raw_capacity is not None and not isinstance(raw_capacity, Mapping):
        raise InputError(f"must be a map of resource name to quantity (nvidia.com/gpu: 4), got {quote(raw_capacity)}",
                         where=f"{at}: spec.capacity")
    for key, raw in (raw_capacity or {}).items():
        cap_at = f"{at}: spec.capacity.{key}"
        if not isinstance(key, str) or not _resource_name(key):
            raise InputError(f"{quote(key)} is not a resource name (a qualified name, as nvidia.com/gpu): no Node "
                             "can have it", where=cap_at)
        # a negative or larger than int64 amount is refused, as every resource amount kgpu reads
        capacity[key] = resource_amount(raw, where=cap_at)
    price = spec.get("price")
    adjustment = spec.get("priceAdjustment")
    if price is not None and adjustment is not None:
        raise InputError("price and priceAdjustment are mutually exclusive", where=f"{at}: spec")
    for key, raw in (("price", price), ("priceAdjustment", adjustment)):
        if raw is not None and not isinstance(raw, str):
            raise InputError(f"must be a string (the CRD's type), got {quote(raw)}: write {key}: \"{raw}\"",
                             where=f"{at}: spec.{key}")
        if raw is not None and not (_PRICE if key == "price" else _ADJUSTMENT).match(raw):
            raise InputError(f"invalid {key} {raw!r}: the CRD's pattern is {(_PRICE if key == 'price' else _ADJUSTMENT).pattern}",
                             where=f"{at}: spec.{key}")
    weight = spec.get("weight")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 10000):
        raise InputError(f"weight {weight!r} must be an integer from 1 to 10000", where=f"{at}: spec.weight")
    return NodeOverlay(
        name,
        intersected(reqs),
        capacity,
        str(price) if price is not None else (str(adjustment) if adjustment is not None else None),
        int(weight) if weight is not None else None,
    )


# The NodeOverlay CRD's patterns (karpenter.sh_nodeoverlays.yaml, v1.8.0)
_PRICE = re.compile(r"^\d+(\.\d+)?$")
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
MAX_REQUIREMENTS = 100


def _resource_name(key: str) -> bool:
    """IsQualifiedName, which a Node's capacity names pass (the CRD itself does not check capacity names)."""
    return is_qualified_name(key)
_ADJUSTMENT = re.compile(r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$")


def _crd_requirement_error(key: str, op: str, values: tuple[str, ...]) -> str | None:
    """What the NodeOverlay CRD's validation rules say of a requirement the API server rejects."""
    if key not in ("karpenter.sh/capacity-type", "karpenter.sh/nodepool") and key.split("/")[0].endswith("karpenter.sh"):
        return 'label domain "karpenter.sh" is restricted'
    if key == "kubernetes.io/hostname":
        return 'label "kubernetes.io/hostname" is restricted'
    if op in ("In", "NotIn") and not values:
        return f"requirements with operator '{op}' must have a value defined"
    if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].isdigit() or not values[0].isascii()):
        return "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"
    return None


def runtime_error(ov: NodeOverlay) -> str | None:
    """Karpenter's RuntimeValidate: why the controller leaves the overlay out (ValidationSucceeded=False,
    reason RuntimeValidation), or None."""
    bad = sorted(k for k in ov.capacity if k in RESTRICTED_CAPACITY)
    if bad:
        return f"RuntimeValidation: invalid capacity: {bad[0]} in resource, restricted"
    for r in ov.requirements:
        if r.key not in WELL_KNOWN_LABELS and is_restricted_node_label(r.key):
            return (f"RuntimeValidation: invalid value: label {r.key} is restricted; specify a well known label "
                    "or a custom label that does not use a restricted domain in requirements, restricted")
    return None


def intersected(reqs: Sequence[PoolRequirement]) -> tuple[PoolRequirement, ...]:
    """Karpenter's ``NewNodeSelectorRequirements``: requirements on one key are intersected, and an empty
    intersection (In sets with nothing in common, In minus NotIn, Exists with DoesNotExist, an empty Gt/Lt
    range) is kept as DoesNotExist, not as nothing: such an overlay selects the types without the label."""
    by_key: dict[str, list[PoolRequirement]] = {}
    for r in reqs:
        by_key.setdefault(r.key, []).append(r)
    out: list[PoolRequirement] = []
    for key, same in by_key.items():
        if len(same) > 1 and intersection_empty(same):
            out.append(PoolRequirement(key, "DoesNotExist"))
        else:
            out.extend(same)
    return tuple(out)


def intersection_empty(reqs: Sequence[PoolRequirement]) -> bool:
    """Whether Karpenter's Requirement.Intersection of ``reqs`` (one key) leaves no value: a value set
    (In, DoesNotExist) or a complement (NotIn, Exists, Gt, Lt) with bounds, folded as it folds them."""
    complement, values = True, set[str]()
    gt: int | None = None
    lt: int | None = None
    for r in reqs:
        other_complement = r.operator in ("NotIn", "Exists", "Gt", "Lt")
        other = set(r.values) if r.operator in ("In", "NotIn") else set()
        if r.operator in ("Gt", "Lt") and r.values and r.values[0].lstrip("-").isdigit():
            bound = int(r.values[0])
            if r.operator == "Gt":
                gt = bound if gt is None else max(gt, bound)
            else:
                lt = bound if lt is None else min(lt, bound)
        if complement and other_complement:
            values |= other
        elif complement:
            values = other - values
        elif other_complement:
            values -= other
        else:
            values &= other
        complement = complement and other_complement
    if gt is not None and lt is not None and gt >= lt:  # as Karpenter checks it (Gt 5 with Lt 6 stays)
        return True
    if complement:
        return False

    def within(v: str) -> bool:
        if gt is None and lt is None:
            return True
        if not v.lstrip("-").isdigit():
            return False
        return (gt is None or int(v) > gt) and (lt is None or int(v) < lt)

    return not any(within(v) for v in values)


def adjusted_price(price: float, change: str) -> float:
    """Karpenter's ``AdjustedPrice``: an absolute price, or ``+x``/``-x``/``+x%``/``-x%``, floored at 0."""
    if not change:
        return price
    if not change.startswith(("+", "-")):
        return float(change)
    out = price * (1 + float(change[:-1]) / 100) if change.endswith("%") else price + float(change)
    return out if out >= 0 else 0.0


def profile_overlays(profile: Profile, catalog: Catalog) -> list[NodeOverlay]:
    """The NodeOverlays ``kgpu render`` writes for the profile's shared Karpenter pools (same names,
    requirements and capacity: ``kgpu.render.karpenter.nodeoverlays``)."""
    from kgpu.sim.sharing import overlay_groups

    out = []
    for pool in profile.pools:
        if pool.kind != "karpenter" or pool.sharing is None or not pool.sharing.node_overlay:
            continue
        groups = overlay_groups(pool, catalog)
        for i, (capacity, types) in enumerate(groups):
            name = f"{pool.name}-gpu-sharing" + (f"-{i + 1}" if len(groups) > 1 else "")
            reqs = (
                PoolRequirement(LABEL_NODEPOOL, "In", (pool.name,)),
                PoolRequirement("node.kubernetes.io/instance-type", "In", tuple(types)),
            )
            out.append(NodeOverlay(name, reqs, dict(capacity)))
    return out


@dataclass(slots=True)
class _Update:
    prices: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)  # offering -> (price, weight)
    capacity: dict[str, int] = field(default_factory=dict)
    capacity_last: frozenset[str] = frozenset()  # resources of the lightest capacity overlay so far
    capacity_weight: int | None = None
    has_capacity: bool = False


@dataclass(frozen=True, slots=True)
class Overlaid:
    """What Karpenter believes of one instance type in one NodePool: capacity changes and offering prices."""

    capacity: Mapping[str, int]
    prices: Mapping[tuple[str, str], float]  # (zone, capacity type) -> price, for the overlaid offerings


class OverlayStore:
    """The InstanceTypeStore the NodeOverlay controller builds: per NodePool and instance type, the updates
    of the overlays that validated; ``errors``: the overlays left out, with the reason."""

    def __init__(
        self,
        overlays: Sequence[NodeOverlay],
        pools: Sequence[Pool],
        catalog: Catalog,
        region: str,
        zones: Iterable[str] = (),
    ) -> None:
        self.errors: dict[str, str] = {}
        self._updates: dict[tuple[str, str], _Update] = {}
        allowed = set(zones)
        types: list[tuple[InstanceType, dict[str, str], list[tuple[str, str]]]] = []
        self._zone_ids: dict[str, str] = {}  # zone -> its zone ID: offerings carry both (AWS provider)
        for t in catalog.types():
            offs = []
            for o in catalog.offerings(t.name, region):
                if not allowed or o.zone in allowed:
                    offs.append((o.zone, o.capacity_type))
                    if o.zone_id:
                        self._zone_ids[o.zone] = o.zone_id
            if offs:
                types.append((t, t.labels(region, "", ""), offs))
        ordered = sorted(overlays, key=lambda o: o.name, reverse=True)
        ordered.sort(key=lambda o: -(o.weight or 0))
        for ov in ordered:
            why = runtime_error(ov)
            if why:
                self.errors[ov.name] = why
                continue
            selected = [
                (pool.name, t.name, offs)
                for pool in pools
                for t, labels, all_offs in types
                if (offs := _selected(ov, pool, labels, all_offs, self._zone_ids))
            ]
            if any(self._conflicts(ov, key, t, offs) for key, t, offs in selected):
                self.errors[ov.name] = "Conflict: conflict with another overlay"
                continue
            for pool_name, tname, offs in selected:
                self._store(ov, pool_name, tname, offs)

    def _conflicts(self, ov: NodeOverlay, pool: str, tname: str, offs: list[tuple[str, str]]) -> bool:
        upd = self._updates.get((pool, tname))
        if upd is None:
            return False
        weight = ov.weight or 0
        if ov.price is not None and any(
            o in upd.prices and upd.prices[o][1] == weight for o in offs
        ):
            return True
        if ov.capacity and upd.has_capacity and (upd.capacity_weight or 0) == weight:
            return any(k in upd.capacity_last for k in ov.capacity)
        return False

    def _store(self, ov: NodeOverlay, pool: str, tname: str, offs: list[tuple[str, str]]) -> None:
        upd = self._updates.setdefault((pool, tname), _Update())
        weight = ov.weight or 0
        if ov.price is not None:
            for o in offs:
                if o in upd.prices:  # a heavier overlay priced it: only its weight bookkeeping moves
                    upd.prices[o] = (upd.prices[o][0], weight)
                else:
                    upd.prices[o] = (ov.price, weight)
        if ov.capacity:
            upd.capacity.update(ov.capacity)
            upd.capacity_last = frozenset(ov.capacity)
            upd.capacity_weight = weight
            upd.has_capacity = True

    def get(self, pool: str, itype: InstanceType, base_prices: Mapping[tuple[str, str], float]) -> Overlaid | None:
        """The overlaid capacity and prices of ``itype`` in ``pool`` (None when no overlay applies)."""
        upd = self._updates.get((pool, itype.name))
        if upd is None:
            return None
        prices = {
            o: adjusted_price(base_prices[o], p) for o, (p, _) in upd.prices.items() if o in base_prices
        }
        return Overlaid(dict(upd.capacity), prices)


def _selected(
    ov: NodeOverlay, pool: Pool, labels: Mapping[str, str], offs: list[tuple[str, str]],
    zone_ids: Mapping[str, str],
) -> list[tuple[str, str]]:
    """The offerings of a type ``ov`` selects in ``pool`` (getOverlaidOfferings): none unless the type's
    requirements with the NodePool's labels are compatible with the overlay's. An offering carries its zone,
    zone ID and capacity type, as the AWS provider's offerings do."""
    node = {**labels, **pool.labels, LABEL_NODEPOOL: pool.name}
    out = []
    for zone, captype in offs:
        full = {**node, LABEL_ZONE: zone, LABEL_CAPACITY: captype}
        if zone in zone_ids:
            full[LABEL_ZONE_ID] = zone_ids[zone]
        if all(matches(r, full) for r in ov.requirements):
            out.append((zone, captype))
    return out

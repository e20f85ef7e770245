"""A NodePool's requirements as Karpenter's scheduler reads them (sigs.k8s.io/karpenter ``pkg/scheduling``).

Keys are normalized first (``beta.kubernetes.io/arch`` -> ``kubernetes.io/arch``: ``NormalizedLabels``), and
requirements on one key intersect. Then:

- **well-known keys** (instance type, zone, capacity type, arch, os, ``karpenter.k8s.aws/instance-*``, ...)
  narrow the offerings: an instance type that does not define the label is ``DoesNotExist`` for it, so it
  meets ``NotIn``/``DoesNotExist`` and fails ``In``/``Exists``/``Gt``/``Lt``, exactly as label matching does;
- **custom keys** do not narrow instance types; they become node labels. ``In`` values each give the nodes
  that label (a pod selecting one of them gets a node with it; Karpenter's ``Requirements.Labels``), a single
  value always. ``DoesNotExist`` gives no label. ``Exists``, ``NotIn``, ``Gt`` and ``Lt`` on a custom key
  hold for the pool's claims (``LabelSet``): a pod's requirement on the key must intersect them, and the
  node gets the integer label Karpenter makes up (``LabelSet.label``).
- **custom keys a pod brings** (``NotIn``/``DoesNotExist`` on a key the pool does not define pass the pool's
  check) become the claim's requirements (``NodeClaim.CanAdd`` adds the pod's requirements to the claim's), so a
  later pod may select that key on the claim: its requirement must intersect the claim's (``LabelSet``), and a
  claim left with one ``In`` value launches a node with that label.
- **provider labels the catalog has no data for** (``instance-accelerator-*``, capacity reservations):
  not applied, with a profile warning, instead of leaving the pool without instance types.
- **minValues**: a claim must keep at least that many distinct values of the key among its instance types,
  counting each type's values as Karpenter's ``InstanceTypes.SatisfiesMinValues`` does (for zones and capacity
  types: every zone / capacity type the type is offered in).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgpu.catalog.ec2_types import ec2_type_labels
from kgpu.catalog.instance import LABEL_TENANCY, TENANCY_DEFAULT
from kgpu.model.nodepool import (
    CATALOG_MISSING_LABELS,
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
    LABEL_REGION,
    LABEL_ZONE,
    LABEL_ZONE_ID,
    NORMALIZED_LABELS,
    WELL_KNOWN_LABELS,
    normalize,
)

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read
    from kgpu.model.objects import PodSpecInfo, Term
    from kgpu.model.profile import Pool

MAX_LABEL_VARIANTS = 64


@dataclass(frozen=True, slots=True)
class PoolRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} [{' '.join(self.values)}]"


_BIG = (1 << 63) - 1  # Go's math.MaxInt64: the size Karpenter gives a complement set


@dataclass(frozen=True, slots=True)
class LabelSet:
    """The values one label key may take, as Karpenter's ``scheduling.Requirement`` holds them: a set of
    values, or (``complement``) every value but those, within the integer bounds ``gt``/``lt``."""

    complement: bool
    values: frozenset[str] = frozenset()
    gt: int | None = None
    lt: int | None = None

    @staticmethod
    def of(operator: str, values: Sequence[str] = ()) -> LabelSet:
        """A node selector requirement (``NewRequirement``)."""
        if operator == "In":
            return LabelSet(False, frozenset(values))
        if operator == "DoesNotExist":
            return LabelSet(False)
        if operator == "NotIn":
            return LabelSet(True, frozenset(values))
        if operator in ("Gt", "Lt") and values and _int(values[0]) is not None:
            n = _int(values[0])
            return LabelSet(True, gt=n) if operator == "Gt" else LabelSet(True, lt=n)
        return LabelSet(True)  # Exists

    def _within(self, value: str, gt: int | None, lt: int | None) -> bool:
        if gt is None and lt is None:
            return True
        n = _int(value)
        return n is not None and (gt is None or n > gt) and (lt is None or n < lt)

    def intersection(self, other: LabelSet) -> LabelSet:
        """``Requirement.Intersection``."""
        gt = max((b for b in (self.gt, other.gt) if b is not None), default=None)
        lt = min((b for b in (self.lt, other.lt) if b is not None), default=None)
        if gt is not None and lt is not None and gt >= lt:
            return LabelSet(False)
        complement = self.complement and other.complement
        if complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if self._within(v, gt, lt))
        return LabelSet(complement, values, gt, lt) if complement else LabelSet(False, values)

    def meets(self, other: LabelSet) -> bool:
        """``Requirement.HasIntersection``."""
        gt = max((b for b in (self.gt, other.gt) if b is not None), default=None)
        lt = min((b for b in (self.lt, other.lt) if b is not None), default=None)
        if gt is not None and lt is not None and gt >= lt:
            return False
        if self.complement and other.complement:
            return True
        if self.complement or other.complement:
            have, without = (other.values, self.values) if self.complement else (self.values, other.values)
            return any(v not in without and self._within(v, gt, lt) for v in have)
        return any(v in other.values and self._within(v, gt, lt) for v in self.values)

    @property
    def operator(self) -> str:
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    def admits(self, incoming: LabelSet) -> bool:
        """Karpenter's ``Requirements.Intersects`` for one key this set holds: the values must meet, unless
        both sides only exclude (``NotIn``/``DoesNotExist``)."""
        if self.meets(incoming):
            return True
        excluding = ("NotIn", "DoesNotExist")
        return incoming.operator in excluding and self.operator in excluding

    def label(self) -> str | None:
        """The node label Karpenter gives the key (``Requirements.Labels``, ``Requirement.Any``): an ``In``
        value (Go picks one at random; kgpu the first in order), for ``NotIn``/``Exists`` an integer Karpenter
        makes up at random within the bounds (kgpu: the smallest not excluded), none for ``DoesNotExist``."""
        if not self.complement:
            return min(self.values) if self.values else None
        n = self.gt + 1 if self.gt is not None else 0
        while str(n) in self.values:
            n += 1
        return str(n) if self.lt is None or n < self.lt else None

    def text(self, key: str) -> str:
        """``Requirement.String``: ``key Op [values]`` (five values, then how many others), then the bounds."""
        op = self.operator
        if op in ("Exists", "DoesNotExist"):
            out = f"{key} {op}"
        else:
            values = sorted(self.values)
            if len(values) > 5:
                values = [*values[:5], f"and {len(values) - 5} others"]
            out = f"{key} {op} [{' '.join(values)}]"
        return out + (f" >{self.gt}" if self.gt is not None else "") + (f" <{self.lt}" if self.lt is not None else "")


def pod_label_sets(spec: PodSpecInfo, keys: Callable[[str], bool]) -> dict[str, LabelSet]:
    """The pod's requirements (its node selector and first required node affinity term, as Karpenter's
    ``NewPodRequirements`` reads them, keys normalized) on the keys ``keys`` picks, intersected per key."""
    out: dict[str, LabelSet] = {}
    reqs: list[tuple[str, str, Sequence[str]]] = [(k, "In", (v,)) for k, v in spec.node_selector]
    if spec.affinity is not None and spec.affinity.terms:
        reqs.extend((r.key, r.operator, r.values) for r in spec.affinity.terms[0].match_expressions)
    for key, op, values in reqs:
        key = normalize(key)
        if keys(key):
            have = out.get(key)
            incoming = LabelSet.of(op, values)
            out[key] = incoming if have is None else have.intersection(incoming)
    return out


def pool_requirements(pool: Pool) -> list[PoolRequirement]:
    """The pool's requirements (shorthand and native, as rendered), keys normalized."""
    out = []
    for r in pool.karpenter_requirements():
        out.append(
            PoolRequirement(
                normalize(str(r["key"])),
                str(r["operator"]),
                tuple(str(v) for v in r.get("values") or ()),
                r.get("minValues"),
            )
        )
    return out


def with_aliases(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` with every ``NormalizedLabels`` alias of a label they carry, valued like it.

    Karpenter compares a pod's requirement on an alias (``failure-domain.beta.kubernetes.io/zone``,
    ``topology.ebs.csi.aws.com/zone``) as one on the stable key, so an offering meets it exactly when its
    node carries the alias with the stable label's value; and the node does: the kubelet sets the beta
    labels, the EBS CSI driver's node plugin sets its zone key.
    """
    out = dict(labels)
    for alias, key in NORMALIZED_LABELS.items():
        if key in labels and alias not in labels:
            out[alias] = labels[key]
    return out


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def matches(req: PoolRequirement, labels: Mapping[str, str]) -> bool:
    """Label matching with Karpenter's operators (Gte/Lte included)."""
    op = req.operator
    have = labels.get(req.key)
    if op == "In":
        return have is not None and have in req.values
    if op == "NotIn":
        return have is None or have not in req.values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if have is None:
        return False
    n, want = _int(have), _int(req.values[0]) if req.values else None
    if n is None or want is None:
        return False
    return {"Gt": n > want, "Lt": n < want, "Gte": n >= want, "Lte": n <= want}.get(op, False)


def well_known(reqs: Sequence[PoolRequirement]) -> list[PoolRequirement]:
    """The requirements that narrow offerings: well-known keys the catalog has values for."""
    return [r for r in reqs if r.key in WELL_KNOWN_LABELS and r.key not in CATALOG_MISSING_LABELS]


def not_applied(reqs: Sequence[PoolRequirement]) -> list[PoolRequirement]:
    """Requirements on provider labels the catalog has no data for: not applied (a profile warning)."""
    return [r for r in reqs if r.key in CATALOG_MISSING_LABELS]


def uncatalogued(reqs: Sequence[PoolRequirement], have: set[str]) -> list[str]:
    """The EC2 instance types (``kgpu.catalog.ec2_types``, every type Karpenter's AWS provider knows) that
    ``reqs``' well-known type requirements allow and ``have`` (the priced catalog's types in the region)
    lacks, by name. Zone, capacity type and region are the offerings', not the type's, and are left out."""
    offering = {LABEL_ZONE, LABEL_ZONE_ID, LABEL_CAPACITY_TYPE, LABEL_REGION, LABEL_NODEPOOL}
    type_reqs = [r for r in well_known(reqs) if r.key not in offering]
    out = []
    for name, labels in ec2_type_labels().items():
        if name in have:
            continue
        labels = {**labels, LABEL_TENANCY: TENANCY_DEFAULT}  # as the priced catalog labels every type
        if all(matches(r, labels) for r in type_reqs):
            out.append(name)
    return sorted(out)


def label_variants(reqs: Sequence[PoolRequirement], labels: Mapping[str, str]) -> list[dict[str, str]]:
    """The custom labels a node of the pool may carry: one mapping per combination of ``In`` values of
    custom keys (the pool's own labels win). Empty values for a key: no node can satisfy the pool."""
    choices: dict[str, list[str]] = {}
    excluded: dict[str, set[str]] = {}
    for r in reqs:
        if r.key in WELL_KNOWN_LABELS or r.key in labels:
            continue
        if r.operator == "In":
            prev = choices.get(r.key)
            choices[r.key] = [v for v in r.values if prev is None or v in prev]
        elif r.operator == "NotIn":
            excluded.setdefault(r.key, set()).update(r.values)
    for key, values in choices.items():
        choices[key] = [v for v in values if v not in excluded.get(key, set())]
    if any(not v for v in choices.values()):
        return []
    keys = sorted(choices)
    combos = list(itertools.islice(itertools.product(*(choices[k] for k in keys)), MAX_LABEL_VARIANTS))
    return [dict(zip(keys, combo, strict=True)) for combo in combos]


class MinValues:
    """The ``minValues`` requirements of a pool over its ranked offerings, as bit masks per value."""

    def __init__(
        self, reqs: Sequence[PoolRequirement], values_of: Sequence[Mapping[str, frozenset[str]]]
    ) -> None:
        wanted: dict[str, int] = {}
        for r in reqs:
            if r.min_values is not None:
                wanted[r.key] = max(
                    wanted.get(r.key, 0), r.min_values
                )  # Requirement.Intersection keeps the max
        self.wanted = wanted
        self.masks: dict[str, list[int]] = {}
        for key in wanted:
            by_value: dict[str, int] = {}
            for i, values in enumerate(values_of):
                for v in values.get(key, ()):
                    by_value[v] = by_value.get(v, 0) | (1 << i)
            self.masks[key] = list(by_value.values())

    def __bool__(self) -> bool:
        return bool(self.wanted)

    def unmet(self, mask: int) -> list[str]:
        """Keys whose distinct values among the offerings in ``mask`` fall short of their minValues."""
        out = []
        for key, n in self.wanted.items():
            have = 0
            for m in self.masks[key]:
                if m & mask:
                    have += 1
                    if have >= n:
                        break
            if have < n:
                out.append(key)
        return sorted(out)

    @staticmethod
    def error(keys: Sequence[str]) -> str:
        return f"minValues requirement is not met for label(s) (label(s)=[{' '.join(keys)}])"


def affinity_tries(spec: PodSpecInfo) -> list[tuple[Term | None, Term | None]]:
    """The node affinity Karpenter tries for a pod, in its order (Preferences.Relax): each required term
    (None: none) with the heaviest preferred term, then the last required term with each lighter one, then
    that term alone; as (required term, preferred term) pairs. kgpu.sim.provisioners.karpenter.solve.relaxations builds its
    tries from these; kgpu.sim.unmodelled reads them."""
    terms: list[Term | None] = list(spec.affinity.terms) if spec.affinity is not None and spec.affinity.terms else [None]
    preferred = [p.term for p in sorted(spec.preferred, key=lambda p: -p.weight)]
    first = preferred[0] if preferred else None
    tries = [(t, first) for t in terms] + [(terms[-1], p) for p in preferred[1:]]
    if preferred:
        tries.append((terms[-1], None))
    return tries

"""What the simulation does not model, said per pod: never silent.

A pod whose outcome may depend on something kgpu does not model carries a warning with a stable code
(``volumes``, ``dra``, ...). ``RULES`` is the one list: a rule names its code, when it applies (``ANY``:
whatever the outcome; ``KARPENTER``: Karpenter's provisioning was asked for it), what it detects, and the
text the table's footer prints. When kgpu models one of these, its rule is deleted: one line.

A rule's detector gets the pod's spec and returns the detail for this pod ("pvc data-0"), or None.
Results are memoised per kind of pod, so a 50,000-pod simulation pays for each distinct spec once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kgpu.model.nodepool import normalize
from kgpu.model.objects import PodSpecInfo
from kgpu.sim.provisioners.karpenter.requirements import affinity_tries
from kgpu.sim.provisioners.karpenter.topology import KEYS as SPREAD_KEYS

ANY = "any"
KARPENTER = "karpenter"
# namespaceSelector keys kgpu can answer without Namespace objects (every namespace carries this label)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class Unmodelled:
    """One warning on one pod: its rule's code and what this pod asks that kgpu does not model."""

    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    when: str
    detect: Callable[[PodSpecInfo], str | None]
    text: str


def _join(items: Iterable[str], most: int = 3) -> str:
    items = list(items)
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _volumes(spec: PodSpecInfo) -> str | None:
    # Claims are modelled (kgpu.sim.scheduler.plugins.volumebinding); what is not (no storage object given at all, a provisioner whose
    # volumes' topology kgpu does not know, the zone of an Immediate claim) is added per pod by
    # kgpu.sim.simulate under this code.
    return None


def _dra(spec: PodSpecInfo) -> str | None:
    # Resource claims are modelled (kgpu.sim.scheduler.plugins.dynamicresources); what is not (no DRA object given at all, a CEL selector
    # calling a function kgpu does not evaluate) is added per pod by kgpu.sim.simulate under this code.
    return None


def _runtime_class(spec: PodSpecInfo) -> str | None:
    return f"runtimeClassName {spec.runtime_class}" if spec.runtime_class else None


def _namespace_selector(spec: PodSpecInfo) -> str | None:
    terms = [*spec.pod_affinity, *spec.pod_anti_affinity]
    terms += [w.term for w in (*spec.preferred_pod_affinity, *spec.preferred_pod_anti_affinity)]
    keys = sorted(
        {
            r.key
            for t in terms
            if t.namespace_selector is not None
            for r in t.namespace_selector.requirements
            if r.key != NAMESPACE_NAME_LABEL
        }
    )
    return "namespaceSelector on " + _join(keys) if keys else None


def _karpenter_topology(spec: PodSpecInfo) -> str | None:
    parts = []
    # zone and hostname spread is modelled (kgpu.sim.provisioners.karpenter.topology; ScheduleAnyway as a preference
    # Karpenter relaxes); ScheduleAnyway on other keys is a karpenter-preferences warning
    keys = {c.topology_key for c in spec.topology_spread if c.when_unsatisfiable == "DoNotSchedule"}
    keys -= set(SPREAD_KEYS)
    if keys:
        parts.append("topology spread on " + _join(sorted(keys)))
    terms = sorted({t.topology_key for t in (*spec.pod_affinity, *spec.pod_anti_affinity)})
    if terms:
        parts.append("required pod (anti-)affinity on " + _join(terms))
    return ", ".join(parts) or None


def _karpenter_preferences(spec: PodSpecInfo) -> str | None:
    # preferred node affinity is modelled (kgpu.sim.provisioners.karpenter.solve.relaxations)
    parts = []
    if spec.preferred_pod_affinity or spec.preferred_pod_anti_affinity:
        parts.append("preferred pod (anti-)affinity")
    keys = {c.topology_key for c in spec.topology_spread if c.when_unsatisfiable == "ScheduleAnyway"}
    keys -= set(SPREAD_KEYS)  # zone and hostname: required until relaxed, as Karpenter does (modelled)
    if keys:
        parts.append("ScheduleAnyway topology spread on " + _join(sorted(keys)))
    return ", ".join(parts) or None


def _karpenter_exists_not_in(spec: PodSpecInfo) -> str | None:
    # The requirement sets Karpenter tries, nodeSelector in each: a key with Exists and NotIn and nothing else
    keys: set[str] = set()
    for term, pref in affinity_tries(spec):
        ops: dict[str, set[str]] = {normalize(k): {"In"} for k, _ in spec.node_selector}
        for r in (*(term.match_expressions if term else ()), *(pref.match_expressions if pref else ())):
            ops.setdefault(normalize(r.key), set()).add(r.operator)
        keys.update(k for k, o in ops.items() if o == {"Exists", "NotIn"})
    return "node affinity " + _join(f"{k} Exists with NotIn" for k in sorted(keys)) if keys else None


RULES: tuple[Rule, ...] = (
    Rule("volumes", ANY, _volumes, "PersistentVolumeClaims: claims without the storage objects in the input, or a volume whose zone kgpu cannot know (attach limits and storage capacity are not modelled)"),
    Rule("dra", ANY, _dra, "dynamic resource allocation (DRA): claims without the DRA objects in the input, or a CEL selector kgpu cannot evaluate (it matches no device here)"),
    Rule("runtime-class", ANY, _runtime_class, "the RuntimeClass's pod overhead and node scheduling are not read"),
    Rule("namespace-selector", ANY, _namespace_selector, "pod affinity namespaceSelector: namespaces' labels are not read, only kubernetes.io/metadata.name"),
    Rule("karpenter-topology", KARPENTER, _karpenter_topology, "Karpenter's topology for new nodes (spread on other keys than zone and hostname, pod (anti-)affinity) is not modelled"),
    Rule("karpenter-exists-not-in", KARPENTER, _karpenter_exists_not_in, "Karpenter (v1.8) keeps Exists with NotIn on one key as NotIn alone, which a node without the label satisfies: it may launch a node, from a NodePool that does not set the label, that the pod cannot run on; kgpu launches none for it"),
    Rule("karpenter-preferences", KARPENTER, _karpenter_preferences, "Karpenter first treats these preferences as required, relaxing them one by one; kgpu's Karpenter ignores them"),
)  # fmt: skip
TEXT = {r.code: r.text for r in RULES}


class Detector:
    """The warnings of pods, memoised per kind of pod."""

    def __init__(self, rules: Sequence[Rule] = RULES) -> None:
        self.rules = rules
        self._memo: dict[tuple[Any, ...], tuple[Unmodelled, ...]] = {}
        self._specs: list[PodSpecInfo] = []

    def warnings(self, spec: PodSpecInfo, when: Iterable[str]) -> tuple[Unmodelled, ...]:
        """The warnings of the rules of the given kinds (``ANY``, ``KARPENTER``)."""
        kinds = tuple(when)
        key = (id(spec), kinds)
        hit = self._memo.get(key)
        if hit is None:
            self._specs.append(spec)  # ids stay unique while memoised
            out = []
            for rule in self.rules:
                if rule.when in kinds:
                    detail = rule.detect(spec)
                    if detail is not None:
                        out.append(Unmodelled(rule.code, f"{detail}: {rule.text}"))
            hit = self._memo[key] = tuple(out)
        return hit

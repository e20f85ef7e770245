"""Run one scenario through kgpu and through Karpenter's Solve (the oracle), and compare the two.

Comparisons, per scenario:

- ``claims``: kgpu launches as many new nodes as Karpenter creates NodeClaims that the AWS provider
  launches (``launch_choice``: its launch filters may leave no instance type, and the claim's pods wait);
- ``errors``: the same pods are left without a node (kgpu: Unschedulable; Karpenter: a pod error, or a pod
  of a claim that cannot launch);
- ``type``: for each kgpu node whose pods form one of Karpenter's NodeClaims, kgpu's instance type is among
  that claim's instance-type options and its price is the cheapest launch price among them, as the AWS
  provider launches a claim (``launch_choice``: accelerator and metal types last, spot types dearer than the
  cheapest on-demand offering dropped, spot first where offered), over the offerings compatible with the
  claim's requirements.

A disagreement gets a class: a known one (``known_class``, documented in docs/simulate.md under "Known
differences from Karpenter", each with a precise predicate) or ``unexplained``.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from karpenter_gen import REGION, Scenario
from karpenter_types import instance_types, well_known_labels

from kgpu.catalog import aws_catalog
from kgpu.model.load import parse_documents
from kgpu.model.profile import parse_profile
from kgpu.render.karpenter import nodeoverlays, nodepool
from kgpu.sim.provisioners.karpenter.overlay import intersection_empty, parse_overlay
from kgpu.sim.provisioners.karpenter.requirements import PoolRequirement
from kgpu.sim.provisioners.karpenter.solve import Karpenter
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import UNSCHEDULABLE, simulate

EPS = 1e-9


@dataclass
class KgpuNode:
    pool: str
    instance_type: str
    capacity_type: str
    zone: str
    price: float
    pods: frozenset[str]


@dataclass
class KgpuResult:
    nodes: list[KgpuNode]
    errors: dict[str, str]
    overlay_errors: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """Per comparison: True (agree), or the disagreement's class."""

    seed: int
    checks: dict[str, list[str | None]] = field(default_factory=dict)
    detail: list[str] = field(default_factory=list)

    def add(self, comparison: str, klass: str | None, detail: str = "") -> None:
        self.checks.setdefault(comparison, []).append(klass)
        if klass is not None and detail:
            self.detail.append(f"[{comparison}/{klass}] {detail}")


def run_kgpu(scn: Scenario) -> KgpuResult:
    return _run_kgpu(scn)


def _run_kgpu(scn: Scenario) -> KgpuResult:
    profile = parse_profile(scn.profile, source=f"case {scn.seed}")
    catalog = aws_catalog(REGION)
    objs = parse_documents([*scn.daemonsets, *scn.pods], f"case {scn.seed}")
    prov = provisioner_for(profile, catalog, daemonsets=objs.daemonsets)
    karpenter = next(part for part in prov.parts if isinstance(part, Karpenter))
    karpenter.overlays = [parse_overlay(o, f"case {scn.seed}") for o in scn.overlays]
    workloads = parse_documents(scn.pods, f"case {scn.seed}")
    result = simulate(parse_documents([], "cluster"), workloads, provisioner=prov)
    # the oracle runs one Solve: kgpu's first batch is its answer; pods kgpu provisions in a later batch (a host
    # port another claim of their pool took in the first) are pods that Solve left with an error
    nodes = [
        KgpuNode(
            n.pool,
            n.instance_type,
            n.capacity_type,
            n.zone,
            float(n.hourly_price or 0.0),
            frozenset(p.key for p in n.pods),
        )
        for n in result.new_nodes
        if n.batch == 1
    ]
    errors = {
        f"{p.pod.namespace}/{p.pod.name}": p.reason or ""
        for p in result.placements
        if p.phase == UNSCHEDULABLE
    }
    errors.update({p.key: "a later batch" for n in result.new_nodes if n.batch > 1 for p in n.pods})
    return KgpuResult(nodes, errors, dict(karpenter.overlay_errors))


def oracle_input(scn: Scenario) -> dict[str, Any]:
    profile = parse_profile(scn.profile, source=f"case {scn.seed}")
    catalog = aws_catalog(REGION)
    return {
        "nodePools": [nodepool(profile, p) for p in profile.pools],
        # what `kgpu render` writes for shared pools, and the input's
        "nodeOverlays": [o for p in profile.pools for o in nodeoverlays(profile, p)] + scn.overlays,
        "instanceTypes": instance_types(catalog, REGION, scn.zones),
        "wellKnownLabels": well_known_labels(catalog, REGION),
        "daemonSets": scn.daemonsets,
        "pods": scn.pods,
    }


def run_oracle(binary: Path, scn: Scenario) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(oracle_input(scn), fh)
        path = fh.name
    try:
        proc = subprocess.run([str(binary), path], capture_output=True, text=True, timeout=120, check=False)
    finally:
        Path(path).unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"case {scn.seed}: karpenter-oracle exit {proc.returncode}: {proc.stderr.strip()}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def launch_choice(claim: dict[str, Any]) -> tuple[str, float, set[str]] | None:
    """What the AWS provider (v1.8.0, ``pkg/providers/instance/filter``) launches for a claim, over the
    offerings compatible with its requirements at the prices Solve saw (its Create applies the NodeOverlays
    too). Unless a requirement has minValues: GPU and metal types dropped when other options remain
    (ExoticInstanceTypeFilter); where the claim allows both capacity types and both are offered, only the
    types with a spot offering at most the cheapest on-demand price, or with no spot offering
    (SpotInstanceFilter). None when no type is left (the launch fails with insufficient capacity). Else the
    capacity type (spot when an option still offers it), the lowest price at it, and the options offering
    that price (EC2's lowest-price pick; price-capacity-optimized spot picks among the cheapest pools)."""
    catalog = aws_catalog(REGION)
    options = claim["instanceTypes"]
    if not any(r.get("minValues") for r in claim["requirements"]):
        generic = [
            it
            for it in options
            if not catalog.get(it["name"]).has_gpu and "metal" not in catalog.get(it["name"]).size
        ]
        options = generic or options
        captype_req = next((r for r in claim["requirements"] if r["key"] == "karpenter.sh/capacity-type"), None)
        allowed = set(captype_req["values"]) if captype_req and captype_req["operator"] == "In" else {"spot", "on-demand"}
        offered = {o["capacityType"] for it in options for o in it["offerings"]}
        if {"spot", "on-demand"} <= allowed and {"spot", "on-demand"} <= offered:
            cheapest_od = min(
                o["price"] for it in options for o in it["offerings"] if o["capacityType"] == "on-demand"
            )
            options = [
                it
                for it in options
                if any(o["capacityType"] == "spot" and o["price"] <= cheapest_od for o in it["offerings"])
                or not any(o["capacityType"] == "spot" for o in it["offerings"])
            ]
    if not options:
        return None
    offers = [(o["capacityType"], o["price"], it["name"]) for it in options for o in it["offerings"]]
    captype = "spot" if any(c == "spot" for c, _, _ in offers) else "on-demand"
    prices = [(p, n) for c, p, n in offers if c == captype]
    best = min(p for p, _ in prices)
    return captype, best, {n for p, n in prices if p <= best + EPS}


def checks(kg: KgpuResult, orc: dict[str, Any]) -> dict[str, list[tuple[bool, str]]]:
    """Per comparison, (agrees, what was compared) for each check of one scenario."""
    out: dict[str, list[tuple[bool, str]]] = {}
    # the claims Solve made that the AWS provider launches (its filters may leave none: the pods wait)
    choices = [(c, launch_choice(c)) for c in orc["nodeClaims"]]
    claims = [c for c, choice in choices if choice is not None]
    unlaunched = {p for c, choice in choices if choice is None for p in c["pods"]}
    failing = len(choices) - len(claims)
    out["claims"] = [
        (
            len(kg.nodes) == len(claims),
            f"kgpu {len(kg.nodes)} nodes, karpenter {len(claims)} claims launched"
            + (f" ({failing} more its AWS provider cannot launch)" if failing else ""),
        )
    ]
    oerr, kerr = set(orc["podErrors"]) | unlaunched, set(kg.errors)
    text = f"only kgpu: {sorted(kerr - oerr)[:3]} only karpenter: " + "; ".join(
        f"{k}: {orc['podErrors'][k][:300]}" for k in sorted(oerr - kerr)[:2]
    )
    out["errors"] = [(kerr == oerr, text)]
    by_pods = {frozenset(c["pods"]): c for c in claims}
    types: list[tuple[bool, str]] = []
    for node in kg.nodes:
        claim = by_pods.get(node.pods)
        if claim is None:
            continue  # packing differs: counted by the claims comparison
        names = {it["name"] for it in claim["instanceTypes"]}
        choice = launch_choice(claim)
        assert choice is not None  # only launched claims are in by_pods
        captype, best, cheapest = choice
        ok = node.instance_type in names and node.capacity_type == captype and abs(node.price - best) < EPS
        types.append(
            (
                ok,
                f"kgpu {node.instance_type} {node.capacity_type} ${node.price}, karpenter {captype} "
                f"${best} {sorted(cheapest)[:4]} ({len(names)} options, kgpu's among them: "
                f"{node.instance_type in names})",
            )
        )
    out["type"] = types
    if orc.get("overlayErrors") is not None:  # the scenario has NodeOverlays
        theirs = sorted(orc.get("overlayErrors") or {})
        ours = sorted(kg.overlay_errors)
        out["overlays"] = [(theirs == ours, f"overlays left out: kgpu {ours}, karpenter {theirs}")]
    return out


def compare(scn: Scenario, kg: KgpuResult, orc: dict[str, Any], oracle: Path) -> Outcome:
    """Every check of one scenario, each disagreement with its class."""
    out = Outcome(scn.seed)
    ctx = Context(scn, orc, oracle)
    for comparison, items in checks(kg, orc).items():
        klass = ctx.classify(comparison) if not all(ok for ok, _ in items) else None
        for ok, detail in items:
            out.add(comparison, None if ok else klass, f"case {scn.seed}: {detail}")
    return out


def _terms(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The pod's required node affinity terms (one empty term without any), nodeSelector folded into each."""
    selector = [
        {"key": k, "operator": "In", "values": [v]} for k, v in pod["spec"].get("nodeSelector", {}).items()
    ]
    req = (
        pod["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    terms = [t.get("matchExpressions", []) for t in req["nodeSelectorTerms"]] if req else [[]]
    return [selector + t for t in terms]


def _preferred(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The pod's preferred node affinity terms, heaviest first (equal weights in order)."""
    pref = pod["spec"].get("affinity", {}).get("nodeAffinity", {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    ordered = sorted(pref, key=lambda p: -p["weight"])
    return [p["preference"].get("matchExpressions", []) for p in ordered]


# Karpenter's NormalizedLabels: pod requirements on these keys are requirements on the stable ones
ALIASES = {
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


def _collapses(reqs: list[dict[str, Any]]) -> bool:
    """Karpenter's Requirement.Intersection of ``reqs`` (all on one key) is DoesNotExist: a concrete value
    set left empty (In with nothing in common, In minus NotIn, Exists or Gt/Lt with DoesNotExist) or an
    empty Gt/Lt range (kgpu applies the same fold to NodeOverlay requirements)."""
    return intersection_empty(
        [PoolRequirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ())) for e in reqs]
    )


def _tries(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The requirement sets Karpenter tries for a pod, in its order: each required term with the heaviest
    preference (Preferences.Relax drops the first term while more than one is left), then the last term
    with each lighter preference, then the last term alone; and the first term alone (the pod's strict
    requirements, which topology uses)."""
    terms, preferred = _terms(pod), _preferred(pod)
    if not preferred:
        return terms
    return (
        [t + preferred[0] for t in terms]
        + [terms[-1] + p for p in preferred[1:]]
        + [terms[-1], terms[0]]
    )


def _contradictory_in(pod: dict[str, Any]) -> bool:
    """A set of requirements Karpenter tries (``_tries``: every required term in turn, with and without
    preferences) requires some label (In, Exists, Gt, Lt) that its other requirements on the key rule
    out: Karpenter's Requirement.Intersection collapses the key to DoesNotExist instead of failing (keys
    normalized first, as Karpenter's NormalizedLabels). Karpenter reaches a later term when the earlier
    ones fit nowhere; with the collapsed key the pod then joins an in-flight claim that holds
    DoesNotExist for it (a GPU-less claim for an ``instance-gpu-name In`` pod) or opens one."""

    def contradictory(term: list[dict[str, Any]]) -> bool:
        by_key: dict[str, list[dict[str, Any]]] = {}
        for e in term:
            by_key.setdefault(ALIASES.get(e["key"], e["key"]), []).append(e)
        return any(
            any(e["operator"] in ("In", "Exists", "Gt", "Lt") for e in reqs) and _collapses(reqs)
            for reqs in by_key.values()
        )

    return any(contradictory(t) for t in _tries(pod))


def _exists_not_in(pod: dict[str, Any]) -> bool:
    """A set of requirements Karpenter tries (``_tries``) requires a label to exist (``Exists``) and rules
    out some of its values (``NotIn``), with nothing else on the key: Karpenter's Requirement keeps the
    pair as the complement of those values, which it reads as ``NotIn`` and so as satisfied by a node
    without the label. It launches such a node (from a NodePool that does not set the label, case
    11696184), on which kube-scheduler cannot place the pod; kgpu leaves the pod unschedulable there."""

    def lost(term: list[dict[str, Any]]) -> bool:
        by_key: dict[str, set[str]] = {}
        for e in term:
            by_key.setdefault(ALIASES.get(e["key"], e["key"]), set()).add(e["operator"])
        return any("Exists" in ops and "NotIn" in ops and ops <= {"Exists", "NotIn"} for ops in by_key.values())

    return any(lost(t) for t in _tries(pod))


def _map_pods(scn: Scenario, fn: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Scenario | None:
    pods = []
    changed = False
    for pod in scn.pods:
        new = fn(pod)
        changed = changed or new != pod
        if new is not None:
            pods.append(new)
    return Scenario(scn.seed, scn.profile, scn.daemonsets, pods, scn.overlays) if changed else None


def _strip_spread(scn: Scenario) -> Scenario | None:
    def fn(pod: dict[str, Any]) -> dict[str, Any]:
        return {**pod, "spec": {k: v for k, v in pod["spec"].items() if k != "topologySpreadConstraints"}}

    return _map_pods(scn, fn)


def _drop(pred: Callable[[Scenario, dict[str, Any]], bool]) -> Callable[[Scenario], Scenario | None]:
    def ablate(scn: Scenario) -> Scenario | None:
        return _map_pods(scn, lambda pod: None if pred(scn, pod) else pod)

    return ablate


# Input features kgpu does not model (or where Karpenter launches a node the pod cannot use), and how a
# scenario loses them; None when the scenario has none. Both sides then see the reduced input.
ABLATIONS: dict[str, Callable[[Scenario], Scenario | None]] = {
    "topology-spread": _strip_spread,
    "contradictory-in": _drop(lambda scn, pod: _contradictory_in(pod)),
    "exists-not-in": _drop(lambda scn, pod: _exists_not_in(pod)),
}


@dataclass
class Context:
    """What the known-difference predicates look at: the scenario, Karpenter's answer, and both sides'
    answers with documented causes (unmodelled input features) taken out of the scenario, computed on
    demand."""

    scn: Scenario
    orc: dict[str, Any]
    oracle: Path
    _variants: dict[tuple[str, ...], dict[str, list[tuple[bool, str]]] | None] = field(default_factory=dict)

    def agrees_without(self, comparison: str, features: tuple[str, ...]) -> bool:
        """Whether ``comparison`` agrees everywhere once the scenario has none of ``features`` (False where
        the scenario lacks one of them: the class does not apply)."""
        if features not in self._variants:
            scn: Scenario | None = self.scn
            for f in features:
                scn = ABLATIONS[f](scn) if scn is not None else None
            self._variants[features] = (
                None if scn is None else checks(run_kgpu(scn), run_oracle(self.oracle, scn))
            )
        found = self._variants[features]
        return found is not None and all(ok for ok, _ in found[comparison])

    def classify(self, comparison: str) -> str:
        """The known cause whose removal alone makes ``comparison`` agree, else the pair of them (named
        ``a+b``) whose removal together does, else ``unexplained``."""
        for name in KNOWN:
            if self.agrees_without(comparison, (name,)):
                return name
        for pair in combinations(KNOWN, 2):
            if self.agrees_without(comparison, pair):
                return "+".join(pair)
        return "unexplained"


# Known differences (docs/simulate.md, "Known differences from Karpenter"): input features kgpu models
# differently, each removable from a scenario (``ABLATIONS``). A class holds only where removing its
# documented cause (and nothing else) makes the comparison agree; two causes in one scenario are the class
# ``a+b`` when removing both (and nothing else) does.
KNOWN: list[str] = list(ABLATIONS)

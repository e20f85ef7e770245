"""kgpu's Karpenter provisioning against Karpenter's own scheduler (``Scheduler.Solve``, built from
sigs.k8s.io/karpenter at the pinned version) on seeded random scenarios.

Needs the oracle binary: ``$KGPU_CONFORMANCE_BIN/karpenter/karpenter-oracle`` (``make conformance`` builds it).
``KGPU_CONFORMANCE_CASES`` (default 200) scenarios from ``KGPU_CONFORMANCE_SEED`` on. Prints the
agreement rate per comparison and every disagreement class; fails on any disagreement outside the known,
documented classes (docs/simulate.md, "Known differences from Karpenter"), and when fewer than 97 % of the
scenarios agree on the claims.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from karpenter_diff import KNOWN, KgpuResult, compare, run_kgpu, run_oracle
from karpenter_gen import Scenario, scenario

from conftest import binary, cases, seed

CASES = cases(200)
CLAIMS_FLOOR = 0.97
SEED = seed()


@pytest.fixture(scope="module")
def oracle() -> Path:
    return binary("karpenter", "karpenter-oracle")


def test_known_classes_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "simulate.md").read_text(encoding="utf-8")
    section = doc.split("## Known differences from Karpenter", 1)
    assert len(section) == 2, "docs/simulate.md has no 'Known differences from Karpenter' section"
    for name in KNOWN:
        assert f"`{name}`" in section[1], f"known class {name} is not documented"
    assert "`a+b`" in section[1], "classes of two causes together are not documented"


def test_differential(oracle: Path) -> None:
    totals: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    unexplained: list[str] = []
    examples: dict[tuple[str, str], str] = {}
    # the scenarios with NodeOverlays, apart: their agreement, how many leave an overlay out (conflict or
    # runtime validation) and how many the input's overlays change kgpu's launch in (else they test nothing)
    overlaid: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    effect: collections.Counter[str] = collections.Counter()
    # and those with init containers (plain and sidecars) or a capacity-type node selector
    featured: dict[str, dict[str, collections.Counter[str]]] = {
        name: collections.defaultdict(collections.Counter) for name in FEATURES
    }
    for n in range(SEED, SEED + CASES):
        scn = scenario(n)
        kg, orc = run_kgpu(scn), run_oracle(oracle, scn)
        outcome = compare(scn, kg, orc, oracle)
        for comparison, classes in outcome.checks.items():
            for klass in classes:
                totals[comparison][klass or "agree"] += 1
                if scn.overlays:
                    overlaid[comparison][klass or "agree"] += 1
                for name, has in FEATURES.items():
                    if has(scn):
                        featured[name][comparison][klass or "agree"] += 1
        if scn.overlays:
            effect["scenarios"] += 1
            effect["left out"] += bool(orc.get("overlayErrors"))
            effect["changed"] += _launch(run_kgpu(dataclasses.replace(scn, overlays=[]))) != _launch(kg)
        for line in outcome.detail:
            klass = line[1:].split("]", 1)[0]
            examples.setdefault(tuple(klass.split("/", 1)), line)  # type: ignore[arg-type]
            if klass.endswith("/unexplained"):
                unexplained.append(line)
    print(f"\nKarpenter differential: {CASES} scenarios, seeds {SEED}..{SEED + CASES - 1}")
    for comparison in ("claims", "errors", "type", "overlays"):
        counts = totals[comparison]
        total = sum(counts.values())
        rate = 100.0 * counts["agree"] / total if total else 100.0
        named = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "agree")
        print(
            f"  {comparison:7} {counts['agree']}/{total} agree ({rate:.1f}%)"
            + (f"; {named}" if named else "")
        )
    print(
        f"  with NodeOverlays: {effect['scenarios']} scenarios; the input's overlays change kgpu's launch in "
        f"{effect['changed']}, Karpenter leaves one out in {effect['left out']}; "
        + ", ".join(
            f"{c} {overlaid[c]['agree']}/{sum(overlaid[c].values())}" for c in ("claims", "errors", "type")
        )
        + " agree"
    )
    for name, per in featured.items():
        print(
            f"  with {name}: {sum(per['claims'].values())} scenarios; "
            + ", ".join(f"{c} {per[c]['agree']}/{sum(per[c].values())}" for c in ("claims", "errors", "type"))
            + " agree"
        )
    for key in sorted(examples):
        print(f"  e.g. {examples[key][:400]}")
    assert totals["claims"]["agree"] > 0 and totals["errors"]["agree"] > 0
    # kgpu launches what Karpenter launches: only the known causes (mostly Go's random map order among tied
    # zones) may make the claims differ: 0 to 1.3 % of the scenarios on the seeds tried, so the floor leaves
    # room for chance and still fails on a systematic difference (capped claims: a quarter)
    claims = totals["claims"]
    assert claims["agree"] >= CLAIMS_FLOOR * sum(claims.values()), f"claims agree in {claims['agree']} only"
    assert not unexplained, f"{len(unexplained)} unexplained disagreements:\n" + "\n".join(unexplained[:20])
    # the NodeOverlay cases test something: overlays change the launch somewhere
    assert not effect["scenarios"] or effect["changed"] > 0


FEATURES: dict[str, Callable[[Scenario], bool]] = {
    "init containers": lambda scn: any(p["spec"].get("initContainers") for p in scn.pods),
    "a capacity-type selector": lambda scn: any(
        "karpenter.sh/capacity-type" in p["spec"].get("nodeSelector", {}) for p in scn.pods
    ),
}


def _launch(kg: KgpuResult) -> tuple[list[tuple[str, str, float, list[str]]], list[str]]:
    nodes = sorted((n.instance_type, n.capacity_type, round(n.price, 6), sorted(n.pods)) for n in kg.nodes)
    return nodes, sorted(kg.errors)

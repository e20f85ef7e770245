"""kgpu's estimate of a DRA selector's worst-case cost against the API server's own (conformance/kube
``cel-cost``: k8s.io/dynamic-resource-allocation ``CompileCELExpression``, as the API server runs it when a
DeviceClass or ResourceClaim is created, and refuses a selector over 1,000,000 as "too complex").

Two checks: the answers `make test` reads (tests/fixtures/cel/cost_oracle.json) are still the compiler's, and
selectors drawn at the run's seed (conformance/tests/cel_cost_draw.py) get the same estimate from both: every
one that compiles is compared, to the unit, and the verdict (refused or not) must always agree; one the
API server refuses because it is not a bool must get the same words, with the type's name.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from cel_cost_draw import selectors

from conftest import binary, cases, seed
from kgpu.sim.scheduler.plugins.cel_estimate import MAX_COST, analyse
from kgpu.sim.scheduler.plugins.cel_parse import CelParseError

NOT_BOOL = "must evaluate to bool or the unknown type, not "
FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "cel" / "cost_oracle.json"


def oracle(expressions: list[str]) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(binary("kube", "cel-cost"))],
        input=json.dumps(expressions),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    answers: list[dict[str, Any]] = json.loads(out)
    assert len(answers) == len(expressions)
    return answers


def test_the_recorded_answers_are_the_compilers() -> None:
    rows = json.loads(FIXTURE.read_text())["selectors"]
    got = oracle([r["expression"] for r in rows])
    changed = [
        (r["expression"][:100], r, g)
        for r, g in zip(rows, got, strict=True)
        if r.get("cost") != g.get("cost") or r.get("error") != g.get("error")
    ]
    assert not changed, f"{len(changed)} recorded answers are no longer the compiler's: {changed[:3]}"


def test_drawn_selectors_get_the_api_servers_estimate() -> None:
    n = max(cases(300) * 5, 500)
    exprs = selectors(seed(), n)
    answers = oracle(exprs)
    tally: Counter[str] = Counter()
    wrong: list[tuple[int, Any, str]] = []
    verdicts: list[tuple[int, Any, str]] = []
    types: list[tuple[str, Any, str]] = []
    for e, a in zip(exprs, answers, strict=True):
        try:
            mine: Any = analyse(e)
        except CelParseError as exc:
            mine = (f"error: {exc}", None)
        refused_type = mine[1] not in (None, "bool", "google.protobuf.Any")
        error = a.get("error", "")
        if error.startswith(NOT_BOOL):
            tally["refused as not bool"] += 1
            if error != NOT_BOOL + str(mine[1]):
                types.append((error, mine[1], e))
            continue
        if "cost" not in a:
            tally["not compiled (type errors the draw makes)"] += 1
            continue
        if refused_type:
            types.append(("taken", mine[1], e))
        tally["compiled"] += 1
        tally["refused as too complex"] += a["cost"] > MAX_COST
        if mine[0] != a["cost"]:
            wrong.append((a["cost"], mine[0], e))
            if not isinstance(mine[0], int) or (mine[0] > MAX_COST) != (a["cost"] > MAX_COST):
                verdicts.append((a["cost"], mine[0], e))
    print(
        f"\nCEL cost estimate, seed {seed()}: {dict(tally)}; estimates differing: {len(wrong)}, "
        f"verdicts differing: {len(verdicts)}, result types differing: {len(types)}"
    )
    for cost, mine, e in wrong[:10]:
        print(f"  API server {cost}, kgpu {mine}: {e[:200]}")
    for theirs, t, e in types[:10]:
        print(f"  API server {theirs!r}, kgpu's type {t}: {e[:200]}")
    assert tally["compiled"] >= n * 0.7 and tally["refused as too complex"] >= 10
    assert tally["refused as not bool"] >= n * 0.05
    assert not verdicts, f"{len(verdicts)} selectors refused by one and not the other: {verdicts[:3]}"
    assert len(wrong) <= tally["compiled"] // 200, f"{len(wrong)} estimates differ: {wrong[:3]}"
    # a type kgpu's checker does not know is taken (dyn); one it names must be the API server's
    assert not [t for t in types if t[0] == "taken"], types[:3]
    assert len(types) <= tally["refused as not bool"] // 20, types[:3]

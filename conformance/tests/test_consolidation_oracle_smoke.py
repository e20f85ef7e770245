"""Smoke test of consolidation-oracle: hand-built clusters whose outcome follows from Karpenter's documented
consolidation behaviour, asserted on what the real disruption controller (v1.8.0, in-process) decides.

Every replacement the oracle launches must also be what ``karpenter_diff.launch_choice`` picks for the
replacement's NodeClaim (the two apply one launch rule). Which of two equally costly candidates goes first
is Go map order in Karpenter (cluster state's node map, then an unstable sort by disruption cost), so the
cases assert counts and survivors' contents, never a name picked among ties.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from consolidation_oracle import ORACLE, catalog_types, node, nodepool, payload, pdb, pod, run_oracle
from karpenter_diff import EPS, launch_choice

from conftest import binary

ZONE = "us-west-2a"
DND = {"karpenter.sh/do-not-disrupt": "true"}


@pytest.fixture(scope="module")
def oracle() -> Path:
    return binary(*ORACLE)


@pytest.fixture(scope="module")
def types() -> dict[str, Any]:
    return catalog_types(zones=[ZONE])


def _run(oracle: Path, doc: dict[str, Any]) -> dict[str, Any]:
    out = run_oracle(oracle, doc)
    assert not out["capped"]
    for r in out["rounds"]:
        for rep in r["replacements"]:
            choice = launch_choice(rep["claim"])
            assert choice is not None, rep
            captype, price, names = choice
            assert (rep["capacityType"], rep["instanceType"]) in {(captype, n) for n in names}, (rep, choice)
            assert abs(rep["price"] - price) < EPS
    # every input pod is still bound somewhere
    placed = [p for n in out["nodes"] for p in n["pods"]]
    assert sorted(placed) == sorted(f"default/{p['metadata']['name']}" for p in doc["pods"])
    return out


def _two_xlarge(types: dict[str, Any], pool: dict[str, Any], **pod_kw: Any) -> dict[str, Any]:
    nodes = [node("a", "default", "m5.xlarge", ZONE), node("b", "default", "m5.xlarge", ZONE)]
    pods = [pod("p1", "a", **pod_kw), pod("p2", "b", **pod_kw)]
    return payload([pool], nodes, pods, types=types)


def _xlarge_pool(**kw: Any) -> dict[str, Any]:
    return nodepool("default", capacity_types=["on-demand"], instance_types=["m5.xlarge"], **kw)


def test_underutilized_nodes_one_deleted(oracle: Path, types: dict[str, Any]) -> None:
    """(1) Two m5.xlarge (the only type the pool allows), one small pod each: one node goes, its pod moves to
    the other. Multi-node consolidation gets one candidate only: the default budget (10 % of 2 nodes, rounded
    up) is 1, so single-node consolidation deletes."""
    out = _run(oracle, _two_xlarge(types, _xlarge_pool()))
    assert [(r["method"], r["decision"], len(r["candidates"])) for r in out["rounds"]] == [
        ("single", "delete", 1)
    ]
    assert len(out["nodes"]) == 1
    assert out["nodes"][0]["pods"] == ["default/p1", "default/p2"]


def test_underutilized_any_type_default_budget(oracle: Path, types: dict[str, Any]) -> None:
    """(1b) The same with every on-demand type allowed: a single-node delete, then the survivor (now with
    both pods) is replaced by a cheaper type."""
    out = _run(oracle, _two_xlarge(types, nodepool("default", capacity_types=["on-demand"])))
    assert [(r["method"], r["decision"]) for r in out["rounds"]] == [
        ("single", "delete"),
        ("single", "replace"),
    ]
    (last,) = out["nodes"]
    assert last["price"] < 0.192 and last["capacityType"] == "on-demand"
    assert last["pods"] == ["default/p1", "default/p2"]


def test_underutilized_budget_allows_multi(oracle: Path, types: dict[str, Any]) -> None:
    """(1c) With a 100 % budget, multi-node consolidation replaces both nodes by one cheaper node at once."""
    pool = nodepool("default", capacity_types=["on-demand"], budgets=[{"nodes": "100%"}])
    out = _run(oracle, _two_xlarge(types, pool))
    assert [(r["method"], r["decision"], sorted(r["candidates"])) for r in out["rounds"]] == [
        ("multi", "replace", ["a", "b"])
    ]
    (rep,) = out["rounds"][0]["replacements"]
    assert rep["price"] < 2 * 0.192
    # filterOutSameInstanceType: the replacement is cheaper than one m5.xlarge, or it would be a delete
    assert all(o["price"] < 0.192 for o in rep["claim"]["instanceTypes"])


def test_when_empty_keeps_used_nodes(oracle: Path, types: dict[str, Any]) -> None:
    """(2) consolidationPolicy WhenEmpty: nodes with pods stay."""
    out = _run(oracle, _two_xlarge(types, _xlarge_pool(policy="WhenEmpty")))
    assert out["rounds"] == []
    assert sorted(n["name"] for n in out["nodes"]) == ["a", "b"]
    assert any("non-empty consolidation disabled" in e for e in out["events"]["a"])


def test_empty_node_deleted(oracle: Path, types: dict[str, Any]) -> None:
    """An empty node goes by emptiness (under WhenEmpty too), before any consolidation."""
    for policy in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
        doc = payload(
            [_xlarge_pool(policy=policy)],
            [node("a", "default", "m5.xlarge", ZONE), node("b", "default", "m5.xlarge", ZONE)],
            [pod("p1", "a")],
            types=types,
        )
        out = _run(oracle, doc)
        assert [(r["method"], r["reason"], r["decision"], r["candidates"]) for r in out["rounds"]] == [
            ("empty", "Empty", "delete", ["b"])
        ]


def test_consolidate_after_never(oracle: Path, types: dict[str, Any]) -> None:
    """(3) consolidateAfter Never: nothing, not even the empty node."""
    doc = payload(
        [_xlarge_pool(consolidate_after="Never")],
        [node("a", "default", "m5.xlarge", ZONE), node("b", "default", "m5.xlarge", ZONE)],
        [pod("p1", "a")],
        types=types,
    )
    out = _run(oracle, doc)
    assert out["rounds"] == []
    assert len(out["nodes"]) == 2


def test_big_node_replaced_by_cheaper(oracle: Path, types: dict[str, Any]) -> None:
    """(4) One on-demand m5.4xlarge with one small pod: replaced by one cheaper on-demand node."""
    doc = payload(
        [nodepool("default", capacity_types=["on-demand"])],
        [node("a", "default", "m5.4xlarge", ZONE)],
        [pod("p1", "a")],
        types=types,
    )
    out = _run(oracle, doc)
    assert [(r["method"], r["decision"], r["candidates"]) for r in out["rounds"]] == [
        ("single", "replace", ["a"])
    ]
    (n,) = out["nodes"]
    assert n["capacityType"] == "on-demand" and n["price"] < 0.768
    assert n["pods"] == ["default/p1"]


def test_on_demand_replaced_by_spot(oracle: Path, types: dict[str, Any]) -> None:
    """(4b) The same pool allowing spot too: the replacement is required to be spot (consolidation.go adds
    capacity-type In [spot] when the claim allows both)."""
    doc = payload(
        [nodepool("default")], [node("a", "default", "m5.4xlarge", ZONE)], [pod("p1", "a")], types=types
    )
    out = _run(oracle, doc)
    (r,) = out["rounds"]
    (rep,) = r["replacements"]
    ct = next(q for q in rep["claim"]["requirements"] if q["key"] == "karpenter.sh/capacity-type")
    assert ct["values"] == ["spot"]
    assert rep["capacityType"] == "spot"


def test_spot_needs_spot_to_spot_gate(oracle: Path, types: dict[str, Any]) -> None:
    """(5) A spot m5.4xlarge with a small pod in a spot pool: no replacement without SpotToSpotConsolidation;
    with it, a replacement among the 15 cheapest spot options."""
    args = (
        [nodepool("default", capacity_types=["spot"])],
        [node("a", "default", "m5.4xlarge", ZONE, "spot")],
    )
    out = _run(oracle, payload(*args, [pod("p1", "a")], types=types))
    assert out["rounds"] == []
    assert any("SpotToSpotConsolidation is disabled" in e for e in out["events"]["a"])
    out = _run(oracle, payload(*args, [pod("p1", "a")], types=types, spot_to_spot=True))
    (r,) = out["rounds"]
    assert (r["method"], r["decision"]) == ("single", "replace")
    (rep,) = r["replacements"]
    assert rep["capacityType"] == "spot" and len(rep["claim"]["instanceTypes"]) == 15


def test_spot_to_spot_needs_fifteen_cheaper(oracle: Path, types: dict[str, Any]) -> None:
    """(5b) With the gate on, a spot node with fewer than 15 cheaper spot options is left alone."""
    doc = payload(
        [
            nodepool(
                "default", capacity_types=["spot"], instance_types=["m5.large", "m5.xlarge", "m5.2xlarge"]
            )
        ],
        [node("a", "default", "m5.2xlarge", ZONE, "spot")],
        [pod("p1", "a")],
        types=types,
        spot_to_spot=True,
    )
    out = _run(oracle, doc)
    assert out["rounds"] == []
    assert any("requires 15 cheaper instance type options" in e for e in out["events"]["a"])


def test_do_not_disrupt_blocks_node(oracle: Path, types: dict[str, Any]) -> None:
    """(6) A karpenter.sh/do-not-disrupt pod blocks its node: the big node of (4) stays; of two nodes, the
    blocked one stays and takes the other's pod."""
    doc = payload(
        [nodepool("default", capacity_types=["on-demand"])],
        [node("a", "default", "m5.4xlarge", ZONE)],
        [pod("p1", "a", annotations=DND)],
        types=types,
    )
    out = _run(oracle, doc)
    assert out["rounds"] == []
    assert any("do-not-disrupt" in e for e in out["events"]["a"])
    doc = payload(
        [_xlarge_pool()],
        [node("a", "default", "m5.xlarge", ZONE), node("b", "default", "m5.xlarge", ZONE)],
        [pod("p1", "a", annotations=DND), pod("p2", "b")],
        types=types,
    )
    out = _run(oracle, doc)
    assert [(r["decision"], r["candidates"]) for r in out["rounds"]] == [("delete", ["b"])]
    assert [(n["name"], n["pods"]) for n in out["nodes"]] == [("a", ["default/p1", "default/p2"])]


def test_budget_and_pdb_block(oracle: Path, types: dict[str, Any]) -> None:
    """A budget of 0 nodes, or a PDB allowing no disruption, leaves (1) as it is; bare pods (no controller)
    do not block in v1.8.0."""
    out = _run(oracle, _two_xlarge(types, _xlarge_pool(budgets=[{"nodes": "0"}])))
    assert out["rounds"] == []
    doc = _two_xlarge(types, _xlarge_pool(), labels={"app": "x"})
    doc["pdbs"] = [pdb("x", {"app": "x"}, max_unavailable=0)]
    out = _run(oracle, doc)
    assert out["rounds"] == []
    assert any("pdb prevents pod evictions" in e.lower() for e in out["events"]["a"])
    out = _run(oracle, _two_xlarge(types, _xlarge_pool(), owner=None))
    assert [r["decision"] for r in out["rounds"]] == ["delete"]

"""NodeAffinity filter (nodeSelector + required node affinity), transcribed from upstream test tables.

Upstream: kubernetes/kubernetes

- ``staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity_test.go``:
  TestNodeSelectorMatch, TestNodeSelectorRequirementsAsSelector, TestPodMatchesNodeSelectorAndAffinityTerms
  (``GetRequiredNodeAffinity(pod).Match(node)``)
- ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go``: TestNodeAffinity (the Filter
  status; the rows using ``NodeAffinityArgs.AddedAffinity`` are not transcribed: kgpu has no scheduler
  profile args)

The scheduler ignores the error of an invalid term (``LazyErrorNodeSelector``): that term matches nothing and
the other terms are still evaluated.
"""

from __future__ import annotations

from typing import Any

import pytest

from k8s_builders import load_node, node, pod, required_affinity, requirement, spec_of, term
from kgpu.model.objects import Requirement
from kgpu.model.predicates import (
    ERR_NODE_AFFINITY,
    affinity_matches,
    field_requirement_error,
    requirement_error,
    requirement_matches,
    static_reasons,
)

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
NAME = "metadata.name"

# --- nodeaffinity_test.go, TestPodMatchesNodeSelectorAndAffinityTerms ---------------------------------
# (name, pod kwargs, node labels, node name, want)
MATCH_TERMS: list[tuple[str, dict[str, Any], dict[str, str], str, bool]] = [
    ("no selector", {}, {}, "", True),
    ("missing labels", {"node_selector": {"foo": "bar"}}, {}, "", False),
    ("same labels", {"node_selector": {"foo": "bar"}}, {"foo": "bar"}, "", True),
    ("node labels are superset", {"node_selector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, "", True),
    ("node labels are subset", {"node_selector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, "", False),
    (
        "Pod with matchExpressions using In operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("foo", IN, ["bar", "value2"])])])},
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with matchExpressions using Gt operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("kernel-version", GT, ["0204"])])])},
        {"kernel-version": "0206"},
        "",
        True,
    ),
    (
        "Pod with matchExpressions using NotIn operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("mem-type", NOT_IN, ["DDR", "DDR2"])])])},
        {"mem-type": "DDR3"},
        "",
        True,
    ),
    (
        "Pod with matchExpressions using Exists operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("GPU", EXISTS)])])},
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        True,
    ),
    (
        "Pod with affinity that don't match node's labels won't schedule onto the node",
        {"affinity": required_affinity([term([requirement("foo", IN, ["value1", "value2"])])])},
        {"foo": "bar"},
        "",
        False,
    ),
    (
        "Pod with a nil []NodeSelectorTerm in affinity, can't match the node's labels",
        {"affinity": required_affinity(None)},
        {"foo": "bar"},
        "",
        False,
    ),
    (
        "Pod with an empty []NodeSelectorTerm in affinity, can't match the node's labels",
        {"affinity": required_affinity([])},
        {"foo": "bar"},
        "",
        False,
    ),
    (
        "Pod with empty MatchExpressions is not a valid value will match no objects",
        {"affinity": required_affinity([term([])])},
        {"foo": "bar"},
        "",
        False,
    ),
    ("Pod with no Affinity will schedule onto a node", {}, {"foo": "bar"}, "", True),
    (
        "Pod with Affinity but nil NodeSelector will schedule onto a node",
        {"affinity": {"nodeAffinity": {}}},
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with multiple matchExpressions ANDed that matches the existing node",
        {
            "affinity": required_affinity(
                [term([requirement("GPU", EXISTS), requirement("GPU", NOT_IN, ["AMD", "INTER"])])]
            )
        },
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        True,
    ),
    (
        "Pod with multiple matchExpressions ANDed that doesn't match the existing node",
        {
            "affinity": required_affinity(
                [term([requirement("GPU", EXISTS), requirement("GPU", IN, ["AMD", "INTER"])])]
            )
        },
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        False,
    ),
    (
        "Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels",
        {
            "affinity": required_affinity(
                [
                    term([requirement("foo", IN, ["bar", "value2"])]),
                    term([requirement("diffkey", IN, ["wrong", "value2"])]),
                ]
            )
        },
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with an Affinity and a PodSpec.NodeSelector both satisfied",
        {
            "node_selector": {"foo": "bar"},
            "affinity": required_affinity([term([requirement("foo", EXISTS)])]),
        },
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with an Affinity matches node's labels but the PodSpec.NodeSelector is not satisfied",
        {
            "node_selector": {"foo": "bar"},
            "affinity": required_affinity([term([requirement("foo", EXISTS)])]),
        },
        {"foo": "barrrrrr"},
        "",
        False,
    ),
    (
        "Pod with an invalid value in Affinity term won't be scheduled onto the node",
        {"affinity": required_affinity([term([requirement("foo", NOT_IN, ["invalid value: ___@#$%^"])])])},
        {"foo": "bar"},
        "",
        False,
    ),
    (
        "Pod with matchFields using In operator that matches the existing node",
        {"affinity": required_affinity([term(match_fields=[requirement(NAME, IN, ["node_1"])])])},
        {},
        "node_1",
        True,
    ),
    (
        "Pod with matchFields using In operator that does not match the existing node",
        {"affinity": required_affinity([term(match_fields=[requirement(NAME, IN, ["node_1"])])])},
        {},
        "node_2",
        False,
    ),
    (
        "Pod with two terms: matchFields does not match, but matchExpressions matches",
        {
            "affinity": required_affinity(
                [
                    term(match_fields=[requirement(NAME, IN, ["node_1"])]),
                    term([requirement("foo", IN, ["bar"])]),
                ]
            )
        },
        {"foo": "bar"},
        "node_2",
        True,
    ),
    (
        "Pod with one term: matchFields does not match, but matchExpressions matches",
        {
            "affinity": required_affinity(
                [term([requirement("foo", IN, ["bar"])], match_fields=[requirement(NAME, IN, ["node_1"])])]
            )
        },
        {"foo": "bar"},
        "node_2",
        False,
    ),
    (
        "Pod with one term: both matchFields and matchExpressions match",
        {
            "affinity": required_affinity(
                [term([requirement("foo", IN, ["bar"])], match_fields=[requirement(NAME, IN, ["node_1"])])]
            )
        },
        {"foo": "bar"},
        "node_1",
        True,
    ),
    (
        "Pod with two terms: both matchFields and matchExpressions do not match",
        {
            "affinity": required_affinity(
                [
                    term(match_fields=[requirement(NAME, IN, ["node_1"])]),
                    term([requirement("foo", IN, ["not-match-to-bar"])]),
                ]
            )
        },
        {"foo": "bar"},
        "node_2",
        False,
    ),
]


@pytest.mark.parametrize(
    ("pod_kwargs", "labels", "node_name", "want"),
    [c[1:] for c in MATCH_TERMS],
    ids=[c[0] for c in MATCH_TERMS],
)
def test_pod_matches_node_selector_and_affinity_terms(
    pod_kwargs: dict[str, Any], labels: dict[str, str], node_name: str, want: bool
) -> None:
    spec = spec_of(pod("pod", **pod_kwargs))
    assert affinity_matches(spec, labels, node_name) is want


# --- node_affinity_test.go, TestNodeAffinity (Filter status; rows without AddedAffinity) ---------------
# (name, pod kwargs, node labels, node name, fits). A failing row's status is ErrReasonPod.
FILTER: list[tuple[str, dict[str, Any], dict[str, str], str, bool]] = [
    ("missing labels", {"node_selector": {"foo": "bar"}}, {}, "", False),
    ("same labels", {"node_selector": {"foo": "bar"}}, {"foo": "bar"}, "", True),
    ("node labels are superset", {"node_selector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, "", True),
    ("node labels are subset", {"node_selector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, "", False),
    (
        "Pod with matchExpressions using In operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("foo", IN, ["bar", "value2"])])])},
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with matchExpressions using Gt operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("kernel-version", GT, ["0204"])])])},
        {"kernel-version": "0206"},
        "",
        True,
    ),
    (
        "Pod with matchExpressions using NotIn operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("mem-type", NOT_IN, ["DDR", "DDR2"])])])},
        {"mem-type": "DDR3"},
        "",
        True,
    ),
    (
        "Pod with matchExpressions using Exists operator that matches the existing node",
        {"affinity": required_affinity([term([requirement("GPU", EXISTS)])])},
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        True,
    ),
    (
        "Pod with affinity that don't match node's labels won't schedule onto the node",
        {"affinity": required_affinity([term([requirement("foo", IN, ["value1", "value2"])])])},
        {"foo": "bar"},
        "",
        False,
    ),
    (
        "Pod with empty MatchExpressions is not a valid value will match no objects",
        {"affinity": required_affinity([term([])])},
        {"foo": "bar"},
        "",
        False,
    ),
    ("Pod with no Affinity will schedule onto a node", {}, {"foo": "bar"}, "", True),
    (
        "Pod with Affinity but nil NodeSelector will schedule onto a node",
        {"affinity": {"nodeAffinity": {}}},
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with multiple matchExpressions ANDed that matches the existing node",
        {
            "affinity": required_affinity(
                [term([requirement("GPU", EXISTS), requirement("GPU", NOT_IN, ["AMD", "INTER"])])]
            )
        },
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        True,
    ),
    (
        "Pod with multiple matchExpressions ANDed that doesn't match the existing node",
        {
            "affinity": required_affinity(
                [term([requirement("GPU", EXISTS), requirement("GPU", IN, ["AMD", "INTER"])])]
            )
        },
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        False,
    ),
    (
        "Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels",
        {
            "affinity": required_affinity(
                [
                    term([requirement("foo", IN, ["bar", "value2"])]),
                    term([requirement("diffkey", IN, ["wrong", "value2"])]),
                ]
            )
        },
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with an Affinity and a PodSpec.NodeSelector both satisfied",
        {
            "node_selector": {"foo": "bar"},
            "affinity": required_affinity([term([requirement("foo", EXISTS)])]),
        },
        {"foo": "bar"},
        "",
        True,
    ),
    (
        "Pod with an Affinity matches node's labels but the PodSpec.NodeSelector is not satisfied",
        {
            "node_selector": {"foo": "bar"},
            "affinity": required_affinity([term([requirement("foo", EXISTS)])]),
        },
        {"foo": "barrrrrr"},
        "",
        False,
    ),
    (
        "Pod with an invalid value in Affinity term won't be scheduled onto the node",
        {"affinity": required_affinity([term([requirement("foo", NOT_IN, ["invalid value: ___@#$%^"])])])},
        {"foo": "bar"},
        "",
        False,
    ),
    (
        "Pod with matchFields using In operator that matches the existing node",
        {"affinity": required_affinity([term(match_fields=[requirement(NAME, IN, ["node1"])])])},
        {},
        "node1",
        True,
    ),
    (
        "Pod with matchFields using In operator that does not match the existing node",
        {"affinity": required_affinity([term(match_fields=[requirement(NAME, IN, ["node1"])])])},
        {},
        "node2",
        False,
    ),
    (
        "Pod with two terms: matchFields does not match, but matchExpressions matches",
        {
            "affinity": required_affinity(
                [
                    term(match_fields=[requirement(NAME, IN, ["node1"]), requirement(NAME, IN, ["node2"])]),
                    term([requirement("foo", IN, ["bar"])]),
                ]
            )
        },
        {"foo": "bar"},
        "node2",
        True,
    ),
    (
        "Pod with one term: matchFields does not match, but matchExpressions matches",
        {
            "affinity": required_affinity(
                [term([requirement("foo", IN, ["bar"])], match_fields=[requirement(NAME, IN, ["node1"])])]
            )
        },
        {"foo": "bar"},
        "node2",
        False,
    ),
    (
        "Pod with one term: both matchFields and matchExpressions match",
        {
            "affinity": required_affinity(
                [term([requirement("foo", IN, ["bar"])], match_fields=[requirement(NAME, IN, ["node1"])])]
            )
        },
        {"foo": "bar"},
        "node1",
        True,
    ),
    (
        "Pod with two terms: both matchFields and matchExpressions do not match",
        {
            "affinity": required_affinity(
                [
                    term(match_fields=[requirement(NAME, IN, ["node1"])]),
                    term([requirement("foo", IN, ["not-match-to-bar"])]),
                ]
            )
        },
        {"foo": "bar"},
        "node2",
        False,
    ),
    (
        "Pod with two terms of node.Name affinity",
        {
            "affinity": required_affinity(
                [
                    term(match_fields=[requirement(NAME, IN, ["node1"])]),
                    term(match_fields=[requirement(NAME, IN, ["node2"])]),
                ]
            )
        },
        {},
        "node2",
        True,
    ),
    (
        "Pod with two conflicting mach field requirements",
        {
            "affinity": required_affinity(
                [term(match_fields=[requirement(NAME, IN, ["node1"]), requirement(NAME, IN, ["node2"])])]
            )
        },
        {"foo": "bar"},
        "node2",
        False,
    ),
    (
        "Matches node selector correctly even if PreFilter is not called",
        {"node_selector": {"foo": "bar"}},
        {"foo": "bar", "baz": "blah"},
        "",
        True,
    ),
    (
        "Matches node affinity correctly even if PreFilter is not called",
        {
            "affinity": required_affinity(
                [term([requirement("GPU", EXISTS), requirement("GPU", NOT_IN, ["AMD", "INTER"])])]
            )
        },
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        True,
    ),
]


@pytest.mark.parametrize(
    ("pod_kwargs", "labels", "node_name", "fits"), [c[1:] for c in FILTER], ids=[c[0] for c in FILTER]
)
def test_node_affinity_filter(
    pod_kwargs: dict[str, Any], labels: dict[str, str], node_name: str, fits: bool
) -> None:
    spec = spec_of(pod("pod", **pod_kwargs))
    n = load_node(node(node_name or "test-node", labels=labels))
    assert static_reasons(spec, n) == (None if fits else [ERR_NODE_AFFINITY])


def test_node_affinity_reason_wording() -> None:
    # nodeaffinity.ErrReasonPod
    assert ERR_NODE_AFFINITY == "node(s) didn't match Pod's node affinity/selector"


# --- nodeaffinity_test.go, TestNodeSelectorMatch ---------------------------------------------------------
# "invalid field selector and label selector": NewNodeSelector reports exactly two errors:
# nodeSelectorTerms[0].matchFields[0].values "must have one element", and
# nodeSelectorTerms[2].matchExpressions[0].key (invalid name "invalid key"); term [1] is valid.
def test_node_selector_match_invalid_terms_are_detected() -> None:
    assert field_requirement_error(Requirement(NAME, IN, ("host_1", "host_2"))) is not None
    assert requirement_error(Requirement("label_1", IN, ("label_1_val",))) is None
    assert field_requirement_error(Requirement(NAME, IN, ("host_1",))) is None
    assert requirement_error(Requirement("invalid key", IN, ("label_value",))) is not None


# (name, terms, node name, node labels, want match)
SELECTOR_MATCH: list[tuple[str, list[dict[str, Any]], str, dict[str, str], bool]] = [
    (
        "node matches field selector, but not labels",
        [
            term(
                [requirement("label_1", IN, ["label_1_val"])],
                match_fields=[requirement(NAME, IN, ["host_1"])],
            )
        ],
        "host_1",
        {},
        False,
    ),
    (
        "node matches field selector and label selector",
        [
            term(
                [requirement("label_1", IN, ["label_1_val"])],
                match_fields=[requirement(NAME, IN, ["host_1"])],
            )
        ],
        "host_1",
        {"label_1": "label_1_val"},
        True,
    ),
    (
        "second term matches",
        [
            term([requirement("label_1", IN, ["label_1_val"])]),
            term(match_fields=[requirement(NAME, IN, ["host_1"])]),
        ],
        "host_1",
        {},
        True,
    ),
]


@pytest.mark.parametrize(
    ("terms", "node_name", "labels", "want"),
    [c[1:] for c in SELECTOR_MATCH],
    ids=[c[0] for c in SELECTOR_MATCH],
)
def test_node_selector_match(
    terms: list[dict[str, Any]], node_name: str, labels: dict[str, str], want: bool
) -> None:
    spec = spec_of(pod("pod", affinity=required_affinity(terms)))
    assert affinity_matches(spec, labels, node_name) is want


# --- nodeaffinity_test.go, TestNodeSelectorRequirementsAsSelector ---------------------------------------
# (requirement, valid)
AS_SELECTOR: list[tuple[Requirement, bool]] = [
    (Requirement("foo", IN, ("bar", "baz")), True),
    (
        Requirement("foo", EXISTS, ("bar", "baz")),
        False,
    ),  # "values set must be empty for exists and does not exist"
    (Requirement("foo", GT, ("1",)), True),
    (Requirement("bar", LT, ("7",)), True),
]


@pytest.mark.parametrize(
    ("req", "valid"), AS_SELECTOR, ids=[f"{r.key} {r.operator} {r.values}" for r, _ in AS_SELECTOR]
)
def test_node_selector_requirements_as_selector(req: Requirement, valid: bool) -> None:
    assert (requirement_error(req) is None) is valid


@pytest.mark.parametrize(
    ("op", "label", "want"), [(GT, "2", True), (GT, "1", False), (LT, "6", True), (LT, "7", False)]
)
def test_gt_lt_selectors_match_like_parsed_selector(op: str, label: str, want: bool) -> None:
    # Derived: TestNodeSelectorRequirementsAsSelector turns Gt/Lt into the selectors "foo>1" / "bar<7",
    # which compare strictly.
    value = "1" if op == GT else "7"
    assert requirement_matches(Requirement("k", op, (value,)), {"k": label}) is want

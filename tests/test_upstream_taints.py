"""TaintToleration and NodeUnschedulable filters, transcribed from upstream test tables.

Upstream: kubernetes/kubernetes

- ``staging/src/k8s.io/api/core/v1/toleration_test.go``, TestTolerationToleratesTaint
- ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go``, TestTaintTolerationFilter
  and TestTaintTolerationFilterWithFeatureGate (the feature-gate-disabled rows)
- ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable_test.go``, TestNodeUnschedulable

Version notes (kgpu models kube-scheduler 1.33, see ``profile.py`` ``kubernetes_version``):

- The ``Gt``/``Lt`` toleration operators (alpha feature gate TaintTolerationComparisonOperators, v1.35, off
  by default) are not transcribed as "tolerated" cases: with the gate off the API server rejects them, and so
  does kgpu's loader (tested below). The gate-disabled rows of TestTaintTolerationFilterWithFeatureGate are
  transcribed against ``first_untolerated`` directly.
- The reason is ``node(s) had untolerated taint(s)``, as in the stored upstream test: kubernetes PR #134740
  (v1.35, backported to the v1.34 patch releases; the real v1.34.4 scheduler run by ``make conformance``
  says it). Before, it was ``node(s) had untolerated taint {<key>: <value>}``; kgpu keeps that form for its
  own explanations (``static_reasons(..., detail=True)``).
"""

from __future__ import annotations

from typing import Any

import pytest

from k8s_builders import load_node, node, pod, spec_of, taint, toleration
from kgpu.errors import InputError
from kgpu.model.objects import Taint, Toleration
from kgpu.model.predicates import (
    ERR_TAINTS,
    ERR_UNSCHEDULABLE,
    first_untolerated,
    static_reasons,
    tolerates,
    untolerated_taint_detail,
)

# --- toleration_test.go, TestTolerationToleratesTaint (rows without Gt/Lt) ----------------------------
# (description, toleration, taint, expect tolerated)
TOLERATES_TAINT: list[tuple[str, Toleration, Taint, bool]] = [
    (
        "same key and effect, operator Exists, taint has no value",
        Toleration(key="foo", operator="Exists", effect="NoSchedule"),
        Taint(key="foo", effect="NoSchedule"),
        True,
    ),
    (
        "same key and effect, operator Exists, taint has some value",
        Toleration(key="foo", operator="Exists", effect="NoSchedule"),
        Taint(key="foo", value="bar", effect="NoSchedule"),
        True,
    ),
    (
        "same effect, empty key with Exists matches all taints",
        Toleration(key="", operator="Exists", effect="NoSchedule"),
        Taint(key="foo", value="bar", effect="NoSchedule"),
        True,
    ),
    (
        "same key, effect and value, operator Equal",
        Toleration(key="foo", operator="Equal", value="bar", effect="NoSchedule"),
        Taint(key="foo", value="bar", effect="NoSchedule"),
        True,
    ),
    (
        "same key and effect, different values, operator Equal",
        Toleration(key="foo", operator="Equal", value="value1", effect="NoSchedule"),
        Taint(key="foo", value="value2", effect="NoSchedule"),
        False,
    ),
    (
        "same key and value, different effects, operator Equal",
        Toleration(key="foo", operator="Equal", value="bar", effect="NoSchedule"),
        Taint(key="foo", value="bar", effect="NoExecute"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("toleration_", "taint_", "expected"),
    [c[1:] for c in TOLERATES_TAINT],
    ids=[c[0] for c in TOLERATES_TAINT],
)
def test_toleration_tolerates_taint(toleration_: Toleration, taint_: Taint, expected: bool) -> None:
    assert tolerates(toleration_, taint_) is expected


# --- taint_toleration_test.go, TestTaintTolerationFilter (rows without Gt/Lt) ---------------------------
# (name, pod tolerations, node taints, expected reason or None)
FILTER: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], str | None]] = [
    (
        "A pod having no tolerations can't be scheduled onto a node with nonempty taints",
        [],
        [taint("dedicated", "user1", "NoSchedule")],
        ERR_TAINTS,
    ),
    (
        "A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
        [toleration(key="dedicated", value="user1", effect="NoSchedule")],
        [taint("dedicated", "user1", "NoSchedule")],
        None,
    ),
    (
        "A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
        [toleration(key="dedicated", operator="Equal", value="user2", effect="NoSchedule")],
        [taint("dedicated", "user1", "NoSchedule")],
        ERR_TAINTS,
    ),
    (
        "A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints",
        [toleration(key="foo", operator="Exists", effect="NoSchedule")],
        [taint("foo", "bar", "NoSchedule")],
        None,
    ),
    (
        "A pod has multiple tolerations, node has multiple taints, all the taints are tolerated",
        [
            toleration(key="dedicated", operator="Equal", value="user2", effect="NoSchedule"),
            toleration(key="foo", operator="Exists", effect="NoSchedule"),
        ],
        [taint("dedicated", "user2", "NoSchedule"), taint("foo", "bar", "NoSchedule")],
        None,
    ),
    (
        "keys and values match the taint, but (non-empty) effect doesn't match",
        [toleration(key="foo", operator="Equal", value="bar", effect="PreferNoSchedule")],
        [taint("foo", "bar", "NoSchedule")],
        ERR_TAINTS,
    ),
    (
        "keys and values match the taint, the effect of toleration is empty, taint is NoSchedule",
        [toleration(key="foo", operator="Equal", value="bar")],
        [taint("foo", "bar", "NoSchedule")],
        None,
    ),
    (
        "key and value don't match, but the effect of taint on node is PreferNoSchedule",
        [toleration(key="dedicated", operator="Equal", value="user2", effect="NoSchedule")],
        [taint("dedicated", "user1", "PreferNoSchedule")],
        None,
    ),
    (
        "The pod has no toleration, but the effect of taint on node is PreferNoSchedule",
        [],
        [taint("dedicated", "user1", "PreferNoSchedule")],
        None,
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected"), [c[1:] for c in FILTER], ids=[c[0] for c in FILTER]
)
def test_taint_toleration_filter(
    tolerations: list[dict[str, Any]], taints: list[dict[str, Any]], expected: str | None
) -> None:
    spec = spec_of(pod("pod1", tolerations=tolerations))
    n = load_node(node("nodeA", taints=taints))
    reasons = static_reasons(spec, n)
    assert reasons == (None if expected is None else [expected])


def test_untolerated_taint_reason_wording() -> None:
    # taint_toleration.go since PR #134740: the reason does not name the taint.
    assert ERR_TAINTS == "node(s) had untolerated taint(s)"
    n = load_node(node("nodeA", taints=[taint("dedicated", "user1")]))
    assert static_reasons(spec_of(pod("p")), n) == [ERR_TAINTS]


def test_detail_names_the_taint_for_kgpus_own_explanations() -> None:
    assert untolerated_taint_detail(Taint("dedicated", "user1")) == "untolerated taint {dedicated: user1}"
    n = load_node(node("nodeA", taints=[taint("dedicated", "user1")]))
    assert static_reasons(spec_of(pod("p")), n, detail=True) == ["node(s) had untolerated taint {dedicated: user1}"]


# --- taint_toleration_test.go, TestTaintTolerationFilterWithFeatureGate, gate-disabled rows -------------
# With the gate off, Gt/Lt tolerations are ignored (only Equal/Exists are honoured).
GATE_OFF: list[tuple[str, tuple[Toleration, ...], tuple[Taint, ...], bool]] = [
    (
        "Pod with Gt toleration cannot be scheduled when feature gate is disabled",
        (Toleration("node.kubernetes.io/sla", "Gt", "750", "NoSchedule"),),
        (Taint("node.kubernetes.io/sla", "950", "NoSchedule"),),
        False,
    ),
    (
        "Pod with Lt toleration cannot be scheduled when feature gate is disabled",
        (Toleration("node.kubernetes.io/sla", "Lt", "950", "NoSchedule"),),
        (Taint("node.kubernetes.io/sla", "800", "NoSchedule"),),
        False,
    ),
    (
        "Pod with mixed tolerations (Equal and Gt) when feature gate is disabled - only Equal is honored",
        (
            Toleration("dedicated", "Equal", "user1", "NoSchedule"),
            Toleration("node.kubernetes.io/sla", "Gt", "750", "NoSchedule"),
        ),
        (Taint("dedicated", "user1", "NoSchedule"),),
        True,
    ),
    (
        "Pod with mixed tolerations, Gt toleration needed but filtered out when feature gate is disabled",
        (
            Toleration("dedicated", "Equal", "user1", "NoSchedule"),
            Toleration("node.kubernetes.io/sla", "Gt", "750", "NoSchedule"),
        ),
        (Taint("dedicated", "user1", "NoSchedule"), Taint("node.kubernetes.io/sla", "950", "NoSchedule")),
        False,
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "fits"), [c[1:] for c in GATE_OFF], ids=[c[0] for c in GATE_OFF]
)
def test_taint_toleration_filter_comparison_gate_off(
    tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...], fits: bool
) -> None:
    assert (first_untolerated(taints, tolerations) is None) is fits


@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_comparison_toleration_operators_rejected_at_load(operator: str) -> None:
    # API validation with TaintTolerationComparisonOperators off (the default; the gate does not exist in 1.33).
    doc = pod("pod1", tolerations=[toleration(key="node.kubernetes.io/sla", operator=operator, value="950")])
    with pytest.raises(InputError):
        spec_of(doc)


# --- node_unschedulable_test.go, TestNodeUnschedulable ---------------------------------------------------
# (name, pod tolerations, node.spec.unschedulable, expected reasons)
UNSCHEDULABLE: list[tuple[str, list[dict[str, Any]], bool, list[str] | None]] = [
    (
        "Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
        [],
        True,
        [ERR_UNSCHEDULABLE],
    ),
    ("Schedule pod to normal node", [], False, None),
    (
        "Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
        [toleration(key="node.kubernetes.io/unschedulable", effect="NoSchedule")],
        True,
        None,
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "unschedulable", "expected"),
    [c[1:] for c in UNSCHEDULABLE],
    ids=[c[0] for c in UNSCHEDULABLE],
)
def test_node_unschedulable(
    tolerations: list[dict[str, Any]], unschedulable: bool, expected: list[str] | None
) -> None:
    spec = spec_of(pod("pod", tolerations=tolerations))
    n = load_node(node("node", unschedulable=unschedulable))
    assert static_reasons(spec, n) == expected


def test_node_unschedulable_reason_wording() -> None:
    # nodeunschedulable.ErrReasonUnschedulable
    assert ERR_UNSCHEDULABLE == "node(s) were unschedulable"

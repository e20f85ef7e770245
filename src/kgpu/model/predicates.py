"""kube-scheduler's filter plugins as pure functions.

Each filter returns ``None`` when the node passes, or the reasons it fails with, in kube-scheduler's own
wording, so the same text reaches ``simulate``, ``doctor`` and the CLI. Sources transcribed (behaviour, not
code):

- NodeUnschedulable: pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go
- NodeName: pkg/scheduler/framework/plugins/nodename/node_name.go
- TaintToleration: pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go and
  k8s.io/api/core/v1/toleration.go (ToleratesTaint)
- NodeAffinity: component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go and
  apimachinery/pkg/labels/selector.go (Requirement.Matches)
- NodePorts: pkg/scheduler/framework/plugins/nodeports/node_ports.go
- NodeResourcesFit: pkg/scheduler/framework/plugins/noderesources/fit.go (fitsRequest)
- PodTopologySpread, InterPodAffinity: the reasons below; their filters need the pods on every node and
  live in ``kgpu.sim.scheduler.plugins.topology``. Label selectors: apimachinery/pkg/labels (LabelSelectorAsSelector).

The filters run in the default profile's order; a node reports the reasons of its first failing filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from kgpu.model.names import is_label_value, is_qualified_name
from kgpu.model.objects import (
    CPU,
    EPHEMERAL,
    MEMORY,
    HostPort,
    LabelSelector,
    Node,
    NodeSelector,
    PodSpecInfo,
    Requirement,
    Taint,
    Term,
    Toleration,
)

ERR_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_NODE_NAME = "node(s) didn't match the requested node name"
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
# The framework's status for nodes outside a PreFilter result (v1.34 schedule_one: findNodesThatFitPod),
# and NodeAffinity's PreFilter rejection when the metadata.name terms leave no node.
ERR_PREFILTER_NODE_AFFINITY = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
ERR_AFFINITY_CONFLICT = "pod affinity terms conflict"
ERR_NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
ERR_TOO_MANY_PODS = "Too many pods"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# PodTopologySpread (podtopologyspread/plugin.go) and InterPodAffinity (interpodaffinity/filtering.go)
ERR_SPREAD = "node(s) didn't match pod topology spread constraints"
ERR_SPREAD_LABEL = ERR_SPREAD + " (missing required label)"
ERR_POD_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

FILTER_ORDER = (
    "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
    "PodTopologySpread", "InterPodAffinity",
)


# TaintToleration's Filter reason since kubernetes#134740 (v1.35, and the v1.34.x patches from v1.34.2 on): it
# no longer names the taint. kgpu's own explanations (render consistency, doctor) name it with
# ``untolerated_taint_detail``.
ERR_TAINTS = "node(s) had untolerated taint(s)"


def untolerated_taint_detail(taint: Taint) -> str:
    """Which taint: the form kube-scheduler printed up to v1.34.1, kept for kgpu's own explanations."""
    return f"untolerated taint {{{taint.key}: {taint.value}}}"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


# --- taints and tolerations ----------------------------------------------------------------------------


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Toleration.ToleratesTaint: empty effect matches every effect, empty key (with Exists) every key."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerated(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def first_untolerated(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], effects: tuple[str, ...] = ("NoSchedule", "NoExecute")
) -> Taint | None:
    """FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc: PreferNoSchedule never filters."""
    for taint in taints:
        if taint.effect in effects and not tolerated(tolerations, taint):
            return taint
    return None


# --- node affinity / selector --------------------------------------------------------------------------

_INT64 = re.compile(r"^[+-]?[0-9]+$")


def _parse_int64(text: str) -> int | None:
    if not _INT64.match(text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


def requirement_error(req: Requirement) -> str | None:
    """Why labels.NewRequirement would reject this expression (the term then matches nothing)."""
    if not is_qualified_name(req.key):
        return f"invalid label key {req.key!r}"
    op, values = req.operator, req.values
    if op in ("In", "NotIn"):
        if not values:
            return f"values: must be non-empty for operator {op}"
    elif op in ("Exists", "DoesNotExist"):
        if values:
            return f"values: must be empty for operator {op}"
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            return f"values: must have exactly one value for operator {op}"
        if _parse_int64(values[0]) is None:
            return f"values[0]: must be an integer for operator {op}"
    else:
        return f"{op!r} is not a valid node selector operator"
    for v in values:
        if not is_label_value(v):
            return f"invalid label value {v!r}"
    return None


def field_requirement_error(req: Requirement) -> str | None:
    if req.key != "metadata.name":
        return f"{req.key!r} is not a valid node field selector key"
    if req.operator not in ("In", "NotIn"):
        return f"{req.operator!r} is not a valid node field selector operator"
    if len(req.values) != 1:
        return f"unexpected number of value ({len(req.values)}) for node field selector operator {req.operator!r}"
    return None


def requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    """labels.Requirement.Matches (NotIn and DoesNotExist match a missing label)."""
    op = req.operator
    if op == "In":
        return req.key in labels and labels[req.key] in req.values
    if op == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    if op in ("Gt", "Lt"):
        if req.key not in labels:
            return False
        have = _parse_int64(labels[req.key])
        want = _parse_int64(req.values[0]) if len(req.values) == 1 else None
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Term, labels: Mapping[str, str], node_name: str) -> bool:
    """A term matches when all its expressions and fields match; an empty or invalid term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if requirement_error(req) is not None or not requirement_matches(req, labels):
            return False
    for req in term.match_fields:
        if field_requirement_error(req) is not None:
            return False
        hit = node_name == req.values[0]
        if hit != (req.operator == "In"):
            return False
    return True


def node_selector_matches(selector: NodeSelector, labels: Mapping[str, str], node_name: str) -> bool:
    return any(term_matches(t, labels, node_name) for t in selector.terms)


def affinity_matches(spec: PodSpecInfo, labels: Mapping[str, str], node_name: str) -> bool:
    """RequiredNodeAffinity.Match: nodeSelector (every pair equal) AND required node affinity."""
    for key, value in spec.node_selector:
        if labels.get(key) != value:
            return False
    return spec.affinity is None or node_selector_matches(spec.affinity, labels, node_name)


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A label selector on pod or namespace labels: None (no selector) matches nothing, no requirements
    match everything."""
    if selector is None:
        return False
    return all(requirement_matches(req, labels) for req in selector.requirements)


# --- host ports ----------------------------------------------------------------------------------------


def ports_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> bool:
    """HostPortInfo.CheckConflict: same protocol and port, and the same IP or either on 0.0.0.0."""
    used = list(used)
    for w in wanted:
        for u in used:
            if w.port != u.port or w.protocol != u.protocol:
                continue
            wi, ui = w.host_ip or "0.0.0.0", u.host_ip or "0.0.0.0"
            if wi == ui or "0.0.0.0" in (wi, ui):
                return True
    return False


# --- resources -----------------------------------------------------------------------------------------


def insufficient_resources(
    spec: PodSpecInfo, allocatable: Mapping[str, int], requested: Mapping[str, int], pod_count: int
) -> list[str]:
    """fitsRequest: every resource the pod requests more of than is free, plus the pod-count limit."""
    reasons: list[str] = []
    if pod_count + 1 > allocatable.get("pods", 0):
        reasons.append(ERR_TOO_MANY_PODS)
    for name, amount in spec.requests:
        if amount > allocatable.get(name, 0) - requested.get(name, 0):
            reasons.append(insufficient(name))
    # kube-scheduler checks cpu, memory, ephemeral-storage, then extended resources; sorting of the final
    # message makes the order here invisible, but keep it for single-node explanations.
    order = {f"Insufficient {CPU}": 1, f"Insufficient {MEMORY}": 2, f"Insufficient {EPHEMERAL}": 3}
    reasons.sort(key=lambda r: (r != ERR_TOO_MANY_PODS, order.get(r, 4), r))
    return reasons


# --- all filters, one node -----------------------------------------------------------------------------


def prefilter_node_names(spec: PodSpecInfo) -> frozenset[str] | None:
    """NodeAffinity's PreFilter: the nodes a pod pinned by ``matchFields: metadata.name In [...]`` may use.

    None when every node stays a candidate: no required terms, or one term without such a field (terms are
    ORed). Otherwise the union over terms of the names each term's ``In`` fields all allow; an empty set is
    kube-scheduler's "pod affinity terms conflict". Nodes outside the set are not filtered at all: the
    framework reports them as ``ERR_PREFILTER_NODE_AFFINITY``.
    """
    if spec.affinity is None or not spec.affinity.terms:
        return None
    names: set[str] = set()
    for term in spec.affinity.terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In":
                term_names = set(req.values) if term_names is None else term_names & set(req.values)
        if term_names is None:
            return None
        names |= term_names
    return frozenset(names)


def static_reasons(spec: PodSpecInfo, node: Node, *, detail: bool = False) -> list[str] | None:
    """The filters that depend only on the node object (not on what already runs there).

    With ``detail`` an untolerated taint is named (``node(s) had untolerated taint {key: value}``), for
    kgpu's own explanations; without it the reason is kube-scheduler's word for word.
    """
    if node.unschedulable and not tolerated(
        spec.tolerations, Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")
    ):
        return [ERR_UNSCHEDULABLE]
    if spec.node_name and spec.node_name != node.name:
        return [ERR_NODE_NAME]
    taint = first_untolerated(node.taints, spec.tolerations)
    if taint is not None:
        return [f"node(s) had {untolerated_taint_detail(taint)}" if detail else ERR_TAINTS]
    if not affinity_matches(spec, node.labels, node.name):
        return [ERR_NODE_AFFINITY]
    return None


def filter_reasons(
    spec: PodSpecInfo,
    node: Node,
    requested: Mapping[str, int],
    pod_count: int,
    used_ports: Iterable[HostPort] = (),
) -> list[str] | None:
    """All default filters on one node, in order, after NodeAffinity's PreFilter; None when the pod fits."""
    names = prefilter_node_names(spec)
    if names is not None and node.name not in names:
        return [ERR_PREFILTER_NODE_AFFINITY]
    reasons = static_reasons(spec, node)
    if reasons:
        return reasons
    if spec.host_ports and ports_conflict(spec.host_ports, used_ports):
        return [ERR_NODE_PORTS]
    fit = insufficient_resources(spec, node.allocatable, requested, pod_count)
    return fit or None


def unschedulable_message(total_nodes: int, reasons: Mapping[str, int], extra: Callable[[], str] | None = None) -> str:
    """FitError.Error(): '0/N nodes are available: <count> <reason>, ...' with entries string-sorted."""
    text = f"0/{total_nodes} nodes are available"
    entries = sorted(f"{count} {reason}" for reason, count in reasons.items())
    if entries:
        text += ": " + ", ".join(entries) + "."
    else:
        text += "."
    if extra is not None:
        text += " " + extra()
    return text

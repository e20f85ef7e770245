"""The packaged CRDs' own CEL rules (x-kubernetes-validations), evaluated as the API server evaluates them on
create (kgpu.render.crd_rules), with its error lines.

The first cases are pinned from the real kube-apiserver v1.34.4 with the packaged CRDs installed: each
rendered object, changed as below, was created with ``dryRun=All`` and the lines are the ``details.causes`` it
answered (``<field>: <message>``). The lines of the OpenAPI schema (pattern, type) are jsonschema's in kgpu,
so only the API server's ``Invalid value`` lines are compared."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import pytest

from kgpu.model.profile import builtin_profile
from kgpu.render import cel_cost, crd_rules
from kgpu.render.stack import render_stack
from kgpu.render.validate import CRDS, NOT_CHECKED, crd_rule_list, validate_document
from render_helpers import named

NODEPOOL = "spec.template.spec.requirements"


def karpenter(kind: str, name: str) -> dict[str, Any]:
    docs = render_stack(builtin_profile("eks-karpenter"), ["karpenter"])["karpenter"]
    return copy.deepcopy(named(docs, kind, name))


def api_lines(doc: dict[str, Any]) -> list[str]:
    errors, _ = validate_document(doc)
    return sorted(e for e in errors if ": Invalid value: " in e)


def _labels(d: dict[str, Any]) -> None:
    d["spec"]["template"]["metadata"]["labels"].update(
        {"karpenter.sh/custom": "x", "karpenter.k8s.aws/instance-family": "g5", "sub.karpenter.k8s.aws/x": "y"})


def _requirements(d: dict[str, Any]) -> None:
    d["spec"]["template"]["spec"]["requirements"] += [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": []},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4", "8"]},
        {"key": "kubernetes.io/hostname", "operator": "Exists"},
        {"key": "example.com/a", "operator": "In", "values": ["a"], "minValues": 2},
    ]


def _many(d: dict[str, Any]) -> None:
    d["spec"]["instanceProfile"] = "x"
    d["spec"]["amiSelectorTerms"] = [{"alias": "al2023"}, {"id": "ami-1", "tags": {"": "x"}}]
    d["spec"]["tags"] = {"kubernetes.io/cluster/x": "owned", "eks:eks-cluster-name": "a"}


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        for k in head:
            d = d[k]
        d[last] = value
    return change


INVALID = ": Invalid value: "
CASES: list[tuple[str, str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("NodePool", "gpu", _labels, [
        'spec.template.metadata.labels: Invalid value: "object": label domain "karpenter.k8s.aws" is restricted',
        'spec.template.metadata.labels: Invalid value: "object": label domain "karpenter.sh" is restricted']),
    ("NodePool", "gpu", _set("spec.template.spec.requirements", [{"key": "example.com/a", "operator": "In"}]), [
        f'{NODEPOOL}: Invalid value: "array": no such key: values evaluating rule: requirements with operator '
        "'In' must have a value defined"]),
    ("NodePool", "gpu", _set("spec.template.spec.requirements",
                             [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["x"]}]), [
        f"{NODEPOOL}: Invalid value: \"array\": type conversion error from 'string' to 'int' evaluating rule: "
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"]),
    ("NodePool", "gpu", _set("spec.disruption.budgets", [{"nodes": "10%", "schedule": "@daily"}]), [
        "spec.disruption.budgets: Invalid value: \"array\": 'schedule' must be set with 'duration'"]),
    ("NodePool", "gpu", _set("spec.replicas", 2), [
        "spec: Invalid value: \"object\": 'weight' is not supported on static NodePools",
        "spec: Invalid value: \"object\": only 'limits.nodes' is supported on static NodePools"]),
    ("NodePool", "gpu", _set("spec.template.spec.nodeClassRef.group", ""), [
        'spec.template.spec.nodeClassRef.group: Invalid value: "string": group may not be empty']),
    ("EC2NodeClass", "gpu", _many, sorted([
        "spec: Invalid value: \"object\": must specify exactly one of ['role', 'instanceProfile']",
        'spec.tags: Invalid value: "object": tag contains a restricted tag matching eks:eks-cluster-name',
        'spec.tags: Invalid value: "object": tag contains a restricted tag matching kubernetes.io/cluster/',
        "spec.amiSelectorTerms: Invalid value: \"array\": 'id' is mutually exclusive, cannot be set with a "
        "combination of other fields in amiSelectorTerms",
        "spec.amiSelectorTerms: Invalid value: \"array\": 'alias' is mutually exclusive, cannot be set with a "
        "combination of other amiSelectorTerms",
        "spec.amiSelectorTerms[0].alias: Invalid value: \"string\": 'alias' is improperly formatted, must match the "
        "format 'family@version'",
        "spec.amiSelectorTerms[1].tags: Invalid value: \"object\": empty tag keys or values aren't supported"])),
    ("EC2NodeClass", "gpu", _set("spec.amiSelectorTerms", [{"alias": "windows2019"}]), [
        "spec.amiSelectorTerms[0].alias: Invalid value: \"string\": 'alias' is improperly formatted, must match the "
        "format 'family@version'",
        "spec.amiSelectorTerms[0].alias: Invalid value: \"string\": index out of bounds: 1 evaluating rule: windows "
        "families may only specify version 'latest'"]),
    ("EC2NodeClass", "gpu", _set("spec.amiFamily", "Bottlerocket"), [
        "spec: Invalid value: \"object\": if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"]),
    ("EC2NodeClass", "gpu", _set("spec.amiSelectorTerms", [{"id": "ami-123"}]), [
        'spec: Invalid value: "object": must specify amiFamily if amiSelectorTerms does not contain an alias']),
    ("EC2NodeClass", "gpu", _set("spec.networkInterfaces",
                                 [{"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "interface"}]), [
        "spec.networkInterfaces: Invalid value: \"array\": networkInterfaces must include a primary interface with "
        "interfaceType='interface'"]),
    ("EC2NodeClass", "gpu", _set("spec.placementGroupSelector", {"name": "a", "id": "pg-1"}), [
        "spec.placementGroupSelector: Invalid value: \"object\": 'name' and 'id' are mutually exclusive"]),
]


@pytest.mark.parametrize(("kind", "name", "change", "expected"), CASES)
def test_the_lines_the_api_server_answered(kind: str, name: str, change: Callable[[dict[str, Any]], None],
                                           expected: list[str]) -> None:
    doc = karpenter(kind, name)
    assert validate_document(doc) == ([], None)
    change(doc)
    assert api_lines(doc) == sorted(expected)


def test_items_are_named_by_index_and_every_failing_rule_is_a_line() -> None:
    doc = karpenter("NodePool", "gpu")
    at = len(doc["spec"]["template"]["spec"]["requirements"]) + 2
    _requirements(doc)
    assert api_lines(doc) == sorted([
        f"{NODEPOOL}: Invalid value: \"array\": requirements with operator 'In' must have a value defined",
        f"{NODEPOOL}: Invalid value: \"array\": requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single "
        "positive integer value",
        f"{NODEPOOL}: Invalid value: \"array\": requirements with 'minValues' must have at least that many values "
        "specified in the 'values' field",
        f'{NODEPOOL}[{at}].key: Invalid value: "string": label "kubernetes.io/hostname" is restricted'])


def test_a_blocking_schema_error_stops_the_rules_and_defaults_fill_what_is_left_out() -> None:
    """``weight: "50"`` is a type error: the API server runs no rule and says so. A NodePool without
    ``disruption`` is defaulted (budgets ``nodes: 10%``) before the rules read it: no error."""
    doc = karpenter("NodePool", "gpu")
    doc["spec"]["weight"] = "50"
    doc["spec"]["replicas"] = 2  # would fail two rules, were they run
    errors, _ = validate_document(doc)
    assert errors[-1] == NOT_CHECKED and len(errors) == 2 and errors[0].startswith("spec.weight:")
    doc = karpenter("NodePool", "gpu")
    del doc["spec"]["disruption"]
    assert validate_document(doc) == ([], None)


def test_the_overlay_and_raycluster_rules() -> None:
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"},
               "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                          "values": ["g5.xlarge"]}],
                        "capacity": {"cpu": "4", "nvidia.com/gpu.shared": "4"}, "price": "1.0",
                        "priceAdjustment": "-10%"}}
    assert api_lines(overlay) == [
        "spec.capacity: Invalid value: \"object\": invalid resource restricted",
        "spec: Invalid value: \"object\": cannot set both 'price' and 'priceAdjustment'"]
    ray = next(d for d in render_stack(builtin_profile("kuberay"))["kuberay"] if d["kind"] == "RayCluster")
    ray = copy.deepcopy(ray)
    assert validate_document(ray) == ([], None)
    ray["spec"]["managedBy"] = "someone"
    assert api_lines(ray) == [
        "spec.managedBy: Invalid value: \"string\": the managedBy field value must be either "
        "'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"]


def test_every_packaged_rule_compiles_and_transition_rules_wait_for_an_update() -> None:
    counts = {}
    for file, version in CRDS.values():
        rules = crd_rule_list(file, version)
        assert all(r.program is not None and r.unsupported is None for r in rules), file
        counts[file] = (len(rules), sum(r.uses_old_self for r in rules))
    assert sum(n for n, _ in counts.values()) == 74
    assert counts["karpenter.sh_nodepools.yaml"] == (20, 3)  # static/dynamic, nodeClassRef group and kind
    assert counts["ray.io_rayclusters.yaml"] == (3, 2)  # managedBy and the GCS backend are immutable


# --- the mechanics, on a CRD schema of their own ---------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "min-size": {"type": "integer"},
                "namespace": {"type": "string"},
                "window": {"type": "object", "properties": {
                    "start": {"type": "string", "format": "date-time"},
                    "end": {"type": "string", "format": "date-time"}}},
                "ports": {"type": "array", "items": {"type": "integer"}},
                "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "x-kubernetes-validations": [],
        },
    },
}


def rules_on_spec(*rules: dict[str, Any]) -> crd_rules.Node:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"]["x-kubernetes-validations"] = list(rules)
    node = crd_rules.build(schema)
    assert node is not None
    return node


def run(node: crd_rules.Node, spec: dict[str, Any], root_rules: list[dict[str, Any]] | None = None) -> crd_rules.Outcome:
    doc = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}},
           "spec": spec}
    return crd_rules.evaluate(node, SCHEMA, doc)


def test_message_expression_field_path_and_reason() -> None:
    node = rules_on_spec(
        {"rule": "self.replicas <= 3", "messageExpression": "'replicas is ' + string(self.replicas) + ', at most 3'",
         "fieldPath": ".replicas"},
        {"rule": "self.replicas <= 2", "message": "two at most", "reason": "FieldValueForbidden"},
        {"rule": "has(self.namespace)", "message": "namespace is needed", "reason": "FieldValueRequired"},
        {"rule": "self.ports.size() == 0", "reason": "FieldValueDuplicate", "fieldPath": ".ports"},
        {"rule": "self.replicas < 0"},
        {"rule": "self.replicas < 0", "message": "fallback", "messageExpression": "'two\\nlines'"},
    )
    out = run(node, {"replicas": 5, "ports": [80]})
    assert out.errors == [
        'spec.replicas: Invalid value: "object": replicas is 5, at most 3',
        "spec: Forbidden: two at most",
        "spec: Required value: namespace is needed",
        'spec.ports: Duplicate value: "object"',
        'spec: Invalid value: "object": failed rule: self.replicas < 0',
        'spec: Invalid value: "object": fallback',
    ]


def test_self_is_what_the_api_server_binds() -> None:
    """Defaults filled (replicas 1), escaped property names, reserved words, timestamps for date-time, maps
    with every key, a preserve-unknown-fields object without fields, the root with its name only."""
    node = rules_on_spec(
        {"rule": "self.replicas == 1", "message": "default"},
        {"rule": "self.min__dash__size == 2", "message": "escaped"},
        {"rule": "self.__namespace__ == 'ns'", "message": "reserved"},
        {"rule": "self.window.start < self.window.end", "message": "timestamps"},
        {"rule": "self.labels.all(k, self.labels[k] != '')", "message": "map"},
        {"rule": "!has(self.config.deep)", "message": "unknown fields"},
    )
    spec = {"min-size": 2, "namespace": "ns", "window": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
            "labels": {"a.b/c": "x"}, "config": {"deep": {"er": 1}}}
    out = run(node, spec)
    assert out.errors == [] and out.notes == []
    spec["window"]["end"] = "2025-12-31T23:59:59Z"
    assert [e.rsplit(": ", 1)[1] for e in run(node, spec).errors] == ["timestamps"]
    schema = copy.deepcopy(SCHEMA)
    schema["x-kubernetes-validations"] = [
        {"rule": "self.metadata.name == 'w' && !has(self.metadata.labels)", "message": "root"},
        {"rule": "self.kind == 'Gadget'", "message": "kind"}]
    root = crd_rules.build(schema)
    doc = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {}}
    assert crd_rules.evaluate(root, schema, doc).errors == ['<nil>: Invalid value: "object": kind']


def test_optional_old_self_runs_on_create_and_plain_transition_rules_do_not() -> None:
    node = rules_on_spec(
        {"rule": "self.replicas == oldSelf.replicas", "message": "immutable"},
        {"rule": "!oldSelf.hasValue() && self.replicas > 4", "message": "new objects start above 4",
         "optionalOldSelf": True},
    )
    assert run(node, {"replicas": 2}).errors == ['spec: Invalid value: "object": new objects start above 4']
    assert run(node, {"replicas": 5}).errors == []


def test_what_the_interpreter_cannot_do_is_a_note_never_a_verdict() -> None:
    node = rules_on_spec(
        {"rule": "url('https://example.com').getHost() == 'example.com'", "message": "url library"},
        {"rule": "self.?window.orValue(null) == null", "message": "optional syntax"},
        {"rule": "self.replicas > 0", "message": "plain"},
    )
    out = run(node, {"replicas": 0})
    assert out.errors == ['spec: Invalid value: "object": plain']
    assert len(out.notes) == 2
    assert "'url library' not evaluated" in out.notes[0] and "url" in out.notes[0]
    assert "'optional syntax' not evaluated: kgpu's CEL cannot compile it" in out.notes[1]


def test_a_rule_whose_cost_may_pass_the_limit_is_not_run() -> None:
    """A quadratic rule over 5,000 items: (5,000 + 1)^2 iterations bound it far above 1,000,000. The linear
    one over the same list runs. Neither takes long."""
    node = rules_on_spec(
        {"rule": "self.ports.all(x, self.ports.exists_one(y, x == y))", "message": "distinct"},
        {"rule": "self.ports.all(x, x > 0)", "message": "positive"},
    )
    started = time.perf_counter()
    out = run(node, {"ports": [0, *range(1, 5000)]})
    assert time.perf_counter() - started < 5
    assert out.errors == ['spec: Invalid value: "object": positive']
    assert out.notes == ["spec: CEL rule 'distinct' not evaluated: its cost on this object may pass the API server's "
                         "per-expression limit (1,000,000)"]


def test_the_estimate_counts_nested_comprehensions_and_string_lengths() -> None:
    flat = cel_cost.estimate("self.all(x, x != 'a')")
    nested = cel_cost.estimate("self.all(x, self.all(y, x != y))")
    assert flat.bound(10, 5) < nested.bound(10, 5)
    assert nested.bound(100, 5) > 100 * nested.bound(1, 5)
    assert flat.bound(10, 1000) > flat.bound(10, 5)
    assert cel_cost.measure({"a": [1, 2, {"bb": "ccc"}]}) == (5, 3)


def test_hostile_objects_are_refused_or_noted_never_a_hang() -> None:
    doc = karpenter("EC2NodeClass", "gpu")
    doc["spec"]["tags"] = {f"k{i}": "v" * 64 for i in range(45_000)}  # over 3 MiB
    errors, _ = validate_document(doc)
    assert errors == ["(root): Request entity too large: limit is 3145728"]
    node = rules_on_spec({"rule": "self.replicas > 0", "message": "positive"})
    deep: Any = 1
    for _ in range(5000):
        deep = {"x": deep}
    out = run(node, {"replicas": 1, "config": deep})  # exposes no field: not even looked at
    assert out.errors == [] and out.notes == []


def test_field_paths_are_normalised_against_the_schema() -> None:
    spec = SCHEMA["properties"]["spec"]
    assert crd_rules.normalise_field_path(".window.start", spec) == "window.start"
    assert crd_rules.normalise_field_path(".labels['a.b/c']", spec) == "labels[a.b/c]"
    assert crd_rules.normalise_field_path("['min-size']", spec) == "min-size"
    assert crd_rules.normalise_field_path(".nope", spec) == ""
    assert crd_rules.escape("a.b-c/d__e") == "a__dot__b__dash__c__slash__d__underscores__e"
    assert crd_rules.escape("in") == "__in__" and crd_rules.escape("9x") is None and crd_rules.escape("a b") is None

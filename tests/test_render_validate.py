"""Validation: every rendered document passes its upstream schema, and the checks do catch mistakes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kgpu.model.profile import TEMPLATES, builtin_profile
from kgpu.render import deviceplugin, validate
from kgpu.render.stack import VALUES_TARGETS, render_stack
from kgpu.render.validate import validate_document, validate_stack
from render_helpers import named, of_kind


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_validates_with_zero_errors(template: str) -> None:
    """All documents of all targets pass the CRD / eksctl / core Kubernetes schemas."""
    profile = builtin_profile(template)
    stack = render_stack(profile)
    report = validate_stack(
        stack, kubernetes_version=profile.cluster.kubernetes_version, skip_targets=VALUES_TARGETS
    )
    assert report.errors == []
    # Only objects without a packaged schema are skipped, never a Kubernetes core kind; and the ClusterQueue's
    # "borrowingLimit must be nil when cohort is empty" (three nested all(), over kgpu's cost bound; kgpu
    # always sets cohortName, which makes the rule true).
    for line in report.skipped:
        cohort_rule = "ClusterQueue" in line and "borrowingLimit must be nil when cohort is empty" in line
        assert "ImageCache" in line or "monitoring.coreos.com" in line or cohort_rule, line


def _karpenter() -> list[dict[str, Any]]:
    return render_stack(builtin_profile("eks-karpenter"), ["karpenter"])["karpenter"]


def _errors(doc: dict[str, Any]) -> list[str]:
    errors, skipped = validate_document(doc)
    assert skipped is None
    return errors


def test_cel_alias_format_and_family() -> None:
    nc = copy.deepcopy(named(_karpenter(), "EC2NodeClass", "gpu"))
    nc["spec"]["amiSelectorTerms"] = [{"alias": "al2023"}]
    assert any("family@version" in e for e in _errors(nc))
    nc["spec"]["amiSelectorTerms"] = [{"alias": "ubuntu@latest"}]
    assert any("family is not supported" in e for e in _errors(nc))


def test_cel_role_xor_instance_profile() -> None:
    nc = copy.deepcopy(named(_karpenter(), "EC2NodeClass", "gpu"))
    nc["spec"]["instanceProfile"] = "KarpenterNodeInstanceProfile"
    assert any("exactly one of ['role', 'instanceProfile']" in e for e in _errors(nc))


def test_cel_requirement_operators() -> None:
    np = copy.deepcopy(named(_karpenter(), "NodePool", "general"))
    reqs = np["spec"]["template"]["spec"]["requirements"]
    reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": []})
    reqs.append({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4", "8"]})
    errors = _errors(np)
    assert any("operator 'In' must have a value" in e for e in errors)
    assert any("single positive integer" in e for e in errors)
    assert all(e.startswith("spec.template.spec.requirements") for e in errors)


def test_cel_label_domains() -> None:
    np = copy.deepcopy(named(_karpenter(), "NodePool", "gpu"))
    np["spec"]["template"]["metadata"]["labels"]["karpenter.sh/custom"] = "x"
    np["spec"]["template"]["metadata"]["labels"]["karpenter.k8s.aws/instance-family"] = "g5"  # allowed
    errors = _errors(np)
    assert errors == ['spec.template.metadata.labels: Invalid value: "object": label domain "karpenter.sh" is restricted']


def test_crd_schema_rejects_unknown_fields_and_wrong_types() -> None:
    np = copy.deepcopy(named(_karpenter(), "NodePool", "gpu"))
    np["spec"]["disruption"]["consolidateAfterr"] = "30s"
    np["spec"]["weight"] = "50"
    errors = _errors(np)
    assert any("consolidateAfterr" in e for e in errors)
    assert any(e.startswith("spec.weight:") for e in errors)


def test_int_or_string_limits_accept_both() -> None:
    np = copy.deepcopy(named(_karpenter(), "NodePool", "gpu"))
    np["spec"]["limits"]["nvidia.com/gpu"] = 32
    assert _errors(np) == []


def test_eksctl_schema_rejects_legacy_map_taints() -> None:
    """Seed 001's map form of taints fails eksctl's JSON schema; kgpu renders the list form."""
    config = render_stack(builtin_profile("eks-eksctl"), ["eksctl"])["eksctl"][0]
    assert _errors(config) == []
    bad = copy.deepcopy(config)
    bad["nodeGroups"][1]["taints"] = {"nvidia.com/gpu": "true:NoSchedule"}
    assert any(e.startswith("nodeGroups[1].taints") for e in _errors(bad))


def test_core_objects_validate_strictly() -> None:
    docs = render_stack(builtin_profile("eks-karpenter"), ["workloads"])["workloads"]
    deployment = copy.deepcopy(of_kind(docs, "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    assert _errors(deployment) != []


def test_kubernetes_schema_version_follows_profile() -> None:
    assert validate.kubernetes_schema_version("1.33") == "1.33.0"
    assert validate.kubernetes_schema_version("1.99").startswith("1.")
    assert validate.kubernetes_schema_version("1.10") == validate.kubernetes_schema_version("1.25")


def test_device_plugin_matches_upstream_v0_20_manifest() -> None:
    """Same image, container name, security context and kubelet socket mount as the upstream static file."""
    from importlib import resources

    upstream = yaml.safe_load(
        (resources.files("kgpu.render") / "schemas" / "nvidia-device-plugin.yml").read_text()
    )
    ours = named(
        deviceplugin.render(builtin_profile("eks-karpenter")), "DaemonSet", upstream["metadata"]["name"]
    )
    up_c = upstream["spec"]["template"]["spec"]["containers"][0]
    our_c = ours["spec"]["template"]["spec"]["containers"][0]
    for key in ("image", "name", "securityContext", "volumeMounts"):
        assert our_c[key] == up_c[key], key
    assert ours["spec"]["template"]["spec"]["volumes"] == upstream["spec"]["template"]["spec"]["volumes"]
    assert ours["spec"]["selector"] == upstream["spec"]["selector"]

"""Karpenter's NodePool vocabulary: requirement keys and operators, label aliases, limits, and the mapping of
real ``NodePool`` (karpenter.sh/v1) and ``EC2NodeClass`` (karpenter.k8s.aws/v1) objects to profile pools.

Facts from sigs.k8s.io/karpenter v1.8 (``pkg/apis/v1/labels.go``: ``WellKnownLabels``, ``NormalizedLabels``,
``RestrictedLabelDomains``, ``LabelDomainExceptions``; ``nodeclaim_validation.go``: ``ValidateRequirement``;
``nodepool_validation.go``; the NodePool CRD's requirement rules) and aws/karpenter-provider-aws
(``pkg/apis/v1/labels.go``: the ``karpenter.k8s.aws/*`` well-known labels and ``WellKnownResources``).

A NodePool becomes the same internal pool as a profile's ``kind: karpenter`` pool: its requirements are the
pool's native ``requirements`` (every key and operator, ``minValues`` kept), its template labels, taints,
limits, weight and disruption map one to one. ``startupTaints`` do not keep pods off a new node in Karpenter's
scheduling (they are expected to be removed), so they are noted and not modelled as taints. The EC2NodeClass
gives the AMI family (``amiSelectorTerms`` alias) and ``kubelet.maxPods`` is noted; everything else about it
(subnets, security groups, roles) does not change where pods go.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.fields import list_at as _list
from kgpu.model.names import is_label_value, is_qualified_name

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE_ID = "topology.k8s.aws/zone-id"
AWS = "karpenter.k8s.aws/"

# NormalizedLabels (karpenter pkg/apis/v1/labels.go): aliases Karpenter translates in pod and NodePool
# requirements before it compares them with instance types.
NORMALIZED_LABELS: dict[str, str] = {
    "failure-domain.beta.kubernetes.io/zone": LABEL_ZONE,
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/region": LABEL_REGION,
    # added by the AWS provider (pkg/operator/operator.go): the EBS CSI driver's topology key, which its
    # volumes' node affinity names
    "topology.ebs.csi.aws.com/zone": LABEL_ZONE,
}

# karpenter.k8s.aws/* labels the AWS provider adds to WellKnownLabels (karpenter-provider-aws labels.go)
AWS_LABELS: tuple[str, ...] = tuple(
    AWS + name
    for name in (
        "capacity-reservation-id",
        "capacity-reservation-type",
        "instance-hypervisor",
        "instance-encryption-in-transit-supported",
        "instance-category",
        "instance-capability-flex",
        "instance-family",
        "instance-generation",
        "instance-size",
        "instance-local-nvme",
        "instance-cpu",
        "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory",
        "instance-ebs-bandwidth",
        "instance-network-bandwidth",
        "instance-gpu-name",
        "instance-gpu-manufacturer",
        "instance-gpu-count",
        "instance-gpu-memory",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
        "instance-tenancy",
    )
)
# Provider labels the packaged catalog has no data for (capacity reservations are the account's; the catalog
# lists no Inferentia or Trainium type): a NodePool requirement on one of them is not applied, and kgpu says so
# (profile warning), rather than filtering out every instance type.
CATALOG_MISSING_LABELS: frozenset[str] = frozenset(
    AWS + name
    for name in (
        "capacity-reservation-id",
        "capacity-reservation-type",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
    )
)
WELL_KNOWN_LABELS: frozenset[str] = frozenset(
    (
        LABEL_NODEPOOL,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_CAPACITY_TYPE,
        "node.kubernetes.io/windows-build",
        LABEL_ZONE_ID,
        *AWS_LABELS,
    )
)
RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")
DOMAIN_EXCEPTIONS = ("kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io")

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
NUMERIC_OPERATORS = ("Gt", "Lt", "Gte", "Lte")
MAX_MIN_VALUES = 50

# Resources a pool's limits may name: what nodes of the catalog have (cpu, memory, pods, ephemeral-storage,
# GPUs), the AWS provider's other WellKnownResources, and Karpenter's node count.
LIMIT_RESOURCES = (
    "cpu",
    "memory",
    "ephemeral-storage",
    "pods",
    "nodes",
    "nvidia.com/gpu",
    "amd.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "habana.ai/gaudi",
    "vpc.amazonaws.com/efa",
    "vpc.amazonaws.com/pod-eni",
)



def normalize(key: str) -> str:
    """The key Karpenter compares: an alias (``beta.kubernetes.io/arch``) becomes its stable label."""
    return NORMALIZED_LABELS.get(key, key)


def label_domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted_node_label(key: str) -> bool:
    """IsRestrictedNodeLabel: well-known labels, and keys in Karpenter's restricted domains."""
    if key in WELL_KNOWN_LABELS:
        return True
    domain = label_domain(key)
    if any(domain.endswith(d) for d in DOMAIN_EXCEPTIONS):
        return False
    return any(domain.endswith(d) for d in RESTRICTED_DOMAINS) or key == LABEL_HOSTNAME


def requirement_error(key: str, operator: str, values: list[str], min_values: int | None) -> str | None:
    """Karpenter's ValidateRequirement plus the NodePool CRD's requirement rules, in their words."""
    key = normalize(key)
    if operator not in OPERATORS:
        return f"key {key} has an unsupported operator {operator} not in {', '.join(OPERATORS)}"
    if len(key) > 316 or not is_qualified_name(key):  # the NodePool CRD: maxLength 316
        return f"key {key} is not a qualified name"
    if key == LABEL_NODEPOOL:
        return f'invalid key: "{key}" in requirements, restricted'
    if key not in WELL_KNOWN_LABELS and is_restricted_node_label(key):
        return (
            f"label {key} is restricted; specify a well known label: [{' '.join(sorted(WELL_KNOWN_LABELS))}], "
            f"or a custom label that does not use a restricted domain: [{' '.join(RESTRICTED_DOMAINS)}]"
        )
    for value in values:
        if not is_label_value(value):
            return f"invalid value {value} for key {key}"
    if operator in ("In", "NotIn") and not values:
        return f"key {key} with operator {operator} must have a value defined"
    if operator in ("Exists", "DoesNotExist") and values:
        return f"key {key} with operator {operator}: values must be empty"
    if operator in NUMERIC_OPERATORS and (
        len(values) != 1 or not values[0].isdigit() or not values[0].isascii()
    ):
        return f"key {key} with operator {operator} must have a single positive integer value"
    if min_values is not None:
        if not 1 <= min_values <= MAX_MIN_VALUES:
            return f"minValues {min_values} is not between 1 and {MAX_MIN_VALUES}"
        if operator == "In" and len(values) < min_values:
            return (
                f"key {key} with operator {operator} must have at least minimum number of values defined in "
                "'values' field"
            )
    return None


def limit_key_error(key: str) -> str | None:
    if key in LIMIT_RESOURCES:
        return None
    import difflib

    close = difflib.get_close_matches(key, LIMIT_RESOURCES, n=1)
    hint = f"; did you mean {close[0]}?" if close else f" (one of {', '.join(LIMIT_RESOURCES)})"
    return f"{quote(key)} is not a resource Karpenter can limit here{hint}"


# --- NodePool / EC2NodeClass objects -> profile pool ---------------------------------------------------


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"must be a mapping, got {type(value).__name__}", where=where)
    return dict(value)


_ALIAS_FAMILY = {"al2023": "AL2023", "al2": "AL2", "bottlerocket": "Bottlerocket"}


def nodeclass_family(nodeclass: Mapping[str, Any] | None) -> str | None:
    """The profile ``amiFamily`` of an EC2NodeClass: its alias's family, else its ``amiFamily``."""
    if nodeclass is None:
        return None
    for term in _get(nodeclass, "spec", "amiSelectorTerms") or []:
        alias = term.get("alias") if isinstance(term, Mapping) else None
        if isinstance(alias, str) and "@" in alias:
            return _ALIAS_FAMILY.get(alias.split("@", 1)[0])
    family = _get(nodeclass, "spec", "amiFamily")
    return family if family in ("AL2023", "AL2", "Bottlerocket", "Custom") else None


def pool_from_nodepool(
    nodepool: Mapping[str, Any], nodeclasses: Mapping[str, Mapping[str, Any]], where: str
) -> tuple[dict[str, Any], list[str]]:
    """A profile pool (as a mapping, validated by the caller) for a NodePool object, and notes about what
    it leaves out. ``where`` names the object in errors (``file: NodePool gpu``)."""
    notes: list[str] = []
    name = _get(nodepool, "metadata", "name")
    if not isinstance(name, str) or not name:
        raise InputError("object without metadata.name", where=f"{where}: metadata.name")
    spec = _mapping(_get(nodepool, "spec"), f"{where}: spec")
    template = _mapping(spec.get("template"), f"{where}: spec.template")
    tspec = _mapping(template.get("spec"), f"{where}: spec.template.spec")
    tmeta = _mapping(template.get("metadata"), f"{where}: spec.template.metadata")
    if spec.get("replicas") is not None:
        raise InputError(
            "static NodePools (spec.replicas) keep a fixed node count and do not provision for pending pods; "
            "give their nodes as Nodes instead",
            where=f"{where}: spec.replicas",
        )
    reqs = []
    for i, r in enumerate(_list(tspec.get("requirements"), f"{where}: spec.template.spec.requirements")):
        at = f"{where}: spec.template.spec.requirements[{i}]"
        if not isinstance(r, Mapping):
            raise InputError("must be a mapping (key, operator, values)", where=at)
        item: dict[str, Any] = {"key": r.get("key"), "operator": r.get("operator")}
        if r.get("values") is not None:
            item["values"] = r.get("values")
        if r.get("minValues") is not None:
            item["minValues"] = r.get("minValues")
        reqs.append(item)
    pool: dict[str, Any] = {"name": name, "kind": "karpenter", "requirements": reqs}
    labels = _mapping(tmeta.get("labels"), f"{where}: spec.template.metadata.labels")
    if labels:
        pool["labels"] = labels
    taints = _list(tspec.get("taints"), f"{where}: spec.template.spec.taints")
    if taints:
        pool["taints"] = [
            {k: t[k] for k in ("key", "value", "effect") if k in t} if isinstance(t, Mapping) else t
            for t in taints
        ]
    if tspec.get("startupTaints"):
        notes.append(f"{where}: startupTaints are not modelled (pods need not tolerate them)")
    limits = _mapping(spec.get("limits"), f"{where}: spec.limits")
    if limits:
        pool["limits"] = limits
    if spec.get("weight") is not None:
        pool["weight"] = spec["weight"]
    disruption = _mapping(spec.get("disruption"), f"{where}: spec.disruption")
    consolidation: dict[str, Any] = {}
    if disruption.get("consolidationPolicy") is not None:
        consolidation["policy"] = disruption["consolidationPolicy"]
    if disruption.get("consolidateAfter") is not None:
        consolidation["after"] = str(disruption["consolidateAfter"])
    if consolidation:
        pool["consolidation"] = consolidation
    ref = _mapping(tspec.get("nodeClassRef"), f"{where}: spec.template.spec.nodeClassRef")
    nodeclass = nodeclasses.get(str(ref.get("name"))) if ref else None
    family = nodeclass_family(nodeclass)
    if family:
        pool["amiFamily"] = family
        if family == "Custom":
            pool["userData"] = str(_get(nodeclass, "spec", "userData") or "# custom")
    if nodeclass is not None and _get(nodeclass, "spec", "kubelet", "maxPods") is not None:
        notes.append(f"{where}: the EC2NodeClass's kubelet.maxPods is not modelled (ENI-limited pods used)")
    # The pool's own shorthand fields must add nothing: capacity types, zones and instance types come from
    # the requirements alone (no capacity-type requirement: both, as Karpenter offers both).
    pool["capacityTypes"] = ["spot", "on-demand"]
    pool["devicePlugin"] = "none"
    return pool, notes

"""Validate rendered documents against the upstream schemas packaged in ``kgpu/render/schemas/``.

- Karpenter NodePool (karpenter.sh/v1), EC2NodeClass (karpenter.k8s.aws/v1) and KubeRay RayCluster
  (ray.io/v1): the CRD's structural OpenAPI v3 schema, converted to JSON Schema (``x-kubernetes-int-or-
  string`` -> integer or string; objects with declared properties reject unknown fields, as
  ``kubectl apply --validate=strict`` does, unless ``x-kubernetes-preserve-unknown-fields``), plus the CEL
  rules (``x-kubernetes-validations``) re-implemented in Python below.
- eksctl ClusterConfig (eksctl.io/v1alpha5): eksctl's JSON schema (draft-07).
- Core Kubernetes objects: ``kubernetes_validate`` in strict mode, for the profile's Kubernetes version
  (the newest schema not newer than it; the newest shipped when the profile is newer still).
- Anything else (ImageCache, Prometheus Operator objects) has no packaged schema: reported as skipped.

CEL rules implemented (by the CRD's message), the ones that bear on what kgpu emits:

NodePool: label domains ``karpenter.sh`` / ``karpenter.k8s.aws`` restricted to their well-known labels and
``karpenter.sh/nodepool`` / ``kubernetes.io/hostname`` forbidden (template labels and requirement keys);
requirement operator ``In`` needs values; ``Gt``/``Lt``/``Gte``/``Lte`` need a single non-negative integer;
``minValues`` needs at least that many values; budget ``schedule`` with ``duration``; nodeClassRef
group/kind/name non-empty; static NodePools (``replicas``) take only ``limits.nodes`` and no weight.

EC2NodeClass: alias format ``family@version``, supported families, windows only ``@latest``; each AMI,
subnet and security-group selector term names something, ``id``/``name``/``alias`` exclusivity, alias alone;
no empty tag keys or values; block devices need ``snapshotID`` or ``volumeSize``, at most one root volume;
exactly one of ``role`` and ``instanceProfile``, neither empty; ``amiFamily`` agrees with the alias
family; restricted instance tags (``eks:eks-cluster-name``, ``kubernetes.io/cluster*``, ``karpenter.sh/
nodepool``, ``karpenter.sh/nodeclaim``, ``karpenter.k8s.aws/ec2nodeclass``).

RayCluster: ``managedBy`` one of the two allowed values.

Transition rules (those reading ``oldSelf``) only constrain updates and are skipped, as are the few rules
about fields kgpu never writes (capacity reservations, network interfaces, NAT timeouts); ``IGNORED_RULES``
names them and a test checks that every rule in the packaged CRDs is either implemented or listed there.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jsonschema
import yaml

from kgpu.model.names import is_dns1123_subdomain

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CRDS: dict[tuple[str, str], tuple[str, str]] = {
    ("karpenter.sh/v1", "NodePool"): ("karpenter.sh_nodepools.yaml", "v1"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): ("karpenter.k8s.aws_ec2nodeclasses.yaml", "v1"),
    ("karpenter.sh/v1alpha1", "NodeOverlay"): ("karpenter.sh_nodeoverlays.yaml", "v1alpha1"),
    ("ray.io/v1", "RayCluster"): ("ray.io_rayclusters.yaml", "v1"),
}
EKSCTL = ("eksctl.io/v1alpha5", "ClusterConfig")
EKSCTL_SCHEMA = "eksctl.io_v1alpha5_clusterconfig.schema.json"


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


# --- schema loading -------------------------------------------------------------------------------------


def _read(name: str) -> str:
    return (resources.files("kgpu.render") / "schemas" / name).read_text(encoding="utf-8")


@functools.cache
def crd_schema(file: str, version: str) -> dict[str, Any]:
    """The structural openAPIV3Schema of one served version of a packaged CRD."""
    crd = yaml.load(_read(file), Loader=_LOADER)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(f"{file} has no version {version}")


def to_json_schema(node: Any) -> Any:
    """Structural OpenAPI v3 -> JSON Schema, strict about unknown fields."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("description", "x-kubernetes-validations", "default"):
            continue
        if key == "properties":
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") or key in ("allOf", "anyOf", "oneOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        if "anyOf" not in out:
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        node.get("type") == "object"
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def _crd_validator(file: str, version: str) -> jsonschema.Draft7Validator:
    schema = to_json_schema(crd_schema(file, version))
    return jsonschema.Draft7Validator(schema)


@functools.cache
def _eksctl_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(_read(EKSCTL_SCHEMA)))


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out


def _schema_errors(validator: jsonschema.protocols.Validator, doc: Any) -> list[str]:
    errors = sorted(validator.iter_errors(doc), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [f"{_path(e.absolute_path) or '(root)'}: {e.message}" for e in errors]


# --- CEL rules, re-implemented --------------------------------------------------------------------------


def _domain(key: str) -> str:
    m = re.match(r"^[^/]+", key)
    return m.group(0) if m else ""


def _keys(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [str(k) for k in value]
    return [str(value)] if isinstance(value, str) else []


def _listed(rule: str) -> set[str]:
    """The string literals of the rule's ``x in [...]`` list: the allow-list comes from the CRD itself."""
    m = re.search(r"in \[([^\]]*)\]", rule)
    if not m:
        return set()
    return {a or b for a, b in re.findall(r"\"([^\"]+)\"|'([^']+)'", m.group(1))}


def _domain_restricted(domain: str) -> Callable[[Any, str], bool]:
    def check(value: Any, rule: str) -> bool:
        allowed = _listed(rule)
        return all(k in allowed or not _domain(k).endswith(domain) for k in _keys(value))

    return check


def _not_key(forbidden: str) -> Callable[[Any, str], bool]:
    return lambda value, rule: all(k != forbidden for k in _keys(value))


def _is_int(text: Any) -> bool:
    return isinstance(text, str) and re.fullmatch(r"[+-]?[0-9]+", text) is not None


def _req_in(value: Any, rule: str) -> bool:
    return all(r.get("operator") != "In" or len(r.get("values") or []) != 0 for r in value)


def _req_numeric(value: Any, rule: str) -> bool:
    for r in value:
        if r.get("operator") in ("Gt", "Lt", "Gte", "Lte"):
            vals = r.get("values") or []
            if len(vals) != 1 or not _is_int(vals[0]) or int(vals[0]) < 0:
                return False
    return True


def _req_min_values(value: Any, rule: str) -> bool:
    return all(
        not (r.get("operator") == "In" and "minValues" in r) or len(r.get("values") or []) >= r["minValues"]
        for r in value
    )


def _has(obj: Any, *names: str) -> bool:
    return isinstance(obj, Mapping) and any(n in obj for n in names)


def _alias_family(alias: str) -> str:
    return alias.split("@", 1)[0]


def _ami_family_matches(family: str, names: tuple[str, ...]) -> Callable[[Any, str], bool]:
    def check(value: Any, rule: str) -> bool:
        if "amiFamily" not in value:
            return True
        aliases = [str(t["alias"]) for t in value.get("amiSelectorTerms") or [] if _has(t, "alias")]
        if any(_alias_family(a) == family for a in aliases):
            return value["amiFamily"] in names
        return True

    return check


def _restricted_tag(pred: Callable[[str], bool]) -> Callable[[Any, str], bool]:
    return lambda value, rule: all(not pred(k) for k in value)


CEL_RULES: dict[str, Callable[[Any, str], bool]] = {
    # NodePool
    'label domain "karpenter.sh" is restricted': _domain_restricted("karpenter.sh"),
    'label domain "karpenter.k8s.aws" is restricted': _domain_restricted("karpenter.k8s.aws"),
    'label "karpenter.sh/nodepool" is restricted': _not_key("karpenter.sh/nodepool"),
    'label "kubernetes.io/hostname" is restricted': _not_key("kubernetes.io/hostname"),
    "requirements with operator 'In' must have a value defined": _req_in,
    # NodeOverlay
    "requirements with operator 'NotIn' must have a value defined": lambda v, r: all(
        x.get("operator") != "NotIn" or x.get("values") for x in v
    ),
    "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value": _req_numeric,
    "invalid resource restricted": lambda v, r: all(
        k not in ("cpu", "memory", "ephemeral-storage", "pods") for k in v
    ),
    "cannot set both 'price' and 'priceAdjustment'": lambda v, r: (
        not _has(v, "price") or not _has(v, "priceAdjustment")
    ),
    "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value": _req_numeric,
    "requirements with 'minValues' must have at least that many values specified in the 'values' field": _req_min_values,
    "'schedule' must be set with 'duration'": lambda v, r: all(
        ("schedule" in x) == ("duration" in x) for x in v
    ),
    "group may not be empty": lambda v, r: v != "",
    "kind may not be empty": lambda v, r: v != "",
    "name may not be empty": lambda v, r: v != "",
    "only 'limits.nodes' is supported on static NodePools": lambda v, r: (
        "replicas" not in v or not v.get("limits") or set(v["limits"]) == {"nodes"}
    ),
    "'weight' is not supported on static NodePools": lambda v, r: "replicas" not in v or "weight" not in v,
    # EC2NodeClass
    "'alias' is improperly formatted, must match the format 'family@version'": lambda v, r: (
        re.match(r"^[a-zA-Z0-9]+@.+$", v) is not None
    ),
    "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', "
    "'windows2022', 'windows2025'": lambda v, r: (
        _alias_family(v) in ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")
    ),
    "windows families may only specify version 'latest'": lambda v, r: (
        not _alias_family(v).startswith("windows") or v.split("@", 1)[1] == "latest"
    ),
    "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']": lambda v, r: all(
        _has(x, "tags", "id", "name", "alias", "ssmParameter") for x in v
    ),
    "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms": lambda v, r: (
        not any("id" in x and _has(x, "alias", "tags", "name", "owner") for x in v)
    ),
    "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms": lambda v, r: (
        not any("alias" in x and _has(x, "id", "tags", "name", "owner") for x in v)
    ),
    "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms": lambda v, r: (
        not (any("alias" in x for x in v) and len(v) != 1)
    ),
    "empty tag keys or values aren't supported": lambda v, r: all(k != "" and v[k] != "" for k in v),
    "empty tag keys aren't supported": lambda v, r: all(k != "" for k in v),
    "snapshotID or volumeSize must be defined": lambda v, r: _has(v, "snapshotID", "volumeSize"),
    "must have only one blockDeviceMappings with rootVolume": lambda v, r: (
        sum(1 for x in v if x.get("rootVolume") is True) <= 1
    ),
    "securityGroupSelectorTerms cannot be empty": lambda v, r: len(v) != 0,
    "expected at least one, got none, ['tags', 'id', 'name']": lambda v, r: all(
        _has(x, "tags", "id", "name") for x in v
    ),
    "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term": (
        lambda v, r: not all("id" in x and _has(x, "tags", "name") for x in v)
    ),
    "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term": (
        lambda v, r: not all("name" in x and _has(x, "tags", "id") for x in v)
    ),
    "subnetSelectorTerms cannot be empty": lambda v, r: len(v) != 0,
    "expected at least one, got none, ['tags', 'id']": lambda v, r: all(_has(x, "tags", "id") for x in v),
    "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term": (
        lambda v, r: not all("id" in x and "tags" in x for x in v)
    ),
    "role cannot be empty": lambda v, r: v != "",
    "instanceProfile cannot be empty": lambda v, r: v != "",
    "must specify exactly one of ['role', 'instanceProfile']": lambda v, r: (
        ("role" in v) != ("instanceProfile" in v)
    ),
    "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias": _ami_family_matches(
        "al2", ("AL2", "Custom")
    ),
    "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias": _ami_family_matches(
        "al2023", ("AL2023", "Custom")
    ),
    "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias": _ami_family_matches(
        "bottlerocket", ("Bottlerocket", "Custom")
    ),
    "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias": _ami_family_matches(
        "windows2019", ("Windows2019", "Custom")
    ),
    "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias": _ami_family_matches(
        "windows2022", ("Windows2022", "Custom")
    ),
    "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias": _ami_family_matches(
        "windows2025", ("Windows2025", "Custom")
    ),
    "must specify amiFamily if amiSelectorTerms does not contain an alias": lambda v, r: (
        any(_has(t, "alias") for t in v.get("amiSelectorTerms") or []) or "amiFamily" in v
    ),
    "tag contains a restricted tag matching eks:eks-cluster-name": _restricted_tag(
        lambda k: k == "eks:eks-cluster-name"
    ),
    "tag contains a restricted tag matching kubernetes.io/cluster/": _restricted_tag(
        lambda k: k.startswith("kubernetes.io/cluster")
    ),
    "tag contains a restricted tag matching karpenter.sh/nodepool": _restricted_tag(
        lambda k: k == "karpenter.sh/nodepool"
    ),
    "tag contains a restricted tag matching karpenter.sh/nodeclaim": _restricted_tag(
        lambda k: k == "karpenter.sh/nodeclaim"
    ),
    "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass": _restricted_tag(
        lambda k: k == "karpenter.k8s.aws/ec2nodeclass"
    ),
    # RayCluster
    "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'": lambda v, r: (
        v in ("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue")
    ),
}

# Rules not implemented, and why (fields kgpu never writes).
IGNORED_RULES: dict[str, str] = {
    "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']": "capacityReservationSelectorTerms",
    "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term": (
        "capacityReservationSelectorTerms"
    ),
    "snapshotID must be set when volumeInitializationRate is set": "volumeInitializationRate",
    "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set": "NAT timeouts",
    "networkInterfaces must include a primary interface with interfaceType='interface'": "networkInterfaces",
    "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa "
    "device per network card": "networkInterfaces",
    "expected at least one, got none, ['name', 'id']": "placementGroupSelector",
    "'name' and 'id' are mutually exclusive": "placementGroupSelector",
}


def _cel_errors(schema: Any, value: Any, path: list[Any], out: list[str]) -> None:
    if not isinstance(schema, dict):
        return
    for v in schema.get("x-kubernetes-validations") or []:
        rule, message = v.get("rule", ""), " ".join(str(v.get("message", "")).split())
        if "oldSelf" in rule:
            continue
        check = CEL_RULES.get(message)
        if check is None:
            continue
        try:
            ok = check(value, rule)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError):
            ok = False
        if not ok:
            out.append(f"{_path(path) or '(root)'}: {message}")
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, item in value.items():
            if k in props:
                _cel_errors(props[k], item, [*path, k], out)
            elif isinstance(extra, dict):
                _cel_errors(extra, item, [*path, k], out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _cel_errors(schema["items"], item, [*path, i], out)


def crd_rules(file: str, version: str) -> list[tuple[str, str]]:
    """Every (message, rule) in a packaged CRD version (for the completeness test)."""
    found: list[tuple[str, str]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.get("x-kubernetes-validations") or []:
                found.append((" ".join(str(v.get("message", "")).split()), v.get("rule", "")))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(crd_schema(file, version))
    return found


# --- entry points ---------------------------------------------------------------------------------------


def kubernetes_schema_version(profile_version: str) -> str:
    """The kubernetes-validate schema version for a profile's ``1.N``: that one, or the nearest shipped."""
    from kubernetes_validate import utils

    wanted = tuple(int(x) for x in profile_version.split(".")[:2])
    shipped = sorted({tuple(int(x) for x in v.split(".")[:2]) for v in utils.all_versions()})
    older = [v for v in shipped if v <= wanted]
    pick = older[-1] if older else shipped[0]
    return f"{pick[0]}.{pick[1]}.0"


def _meta_errors(doc: Mapping[str, Any]) -> list[str]:
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        return ["metadata.name: required"]
    name = str(meta["name"])
    if not is_dns1123_subdomain(name):
        return [f"metadata.name: {name!r} is not a valid DNS subdomain"]
    return []


def validate_document(
    doc: Mapping[str, Any], *, kubernetes_version: str = "1.33"
) -> tuple[list[str], str | None]:
    """(errors, skipped reason): errors name the field path; skipped is set when no schema applies."""
    api, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
    if (api, kind) in CRDS:
        file, version = CRDS[(api, kind)]
        errors = _meta_errors(doc) + _schema_errors(_crd_validator(file, version), doc)
        cel: list[str] = []
        _cel_errors(crd_schema(file, version), doc, [], cel)
        return errors + cel, None
    if (api, kind) == EKSCTL:
        return _schema_errors(_eksctl_validator(), doc), None
    if "." not in api.split("/")[0] or api.split("/")[0].endswith(".k8s.io") or "/" not in api:
        from kubernetes_validate import utils

        try:
            utils.validate(dict(doc), kubernetes_schema_version(kubernetes_version), strict=True)
        except utils.SchemaNotFoundError:
            return [], f"no schema for {api} {kind}"
        except utils.ValidationError as exc:
            return [f"{_path(exc.absolute_path) or '(root)'}: {exc.message}"], None
        return [], None
    return [], f"no packaged schema for {api} {kind}"


# Helm values targets checked against the chart's own values.yaml (packaged; see schemas/SOURCES.md).
CHART_VALUES: dict[str, str] = {
    "device-plugin-chart": "nvidia-device-plugin.helm-values.yaml",
    "dra-driver-chart": "nvidia-dra-driver-gpu.helm-values.yaml",
}


@functools.cache
def chart_defaults(file: str) -> dict[str, Any]:
    data = yaml.load(_read(file), Loader=_LOADER)
    assert isinstance(data, dict)
    return data


def chart_values_errors(values: Mapping[str, Any], file: str) -> list[str]:
    """Keys the chart does not have (the chart has no values.schema.json: a misspelt key is silently
    ignored by Helm), and a map where the chart has a scalar or a list. A key whose default is null, a list
    or an empty map takes any value; a non-empty map is checked key by key."""
    out: list[str] = []

    def walk(given: Mapping[str, Any], default: Mapping[str, Any], path: str) -> None:
        for key, value in given.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in default:
                out.append(f"{where}: not a value of the chart ({file})")
                continue
            base = default[key]
            if isinstance(base, dict) and base:
                if not isinstance(value, Mapping):
                    out.append(f"{where}: the chart expects a map here")
                else:
                    walk(value, base, where)
            elif isinstance(value, Mapping) and base is not None and not isinstance(base, dict):
                out.append(f"{where}: the chart expects a {type(base).__name__} here, not a map")

    walk(values, chart_defaults(file), "")
    return out


def describe(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    ns = f"{meta.get('namespace')}/" if isinstance(meta, Mapping) and meta.get("namespace") else ""
    name = meta.get("name", "?") if isinstance(meta, Mapping) else "?"
    return f"{doc.get('kind', '?')} {ns}{name}"


def validate_stack(
    stack: Mapping[str, list[dict[str, Any]]],
    *,
    kubernetes_version: str = "1.33",
    skip_targets: Iterable[str] = (),
) -> Report:
    """Every document of every target; errors read ``<target>: <Kind ns/name>: <field>: <message>``."""
    report = Report()
    skip = set(skip_targets)
    for target, docs in stack.items():
        if target in CHART_VALUES:
            for doc in docs:
                report.errors += [f"{target}: {e}" for e in chart_values_errors(doc, CHART_VALUES[target])]
            continue
        if target in skip:
            continue
        for doc in docs:
            errors, skipped = validate_document(doc, kubernetes_version=kubernetes_version)
            where = f"{target}: {describe(doc)}"
            report.errors += [f"{where}: {e}" for e in errors]
            if skipped:
                report.skipped.append(f"{where}: {skipped}")
    return report

"""Validate rendered documents against the upstream schemas packaged in ``kgpu/render/schemas/``.

- Karpenter NodePool (karpenter.sh/v1), EC2NodeClass (karpenter.k8s.aws/v1), NodeOverlay
  (karpenter.sh/v1alpha1) and KubeRay RayCluster (ray.io/v1): the CRD's structural OpenAPI v3 schema,
  converted to JSON Schema (``x-kubernetes-int-or-string`` -> integer or string; objects with declared
  properties reject unknown fields, as ``kubectl apply --validate=strict`` does, unless
  ``x-kubernetes-preserve-unknown-fields``), then the CRD's own CEL rules (``x-kubernetes-validations``: all 74
  of the packaged CRDs', 69 on create, the 5 transition rules being for updates), evaluated as the API server
  evaluates them (:mod:`kgpu.render.crd_rules`) and reported in its words
  (``spec.template.spec.requirements: Invalid value: "array": requirements with operator 'In' must have a
  value defined``). As the API server does (``customresource/strategy.go``, ``hasBlockingErr``), the rules do
  not run on an object whose schema errors are blocking (a missing required field, a wrong type, a value not
  in an enum, a string, list or map over its maximum): one line says so instead. An object over 3 MiB is
  refused, as the API server refuses the request.
- Kueue (kueue.x-k8s.io/v1beta2: ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass,
  AdmissionCheck, ProvisioningRequestConfig): Kueue v0.15.0's CRDs (``KUEUE_CRDS``), checked the same way.
- eksctl ClusterConfig (eksctl.io/v1alpha5): eksctl's JSON schema (draft-07).
- Core Kubernetes objects: ``kubernetes_validate``'s schemas in strict mode, for the profile's Kubernetes
  version (the newest schema not newer than it; the newest shipped when the profile is newer still), with
  the validator its ``utils.validate`` builds, built once per kind (:func:`_core_validator`).
- Anything else (ImageCache, Prometheus Operator objects) has no packaged schema: reported as skipped.

Hand-written checks, for what the CRDs do not say:

- ``metadata.name`` of a CRD object: present and a DNS-1123 subdomain. The API server's object-meta validation
  (``ValidateObjectMetaAccessor``, generic to every resource) checks it, not the CRD's schema.
- Helm values (:func:`chart_values_errors`) against the chart's own ``values.yaml``: the charts ship no
  ``values.schema.json``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jsonschema
import msgspec
import yaml

from kgpu.errors import MAX_MESSAGE, one_line
from kgpu.model.names import is_dns1123_subdomain
from kgpu.render import crd_rules

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CRDS: dict[tuple[str, str], tuple[str, str]] = {
    ("karpenter.sh/v1", "NodePool"): ("karpenter.sh_nodepools.yaml", "v1"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): ("karpenter.k8s.aws_ec2nodeclasses.yaml", "v1"),
    ("karpenter.sh/v1alpha1", "NodeOverlay"): ("karpenter.sh_nodeoverlays.yaml", "v1alpha1"),
    ("ray.io/v1", "RayCluster"): ("ray.io_rayclusters.yaml", "v1"),
}
# Kueue v0.15.0's CRDs, for the objects kgpu renders (kgpu.render.kueue); see schemas/SOURCES.md.
KUEUE_CRDS: dict[tuple[str, str], tuple[str, str]] = {
    ("kueue.x-k8s.io/v1beta2", kind): (f"kueue.x-k8s.io_{plural}.yaml", "v1beta2")
    for kind, plural in (
        ("ResourceFlavor", "resourceflavors"),
        ("Cohort", "cohorts"),
        ("ClusterQueue", "clusterqueues"),
        ("LocalQueue", "localqueues"),
        ("WorkloadPriorityClass", "workloadpriorityclasses"),
        ("AdmissionCheck", "admissionchecks"),
        ("ProvisioningRequestConfig", "provisioningrequestconfigs"),
    )
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


_GO_FLAGS = re.compile(r"\(\?([imsU]+)\)")


def _python_pattern(pattern: str) -> str:
    """A CRD ``pattern`` (Go RE2) for Python's ``re``: a flag group after the start (Kueue's
    ``^(?i)[a-z]...``) applies to the rest of the pattern in RE2, and Python 3.11 refuses it there; it
    becomes a scoped group ``(?i:...)`` over that rest. Only top-level flag groups occur in the CRDs."""
    m = _GO_FLAGS.search(pattern)
    if m is None or m.start() == 0:
        return pattern
    return f"{pattern[: m.start()]}(?{m.group(1)}:{pattern[m.end() :]})"


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
        elif key == "pattern" and isinstance(value, str):
            out[key] = _python_pattern(value)
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


def _sorted_errors(validator: jsonschema.protocols.Validator, doc: Any) -> list[jsonschema.ValidationError]:
    return sorted(validator.iter_errors(doc), key=lambda e: (list(map(str, e.absolute_path)), e.message))


def _lines(errors: list[jsonschema.ValidationError]) -> list[str]:
    return [f"{_path(e.absolute_path) or '(root)'}: {e.message}" for e in errors]


def _schema_errors(validator: jsonschema.protocols.Validator, doc: Any) -> list[str]:
    return _lines(_sorted_errors(validator, doc))


# --- the CRDs' CEL rules -------------------------------------------------------------------------------

# jsonschema keywords whose errors the API server types as blocking (Required, TypeInvalid, NotSupported,
# TooLong, TooMany): the CEL rules are then not run. int-or-string's anyOf stands for its type.
_BLOCKING = frozenset({"required", "type", "enum", "maxLength", "maxItems", "maxProperties"})
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
NOT_CHECKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


@functools.cache
def crd_rule_tree(file: str, version: str) -> crd_rules.Node | None:
    """The packaged CRD version's rules, compiled once per process."""
    return crd_rules.build(crd_schema(file, version))


def crd_rule_list(file: str, version: str) -> list[crd_rules.Rule]:
    """Every rule of a packaged CRD version, compiled."""
    return list(crd_rules.rules(crd_rule_tree(file, version)))


def _blocking(error: jsonschema.ValidationError) -> bool:
    if error.validator in _BLOCKING:
        return True
    return bool(error.validator == "anyOf" and error.validator_value == _INT_OR_STRING)


# --- entry points ---------------------------------------------------------------------------------------


@functools.cache
def kubernetes_schema_version(profile_version: str) -> str:
    """The kubernetes-validate schema version for a profile's ``1.N``: that one, or the nearest shipped
    (cached: listing the shipped versions reads the package's folders, once per document otherwise)."""
    from kubernetes_validate import utils

    wanted = tuple(int(x) for x in profile_version.split(".")[:2])
    shipped = sorted({tuple(int(x) for x in v.split(".")[:2]) for v in utils.all_versions()})
    older = [v for v in shipped if v <= wanted]
    pick = older[-1] if older else shipped[0]
    return f"{pick[0]}.{pick[1]}.0"


def _meta_errors(doc: Mapping[str, Any]) -> list[str]:
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        return [_NAME_REQUIRED]
    name = str(meta["name"])
    if not is_dns1123_subdomain(name):
        return [f"metadata.name: {name!r} is not a valid DNS subdomain"]
    return []


_NAME_REQUIRED = "metadata.name: required"


def _crd_errors(doc: Mapping[str, Any], file: str, version: str) -> tuple[list[str], str | None]:
    """Schema, then the CRD's rules unless a schema error blocks them; notes for rules not evaluated."""
    try:
        size = len(msgspec.json.encode(doc))
    except (TypeError, ValueError, OverflowError, RecursionError):
        size = 0  # not JSON: the schema says how
    if size > crd_rules.MAX_REQUEST_BYTES:
        return [f"(root): Request entity too large: limit is {crd_rules.MAX_REQUEST_BYTES}"], None
    meta = _meta_errors(doc)
    schema_errors = _sorted_errors(_crd_validator(file, version), doc)
    errors = meta + _lines(schema_errors)
    if _NAME_REQUIRED in meta or any(_blocking(e) for e in schema_errors):
        return [*errors, NOT_CHECKED], None
    out = crd_rules.evaluate(crd_rule_tree(file, version), crd_schema(file, version), dict(doc))
    errors += [one_line(e, MAX_MESSAGE) for e in out.errors]
    notes = [one_line(n, MAX_MESSAGE) for n in out.notes]
    return errors, "; ".join(notes) or None


def validate_document(
    doc: Mapping[str, Any], *, kubernetes_version: str = "1.33"
) -> tuple[list[str], str | None]:
    """(errors, skipped reason): errors name the field path; skipped is set when no schema applies, or says
    which CRD rules were not evaluated."""
    api, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
    crd = CRDS.get((api, kind)) or KUEUE_CRDS.get((api, kind))
    if crd is not None:
        return _crd_errors(doc, *crd)
    if (api, kind) == EKSCTL:
        return _schema_errors(_eksctl_validator(), doc), None
    if "." not in api.split("/")[0] or api.split("/")[0].endswith(".k8s.io") or "/" not in api:
        validator = _core_validator(kubernetes_schema_version(kubernetes_version), kind, api)
        if validator is None:
            return [], f"no schema for {api} {kind}"
        first = next(iter(validator.iter_errors(dict(doc))), None)
        if first is not None:
            return [f"{_path(first.absolute_path) or '(root)'}: {first.message}"], None
        return [], None
    return [], f"no packaged schema for {api} {kind}"


@functools.cache
def _core_schema_dir(desired: str) -> tuple[str, str]:
    """(schema folder, version) ``kubernetes_validate.utils.validate`` picks for ``desired``, strict."""
    from kubernetes_validate import utils

    if utils.major_minor(desired) > utils.latest_version():
        raise utils.VersionNotSupportedError(version=utils.major_minor(desired))
    version = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(desired)][-1]
    return f"v{version}-local-strict", desired


@functools.cache
def _core_definitions(folder: str, desired: str) -> Any:
    from kubernetes_validate import utils

    return utils.schema_contents(f"kubernetes-json-schema/{folder}/_definitions.json", desired)


@functools.cache
def _core_validator(desired: str, kind: str, api: str) -> jsonschema.protocols.Validator | None:
    """The validator ``kubernetes_validate.utils.validate(doc, desired, strict=True)`` builds for a kind (same
    schema files, same registry, its first error), built once: that function reads and parses the kind's
    schema and the shared definitions (2 MB) again for every document, about 20 ms each. None: no schema."""
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    folder, _ = _core_schema_dir(desired)
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api)
    try:
        schema = utils.schema_contents(
            f"kubernetes-json-schema/{folder}/{kind.lower()}-{group_version}.json", desired
        )
    except FileNotFoundError:
        return None
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_core_definitions(folder, desired)) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


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

"""Dynamic Resource Allocation objects (resource.k8s.io/v1, Kubernetes 1.34), read and validated.

DeviceClass, ResourceClaim, ResourceClaimTemplate and ResourceSlice are read from the dicts the loader keeps
(``Objects.dra``) into frozen dataclasses, with the checks the API server makes on create
(k8s.io/kubernetes pkg/apis/resource/validation/validation.go at v1.34, limits from k8s.io/api/resource/v1
types.go): a failing object is bad input, one line naming the file, object and field (exit 2), because the
cluster would never have held it. CEL selectors are compiled by ``kgpu.sim.scheduler.plugins.cel`` (a syntax error is bad input
too); this module only keeps each expression with where it was written. The objects, as dataclasses, and
the API's limits are :mod:`kgpu.model.dra_types`'s (those the scheduler's DRA plugin names are importable
from here too).

Shipped feature gates of 1.34 decide what a field means: DRAPrioritizedList and DRAAdminAccess are beta (on);
DRAConsumableCapacity (``distinctAttribute``), DRADeviceTaints, DRAPartitionableDevices are alpha (off): the
API server drops those fields, and kgpu says so in a warning instead of modelling them.
"""

from __future__ import annotations

import re
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.dra_types import ALL as ALL
from kgpu.model.dra_types import ALLOCATION_RESULTS_MAX as ALLOCATION_RESULTS_MAX
from kgpu.model.dra_types import (
    API_VERSION,
    ATTRIBUTE_VALUE_MAX,
    ATTRIBUTES_AND_CAPACITIES_MAX,
    CEL_MAX_LENGTH,
    DEVICE_CONFIG_MAX,
    DEVICE_CONSTRAINTS_MAX,
    DEVICE_REQUESTS_MAX,
    DEVICE_SELECTORS_MAX,
    DRIVER_NAME_MAX,
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX,
    POOL_NAME_MAX,
    RESERVED_FOR_MAX,
    SLICE_DEVICES_MAX,
    TOLERATIONS_MAX,
    ClaimTemplate,
    Constraint,
    Request,
    Toleration,
)
from kgpu.model.dra_types import AllocatedDevice as AllocatedDevice
from kgpu.model.dra_types import Allocation as Allocation
from kgpu.model.dra_types import Claim as Claim
from kgpu.model.dra_types import ClaimSpec as ClaimSpec
from kgpu.model.dra_types import Device as Device
from kgpu.model.dra_types import DeviceClass as DeviceClass
from kgpu.model.dra_types import DRAObjects as DRAObjects
from kgpu.model.dra_types import Exact as Exact
from kgpu.model.dra_types import ResourceSlice as ResourceSlice
from kgpu.model.dra_types import Selector as Selector
from kgpu.model.fields import list_at as _list
from kgpu.model.fields import mapping_at as _map
from kgpu.model.names import (
    DNS1123_LABEL,
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_SUBDOMAIN,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    is_c_identifier,
    is_dns1123_subdomain,
    is_qualified_name,
)
from kgpu.model.objects import NodeSelector, Requirement, Term
from kgpu.model.quantity import MAX_INT64, parse_quantity

_MIN_INT64 = -(2**63)

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


# --- reading -------------------------------------------------------------------------------------------


def read(docs: list[tuple[dict[str, Any], str]]) -> DRAObjects:
    """The DRA objects of ``docs`` ((object, "file: label") pairs, in input order), validated."""
    out = DRAObjects()
    for doc, source in docs:
        kind = doc.get("kind")
        meta = _map(doc.get("metadata"), f"{source}: {kind}: metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("object without metadata.name", where=f"{source}: {kind}: metadata.name")
        namespaced = kind in ("ResourceClaim", "ResourceClaimTemplate")
        ns = meta.get("namespace") or "default"
        where = f"{source}: {kind} {ns}/{name}" if namespaced else f"{source}: {kind} {name}"
        _name(name, f"{where}: metadata.name", subdomain=True)
        if doc.get("apiVersion") != API_VERSION:
            out.warnings.append(f"{where}: apiVersion {quote(doc.get('apiVersion'))} ignored; kgpu reads {API_VERSION}")
            continue
        spec = _map(doc.get("spec"), f"{where}: spec")
        if kind == "DeviceClass":
            out.classes[name] = _device_class(name, spec, where, out.warnings)
        elif kind == "ResourceClaim":
            claim = Claim(ns, name, _claim_spec(_map(spec.get("devices"), f"{where}: spec.devices"),
                                                 f"{where}: spec.devices", out.warnings), where)
            _claim_status(claim, _map(doc.get("status"), f"{where}: status"), f"{where}: status")
            claim.deleting = bool(meta.get("deletionTimestamp"))
            claim.uid = str(meta.get("uid") or "")
            for ref in _list(meta.get("ownerReferences"), f"{where}: metadata.ownerReferences"):
                if isinstance(ref, dict) and ref.get("controller"):
                    claim.owner = (str(ref.get("kind") or ""), str(ref.get("name") or ""))
            out.claims[claim.key] = claim
        elif kind == "ResourceClaimTemplate":
            inner = _map(spec.get("spec"), f"{where}: spec.spec")
            cs = _claim_spec(_map(inner.get("devices"), f"{where}: spec.spec.devices"), f"{where}: spec.spec.devices", out.warnings)
            out.templates[f"{ns}/{name}"] = ClaimTemplate(ns, name, cs, where)
        else:
            out.slices.append(_slice(name, spec, where, out.warnings))
    return out


def _str(value: Any, where: str, *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise InputError("Required value", where=where)
        return ""
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {quote(value)}", where=where)
    return value


def _int(value: Any, where: str) -> int:
    """An int64 field (an attribute's int, a count, a generation): the API server's JSON decoder refuses a
    number that does not fit."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {quote(value)}", where=where)
    if not _MIN_INT64 <= value <= MAX_INT64:
        raise InputError(f"{quote(value)} does not fit in a 64-bit integer (int64)", where=where)
    return value


def _name(value: str, where: str, *, subdomain: bool, limit: int = 0) -> str:
    most = limit or (DNS1123_SUBDOMAIN_MAX_LENGTH if subdomain else DNS1123_LABEL_MAX_LENGTH)
    pattern = DNS1123_SUBDOMAIN if subdomain else DNS1123_LABEL
    if len(value) > most:
        raise InputError(f"Invalid value: {quote(value)}: must be no more than {most} characters", where=where)
    if not pattern.fullmatch(value):
        what = "a lowercase RFC 1123 subdomain" if subdomain else "a lowercase RFC 1123 label"
        raise InputError(f"Invalid value: {quote(value)}: must be {what}", where=where)
    return value


def _too_many(items: list[Any], most: int, where: str) -> None:
    if len(items) > most:
        raise InputError(f"Too many: {len(items)}: must have at most {most} items", where=where)


def _selectors(value: Any, where: str) -> tuple[Selector, ...]:
    items = _list(value, where)
    _too_many(items, DEVICE_SELECTORS_MAX, where)
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        cel = _map(_map(item, w).get("cel"), f"{w}.cel")
        if not cel:
            raise InputError("Required value: exactly one of `cel` is required", where=w)
        expr = _str(cel.get("expression"), f"{w}.cel.expression", required=True)
        if len(expr) > CEL_MAX_LENGTH:
            raise InputError(f"Too long: may not be more than {CEL_MAX_LENGTH} bytes", where=f"{w}.cel.expression")
        out.append(Selector(expr, f"{w}.cel.expression"))
    return tuple(out)


def _device_class(name: str, spec: dict[str, Any], where: str, warnings: list[str]) -> DeviceClass:
    selectors = _selectors(spec.get("selectors"), f"{where}: spec.selectors")
    config = _list(spec.get("config"), f"{where}: spec.config")
    _too_many(config, DEVICE_CONFIG_MAX, f"{where}: spec.config")
    ext = _str(spec.get("extendedResourceName"), f"{where}: spec.extendedResourceName")
    if ext:
        # validateExtendedResourceName: a qualified name outside the kubernetes.io domain, not requests.*
        prefix = ext.rpartition("/")[0]
        if not prefix or prefix.endswith("kubernetes.io") or not is_qualified_name(ext):
            raise InputError(f"Invalid value: {quote(ext)}: must be an extended resource name (a domain-prefixed "
                             "name outside kubernetes.io)", where=f"{where}: spec.extendedResourceName")
        warnings.append(f"{where}: spec.extendedResourceName needs the DRAExtendedResource feature gate (alpha, "
                        "off in Kubernetes 1.34): pods asking for it as an extended resource are not given devices")
    return DeviceClass(name, selectors, ext, where)


def _tolerations(value: Any, where: str) -> tuple[Toleration, ...]:
    items = _list(value, where)
    _too_many(items, TOLERATIONS_MAX, where)
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        t = _map(item, w)
        op = _str(t.get("operator"), f"{w}.operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise InputError(f"Unsupported value: {quote(op)}: supported values: \"Equal\", \"Exists\"", where=f"{w}.operator")
        effect = _str(t.get("effect"), f"{w}.effect")
        if effect not in ("", "NoSchedule", "NoExecute"):
            raise InputError(f"Unsupported value: {quote(effect)}: supported values: \"NoExecute\", \"NoSchedule\"", where=f"{w}.effect")
        out.append(Toleration(_str(t.get("key"), f"{w}.key"), op, _str(t.get("value"), f"{w}.value"), effect))
    return tuple(out)


def _exact(name: str, spec: dict[str, Any], where: str, warnings: list[str]) -> Exact:
    cls = _str(spec.get("deviceClassName"), f"{where}.deviceClassName", required=True)
    _name(cls, f"{where}.deviceClassName", subdomain=True)
    mode = _str(spec.get("allocationMode"), f"{where}.allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise InputError(f"Unsupported value: {quote(mode)}: supported values: \"All\", \"ExactCount\"", where=f"{where}.allocationMode")
    raw_count = spec.get("count")
    if mode == ALL:
        if raw_count is not None and raw_count != 0:
            raise InputError(f"Invalid value: {quote(raw_count)}: must not be specified when allocationMode is 'All'", where=f"{where}.count")
        count = 0
    else:
        count = 1 if raw_count is None else _int(raw_count, f"{where}.count")
        if count <= 0:
            raise InputError(f"Invalid value: {count}: must be greater than zero", where=f"{where}.count")
    admin = spec.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise InputError(f"must be a boolean, got {quote(admin)}", where=f"{where}.adminAccess")
    tolerations = _tolerations(spec.get("tolerations"), f"{where}.tolerations")
    if tolerations:
        warnings.append(f"{where}.tolerations: device taints need the DRADeviceTaints feature gate (alpha, off in "
                        "Kubernetes 1.34): the API server drops the tolerations")
    if spec.get("capacity") is not None:
        warnings.append(f"{where}.capacity: consumable capacity needs the DRAConsumableCapacity feature gate (alpha, "
                        "off in Kubernetes 1.34): the API server drops it")
    return Exact(name, cls, _selectors(spec.get("selectors"), f"{where}.selectors"), mode, count, bool(admin), ())


def _claim_spec(devices: dict[str, Any], where: str, warnings: list[str]) -> ClaimSpec:
    items = _list(devices.get("requests"), f"{where}.requests")
    _too_many(items, DEVICE_REQUESTS_MAX, f"{where}.requests")
    requests: list[Request] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        w = f"{where}.requests[{i}]"
        r = _map(item, w)
        name = _name(_str(r.get("name"), f"{w}.name", required=True), f"{w}.name", subdomain=False)
        if name in seen:
            raise InputError(f"Duplicate value: {quote(name)}", where=f"{w}.name")
        seen.add(name)
        exactly, first = r.get("exactly"), r.get("firstAvailable")
        if (exactly is None) == (first is None or first == []):
            raise InputError("exactly one of `exactly` or `firstAvailable` is required", where=w)
        if exactly is not None:
            requests.append(Request(name, (_exact(name, _map(exactly, f"{w}.exactly"), f"{w}.exactly", warnings),), False))
            continue
        subs = _list(first, f"{w}.firstAvailable")
        _too_many(subs, FIRST_AVAILABLE_MAX, f"{w}.firstAvailable")
        alts: list[Exact] = []
        sub_seen: set[str] = set()
        for j, sub in enumerate(subs):
            sw = f"{w}.firstAvailable[{j}]"
            s = _map(sub, sw)
            sname = _name(_str(s.get("name"), f"{sw}.name", required=True), f"{sw}.name", subdomain=False)
            if sname in sub_seen:
                raise InputError(f"Duplicate value: {quote(sname)}", where=f"{sw}.name")
            sub_seen.add(sname)
            if s.get("adminAccess"):
                raise InputError("Forbidden: adminAccess is not supported in sub-requests", where=f"{sw}.adminAccess")
            alts.append(_exact(f"{name}/{sname}", s, sw, warnings))
        requests.append(Request(name, tuple(alts), True))
    constraints = []
    citems = _list(devices.get("constraints"), f"{where}.constraints")
    _too_many(citems, DEVICE_CONSTRAINTS_MAX, f"{where}.constraints")
    known = {r.name for r in requests} | {a.name for r in requests for a in r.alternatives if r.first_available}
    for i, item in enumerate(citems):
        w = f"{where}.constraints[{i}]"
        c = _map(item, w)
        names = tuple(_str(n, f"{w}.requests[{k}]", required=True) for k, n in enumerate(_list(c.get("requests"), f"{w}.requests")))
        for k, n in enumerate(names):
            if n not in known:
                raise InputError(f"Invalid value: {quote(n)}: must be the name of a request in the claim or the name of "
                                 "a request and a subrequest separated by '/'", where=f"{w}.requests[{k}]")
        if c.get("distinctAttribute") is not None:
            warnings.append(f"{w}.distinctAttribute needs the DRAConsumableCapacity feature gate (alpha, off in "
                            "Kubernetes 1.34): the API server drops it")
            if c.get("matchAttribute") is None:
                continue
        attr = _str(c.get("matchAttribute"), f"{w}.matchAttribute", required=True)
        _qualified_attribute(attr, f"{w}.matchAttribute", need_domain=True)
        constraints.append(Constraint(names, attr))
    config = _list(devices.get("config"), f"{where}.config")
    _too_many(config, DEVICE_CONFIG_MAX, f"{where}.config")
    return ClaimSpec(tuple(requests), tuple(constraints))


_VALID_NAMES: set[tuple[str, bool]] = set()  # names found valid already: 40,000 devices repeat a dozen
_DEVICE_NAMES: set[str] = set()
_QUANTITIES: dict[object, int] = {}
_VERSIONS: set[str] = set()


def _qualified_attribute(name: str, where: str, *, need_domain: bool) -> None:
    """validateQualifiedName: <domain>/<C identifier of at most 32 characters>; the domain a DNS subdomain."""
    if (name, need_domain) in _VALID_NAMES:
        return
    _check_qualified(name, where, need_domain=need_domain)
    if len(_VALID_NAMES) < 10_000:
        _VALID_NAMES.add((name, need_domain))


def _check_qualified(name: str, where: str, *, need_domain: bool) -> None:
    domain, sep, ident = name.rpartition("/")
    if need_domain and not sep:
        raise InputError(f"Required value: a fully qualified name must be a domain and a name separated by a slash, got {quote(name)}", where=where)
    if sep and (len(domain) > DRIVER_NAME_MAX or not is_dns1123_subdomain(domain)):
        raise InputError(f"Invalid value: {quote(domain)}: must be a DNS subdomain of at most 63 characters", where=where)
    if len(ident) > 32 or not is_c_identifier(ident):
        raise InputError(f"Invalid value: {quote(ident)}: must be a C identifier of at most 32 characters", where=where)


def _claim_status(claim: Claim, status: dict[str, Any], where: str) -> None:
    alloc = status.get("allocation")
    if alloc is not None:
        a = _map(alloc, f"{where}.allocation")
        results = _list(_map(a.get("devices"), f"{where}.allocation.devices").get("results"), f"{where}.allocation.devices.results")
        _too_many(results, ALLOCATION_RESULTS_MAX, f"{where}.allocation.devices.results")
        devices = []
        for i, item in enumerate(results):
            w = f"{where}.allocation.devices.results[{i}]"
            r = _map(item, w)
            devices.append(AllocatedDevice(
                _str(r.get("request"), f"{w}.request", required=True), _str(r.get("driver"), f"{w}.driver", required=True),
                _str(r.get("pool"), f"{w}.pool", required=True), _str(r.get("device"), f"{w}.device", required=True),
                bool(r.get("adminAccess")),
            ))
        ns = a.get("nodeSelector")
        claim.allocation = Allocation(tuple(devices), node_selector(ns, f"{where}.allocation.nodeSelector") if ns is not None else None)
    reserved = _list(status.get("reservedFor"), f"{where}.reservedFor")
    _too_many(reserved, RESERVED_FOR_MAX, f"{where}.reservedFor")
    claim.reserved_for = tuple(str(_map(r, f"{where}.reservedFor").get("name") or "") for r in reserved)


def node_selector(value: Any, where: str) -> NodeSelector:
    """A core/v1 NodeSelector (a slice's or an allocation's)."""
    terms = []
    raw_terms = _list(_map(value, where).get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
    if not raw_terms:
        raise InputError("Required value: must have at least one node selector term", where=f"{where}.nodeSelectorTerms")
    for i, t in enumerate(raw_terms):
        tw = f"{where}.nodeSelectorTerms[{i}]"
        term = _map(t, tw)
        parts = []
        for key in ("matchExpressions", "matchFields"):
            reqs = []
            for j, r in enumerate(_list(term.get(key), f"{tw}.{key}")):
                rw = f"{tw}.{key}[{j}]"
                req = _map(r, rw)
                op = _str(req.get("operator"), f"{rw}.operator", required=True)
                if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                    raise InputError(f"Unsupported value: {quote(op)}", where=f"{rw}.operator")
                values = tuple(str(v) for v in _list(req.get("values"), f"{rw}.values"))
                reqs.append(Requirement(_str(req.get("key"), f"{rw}.key", required=True), op, values))
            parts.append(tuple(reqs))
        terms.append(Term(parts[0], parts[1]))
    return NodeSelector(tuple(terms))


_SLOW = object()


def _fast_attribute(value: Any) -> Any:
    """The common shapes of an attribute value, checked without the general path; _SLOW otherwise."""
    if type(value) is dict and len(value) == 1:
        (kind, x), = value.items()
        if kind == "string" and type(x) is str and len(x) <= ATTRIBUTE_VALUE_MAX:
            return x
        if kind == "version" and x in _VERSIONS:
            return ("semver", x)
        if (kind == "int" and type(x) is int and _MIN_INT64 <= x <= MAX_INT64) or (kind == "bool" and type(x) is bool):
            return x
    return _SLOW


def _attribute(name: str, value: Any, where: str) -> Any:
    fast = _fast_attribute(value)
    if fast is not _SLOW:
        return fast
    v = _map(value, where)
    kinds = [k for k in ("int", "bool", "string", "version") if v.get(k) is not None]
    if len(kinds) != 1:
        raise InputError("exactly one value must be specified (int, bool, string or version)", where=where)
    kind = kinds[0]
    x = v[kind]
    if kind == "int":
        return _int(x, f"{where}.int")
    if kind == "bool":
        if not isinstance(x, bool):
            raise InputError(f"must be a boolean, got {quote(x)}", where=f"{where}.bool")
        return x
    s = _str(x, f"{where}.{kind}")
    if len(s) > ATTRIBUTE_VALUE_MAX:
        raise InputError(f"Too long: may not be more than {ATTRIBUTE_VALUE_MAX} bytes", where=f"{where}.{kind}")
    if kind == "version":
        if s in _VERSIONS:
            return ("semver", s)
        if len(_VERSIONS) < 10_000:
            _VERSIONS.add(s) if _SEMVER.match(s) else None
        if not _SEMVER.match(s):
            raise InputError(f"Invalid value: {quote(s)}: must be a string compatible with semver.org spec 2.0.0", where=f"{where}.version")
        return ("semver", s)
    return s


def _slice(name: str, spec: dict[str, Any], where: str, warnings: list[str]) -> ResourceSlice:
    sw = f"{where}: spec"
    driver = _str(spec.get("driver"), f"{sw}.driver", required=True)
    _name(driver, f"{sw}.driver", subdomain=True, limit=DRIVER_NAME_MAX)
    pool = _map(spec.get("pool"), f"{sw}.pool")
    pool_name = _str(pool.get("name"), f"{sw}.pool.name", required=True)
    if len(pool_name) > POOL_NAME_MAX:
        raise InputError(f"Too long: may not be more than {POOL_NAME_MAX} bytes", where=f"{sw}.pool.name")
    for part in pool_name.split("/"):
        _name(part, f"{sw}.pool.name", subdomain=True)
    generation = _int(pool.get("generation", 0), f"{sw}.pool.generation")
    if generation < 0:
        raise InputError(f"Invalid value: {generation}: must be greater than or equal to 0", where=f"{sw}.pool.generation")
    count = _int(pool.get("resourceSliceCount", 0), f"{sw}.pool.resourceSliceCount")
    if count <= 0:
        raise InputError(f"Invalid value: {count}: must be greater than zero", where=f"{sw}.pool.resourceSliceCount")
    node_name = _str(spec.get("nodeName"), f"{sw}.nodeName")
    selector = spec.get("nodeSelector")
    all_nodes = spec.get("allNodes") is True
    per_device = spec.get("perDeviceNodeSelection") is True
    chosen = [f for f, on in (("nodeName", bool(node_name)), ("nodeSelector", selector is not None),
                              ("allNodes", all_nodes), ("perDeviceNodeSelection", per_device)) if on]
    if len(chosen) != 1:
        raise InputError("exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
                         + (f", got {', '.join(chosen)}" if chosen else ""), where=sw)
    if per_device:
        warnings.append(f"{sw}.perDeviceNodeSelection needs the DRAPartitionableDevices feature gate (alpha, off in "
                        "Kubernetes 1.34): the slice's devices are not offered to any node")
    if node_name:
        _name(node_name, f"{sw}.nodeName", subdomain=True)
    items = _list(spec.get("devices"), f"{sw}.devices")
    _too_many(items, SLICE_DEVICES_MAX, f"{sw}.devices")
    prefix = f"{driver}/"
    # the slice's attribute and capacity names found valid, qualified with the driver's domain (a device
    # repeats its slice's names)
    qualified: dict[str, str] = {}
    devices = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        dw = f"{sw}.devices[{i}]"
        d = _map(item, dw)
        dname = d.get("name")
        if not isinstance(dname, str) or dname not in _DEVICE_NAMES:
            dname = _name(_str(dname, f"{dw}.name", required=True), f"{dw}.name", subdomain=False)
            if len(_DEVICE_NAMES) < 10_000:
                _DEVICE_NAMES.add(dname)
        if dname in seen:
            raise InputError(f"Duplicate value: {quote(dname)}", where=f"{dw}.name")
        seen.add(dname)
        attrs: dict[str, Any] = {}
        caps: dict[str, int] = {}
        raw_attrs = _map(d.get("attributes"), f"{dw}.attributes")
        raw_caps = _map(d.get("capacity"), f"{dw}.capacity")
        if len(raw_attrs) + len(raw_caps) > ATTRIBUTES_AND_CAPACITIES_MAX:
            raise InputError(f"Too many: {len(raw_attrs) + len(raw_caps)}: must have at most "
                             f"{ATTRIBUTES_AND_CAPACITIES_MAX} attributes and capacities combined", where=dw)
        for key, val in raw_attrs.items():
            full = qualified.get(key)  # where strings only for what may fail
            if full is not None:
                fast = _fast_attribute(val)
                if fast is not _SLOW:
                    attrs[full] = fast
                    continue
            aw = f"{dw}.attributes[{key}]"
            _qualified_attribute(key, aw, need_domain=False)
            full = qualified[key] = key if "/" in key else prefix + key
            attrs[full] = _attribute(key, val, aw)
        for key, val in raw_caps.items():
            full = qualified.get(key)
            raw = val.get("value") if type(val) is dict else None
            milli = _QUANTITIES.get(raw) if type(raw) is str else None
            if full is None or milli is None:
                cw = f"{dw}.capacity[{key}]"
                _qualified_attribute(key, cw, need_domain=False)
                full = qualified[key] = key if "/" in key else prefix + key
                raw = _map(val, cw).get("value")
                milli = int(parse_quantity(raw, where=f"{cw}.value") * 1000)
                if isinstance(raw, str) and len(_QUANTITIES) < 10_000:
                    _QUANTITIES[raw] = milli
            caps[full] = milli
        for extra in ("consumesCounters", "taints", "bindingConditions"):
            if d.get(extra):
                warnings.append(f"{dw}.{extra}: an alpha field in Kubernetes 1.34 (off by default): the API server drops it")
        devices.append(Device(dname, attrs, caps))
    sel = node_selector(selector, f"{sw}.nodeSelector") if selector is not None else None
    return ResourceSlice(name, driver, pool_name, generation, count, node_name, sel, all_nodes, tuple(devices), where)

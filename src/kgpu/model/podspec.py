"""A pod spec as written -> what the scheduler reasons about: requests (with the API server's defaulting),
tolerations, node selectors and affinity, topology spread, pod (anti-)affinity, DRA claims, priority
preemption policy; and a Node's capacity, labels and taints. Every field is validated where it is read, with
errors that name the object and field (``kgpu.model.load`` reads the documents and calls these)."""

from __future__ import annotations

import re

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    is_dns1123_label,
    is_label_value,
    is_qualified_name,
)
from kgpu.model.objects import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    ClaimTemplate,
    HostPort,
    LabelSelector,
    Node,
    NodeSelector,
    PodAffinityTerm,
    PodSpecInfo,
    PreferredTerm,
    Requirement,
    Resources,
    SpreadConstraint,
    Taint,
    Term,
    Toleration,
    WeightedPodAffinityTerm,
    resources,
)
from kgpu.model.quantity import parse_quantity, resource_amount

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("", "Equal", "Exists")
PREEMPT_LOWER = "PreemptLowerPriority"
PREEMPTION_POLICIES = (PREEMPT_LOWER, "Never")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _preemption_policy(value: str | None, where: str) -> str:
    if value is None or value == "":
        return ""
    if value not in PREEMPTION_POLICIES:
        supported = ", ".join(f'"{v}"' for v in PREEMPTION_POLICIES)
        raise InputError(f"Unsupported value: {quote(value)}: supported values: {supported}", where=where)
    return value


# Quantities as written ("100m", "64Mi") repeat across a cluster's pods: each string is parsed once.
_AMOUNTS: dict[tuple[str, bool], int] = {}


def _amount(name: str, raw: object, where: str, field: str = "") -> int:
    """``resource_amount`` of ``raw`` (cpu in millicores); ``where + field`` names it in an error."""
    milli = name == CPU
    if raw.__class__ is str:
        key = (raw, milli)
        hit = _AMOUNTS.get(key)
        if hit is not None:
            return hit
        amount = resource_amount(raw, milli=milli, where=where + field)
        if len(_AMOUNTS) < 65536:
            _AMOUNTS[key] = amount
        return amount
    return resource_amount(raw, milli=milli, where=where + field)


def _is_extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io, not 'requests.*'."""
    return "/" in name and not name.startswith("requests.") and "kubernetes.io/" not in name


def _container_requests(c: wire.Container, where: str) -> tuple[dict[str, int], dict[str, int]]:
    res = c.resources or wire.ResourceRequirements()
    requests = {k: _amount(k, v, where, f".resources.requests.{k}") for k, v in (res.requests or {}).items()}
    limits = {k: _amount(k, v, where, f".resources.limits.{k}") for k, v in (res.limits or {}).items()}
    for k, v in limits.items():
        if _is_extended(k):
            if k in requests and requests[k] != v:
                raise InputError(
                    f"must be equal to {k} limit of {v}",
                    where=f"{where}.resources.requests.{k}",
                    hint="extended resources cannot be overcommitted",
                )
            q = parse_quantity((res.limits or {})[k])
            if q.denominator != 1:
                raise InputError("must be a whole number", where=f"{where}.resources.limits.{k}")
        requests.setdefault(k, v)  # API-server defaulting: requests default to limits
    for k in requests:
        if _is_extended(k) and k not in limits:
            raise InputError(f"{k} must have a limit equal to its request", where=f"{where}.resources.limits")
    return requests, limits


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _validate_toleration(t: wire.Toleration, where: str) -> Toleration:
    op = t.operator or ""
    if op not in TOLERATION_OPERATORS:
        raise InputError(f"{quote(op)} is not one of Equal, Exists", where=f"{where}.operator")
    effect = t.effect or ""
    if effect and effect not in TAINT_EFFECTS:
        raise InputError(f"{quote(effect)} is not one of {', '.join(TAINT_EFFECTS)}", where=f"{where}.effect")
    if not t.key and op != "Exists":
        raise InputError("operator must be Exists when key is empty", where=f"{where}.operator")
    if op == "Exists" and t.value:
        raise InputError("value must be empty when operator is Exists", where=f"{where}.value")
    return Toleration(t.key or "", op or "Equal", t.value or "", effect)


_INT64 = re.compile(r"^[+-]?[0-9]{1,19}$")


def _requirements(
    reqs: list[wire.NodeSelectorRequirement] | None, where: str, *, fields: bool = False
) -> tuple[Requirement, ...]:
    """ValidateNodeSelectorRequirement / ValidateNodeFieldSelectorRequirement of the API server."""
    out = []
    for i, r in enumerate(reqs or ()):
        at = f"{where}[{i}]"
        values = tuple(r.values or ())
        if fields:
            if r.operator not in ("In", "NotIn"):
                raise InputError(
                    f"{quote(r.operator)}: not a valid selector operator", where=f"{at}.operator"
                )
            if len(values) != 1:
                raise InputError(
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                    where=f"{at}.values",
                )
            if r.key != "metadata.name":
                raise InputError(f"{quote(r.key)}: not a valid field selector key", where=f"{at}.key")
        else:
            if r.operator in ("In", "NotIn"):
                if not values:
                    raise InputError(
                        "must be specified when `operator` is 'In' or 'NotIn'", where=f"{at}.values"
                    )
            elif r.operator in ("Exists", "DoesNotExist"):
                if values:
                    raise InputError(
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                        where=f"{at}.values",
                    )
            elif r.operator in ("Gt", "Lt"):
                if len(values) != 1:
                    raise InputError(
                        "must be specified single value when `operator` is 'Lt' or 'Gt'", where=f"{at}.values"
                    )
                if not _INT64.match(values[0]) or not -(2**63) <= int(values[0]) < 2**63:
                    raise InputError(
                        f"{quote(values[0])}: must be an integer for 'Gt' or 'Lt'", where=f"{at}.values[0]"
                    )
            else:
                raise InputError(
                    f"{quote(r.operator)}: not a valid selector operator (one of {', '.join(NODE_SELECTOR_OPERATORS)})",
                    where=f"{at}.operator",
                )
            if not is_qualified_name(r.key):
                raise InputError(f"{quote(r.key)}: not a valid label key", where=f"{at}.key")
        out.append(Requirement(r.key, r.operator, values))
    return tuple(out)


LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
SPREAD_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")


def _label_value(value: str, where: str) -> None:
    if not is_label_value(value):
        raise InputError(
            f"{quote(value)}: a valid label must be an empty string or consist of at most 63 alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            where=where,
        )


def _label_selector(sel: wire.LabelSelector | None, where: str) -> LabelSelector | None:
    """ValidateLabelSelector of apimachinery; matchLabels become ``In`` requirements of one value."""
    if sel is None:
        return None
    reqs = []
    for key, value in sorted((sel.match_labels or {}).items()):
        if not is_qualified_name(key):
            raise InputError(f"{quote(key)}: not a valid label key", where=f"{where}.matchLabels")
        _label_value(value, f"{where}.matchLabels.{key}")
        reqs.append(Requirement(key, "In", (value,)))
    for i, r in enumerate(sel.match_expressions or ()):
        at = f"{where}.matchExpressions[{i}]"
        values = tuple(r.values or ())
        if r.operator in ("In", "NotIn"):
            if not values:
                raise InputError("must be specified when `operator` is 'In' or 'NotIn'", where=f"{at}.values")
        elif r.operator in ("Exists", "DoesNotExist"):
            if values:
                raise InputError(
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'", where=f"{at}.values"
                )
        else:
            raise InputError(
                f"{quote(r.operator)}: not a valid selector operator (one of {', '.join(LABEL_SELECTOR_OPERATORS)})",
                where=f"{at}.operator",
            )
        if not is_qualified_name(r.key):
            raise InputError(f"{quote(r.key)}: not a valid label key", where=f"{at}.key")
        for j, v in enumerate(values):
            _label_value(v, f"{at}.values[{j}]")
        reqs.append(Requirement(r.key, r.operator, values))
    return LabelSelector(tuple(reqs))


def _label_keys(keys: list[str] | None, where: str) -> tuple[str, ...]:
    for i, key in enumerate(keys or ()):
        if not is_qualified_name(key):
            raise InputError(f"{quote(key)}: not a valid label key", where=f"{where}[{i}]")
    return tuple(keys or ())


def _spread_constraints(
    items: list[wire.TopologySpreadConstraint] | None, where: str
) -> tuple[SpreadConstraint, ...]:
    """validateTopologySpreadConstraints of the API server."""
    out: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(items or ()):
        at = f"{where}.topologySpreadConstraints[{i}]"
        if c.max_skew <= 0:
            raise InputError(f"must be greater than zero, got {quote(c.max_skew)}", where=f"{at}.maxSkew")
        if not c.topology_key:
            raise InputError("can not be empty", where=f"{at}.topologyKey")
        if c.when_unsatisfiable not in SPREAD_ACTIONS:
            raise InputError(
                f"{quote(c.when_unsatisfiable)} is not one of {', '.join(SPREAD_ACTIONS)}",
                where=f"{at}.whenUnsatisfiable",
            )
        if (c.topology_key, c.when_unsatisfiable) in seen:
            raise InputError(
                f"duplicate {{{c.topology_key}, {c.when_unsatisfiable}}}: another constraint has the same topologyKey "
                "and whenUnsatisfiable",
                where=at,
            )
        seen.add((c.topology_key, c.when_unsatisfiable))
        if c.min_domains is not None:
            if c.min_domains <= 0:
                raise InputError(
                    f"must be greater than zero, got {quote(c.min_domains)}", where=f"{at}.minDomains"
                )
            if c.when_unsatisfiable != "DoNotSchedule":
                raise InputError(
                    f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {c.when_unsatisfiable}",
                    where=f"{at}.minDomains",
                )
        for name, policy in (
            ("nodeAffinityPolicy", c.node_affinity_policy),
            ("nodeTaintsPolicy", c.node_taints_policy),
        ):
            if policy is not None and policy not in INCLUSION_POLICIES:
                raise InputError(
                    f"{quote(policy)} is not one of {', '.join(INCLUSION_POLICIES)}", where=f"{at}.{name}"
                )
        selector = _label_selector(c.label_selector, f"{at}.labelSelector")
        keys = _label_keys(c.match_label_keys, f"{at}.matchLabelKeys")
        _check_label_keys(keys, (), selector, at)
        out.append(
            SpreadConstraint(
                c.max_skew,
                c.topology_key,
                c.when_unsatisfiable,
                selector,
                c.min_domains if c.min_domains is not None else 1,
                c.node_affinity_policy or "Honor",
                c.node_taints_policy or "Ignore",
                keys,
            )
        )
    return tuple(out)


def _check_label_keys(
    match: tuple[str, ...], mismatch: tuple[str, ...], selector: LabelSelector | None, at: str
) -> None:
    """ValidateMatchLabelKeysAndMismatchLabelKeys: a matchLabelKeys key may not be in the selector too, nor in
    mismatchLabelKeys."""
    in_selector = {r.key for r in selector.requirements} if selector is not None else set()
    for i, key in enumerate(match):
        if key in in_selector:
            raise InputError(
                f"{quote(key)} exists in both matchLabelKeys and labelSelector",
                where=f"{at}.matchLabelKeys[{i}]",
            )
        if key in mismatch:
            raise InputError(
                f"{quote(key)} exists in both matchLabelKeys and mismatchLabelKeys",
                where=f"{at}.matchLabelKeys[{i}]",
            )


def _affinity_term(t: wire.PodAffinityTerm, at: str) -> PodAffinityTerm:
    """validatePodAffinityTerm of the API server."""
    if not t.topology_key:
        raise InputError("can not be empty", where=f"{at}.topologyKey")
    if not is_qualified_name(t.topology_key):
        raise InputError(f"{quote(t.topology_key)}: not a valid label key", where=f"{at}.topologyKey")
    for i, ns in enumerate(t.namespaces or ()):
        if not is_dns1123_label(ns):
            raise InputError(f"{quote(ns)}: not a valid namespace name", where=f"{at}.namespaces[{i}]")
    selector = _label_selector(t.label_selector, f"{at}.labelSelector")
    match = _label_keys(t.match_label_keys, f"{at}.matchLabelKeys")
    mismatch = _label_keys(t.mismatch_label_keys, f"{at}.mismatchLabelKeys")
    _check_label_keys(match, mismatch, selector, at)
    return PodAffinityTerm(
        t.topology_key,
        selector,
        tuple(t.namespaces or ()),
        _label_selector(t.namespace_selector, f"{at}.namespaceSelector"),
        match,
        mismatch,
    )


def _pod_affinity(
    a: wire.PodAffinity | None, at: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    if a is None:
        return (), ()
    req_at = f"{at}.requiredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        _affinity_term(t, f"{req_at}[{i}]")
        for i, t in enumerate(a.required_during_scheduling_ignored_during_execution or ())
    )
    preferred = []
    pref_at = f"{at}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, w in enumerate(a.preferred_during_scheduling_ignored_during_execution or ()):
        if not 1 <= w.weight <= 100:
            raise InputError(
                f"must be in the range 1-100, got {quote(w.weight)}", where=f"{pref_at}[{i}].weight"
            )
        preferred.append(
            WeightedPodAffinityTerm(
                w.weight, _affinity_term(w.pod_affinity_term, f"{pref_at}[{i}].podAffinityTerm")
            )
        )
    return required, tuple(preferred)


_SOURCES = "`resourceClaimName`, `resourceClaimTemplateName`"


def _check_resource_claims(spec: wire.PodSpec, where: str) -> None:
    """The API server's checks of a pod's DRA claims (k8s.io/kubernetes pkg/apis/core/validation:
    validatePodResourceClaim and validateResourceClaimNames), in its words."""
    names: list[str] = []
    for i, c in enumerate(spec.resource_claims or ()):
        at = f"{where}.resourceClaims[{i}]"
        if not c.name:
            raise InputError("Required value", where=f"{at}.name")
        if c.name in names:
            raise InputError(f"Duplicate value: {quote(c.name)}", where=f"{at}.name")
        for err in dns1123_label_errors(c.name):
            raise InputError(f"Invalid value: {quote(c.name)}: {err}", where=f"{at}.name")
        names.append(c.name)
        sources = (c.resource_claim_name, c.resource_claim_template_name)
        if None not in sources:
            raise InputError(f"Invalid value: at most one of {_SOURCES.replace(', ', ' or ')} may be specified", where=at)
        if sources == (None, None):
            raise InputError(f"Invalid value: must specify one of: {_SOURCES}", where=at)
        for field, value in zip(("resourceClaimName", "resourceClaimTemplateName"), sources, strict=True):
            for err in dns1123_subdomain_errors(value) if value is not None else ():
                raise InputError(f"Invalid value: {quote(value)}: {err}", where=f"{at}.{field}")
    for kind, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for j, ctr in enumerate(containers or ()):
            seen: set[str] = set()
            for k, ref in enumerate((ctr.resources.claims if ctr.resources is not None else None) or ()):
                at = f"{where}.{kind}[{j}].resources.claims[{k}]"
                if not ref.name:
                    raise InputError("Required value", where=at)
                key = f"{ref.name}/{ref.request}" if ref.request else ref.name
                if key in seen and ref.name not in seen:
                    raise InputError(f"Duplicate value: {quote(key)}", where=at)
                if ref.name in seen or (not ref.request and any(s.startswith(f"{ref.name}/") for s in seen)):
                    raise InputError(f"Duplicate value: {quote(ref.name)}", where=at)
                seen.add(key)
                if ref.name not in names:
                    which = f": {', '.join(sorted(names))}" if names else " which is empty"
                    raise InputError(
                        f"Not found: {quote(ref.name)}: must be one of the names in pod.spec.resourceClaims{which}",
                        where=at,
                    )


def spec_info(spec: wire.PodSpec, where: str) -> tuple[PodSpecInfo, Resources]:
    """PodRequests (k8s.io/component-helpers/resource): max(sum of containers, max of init containers),
    restartable init containers (sidecars) added to both, plus overhead. Also the non-zero requests used by
    scoring, the summed limits, and the scheduling constraints."""
    if spec.resource_claims or any(
        c.resources is not None and c.resources.claims for c in (*(spec.containers or ()), *(spec.init_containers or ()))
    ):
        _check_resource_claims(spec, where)
    total: dict[str, int] = {}
    limits: dict[str, int] = {}
    nz_cpu = nz_mem = 0
    for i, c in enumerate(spec.containers or ()):
        req, lim = _container_requests(c, f"{where}.containers[{i}]")
        _add(total, req)
        _add(limits, lim)
        nz_cpu += req.get(CPU, DEFAULT_MILLI_CPU_REQUEST)
        nz_mem += req.get(MEMORY, DEFAULT_MEMORY_REQUEST)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    nz_side_cpu = nz_side_mem = nz_init_cpu = nz_init_mem = 0
    for i, c in enumerate(spec.init_containers or ()):
        req, _ = _container_requests(c, f"{where}.initContainers[{i}]")
        cpu_nz = req.get(CPU, DEFAULT_MILLI_CPU_REQUEST)  # only a missing request gets the default
        mem_nz = req.get(MEMORY, DEFAULT_MEMORY_REQUEST)
        if c.restart_policy == "Always":
            _add(total, req)
            _add(sidecars, req)
            nz_cpu += cpu_nz
            nz_mem += mem_nz
            nz_side_cpu += cpu_nz
            nz_side_mem += mem_nz
            _max(init_max, sidecars)
            nz_init_cpu, nz_init_mem = max(nz_init_cpu, nz_side_cpu), max(nz_init_mem, nz_side_mem)
        else:
            tmp = dict(req)
            _add(tmp, sidecars)
            _max(init_max, tmp)
            nz_init_cpu = max(nz_init_cpu, cpu_nz + nz_side_cpu)
            nz_init_mem = max(nz_init_mem, mem_nz + nz_side_mem)
    _max(total, init_max)
    nz_cpu, nz_mem = max(nz_cpu, nz_init_cpu), max(nz_mem, nz_init_mem)
    if spec.resources is not None and spec.resources.requests:
        # Pod-level resources replace the container sum for the resources they name (cpu, memory).
        for k, v in spec.resources.requests.items():
            amount = _amount(k, v, f"{where}.resources.requests.{k}")
            total[k] = amount
            if k == CPU:
                nz_cpu = amount or nz_cpu
            elif k == MEMORY:
                nz_mem = amount or nz_mem
    if spec.overhead:
        over = {k: _amount(k, v, f"{where}.overhead.{k}") for k, v in spec.overhead.items()}
        _add(total, over)
        nz_cpu += over.get(CPU, 0)
        nz_mem += over.get(MEMORY, 0)

    affinity = None
    na = spec.affinity.node_affinity if spec.affinity else None
    required = na.required_during_scheduling_ignored_during_execution if na else None
    if required is not None:
        at = f"{where}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        affinity = NodeSelector(
            tuple(
                Term(
                    _requirements(t.match_expressions, f"{at}[{n}].matchExpressions"),
                    _requirements(t.match_fields, f"{at}[{n}].matchFields", fields=True),
                )
                for n, t in enumerate(required.node_selector_terms or ())
            )
        )
    preferred = []
    for i, pref in enumerate((na.preferred_during_scheduling_ignored_during_execution if na else None) or ()):
        # ValidatePreferredSchedulingTerms: a weight in 1-100, and a preference valid as a required term's.
        at = f"{where}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not 1 <= pref.weight <= 100:
            raise InputError(f"{quote(pref.weight)}: must be in the range 1-100", where=f"{at}.weight")
        term = Term(
            _requirements(pref.preference.match_expressions, f"{at}.preference.matchExpressions"),
            _requirements(pref.preference.match_fields, f"{at}.preference.matchFields", fields=True),
        )
        preferred.append(PreferredTerm(pref.weight, term))
    tolerations = tuple(
        _validate_toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(spec.tolerations or ())
    )
    pod_affinity, preferred_affinity = _pod_affinity(
        spec.affinity.pod_affinity if spec.affinity else None, f"{where}.affinity.podAffinity"
    )
    pod_anti_affinity, preferred_anti_affinity = _pod_affinity(
        spec.affinity.pod_anti_affinity if spec.affinity else None, f"{where}.affinity.podAntiAffinity"
    )
    ports = []
    for i, c in enumerate(spec.containers or ()):
        for j, p in enumerate(c.ports or ()):
            for name, number in (("hostPort", p.host_port), ("containerPort", p.container_port)):
                if number and not 1 <= number <= 65535:
                    raise InputError(
                        f"must be between 1 and 65535, inclusive, got {quote(number)}",
                        where=f"{where}.containers[{i}].ports[{j}].{name}",
                    )
            port = p.host_port or (p.container_port if spec.host_network else 0)
            if port:
                ports.append(HostPort(port, p.protocol or "TCP", p.host_ip or ""))
    info = PodSpecInfo(
        requests=resources(total),
        nonzero_cpu=nz_cpu,
        nonzero_memory=nz_mem,
        node_selector=tuple(sorted((spec.node_selector or {}).items())),
        affinity=affinity,
        tolerations=tolerations,
        node_name=spec.node_name or "",
        host_ports=tuple(ports),
        priority=spec.priority,
        priority_class=spec.priority_class_name or "",
        scheduling_gates=tuple(g.name for g in spec.scheduling_gates or ()),
        topology_spread=_spread_constraints(spec.topology_spread_constraints, where),
        pod_affinity=pod_affinity,
        pod_anti_affinity=pod_anti_affinity,
        preferred_pod_affinity=preferred_affinity,
        preferred_pod_anti_affinity=preferred_anti_affinity,
        preferred=tuple(preferred),
        preemption_policy=_preemption_policy(spec.preemption_policy, f"{where}.preemptionPolicy"),
        volume_claims=tuple(
            f"pvc {v.persistent_volume_claim.claim_name}"
            if v.persistent_volume_claim is not None
            else f"ephemeral {v.name}"
            for v in spec.volumes or ()
            if v.persistent_volume_claim is not None or v.ephemeral is not None
        ),
        resource_claims=tuple(c.name for c in spec.resource_claims or ()),
        claim_refs=tuple(
            (c.name, c.resource_claim_name or "", c.resource_claim_template_name or "")
            for c in spec.resource_claims or ()
        ),
        runtime_class=spec.runtime_class_name or "",
        claim_templates=tuple(
            _claim_template(
                "ephemeral", v.name, v.ephemeral.volume_claim_template.spec, f"{where}.volumes[{i}].ephemeral"
            )
            for i, v in enumerate(spec.volumes or ())
            if v.ephemeral is not None and v.ephemeral.volume_claim_template is not None
        )
        if spec.volumes
        else (),
    )
    return info, resources(limits)


def _claim_template(kind: str, name: str, spec: wire.ClaimSpec | None, where: str) -> ClaimTemplate:
    """What kgpu.sim.scheduler.plugins.volumebinding needs of a claim a controller creates from a template."""
    spec = spec or wire.ClaimSpec()
    requests = (spec.resources.requests if spec.resources is not None else None) or {}
    storage = (
        _amount("storage", requests["storage"], f"{where}.resources.requests.storage")
        if "storage" in requests
        else 0
    )
    return ClaimTemplate(kind, name, spec.storage_class_name, tuple(spec.access_modes or ()), storage)


def node_from_wire(obj: wire.Node, name: str, where: str, source: str) -> Node:
    status = obj.status or wire.NodeStatus()
    # The scheduler reads status.allocatable; a hand-written node may only give capacity.
    raw = status.allocatable if status.allocatable is not None else (status.capacity or {})
    field_name = "allocatable" if status.allocatable is not None else "capacity"
    alloc = {k: _amount(k, v, f"{where}: status.{field_name}.{k}") for k, v in raw.items()}
    capacity = None
    if status.allocatable is not None and status.capacity:
        capacity = {k: _amount(k, v, f"{where}: status.capacity.{k}") for k, v in status.capacity.items()}
    spec = obj.spec or wire.NodeSpec()
    taints = []
    for i, t in enumerate(spec.taints or ()):
        if t.effect not in TAINT_EFFECTS:
            raise InputError(
                f"{quote(t.effect)} is not one of {', '.join(TAINT_EFFECTS)}",
                where=f"{where}: spec.taints[{i}].effect",
            )
        if not t.key:
            raise InputError("required field missing", where=f"{where}: spec.taints[{i}].key")
        taints.append(Taint(t.key, t.value or "", t.effect))
    return Node(
        name, obj.metadata.labels or {}, alloc, tuple(taints), bool(spec.unschedulable), source, capacity
    )

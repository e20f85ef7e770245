"""GPU workloads the API server rejects or no node can hold.

``nvidia.com/gpu`` is an extended resource: a container may give only a limit (the request defaults to it),
or both equal; a request without a limit, unequal values and fractions are rejected at admission ("must be
equal to nvidia.com/gpu limit", "must be a whole number"), so a controller's pods never appear and its
FailedCreate events say why. Pods, DaemonSet templates, RayCluster group templates and FailedCreate events
are all read. TKE super-node annotations must name a spec that exists (``kgpu.sim.provisioners.tke.spec``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kgpu.catalog import InstanceType, aws_catalog
from kgpu.catalog.tke import TkeMatchError
from kgpu.doctor.common import names, snippet
from kgpu.doctor.findings import ERROR, Finding
from kgpu.doctor.nodepools import nodepool_pool
from kgpu.doctor.reading import container_gpus
from kgpu.doctor.state import TKE_PREFIX, ClusterState, ContainerGpu
from kgpu.errors import InputError
from kgpu.model.objects import GPU
from kgpu.model.quantity import parse_quantity, value
from kgpu.sim.provisioners.tke.spec import match_pod_spec


def _templates(
    state: ClusterState, pods: bool = True
) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(object ref, field prefix, pod spec, annotations) of every pod and pod template in the snapshot."""
    for pod in state.pods if pods else ():
        spec = pod.raw.get("spec")
        if isinstance(spec, dict) and not pod.is_daemon:
            yield pod.ref, "spec", spec, dict(pod.annotations)
    for ds in state.daemonsets:
        tmpl = (ds.raw.get("spec") or {}).get("template") or {}
        yield (
            ds.ref,
            "spec.template.spec",
            tmpl.get("spec") or {},
            (tmpl.get("metadata") or {}).get("annotations") or {},
        )
    for rc in state.rayclusters:
        meta = rc.get("metadata") or {}
        ref = f"RayCluster/{meta.get('namespace') or 'default'}/{meta.get('name')}"
        spec = rc.get("spec") or {}
        groups = [("spec.headGroupSpec", spec.get("headGroupSpec"))]
        groups += [
            (f"spec.workerGroupSpecs[{i}]", g) for i, g in enumerate(spec.get("workerGroupSpecs") or ())
        ]
        for path, group in groups:
            if isinstance(group, dict):
                tmpl = group.get("template") or {}
                yield (
                    ref,
                    f"{path}.template.spec",
                    tmpl.get("spec") or {},
                    (tmpl.get("metadata") or {}).get("annotations") or {},
                )


def _gpu_containers(state: ClusterState) -> Iterator[tuple[str, str, list[ContainerGpu]]]:
    for pod in state.pods:
        if pod.gpu_containers and not pod.is_daemon:
            yield pod.ref, "spec", pod.gpu_containers
    for ref, prefix, spec, _ in _templates(state, pods=False):
        yield ref, prefix, container_gpus(spec)


def _resources_fix(g: ContainerGpu) -> str:
    amount = g.limit if g.limit is not None else g.request
    whole = 1 if amount is None else max(1, -(-amount.numerator // amount.denominator))
    return (
        snippet({"resources": {"limits": {GPU: whole}}}) + "\n# (a request, if given, must equal the limit)"
    )


def check_gpu_resources(state: ClusterState) -> Iterator[Finding]:
    for ref, prefix, gpus in _gpu_containers(state):
        for g in gpus:
            where = f"{prefix}.{g.field} ({g.name})"
            if g.limit is None and g.raw_limit is None:
                yield Finding(
                    "gpu-request-without-limit",
                    ERROR,
                    ref,
                    f"{where} requests {g.raw_request} {GPU} without a limit: the API server rejects it "
                    f"({GPU} must have a limit equal to its request)",
                    _resources_fix(g),
                )
            elif g.request is not None and g.limit is not None and g.request != g.limit:
                yield Finding(
                    "gpu-request-limit-mismatch",
                    ERROR,
                    ref,
                    f"{where} requests {g.raw_request} but limits {g.raw_limit} {GPU}: extended resources "
                    "cannot be overcommitted, the API server rejects it (must be equal to nvidia.com/gpu limit)",
                    _resources_fix(g),
                )
            amount = g.limit if g.limit is not None else g.request
            if amount is not None and amount.denominator != 1:
                yield Finding(
                    "gpu-fractional",
                    ERROR,
                    ref,
                    f"{where} asks for {g.raw_limit if g.limit is not None else g.raw_request} {GPU}: GPUs are "
                    "whole devices (must be a whole number). To share a GPU use the device plugin's "
                    "time-slicing or MIG (kgpu.yaml devicePlugin.strategy), or a TKE fractional spec (1/4*T4)",
                    _resources_fix(g),
                )
    for ev in state.events:
        if ev.reason == "FailedCreate" and GPU in ev.message:
            yield Finding(
                "gpu-request-rejected",
                ERROR,
                f"{ev.kind}/{ev.namespace}/{ev.name}",
                f"the controller cannot create its pods ({ev.count}x): {ev.message}",
                f"kubectl get {ev.kind.lower()} -n {ev.namespace} {ev.name} -o yaml  "
                f"# set {GPU} as a whole-number limit, request absent or equal",
            )


def check_tke(state: ClusterState) -> Iterator[Finding]:
    for ref, _, spec, notes in _templates(state):
        if not notes or not any(str(k).startswith(TKE_PREFIX) for k in notes):
            continue
        requests, limits = _sum_resources(spec)
        try:
            match_pod_spec(notes, requests, limits)
        except TkeMatchError as exc:
            yield Finding(
                "tke-annotation-no-spec",
                ERROR,
                ref,
                f"TKE super-node annotations match no GPU spec: {exc}",
                _tke_fix(notes, requests, limits),
            )


def _tke_fix(annotations: dict[str, Any], requests: dict[str, int], limits: dict[str, int]) -> str:
    """The `kgpu tke match` line that shows the nearest specs, and the catalog of the GPU types asked for."""
    types = str(annotations.get(TKE_PREFIX + "gpu-type") or "T4")
    explicit = TKE_PREFIX + "gpu-count" in annotations
    if explicit:
        mem = str(annotations.get(TKE_PREFIX + "mem", "")).removesuffix("Gi").removesuffix("G")
        args = (
            f"--gpus {annotations.get(TKE_PREFIX + 'gpu-count', 1)} --cpu {annotations.get(TKE_PREFIX + 'cpu', 1)} "
            f"--memory {mem}Gi --explicit"
        )
    else:
        gpus = max(requests.get(GPU, 0), limits.get(GPU, 0)) or 1
        args = f"--gpus {gpus}"
    first = types.split(",")[0].strip()
    return (
        f"kgpu tke match --gpu-type '{types}' {args} -o table   # the spec it gets, or the nearest ones\n"
        f"kgpu catalog --provider tke --gpu '{first}'   # every {first} spec (GPU count, CPU, memory)"
    )


def _sum_resources(spec: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    for c in spec.get("containers") or ():
        if not isinstance(c, dict):
            continue
        res = c.get("resources") or {}
        for into, part in ((requests, res.get("requests") or {}), (limits, res.get("limits") or {})):
            for k, raw in part.items():
                try:
                    q = parse_quantity(raw)
                except InputError:
                    continue
                amount = -(-(q * 1000).numerator // (q * 1000).denominator) if k == "cpu" else value(q)
                into[k] = into.get(k, 0) + amount
    return requests, limits


def _pool_max_gpus(state: ClusterState) -> tuple[int, str]:
    """The most GPUs one node of any NodePool could have (catalog types its requirements allow)."""
    best, where = 0, ""
    types = aws_catalog().types() if state.nodepools else []
    for np in state.nodepools:
        pool, _ = nodepool_pool(np)
        allowed = set(pool.get("instanceTypes") or ())
        req = pool.get("requirements") or {}
        for t in types:
            if allowed and t.name not in allowed:
                continue
            if req.get("families") and t.family not in req["families"]:
                continue
            if req.get("categories") and t.category not in req["categories"]:
                continue
            if req.get("gpuNames") and t.gpu_name not in [g.lower() for g in req["gpuNames"]]:
                continue
            rng = req.get("gpuCount") or {}
            if rng and not (rng.get("min", 0) <= t.gpu_count <= rng.get("max", 1 << 30)):
                continue
            if t.gpu_count > best:
                best, where = t.gpu_count, f'NodePool "{pool["name"]}" ({t.name})'
    return best, where


def check_too_many_gpus(state: ClusterState) -> Iterator[Finding]:
    asking = [
        p
        for p in state.pods
        if p.gpus > 0 and not p.terminated and not any(k.startswith(TKE_PREFIX) for k in p.annotations)
    ]
    if not asking:
        return
    node_best, node_where = 0, ""
    for n in state.nodes:
        have = max(n.allocatable_gpus or 0, n.expected_gpus)
        if have > node_best:
            node_best, node_where = have, f"node {n.name}"
    pool_best, pool_where = _pool_max_gpus(state)
    best, where = max((node_best, node_where), (pool_best, pool_where))
    for pod in asking:
        if pod.gpus > best:
            offer = (
                f"the most any node or NodePool offers is {best} ({where})"
                if best
                else "no node or NodePool offers GPUs"
            )
            yield Finding(
                "gpu-request-too-large",
                ERROR,
                pod.ref,
                f"asks {pod.gpus} {GPU} in one pod; {offer}: it can never be scheduled",
                bigger_fix(state, pod.gpus),
            )


def types_with_gpus(count: int) -> list[InstanceType]:
    """The catalog's instance types with at least ``count`` NVIDIA GPUs, fewest GPUs first."""
    found = [t for t in aws_catalog().types() if t.gpu_count >= count and t.gpu_manufacturer == "nvidia"]
    return sorted(found, key=lambda t: (t.gpu_count, t.name))


def bigger_fix(state: ClusterState, count: int) -> str:
    """What holds a pod asking ``count`` GPUs: a requirement that matches instance types kgpu knows, or, when
    no type has that many, splitting the work."""
    types = types_with_gpus(count)
    if not types:
        most = max((t.gpu_count for t in aws_catalog().types() if t.gpu_manufacturer == "nvidia"), default=0)
        biggest = [t.name for t in types_with_gpus(most)]
        return (
            f"# no instance type kgpu knows has {count} GPUs (the most is {most}: {names(biggest, 4)}): split the "
            f"work across pods of at most {most} GPUs each (a multi-node job: torchrun, a RayCluster worker "
            "group, an MPIJob)"
        )
    shown = names([t.name for t in types], 6)
    families = sorted({t.family for t in types})
    if not state.nodepools:
        return (
            f"# split the work across pods, or add a node with {count} or more GPUs (instance types: {shown})"
        )
    return (
        "# split the work across pods, or allow a bigger instance type, e.g. in the NodePool's "
        "spec.template.spec.requirements:\n"
        + snippet(
            [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": [str(count - 1)]}]
        )
        + f"\n# instance types kgpu knows with {count} or more GPUs: {shown}; the NodePool's instance-family "
        f"requirement must allow one of {', '.join(families)}"
    )


CHECKS = {
    "gpu-request-without-limit": check_gpu_resources,
    "gpu-request-limit-mismatch": check_gpu_resources,
    "gpu-fractional": check_gpu_resources,
    "gpu-request-rejected": check_gpu_resources,
    "tke-annotation-no-spec": check_tke,
    "gpu-request-too-large": check_too_many_gpus,
}

"""NodeResourcesFit filter and pod request aggregation, transcribed from upstream test tables.

Upstream: kubernetes/kubernetes

- ``pkg/scheduler/framework/plugins/noderesources/fit_test.go``: TestEnoughRequests, TestNotEnoughRequests,
  TestStorageRequests, TestRestartableInitContainers (rows with the SidecarContainers feature enabled).
  The rows configured through ``NodeResourcesFitArgs`` (IgnoredResources / IgnoredResourceGroups) are not
  transcribed: kgpu has no scheduler profile args.
- ``staging/src/k8s.io/component-helpers/resource/helpers_test.go``: TestPodResourceRequests (rows without
  ``UseStatusResources`` / ``ExcludeOverhead`` options) and TestPodRequestsAndLimits: how init containers,
  restartable init containers (sidecars) and overhead add up to the pod's request.

Upstream builds pods with ``newResourcePod(framework.Resource{MilliCPU, Memory, EphemeralStorage,
ScalarResources})``: one container per Resource, requesting cpu and memory (even when 0). The API server
requires extended resources (and hugepages) to set a limit equal to the request, so these pods set one too.
The node in TestEnoughRequests is ``makeAllocatableResources(10, 20, 32, 5, 20, 5)`` and already runs one
pod (``framework.NewNodeInfo(existing)``).
"""

from __future__ import annotations

from typing import Any

import pytest

from k8s_builders import container, load_node, node, pod, sidecar, spec_of
from kgpu.model.objects import Node, PodSpecInfo
from kgpu.model.predicates import ERR_TOO_MANY_PODS, filter_reasons, insufficient

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"


def r(cpu_m: int = 0, mem: int = 0, es: int = 0, **scalars: int) -> dict[str, Any]:
    """One container like upstream ``newResourcePod(framework.Resource{...})`` builds."""
    requests: dict[str, Any] = {"cpu": f"{cpu_m}m", "memory": str(mem)}
    if es:
        requests["ephemeral-storage"] = str(es)
    limits: dict[str, Any] = {}
    for key, amount in scalars.items():
        name = {"ext_a": EXT_A, "ext_b": EXT_B, "k8s_a": K8S_IO_A, "k8s_b": K8S_IO_B, "huge_a": HUGE_A}[key]
        requests[name] = str(amount)
        if name in (EXT_A, EXT_B, HUGE_A):
            limits[name] = str(amount)
    return container(requests, limits or None)


def resource_pod(
    *containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **kw: Any
) -> dict[str, Any]:
    named = [dict(c, name=f"c{i}") for i, c in enumerate(containers)]
    init_named = None if init is None else [dict(c, name=f"i{i}") for i, c in enumerate(init)]
    return pod("pod", containers=named, init_containers=init_named, **kw)


def make_node(cpu_m: int, mem: int, pods: int, ext_a: int, es: int, huge_a: int) -> Node:
    """upstream makeAllocatableResources(milliCPU, memory, pods, extendedA, storage, hugePageA)."""
    return load_node(
        node(
            "node",
            allocatable={
                "cpu": f"{cpu_m}m",
                "memory": str(mem),
                "pods": str(pods),
                EXT_A: str(ext_a),
                "ephemeral-storage": str(es),
                HUGE_A: str(huge_a),
            },
        )
    )


def run_filter(pod_doc: dict[str, Any], existing: dict[str, Any], n: Node) -> list[str] | None:
    spec: PodSpecInfo = spec_of(pod_doc)
    ex = spec_of(existing)
    return filter_reasons(spec, n, dict(ex.requests), 1)


CPU, MEM = insufficient("cpu"), insufficient("memory")

# --- fit_test.go, TestEnoughRequests ----------------------------------------------------------------------
# (name, pod, existing pod on the node, expected reasons or None)
ENOUGH: list[tuple[str, dict[str, Any], dict[str, Any], list[str] | None]] = [
    ("no resources requested always fits", pod("pod"), resource_pod(r(10, 20)), None),
    ("too many resources fails", resource_pod(r(1, 1)), resource_pod(r(10, 20)), [CPU, MEM]),
    (
        "too many resources fails due to init container cpu",
        resource_pod(r(1, 1), init=[r(3, 1)]),
        resource_pod(r(8, 19)),
        [CPU],
    ),
    (
        "too many resources fails due to highest init container cpu",
        resource_pod(r(1, 1), init=[r(3, 1), r(2, 1)]),
        resource_pod(r(8, 19)),
        [CPU],
    ),
    (
        "too many resources fails due to init container memory",
        resource_pod(r(1, 1), init=[r(1, 3)]),
        resource_pod(r(9, 19)),
        [MEM],
    ),
    (
        "too many resources fails due to highest init container memory",
        resource_pod(r(1, 1), init=[r(1, 3), r(1, 2)]),
        resource_pod(r(9, 19)),
        [MEM],
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        resource_pod(r(1, 1), init=[r(1, 1)]),
        resource_pod(r(9, 19)),
        None,
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init containers",
        resource_pod(r(1, 1), init=[r(1, 1), r(1, 1)]),
        resource_pod(r(9, 19)),
        None,
    ),
    ("both resources fit", resource_pod(r(1, 1)), resource_pod(r(5, 5)), None),
    ("one resource memory fits", resource_pod(r(2, 1)), resource_pod(r(9, 5)), [CPU]),
    ("one resource cpu fits", resource_pod(r(1, 2)), resource_pod(r(5, 19)), [MEM]),
    ("equal edge case", resource_pod(r(5, 1)), resource_pod(r(5, 19)), None),
    (
        "equal edge case for init container",
        resource_pod(r(4, 1), init=[r(5, 1)]),
        resource_pod(r(5, 19)),
        None,
    ),
    ("extended resource fits", resource_pod(r(ext_a=1)), resource_pod(r()), None),
    (
        "extended resource fits for init container",
        resource_pod(r(), init=[r(ext_a=1)]),
        resource_pod(r()),
        None,
    ),
    (
        "extended resource capacity enforced",
        resource_pod(r(1, 1, ext_a=10)),
        resource_pod(r(0, 0, ext_a=0)),
        [insufficient(EXT_A)],
    ),
    (
        "extended resource capacity enforced for init container",
        resource_pod(r(), init=[r(1, 1, ext_a=10)]),
        resource_pod(r(0, 0, ext_a=0)),
        [insufficient(EXT_A)],
    ),
    (
        "extended resource allocatable enforced",
        resource_pod(r(1, 1, ext_a=1)),
        resource_pod(r(0, 0, ext_a=5)),
        [insufficient(EXT_A)],
    ),
    (
        "extended resource allocatable enforced for init container",
        resource_pod(r(), init=[r(1, 1, ext_a=1)]),
        resource_pod(r(0, 0, ext_a=5)),
        [insufficient(EXT_A)],
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        resource_pod(r(1, 1, ext_a=3), r(1, 1, ext_a=3)),
        resource_pod(r(0, 0, ext_a=2)),
        [insufficient(EXT_A)],
    ),
    (
        "extended resource allocatable admits multiple init containers",
        resource_pod(r(), init=[r(1, 1, ext_a=3), r(1, 1, ext_a=3)]),
        resource_pod(r(0, 0, ext_a=2)),
        None,
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        resource_pod(r(), init=[r(1, 1, ext_a=6), r(1, 1, ext_a=3)]),
        resource_pod(r(0, 0, ext_a=2)),
        [insufficient(EXT_A)],
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        resource_pod(r(1, 1, ext_b=1)),
        resource_pod(r(0, 0)),
        [insufficient(EXT_B)],
    ),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        resource_pod(r(), init=[r(1, 1, ext_b=1)]),
        resource_pod(r(0, 0)),
        [insufficient(EXT_B)],
    ),
    (
        "kubernetes.io resource capacity enforced",
        resource_pod(r(1, 1, k8s_a=10)),
        resource_pod(r(0, 0)),
        [insufficient(K8S_IO_A)],
    ),
    (
        "kubernetes.io resource capacity enforced for init container",
        resource_pod(r(), init=[r(1, 1, k8s_b=10)]),
        resource_pod(r(0, 0)),
        [insufficient(K8S_IO_B)],
    ),
    (
        "hugepages resource capacity enforced",
        resource_pod(r(1, 1, huge_a=10)),
        resource_pod(r(0, 0, huge_a=0)),
        [insufficient(HUGE_A)],
    ),
    (
        "hugepages resource capacity enforced for init container",
        resource_pod(r(), init=[r(1, 1, huge_a=10)]),
        resource_pod(r(0, 0, huge_a=0)),
        [insufficient(HUGE_A)],
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        resource_pod(r(1, 1, huge_a=3), r(1, 1, huge_a=3)),
        resource_pod(r(0, 0, huge_a=2)),
        [insufficient(HUGE_A)],
    ),
    (
        "resources + pod overhead fits",
        resource_pod(r(1, 1), overhead={"cpu": "3m", "memory": "13"}),
        resource_pod(r(5, 5)),
        None,
    ),
    (
        "requests + overhead does not fit for memory",
        resource_pod(r(1, 1), overhead={"cpu": "1m", "memory": "15"}),
        resource_pod(r(5, 5)),
        [MEM],
    ),
    (
        "skip checking extended resource request with quantity zero via resource groups",
        resource_pod(r(1, 1, ext_a=0)),
        resource_pod(r(0, 0, ext_a=6)),
        None,
    ),
    (
        "skip checking resource request with quantity zero",
        resource_pod(r(ext_a=1)),
        resource_pod(r(20, 30, ext_a=1)),
        None,
    ),
]


@pytest.mark.parametrize(
    ("pod_doc", "existing", "expected"), [c[1:] for c in ENOUGH], ids=[c[0] for c in ENOUGH]
)
def test_enough_requests(
    pod_doc: dict[str, Any], existing: dict[str, Any], expected: list[str] | None
) -> None:
    assert run_filter(pod_doc, existing, make_node(10, 20, 32, 5, 20, 5)) == expected


# --- fit_test.go, TestNotEnoughRequests (node: makeAllocatableResources(10, 20, 1, 0, 0, 0)) --------------
NOT_ENOUGH: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "even without specified resources, predicate fails when there's no space for additional pod",
        pod("pod"),
        resource_pod(r(10, 20)),
    ),
    (
        "even if both resources fit, predicate fails when there's no space for additional pod",
        resource_pod(r(1, 1)),
        resource_pod(r(5, 5)),
    ),
    (
        "even for equal edge case, predicate fails when there's no space for additional pod",
        resource_pod(r(5, 1)),
        resource_pod(r(5, 19)),
    ),
    (
        "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
        resource_pod(r(5, 1), init=[r(5, 1)]),
        resource_pod(r(5, 19)),
    ),
]


@pytest.mark.parametrize(("pod_doc", "existing"), [c[1:] for c in NOT_ENOUGH], ids=[c[0] for c in NOT_ENOUGH])
def test_not_enough_requests(pod_doc: dict[str, Any], existing: dict[str, Any]) -> None:
    assert run_filter(pod_doc, existing, make_node(10, 20, 1, 0, 0, 0)) == [ERR_TOO_MANY_PODS]


def test_too_many_pods_wording() -> None:
    assert ERR_TOO_MANY_PODS == "Too many pods"


# --- fit_test.go, TestStorageRequests (node: makeAllocatableResources(10, 20, 32, 5, 20, 5)) ---------------
STORAGE: list[tuple[str, dict[str, Any], dict[str, Any], list[str] | None]] = [
    ("empty storage requested, and pod fits", resource_pod(r(1, 1)), resource_pod(r(2, 10)), None),
    (
        "storage ephemeral local storage request exceeds allocatable",
        resource_pod(r(es=25)),
        resource_pod(r(2, 2)),
        [insufficient("ephemeral-storage")],
    ),
    (
        "ephemeral local storage is sufficient",
        resource_pod(r(es=5), init=[]),
        resource_pod(r(2, 2, es=10)),
        None,
    ),
    ("pod fits", resource_pod(r(es=10)), resource_pod(r(2, 2)), None),
]


@pytest.mark.parametrize(
    ("pod_doc", "existing", "expected"), [c[1:] for c in STORAGE], ids=[c[0] for c in STORAGE]
)
def test_storage_requests(
    pod_doc: dict[str, Any], existing: dict[str, Any], expected: list[str] | None
) -> None:
    assert run_filter(pod_doc, existing, make_node(10, 20, 32, 5, 20, 5)) == expected


# --- fit_test.go, TestRestartableInitContainers (SidecarContainers enabled; node (0, 0, 1, 0, 0, 0)) -------
@pytest.mark.parametrize(
    "pod_doc",
    [
        pod("pod", containers=[container(name="regular")]),
        pod(
            "pod", containers=[container(name="regular")], init_containers=[sidecar(name="restartable-init")]
        ),
    ],
    ids=[
        "allow pod without restartable init containers if sidecar containers is enabled",
        "allow pod with restartable init containers if sidecar containers is enabled",
    ],
)
def test_restartable_init_containers(pod_doc: dict[str, Any]) -> None:
    n = make_node(0, 0, 1, 0, 0, 0)
    assert filter_reasons(spec_of(pod_doc), n, {}, 0) is None


# --- helpers_test.go, TestPodResourceRequests (no options) and TestPodRequestsAndLimits -----------------
def c_cpu(cpu: str, *, name: str, limit: str | None = None) -> dict[str, Any]:
    return container({"cpu": cpu}, None if limit is None else {"cpu": limit}, name=name)


# (description, containers, init containers, overhead, expected requests {resource: quantity})
POD_REQUESTS: list[
    tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, str] | None, dict[str, int]]
] = [
    (
        "nil options, larger init container",
        [c_cpu("1", name="c")],
        [c_cpu("4", name="i")],
        None,
        {"cpu": 4000},
    ),
    (
        "nil options, larger containers",
        [c_cpu("2", name="c1"), c_cpu("3", name="c2")],
        [c_cpu("2", name="i")],
        None,
        {"cpu": 5000},
    ),
    (
        "pod overhead included",
        [c_cpu("2", name="c1"), c_cpu("3", name="c2")],
        [c_cpu("2", name="i", limit="2")],
        {"cpu": "1", "memory": "1Gi"},
        {"cpu": 6000, "memory": 2**30},
    ),
    (
        "restartable init container",
        [c_cpu("1", name="container-1")],
        [sidecar({"cpu": "1"}, name="restartable-init-1")],
        None,
        {"cpu": 2000},
    ),
    (
        "multiple restartable init containers",
        [c_cpu("1", name="container-1")],
        [
            c_cpu("5", name="init-1"),
            sidecar({"cpu": "1"}, name="restartable-init-1"),
            sidecar({"cpu": "2"}, name="restartable-init-2"),
            sidecar({"cpu": "3"}, name="restartable-init-3"),
        ],
        None,
        {"cpu": 7000},
    ),
    (
        "multiple restartable and regular init containers",
        [c_cpu("1", name="container-1")],
        [
            c_cpu("5", name="init-1"),
            sidecar({"cpu": "1"}, name="restartable-init-1"),
            sidecar({"cpu": "2"}, name="restartable-init-2"),
            c_cpu("5", name="init-2"),
            sidecar({"cpu": "3"}, name="restartable-init-3"),
        ],
        None,
        {"cpu": 8000},
    ),
    (
        "restartable-init, init and regular",
        [c_cpu("100", name="container-1")],
        [sidecar({"cpu": "10"}, name="restartable-init-1"), c_cpu("200", name="init-1")],
        None,
        {"cpu": 210000},
    ),
    # TestPodRequestsAndLimits (getPod: one container with the given requests, plus overhead)
    (
        "just-overhead",
        [container(name="c")],
        [],
        {"cpu": "5", "memory": "5"},
        {"cpu": 5000, "memory": 5},
    ),
    (
        "req-and-overhead",
        [container({"cpu": "1", "memory": "10"}, name="c")],
        [],
        {"cpu": "5", "memory": "5"},
        {"cpu": 6000, "memory": 15},
    ),
    (
        "all-req-lim-and-overhead",
        [container({"cpu": "1", "memory": "10"}, {"cpu": "2", "memory": "12"}, name="c")],
        [],
        {"cpu": "5", "memory": "5"},
        {"cpu": 6000, "memory": 15},
    ),
    (
        "req-some-lim-and-overhead",
        [container({"cpu": "1", "memory": "10"}, {"cpu": "2"}, name="c")],
        [],
        {"cpu": "5", "memory": "5"},
        {"cpu": 6000, "memory": 15},
    ),
]


@pytest.mark.parametrize(
    ("containers", "init_containers", "overhead", "expected"),
    [c[1:] for c in POD_REQUESTS],
    ids=[c[0] for c in POD_REQUESTS],
)
def test_pod_resource_requests(
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]],
    overhead: dict[str, str] | None,
    expected: dict[str, int],
) -> None:
    spec = spec_of(pod("pod", containers=containers, init_containers=init_containers, overhead=overhead))
    assert dict(spec.requests) == expected

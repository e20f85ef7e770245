"""Scoring (NodeResourcesFit LeastAllocated + NodeResourcesBalancedAllocation, TaintToleration and
NodeAffinity with their normalisation), from upstream test tables.

Upstream: kubernetes/kubernetes

- ``pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go``,
  TestLeastAllocatedScoringStrategy (rows scoring cpu and memory with weight 1; the rows testing invalid
  weights or unset resources are profile validation, not transcribed)
- ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go``,
  TestNodeResourcesBalancedAllocation (rows over cpu and memory)
- ``pkg/scheduler/util/pod_resources_test.go``, TestGetNonZeroRequest (the defaults used by LeastAllocated)
- ``pkg/scheduler/framework/plugins/helper/normalize_score_test.go``, TestDefaultNormalizeScore
- ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go``, TestTaintTolerationScore
  (the rows with Gt/Lt tolerations need the TaintTolerationComparisonOperators gate of v1.35; not in v1.34)
- ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go``, TestNodeAffinityPriority (the
  rows with the plugin's ``addedAffinity`` argument are profile configuration, not transcribed)

kgpu's ``score`` is the sum of both plugins (weight 1 each). Each upstream table pins one plugin; the other
plugin's part is computed here from the formula spelled out in the upstream test comments:

- LeastAllocated: per resource ``(allocatable - requested) * 100 // allocatable`` (0 when requested exceeds
  allocatable, resource skipped when allocatable is 0), averaged with integer division; ``requested`` is
  the *non-zero* request (a container's missing cpu/memory request counts as 100m / 200Mi; an explicit
  ``0`` stays 0);
- BalancedAllocation: fractions ``requested / allocatable`` of the *actual* requests, capped at 1, resource
  skipped when allocatable is 0; ``std = |f_cpu - f_mem| / 2``; score ``int((1 - std) * 100)``.

Upstream node builders: least_allocated_test's ``st.MakeNode().Capacity({"cpu": "4000", ...})`` is 4000
*cores*; balanced_allocation_test's ``makeNode(name, milliCPU, memory, ...)`` is in millicores. Pods built
with ``st.MakePod().Obj()`` have no containers (so no non-zero defaults either).
"""

from __future__ import annotations

from typing import Any

import pytest

from k8s_builders import container, load_node, node, pod, requirement, spec_of, taint, term, toleration
from kgpu.errors import InputError
from kgpu.model.objects import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    Node,
    Pod,
    PodSpecInfo,
)
from kgpu.sim.scheduler.plugins.scoring import (
    NODE_AFFINITY,
    TAINT_TOLERATION,
    WEIGHTS,
    default_normalize,
    default_normalize_array,
)
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler, score


def least_part(alloc_cpu: int, alloc_mem: int, nz_cpu: int, nz_mem: int) -> int:
    total = n = 0
    for alloc, req in ((alloc_cpu, nz_cpu), (alloc_mem, nz_mem)):
        if alloc:
            total += (alloc - req) * 100 // alloc if req <= alloc else 0
            n += 1
    return total // n if n else 0


def balanced_part(alloc_cpu: int, alloc_mem: int, req_cpu: int, req_mem: int) -> int:
    fractions = [
        min(1.0, req / alloc) for alloc, req in ((alloc_cpu, req_cpu), (alloc_mem, req_mem)) if alloc
    ]
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * 100)


def state(node_doc: dict[str, Any], existing: list[dict[str, Any]]) -> NodeState:
    st = NodeState(load_node(node_doc), 0)
    for doc in existing:
        st.add(Pod("default", "existing", spec_of(doc)))
    return st


def actual(spec: PodSpecInfo, st: NodeState) -> tuple[int, int]:
    return st.requested.get(CPU, 0) + spec.request(CPU), st.requested.get(MEMORY, 0) + spec.request(MEMORY)


def req_pod(*reqs: dict[str, str]) -> dict[str, Any]:
    """st.MakePod().Req(r1).Req(r2)...: one container per Req."""
    return pod("pod", containers=[container(dict(rq), name=f"c{i}") for i, rq in enumerate(reqs)])


def cap_node(name: str, cpu: str | None, mem: str | None, **extra: str) -> dict[str, Any]:
    """st.MakeNode().Name(name).Capacity({...}) (allocatable == capacity)."""
    alloc: dict[str, str] = dict(extra)
    if cpu is not None:
        alloc["cpu"] = cpu
    if mem is not None:
        alloc["memory"] = mem
    return node(name, allocatable=alloc)


EMPTY = pod("empty")  # st.MakePod().Obj()
R1, R2 = {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}
CPU3000_MEM0 = req_pod({"cpu": "3000", "memory": "0"})
CPU3000_MEM5000 = req_pod({"cpu": "3000", "memory": "5000"})

# --- least_allocated_test.go, TestLeastAllocatedScoringStrategy ---------------------------------------
# (name, requested pod, [(node, existing pods)], expected LeastAllocated score per node)
LEAST: list[tuple[str, dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]], list[int]]] = [
    (
        "nothing scheduled, nothing requested",
        EMPTY,
        [(cap_node("node1", "4000", "10000"), []), (cap_node("node2", "4000", "10000"), [])],
        [100, 100],
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        req_pod(R1, R2),
        [(cap_node("node1", "4000", "10000"), []), (cap_node("node2", "6000", "10000"), [])],
        [37, 50],
    ),
    (
        "no resources requested, pods scheduled",
        EMPTY,
        [
            (cap_node("node1", "4000", "10000"), [EMPTY, EMPTY]),
            (cap_node("node2", "4000", "10000"), [EMPTY, EMPTY]),
        ],
        [100, 100],
    ),
    (
        "no resources requested, pods scheduled with resources",
        EMPTY,
        [
            (cap_node("node1", "10000", "20000"), [CPU3000_MEM0, CPU3000_MEM0]),
            (cap_node("node2", "10000", "20000"), [CPU3000_MEM0, CPU3000_MEM5000]),
        ],
        [70, 57],
    ),
    (
        "resources requested, pods scheduled with resources",
        req_pod(R1, R2),
        [
            (cap_node("node1", "10000", "20000"), [CPU3000_MEM0]),
            (cap_node("node2", "10000", "20000"), [CPU3000_MEM5000]),
        ],
        [57, 45],
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        req_pod(R1, R2),
        [
            (cap_node("node1", "10000", "20000"), [CPU3000_MEM0]),
            (cap_node("node2", "10000", "50000"), [CPU3000_MEM5000]),
        ],
        [57, 60],
    ),
    (
        "requested resources exceed node capacity",
        CPU3000_MEM0,
        [
            (cap_node("node1", "4000", "10000"), [CPU3000_MEM0]),
            (cap_node("node2", "4000", "10000"), [CPU3000_MEM5000]),
        ],
        [50, 25],
    ),
    (
        "zero node resources, pods scheduled with resources",
        EMPTY,
        [(cap_node("node1", None, None), [CPU3000_MEM0]), (cap_node("node2", None, None), [CPU3000_MEM5000])],
        [0, 0],
    ),
    (
        # Scored over cpu, memory and example.com/foo; the pod requests no extended resource, so only cpu
        # and memory count -- the same as the default profile.
        "bypass extended resource if the pod does not request",
        req_pod(R1, R2),
        [
            (cap_node("node1", "6000", "10000"), []),
            (cap_node("node2", "6000", "10000", **{"example.com/foo": "4"}), []),
        ],
        [50, 50],
    ),
]

LEAST_CASES = [
    pytest.param(p, n, ex, want, id=f"{name} [{n['metadata']['name']}]")
    for name, p, nodes, wants in LEAST
    for (n, ex), want in zip(nodes, wants, strict=True)
]


@pytest.mark.parametrize(("pod_doc", "node_doc", "existing", "want_least"), LEAST_CASES)
def test_least_allocated(
    pod_doc: dict[str, Any], node_doc: dict[str, Any], existing: list[dict[str, Any]], want_least: int
) -> None:
    spec = spec_of(pod_doc)
    st = state(node_doc, existing)
    # BalancedAllocation's share; it skips pods that request neither cpu nor memory (kubernetes#129138).
    skipped = not spec.request(CPU) and not spec.request(MEMORY)
    balanced = 0 if skipped else balanced_part(st.alloc_cpu, st.alloc_memory, *actual(spec, st))
    assert score(spec, st) - balanced == want_least


# --- balanced_allocation_test.go, TestNodeResourcesBalancedAllocation ---------------------------------
CPU_ONLY = pod(
    "cpu-only",
    containers=[
        container({"cpu": "1000m", "memory": "0"}, name="c0"),
        container({"cpu": "2000m", "memory": "0"}, name="c1"),
    ],
)
CPU_AND_MEMORY = pod(
    "cpu-and-memory",
    containers=[
        container({"cpu": "1000m", "memory": "2000"}, name="c0"),
        container({"cpu": "2000m", "memory": "3000"}, name="c1"),
    ],
)


def mnode(name: str, milli_cpu: int, memory: int, **extra: str) -> dict[str, Any]:
    """balanced_allocation_test's makeNode(name, milliCPU, memory, extended)."""
    return node(name, allocatable={"cpu": f"{milli_cpu}m", "memory": str(memory), "pods": "100", **extra})


# (name, requested pod, [(node, existing pods)], expected BalancedAllocation score per node)
BALANCED: list[tuple[str, dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]], list[int]]] = [
    (
        "nothing scheduled, resources requested, differently sized nodes",
        CPU_AND_MEMORY,
        [(mnode("node1", 4000, 10000), []), (mnode("node2", 6000, 10000), [])],
        [87, 100],
    ),
    (
        "resources requested, pods scheduled with resources",
        CPU_AND_MEMORY,
        [(mnode("node1", 10000, 20000), [CPU_ONLY]), (mnode("node2", 10000, 20000), [CPU_AND_MEMORY])],
        [82, 95],
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        CPU_AND_MEMORY,
        [(mnode("node1", 10000, 20000), [CPU_ONLY]), (mnode("node2", 10000, 50000), [CPU_AND_MEMORY])],
        [82, 80],
    ),
    (
        "requested resources at node capacity",
        CPU_ONLY,
        [(mnode("node1", 6000, 10000), [CPU_ONLY]), (mnode("node2", 6000, 10000), [CPU_AND_MEMORY])],
        [50, 75],
    ),
    (
        # Scored over cpu, memory and nvidia.com/gpu; the pod requests no GPU, so the GPU is skipped.
        "node without the scalar resource should skip the scalar resource",
        CPU_AND_MEMORY,
        [(mnode("node1", 3500, 40000, **{"nvidia.com/gpu": "8"}), []), (mnode("node2", 3500, 40000), [])],
        [63, 63],
    ),
    (
        "resources requested, pods scheduled with resources if PreScore not called",
        CPU_AND_MEMORY,
        [(mnode("node1", 10000, 20000), [CPU_ONLY]), (mnode("node2", 10000, 20000), [CPU_AND_MEMORY])],
        [82, 95],
    ),
]

BALANCED_CASES = [
    pytest.param(p, n, ex, want, id=f"{name} [{n['metadata']['name']}]")
    for name, p, nodes, wants in BALANCED
    for (n, ex), want in zip(nodes, wants, strict=True)
]


@pytest.mark.parametrize(("pod_doc", "node_doc", "existing", "want_balanced"), BALANCED_CASES)
def test_balanced_allocation(
    pod_doc: dict[str, Any], node_doc: dict[str, Any], existing: list[dict[str, Any]], want_balanced: int
) -> None:
    spec = spec_of(pod_doc)
    st = state(node_doc, existing)
    # The LeastAllocated part from kgpu's own non-zero requests, so this table pins BalancedAllocation only.
    least = least_part(
        st.alloc_cpu,
        st.alloc_memory,
        st.nonzero_cpu + spec.nonzero_cpu,
        st.nonzero_memory + spec.nonzero_memory,
    )
    assert score(spec, st) - least == want_balanced


@pytest.mark.parametrize(("pod_doc", "node_doc", "existing", "want_balanced"), BALANCED_CASES)
def test_balanced_formula_reproduces_upstream(
    pod_doc: dict[str, Any], node_doc: dict[str, Any], existing: list[dict[str, Any]], want_balanced: int
) -> None:
    # Self-check of the helper used to isolate LeastAllocated above.
    spec = spec_of(pod_doc)
    st = state(node_doc, existing)
    assert balanced_part(st.alloc_cpu, st.alloc_memory, *actual(spec, st)) == want_balanced


# balanced_allocation_test.go, "nothing scheduled, nothing requested, skip in PreScore": for a pod whose
# cpu and memory requests are all zero (best effort), BalancedAllocation's PreScore returns Skip, so the
# plugin adds nothing to any node (kubernetes PR #130260, fixing issue #129138). The total is LeastAllocated
# alone.
def test_balanced_allocation_skips_best_effort_pod() -> None:
    spec = spec_of(EMPTY)
    for n in (mnode("node1", 4000, 10000), mnode("node2", 4000, 10000)):
        st = state(n, [])
        assert score(spec, st) == least_part(
            st.alloc_cpu, st.alloc_memory, spec.nonzero_cpu, spec.nonzero_memory
        )


def test_best_effort_pod_ranking_ignores_balance() -> None:
    """Derived from the same Skip: a best-effort pod must not prefer a node for its cpu/memory balance.

    Both nodes give LeastAllocated 78 for a container without requests (100m / 200Mi non-zero): node1 runs
    2 cpu / 2Gi (balanced), node2 runs 3 cpu / 1Gi (unbalanced). Upstream totals tie at 78.
    """
    spec = spec_of(pod("best-effort", containers=[container(name="c")]))
    node1 = state(
        node("node1", allocatable={"cpu": "10", "memory": "10Gi", "pods": "110"}),
        [req_pod({"cpu": "2", "memory": "2Gi"})],
    )
    node2 = state(
        node("node2", allocatable={"cpu": "10", "memory": "10Gi", "pods": "110"}),
        [req_pod({"cpu": "3", "memory": "1Gi"})],
    )
    least1 = least_part(
        node1.alloc_cpu,
        node1.alloc_memory,
        node1.nonzero_cpu + spec.nonzero_cpu,
        node1.nonzero_memory + spec.nonzero_memory,
    )
    least2 = least_part(
        node2.alloc_cpu,
        node2.alloc_memory,
        node2.nonzero_cpu + spec.nonzero_cpu,
        node2.nonzero_memory + spec.nonzero_memory,
    )
    assert least1 == least2 == 78
    assert score(spec, node1) == score(spec, node2)


# --- pod_resources_test.go, TestGetNonZeroRequest (one container with these requests) --------------------
NONZERO: list[tuple[str, dict[str, str], int, int]] = [
    ("cpu_and_memory_not_found", {}, DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
    ("only_cpu_exist", {"cpu": "200m"}, 200, DEFAULT_MEMORY_REQUEST),
    ("only_memory_exist", {"memory": "400Mi"}, DEFAULT_MILLI_CPU_REQUEST, 400 * 1024 * 1024),
    ("cpu_memory_exist", {"cpu": "200m", "memory": "400Mi"}, 200, 400 * 1024 * 1024),
]


@pytest.mark.parametrize(
    ("requests", "want_cpu", "want_mem"), [c[1:] for c in NONZERO], ids=[c[0] for c in NONZERO]
)
def test_get_nonzero_request(requests: dict[str, str], want_cpu: int, want_mem: int) -> None:
    spec = spec_of(pod("pod", containers=[container(requests or None, name="c")]))
    assert (spec.nonzero_cpu, spec.nonzero_memory) == (want_cpu, want_mem)


def test_default_nonzero_requests() -> None:
    # pkg/scheduler/util: DefaultMilliCPURequest = 100, DefaultMemoryRequest = 200 MiB
    assert (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST) == (100, 200 * 1024 * 1024)


@pytest.mark.parametrize(
    ("requests", "want"),
    [({"cpu": "3000", "memory": "0"}, (3000000, 0)), ({"cpu": "0", "memory": "5000"}, (0, 5000))],
    ids=["explicit zero memory", "explicit zero cpu"],
)
def test_explicit_zero_request_is_not_defaulted(requests: dict[str, str], want: tuple[int, int]) -> None:
    """The non-zero default replaces a *missing* request only (component-helpers resource.applyNonMissing;
    GetNonzeroRequestForResource: "Override if un-set, but not if explicitly set to zero"). The
    least_allocated_test row "no resources requested, pods scheduled with resources" depends on it: its
    existing pods request ``memory: "0"`` and node1's memory score is 100."""
    spec = spec_of(pod("pod", containers=[container(requests, name="c")]))
    assert (spec.nonzero_cpu, spec.nonzero_memory) == want


# --- normalize_score_test.go, TestDefaultNormalizeScore -----------------------------------------------------
NORMALIZE = [
    (False, [1, 2, 3, 4], [25, 50, 75, 100]),
    (True, [1, 2, 3, 4], [75, 50, 25, 0]),
    (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
    (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
    (False, [1, 1, 1, 1], [100, 100, 100, 100]),
    (False, [1000, 1, 1, 1], [100, 0, 0, 0]),
    (True, [0, 1, 1, 1], [100, 0, 0, 0]),
]


@pytest.mark.parametrize(
    ("reverse", "raw", "want"), NORMALIZE, ids=[f"case_{i}" for i in range(len(NORMALIZE))]
)
def test_default_normalize_score(reverse: bool, raw: list[int], want: list[int]) -> None:
    import numpy as np

    assert default_normalize(raw, reverse) == want
    arr = np.array(raw, dtype=np.int64)
    assert default_normalize_array(arr, np.ones(len(raw), dtype=bool), reverse).tolist() == want


def test_default_normalize_all_zero() -> None:
    """maxCount 0: every score stays 0, or becomes MaxNodeScore when reversed (no division by zero)."""
    assert default_normalize([0, 0], False) == [0, 0]
    assert default_normalize([0, 0], True) == [100, 100]


# --- taint_toleration_test.go, TestTaintTolerationScore -----------------------------------------------------
PNS = "PreferNoSchedule"
TAINT_SCORE: list[tuple[str, list[dict[str, Any]], list[tuple[str, list[dict[str, Any]]]], list[int]]] = [
    (
        "node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
        [toleration("foo", "Equal", "bar", PNS)],
        [("nodeA", [taint("foo", "bar", PNS)]), ("nodeB", [taint("foo", "blah", PNS)])],
        [100, 0],
    ),
    (
        "the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many "
        "tolerable taints a node has",
        [toleration("cpu-type", "Equal", "arm64", PNS), toleration("disk-type", "Equal", "ssd", PNS)],
        [
            ("nodeA", []),
            ("nodeB", [taint("cpu-type", "arm64", PNS)]),
            ("nodeC", [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]),
        ],
        [100, 100, 100],
    ),
    (
        "the more intolerable taints a node has, the lower score it gets.",
        [toleration("foo", "Equal", "bar", PNS)],
        [
            ("nodeA", []),
            ("nodeB", [taint("cpu-type", "arm64", PNS)]),
            ("nodeC", [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]),
        ],
        [100, 50, 0],
    ),
    (
        "only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations "
        "priority function",
        [
            toleration("cpu-type", "Equal", "arm64", "NoSchedule"),
            toleration("disk-type", "Equal", "ssd", "NoSchedule"),
        ],
        [
            ("nodeA", []),
            ("nodeB", [taint("cpu-type", "arm64", "NoSchedule")]),
            ("nodeC", [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)]),
        ],
        [100, 100, 0],
    ),
    (
        "Default behaviour No taints and tolerations, lands on node with no taints",
        [],
        [("nodeA", []), ("nodeB", [taint("cpu-type", "arm64", PNS)])],
        [100, 0],
    ),
]


def _taint_case(
    tolerations: list[dict[str, Any]], nodes: list[tuple[str, list[dict[str, Any]]]]
) -> tuple[PodSpecInfo, list[Node]]:
    spec = spec_of(pod("pod1", tolerations=tolerations))
    return spec, [load_node(node(name, taints=taints, allocatable=SAME)) for name, taints in nodes]


SAME = {"cpu": "4", "memory": "8Gi", "pods": "110"}


@pytest.mark.parametrize(
    ("name", "tolerations", "nodes", "want"), TAINT_SCORE, ids=[c[0][:60] for c in TAINT_SCORE]
)
def test_taint_toleration_score(
    name: str,
    tolerations: list[dict[str, Any]],
    nodes: list[tuple[str, list[dict[str, Any]]]],
    want: list[int],
) -> None:
    spec, node_objs = _taint_case(tolerations, nodes)
    raw = [TAINT_TOLERATION.raw(spec, n) for n in node_objs]
    assert TAINT_TOLERATION.normalize(raw) == want


@pytest.mark.parametrize(
    ("name", "tolerations", "nodes", "want"), TAINT_SCORE, ids=[c[0][:60] for c in TAINT_SCORE]
)
def test_taint_toleration_score_places_the_pod(
    name: str,
    tolerations: list[dict[str, Any]],
    nodes: list[tuple[str, list[dict[str, Any]]]],
    want: list[int],
) -> None:
    """Through the scheduler, on otherwise identical nodes: the pod lands on the best-scored node (first name
    among ties), on the heap path and in array mode."""
    spec, node_objs = _taint_case(tolerations, nodes)
    expected = min(zip(want, node_objs, strict=True), key=lambda wn: (-wn[0], wn[1].name))[1].name
    for array_after in (10_000, 0):
        decision = Scheduler(node_objs, array_after=array_after).place(Pod("default", "pod1", spec))
        assert decision.node is not None and decision.node.name == expected


# --- node_affinity_test.go, TestNodeAffinityPriority --------------------------------------------------------
LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}


def _preferred(*terms: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": term(exprs)} for w, exprs in terms
            ]
        }
    }


AFFINITY1 = _preferred((2, [requirement("foo", "In", ["bar"])]))
AFFINITY2 = _preferred(
    (2, [requirement("foo", "In", ["bar"])]),
    (4, [requirement("key", "In", ["value"])]),
    (
        5,
        [
            requirement("foo", "In", ["bar"]),
            requirement("key", "In", ["value"]),
            requirement("az", "In", ["az1"]),
        ],
    ),
)
AFFINITY_SCORE: list[tuple[str, dict[str, Any] | None, list[tuple[str, dict[str, str]]], list[int]]] = [
    (
        "all nodes are same priority as NodeAffinity is nil",
        None,
        [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
        [0, 0, 0],
    ),
    (
        "no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' priority is zero",
        AFFINITY1,
        [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)],
        [0, 0, 0],
    ),
    (
        "only node1 matches the preferred scheduling requirements of pod",
        AFFINITY1,
        [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
        [100, 0, 0],
    ),
    (
        "all nodes matches the preferred scheduling requirements of pod but with different priorities",
        AFFINITY2,
        [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)],
        [18, 100, 36],
    ),
]


def _affinity_case(
    affinity: dict[str, Any] | None, nodes: list[tuple[str, dict[str, str]]]
) -> tuple[PodSpecInfo, list[Node]]:
    spec = spec_of(pod("pod1", affinity=affinity))
    return spec, [load_node(node(name, labels=labels, allocatable=SAME)) for name, labels in nodes]


@pytest.mark.parametrize(
    ("name", "affinity", "nodes", "want"), AFFINITY_SCORE, ids=[c[0][:60] for c in AFFINITY_SCORE]
)
def test_node_affinity_priority(
    name: str, affinity: dict[str, Any] | None, nodes: list[tuple[str, dict[str, str]]], want: list[int]
) -> None:
    spec, node_objs = _affinity_case(affinity, nodes)
    raw = [NODE_AFFINITY.raw(spec, n) for n in node_objs]
    assert NODE_AFFINITY.normalize(raw) == want


@pytest.mark.parametrize(
    ("name", "affinity", "nodes", "want"), AFFINITY_SCORE, ids=[c[0][:60] for c in AFFINITY_SCORE]
)
def test_node_affinity_priority_places_the_pod(
    name: str, affinity: dict[str, Any] | None, nodes: list[tuple[str, dict[str, str]]], want: list[int]
) -> None:
    spec, node_objs = _affinity_case(affinity, nodes)
    expected = min(zip(want, node_objs, strict=True), key=lambda wn: (-wn[0], wn[1].name))[1].name
    for array_after in (10_000, 0):
        decision = Scheduler(node_objs, array_after=array_after).place(Pod("default", "pod1", spec))
        assert decision.node is not None and decision.node.name == expected


def test_node_affinity_broken_preferred_term_is_bad_input() -> None:
    """TestNodeAffinityPriority "PreScore returns error when an incoming Pod has a broken affinity": the key
    'invalid key' fails label validation. The API server rejects such a pod at admission; kgpu rejects the
    file, naming the field."""
    doc = pod("pod1", affinity=_preferred((2, [requirement("invalid key", "In", ["bar"])])))
    with pytest.raises(InputError) as info:
        spec_of(doc)
    assert info.value.line().endswith(
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
        ".matchExpressions[0].key: 'invalid key': not a valid label key"
    ), info.value.line()


def test_default_profile_weights() -> None:
    """default_plugins.go (v1.34): the Score plugins of the default profile and their weights."""
    assert WEIGHTS == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert (TAINT_TOLERATION.weight, NODE_AFFINITY.weight) == (3, 2)

"""Reading Kueue's objects (kgpu.model.kueue): both API versions, the CRD's defaults, Kueue's request
arithmetic, its quantity printing, and bad input refused with the object and field named.

The builders below make objects shaped as ``kubectl get -o json`` prints them from a cluster running Kueue
v0.15.0: metadata with uid, resourceVersion and creationTimestamp, specs with the CRD defaults filled in,
Workloads named and owned as Kueue's Job integration creates them. The admission tests use them too.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from kgpu.errors import InputError
from kgpu.model.kueue import read_kueue
from kgpu.model.kueue_resources import quantity_string

GROUP = "kueue.x-k8s.io"
T0 = "2025-06-02T08:00:00Z"


def _uid(*parts: str) -> str:
    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def meta(
    kind: str, name: str, namespace: str | None = None, created: str = T0, **extra: Any
) -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": name,
        "uid": _uid(kind, namespace or "", name),
        "resourceVersion": "4127",
        "generation": 1,
        "creationTimestamp": created,
    }
    if namespace is not None:
        m["namespace"] = namespace
    m.update(extra)
    return m


def resource_flavor(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    taints: list[dict[str, str]] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    version: str = "v1beta2",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeLabels": labels if labels is not None else {"karpenter.k8s.aws/instance-gpu-name": name}
    }
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceFlavor",
        "metadata": meta("ResourceFlavor", name, finalizers=["kueue.x-k8s.io/resource-in-use"]),
        "spec": spec,
    }


def quota(name: str, nominal: Any, borrowing: Any = None, lending: Any = None) -> dict[str, Any]:
    q: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        q["borrowingLimit"] = borrowing
    if lending is not None:
        q["lendingLimit"] = lending
    return q


def flavor_quotas(name: str, *quotas: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "resources": list(quotas)}


def group(covered: list[str], *flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": list(flavors)}


def gpu_group(*flavors: tuple[str, int] | tuple[str, int, int | None, int | None]) -> dict[str, Any]:
    """One group covering cpu, memory and nvidia.com/gpu: 8 cpu and 64Gi per GPU of nominal quota."""
    out = []
    for f in flavors:
        name, gpus = f[0], f[1]
        borrowing = f[2] if len(f) > 2 else None
        lending = f[3] if len(f) > 3 else None
        out.append(
            flavor_quotas(
                name,
                quota("cpu", str(gpus * 8)),
                quota("memory", f"{gpus * 64}Gi"),
                quota("nvidia.com/gpu", gpus, borrowing, lending),
            )
        )
    return group(["cpu", "memory", "nvidia.com/gpu"], *out)


def cluster_queue(
    name: str,
    *groups: dict[str, Any],
    cohort: str | None = None,
    strategy: str = "BestEffortFIFO",
    within: str = "Never",
    reclaim: str = "Never",
    borrow_within: dict[str, Any] | None = None,
    fungibility: dict[str, str] | None = None,
    selector: dict[str, Any] | None = None,
    stop: str = "None",
    version: str = "v1beta2",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": list(groups),
        "queueingStrategy": strategy,
        "namespaceSelector": {} if selector is None else selector,
        "flavorFungibility": {
            "whenCanBorrow": "MayStopSearch",
            "whenCanPreempt": "TryNextFlavor",
            **(fungibility or {}),
        },
        "preemption": {
            "withinClusterQueue": within,
            "reclaimWithinCohort": reclaim,
            "borrowWithinCohort": borrow_within or {"policy": "Never"},
        },
        "stopPolicy": stop,
    }
    if cohort:
        spec["cohort" if version == "v1beta1" else "cohortName"] = cohort
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ClusterQueue",
        "metadata": meta("ClusterQueue", name, finalizers=["kueue.x-k8s.io/resource-in-use"]),
        "spec": spec,
    }


def cohort(name: str, parent: str = "", *groups: dict[str, Any], version: str = "v1beta2") -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": list(groups)} if groups else {}
    if parent:
        spec["parentName"] = parent
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "Cohort",
        "metadata": meta("Cohort", name),
        "spec": spec,
    }


def local_queue(
    namespace: str, name: str, cq: str, *, stop: str = "None", version: str = "v1beta2"
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "LocalQueue",
        "metadata": meta("LocalQueue", name, namespace),
        "spec": {"clusterQueue": cq, "stopPolicy": stop},
    }


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": meta("Namespace", name, labels={"kubernetes.io/metadata.name": name, **(labels or {})}),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def container(gpus: int = 0, cpu: str = "", memory: str = "", *, name: str = "trainer") -> dict[str, Any]:
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "resources": {"requests": requests, "limits": limits},
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }


def podset(
    count: int = 1,
    *containers: dict[str, Any],
    name: str = "main",
    min_count: int | None = None,
    tolerations: list[dict[str, str]] | None = None,
    node_selector: dict[str, str] | None = None,
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": list(containers) or [container(1, "8", "64Gi")],
        "restartPolicy": "Never",
    }
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    ps: dict[str, Any] = {"name": name, "count": count, "template": {"metadata": {}, "spec": spec}}
    if min_count is not None:
        ps["minCount"] = min_count
    return ps


def workload(
    namespace: str,
    job: str,
    queue: str,
    *podsets: dict[str, Any],
    priority: int | None = None,
    priority_class: str | None = None,
    created: str = T0,
    status: dict[str, Any] | None = None,
    version: str = "v1beta2",
) -> dict[str, Any]:
    """A Workload as Kueue's batch/v1 Job integration creates it (jobframework.GetWorkloadNameForOwnerWithGVK)."""
    job_uid = _uid("Job", namespace, job)
    suffix = hashlib.sha1(f"{job}{job_uid}".encode()).hexdigest()[:5]
    spec: dict[str, Any] = {"podSets": list(podsets) or [podset()], "queueName": queue, "active": True}
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        if version == "v1beta1":
            spec["priorityClassName"] = priority_class
            spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
        else:
            spec["priorityClassRef"] = {
                "group": GROUP,
                "kind": "WorkloadPriorityClass",
                "name": priority_class,
            }
    obj: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "Workload",
        "metadata": meta(
            "Workload",
            f"job-{job}-{suffix}",
            namespace,
            created,
            labels={"kueue.x-k8s.io/job-uid": job_uid},
            ownerReferences=[
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            finalizers=["kueue.x-k8s.io/resource-in-use"],
        ),
        "spec": spec,
    }
    if status:
        obj["status"] = status
    return obj


def admitted(cq: str, assignments: list[dict[str, Any]], at: str = T0) -> dict[str, Any]:
    """status of a Workload Kueue admitted (SetQuotaReservation + SyncAdmittedCondition)."""
    return {
        "admission": {"clusterQueue": cq, "podSetAssignments": assignments},
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {cq}",
                "lastTransitionTime": at,
                "observedGeneration": 1,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": at,
                "observedGeneration": 1,
            },
        ],
    }


def assignment(flavor: str, count: int, gpus_per_pod: int = 1, name: str = "main") -> dict[str, Any]:
    """podSetAssignment for pods of container(gpus, 8 cpu per GPU, 64Gi per GPU)."""
    return {
        "name": name,
        "flavors": {"cpu": flavor, "memory": flavor, "nvidia.com/gpu": flavor},
        "resourceUsage": {
            "cpu": str(8 * gpus_per_pod * count),
            "memory": f"{64 * gpus_per_pod * count}Gi",
            "nvidia.com/gpu": str(gpus_per_pod * count),
        },
        "count": count,
    }


def gpu_pods(count: int, gpus: int) -> dict[str, Any]:
    return podset(count, container(gpus, str(8 * gpus), f"{64 * gpus}Gi"))


# --- tests ---------------------------------------------------------------------------------------------


def test_both_versions_read_the_same_cluster_queue() -> None:
    """v1beta1 spells the cohort spec.cohort, v1beta2 spec.cohortName; both mean the same ClusterQueue."""
    groups = gpu_group(("a100", 8, 4))
    v1 = read_kueue([cluster_queue("team-a", groups, cohort="org", version="v1beta1")], "v1.json")
    v2 = read_kueue([cluster_queue("team-a", groups, cohort="org", version="v1beta2")], "v2.json")
    assert v1.cluster_queues == v2.cluster_queues
    cq = v2.cluster_queues["team-a"]
    assert cq.cohort == "org"
    (rg,) = cq.resource_groups
    assert rg.covered == ("cpu", "memory", "nvidia.com/gpu")
    assert dict(rg.flavors[0].resources)["nvidia.com/gpu"].borrowing_limit == 4
    assert dict(rg.flavors[0].resources)["cpu"].nominal == 64_000  # millicores, as Kueue counts cpu
    assert dict(rg.flavors[0].resources)["memory"].nominal == 512 * 2**30


def test_crd_defaults_apply_to_a_hand_written_cluster_queue() -> None:
    """An object without the defaulted fields (a file, not read back from the API server) gets the CRD's."""
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {"resourceGroups": [gpu_group(("a100", 8))]},
    }
    cq = read_kueue([doc], "cq.yaml").cluster_queues["team-a"]
    assert cq.queueing_strategy == "BestEffortFIFO"
    assert (cq.preemption.within_cluster_queue, cq.preemption.reclaim_within_cohort) == ("Never", "Never")
    assert cq.preemption.borrow_within_cohort == "Never"
    assert (cq.fungibility.when_can_borrow, cq.fungibility.when_can_preempt) == (
        "MayStopSearch",
        "TryNextFlavor",
    )
    assert cq.stop_policy == "None"
    assert cq.namespace_selector is None  # absent: selects no namespace (LabelSelectorAsSelector(nil))


def test_workload_requests_follow_pod_requests_and_limits_as_requests() -> None:
    """PodRequests after UseLimitsAsMissingRequestsInPod: max(containers, init), sidecars added, overhead."""
    init = [
        {"name": "fetch", "resources": {"requests": {"cpu": "12"}}},
        {
            "name": "proxy",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
    ]
    ps = podset(
        3,
        {"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"}}},
        {"name": "logger", "resources": {"requests": {"cpu": "500m", "ephemeral-storage": "0"}}},
        init=init,
        overhead={"cpu": "250m"},
    )
    k = read_kueue([workload("team-a", "train", "lq", ps)], "wl.json")
    (wl,) = k.workloads
    (main,) = wl.podsets
    # containers 8.5 cpu + sidecar 1 = 9.5; init "fetch" 12 + sidecar before it (none) = 12 -> 12; + 0.25 overhead
    assert main.requests == {
        "cpu": 12_250,
        "memory": 33 * 2**30,
        "nvidia.com/gpu": 2,
        "ephemeral-storage": 0,
    }
    assert main.total() == {"cpu": 36_750, "memory": 99 * 2**30, "nvidia.com/gpu": 6, "ephemeral-storage": 0}
    assert wl.name.startswith("job-train-") and wl.job_uid


def test_priority_comes_from_spec_priority_in_both_versions() -> None:
    v1 = workload("ns", "a", "lq", priority=1000, priority_class="high", version="v1beta1")
    v2 = workload("ns", "a", "lq", priority=1000, priority_class="high")
    assert [w.priority for w in read_kueue([v1], "x").workloads] == [1000]
    assert [w.priority for w in read_kueue([v2], "x").workloads] == [1000]


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("cpu", 4000, "4"),
        ("cpu", 1500, "1500m"),
        ("cpu", 250, "250m"),
        ("cpu", 120_000, "120"),
        ("memory", 4 * 2**30, "4Gi"),
        ("memory", 10**9, "1G"),
        ("memory", 512, "512"),
        ("memory", 128_000, "125Ki"),
        ("memory", 100_000, "100k"),
        ("nvidia.com/gpu", 4, "4"),
        ("nvidia.com/gpu", 4000, "4k"),
        ("nvidia.com/gpu", 0, "0"),
        ("hugepages-2Mi", 2**21, "2Mi"),
        ("ephemeral-storage", 3 * 2**40, "3Ti"),
    ],
)
def test_quantities_print_as_kueue_prints_them(name: str, value: int, text: str) -> None:
    """resources.ResourceQuantityString over apimachinery's canonical forms."""
    assert quantity_string(name, value) == text


def test_missing_flavor_and_cohort_cycle_are_not_input_errors() -> None:
    """Kueue accepts both and reports on them (the ClusterQueue is inactive), so they are read."""
    k = read_kueue(
        [
            cluster_queue("team-a", gpu_group(("h100", 8)), cohort="a"),
            cohort("a", "b"),
            cohort("b", "a"),
        ],
        "x.json",
    )
    assert k.cluster_queues["team-a"].flavor_names == ("h100",)
    assert k.cohorts["a"].parent == "b" and k.cohorts["b"].parent == "a"


def _error(objs: list[dict[str, Any]]) -> str:
    with pytest.raises(InputError) as exc:
        read_kueue(objs, "queues.yaml")
    return exc.value.line()


def test_a_quota_that_is_not_a_quantity_names_object_and_field() -> None:
    cq = cluster_queue(
        "team-a", group(["nvidia.com/gpu"], flavor_quotas("a100", quota("nvidia.com/gpu", "8GPU")))
    )
    line = _error([cq])
    assert line.startswith(
        "queues.yaml: ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    )
    assert "invalid quantity '8GPU'" in line


def test_ten_thousand_flavors_are_refused() -> None:
    flavors = [flavor_quotas(f"f{i}", quota("nvidia.com/gpu", 1)) for i in range(10_000)]
    line = _error([cluster_queue("team-a", group(["nvidia.com/gpu"], *flavors))])
    assert "ClusterQueue team-a: spec.resourceGroups[0].flavors" in line
    assert "must have at most 64 items" in line


def test_more_than_256_flavors_across_groups_are_refused() -> None:
    groups = [
        group(
            [f"example.com/r{g}"],
            *(flavor_quotas(f"f{g}-{i}", quota(f"example.com/r{g}", 1)) for i in range(60)),
        )
        for g in range(5)
    ]
    line = _error([cluster_queue("team-a", *groups)])
    assert "total number of flavors across all resourceGroups must be ≤ 256, got 300" in line


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        (
            cluster_queue("a", gpu_group(("a100", 8, 4))),
            "resources[2].borrowingLimit",
            "must be nil when cohort is empty",
        ),
        (
            cluster_queue("a", gpu_group(("a100", 8, None, 9)), cohort="org"),
            "resources[2].lendingLimit",
            "less than or equal to the nominalQuota",
        ),
        (
            cluster_queue(
                "a", gpu_group(("a100", 8)), reclaim="Never", borrow_within={"policy": "LowerPriority"}
            ),
            "spec.preemption",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ),
        (
            cluster_queue("a", gpu_group(("a100", 8)), strategy="FIFO"),
            "spec.queueingStrategy",
            "Unsupported value",
        ),
        (
            cluster_queue("a", group(["cpu", "nvidia.com/gpu"], flavor_quotas("a100", quota("cpu", 8)))),
            "spec.resourceGroups[0]",
            "same number of resources as the coveredResources",
        ),
        (
            cluster_queue("a", group(["nvidia.com/gpu"], flavor_quotas("a100", quota("cpu", 8)))),
            "resources[0].name",
            "must match the name in coveredResources",
        ),
        (
            cluster_queue("a", gpu_group(("a100", 8)), gpu_group(("h100", 8))),
            "coveredResources[0]",
            "Duplicate value",
        ),
        (
            cluster_queue("a", gpu_group(("a100", 8)), fungibility={"preference": "BorrowingOverPreemption"}),
            "flavorFungibility.preference",
            "both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        ),
    ],
)
def test_cluster_queues_the_api_server_refuses(doc: dict[str, Any], field: str, words: str) -> None:
    line = _error([doc])
    assert "ClusterQueue a: " in line and field in line and words in line


def test_workloads_the_api_server_refuses() -> None:
    huge = workload("ns", "big", "lq", podset(2**31))
    assert "spec.podSets[0].count" in _error([huge])
    overflow = workload("ns", "wide", "lq", podset(2**31 - 1, container(0, "9223372036854775807m")))
    line = _error([overflow])
    assert "spec.podSets[0].count" in line and "int64" in line
    pods = workload("ns", "p", "lq", podset(1, {"name": "c", "resources": {"requests": {"pods": "1"}}}))
    assert "the key is reserved for internal kueue use" in _error([pods])
    unprioritised = workload("ns", "q", "lq", priority_class="high")
    assert "priority should not be nil when priorityClassRef is set" in _error([unprioritised])
    nine = workload("ns", "n", "lq", *(podset(1, name=f"ps{i}") for i in range(9)))
    assert "spec.podSets" in _error([nine]) and "at most 8" in _error([nine])


def test_versions_kueue_does_not_serve_and_duplicates_are_refused() -> None:
    old = cohort("org")
    old["apiVersion"] = "kueue.x-k8s.io/v1alpha1"
    assert "is not served by Kueue v0.15.0" in _error([old])
    assert "a second ClusterQueue" in _error([cluster_queue("a", gpu_group(("a100", 8)))] * 2)


def test_other_objects_are_ignored_and_lists_flattened() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
            resource_flavor("a100"),
            namespace("team-a", {"team": "a"}),
        ],
    }
    k = read_kueue([doc], "list.json")
    assert set(k.flavors) == {"a100"}
    assert k.namespaces == {"team-a": {"kubernetes.io/metadata.name": "team-a", "team": "a"}}


def test_a_quota_without_nominal_quota_is_the_missing_field_not_a_limit_error() -> None:
    """A typo'd nominalQuota: the CRD requires the field; the error names it and the unknown spelling."""
    cq = cluster_queue("team-a", gpu_group(("a100", 8)))
    res = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    res["nominalQuta"] = res.pop("nominalQuota")
    message = _error([resource_flavor("a100"), cq])
    assert "resources[0].nominalQuota" in message and "Required value" in message
    assert "unknown field 'nominalQuta'" in message

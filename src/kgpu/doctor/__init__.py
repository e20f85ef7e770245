"""Checks over a cluster state: every known way GPU workloads on Kubernetes go wrong, with the fix.

``doctor_report(snapshot_doc)`` takes the parsed JSON of ``kgpu snapshot`` (or of ``kubectl get ... -o
json``), builds a :class:`~kgpu.doctor.state.ClusterState` and runs every check. Checks are small functions
``check(state) -> Iterator[Finding]``, one module per area: the device plugin, GPU nodes, pending GPU pods
(through ``kgpu.sim``), GPU workloads, CUDA vs driver, monitoring. Pure: no I/O, no cluster client; the
live path fetches the same document and calls the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kgpu.doctor import (
    cuda,
    cuda_arch,
    deviceplugin,
    dra,
    image_cache,
    monitoring,
    nodes,
    pending,
    queues,
    sharing,
    tke_cuda,
    visible_devices,
    workloads,
)
from kgpu.doctor.findings import ERROR, INFO, SEVERITIES, WARNING, Finding, Group, Report, group_findings
from kgpu.doctor.reading import cluster_state
from kgpu.doctor.state import ClusterState

if TYPE_CHECKING:  # pydantic's models: imported where a profile is read
    from kgpu.model.profile import Profile

Check = Callable[[ClusterState], Iterable[Finding]]

# Every check id, by area, in the order docs/doctor.md lists them.
CHECK_IDS: dict[str, tuple[str, ...]] = {
    "device plugin": tuple(deviceplugin.CHECKS),
    "GPU nodes": tuple(nodes.CHECKS),
    "pending GPU pods": tuple(pending.CHECKS),
    "workloads": tuple(workloads.CHECKS),
    "CUDA vs driver": tuple(cuda.CHECKS) + tuple(tke_cuda.CHECKS) + tuple(cuda_arch.CHECKS),
    "visible devices": tuple(visible_devices.CHECKS),
    "monitoring": tuple(monitoring.CHECKS),
    "shared GPUs": tuple(sharing.CHECKS),
    "TKE image cache": tuple(image_cache.CHECKS),
    "DRA": tuple(dra.CHECKS),
    "Kueue": tuple(queues.CHECKS),
}


def all_check_ids() -> tuple[str, ...]:
    """Every check id once, in the order of :data:`CHECK_IDS`."""
    return tuple(dict.fromkeys(c for ids in CHECK_IDS.values() for c in ids))


def _functions() -> list[Check]:
    out: list[Check] = []
    for module in (
        deviceplugin, nodes, workloads, cuda, tke_cuda, cuda_arch, visible_devices, monitoring, sharing, image_cache,
        dra, queues,
    ):
        for fn in module.CHECKS.values():
            if fn not in out:
                out.append(fn)
    return out


def run_checks(state: ClusterState, profile: Profile | None = None) -> Report:
    findings: list[Finding] = []
    for fn in _functions():
        findings.extend(fn(state))
    findings.extend(pending.check_pending(state, profile))
    gpu_nodes = state.gpu_nodes
    counts = {
        "nodes": len(state.nodes),
        "gpu_nodes": len(gpu_nodes),
        "pods": len(state.pods),
        "pending_gpu_pods": len(pending.pending_gpu_pods(state)),
    }
    report = Report(findings, counts, state.source)
    report.extra = {"idle_gpu_cost_per_hour": nodes.idle_cost(state)}
    return report


def doctor_report(
    snapshot_doc: dict[str, Any], profile: Profile | None = None, *, source: str = "snapshot"
) -> Report:
    """All findings for a snapshot document; bad input raises :class:`kgpu.errors.InputError`."""
    return run_checks(cluster_state(snapshot_doc, source), profile)


__all__ = [
    "CHECK_IDS",
    "ERROR",
    "INFO",
    "SEVERITIES",
    "WARNING",
    "ClusterState",
    "Finding",
    "Group",
    "Report",
    "all_check_ids",
    "cluster_state",
    "doctor_report",
    "group_findings",
    "run_checks",
]

"""GPU monitoring: an exporter pod on every GPU node, and Ready.

Exporters recognised by image or labels: kgpu's own (``kgpu exporter``, label
``app.kubernetes.io/name: kgpu-exporter``), utkuozdemir/nvidia_gpu_exporter and NVIDIA's dcgm-exporter. The
on-prem guide runs nvidia_gpu_exporter as a host process scraped through ``static_configs``; kgpu cannot see
that from the API, so a missing exporter pod is a warning, not an error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kgpu.doctor.common import names
from kgpu.doctor.deviceplugin import not_ready_detail
from kgpu.doctor.findings import WARNING, Finding
from kgpu.doctor.state import ClusterState, DaemonSetInfo, PodInfo

EXPORTER_IMAGES = ("nvidia_gpu_exporter", "nvidia-gpu-exporter", "dcgm-exporter")
EXPORTER_NAMES = (
    "kgpu-exporter",
    "dcgm-exporter",
    "nvidia-dcgm-exporter",
    "nvidia-gpu-exporter",
    "nvidia_gpu_exporter",
)
FIX = "kgpu render --profile kgpu.yaml --target monitoring | kubectl apply -f -"


def _exporter_marks(labels: Mapping[str, Any], images: list[str]) -> bool:
    if labels.get("app.kubernetes.io/name") in EXPORTER_NAMES or labels.get("app") in EXPORTER_NAMES:
        return True
    return any(any(mark in image for mark in EXPORTER_IMAGES) for image in images)


def is_exporter(pod: PodInfo) -> bool:
    return _exporter_marks(pod.labels, pod.images)


def exporter_daemonsets(state: ClusterState) -> list[DaemonSetInfo]:
    """DaemonSets whose template is an exporter's (by the same labels and images as its pods)."""
    out = []
    for ds in state.daemonsets:
        tmpl = (ds.raw.get("spec") or {}).get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") if isinstance(tmpl, dict) else None
        labels = labels if isinstance(labels, dict) else {}
        if _exporter_marks(labels, ds.images):
            out.append(ds)
    return out


def check_exporters(state: ClusterState) -> Iterator[Finding]:
    gpu_nodes = [n for n in state.gpu_nodes if not n.virtual]
    if not gpu_nodes:
        return
    exporters = [p for p in state.pods if not p.terminated and p.node_name and is_exporter(p)]
    gpu_names = {n.name for n in gpu_nodes}
    covered = {p.node_name for p in exporters if p.node_name in gpu_names}
    elsewhere = sorted({p.node_name for p in exporters} - gpu_names)
    missing = [n.name for n in gpu_nodes if n.name not in covered]
    dss = exporter_daemonsets(state)
    tolerations = (
        f"kubectl get node {missing[0] if missing else ''} -o jsonpath='{{.spec.taints}}'"
        "   # compare with the exporter DaemonSet's tolerations and node selector"
    )
    if missing and not covered:
        # the finding names an object that exists: the exporter DaemonSet that misses the GPU nodes, or the
        # first GPU node when there is none
        ref = dss[0].ref if dss else f"Node/{missing[0]}"
        if elsewhere:
            what = (
                f"GPU exporter pods run only on node(s) that have no GPU ({names(elsewhere, 3)}), none on the "
                f"{len(gpu_nodes)} GPU node(s): an exporter reads the GPUs of its own node, so no GPU is scraped"
            )
        else:
            what = (
                f"no GPU exporter pod (kgpu exporter, nvidia_gpu_exporter, dcgm-exporter) on any of the "
                f"{len(gpu_nodes)} GPU node(s): GPU utilisation, memory, temperature and XID errors are not "
                "scraped (an exporter run as a host process, as on-prem guides do, is invisible to kgpu)"
            )
        fix = FIX if not dss else f"{tolerations}\n# or: {FIX}"
        yield Finding("gpu-exporter-missing", WARNING, ref, what, fix)
    elif missing:
        for name in missing:
            yield Finding(
                "gpu-exporter-missing",
                WARNING,
                f"Node/{name}",
                f"GPU node runs no GPU exporter pod while {len(covered)} other GPU node(s) do: its exporter "
                "DaemonSet does not tolerate the node's taints or does not select it",
                f"kubectl get node {name} -o jsonpath='{{.spec.taints}}'   # compare with the exporter DaemonSet's tolerations\n{FIX}",
            )
    for pod in exporters:
        if not pod.ready:
            yield Finding(
                "gpu-exporter-not-ready",
                WARNING,
                pod.ref,
                f"GPU exporter pod on node {pod.node_name} is not Ready ({not_ready_detail(pod)}): that node's "
                "GPU metrics are missing",
                f"kubectl -n {pod.namespace} logs {pod.name}",
            )


CHECKS = {"gpu-exporter-missing": check_exporters, "gpu-exporter-not-ready": check_exporters}

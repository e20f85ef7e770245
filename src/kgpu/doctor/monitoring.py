"""GPU monitoring: an exporter pod on every GPU node, and Ready.

Exporters recognised by image or labels: kgpu's own (``kgpu exporter``, label
``app.kubernetes.io/name: kgpu-exporter``), utkuozdemir/nvidia_gpu_exporter and NVIDIA's dcgm-exporter. The
on-prem guide runs nvidia_gpu_exporter as a host process scraped through ``static_configs``; kgpu cannot see
that from the API, so a missing exporter pod is a warning, not an error.
"""

from __future__ import annotations

from collections.abc import Iterator

from kgpu.doctor.deviceplugin import not_ready_detail
from kgpu.doctor.findings import WARNING, Finding
from kgpu.doctor.state import ClusterState, PodInfo

EXPORTER_IMAGES = ("nvidia_gpu_exporter", "nvidia-gpu-exporter", "dcgm-exporter")
EXPORTER_NAMES = (
    "kgpu-exporter",
    "dcgm-exporter",
    "nvidia-dcgm-exporter",
    "nvidia-gpu-exporter",
    "nvidia_gpu_exporter",
)
FIX = "kgpu render --profile kgpu.yaml --target monitoring | kubectl apply -f -"


def is_exporter(pod: PodInfo) -> bool:
    if pod.labels.get("app.kubernetes.io/name") in EXPORTER_NAMES or pod.labels.get("app") in EXPORTER_NAMES:
        return True
    return any(any(mark in image for mark in EXPORTER_IMAGES) for image in pod.images)


def check_exporters(state: ClusterState) -> Iterator[Finding]:
    gpu_nodes = [n for n in state.gpu_nodes if not n.virtual]
    if not gpu_nodes:
        return
    exporters = [p for p in state.pods if not p.terminated and p.node_name and is_exporter(p)]
    covered = {p.node_name for p in exporters}
    missing = [n.name for n in gpu_nodes if n.name not in covered]
    if missing and not covered:
        yield Finding(
            "gpu-exporter-missing",
            WARNING,
            "DaemonSet/kgpu-system/kgpu-exporter",
            f"no GPU exporter pod (kgpu exporter, nvidia_gpu_exporter, dcgm-exporter) on any of the "
            f"{len(gpu_nodes)} GPU node(s): GPU utilisation, memory, temperature and XID errors are not "
            "scraped (an exporter run as a host process, as on-prem guides do, is invisible to kgpu)",
            FIX,
        )
    elif missing:
        for name in missing:
            yield Finding(
                "gpu-exporter-missing",
                WARNING,
                f"Node/{name}",
                "GPU node runs no GPU exporter pod while other GPU nodes do: its exporter DaemonSet does not "
                "tolerate the node's taints or does not select it",
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
